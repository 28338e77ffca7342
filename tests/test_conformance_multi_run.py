"""Version 2 traces: many runs in one file, fused prefills, lazy rewinds, accept uniforms alone.

Every trace here is built from the small engine loop of `broken_engines.py` (correct, or
with one bug) and converted to version 2 the way the format page says a version 1 file
converts, so that each feature is checked against a trace whose verdict is known: the
correct runs must pass, and each tampering must fail the check it concerns.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest

pytest.importorskip("mlx_lm")

from broken_engines import BUGS, run_engine
from specaccept import SamplerConfig, load_pair
from specaccept.conformance import (
    ConformanceReport,
    TraceError,
    Verdict,
    check_trace,
    read_trace,
)

Record = dict[str, Any]
CHECKS = ("replay", "fresh", "support", "acceptance", "law", "rewind", "draft-law", "history")
"""The checks a correct unbatched trace with a penalty run passes (batch does not run)."""


@pytest.fixture(scope="module")
def pair() -> Any:
    return load_pair()


def as_version_2(text: str, run_id: str) -> tuple[Record, list[Record]]:
    """A version 1 trace as a version 2 header, its run record and its rounds."""
    header, *rounds = (json.loads(line) for line in text.splitlines())
    run: Record = {"record": "run", "run": run_id}
    for key in ("prompt", "prompt_length", "target_sampler", "draft_sampler"):
        if key in header:
            run[key] = header[key]
    new_header = {"format": header["format"], "version": 2, "vocab_size": header["vocab_size"]}
    return new_header, [run, *({**r, "run": run_id} for r in rounds)]


def merged(*runs: tuple[str, str]) -> list[Record]:
    """Version 1 traces as the runs of one version 2 trace: every run record first, then
    the rounds interleaved one from each run in turn, as a batched engine writes them."""
    converted = [as_version_2(text, run_id) for run_id, text in runs]
    lines: list[Record] = [converted[0][0], *(records[0] for _, records in converted)]
    queues = [records[1:] for _, records in converted]
    while any(queues):
        for queue in queues:
            if queue:
                lines.append(queue.pop(0))
    return lines


def check(lines: list[Record], tmp_path: Path) -> ConformanceReport:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return check_trace(read_trace(path))


def verdicts(report: ConformanceReport) -> dict[str, Verdict]:
    return {c.name: c.verdict for c in report.checks}


def result(report: ConformanceReport, name: str) -> Any:
    return next(c for c in report.checks if c.name == name)


def decisions(report: ConformanceReport) -> int:
    found = re.search(r"\((\d+) decisions\)", result(report, "replay").statistic)
    assert found is not None, result(report, "replay").statistic
    return int(found.group(1))


CONFIGS = (
    SamplerConfig(temperature=1.0),
    # Penalties read each run's own history: merged runs keep it, run by run.
    SamplerConfig(temperature=1.0, repetition_penalty=3.0, top_k=8),
    SamplerConfig(temperature=0.6),
)


@pytest.fixture(scope="module")
def correct_runs(pair: Any) -> list[tuple[str, str]]:
    return [(f"seed-{seed}", run_engine(None, 12, seed=seed, config=config, pair=pair,
                                        record_uniforms=True))
            for seed, config in enumerate(CONFIGS)]


def test_runs_merged_into_one_trace_pass_and_pool_their_rounds(
    correct_runs: list[tuple[str, str]], tmp_path: Path
) -> None:
    report = check(merged(*correct_runs), tmp_path)
    assert verdicts(report) == {**dict.fromkeys(CHECKS, Verdict.PASS),
                                "batch": Verdict.NOT_RUN}, report.to_text()
    assert len(read_trace(tmp_path / "trace.jsonl").runs) == len(correct_runs)
    alone = [check(merged(run), tmp_path) for run in correct_runs]
    assert decisions(report) == sum(decisions(r) for r in alone)


def test_a_bug_in_one_run_of_several_fails_the_trace(
    pair: Any, correct_runs: list[tuple[str, str]], tmp_path: Path
) -> None:
    case = next(c for c in BUGS if c.bug == "resample-from-p")
    broken = ("broken", run_engine(case, case.rounds, seed=7, pair=pair))
    report = check(merged(correct_runs[0], broken, correct_runs[2]), tmp_path)
    assert verdicts(report)["support"] is Verdict.FAIL, report.to_text()


def test_a_run_recorded_twice_under_two_ids_reuses_its_randomness(
    correct_runs: list[tuple[str, str]], tmp_path: Path
) -> None:
    # Two runs seeded alike are one run recorded twice: H2 holds across the whole file.
    seed_id, text = correct_runs[0]
    report = check(merged((seed_id, text), ("again", text)), tmp_path)
    assert verdicts(report)["fresh"] is Verdict.FAIL, report.to_text()
    assert verdicts(check(merged((seed_id, text)), tmp_path))["fresh"] is Verdict.PASS


def _rounds(lines: list[Record]) -> list[Record]:
    return [line for line in lines[1:] if "record" not in line]


def _without_draws(lines: list[Record]) -> list[Record]:
    for line in _rounds(lines):
        line["uniforms"] = [[accept, None] for accept, _ in line["uniforms"]]
    return lines


def test_accept_uniforms_alone_replay_the_accept_decisions(
    correct_runs: list[tuple[str, str]], tmp_path: Path
) -> None:
    lines = _without_draws(merged(correct_runs[0]))
    report = check(lines, tmp_path)
    assert verdicts(report)["replay"] is Verdict.PASS, report.to_text()
    assert verdicts(report)["fresh"] is Verdict.PASS  # a null is no uniform to re-read
    tested = sum(min(len(r["emitted"]), len(r["draft_tokens"])) for r in _rounds(lines))
    assert decisions(report) == tested  # the accept decisions, not the draws


def test_accept_only_replay_catches_an_accept_decision_the_spec_does_not_make(
    correct_runs: list[tuple[str, str]], tmp_path: Path
) -> None:
    lines = _without_draws(merged(correct_runs[0]))
    path = tmp_path / "probe.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    trace = read_trace(path)
    # An accepted draft with p(d) < q(d): the spec rejects it for a test uniform near 1.
    found = next((n, i) for n, r in enumerate(trace.rounds) for i in range(r.num_accepted)
                 if r.draft_rows is not None
                 and r.target_rows[i, r.draft_tokens[i]] < 0.9 * r.draft_rows[i, r.draft_tokens[i]])
    _rounds(lines)[found[0]]["uniforms"][found[1]][0] = 0.9999
    report = check(lines, tmp_path)
    assert verdicts(report)["replay"] is Verdict.FAIL, report.to_text()


def test_a_round_with_no_recorded_test_uniform_is_not_replayed(
    correct_runs: list[tuple[str, str]], tmp_path: Path
) -> None:
    lines = merged(correct_runs[0])
    for line in _rounds(lines):
        line["uniforms"] = [[None, None] for _ in line["uniforms"]]
    report = check(lines, tmp_path)
    assert verdicts(report)["replay"] is Verdict.NOT_RUN
    assert "uniforms" in result(report, "replay").detail


def _fuse_first_round(lines: list[Record], *, fed_offset: int = 0, say_fed: bool = True) -> None:
    """Round 0 as an engine that prefills both models in their first forward records it."""
    run, first = lines[1], _rounds(lines)[0]
    start = len(run["prompt"]) - 1  # L: the tokens before round 0's current token
    k = len(first["draft_tokens"])
    cache = first["cache"]
    cache.update(target_before=0, draft_before=0, draft_fed=start + 1)
    if say_fed:
        cache["target_fed"] = start + 1 + k + fed_offset


@pytest.mark.parametrize(
    ("fed_offset", "say_fed", "expected"),
    [(0, True, Verdict.PASS), (1, True, Verdict.FAIL), (0, False, Verdict.FAIL)],
    ids=["says-what-it-fed", "fed-one-too-many", "silent-about-the-prefill"],
)
def test_a_fused_prefill_passes_rewind_exactly_when_it_says_what_it_fed(
    correct_runs: list[tuple[str, str]], tmp_path: Path, fed_offset: int, say_fed: bool,
    expected: Verdict,
) -> None:
    lines = merged(correct_runs[0])
    _fuse_first_round(lines, fed_offset=fed_offset, say_fed=say_fed)
    report = check(lines, tmp_path)
    assert verdicts(report)["rewind"] is expected, report.to_text()


@pytest.mark.parametrize("claimed", ["lazy", "eager"])
def test_a_lazy_target_rewind_is_checked_where_it_takes_effect(
    correct_runs: list[tuple[str, str]], tmp_path: Path, claimed: str
) -> None:
    # A lazy target keeps the rejected drafts' entries until its next forward: after the
    # round it holds every entry it was fed, and the next round's target_before shows the drop.
    lines = merged(correct_runs[0])
    rejected = 0
    for line in _rounds(lines):
        cache, k = line["cache"], len(line["draft_tokens"])
        cache["target_after"] = cache["target_before"] + k + 1
        cache["target_rewind"] = claimed
        rejected += len(line["emitted"]) < k + 1
    assert rejected, "the run must reject somewhere for the claim to matter"
    report = check(lines, tmp_path)
    assert verdicts(report)["rewind"] is (Verdict.PASS if claimed == "lazy" else Verdict.FAIL)


def _v1(text: str) -> list[Record]:
    return [json.loads(line) for line in text.splitlines()]


Edit = Callable[[list[Record]], None]
DEFECTS: list[tuple[str, Edit, int, str, str]] = [
    ("unopened-run", lambda ls: ls[3].update(run="nobody"), 4, "run", "no earlier line opened"),
    ("run-opened-twice", lambda ls: ls.insert(3, dict(ls[1])), 4, "run", "a second time"),
    ("bad-run-id", lambda ls: ls[1].update(run="has space"), 2, "run", "1 to 128 characters"),
    ("prompt-in-v2-header", lambda ls: ls[0].update(prompt=[1]), 1, "prompt", "run record"),
    ("extra-not-an-object", lambda ls: ls[2].update(extra=[1]), 3, "extra", "JSON object"),
    ("bad-rewind-timing", lambda ls: ls[2]["cache"].update(target_rewind="soon"), 3,
     "cache.target_rewind", "'eager' or 'lazy'"),
    ("round-field-misspelt", lambda ls: ls[2].update(extras={}), 3, "extras",
     "not a round field"),
    ("not-a-run-record", lambda ls: ls[1].update(record="runs"), 2, "record", "must be 'run'"),
]


@pytest.mark.parametrize(("edit", "line", "field", "message"),
                         [d[1:] for d in DEFECTS], ids=[d[0] for d in DEFECTS])
def test_a_malformed_version_2_trace_names_its_line_and_field(
    correct_runs: list[tuple[str, str]], tmp_path: Path, edit: Edit, line: int, field: str,
    message: str,
) -> None:
    lines = merged(correct_runs[0])
    edit(lines)
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in lines))
    with pytest.raises(TraceError, match=re.escape(message)) as raised:
        read_trace(path)
    assert (raised.value.line, raised.value.field) == (line, field), str(raised.value)


@pytest.mark.parametrize(
    ("edit", "field"),
    [(lambda ls: ls[1].update(run="a"), "run"),
     (lambda ls: ls[1].update(extra={}), "extra"),
     (lambda ls: ls[1]["uniforms"][0].__setitem__(1, None), "uniforms[0][1]")],
    ids=["run", "extra", "null-uniform"],
)
def test_a_version_2_field_in_a_version_1_trace_is_an_error(
    correct_runs: list[tuple[str, str]], tmp_path: Path, edit: Edit, field: str
) -> None:
    lines = _v1(correct_runs[0][1])
    edit(lines)
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in lines))
    with pytest.raises(TraceError) as raised:
        read_trace(path)
    assert (raised.value.line, raised.value.field) == (2, field), str(raised.value)


def test_rewind_power_is_claimed_once_a_run_has_a_round_after_its_first(
    correct_runs: list[tuple[str, str]], tmp_path: Path
) -> None:
    # A run's first round starts from the prompt, so an over-trimmed drafter cache shows
    # for certain only in that run's next round, never in another run's first round.
    lines = merged(*correct_runs)
    opening, rounds = lines[:1 + len(correct_runs)], lines[1 + len(correct_runs):]
    firsts = check(opening + rounds[:len(correct_runs)], tmp_path)
    power = result(firsts, "rewind").power[0]
    assert power.probability is None and "after its first" in power.note, power
    seconds = check(opening + rounds[:len(correct_runs) + 1], tmp_path)
    assert result(seconds, "rewind").power[0].probability == 1.0
