"""Lemma 5, greedy drafters and drafters without a distribution: the checks of
``proofs/greedy_drafter.md``."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import pytest

from proofs.exact_rounds import (
    GREEDY_DRAFTER,
    NO_Q,
    PROMPTS,
    SAMPLER_MATCH,
    STOCHASTIC,
    TARGET,
    TARGETS,
    Dist,
    Rule,
    Tokens,
    acceptance,
    assert_lossless,
    context_index,
    one_hot,
    position_law,
    round_law,
    round_outcomes,
    sum_min,
    support,
)


@pytest.mark.parametrize("p", TARGETS)
def test_greedy_drafter_sampler_match_attains_the_ceiling(p: Dist) -> None:
    """Lemma 5: with a one-hot q, sampler-match and rejection sampling have the same joint
    law of (accepted, emitted), so sampler-match already accepts sum min(p, q) = p(g)."""
    for g in range(len(p)):
        q = one_hot(g, len(p))
        match = position_law(SAMPLER_MATCH, p, q)
        assert match == position_law(STOCHASTIC, p, q)
        assert acceptance(match) == sum_min(p, q) == p[g]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_greedy_drafter_rounds_are_the_same_under_both_rules(k: int) -> None:
    """Lemma 5 over a round: with a greedy drafter the two lossless rules give the same
    exact law of (emitted tokens, accepted count)."""
    def by_emitted(rule: Rule, prefix: Tokens) -> dict[tuple[Tokens, int], Fraction]:
        law: defaultdict[tuple[Tokens, int], Fraction] = defaultdict(Fraction)
        for o, w in round_outcomes(rule, TARGET, GREEDY_DRAFTER, prefix, prefix, k).items():
            law[(o.emitted, o.accepted)] += w
        return support(law)

    for prefix in PROMPTS:
        assert by_emitted(SAMPLER_MATCH, prefix) == by_emitted(STOCHASTIC, prefix)


def test_a_drafter_that_exposes_no_distribution_is_lossless_under_sampler_match() -> None:
    """Lemma 5: a block drafter proposes k tokens at once and reports no q; sampler-match
    (the no-proposal-distribution id, called with q=None) is still exactly lossless."""
    def block_drafter(context: Tokens) -> Dist:  # deterministic in its context
        return one_hot((context_index(context, 5) + len(context)) % 4, 4)

    for prefix in PROMPTS:
        for k in (1, 3):
            assert_lossless(round_law(NO_Q, TARGET, block_drafter, prefix, k), TARGET, prefix,
                            k + 1)
