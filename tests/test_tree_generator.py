"""Tree speculation end to end: the stream is the target's, greedy or sampled, and both
caches hold exactly the emitted tokens after every round.

1. Temperature 0: any tree, scheme and drafter reproduce `target_only_generate` token for
   token, on the synthetic 6-cycle and on the embedded demo pair.
2. Temperature > 0: Pearson's chi-square on the first three tokens of many seeded runs
   (each run two or three rounds) against the target's exact law, alpha = 1e-4. The
   test's power is shown on two known-wrong variants run through the real generator:
   every round keyed as the first (one coin re-read across rounds), and drafts without
   replacement verified as i.i.d. drafts (the wrong q for the second sibling), whose
   per-node law is enumerated exactly here.
3. The caches: read back after every round in the all-reject, mixed and all-accept
   regimes, and the generator's own `check_caches` catches a broken rewind.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from fractions import Fraction
from itertools import product
from typing import Any, cast

import mlx.core as mx
import numpy as np
import pytest
from scipy import stats

import specaccept.shell.tree_generator as tree_module
from specaccept import SamplerConfig, TreeScheme
from specaccept.core.tree import tree_keys, verify_tree
from specaccept.shell.caches import CacheInvariantError
from specaccept.shell.target_only import target_only_generate
from specaccept.shell.tree_generator import TreeSpeculativeGenerator, TreeStats, full_tree_parents
from synthetic_models import (
    SyntheticLM,
    agree_one_in_six,
    cached_tokens,
    collect,
    constant_logits,
    cycle_logits,
    markov2_logits,
    never_agree,
    random_markov2_table,
    shifted_cycle_logits,
    target_trims_one_too_few,
)

VOCAB = 6
GREEDY = SamplerConfig(temperature=0.0)
PROMPT = [2, 3]
TREES = [(1, 3), (2, 1), (2, 2), (3, 2), (2, 3)]
SCHEMES = [TreeScheme.IID, TreeScheme.DETERMINISTIC]  # without replacement: needs a law


def _drafter(name: str) -> SyntheticLM:
    if name == "never-agrees":
        return SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, never_agree))
    if name == "agrees-one-in-six":
        return SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, agree_one_in_six))
    return SyntheticLM(VOCAB, cycle_logits(VOCAB))


def test_the_full_tree_is_breadth_first_with_consecutive_siblings() -> None:
    assert full_tree_parents(3, 2) == (-1, -1, -1, 0, 0, 0, 1, 1, 1, 2, 2, 2)
    assert full_tree_parents(1, 4) == (-1, 0, 1, 2)
    with pytest.raises(ValueError, match="tree width must be an int >= 1, got 0"):
        full_tree_parents(0, 2)
    with pytest.raises(ValueError, match="2048 root-to-leaf paths"):
        full_tree_parents(2, 11)


# --- 1. greedy -------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize(("width", "depth"), TREES)
@pytest.mark.parametrize("drafter", ["never-agrees", "agrees-one-in-six", "identical"])
def test_greedy_stream_equals_target_only_on_the_6_cycle(
    scheme: TreeScheme, width: int, depth: int, drafter: str
) -> None:
    expected = list(target_only_generate(SyntheticLM(VOCAB, cycle_logits(VOCAB)), PROMPT,
                                         GREEDY, 25))
    generator = TreeSpeculativeGenerator(
        SyntheticLM(VOCAB, cycle_logits(VOCAB)), _drafter(drafter), GREEDY, width=width,
        depth=depth, scheme=scheme, check_caches=True)
    run = generator.generate(PROMPT, 25, seed=3)
    assert collect(run) == expected
    assert run.stats.host_syncs == run.stats.rounds  # one synchronisation per round


def test_greedy_stream_equals_target_only_on_the_demo_pair() -> None:
    mlx_lm = pytest.importorskip("mlx_lm")
    from specaccept.demo import drafter_path, target_path

    target, tokenizer = mlx_lm.load(str(target_path()))[:2]
    drafter = mlx_lm.load(str(drafter_path()))[0]
    prompt = list(tokenizer.encode("ROMEO:\n"))
    expected = list(target_only_generate(target, prompt, GREEDY, 24))
    for scheme in SCHEMES:
        generator = TreeSpeculativeGenerator(target, drafter, GREEDY, width=2, depth=3,
                                             scheme=scheme, check_caches=True)
        run = generator.generate(prompt, 24, seed=0)
        assert collect(run) == expected, scheme
        assert run.stats.accepted > 0  # the pair agrees often enough for paths to be kept


# --- 2. the chi-square -----------------------------------------------------------------

ALPHA = 1e-4
SEEDS = 600
LENGTH = 3
V3 = 3
# Chosen by exact enumeration (`_node_law`) so that the second sibling's proposal matters:
# verifying drafts without replacement as i.i.d. moves a node's output law by TV 7/30.
P = (Fraction(2, 9), Fraction(7, 18), Fraction(7, 18))
Q = (Fraction(2, 3), Fraction(1, 15), Fraction(4, 15))
SAMPLED = SamplerConfig(temperature=1.0)
CRITICAL = float(stats.chi2.isf(ALPHA, V3**LENGTH - 1))


def _normalised(weights: list[Fraction]) -> list[Fraction] | None:
    mass = sum(weights)
    return [w / mass for w in weights] if mass > 0 else None


def _excess(r: Sequence[Fraction], q: Sequence[Fraction]) -> list[Fraction] | None:
    """The residual relu(r - q), normalised; None when it has no mass."""
    return _normalised([max(Fraction(0), a - b) for a, b in zip(r, q, strict=True)])


def _node_law(p: tuple[Fraction, ...], q: tuple[Fraction, ...], *, as_iid: bool
              ) -> list[Fraction]:
    """The exact law of the token a depth-1 tree of two siblings drafted without
    replacement emits first; `as_iid` tests the second sibling against q itself."""
    out = [Fraction(0)] * len(p)
    residual_one = _excess(p, q) or list(p)
    for x0, q0 in enumerate(q):
        keep0 = min(Fraction(1), p[x0] / q0)
        out[x0] += q0 * keep0
        rest = _normalised([Fraction(0) if i == x0 else w for i, w in enumerate(q)])
        assert rest is not None
        proposal = list(q) if as_iid else rest
        for x1, q1 in enumerate(rest):
            if q1 == 0:
                continue
            weight = q0 * (1 - keep0) * q1
            keep1 = min(Fraction(1), residual_one[x1] / proposal[x1])
            out[x1] += weight * keep1
            residual_two = _excess(residual_one, proposal) or residual_one
            for i, r in enumerate(residual_two):
                out[i] += weight * (1 - keep1) * r
    return out


def test_the_wrong_proposal_moves_a_nodes_law_by_the_stated_distance() -> None:
    assert _node_law(P, Q, as_iid=False) == list(P)
    wrong = _node_law(P, Q, as_iid=True)
    assert sum(abs(a - b) for a, b in zip(wrong, P, strict=True)) / 2 == Fraction(7, 30)


def _logits(law: tuple[Fraction, ...]) -> list[float]:
    return [math.log(float(x)) for x in law]


def _counts(scheme: TreeScheme) -> tuple[np.ndarray, float]:
    generator = TreeSpeculativeGenerator(
        SyntheticLM(V3, constant_logits(_logits(P))), SyntheticLM(V3, constant_logits(_logits(Q))),
        SAMPLED, width=2, depth=1, scheme=scheme)
    index = {run: i for i, run in enumerate(product(range(V3), repeat=LENGTH))}
    counts = np.zeros(len(index), dtype=np.int64)
    start = time.perf_counter()
    for seed in range(SEEDS):
        counts[index[tuple(collect(generator.generate([0], LENGTH, seed=seed)))]] += 1
    return counts, time.perf_counter() - start


def _chi_square(counts: np.ndarray) -> float:
    expected = np.array([float(P[a] * P[b] * P[c])
                         for a, b, c in product(range(V3), repeat=LENGTH)]) * counts.sum()
    assert expected.min() >= 5  # every expected cell count >= 5
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("scheme", list(TreeScheme))
def test_the_tree_stream_passes_the_chi_square(scheme: TreeScheme) -> None:
    counts, seconds = _counts(scheme)
    statistic = _chi_square(counts)
    print(f"\n{scheme.value}: chi2 = {statistic:.2f} (reject above {CRITICAL:.2f}), "
          f"{SEEDS} seeds in {seconds:.1f} s")
    assert statistic < CRITICAL


def test_one_coin_reused_across_rounds_fails_the_chi_square(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every round keyed as the round at position 0: its drafts, tests and draws repeat.
    monkeypatch.setattr(tree_module, "tree_keys",
                        lambda position, parents: tree_keys(0, parents))
    counts, seconds = _counts(TreeScheme.IID)
    statistic = _chi_square(counts)
    print(f"\none coin across rounds: chi2 = {statistic:.2f} (reject above {CRITICAL:.2f}), "
          f"{SEEDS} seeds in {seconds:.1f} s")
    assert statistic > CRITICAL


def test_drafts_without_replacement_verified_as_iid_fail_the_chi_square(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def as_iid(scheme: TreeScheme, *arguments: Any) -> Any:
        del scheme
        return verify_tree(TreeScheme.IID, *arguments)

    monkeypatch.setattr(tree_module, "verify_tree", as_iid)
    counts, seconds = _counts(TreeScheme.WITHOUT_REPLACEMENT)
    statistic = _chi_square(counts)
    print(f"\nwithout replacement verified as iid: chi2 = {statistic:.2f} (reject above "
          f"{CRITICAL:.2f}), {SEEDS} seeds in {seconds:.1f} s")
    assert statistic > CRITICAL


def _diagnosed_run(scheme: TreeScheme, laws: str) -> TreeStats:
    """A run with diagnostics on: `laws` "markov" (history-dependent) or "constant" (the
    P, Q pair above, where drafts without replacement verified as i.i.d. always accept)."""
    if laws == "markov":
        table = random_markov2_table(VOCAB, 3)
        other = random_markov2_table(VOCAB, 4)
        target = SyntheticLM(VOCAB, markov2_logits(table))
        drafter = SyntheticLM(VOCAB, markov2_logits(0.5 * table + 0.5 * other))
    else:
        target = SyntheticLM(V3, constant_logits(_logits(P)))
        drafter = SyntheticLM(V3, constant_logits(_logits(Q)))
    generator = TreeSpeculativeGenerator(target, drafter, SAMPLED, width=2, depth=2,
                                         scheme=scheme, diagnostics=True)
    run = generator.generate(PROMPT if laws == "markov" else [0], 300, seed=5)
    collect(run)
    assert run.stats.nodes_tested > 100
    return run.stats


@pytest.mark.parametrize("laws", ["markov", "constant"])
@pytest.mark.parametrize("scheme", list(TreeScheme))
def test_diagnostics_match_the_scheme_s_closed_form(scheme: TreeScheme, laws: str) -> None:
    stats = _diagnosed_run(scheme, laws)
    assert abs(stats.acceptance_z) < 4, stats.summary_line()


def test_diagnostics_reject_drafts_without_replacement_verified_as_iid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The z above has power: on the constant pair, drafts without replacement verified
    with the i.i.d. rule accept with probability 1 per node against a closed form of 23/30
    (exact: proofs/test_tree_exact.py's enumeration), z near 8 at 300 tokens."""
    def as_iid(scheme: TreeScheme, *arguments: Any) -> Any:
        del scheme
        return verify_tree(TreeScheme.IID, *arguments)

    monkeypatch.setattr(tree_module, "verify_tree", as_iid)
    stats = _diagnosed_run(TreeScheme.WITHOUT_REPLACEMENT, "constant")
    assert stats.acceptance_z > 4, stats.summary_line()


# --- 3. the caches ---------------------------------------------------------------------


def _regime(name: str) -> tuple[SyntheticLM, SyntheticLM, SamplerConfig]:
    if name.endswith("stochastic"):
        table = random_markov2_table(VOCAB, 3)
        mixed = 0.5 * table + 0.5 * random_markov2_table(VOCAB, 4)
        drafted = table if name == "all-accept-stochastic" else mixed
        return (SyntheticLM(VOCAB, markov2_logits(table)),
                SyntheticLM(VOCAB, markov2_logits(drafted)), SAMPLED)
    drafter = {"all-reject": "never-agrees", "mixed-greedy": "agrees-one-in-six",
               "all-accept": "identical"}[name]
    return SyntheticLM(VOCAB, cycle_logits(VOCAB)), _drafter(drafter), GREEDY


# Without replacement needs a drafter law of at least `width` tokens: not the greedy regimes.
@pytest.mark.parametrize(("regime", "scheme"), [
    (regime, scheme) for regime in ("all-reject", "mixed-greedy", "all-accept",
                                    "mixed-stochastic", "all-accept-stochastic")
    for scheme in TreeScheme
    if regime.endswith("stochastic") or scheme is not TreeScheme.WITHOUT_REPLACEMENT
])
def test_cache_contents_are_exact_after_every_round(regime: str, scheme: TreeScheme) -> None:
    target, drafter, config = _regime(regime)
    generator = TreeSpeculativeGenerator(target, drafter, config, width=2, depth=3,
                                         scheme=scheme)
    history = list(PROMPT)
    run = generator.generate(PROMPT, 40, seed=11)
    rejected = 0
    for block in run:
        history += block
        if len(history) - len(PROMPT) == 40:
            break
        rejected += len(block) <= 3
        assert target.last_cache is not None and drafter.last_cache is not None
        assert cached_tokens(target.last_cache) == history[:-1]
        owed = cached_tokens(drafter.last_cache)
        assert owed == history[: len(owed)] and len(history) - 1 - len(owed) in (0, 1)
        assert target.last_cache[0].keys.shape[0] == 1  # one row kept back
    if regime == "all-accept":
        assert run.stats.mean_accepted_len > 2.5
    if regime == "all-reject" and scheme is TreeScheme.IID:
        assert run.stats.accepted == 0 and rejected > 0


def test_check_caches_catches_a_target_that_keeps_a_stale_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tree_module, "rewind_trim", target_trims_one_too_few)
    target, drafter, config = _regime("all-reject")
    generator = TreeSpeculativeGenerator(target, drafter, config, width=2, depth=2,
                                         check_caches=True)
    with pytest.raises(CacheInvariantError, match=r"after round 1: .* target cache holds"):
        collect(generator.generate(PROMPT, 20))


# --- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"width": 0}, ValueError, "tree width must be an int >= 1, got 0"),
    ({"depth": -1}, ValueError, "tree depth must be an int >= 1, got -1"),
    ({"width": 2, "depth": 11}, ValueError, "at most 1024"),
    ({"scheme": "iid"}, TypeError, "scheme must be a TreeScheme, got 'iid'"),
    ({"scheme": TreeScheme.WITHOUT_REPLACEMENT}, ValueError, "draft_config is greedy"),
    ({"target_config": SamplerConfig(temperature=1.0, repetition_penalty=1.2)}, ValueError,
     "target_config reads the history"),
    # These printed "[stack] All arrays must have the same shape" or hung computing W**D.
    ({"width": 7, "depth": 1, "scheme": TreeScheme.DETERMINISTIC}, ValueError,
     r"width 7 exceeds the vocabulary \(6\)"),
    ({"depth": 2**40}, ValueError, "tree depth must be at most 4096"),
    ({"width": 10**30, "depth": 2}, ValueError, "more than 1024 root-to-leaf paths"),
])
def test_bad_arguments_are_refused_naming_them(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {"target_config": GREEDY, **kwargs}
    with pytest.raises(error, match=message):
        TreeSpeculativeGenerator(SyntheticLM(VOCAB, cycle_logits(VOCAB)),
                                 SyntheticLM(VOCAB, cycle_logits(VOCAB)), **arguments)


def test_a_law_too_narrow_for_distinct_siblings_is_refused_when_met() -> None:
    # A sampled drafter whose law puts all its float32 mass on one token.
    peaked = SyntheticLM(VOCAB, cycle_logits(VOCAB, peak=200.0))
    generator = TreeSpeculativeGenerator(SyntheticLM(VOCAB, cycle_logits(VOCAB)), peaked,
                                         SAMPLED, width=2, depth=2,
                                         scheme=TreeScheme.WITHOUT_REPLACEMENT)
    with pytest.raises(ValueError, match=r"fewer than width \(2\) tokens"):
        collect(generator.generate(PROMPT, 10))


def test_nothing_is_evaluated_to_build_a_round() -> None:
    """The round's one synchronisation is the only evaluation: counted by the stats."""
    generator = TreeSpeculativeGenerator(SyntheticLM(VOCAB, cycle_logits(VOCAB)),
                                         _drafter("agrees-one-in-six"), GREEDY, width=2, depth=2)
    evaluations = 0
    real_eval = mx.eval

    def counting_eval(*arrays: Any) -> None:
        nonlocal evaluations
        evaluations += 1
        real_eval(*arrays)

    run = generator.generate(PROMPT, 30)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mx, "eval", counting_eval)
        collect(run)
    # Plus one prefill chunk per model: the prompt has one token before the current one.
    assert evaluations - 2 == run.stats.host_syncs == run.stats.rounds


def test_a_prompt_or_a_model_of_the_wrong_kind_is_named() -> None:
    model = SyntheticLM(VOCAB, cycle_logits(VOCAB))
    generator = TreeSpeculativeGenerator(model, model, GREEDY, width=2, depth=2)
    with pytest.raises(TypeError, match="prompt must be a sequence of token ids, got NoneType"):
        generator.generate(None, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="drafter must be an mlx-lm model"):
        TreeSpeculativeGenerator(model, cast(Any, lambda tokens, cache=None: None), GREEDY)
