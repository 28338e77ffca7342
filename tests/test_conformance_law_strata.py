"""The law checks per sampler setting: a bug that moves the law one way at one setting and the
other way at another cancels in a pooled chi-square, not in the sum of the settings' own.

Found on llama.cpp's recorder with its sampler chain applying the temperature twice: too
sharp at T = 0.7, too flat at T = 1.3, and over the mix the pooled law check passed (p = 0.36).
Here the synthetic engine (benchmarks/synthetic_engine.py) plants the same bug with no
uniforms recorded, so replay cannot see it; the pooled chi-square passes it and the stratified
one fails it; the draft-law and tree-law checks likewise. Then: a correct engine over mixed
settings false-alarms at most alpha, the strata of pieces merged equal those of one pass,
field for field, at every cut, and the power model of the bug class is the law at T**2.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

import specaccept_trace
from specaccept.conformance import Verdict, check_trace, read_trace
from specaccept.conformance.bugs import TEMPERATURE_SQUARED
from specaccept.conformance.law import (
    BIN_CHOICES,
    STRATUM_MIN,
    TEMPERATURE_BANDS,
    LawCell,
    LawState,
    PitCounts,
    law_tests,
    merge_strata,
    pooled_laws,
    sampler_stratum,
    stratum_cell,
    stratum_groups,
)
from specaccept.conformance.pieces import check_piece, merge_states
from specaccept.conformance.tree_checks import TreeLawState
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.tree import TreeScheme, verify_tree
from specaccept.shell.tree_generator import full_tree_parents
from test_synthetic_engine import engine

ALPHA = 1e-4


def _trace(tmp_path: Path, *arguments: str) -> Path:
    path = tmp_path / "trace.jsonl"
    with contextlib.redirect_stdout(io.StringIO()):
        assert engine.main(["--vocab", "67", "--k", "4", "--out", str(path), "--no-uniforms",
                            *arguments]) == 0
    return path


@pytest.mark.parametrize("bug", [None, "temperature-squared"])
def test_a_temperature_applied_twice_at_0_7_and_1_3_passes_pooled_and_fails_by_setting(
    tmp_path: Path, bug: str | None
) -> None:
    path = _trace(tmp_path, "--rounds", "50", "--runs", "4", "--seed", "2",
                  "--temperatures", "0.7,1.3", *(["--bug", bug] if bug else []))
    trace = read_trace(path)
    report = {check.name: check for check in check_trace(trace, alpha=ALPHA).checks}
    law, draft_law = report["law"], report["draft-law"]
    assert report["replay"].verdict is Verdict.NOT_RUN  # no uniforms: replay cannot see it
    if bug is None:
        assert law.verdict is Verdict.PASS and draft_law.verdict is Verdict.PASS, (law,
                                                                                   draft_law)
        return
    # The pooled chi-squares alone (the law check before it kept settings apart) at its
    # threshold alpha / 2: both orderings pass.
    state = check_piece((str(path), 2, None)).law
    tests = law_tests({key: cell.pit for key, cell in state.strata.items()})
    assert len(tests.groups) == 2 and tests.stratified is not None
    assert min(p for _, p in tests.pooled) > ALPHA / 2, tests.pooled
    # Summed over the two settings, the same counts fail by orders of magnitude.
    assert tests.stratified[0].p_value < 1e-6, tests.stratified
    assert law.verdict is Verdict.FAIL, law
    assert "by sampler setting: most at temperature in [0.648, 0.771)" in law.detail
    # The drafter applies it twice too: the draft-law check, per drafter setting, fails.
    assert draft_law.verdict is Verdict.FAIL and "by drafter setting" in draft_law.statistic


def _pit_counts(u: np.ndarray) -> PitCounts:
    """`PitCounts` of these values, as `add` would count them one by one (vectorised)."""
    counts = {bins: np.bincount(np.minimum((u * bins).astype(np.int64), bins - 1),
                                minlength=bins).tolist() for bins in BIN_CHOICES}
    return PitCounts(int(u.size), counts)


def _correct_pit(rng: np.random.Generator, n: int, vocab: int, temperature: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The randomised PIT, under the p order and under a second order fixed before the
    draw, of n tokens drawn from their own p (a correct engine at `temperature`)."""
    logits = rng.standard_normal((n, vocab)) * 2.0
    p = np.exp((logits - logits.max(axis=1, keepdims=True)) / temperature)
    p /= p.sum(axis=1, keepdims=True)
    tokens = (p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1).clip(0, vocab - 1)
    jitter = rng.random(n)
    out = []
    for key in (p, rng.random((n, vocab))):
        order = np.argsort(-key, axis=1, kind="stable")
        ranked = np.take_along_axis(p, order, axis=1)
        lower = np.cumsum(ranked, axis=1) - ranked
        rank = np.argsort(order, axis=1)[np.arange(n), tokens]
        out.append(np.minimum(lower[np.arange(n), rank]
                              + jitter * p[np.arange(n), tokens], np.nextafter(1.0, 0.0)))
    return out[0], out[1]


def test_a_correct_engine_over_mixed_settings_false_alarms_at_most_alpha() -> None:
    """2,000 traces of a correct engine over four settings (one of them too small for a
    stratum of its own, so the remainder is exercised): the law verdict, pooled and stratified
    chi-squares under both orderings with Bonferroni over the four, fails at most alpha of
    them (checked at alpha = 0.01, where a rate can be seen)."""
    rng = np.random.default_rng(5)
    alpha, traces = 0.01, 2000
    settings = ((0.7, 240), (1.3, 160), (1.0, 90), (0.0001, 30))
    failed = 0
    for _ in range(traces):
        state = LawState()
        for temperature, n in settings:
            by_p, by_qp = _correct_pit(rng, n, 12, temperature)
            key = sampler_stratum(SamplerConfig(temperature=temperature))
            state.strata[key] = LawCell({"p": _pit_counts(by_p), "q/p": _pit_counts(by_qp)})
        result = state.result(alpha)
        assert "pooled and by sampler setting" in result.threshold
        failed += result.verdict is Verdict.FAIL
    # Bonferroni bounds the rate by alpha; 3 binomial standard deviations of slack.
    assert failed <= alpha * traces + 3 * (alpha * traces) ** 0.5, failed


def _counted(values: list[tuple[str, float]]) -> dict[str, PitCounts]:
    strata: dict[str, PitCounts] = {}
    for setting, u in values:
        stratum_cell(strata, setting, PitCounts).add(u)
    return strata


def test_strata_merge_as_one_pass_at_every_cut_and_in_any_order() -> None:
    """Forty settings in an order that repeats them: the strata of two pieces merged equal one
    pass's, keys, their order and counts, at every cut; three pieces at a sample of cuts; and
    shards merged in any order hold the same counts."""
    rng = np.random.default_rng(2)
    settings = [f"setting {int(s)}" for s in rng.integers(40, size=300)]
    values = [(s, float(u)) for s, u in zip(settings, rng.random(300), strict=True)]
    whole = _counted(values)
    for cut in range(len(values) + 1):
        merged = _counted(values[:cut])
        merge_strata(merged, _counted(values[cut:]))
        assert list(merged) == list(whole) and merged == whole, cut
    for first, second in itertools.combinations(range(0, 301, 23), 2):
        merged = _counted(values[:first])
        for piece in (values[first:second], values[second:]):
            merge_strata(merged, _counted(piece))
        assert list(merged) == list(whole) and merged == whole, (first, second)
    shards = [_counted(values[i:i + 37]) for i in range(0, 300, 37)]
    for order in (list(range(len(shards)))[::-1], list(rng.permutation(len(shards)))):
        merged = {}
        for i in order:
            merge_strata(merged, _counted(values[37 * i:37 * i + 37]))
        assert merged == whole, order
    assert len(shards) > 2


def test_a_trace_of_twenty_temperatures_checked_in_pieces_equals_one_pass(
    tmp_path: Path,
) -> None:
    """Twenty temperatures a quarter octave apart, one a request, and one past the last band:
    every one its stratum (the last in the band above 2**4), and pieces cut anywhere merge to
    one pass's law and draft-law states and report."""
    temperatures = ",".join(f"{2 ** (j / 4):.4f}" for j in range(-10, 9)) + ",40"
    path = _trace(tmp_path, "--rounds", "6", "--runs", "20", "--seed", "4",
                  "--temperatures", temperatures)
    lines = len(path.read_bytes().splitlines())
    whole = check_piece((str(path), 2, None))
    assert len(whole.law.strata) == 20 and len(whole.draft_law.strata) == 20
    assert f"temperature >= {2 ** ((2 * TEMPERATURE_BANDS + 1) / 8):.3g}" in whole.law.strata
    report = json.dumps(whole.report().to_json(), sort_keys=True)
    for cuts in ([3], [lines // 3], [lines // 2, lines - 5], [10, 40, 90]):
        bounds = [2, *cuts, lines + 1]
        states = [check_piece((str(path), first, last - 1))
                  for first, last in itertools.pairwise(bounds)]
        merged = merge_states(states)
        for name in ("law", "draft_law"):
            assert (json.dumps(getattr(merged, name).to_json())
                    == json.dumps(getattr(whole, name).to_json())), (name, cuts)
        assert json.dumps(merged.report().to_json(), sort_keys=True) == report, cuts


def test_the_stratum_of_a_temperature_is_its_quarter_octave() -> None:
    edges = [2 ** ((2 * j + 1) / 8) for j in range(-3, 3)]
    for edge in edges:
        assert (sampler_stratum(SamplerConfig(temperature=edge * (1 - 1e-12)))
                != sampler_stratum(SamplerConfig(temperature=edge * (1 + 1e-12))))
    assert sampler_stratum(SamplerConfig(temperature=0.7)) == sampler_stratum(
        SamplerConfig(temperature=0.75))
    # The other fields do not split a stratum (so that their count stays bounded).
    assert sampler_stratum(SamplerConfig(temperature=0.7, top_p=0.9)) == sampler_stratum(
        SamplerConfig(temperature=0.7))
    assert sampler_stratum(SamplerConfig(temperature=2.0**-30)) == sampler_stratum(
        SamplerConfig(temperature=2.0**-5))


def test_small_settings_are_tested_together() -> None:
    """A setting with fewer than `STRATUM_MIN` values has no chi-square of its own; the small
    ones are tested together as a remainder, when it reaches 10 values, and left to the
    pooled chi-square when it does not."""
    assert stratum_groups({"a": 300, "b": 30, "c": 20, "d": STRATUM_MIN}) == [
        ["a"], ["d"], ["b", "c"]]
    assert stratum_groups({"a": 300, "b": 9}) == [["a"]]
    assert stratum_groups({"b": 30, "c": 20}) == [["b", "c"]]


def test_the_temperature_squared_model_is_the_law_at_t_squared() -> None:
    """The bug class's law, read off the recorded p at T, is the softmax of the logits at T**2
    (the law the synthetic engine's broken sampler draws from), at both sides of 1."""
    rng = np.random.default_rng(7)
    logits = (rng.standard_normal((6, 67)) * 3).astype(np.float16)
    for temperature in (0.25, 0.7, 1.3, 3.0):
        recorded = engine.distribution(logits, temperature).astype(np.float64)
        drawn = engine.distribution(logits, temperature * temperature).astype(np.float64)
        for row in range(logits.shape[0]):
            model = TEMPERATURE_SQUARED.drawn(recorded[row], SamplerConfig(temperature))
            assert isinstance(model, np.ndarray)
            np.testing.assert_allclose(model, drawn[row], rtol=1e-4, atol=1e-7)
    assert isinstance(TEMPERATURE_SQUARED.drawn(recorded[0], SamplerConfig(1.0)), str)
    assert isinstance(TEMPERATURE_SQUARED.drawn(recorded[0], SamplerConfig(0.7, top_k=5)), str)


def test_the_law_check_s_power_against_temperature_squared_is_the_stratified_test_s(
    tmp_path: Path,
) -> None:
    """On a correct trace over 0.7 and 1.3, the power the law check reports against a
    temperature applied twice is that of the sum over settings (the test plants it above and
    the check fails it); the pooled chi-square alone would have had next to none."""
    from scipy import stats

    path = _trace(tmp_path, "--rounds", "50", "--runs", "4", "--seed", "2",
                  "--temperatures", "0.7,1.3")
    checker = check_piece((str(path), 2, None))
    law = next(c for c in checker.report(ALPHA).checks if c.name == "law")
    power = next(p for p in law.power if p.bug == TEMPERATURE_SQUARED.id).probability
    assert power is not None and power > 0.9, law.power
    state = checker.law
    tests = law_tests({key: cell.pit for key, cell in state.strata.items()})
    critical = float(stats.chi2.isf(ALPHA / 2, tests.bins - 1))
    for ordering in ("p", "q/p"):
        pooled = pooled_laws(cell.laws[TEMPERATURE_SQUARED.id][ordering]
                             for cell in state.strata.values())
        assert pooled.power(tests.n, tests.bins, critical) < 0.01, ordering


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    out: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return out


def _tree_trace(path: Path, rounds: int, temperatures: tuple[float, ...], squared: bool,
                vocab: int = 12) -> Path:
    """A tree engine (i.i.d. siblings, two children a node, depth 2) with one run per
    temperature, recording p at T; with `squared` it verifies on the law at T**2."""
    parents = full_tree_parents(2, 2)
    children: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for i, parent in enumerate(parents):
        children[parent + 1].append(i)
    inner = [row for row in range(len(parents) + 1) if children[row]]
    with specaccept_trace.TraceWriter(str(path), vocab_size=vocab, engine="tree") as writer:
        runs = [writer.start_run(str(i), prompt=[1, 2, 3], target_sampler={"temperature": t})
                for i, t in enumerate(temperatures)]
        for index in range(rounds):
            for number, (run, t) in enumerate(zip(runs, temperatures, strict=True)):
                rng = np.random.default_rng([index, number])
                logits = rng.normal(0.0, 1.5, (len(parents) + 1, vocab))
                p = _softmax(logits / t).astype(np.float32)
                drawn = _softmax(logits / (t * t if squared else t)).astype(np.float32)
                noisy = logits + rng.normal(0.0, 0.5, logits.shape)
                q = _softmax(noisy / t).astype(np.float32)
                tokens = [0] * len(parents)
                for row in inner:
                    law = q[row].astype(np.float64)
                    for child in children[row]:
                        tokens[child] = int(rng.choice(vocab, p=law / law.sum()))
                verdict = verify_tree(TreeScheme.IID, parents, mx.array(drawn), mx.array(q),
                                      tokens, mx.array(rng.random(len(parents)).astype(
                                          np.float32)), mx.array(rng.random(3).astype(
                                              np.float32)))
                kept = int(np.array(verdict.num_accepted))
                nodes = np.array(verdict.accepted_nodes).astype(int).tolist()[:kept]
                run.write_tree_round(
                    scheme="iid", parents=parents, node_tokens=tokens,
                    target=specaccept_trace.probs_block(p.tolist()),
                    draft=specaccept_trace.probs_block(q[inner].tolist()), path=nodes,
                    emitted=[*(tokens[n] for n in nodes), int(np.array(verdict.next_token))])
    return path


@pytest.mark.parametrize("squared", [False, True])
def test_a_tree_engine_applying_the_temperature_twice_fails_the_tree_law_by_setting(
    tmp_path: Path, squared: bool
) -> None:
    """The tree law keeps its settings apart as the chain law does: 400 rounds of each of two
    runs at 0.7 and 1.3, no uniforms; the pooled chi-squares pass the temperature applied
    twice, the sum over the settings fails it, and the correct engine passes both."""
    trace = read_trace(_tree_trace(tmp_path / "tree.jsonl", 400, (0.7, 1.3), squared))
    state = TreeLawState()
    for round_ in trace.tree_rounds:
        state.update(round_)
    tests = law_tests({key: cell.pit for key, cell in state.strata.items()})
    assert tests.stratified is not None and len(tests.groups) == 2
    assert min(p for _, p in tests.pooled) > ALPHA / 2, tests.pooled
    result = state.result(ALPHA)
    assert result.verdict is (Verdict.FAIL if squared else Verdict.PASS), result
