"""The conformance kit on tree rounds: the tree generator conforms, each broken tree engine
is caught, and the tree-round record is read and written as spec/trace_tree_rounds.md says."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

import specaccept_trace
from broken_tree_engines import TREE_BUGS, TreeEngineCase, check_text, run_tree_engine
from specaccept import SamplerConfig, load_pair
from specaccept.conformance import TraceError, Verdict, check_trace, read_trace
from specaccept.conformance.tree_checks import node_acceptance
from specaccept.core.tree import TreeScheme, iid_siblings_acceptance
from specaccept.shell.conformance.tree_record import trace_tree_generator
from specaccept.shell.tree_generator import TreeSpeculativeGenerator

TREE_CHECKS = ("tree-replay", "tree-fresh", "tree-support", "tree-acceptance", "tree-law",
               "tree-rewind")


@pytest.fixture(scope="module")
def pair() -> Any:
    return load_pair()


@pytest.mark.parametrize("scheme", list(TreeScheme))
def test_tree_generator_conforms(pair: Any, scheme: TreeScheme, tmp_path: Path) -> None:
    """The unmodified TreeSpeculativeGenerator at T = 0.7 passes every tree check."""
    generator = TreeSpeculativeGenerator(pair.target, pair.drafter,
                                         SamplerConfig(temperature=0.7), width=2, depth=2,
                                         scheme=scheme)
    prompt = [int(t) for t in pair.tokenizer.encode("ROMEO:\n")]
    stream = io.StringIO()
    tokens = trace_tree_generator(generator, prompt, 40, stream, seed=3)
    assert len(tokens) == 40
    path = tmp_path / "tree.jsonl"
    path.write_text(stream.getvalue())
    import importlib

    jsonschema: Any = importlib.import_module("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[1] / "spec"
                         / "trace_format.schema.json").read_text())
    for line in stream.getvalue().splitlines():
        jsonschema.validate(json.loads(line), schema)
    trace = read_trace(path)
    assert trace.tree_rounds and trace.version == 2
    report = check_trace(trace)
    verdicts = {c.name: c.verdict for c in report.checks}
    assert all(verdicts[name] is Verdict.PASS for name in TREE_CHECKS), report.to_text()
    assert report.passed


@pytest.mark.parametrize("case", TREE_BUGS, ids=[c.bug for c in TREE_BUGS])
def test_broken_tree_engine_is_caught(case: TreeEngineCase) -> None:
    """Each broken tree engine fails the checks it names within its rounds, seeds 0 to 2;
    the correct engine on the same tree, laws and rounds passes."""
    for seed in range(3):
        report = check_text(run_tree_engine(case, case.rounds, seed=seed))
        failed = {c.name for c in report.checks if c.verdict is Verdict.FAIL}
        assert set(case.caught_by) <= failed, (seed, report.to_text())
        correct = check_text(run_tree_engine(
            None, case.rounds, seed=seed, scheme=case.scheme, width=case.width,
            depth=case.depth, grid=case.grid, sharpness=case.sharpness))
        assert correct.passed, correct.to_text()


def _top_n_case() -> TreeEngineCase:
    return next(c for c in TREE_BUGS if c.bug == "top-n-verified-with-q")


def test_tree_acceptance_rejects_top_n_verified_with_q_without_uniforms() -> None:
    """Without uniforms replay does not run; the acceptance z still rejects the engine that
    tests top-n candidates with min(1, p/q), and passes the correct deterministic engine."""
    case = _top_n_case()
    report = check_text(run_tree_engine(case, 40, record_uniforms=False))
    checks = {c.name: c for c in report.checks}
    assert checks["tree-replay"].verdict is Verdict.NOT_RUN
    assert checks["tree-acceptance"].verdict is Verdict.FAIL, report.to_text()
    correct = check_text(run_tree_engine(None, 40, scheme=case.scheme, width=case.width,
                                         depth=case.depth, record_uniforms=False))
    assert {c.name: c.verdict for c in correct.checks}["tree-acceptance"] is Verdict.PASS


def test_tree_law_rejects_top_n_verified_with_q_without_uniforms() -> None:
    """The law check's demonstration: 240 rounds of the same engine fail the PIT (seed 0
    fails from 220 on, `docs/results/broken-tree-engines.md` gives the spread over seeds);
    the correct engine passes it."""
    case = _top_n_case()
    report = check_text(run_tree_engine(case, 240, record_uniforms=False))
    assert {c.name: c.verdict for c in report.checks}["tree-law"] is Verdict.FAIL
    correct = check_text(run_tree_engine(None, 240, scheme=case.scheme, width=case.width,
                                         depth=case.depth, record_uniforms=False))
    assert {c.name: c.verdict for c in correct.checks}["tree-law"] is Verdict.PASS


def _trace_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def _write(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_node_acceptance_matches_the_core_closed_forms(tmp_path: Path) -> None:
    """i.i.d.: `iid_siblings_acceptance`; deterministic: the children's p summed."""
    for scheme in (TreeScheme.IID, TreeScheme.DETERMINISTIC):
        trace = read_trace(_write(tmp_path, _trace_lines(
            run_tree_engine(None, 3, scheme=scheme, width=3, depth=2))))
        for round_ in trace.tree_rounds:
            for row, kids in enumerate(round_.children):
                if not kids:
                    continue
                assert round_.draft_rows is not None
                if scheme is TreeScheme.IID:
                    expected = iid_siblings_acceptance(
                        mx.array(round_.target_rows[row]), mx.array(round_.draft_rows[row]),
                        len(kids)).item()
                else:
                    expected = float(sum(round_.target_rows[row][round_.node_tokens[c]]
                                         for c in kids))
                assert node_acceptance(round_, row) == pytest.approx(expected, abs=1e-5)


def test_without_replacement_acceptance_given_siblings_by_enumeration(tmp_path: Path) -> None:
    """Averaged over the sibling draws (every ordered pair, by enumeration on a vocabulary
    of 12), the given-siblings acceptance equals a direct count of accepting outcomes."""
    text = run_tree_engine(None, 1, scheme=TreeScheme.WITHOUT_REPLACEMENT, width=2, depth=1)
    record = _trace_lines(text)
    p = np.array(record[2]["target"]["probs"][0], dtype=np.float64)
    q = np.array(record[2]["draft"]["probs"][0], dtype=np.float64)
    total_formula, total_direct = 0.0, 0.0
    for a in range(12):
        for b in range(12):
            if a == b:
                continue
            weight = q[a] * q[b] / (1 - q[a])
            record[2]["node_tokens"] = [a, b]
            record[2]["path"], record[2]["emitted"] = [], [0]
            round_ = read_trace(_write(tmp_path, record)).tree_rounds[0]
            total_formula += weight * node_acceptance(round_, 0)
            # Direct: accept a with min(1, p/q); else b against q without a, residual r1.
            first = min(1.0, p[a] / q[a])
            r1 = np.maximum(p - q, 0)
            r1 = r1 / r1.sum() if r1.sum() > 0 else p
            q1 = q.copy()
            q1[a] = 0
            q1 /= q1.sum()
            second = 0.0 if r1[b] <= 0 else min(1.0, r1[b] / q1[b])
            total_direct += weight * (first + (1 - first) * second)
    assert total_formula == pytest.approx(total_direct, abs=1e-6)


def _one_round(tmp_path: Path) -> list[dict[str, Any]]:
    return _trace_lines(run_tree_engine(None, 1, width=2, depth=2))


@pytest.mark.parametrize(("change", "field"), [
    (lambda r: r.update(path=[2]), "path[0]"),
    (lambda r: r.update(path=[0, 99]), "path[1]"),
    (lambda r: r.pop("path"), "path"),
    (lambda r: r.update(scheme="beam"), "scheme"),
    (lambda r: r.update(parents=[-1, -1, 2, 0, 1, 1]), "parents[2]"),
    (lambda r: r.pop("draft"), "draft"),
    (lambda r: r.update(emitted=[5]), "emitted"),
    (lambda r: r.update(uniforms={"accept": [0.5] * 6, "sample": [0.5]}), "uniforms.sample"),
    (lambda r: r["target"].update(probs=r["target"]["probs"][:-1]), "target"),
])
def test_reader_names_the_bad_tree_field(tmp_path: Path, change: Any, field: str) -> None:
    records = _one_round(tmp_path)
    change(records[2])
    with pytest.raises(TraceError) as error:
        read_trace(_write(tmp_path, records))
    assert error.value.field == field and error.value.line == 3


def test_writer_refuses_what_the_reader_refuses() -> None:
    writer = specaccept_trace.TraceWriter(io.StringIO(), vocab_size=4)
    run = writer.start_run("r")
    rows = specaccept_trace.probs_block([[0.25] * 4] * 3)
    draft = specaccept_trace.probs_block([[0.25] * 4])
    with pytest.raises(specaccept_trace.TraceWriteError, match="path"):
        run.write_tree_round(scheme="iid", parents=[-1, 0], node_tokens=[1, 2], target=rows,
                             draft=draft, path=[1], emitted=[2, 0])
    with pytest.raises(specaccept_trace.TraceWriteError, match="draft is required"):
        run.write_tree_round(scheme="iid", parents=[-1, -1], node_tokens=[1, 2], target=rows,
                             path=[0], emitted=[1, 0])
    version_1 = specaccept_trace.TraceWriter(io.StringIO(), vocab_size=4, version=1)
    with pytest.raises(specaccept_trace.TraceWriteError, match="version 2"):
        version_1.start_run().write_tree_round(
            scheme="deterministic", parents=[-1], node_tokens=[1],
            target=specaccept_trace.probs_block([[0.25] * 4] * 2), path=[], emitted=[0])


def test_the_format_pages_tree_example_is_read_and_replays(tmp_path: Path) -> None:
    """The tree round of spec/trace_examples.md: read, and every run check passes."""
    page = (Path(__file__).resolve().parents[1] / "spec" / "trace_examples.md").read_text()
    block = re.findall(r"```json\n(.*?)```", page, re.DOTALL)[-1]
    records: list[str] = []
    for line in block.splitlines():
        if line.startswith("{"):
            records.append(line)
        else:
            records[-1] += line
    trace = read_trace(_write(tmp_path, [json.loads(r) for r in records]))
    (round_,) = trace.tree_rounds
    assert (round_.path, round_.emitted, round_.next_token) == ((0,), (1, 0), 0)
    verdicts = {c.name: c.verdict for c in check_trace(trace).checks}
    assert verdicts["tree-replay"] is Verdict.PASS and verdicts["tree-rewind"] is Verdict.PASS


@pytest.mark.parametrize(("key", "value"), [("target_after", 4), ("target_after", 2),
                                            ("target_before", 0), ("draft_after", 0),
                                            ("draft_fed", 2)])
def test_tree_rewind_fails_an_offset_off_the_invariant(
    tmp_path: Path, key: str, value: int
) -> None:
    """A one-round tree trace keeps L' = 1 + len(emitted) target entries; an offset off the
    invariant fails the rewind check, naming the round."""
    records = _trace_lines(run_tree_engine(None, 1, width=2, depth=1))
    records[1]["prompt"] = [0, 1]
    # L = 1 token before the current one; the round emits len(emitted) tokens.
    end = 1 + len(records[2]["emitted"])
    cache = {"target_before": 1, "target_after": end, "draft_before": 1, "draft_fed": 1,
             "draft_after": end}
    records[2]["cache"] = cache
    trace = read_trace(_write(tmp_path, records))
    assert {c.name: c.verdict for c in check_trace(trace).checks}["tree-rewind"] is Verdict.PASS
    cache[key] = value if key != "target_after" else end + (value - 3)
    report = check_trace(read_trace(_write(tmp_path, records)))
    rewind = {c.name: c for c in report.checks}["tree-rewind"]
    assert rewind.verdict is Verdict.FAIL and "tree round 0 (line 3)" in rewind.detail


def test_conform_records_and_checks_a_tree_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`specaccept conform --record specaccept --tree WxD`: the tree checks, all passing."""
    from specaccept.cli import main

    path = tmp_path / "tree.jsonl"
    assert main(["conform", str(path), "--record", "specaccept", "--tree", "2x2",
                 "--tree-scheme", "without-replacement", "--temp", "0.7", "-n", "24"]) == 0
    out = capsys.readouterr().out
    for name in TREE_CHECKS:
        assert re.search(rf"^{name} +PASS ", out, re.M), out
    assert re.search(r"^verdict: CONFORMS$", out, re.M), out


@pytest.mark.parametrize(("argv", "message"), [
    (["--tree", "2x2"], "--tree needs --record specaccept"),
    (["--tree", "2x2", "--record", "mlx-lm"], "it needs --record specaccept, got --record "
     "mlx-lm"),
])
def test_conform_refuses_a_tree_without_this_librarys_recorder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    from specaccept.cli import main

    with pytest.raises(SystemExit) as exit_status:
        main(["conform", str(tmp_path / "t.jsonl"), *argv])
    assert exit_status.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_a_tree_run_ending_with_the_target_alone_writes_a_chain_round(
    pair: Any, tmp_path: Path
) -> None:
    """Seed 2 of a 5-token 2x2 run leaves one token for the target alone: that round is a
    chain round with no drafts (its accept uniform null), read and replayed with the rest."""
    generator = TreeSpeculativeGenerator(pair.target, pair.drafter,
                                         SamplerConfig(temperature=0.7), width=2, depth=2)
    prompt = [int(t) for t in pair.tokenizer.encode("ROMEO:\n")]
    stream = io.StringIO()
    trace_tree_generator(generator, prompt, 5, stream, seed=2)
    trace = read_trace(_write(tmp_path, _trace_lines(stream.getvalue())))
    (last,) = trace.rounds
    assert last.k == 0 and last.index == len(trace.tree_rounds)
    assert last.uniforms is not None and np.isnan(last.uniforms[0, 0])
    report = check_trace(trace)
    verdicts = {c.name: c.verdict for c in report.checks}
    assert verdicts["replay"] is Verdict.PASS and verdicts["tree-replay"] is Verdict.PASS
    assert report.passed


def test_tree_support_names_a_token_of_probability_zero() -> None:
    """The engine that accepts a zero-mass draft at coin 0: tree-support's diagnosis names
    the token's p = 0 at its row (the residual rule would also fail it, less precisely)."""
    case = next(c for c in TREE_BUGS if c.bug == "zero-mass-accepted-at-coin-0")
    report = check_text(run_tree_engine(case, case.rounds, seed=0))
    support = next(c for c in report.checks if c.name == "tree-support")
    assert support.verdict is Verdict.FAIL and "has p = 0 at its row" in support.detail, (
        support.detail)
