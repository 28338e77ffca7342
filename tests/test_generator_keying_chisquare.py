"""Whole runs through the generator: each rule emits the target's law across rounds.

A round's randomness is read by keys (`round_keys`); a keying that lets a later round
re-read a uniform an earlier round's outcome conditioned on biases the stream, and no
single-round test can see it. Each test here runs `SpeculativeGenerator` over many
seeds, counts its first three tokens (two or three rounds a seed) and applies
Pearson's chi-square against the target's exact law (7 d.o.f., alpha = 1e-4).

Power is computed, not assumed: `proofs.exact_runs.run_law` (lemma 10's enumerator)
gives, in rationals, the law a generator keyed wrongly emits, and the noncentral
chi-square gives the test's power against it at the test's size (asserted > 0.99).
Each wrong keying is then run through the real generator (its `round_uniforms`
replaced) and must be rejected. The nearest wrong keying per rule is one that breaks
that rule:

- block verification: every slot keyed by absolute position (the old keying), whose
  next round re-reads the tests its kept length read;
- stochastic: position keys are lossless for it (the tests after the first rejection
  are never read), so the wrong keying is accept tests keyed by the offset alone,
  every round re-reading the first round's;
- sampler-match: its tokens read only the target's draws, so the wrong keying is
  target draws keyed by the offset alone.

The CI setup has a history-dependent target (its law reads the last token, so a
round's emitted tokens shape the next round's rows); the recorded 24,000-seed runs of
the smaller-bias setup the keying was found on are `docs/results/generator-keying.md`
(``python tests/keyed_runs.py``).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest
from proofs.exact_runs import (
    Dist,
    Keying,
    Law,
    Tokens,
    accept_keyed_by_offset,
    position_keyed,
    run_law,
    sample_keyed_by_offset,
    target_law,
    total_variation,
)
from scipy import stats

from keyed_runs import (
    SMALL_K,
    SMALL_LENGTH,
    SMALL_PROMPT,
    chi_square,
    generator_counts,
    noncentral_power,
    sequences,
    small_drafter,
    small_target,
)
from specaccept import AcceptanceRule
from specaccept.core.randomness import round_keys
from specaccept.shell.generator import RuleChoice
from synthetic_models import constant_logits, markov2_logits

ALPHA = 1e-4
SEEDS = 600
VOCAB, K, LENGTH, PROMPT = 2, 2, 3, [0]
CRITICAL = float(stats.chi2.isf(ALPHA, VOCAB**LENGTH - 1))

# The target's next token reads the last one: (5/8, 3/8) after a 0, (1/4, 3/4) after a 1;
# the drafter proposes (1/4, 3/4) whatever came before. Chosen (by the enumeration)
# so that every rule's wrong keying moves the law far enough for 600 seeds.
AFTER = {0: (Fraction(5, 8), Fraction(3, 8)), 1: (Fraction(1, 4), Fraction(3, 4))}
DRAFT: Dist = (Fraction(1, 4), Fraction(3, 4))


def _target(context: Tokens) -> Dist:
    return AFTER[context[-1]]


def _drafter(context: Tokens) -> Dist:
    del context
    return DRAFT


def _logits(law: Dist) -> list[float]:
    return [math.log(float(x)) for x in law]


# markov2_logits with rows that ignore the older token: a first-order chain.
TABLE = np.array([[[float(x) for x in AFTER[0]], [float(x) for x in AFTER[1]]]] * VOCAB)
TARGET_LOGITS = markov2_logits(TABLE)
DRAFT_LOGITS = constant_logits(_logits(DRAFT))
NULL = target_law(_target, tuple(PROMPT), LENGTH)

WRONG: dict[RuleChoice, tuple[str, Keying]] = {
    "block": ("position keys", position_keyed),
    "stochastic": ("accept keyed by offset", accept_keyed_by_offset),
    "sampler-match": ("target draw keyed by offset", sample_keyed_by_offset),
}
RULES: list[RuleChoice] = ["block", "stochastic", "sampler-match"]


def _law(rule: RuleChoice, keying: Keying) -> Law:
    return run_law(AcceptanceRule(rule), _target, _drafter, PROMPT, K, LENGTH, keying)


def _counts(rule: RuleChoice, monkeypatch: pytest.MonkeyPatch,
            keying: Keying | None = None) -> tuple[np.ndarray, float]:
    start = time.perf_counter()
    counts = generator_counts(rule, TARGET_LOGITS, DRAFT_LOGITS, VOCAB, PROMPT, K, LENGTH,
                              range(SEEDS), keying=keying, monkeypatch=monkeypatch)
    return counts, time.perf_counter() - start


# --- the exact laws --------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES)
def test_the_library_keys_make_every_rule_emit_the_target_law_exactly(rule: RuleChoice) -> None:
    # The enumeration reads the keys the library's `round_keys` names: exact losslessness
    # of whole runs (and a check of the enumeration itself).
    assert _law(rule, round_keys) == NULL


def test_position_keys_bias_block_verification_by_the_stated_law() -> None:
    # The setup the bias was found on: p = (1/2, 1/2), q = (3/4, 1/4), k = 2, three tokens.
    p, q = small_target, small_drafter
    law = run_law(AcceptanceRule.BLOCK, p, q, SMALL_PROMPT, SMALL_K, SMALL_LENGTH,
                  position_keyed)
    expected = [Fraction(1, 8)] * 4 + [Fraction(9, 80)] * 2 + [Fraction(11, 80)] * 2
    assert [law[run] for run in sequences(2, 3)] == expected
    # Position keys are harmless to the token-by-token rules: why their wrong keyings differ.
    null = target_law(p, tuple(SMALL_PROMPT), SMALL_LENGTH)
    for rule in (AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH):
        assert run_law(rule, p, q, SMALL_PROMPT, SMALL_K, SMALL_LENGTH, position_keyed) == null
    for seeds in (12_000, 24_000):
        noncentrality, power = noncentral_power(null, law, seeds, ALPHA)
        print(f"\nsmallest setup, block vs position keys, {seeds} seeds: lambda = "
              f"{noncentrality:.1f}, power = {power:.6f} (misses with probability "
              f"{1 - power:.1e})")
        assert power > 0.99


@pytest.mark.parametrize("rule", RULES)
def test_the_wrong_keying_of_each_rule_moves_its_law_and_the_test_has_the_power(
    rule: RuleChoice,
) -> None:
    label, keying = WRONG[rule]
    wrong = _law(rule, keying)
    assert wrong != NULL
    noncentrality, power = noncentral_power(NULL, wrong, SEEDS, ALPHA)
    tv = total_variation(wrong, NULL)
    print(f"\n{rule} vs {label}: TV = {tv} = {float(tv):.4f}, {SEEDS} seeds, "
          f"lambda = {noncentrality:.1f}, power = {power:.6f}")
    assert power > 0.99
    assert min(NULL.values()) * SEEDS >= 5  # every expected cell count >= 5


# --- the generator ---------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES)
def test_the_generator_stream_passes_the_chi_square(
    rule: RuleChoice, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts, seconds = _counts(rule, monkeypatch)
    statistic = chi_square(counts, NULL, VOCAB, LENGTH)
    print(f"\n{rule}: chi2 = {statistic:.2f} (reject above {CRITICAL:.2f}), counts "
          f"{counts.tolist()}, {SEEDS} seeds in {seconds:.1f} s")
    assert counts.sum() == SEEDS
    assert statistic < CRITICAL


@pytest.mark.parametrize("rule", RULES)
def test_the_generator_with_the_wrong_keying_fails_the_chi_square(
    rule: RuleChoice, monkeypatch: pytest.MonkeyPatch
) -> None:
    label, keying = WRONG[rule]
    counts, seconds = _counts(rule, monkeypatch, keying)
    statistic = chi_square(counts, NULL, VOCAB, LENGTH)
    # The counts follow the law the enumeration predicts for this keying: the power
    # computed from it is the power against what the generator keyed so really does.
    law = _law(rule, keying)
    own = chi_square(counts, law, VOCAB, LENGTH)
    own_critical = float(stats.chi2.isf(ALPHA, sum(1 for x in law.values() if x > 0) - 1))
    print(f"\n{rule} with {label}: chi2 = {statistic:.2f} (reject above {CRITICAL:.2f}); "
          f"against its own exact law {own:.2f} (reject above {own_critical:.2f}); "
          f"{SEEDS} seeds in {seconds:.1f} s")
    assert statistic > CRITICAL
    assert own < own_critical
