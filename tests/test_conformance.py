"""The conformance kit: correct engines pass every check, each known bug is caught.

The broken engines live in `broken_engines.py`; each is run for the number of rounds
its `EngineCase` states and must be flagged, at alpha = 1e-4, by the checks it names.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest

pytest.importorskip("mlx_lm")

from broken_engines import BUGS, EngineCase, run_case, run_engine
from specaccept import AcceptanceRule, SamplerConfig, SpeculativeGenerator, load_pair
from specaccept.conformance import ConformanceReport, Verdict, check_trace, read_trace
from specaccept.shell.conformance import trace_generator
from specaccept.shell.conformance.mlx_lm_adapter import trace_mlx_lm

UNBATCHED_WITHOUT_PENALTIES = {
    **dict.fromkeys(("replay", "fresh", "support", "acceptance", "law", "rewind", "draft-law"),
                    Verdict.PASS),
    "history": Verdict.NOT_RUN, "batch": Verdict.NOT_RUN,
}
"""A correct trace of one unbatched run with no penalties: every check that runs passes;
the history check has no penalty to check and the batch check no batch."""


@pytest.fixture(scope="module")
def pair() -> Any:
    return load_pair()


def _check(text: str, tmp_path: Path, name: str = "trace.jsonl") -> ConformanceReport:
    path = tmp_path / name
    path.write_text(text)
    return check_trace(read_trace(path))


def _verdicts(report: ConformanceReport) -> dict[str, Verdict]:
    return {check.name: check.verdict for check in report.checks}


@pytest.mark.parametrize(
    ("temperature", "rule"),
    [(0.0, "auto"), (0.7, "sampler-match"), (1.0, "stochastic"), (1.0, "block")],
)
def test_the_generator_passes_every_check_replay_included(
    pair: Any, tmp_path: Path, temperature: float, rule: Any
) -> None:
    generator = SpeculativeGenerator(
        pair.target, pair.drafter, SamplerConfig(temperature=temperature), rule=rule
    )
    stream = io.StringIO()
    trace_generator(generator, pair.tokenizer.encode("ROMEO:\n"), 160, stream, seed=5)
    report = _check(stream.getvalue(), tmp_path)
    assert _verdicts(report) == UNBATCHED_WITHOUT_PENALTIES, report.to_text()
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[1] / "spec"
                         / "trace_format.schema.json").read_text())
    for line in stream.getvalue().splitlines():
        jsonschema.validate(json.loads(line), schema)


def test_block_verification_stopping_at_the_first_failure_fails_the_replay(
    pair: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The generator's rounds decided by the first-failure variant: the replay, which
    # decides each block-verified round with verify_blockwise, must diverge.
    import specaccept.shell.generator as generator_module
    from wrong_rules import joint_verification

    monkeypatch.setattr(generator_module, "verify_blockwise",
                        joint_verification(longest_prefix=False))
    generator = SpeculativeGenerator(  # the core path, where the variant was injected
        pair.target, pair.drafter, SamplerConfig(temperature=1.0), rule="block",
        fast_path=False,
    )
    stream = io.StringIO()
    trace_generator(generator, pair.tokenizer.encode("ROMEO:\n"), 160, stream, seed=5)
    replay = next(c for c in _check(stream.getvalue(), tmp_path).checks if c.name == "replay")
    assert replay.verdict is Verdict.FAIL, replay.detail
    assert "block verification keeps" in replay.detail


def test_the_correct_engine_passes_and_the_checks_have_power(pair: Any, tmp_path: Path) -> None:
    report = _check(run_engine(None, 50, pair=pair, record_uniforms=True), tmp_path)
    assert report.passed, report.to_text()
    powers = {(c.name, p.bug): p.probability for c in report.checks for p in c.power}
    # The kit says what a pass is worth, from the trace's own p and q.
    assert powers[("support", "resample-from-p")] is not None
    assert powers[("support", "resample-from-p")] > 0.99
    assert powers[("replay", "softmax-residual")] > 0.99  # type: ignore[operator]
    assert powers[("rewind", "draft-cache-over-trim")] == 1.0
    # Position keys are harmless to a stochastic engine; the fresh check says so.
    assert powers[("fresh", "position-keyed-uniforms")] is None
    # At temperature 1 the raw and the tempered q coincide: no power, and it says so.
    assert powers[("acceptance", "raw-logits-q")] is not None
    assert powers[("acceptance", "raw-logits-q")] < 0.01


@pytest.mark.parametrize("case", BUGS, ids=[case.bug for case in BUGS])
def test_each_broken_engine_is_caught_within_its_stated_rounds(
    pair: Any, tmp_path: Path, case: EngineCase
) -> None:
    report = _check(run_case(case, case.rounds, pair=pair,
                             record_uniforms=case.records_uniforms), tmp_path)
    verdicts = _verdicts(report)
    assert not report.passed
    for name in case.caught_by:
        assert verdicts[name] is Verdict.FAIL, report.to_text()
    # Caught without the engine's uniforms; or, when it records them, though it decides
    # faithfully on them (the position-keyed engine: only their freshness betrays it).
    assert verdicts["replay"] is (Verdict.PASS if case.records_uniforms else Verdict.NOT_RUN)
    if case.bug == "raw-logits-q":
        acceptance = next(c for c in report.checks if c.name == "acceptance")
        assert "IMPOSSIBLE" in acceptance.detail  # above the lossless ceiling
    if case.bug == "temperature-squared":
        # The sharpened and the flattened run cancel in the pooled histogram: both its
        # chi-squares stay below 38.58, the 0.005 quantile's bound on 19 d.o.f., so only the
        # sum over sampler settings fails it.
        law = next(c for c in report.checks if c.name == "law")
        pooled = re.match(r"chi2 = ([0-9.]+) \(p-order\), ([0-9.]+) \(q/p-order\), 19 d\.o\.f\.;"
                          r" by sampler setting \(2 groups\)", law.statistic)
        assert pooled is not None, law.statistic
        assert max(float(pooled[1]), float(pooled[2])) < 38.58, law.statistic


@pytest.mark.parametrize(
    ("bug", "diagnosis"),
    [("resample-from-p", "resampled from p, not the residual"),
     ("softmax-residual", "residual"),
     ("argmax-at-temperature", "the target's draw")],
)
def test_replay_names_the_first_divergence_in_the_spec_terms(
    pair: Any, tmp_path: Path, bug: str, diagnosis: str
) -> None:
    case = next(c for c in BUGS if c.bug == bug)
    report = _check(run_engine(case, 15, pair=pair, record_uniforms=True), tmp_path)
    replay = next(c for c in report.checks if c.name == "replay")
    assert replay.verdict is Verdict.FAIL
    assert diagnosis in replay.detail and "round " in replay.detail, replay.detail


def test_block_verification_is_checked_against_its_own_closed_form(
    pair: Any, tmp_path: Path
) -> None:
    block = AcceptanceRule.BLOCK
    report = _check(run_engine(None, 40, pair=pair, rule=block, record_uniforms=True), tmp_path)
    assert _verdicts(report) == UNBATCHED_WITHOUT_PENALTIES, report.to_text()
    acceptance = next(c for c in report.checks if c.name == "acceptance")
    assert "block rounds kept" in acceptance.statistic
    fresh = next(c for c in report.checks if c.name == "fresh")
    assert fresh.power[0].bug == "position-keyed-uniforms"
    assert fresh.power[0].probability is not None and fresh.power[0].probability >= 0.99, \
        fresh.power[0].note
    # An engine that claims block but decides token by token is lossless, yet not block.
    wrong = EngineCase("token-level-under-block", block, SamplerConfig(), 40, ("replay",))
    report = _check(run_engine(wrong, 40, pair=pair, record_uniforms=True), tmp_path)
    replay = next(c for c in report.checks if c.name == "replay")
    assert replay.verdict is Verdict.FAIL and "longest passing prefix" in replay.detail, \
        replay.detail


def test_the_mlx_lm_adapter_leaves_mlx_lm_unchanged(pair: Any, tmp_path: Path) -> None:
    import mlx.core as mx
    from mlx_lm.generate import speculative_generate_step
    from mlx_lm.sample_utils import make_sampler

    prompt = pair.tokenizer.encode("ROMEO:\n")
    mx.random.seed(3)
    plain = [int(t) for t, _, _ in speculative_generate_step(
        mx.array(prompt, dtype=mx.uint32), pair.target, pair.drafter, num_draft_tokens=4,
        max_tokens=60, sampler=make_sampler(0.7),
    )]
    stream = io.StringIO()
    traced = trace_mlx_lm(pair.target, pair.drafter, prompt, 60, stream, temperature=0.7, seed=3)
    assert traced == plain
    path = tmp_path / "mlx.jsonl"
    path.write_text(stream.getvalue())
    trace = read_trace(path)
    assert [t for r in trace.rounds for t in r.emitted] == plain
    assert all(r.rule == AcceptanceRule.SAMPLER_MATCH for r in trace.rounds)
    report = check_trace(trace)
    verdicts = _verdicts(report)
    assert verdicts["replay"] is Verdict.NOT_RUN, report.to_text()
    assert verdicts["rewind"] is Verdict.PASS, report.to_text()


def test_conform_records_times_and_checks_an_engine_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specaccept.cli import main

    trace = tmp_path / "generator.jsonl"
    status = main(["conform", "--record", "specaccept", "--temp", "1.0", "-n", "40", "--time",
                   str(trace)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert read_trace(trace).rounds
    assert "verdict: CONFORMS" in out and "time: untraced run" in out
    assert "x the untraced run" in out


def test_the_fresh_check_bounds_coincidences_on_the_grid_the_uniforms_were_written_on(
    pair: Any, tmp_path: Path
) -> None:
    from specaccept.conformance.fresh import FreshState

    # A correct block engine whose uniforms were written with three decimals: 200 read
    # values on a grid of 1,000 points coincide about 20 times by chance alone. Bounded
    # at 2**-24 the check would cry wolf; on the grid the values lie on it must not.
    lines = run_engine(None, 40, pair=pair, rule=AcceptanceRule.BLOCK,
                       record_uniforms=True).splitlines()
    rounded = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        record["uniforms"] = [[round(u, 3) for u in row] for row in record["uniforms"]]
        rounded.append(json.dumps(record))
    path = tmp_path / "rounded.jsonl"
    path.write_text("\n".join(rounded) + "\n")
    fresh_state = FreshState()
    for round_ in read_trace(path).rounds:
        fresh_state.update(round_)
    fresh = fresh_state.result(1e-4)
    assert "spacing 2^-10" in fresh.statistic, fresh.statistic  # 10^-3, rounded to 2^-10
    assert fresh.verdict is Verdict.PASS, fresh.statistic
    rereads = int(fresh.statistic.split("D = ")[1].split()[0])
    assert rereads > 2  # the coincidences are there: 2**-24 spacing would have failed it


def test_position_keyed_power_is_the_chance_of_a_reread_over_the_kept_length(
    pair: Any, tmp_path: Path
) -> None:
    # Two rounds of one run: a position-keyed engine re-reads in the second round exactly
    # when the first keeps at most k - 2 drafts, whatever this trace's first round kept.
    import numpy as np

    from specaccept.conformance.positions import verify_block_round

    text = run_engine(None, 2, pair=pair, rule=AcceptanceRule.BLOCK, record_uniforms=True)
    (tmp_path / "two.jsonl").write_text(text)
    first = read_trace(tmp_path / "two.jsonl").rounds[0]
    law = np.array(verify_block_round(first).accepted_length_law, dtype=np.float64)
    fresh = next(c for c in _check(text, tmp_path).checks if c.name == "fresh")
    assert fresh.power[0].probability == pytest.approx(float(law[:first.k - 1].sum()),
                                                       rel=1e-12), fresh.power[0].note
