"""Compact traces: statistics in place of rows for all but a seeded share of rounds.

A compact trace of the synthetic engine is checked like a full one: the verdicts read the
written statistics; replay and the power model the rounds that keep their rows; the stats
check compares the two where both are kept. The reader refuses a trace whose rounds with
rows are not the seeded selection and statistics that are malformed; a writer whose
statistics are not those of its rows fails the stats check; an engine resampling from p
fails in compact mode with no rows at all; pieces of a compact trace merge exactly.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import specaccept_trace as st
from specaccept.conformance import Verdict, check_trace, read_trace
from specaccept.conformance.pieces import check_piece, load_state, merge_states, save_state
from specaccept.conformance.positions import round_stats
from specaccept.conformance.trace import TraceError, keeps_rows, unit_hash

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("synthetic_engine",
                                               ROOT / "benchmarks" / "synthetic_engine.py")
assert _SPEC is not None and _SPEC.loader is not None
engine = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = engine
_SPEC.loader.exec_module(engine)


def _engine(path: Path, *, compact: float | None, bug: str | None = None, rounds: int = 12,
            runs: int = 3, vocab: int = 64, rule: str = "stochastic", seed: int = 0) -> Path:
    engine.run(argparse.Namespace(
        vocab=vocab, rounds=rounds, runs=runs, k=4, seed=seed, out=str(path), rule=rule,
        bug=bug, temperature=1.0, omit_undecided_rows=False, no_check_values=False,
        stdlib_checks=False, compact=compact))
    return path


def _verdicts(path: Path) -> dict[str, Verdict]:
    return {check.name: check.verdict for check in check_trace(read_trace(path)).checks}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _rewrite(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_writer_hash_is_the_reader_hash() -> None:
    for key in [("rows", "request-0", 3), ("rows", "a/b", 0), ("power", "x", 12)]:
        assert st._unit_hash(*key) == unit_hash(*key)
    assert [st.keeps_rows("stochastic", "r", i, 0.3) for i in range(50)] == [
        keeps_rows("stochastic", "r", i, 0.3) for i in range(50)]
    assert all(st.keeps_rows("block", "r", i, 0.0) for i in range(5))


def test_a_compact_trace_of_a_correct_engine_conforms(tmp_path: Path) -> None:
    path = _engine(tmp_path / "c.jsonl", compact=0.25)
    lines = _lines(path)
    assert lines[0]["compact"] == {"full_rows_share": 0.25}
    rounds = [line for line in lines[1:] if "round" in line]
    assert all("stats" in line for line in rounds)
    with_rows = [line for line in rounds if "target" in line]
    assert 0 < len(with_rows) < len(rounds)
    assert all(("target" in line) == keeps_rows("stochastic", line["run"], line["round"], 0.25)
               for line in rounds)
    report = check_trace(read_trace(path))
    verdicts = {check.name: check.verdict for check in report.checks}
    assert verdicts["stats"] is Verdict.PASS
    assert all(v is not Verdict.FAIL for v in verdicts.values()), report.to_json()
    replay = next(check for check in report.checks if check.name == "replay")
    assert f"of {len(with_rows)} (" in replay.statistic
    assert "not replayed" in replay.detail


def test_stats_from_probability_rows_are_the_readers(tmp_path: Path) -> None:
    """Rows given as probabilities: the writer's statistics and the reader's agree to the
    bit on every round that keeps both (the same float64 arithmetic on the same floats)."""
    rng = np.random.default_rng(4)
    vocab, k = 40, 3
    path = tmp_path / "probs.jsonl"
    with st.TraceWriter(path, vocab_size=vocab, compact=1.0) as trace:
        run = trace.start_run("r")
        for _ in range(30):
            p = rng.dirichlet(np.full(vocab, 0.3), size=k + 1).astype(np.float32)
            q = rng.dirichlet(np.full(vocab, 0.3), size=k).astype(np.float32)
            p[:, 0] = 0  # exact zeros, and rows summing to 1 within the tolerance
            p /= p.sum(axis=1, keepdims=True)
            drafts = rng.integers(1, vocab, size=k).tolist()
            accepted = int(rng.integers(k + 1))
            emitted = [*drafts[:accepted], int(rng.integers(1, vocab))]
            rule = ["stochastic", "sampler-match", "greedy-argmax", "block"][int(
                rng.integers(4))]
            run.write_round(rule=rule, draft_tokens=drafts, emitted=emitted,
                            target=st.b64_block(p.tobytes(), rows=k + 1),
                            draft=st.b64_block(q.tobytes(), rows=k),
                            target_probs=p, draft_probs=q)
    for round_ in read_trace(path).rounds:
        assert round_.stats is not None
        computed = round_stats(round_)
        for name in round_.stats.__dataclass_fields__:
            assert np.array_equal(getattr(round_.stats, name), getattr(computed, name)), name


def test_compact_mode_fails_resample_from_p_without_any_rows(tmp_path: Path) -> None:
    path = _engine(tmp_path / "bug.jsonl", compact=0.0, bug="resample-from-p", rounds=30)
    assert not any("target" in line for line in _lines(path)[1:])
    verdicts = _verdicts(path)
    assert verdicts["support"] is Verdict.FAIL
    assert verdicts["replay"] is Verdict.NOT_RUN
    assert verdicts["stats"] is Verdict.NOT_RUN
    clean = _verdicts(_engine(tmp_path / "clean.jsonl", compact=0.0, rounds=30))
    assert not any(v is Verdict.FAIL for v in clean.values()), clean


def test_statistics_that_are_not_the_rows_fail_the_stats_check(tmp_path: Path) -> None:
    """A writer handed a law other than the one its rows hold (here the target's law at
    another temperature) writes statistics the stats check refuses."""
    rng = np.random.default_rng(2)
    vocab, k = 50, 2
    path = tmp_path / "lying.jsonl"
    with st.TraceWriter(path, vocab_size=vocab, compact=1.0) as trace:
        run = trace.start_run("r", target_sampler={"temperature": 1.0},
                              draft_sampler={"temperature": 1.0})
        for _ in range(5):
            logits = rng.standard_normal((k + 1, vocab)).astype(np.float32)
            draft_logits = rng.standard_normal((k, vocab)).astype(np.float32)
            hotter = engine.distribution(logits.astype(np.float16), 0.5)
            q = engine.distribution(draft_logits.astype(np.float16), 1.0)
            run.write_round(rule="stochastic", draft_tokens=[1, 2], emitted=[1, 3],
                            target=st.b64_block(logits.astype(np.float16).tobytes(), rows=k + 1,
                                                kind="logits", dtype="float16"),
                            draft=st.b64_block(draft_logits.astype(np.float16).tobytes(),
                                               rows=k, kind="logits", dtype="float16"),
                            target_probs=hotter, draft_probs=q)
    report = check_trace(read_trace(path))
    stats = next(check for check in report.checks if check.name == "stats")
    assert stats.verdict is Verdict.FAIL
    assert "disagreeing rounds = 5 of 5" in stats.statistic


def _first_round(lines: list[dict[str, Any]], with_rows: bool) -> int:
    return next(i for i, line in enumerate(lines) if "round" in line
                and ("target" in line) == with_rows)


def test_rounds_with_rows_must_be_the_seeded_selection(tmp_path: Path) -> None:
    path = _engine(tmp_path / "c.jsonl", compact=0.3)
    lines = _lines(path)
    kept = _first_round(lines, True)
    dropped = [dict(line) for line in lines]
    del dropped[kept]["target"], dropped[kept]["draft"]
    with pytest.raises(TraceError, match="must hold the round's rows") as error:
        read_trace(_rewrite(tmp_path / "dropped.jsonl", dropped))
    assert error.value.line == kept + 1
    shown = [dict(line) for line in lines]
    bare = _first_round(lines, False)
    shown[bare]["target"], shown[bare]["draft"] = lines[kept]["target"], lines[kept]["draft"]
    with pytest.raises(TraceError, match="must be left out"):
        read_trace(_rewrite(tmp_path / "shown.jsonl", shown))
    other_share = [dict(line) for line in lines]
    other_share[0] = {**lines[0], "compact": {"full_rows_share": 0.9}}
    with pytest.raises(TraceError, match="field 'target'"):
        read_trace(_rewrite(tmp_path / "share.jsonl", other_share))


@pytest.mark.parametrize(("change", "field"), [
    (lambda s: s.pop("pit_p"), "stats.pit_p"),
    (lambda s: s.update(extra=[0.0]), "stats.extra"),
    (lambda s: s.update(p_token=s["p_token"][:-1]), "stats.p_token"),
    (lambda s: s.update(overlap=[1.5] * len(s["overlap"])), "stats.overlap[0]"),
    (lambda s: s.update(dot=[-0.1] * len(s["dot"])), "stats.dot[0]"),
    (lambda s: s.update(pit_q=["0.1"] * len(s["pit_q"])), "stats.pit_q[0]"),
    (lambda s: s.update(q_draft=s["q_draft"][:1]), "stats.q_draft"),
    (lambda s: [s.pop(key) for key in ("q_draft", "pit_q")], "stats.dot"),
])
def test_malformed_statistics_are_refused_naming_the_field(
    change: Any, field: str, tmp_path: Path
) -> None:
    path = _engine(tmp_path / "c.jsonl", compact=0.0, rounds=2, runs=1)
    lines = _lines(path)
    i = _first_round(lines, False)
    change(lines[i]["stats"])
    with pytest.raises(TraceError) as error:
        read_trace(_rewrite(tmp_path / "bad.jsonl", lines))
    assert error.value.line == i + 1 and error.value.field == field, str(error.value)


def test_a_nan_or_missing_statistics_are_refused(tmp_path: Path) -> None:
    path = _engine(tmp_path / "c.jsonl", compact=0.0, rounds=2, runs=1)
    text = path.read_text()
    i = _first_round(_lines(path), False)
    lines = text.splitlines()
    record = json.loads(lines[i])
    record["stats"]["p_token"][0] = float("nan")
    lines[i] = json.dumps(record)  # NaN, as Python's json writes it
    (tmp_path / "nan.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match="p_token"):
        read_trace(tmp_path / "nan.jsonl")
    missing = _lines(path)
    del missing[i]["stats"]
    with pytest.raises(TraceError, match="'stats'"):
        read_trace(_rewrite(tmp_path / "missing.jsonl", missing))
    full = _lines(_engine(tmp_path / "full.jsonl", compact=None, rounds=2, runs=1))
    full[1 + _first_round(full[1:], True)]["stats"] = missing[0].get("stats", {})
    with pytest.raises(TraceError, match="compact"):
        read_trace(_rewrite(tmp_path / "stats-in-full.jsonl", full))
    for bad in ({"full_rows_share": 1.5}, {"share": 0.1}, 0.1):
        header = {**_lines(path)[0], "compact": bad}
        with pytest.raises(TraceError, match="compact"):
            read_trace(_rewrite(tmp_path / "header.jsonl", [header, *_lines(path)[1:]]))


def test_the_writer_refuses_what_a_compact_trace_cannot_hold(tmp_path: Path) -> None:
    p = np.full((2, 4), 0.25, dtype=np.float32)
    with pytest.raises(st.TraceWriteError, match="compact"):
        st.TraceWriter(tmp_path / "a.jsonl", vocab_size=4, compact=1.5)
    with pytest.raises(st.TraceWriteError, match="version"):
        st.TraceWriter(tmp_path / "b.jsonl", vocab_size=4, version=1, compact=0.5)
    with st.TraceWriter(tmp_path / "c.jsonl", vocab_size=4, compact=1.0) as trace:
        run = trace.start_run("r")
        block = st.probs_block(p.tolist())
        with pytest.raises(st.TraceWriteError, match="target_probs is required"):
            run.write_round(rule="stochastic", draft_tokens=[1], emitted=[1, 2], target=block)
        with pytest.raises(st.TraceWriteError, match="target_probs"):
            run.write_round(rule="stochastic", draft_tokens=[1], emitted=[1, 2], target=block,
                            target_probs=p[:1])
        with pytest.raises(st.TraceWriteError, match="target"):
            run.write_round(rule="stochastic", draft_tokens=[1], emitted=[1, 2], target=None,
                            target_probs=p)
        bad = p.copy()
        bad[0, 0] = np.nan
        with pytest.raises(st.TraceWriteError, match=r"target_probs\[0\]\[0\]"):
            run.write_round(rule="stochastic", draft_tokens=[1], emitted=[1, 2], target=block,
                            target_probs=bad)
    with st.TraceWriter(tmp_path / "d.jsonl", vocab_size=4) as trace:
        run = trace.start_run("r")
        with pytest.raises(st.TraceWriteError, match="compact trace"):
            run.write_round(rule="stochastic", draft_tokens=[1], emitted=[1, 2],
                            target=st.probs_block(p.tolist()), target_probs=p)
    numpy = st._numpy
    st._numpy = None
    try:
        with pytest.raises(st.TraceWriteError, match="NumPy"):
            st.TraceWriter(tmp_path / "e.jsonl", vocab_size=4, compact=0.5)
    finally:
        st._numpy = numpy


def _report(checker: Any) -> str:
    return json.dumps(checker.report().to_json(), sort_keys=True)


def test_pieces_of_a_compact_trace_merge_to_one_pass(tmp_path: Path) -> None:
    path = str(_engine(tmp_path / "c.jsonl", compact=0.3, rounds=10, runs=3))
    lines = len(Path(path).read_bytes().splitlines())
    whole = _report(check_piece((path, 2, None)))
    assert whole == json.dumps(check_trace(read_trace(path)).to_json(), sort_keys=True)
    assert '"stats"' in whole
    for cuts in ([lines // 2], [5, lines // 3, 2 * lines // 3]):
        bounds = [2, *cuts, lines + 1]
        states = [check_piece((path, first, last - 1))
                  for first, last in itertools.pairwise(bounds)]
        if len(cuts) == 1:
            for i, state in enumerate(states):
                save_state(state, tmp_path / f"{i}.json.gz")
            states = [load_state(tmp_path / f"{i}.json.gz") for i in range(len(states))]
        assert _report(merge_states(states)) == whole, cuts


def test_the_json_schema_accepts_a_compact_trace_and_refuses_stray_stats(
    tmp_path: Path
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "spec" / "trace_format.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    lines = _lines(_engine(tmp_path / "c.jsonl", compact=0.3, rounds=4, runs=2))
    for line in lines:
        validator.validate(line)
    bare = dict(lines[_first_round(lines, False)])
    bare["stats"] = {**bare["stats"], "unknown": [0.0]}
    assert not validator.is_valid(bare)
    del bare["stats"]
    assert not validator.is_valid(bare)  # neither rows nor statistics
