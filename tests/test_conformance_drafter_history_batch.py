"""The draft-law, history and batch checks: each passes correct traces and fails the bug it
is built for.

Most traces here are synthetic (random laws over a small vocabulary, written with the
standard-library writer), so that each test runs in about a second and the engine's law is
known; the engine loop of `broken_engines.py` shows the same on the embedded pair.
"""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np
import pytest

import specaccept_trace as st
from specaccept.conformance import TraceError, Verdict, check_trace, read_trace
from specaccept.conformance.history import HistoryState
from specaccept.conformance.positions import Position, RoundFacts, position_stats, round_stats
from specaccept.conformance.trace import Round

V = 8


def _draw(law: np.ndarray, u: float) -> int:
    """The spec's inverse-CDF draw: the smallest id whose partial sum exceeds u * total."""
    cumulative = np.cumsum(law)
    return int(min(np.searchsorted(cumulative, u * cumulative[-1], side="right"),
                   np.flatnonzero(law > 0)[-1]))


def _softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = np.exp((logits - logits.max()) / temperature)
    out: np.ndarray = z / z.sum()
    return out


def _stochastic_round(
    p: np.ndarray, q: np.ndarray, drafts: list[int], u: np.ndarray
) -> list[int]:
    """The emitted tokens of modified rejection sampling on uniforms `u` ([k + 1, 2])."""
    emitted = []
    for i, t in enumerate(drafts):
        if p[i, t] > 0 and u[i, 0] * q[i, t] <= p[i, t]:
            emitted.append(t)
            continue
        residual = np.maximum(p[i] - q[i], 0.0)
        emitted.append(_draw(residual if residual.sum() > 0 else p[i], u[i, 1]))
        return emitted
    emitted.append(_draw(p[len(drafts)], u[len(drafts), 1]))
    return emitted


def _path(tmp_path: Path, text: str, name: str = "trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _drafter_trace(rounds: int, record: str, drawn_temperature: float, seed: int) -> str:
    """Stochastic rounds whose drafter draws at `drawn_temperature` and records its law at
    temperature 0.5, as probabilities or as logits with the sampler."""
    rng = np.random.default_rng(seed)
    out = io.StringIO()
    with st.TraceWriter(out, vocab_size=V, engine="synthetic drafter") as trace:
        run = trace.start_run("r", prompt=[0], draft_sampler={"temperature": 0.5})
        for _ in range(rounds):
            k = 4
            logits = rng.normal(0.0, 1.5, size=(k, V))
            q = np.stack([_softmax(row, 0.5) for row in logits])
            drawn = np.stack([_softmax(row, drawn_temperature) for row in logits])
            p = rng.dirichlet(np.ones(V), size=k + 1)
            drafts = [_draw(drawn[i], rng.random()) for i in range(k)]
            emitted = _stochastic_round(p, q, drafts, rng.random((k + 1, 2)))
            draft = (st.logits_block(logits.tolist()) if record == "logits"
                     else st.probs_block(q.astype(np.float32).tolist()))
            run.write_round(rule="stochastic", draft_tokens=drafts, emitted=emitted,
                            target=st.probs_block(p.astype(np.float32).tolist()), draft=draft)
    return out.getvalue()


def _check(text: str, tmp_path: Path, name: str) -> Any:
    report = check_trace(read_trace(_path(tmp_path, text)))
    return next(c for c in report.checks if c.name == name)


@pytest.mark.parametrize("record", ["probs", "logits"])
def test_draft_law_passes_drafts_from_the_recorded_q_and_fails_a_temperature_applied_twice(
    tmp_path: Path, record: str
) -> None:
    # Recorded at T = 0.5; drawn at 0.5 (correct) or at 0.25 = 0.5 ** 2 (applied twice).
    correct = _check(_drafter_trace(150, record, 0.5, seed=1), tmp_path, "draft-law")
    assert correct.verdict is Verdict.PASS, correct.statistic
    twice = _check(_drafter_trace(150, record, 0.25, seed=1), tmp_path, "draft-law")
    assert twice.verdict is Verdict.FAIL, twice.statistic
    assert "sharper than its record" in twice.detail
    # Its power against the bug, computed on the correct trace, says as much.
    power = next(p for p in correct.power if p.bug == "mis-described-drafter")
    assert power.probability is not None and power.probability > 0.9, power


def test_draft_law_does_not_run_without_a_drafter_law(tmp_path: Path) -> None:
    out = io.StringIO()
    with st.TraceWriter(out, vocab_size=2) as trace:
        run = trace.start_run("r")
        for _ in range(3):
            run.write_round(rule="greedy-argmax", draft_tokens=[0], emitted=[0, 0],
                            target=st.probs_block([[1.0, 0.0], [1.0, 0.0]]))
    result = _check(out.getvalue(), tmp_path, "draft-law")
    assert result.verdict is Verdict.NOT_RUN and "no drafter law" in result.detail


def _round_stub(rows: np.ndarray | None = None, token: int = 0) -> Round:
    return Round(index=0, line=2, position=0, rule="stochastic", draft_tokens=[],
                 emitted=[token], num_accepted=0,
                 target_rows=rows if rows is not None else np.ones((1, 1), dtype=np.float32),
                 draft_rows=None, uniforms=None, cache=None, stopped=False)


def _bonus(p: np.ndarray, token: int, blind: np.ndarray) -> Position:
    """A bonus position with its rows; its statistics are those of a one-row round."""
    stub = _round_stub(p.astype(np.float32)[None, :], token)
    return Position(round=stub, offset=1, p=p, q=None, draft=None, emitted=token,
                    accepted=False, stats=position_stats(round_stats(stub), 0), p_blind=blind)


def _blind_positions(rng: np.random.Generator, n: int, from_blind: bool) -> list[Position]:
    """n bonus positions with random p and p_blind, the token drawn from one of them."""
    out = []
    for _ in range(n):
        p, blind = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        token = int(rng.choice(V, p=blind if from_blind else p))
        out.append(_bonus(p, token, blind))
    return out


def check_history(positions: list[Position], alpha: float) -> Any:
    """The history check on these positions alone (no power model)."""
    state = HistoryState()
    state.update(RoundFacts(positions[0].round, positions, False,
                            round_stats(positions[0].round)))
    return state.result(alpha)


def test_the_history_bet_false_alarms_at_most_alpha_and_catches_the_blind_law() -> None:
    # Ville's inequality bounds the false alarms at every length, with no asymptotics:
    # 400 correct traces of 60 positions at alpha = 0.2 fail at most 0.2 of the time (up
    # to 3 binomial standard deviations); the bet is a supermartingale, so well below.
    rng = np.random.default_rng(7)
    alpha, replicates = 0.2, 400
    alarms = sum(check_history(_blind_positions(rng, 60, False), alpha).verdict
                 is Verdict.FAIL for _ in range(replicates))
    assert alarms / replicates <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / replicates)
    caught = sum(check_history(_blind_positions(rng, 60, True), 1e-4).verdict
                 is Verdict.FAIL for _ in range(50))
    assert caught >= 45


def test_the_history_bet_survives_a_token_the_blind_law_rules_out() -> None:
    p, blind = np.array([0.5, 0.5]), np.array([1.0, 0.0])
    positions = [_bonus(p, 1, blind)] + [_bonus(p, 0, blind) for _ in range(40)]
    # One factor 1/2 for token 1, then 3/2 per token 0: the wealth recovers and crosses.
    result = check_history(positions, 1e-4)
    assert result.verdict is Verdict.FAIL, result.statistic


@pytest.fixture(scope="module")
def pair() -> Any:
    from specaccept import load_pair

    return load_pair()


def test_the_history_check_catches_penalties_blind_to_the_drafts_without_uniforms_or_top_k(
    pair: Any, tmp_path: Path
) -> None:
    from broken_engines import BUGS, run_engine
    from specaccept import SamplerConfig

    case = next(c for c in BUGS if c.bug == "penalties-blind-to-drafts")
    config = SamplerConfig(temperature=1.0, repetition_penalty=3.0)
    broken = _check(run_engine(case, 30, pair=pair, config=config), tmp_path, "history")
    assert broken.verdict is Verdict.FAIL, broken.statistic
    assert "penalties blind to the drafts" in broken.detail
    correct = _check(run_engine(None, 30, pair=pair, config=config), tmp_path, "history")
    assert correct.verdict is Verdict.PASS, correct.statistic
    power = next(p for p in correct.power if p.bug == case.bug)
    assert power.probability is not None and power.probability > 0.9, power


def _batched_trace(
    steps: int, shared: bool, record_uniforms: bool, seed: int, mixed_run: int | None = None,
    slots: int = 4,
) -> str:
    """`slots` requests verified in lockstep, stochastic, k = 2; with `shared` one row of
    uniforms per step serves every request; request `mixed_run` is decided with the target
    rows of the request before it in the batch (an off-by-one row), and records its own."""
    rng = np.random.default_rng(seed)
    out = io.StringIO()
    with st.TraceWriter(out, vocab_size=V, engine="synthetic batch") as trace:
        runs = [trace.start_run(f"request-{b}") for b in range(slots)]
        for step in range(steps):
            common = rng.random((3, 2))
            previous = None
            for slot, run in enumerate(runs):
                k = 2
                p = rng.dirichlet(np.ones(V) * 0.5, size=k + 1)
                q = rng.dirichlet(np.ones(V) * 0.5, size=k)
                drafts = [_draw(q[i], rng.random()) for i in range(k)]
                u = common if shared else rng.random((k + 1, 2))
                decided = previous if slot == mixed_run and previous is not None else p
                emitted = _stochastic_round(decided, q, drafts, u)
                previous = p
                run.write_round(
                    rule="stochastic", draft_tokens=drafts, emitted=emitted,
                    target=st.probs_block(p.astype(np.float32).tolist()),
                    draft=st.probs_block(q.astype(np.float32).tolist()),
                    uniforms=u.astype(np.float32).tolist() if record_uniforms else None,
                    batch=(step, slot))
    return out.getvalue()


def _batch_check(text: str, tmp_path: Path) -> Any:
    report = check_trace(read_trace(_path(tmp_path, text)), alpha=1e-4)
    return next(check for check in report.checks if check.name == "batch")


def test_the_batch_check_passes_independent_rows_and_names_a_shared_uniform(
    tmp_path: Path
) -> None:
    correct = _batch_check(_batched_trace(30, False, True, seed=3), tmp_path)
    assert correct.verdict is Verdict.PASS, correct.statistic
    shared = _batch_check(_batched_trace(3, True, True, seed=3), tmp_path)
    assert shared.verdict is Verdict.FAIL, shared.statistic
    assert "in the same step" in shared.detail and "share their uniforms" in shared.detail


def test_the_batch_check_sees_a_shared_coin_from_the_accept_outcomes_alone(
    tmp_path: Path
) -> None:
    correct = _batch_check(_batched_trace(300, False, False, seed=4), tmp_path)
    assert correct.verdict is Verdict.PASS, correct.statistic
    assert correct.power[0].probability is not None and correct.power[0].probability > 0.99
    shared = _batch_check(_batched_trace(300, True, False, seed=4), tmp_path)
    assert shared.verdict is Verdict.FAIL, shared.statistic
    assert "move together" in shared.detail


def test_the_batch_check_names_a_request_that_fails_on_its_own(tmp_path: Path) -> None:
    result = _batch_check(_batched_trace(60, False, False, seed=5, mixed_run=2), tmp_path)
    assert result.verdict is Verdict.FAIL, result.statistic
    assert "run 'request-2'" in result.detail, result.detail


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_the_batch_field_is_read_checked_and_refused_where_it_cannot_be(tmp_path: Path) -> None:
    lines = _lines(_batched_trace(2, False, False, seed=6, slots=2))
    trace = read_trace(_path(tmp_path, "".join(json.dumps(x) + "\n" for x in lines)))
    assert [r.batch for r in trace.rounds] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    rounds = [i for i, x in enumerate(lines) if "round" in x]

    def refused(edit: dict[str, Any], field: str, line: int) -> None:
        edited = [dict(x) for x in lines]
        edited[rounds[line]].update(edit)
        with pytest.raises(TraceError) as error:
            read_trace(_path(tmp_path, "".join(json.dumps(x) + "\n" for x in edited), "bad"))
        assert error.value.field == field, error.value

    refused({"batch": {"step": 0, "slot": 0}}, "batch.slot", 1)  # slot 0 of step 0 twice
    refused({"batch": {"step": 0, "slot": 5}}, "batch.step", 2)  # run 0 back to step 0
    refused({"batch": {"step": -1, "slot": 0}}, "batch.step", 0)
    refused({"batch": [0, 0]}, "batch", 0)
    refused({"batch": {"step": 0}}, "batch", 0)
    version_1 = [{**lines[0], "version": 1, "prompt_length": 1}]
    version_1 += [{k: v for k, v in x.items() if k != "run"} for x in lines[1:]
                  if x.get("run") == "request-0" and "round" in x]
    with pytest.raises(TraceError) as error:
        read_trace(_path(tmp_path, "".join(json.dumps(x) + "\n" for x in version_1), "v1"))
    assert error.value.field == "batch"


def test_the_writer_refuses_a_batch_the_reader_would_refuse() -> None:
    with st.TraceWriter(io.StringIO(), vocab_size=2) as trace:
        one, two = trace.start_run("a"), trace.start_run("b")
        block = st.probs_block([[1.0, 0.0]])
        one.write_round(rule="greedy-argmax", draft_tokens=[], emitted=[0], target=block,
                        batch=(0, 0))
        with pytest.raises(st.TraceWriteError, match="slot 0 of step 0"):
            two.write_round(rule="greedy-argmax", draft_tokens=[], emitted=[0], target=block,
                            batch=(0, 0))
        with pytest.raises(st.TraceWriteError, match="steps increase"):
            one.write_round(rule="greedy-argmax", draft_tokens=[], emitted=[0], target=block,
                            batch=(0, 1))
        with pytest.raises(st.TraceWriteError, match="batch"):
            one.write_round(rule="greedy-argmax", draft_tokens=[], emitted=[0], target=block,
                            batch=(1, -1))
    with st.TraceWriter(io.StringIO(), vocab_size=2, version=1) as trace:
        run = trace.start_run("r")
        with pytest.raises(st.TraceWriteError, match="version 2 field"):
            run.write_round(rule="greedy-argmax", draft_tokens=[], emitted=[0],
                            target=st.probs_block([[1.0, 0.0]]), batch=(0, 0))


def test_a_batched_round_satisfies_the_schema() -> None:
    import importlib

    jsonschema: Any = importlib.import_module("jsonschema")  # a dev dependency, untyped
    schema = json.loads((Path(__file__).resolve().parents[1] / "spec"
                         / "trace_format.schema.json").read_text())
    for line in _lines(_batched_trace(2, False, True, seed=8, slots=2)):
        jsonschema.validate(line, schema)
    bad = _lines(_batched_trace(1, False, False, seed=8, slots=1))[-1]
    bad["batch"] = {"step": 0, "slot": 0, "row": 1}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_the_format_pages_batched_example_is_read_and_passes(tmp_path: Path) -> None:
    import re

    page = (Path(__file__).resolve().parents[1] / "spec" / "trace_examples.md").read_text("utf-8")
    block = next(b for b in re.findall(r"```json\n(.*?)```", page, re.DOTALL) if '"batch"' in b)
    records: list[str] = []
    for line in block.splitlines():
        if line.startswith("{"):
            records.append(line)
        else:
            records[-1] += line
    trace = read_trace(_path(tmp_path, "".join(r + "\n" for r in records)))
    assert [(r.run.id, r.batch) for r in trace.rounds] == [("r0", (0, 0)), ("r1", (0, 1))]
    report = check_trace(trace)
    assert report.passed, report.to_text()
