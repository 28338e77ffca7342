"""SGLang's tree-verification layout read as tree rounds, replayed on `verify_tree`.

The adapter (examples/engines/sglang/layout.py) needs no torch: SGLang's seven fixed cases,
restated in its terms, must come out of `verify_tree` (deterministic scheme) as SGLang's own
test asserts; the Triton port's recorded outcomes must differ from the spec exactly where
the port emits a token of probability 0; and the coin-to-uniform map must decide as the
kernel's ``coin < cdf`` does on any coin, which a map that ignores the strict comparison
does not.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from engines.sglang import layout  # noqa: E402

from specaccept import TreeScheme, verify_tree  # noqa: E402

CASES = layout.load_fixed_cases()


def _spec(request: layout.KernelRequest, max_depth: int, *, strict: bool
          ) -> tuple[list[int], list[int], layout.TreeRound]:
    """`verify_tree`'s verdict on the request: (accepted slots, emitted tokens, tree)."""
    tree = layout.tree_round(request, max_depth, strict=strict)
    sample = [layout._float32(request.final_coin)] * len(tree.sample)
    verdict = verify_tree(TreeScheme.DETERMINISTIC, tree.parents, mx.array(tree.target_rows),
                          None, tree.node_tokens, mx.array(tree.accept), mx.array(sample))
    count = int(np.array(verdict.num_accepted))
    nodes: list[int] = np.array(verdict.accepted_nodes).astype(int).tolist()[:count]
    emitted = [tree.node_tokens[n] for n in nodes] + [int(np.array(verdict.next_token))]
    return [tree.slots[n + 1] for n in nodes], emitted, tree


def test_the_seven_cases_are_sglangs_seven() -> None:
    assert [c.name for c in CASES] == [
        "six-slot-trees-thresholds-1-1", "six-slot-trees-thresholds-0-0",
        "zero-mass-child-threshold-0", "zero-mass-child-threshold-1", "interior-cdf-boundary",
        "lower-endpoint", "upper-endpoint"]
    assert sum(len(c.requests) for c in CASES) == 9


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_verify_tree_gives_what_sglang_asserts(case: layout.FixedCase) -> None:
    for request, slots, tokens in zip(case.requests, case.expected_accepted,
                                      case.expected_tokens, strict=True):
        accepted, emitted, _ = _spec(request, case.max_depth, strict=True)
        assert accepted == slots
        assert emitted[: len(tokens)] == tokens


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sglangs_cuda_kernel_did_what_verify_tree_does(case: layout.FixedCase) -> None:
    """Its recorded outcomes (an H100 run) are `verify_tree`'s, whole paths and tokens."""
    for i, request in enumerate(case.requests):
        accepted, emitted, _ = _spec(request, case.max_depth, strict=True)
        assert (case.cuda_accepted[i], case.cuda_tokens[i]) == (accepted, emitted)


def test_the_port_departs_from_the_spec_exactly_where_it_emits_a_zero_mass_token() -> None:
    """Under the port's own comparison (``coin <= cdf``) the spec agrees with it except on
    three requests, and on each of those the port emits a token of probability 0."""
    departures = []
    for case in CASES:
        for i, request in enumerate(case.requests):
            accepted, emitted, _ = _spec(request, case.max_depth, strict=False)
            port_slots, port_tokens = case.port_accepted[i], case.port_tokens[i]
            if (accepted, emitted) == (port_slots, port_tokens):
                continue
            rows = [0, *port_slots]
            zero_mass = [t for row, t in zip(rows, port_tokens, strict=False)
                         if request.target_rows[row][t] == 0.0]
            departures.append((case.name, i, zero_mass))
    assert departures == [("six-slot-trees-thresholds-0-0", 0, [1, 2]),
                          ("zero-mass-child-threshold-0", 0, [2]),
                          ("zero-mass-child-threshold-1", 0, [2])]


def test_the_port_fails_four_of_sglangs_seven_cases() -> None:
    failed = [c.name for c in CASES if any(
        (c.port_accepted[i], c.port_tokens[i][: len(c.expected_tokens[i])])
        != (c.expected_accepted[i], c.expected_tokens[i]) for i in range(len(c.requests)))]
    assert failed == ["six-slot-trees-thresholds-0-0", "zero-mass-child-threshold-0",
                      "zero-mass-child-threshold-1", "interior-cdf-boundary"]


def test_the_adapter_keeps_the_kernels_sibling_order() -> None:
    # The second request of SGLang's trees links the root's children as slot 4, then slot 1.
    request = CASES[0].requests[1]
    tree = layout.tree_round(request, CASES[0].max_depth, strict=True)
    assert tree.slots == [0, 4, 1, 5, 2, 3]
    assert tree.parents == [-1, -1, 0, 1, 3]
    assert tree.node_tokens == [11, 8, 12, 9, 10]


def test_request_from_parents_reads_back_unchanged() -> None:
    parents, tokens = [-1, -1, 0, 0, 2], [5, 6, 7, 8, 9]
    rows = [[0.25, 0.75] + [0.0] * 8] * 6
    request = layout.request_from_parents(parents, tokens, 3, rows, [0.5] * 6, 0.5)
    tree = layout.tree_round(request, 8, strict=True)
    assert (tree.parents, tree.node_tokens, tree.slots) == (parents, tokens, list(range(6)))
    assert layout.tree_round(request, 1, strict=True).parents == [-1, -1]  # depth cut at 1


def _kernel_rule(p: list[float], tokens: list[int], coin: float) -> int:
    """The CUDA kernel's decision at one row, from SGLang's description: the first child
    with ``p > 0`` and ``coin < p(x_0) + ... + p(x_j)`` (float32 sums), or -1."""
    total = np.float32(0.0)
    for j, token in enumerate(tokens):
        total = np.float32(total + np.float32(p[token]))
        if p[token] > 0 and np.float32(coin) < total:
            return j
    return -1


def _spec_rule(p: list[float], tokens: list[int], coin: float, *, strict: bool) -> int:
    parents = [-1] * len(tokens)
    rows = [p] + [[1.0] + [0.0] * (len(p) - 1)] * len(tokens)
    accept = layout.accept_uniforms(parents, tokens, rows, [coin] + [0.0] * len(tokens),
                                    strict=strict)
    verdict = verify_tree(TreeScheme.DETERMINISTIC, parents, mx.array(rows), None, tokens,
                          mx.array(accept), mx.zeros((2,)))
    return int(np.array(verdict.accepted_nodes)[0])


def test_the_coin_map_decides_as_the_kernel_on_grid_coins_and_ties() -> None:
    rng = np.random.default_rng(3)
    ties = 0
    for _ in range(300):
        p = (rng.multinomial(8, [1 / 6] * 6) / 8.0).tolist()  # dyadic masses, zeros included
        tokens = rng.permutation(6)[: int(rng.integers(1, 5))].tolist()
        cdf = np.cumsum([p[t] for t in tokens]).tolist()
        coins = [float(rng.random(dtype=np.float32)), *(c for c in cdf if c < 1)]
        for coin in coins:
            ties += coin in cdf
            assert _spec_rule(p, tokens, coin, strict=True) == _kernel_rule(p, tokens, coin)
    assert ties > 50


def test_a_map_blind_to_the_strict_comparison_is_caught_at_a_tie() -> None:
    p, tokens, coin = [0.0, 0.25, 0.0, 0.75], [1, 2, 3], 0.25
    assert _kernel_rule(p, tokens, coin) == 2
    assert _spec_rule(p, tokens, coin, strict=True) == 2
    assert _spec_rule(p, tokens, coin, strict=False) == 0


def _trace_text(requests: list[layout.KernelRequest], *, drawn: bool) -> str:
    """The recorder's trace of `requests` (V = 50, `verify_tree`'s verdicts as the kernel's
    outcomes), written row by row (`_write_round`) or from float32 arrays as the GPU path
    writes them (`write_drawn_round`)."""
    import io

    from engines.sglang import record

    import specaccept_trace

    text = io.StringIO()
    with specaccept_trace.TraceWriter(text, vocab_size=50) as writer:
        run = writer.start_run("r")
        for request in requests:
            accepted, emitted, tree = _spec(request, 4, strict=True)
            if drawn:
                rows = np.array(request.target_rows, dtype=np.float32)
                record.write_drawn_round(run, tree.parents, request, rows, 4,
                                         (accepted, emitted), True, {})
            else:
                record._write_round(run, request, 4, (accepted, emitted), True, {})
    return text.getvalue()


def test_drawn_rows_are_written_as_the_row_by_row_path_writes_them() -> None:
    from engines.sglang import record

    rng = np.random.default_rng(11)
    requests = [record.random_request(rng, 50, 12, 4) for _ in range(40)]
    row_by_row = _trace_text(requests, drawn=False)
    assert row_by_row == _trace_text(requests, drawn=True)
    assert row_by_row.count('"tree-round"') == 40


def test_drawn_rows_refuse_a_tree_not_numbered_level_by_level() -> None:
    import io

    from engines.sglang import record

    import specaccept_trace

    request = layout.request_from_parents([-1, -1, 1, 0], [1, 2, 3, 4], 0,
                                          [[1.0, 0.0, 0.0, 0.0, 0.0]] * 5, [0.5] * 5, 0.5)
    rows = np.array(request.target_rows, dtype=np.float32)
    run = specaccept_trace.TraceWriter(io.StringIO(), vocab_size=5).start_run("r")
    with pytest.raises(ValueError, match="level by level"):
        record.write_drawn_round(run, [-1, -1, 1, 0], request, rows, 4, ([], [0]), True, {})
    with pytest.raises(ValueError, match="deeper than max_depth"):
        record.write_drawn_round(run, [-1, 0, 1], request, rows, 2, ([], [0]), True, {})


def test_final_draws_counts_a_moved_draw_and_its_gap(tmp_path: Path) -> None:
    """final_draws.py finds no difference on the spec's own verdicts, and one where a round's
    token after the path is moved to its neighbour of positive mass, with a gap > 0."""
    import base64
    import json

    from engines.sglang import final_draws, record

    rng = np.random.default_rng(5)
    requests = [record.random_request(rng, 50, 12, 4) for _ in range(30)]
    text = _trace_text(requests, drawn=True)
    clean = tmp_path / "clean.jsonl"
    clean.write_text(text, "utf-8")
    summary = final_draws.summarise(clean)
    assert (summary["rounds"], summary["agree"], summary["draw_differs"]) == (30, 30, 0)
    assert summary["engine_is_exact"] == summary["same_path"] == 30

    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if '"tree-round"' in line)
    record_ = json.loads(lines[index])
    rows = np.frombuffer(base64.b64decode(record_["target"]["probs_b64"]),
                         dtype="<f4").reshape(-1, 50)
    row = rows[0 if not record_["path"] else record_["path"][-1] + 1]
    kids = {t for n, t in enumerate(record_["node_tokens"])
            if record_["parents"][n] == (record_["path"][-1] if record_["path"] else -1)}
    token = record_["emitted"][-1]
    record_["emitted"][-1] = next(t for t in range(50)
                                  if t != token and row[t] > 0 and t not in kids)
    lines[index] = json.dumps(record_)
    moved = tmp_path / "moved.jsonl"
    moved.write_text("\n".join(lines) + "\n", "utf-8")
    summary = final_draws.summarise(moved)
    assert (summary["agree"], summary["draw_differs"]) == (29, 1)
    assert summary["engine_is_exact"] == 29 and summary["max_engine_gap"] > 0
