"""Reliability of the tree path and the kit: each test reproduces a hang, a crash or a
verdict the kit got wrong, and holds the fix. Hangs run under a hard timeout, crashes in a
child process, so that a regression fails one test instead of the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import mlx.core as mx
import pytest

from broken_tree_engines import check_text, run_tree_and_chain_engine
from specaccept.conformance import Verdict, read_trace
from specaccept.conformance.fresh import read_uniforms
from specaccept.conformance.tree_checks import tree_read_uniforms

HANG_SECONDS = 60


def run_child(code: str, timeout: float = HANG_SECONDS) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter: a hang is a timeout, a crash an exit status."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, check=False)


def assert_child_prints(code: str, expected: str, timeout: float = HANG_SECONDS) -> None:
    result = run_child(code, timeout)
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-2000:]}"
    assert result.stdout.strip() == expected, result.stdout + result.stderr[-2000:]


# --- fresh: coins reused across record kinds ---------------------------------------------


def _cross_kind_rereads(text: str, tmp_path: object) -> int:
    from pathlib import Path

    path = Path(str(tmp_path)) / "mixed.jsonl"
    path.write_text(text)
    trace = read_trace(path)
    tree_values = {v for r in trace.tree_rounds for v in tree_read_uniforms(r)}
    return sum(v in tree_values for r in trace.rounds for v in read_uniforms(r))


def test_the_tree_and_chain_engine_reuses_coins_and_replays(tmp_path: object) -> None:
    # The repro is real: every round replays, and the chain rounds read, many times over,
    # values the tree rounds read (fresh ones on the 2**-24 grid almost never coincide).
    reused = run_tree_and_chain_engine(60, reuse=True)
    report = check_text(reused)
    verdicts = {c.name: c.verdict for c in report.checks}
    assert verdicts["replay"] is Verdict.PASS and verdicts["tree-replay"] is Verdict.PASS
    assert _cross_kind_rereads(reused, tmp_path) >= 60
    fresh = run_tree_and_chain_engine(60, reuse=False)
    assert _cross_kind_rereads(fresh, tmp_path) == 0
    assert check_text(fresh).passed


def test_fresh_catches_coins_a_chain_round_reuses_from_a_tree_round() -> None:
    report = check_text(run_tree_and_chain_engine(60, reuse=True))
    failed = {c.name for c in report.checks if c.verdict is Verdict.FAIL}
    assert failed & {"fresh", "tree-fresh"}, report.to_text()


# --- hangs: sizes bounded before they are computed ------------------------------------------


def test_the_coincidence_threshold_returns_past_the_overflow_of_its_product() -> None:
    # mu > 709 overflowed mu**c / c! to inf and the loop never ended.
    assert_child_prints("""
        from specaccept.conformance.fresh import coincidence_threshold
        print(coincidence_threshold(700, 1e-4), coincidence_threshold(720, 1e-4),
              coincidence_threshold(1e300, 1e-4) > 1e300)
        """, "1908 1962 True")


def test_the_coincidence_threshold_is_the_least_c_of_the_product_form() -> None:
    from specaccept.conformance.fresh import coincidence_threshold

    def by_product(mu: float, alpha: float) -> int:
        c, tail = 1, mu
        while tail > alpha:
            c += 1
            tail *= mu / c
        return c

    for mu in [0.0, 1e-9, 1e-4, 0.3, 1.0, 2.5, 17.0, 123.4, 699.0]:
        for alpha in (1e-8, 1e-4, 0.05, 0.5):
            assert coincidence_threshold(mu, alpha) == by_product(mu, alpha), (mu, alpha)
    for bad in (float("inf"), float("nan"), -1.0, 1e301):
        with pytest.raises(ValueError, match=r"mean_bound must be a number in \[0, 1e\+300\]"):
            coincidence_threshold(bad, 1e-4)
    assert coincidence_threshold(1e300, 1e-4) > 1e300


def test_tree_sizes_are_refused_before_their_powers_are_computed() -> None:
    assert_child_prints("""
        from specaccept.shell.tree_generator import check_tree_size, full_tree_parents
        for width, depth in ((2, 10**10), (3, 123456789012), (1, 2**40), (10**30, 2)):
            for call in (check_tree_size, full_tree_parents):
                try:
                    call(width, depth)
                except ValueError as error:
                    assert "at most" in str(error), error
                else:
                    raise AssertionError((width, depth))
        print("refused")
        """, "refused")


@pytest.mark.parametrize("tree", ["3x123456789012", "2x9999999999", "1x5000", "1025x1"])
def test_generate_refuses_a_huge_tree_in_one_line(tree: str) -> None:
    result = subprocess.run([sys.executable, "-c", "import specaccept_command as c; c.main()",
                             "generate", "-n", "5",
                             "--tree", tree], capture_output=True, text=True,
                            timeout=HANG_SECONDS, check=False)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and "argument --tree" in lines[-1], result.stderr


def test_the_closed_forms_refuse_a_count_past_the_node_bound() -> None:
    assert_child_prints("""
        import mlx.core as mx
        from specaccept.core.tree import (iid_siblings_acceptance, multi_draft_ceiling,
                                          without_replacement_siblings_acceptance)
        p, q = mx.array([0.5, 0.5]), mx.array([0.25, 0.75])
        calls = [(iid_siblings_acceptance, p, q, 10**7), (iid_siblings_acceptance, p, q, 2**63),
                 (without_replacement_siblings_acceptance, mx.array([1.0]), mx.array([1.0]),
                  10**8), (multi_draft_ceiling, p, q, 2**63), (multi_draft_ceiling, p, q, 4097)]
        for function, *args in calls:
            try:
                function(*args)
            except ValueError as error:
                assert "num_drafts must lie in [1, 4096]" in str(error), error
            else:
                raise AssertionError(function.__name__)
        print(round(iid_siblings_acceptance(p, q, 4096).item(), 4))
        """, "1.0")


def test_a_tree_past_the_node_bound_is_refused_and_one_at_it_is_checked() -> None:
    from specaccept.core.tree import MAX_TREE_NODES, tree_shape

    chain = tuple(range(-1, MAX_TREE_NODES - 1))
    shape = tree_shape(chain, [0] * MAX_TREE_NODES, distinct_siblings=False)
    assert shape.depths[-1] == MAX_TREE_NODES
    with pytest.raises(ValueError, match="parents must name at most 4096 nodes, got 4097"):
        tree_shape((*chain, MAX_TREE_NODES - 1), [0] * (MAX_TREE_NODES + 1),
                   distinct_siblings=False)
    # A long cycle is still found, and named briefly.
    cycle = (MAX_TREE_NODES - 1, *range(0, MAX_TREE_NODES - 1))
    with pytest.raises(ValueError, match=r"cycle through node 0: \(4095, 0, 1, .*4096 nodes"):
        tree_shape(cycle, [0] * MAX_TREE_NODES, distinct_siblings=False)


def test_verify_tree_at_the_node_bound_returns_in_a_child() -> None:
    # A deep chain and a wide star under without replacement: linear, not quadratic.
    assert_child_prints("""
        import mlx.core as mx
        from specaccept.core.tree import MAX_TREE_NODES, TreeScheme, verify_tree
        n = MAX_TREE_NODES
        # The star's W = 1024 siblings built O(W**2) masks of V = 1024 before (a gigabyte).
        for scheme, parents, vocab in ((TreeScheme.IID, tuple(range(-1, n - 1)), 8),
                                       (TreeScheme.WITHOUT_REPLACEMENT, (-1,) * 1024, 1024)):
            n = len(parents)
            p = mx.softmax(mx.random.normal((n + 1, vocab), key=mx.random.key(0)), axis=-1)
            tokens = [i % vocab for i in range(n)]
            depth = n if scheme is TreeScheme.IID else 1
            verdict = verify_tree(scheme, parents, p, p, tokens, mx.zeros((n,)),
                                  mx.zeros((depth + 1,)))
            mx.eval(verdict.next_token)
            # u = 0 and q = p: every tested child is kept, so the path is as deep as can be.
            print(verdict.num_accepted.item(), end=" ")
        """, "4096 1", timeout=180)


# --- crashes: ids outside [0, V) in arrays are placeholders ---------------------------------

PLACEHOLDERS = [(-1, "int32"), (-4, "int32"), (10**6, "int32"), (2**31 - 1, "int32"),
                (2**32, "int64"), (2**32 - 1, "uint32")]


def test_placeholder_ids_never_read_outside_the_rows_in_a_child() -> None:
    # These segfaulted (or, for -1, read the last id Python-style and accepted it).
    assert_child_prints(f"""
        import mlx.core as mx
        from specaccept.core.tree import (TreeScheme, candidate_siblings_acceptance,
                                          verify_tree)
        p = mx.array([0.5, 0.25, 0.25])
        rows = mx.stack([p, p, p])
        for value, dtype in {PLACEHOLDERS!r}:
            for scheme in TreeScheme:
                q = None if scheme is TreeScheme.DETERMINISTIC else rows
                ids = mx.array([value, 0], dtype=getattr(mx, dtype))
                verdict = verify_tree(scheme, (-1, -1), rows, q, ids, mx.array([0.0, 0.0]),
                                      mx.array([0.9, 0.0]))
                # The placeholder is never kept; the real sibling after it is.
                assert verdict.accepted_nodes.tolist() == [1], (value, scheme)
            mass = candidate_siblings_acceptance(p, mx.array([value, 1], dtype=getattr(mx, dtype)))
            assert mass.item() == 0.25, (value, mass.item())
        print("ok")
        """, "ok")


@pytest.mark.parametrize(("value", "dtype"), PLACEHOLDERS)
def test_a_placeholder_node_is_as_if_absent(value: int, dtype: str) -> None:
    from specaccept.core.tree import TreeScheme, verify_tree

    p = mx.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.0, 0.5, 0.5], [0.25, 0.25, 0.5]])
    q = mx.array([[0.25, 0.5, 0.25], [0.5, 0.25, 0.25], [0.25, 0.25, 0.5], [0.5, 0.25, 0.25]])
    for u in ([0.75, 0.75, 0.0], [0.99, 0.0, 0.5]):
        for draw in (0.1, 0.6, 0.95):
            padded = verify_tree(TreeScheme.IID, (-1, -1, 1), p, q,
                                 mx.array([value, 1, 2], dtype=getattr(mx, dtype)),
                                 mx.array(u), mx.array([draw, draw, draw]))
            # The tree without node 0 (and its subtree, empty here): nodes 1, 2 become 0, 1.
            alone = verify_tree(TreeScheme.IID, (-1, 0), p[mx.array([0, 2, 3])],
                                q[mx.array([0, 2, 3])], [1, 2], mx.array(u[1:]),
                                mx.array([draw, draw, draw]))
            assert padded.next_token.item() == alone.next_token.item()
            assert padded.num_accepted.item() == alone.num_accepted.item()


# --- strict JSON, the reader's node bound, and two writers on one path -----------------------

HEADER = '{"format":"specaccept-trace","version":2,"vocab_size":4%s}\n'
RUN = '{"record":"run","run":"0","prompt":[1]%s}\n'


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("where", ["header", "run"])
def test_a_non_json_constant_in_extra_is_refused(literal: str, where: str,
                                                 tmp_path: object) -> None:
    from pathlib import Path

    from specaccept.conformance import TraceError

    extra = f',"extra":{{"ms":{literal}}}'
    text = (HEADER % (extra if where == "header" else "")
            + RUN % (extra if where == "run" else "") + RUN.replace('"0"', '"1"') % "")
    path = Path(str(tmp_path)) / "t.jsonl"
    path.write_text(text)
    shown = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[literal]
    with pytest.raises(TraceError, match=f"line {1 if where == 'header' else 2}, field "
                       f"'extra.ms': is {shown}, which is not JSON"):
        read_trace(path)


def test_the_reader_refuses_a_tree_past_the_node_bound(tmp_path: object) -> None:
    import json
    from pathlib import Path

    from specaccept.conformance import TraceError

    record = {"record": "tree-round", "run": "0", "round": 0, "position": 0, "scheme": "iid",
              "parents": [-1] * 4097, "node_tokens": [0] * 4097, "path": [], "emitted": [0]}
    path = Path(str(tmp_path)) / "t.jsonl"
    path.write_text(HEADER % "" + RUN % "" + json.dumps(record) + "\n")
    with pytest.raises(TraceError, match=r"line 3, field 'parents'.*at most 4096 nodes"):
        read_trace(path)


WRITER = """
import sys, time, specaccept_trace as st
try:
    writer = st.TraceWriter(sys.argv[1], vocab_size=4)
except st.TraceWriteError as error:
    print("refused:", error)
    sys.exit(0)
run = writer.start_run(prompt=[1])
for i in range(int(sys.argv[2])):
    run.write_round(rule="stochastic", draft_tokens=[0], emitted=[0, 1],
                    target=st.probs_block([[0.25] * 4] * 2), draft=st.probs_block([[0.25] * 4]))
    if i == 0 and sys.argv[3] == "hold":
        # Holding the path: say so, and keep it until the test has tried a second writer.
        print("holding", flush=True)
        sys.stdin.readline()
writer.close()
print("wrote")
"""


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_a_second_writer_on_a_held_path_is_refused_and_the_first_keeps_its_lines(
    suffix: str, tmp_path: object
) -> None:
    from pathlib import Path

    path = str(Path(str(tmp_path)) / f"t{suffix}")
    first = subprocess.Popen([sys.executable, "-c", WRITER, path, "40", "hold"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert first.stdin is not None and first.stdout is not None
    try:
        assert first.stdout.readline().strip() == "holding"  # a round written, path held
        second = subprocess.run([sys.executable, "-c", WRITER, path, "40", "go"],
                                capture_output=True, text=True, timeout=HANG_SECONDS,
                                check=False)
        assert second.stdout.startswith("refused: destination"), second.stdout + second.stderr
        assert "held by another TraceWriter" in second.stdout
    finally:
        out, _ = first.communicate("\n", timeout=HANG_SECONDS)
    assert out.strip() == "wrote"
    assert len(read_trace(path).rounds) == 40


def test_a_writer_on_a_device_writes_without_truncating_it() -> None:
    # /dev/null is seekable but cannot be truncated: opening it raised EINVAL.
    import specaccept_trace as st

    st.TraceWriter("/dev/null", vocab_size=4).close()
