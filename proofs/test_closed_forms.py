"""Exact checks of the closed forms: lemma 3's equality condition and collapse bound,
lemma 4's counterexample, lemma 8's expected tokens and speedup (see ``proofs/index.md``).

Everything is computed in ``fractions.Fraction``; the library's float functions are then
compared with the exact values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from math import prod

import mlx.core as mx
import pytest

from proofs import exact_rounds
from specaccept import (
    AcceptanceRule,
    acceptance_probability,
    expected_speedup,
    expected_tokens_per_round,
    verify_draft_token,
)

Dist = tuple[Fraction, ...]
ZERO, ONE = Fraction(0), Fraction(1)


def simplex(vocab_size: int, denominator: int) -> Iterator[Dist]:
    """Every distribution on `vocab_size` tokens with entries in (1/denominator) Z."""
    for cuts in itertools.combinations_with_replacement(range(denominator + 1), vocab_size - 1):
        bounds = (0, *cuts, denominator)
        yield tuple(Fraction(b - a, denominator) for a, b in itertools.pairwise(bounds))


def sum_min(p: Dist, q: Dist) -> Fraction:
    return sum((min(a, b) for a, b in zip(p, q, strict=True)), ZERO)


def sum_prod(p: Dist, q: Dist) -> Fraction:
    return sum((a * b for a, b in zip(p, q, strict=True)), ZERO)


def is_one_hot(d: Dist) -> bool:
    return ONE in d


GRIDS = [(2, 4), (3, 4), (3, 6), (4, 4)]


# --------------------------------------------------------------------------------------
# Lemma 3: sum min(p, q) >= sum p*q, and when they are equal.


@pytest.mark.parametrize("vocab_size,denominator", GRIDS)
def test_sum_min_dominates_sum_prod_with_the_stated_equality_condition(
    vocab_size: int, denominator: int
) -> None:
    """Lemma 3, every pair of a grid: sum min >= sum p*q, with equality iff for every x
    min(p(x), q(x)) = 0 or max(p(x), q(x)) = 1, i.e. iff p or q is one-hot or the supports
    are disjoint."""
    grid = list(simplex(vocab_size, denominator))
    equal = strict = 0
    for p, q in itertools.product(grid, repeat=2):
        assert sum_min(p, q) >= sum_prod(p, q)
        pointwise = all(min(a, b) == 0 or max(a, b) == 1 for a, b in zip(p, q, strict=True))
        disjoint = all(min(a, b) == 0 for a, b in zip(p, q, strict=True))
        structural = is_one_hot(p) or is_one_hot(q) or disjoint
        assert (sum_min(p, q) == sum_prod(p, q)) == pointwise == structural, (p, q)
        equal += pointwise
        strict += not pointwise
    assert equal and strict  # both sides of the equivalence occur


def test_a_wrong_equality_condition_is_caught() -> None:
    """The check has power: "equality iff p == q" fails it both ways."""
    grid = list(simplex(3, 4))
    pairs = list(itertools.product(grid, repeat=2))
    assert any(p == q and sum_min(p, q) != sum_prod(p, q) for p, q in pairs)
    assert any(p != q and sum_min(p, q) == sum_prod(p, q) for p, q in pairs)


def test_the_gain_collapses_for_a_near_deterministic_drafter() -> None:
    """Lemma 3: with t* = argmax q, q(t*) = 1 - eps and p(t*) = p* > 0,
    1 <= sum min / sum p*q <= (1 + eps / p*) / (1 - eps); on a fixed p the ratio tends to
    1 as eps -> 0."""
    grid = list(simplex(3, 12))
    checked = 0
    for p, q in itertools.product(grid, repeat=2):
        top = max(range(3), key=lambda x: q[x])
        eps, p_top = 1 - q[top], p[top]
        if p_top == 0 or eps == 1:
            continue
        ratio = sum_min(p, q) / sum_prod(p, q)
        assert 1 <= ratio <= (1 + eps / p_top) / (1 - eps)
        checked += 1
    assert checked == 7098  # the pairs of the 1/12 grid with p* > 0 (ceiling.md)
    # p = (1/2, 1/4, 1/4), q = (1 - eps, eps/2, eps/2): the ratio is (1 + 2 eps) / (1 - eps/2).
    p = (Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))
    ratios = []
    for n in (2, 4, 16, 64, 256, 1024):
        eps = Fraction(1, n)
        q = (1 - eps, eps / 2, eps / 2)
        ratios.append(sum_min(p, q) / sum_prod(p, q))
        assert ratios[-1] == (1 + 2 * eps) / (1 - eps / 2)
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] < Fraction(1003, 1000)


# The table of mlxcel PR #902 (Llama-3.1-8B-Instruct-4bit target, Llama-3.2-1B-Instruct
# drafter, 200 tokens, 4 drafts): temperature, sum min, sum p*q, quoted ratio, measured
# per-position acceptance. Quoted, not reproduced here.
PR_902_TABLE = [
    (0.7, 0.2808, 0.2740, "1.02", 0.2902),
    (1.0, 0.1738, 0.1613, "1.08", 0.1735),
    (1.5, 0.6809, 0.0494, "13.8", 0.6966),
]


def test_the_quoted_measurements_are_consistent_with_lemma_3() -> None:
    """ceiling.md quotes the PR's table; its ratio column is sum min / sum p*q, and every
    row has sum min >= sum p*q."""
    for _, s_min, s_prod, ratio, _ in PR_902_TABLE:
        assert s_min >= s_prod
        digits = len(ratio.split(".")[1])
        assert f"{s_min / s_prod:.{digits}f}" == ratio


PR_902_TOKENS, PR_902_DRAFTS = 200, 4


def excess_in_standard_errors(s_min: float, measured: float) -> float:
    """How far a measured per-position acceptance lies above the mean ceiling, in units of
    the largest standard error a run of the PR's size can have.

    A run of 200 tokens with 4 drafts tests at least 200 * 4/5 = 160 positions (a round
    emits at most k + 1 tokens and tests at least k of them when it emits k + 1, and a
    round that emits fewer tests one per token). Given the past, position i accepts with
    probability alpha_i <= sum min(p_i, q_i) (lemma 3), so the measured rate minus the
    mean ceiling is at most a mean of martingale differences, whose standard deviation
    is at most 1 / (2 sqrt(n)) for n tested positions."""
    tested = PR_902_TOKENS * PR_902_DRAFTS / (PR_902_DRAFTS + 1)
    return (measured - s_min) * 2 * math.sqrt(tested)


def test_the_measured_acceptance_above_the_ceiling_is_sampling_noise() -> None:
    """ceiling.md: two quoted rows measure above sum min (0.2902 > 0.2808 and
    0.6966 > 0.6809). Each excess is under 0.5 of the largest standard error of one
    160-position trajectory, so it is the noise of a single run, not a rule above the
    ceiling; an excess of 0.15 at that size would be over 3 standard errors (the check
    can fail)."""
    above = [(s_min, measured) for _, s_min, _, _, measured in PR_902_TABLE if measured > s_min]
    assert [measured for _, measured in above] == [0.2902, 0.6966]
    for s_min, measured in above:
        assert 0 < excess_in_standard_errors(s_min, measured) < 0.5
    assert excess_in_standard_errors(0.2808, 0.2808 + 0.15) > 3


# --------------------------------------------------------------------------------------
# Lemma 4: argmax-against-argmax.

P_COUNTER = (Fraction(3, 10), Fraction(1, 4), Fraction(1, 4), Fraction(1, 5))
Q_COUNTER = (Fraction(19, 20), Fraction(1, 20), ZERO, ZERO)


def argmax_against_argmax(p: Dist, q: Dist) -> tuple[dict[int, Fraction], Fraction]:
    """The exact (emitted law, acceptance) of: draft x ~ q, accept iff x = argmax p,
    emit argmax p."""
    winner = max(range(len(p)), key=lambda x: (p[x], -x))
    emitted: dict[int, Fraction] = {}
    accepted = ZERO
    for x, qx in enumerate(q):
        if qx:
            emitted[winner] = emitted.get(winner, ZERO) + qx
            accepted += qx if x == winner else ZERO
    return emitted, accepted


def test_argmax_against_argmax_counterexample() -> None:
    """Lemma 4: with p(a) = 3/10 the argmax and q(a) = 19/20 the rule emits a with
    probability 1 (not 3/10) and accepts with probability 19/20, above the ceiling 7/20;
    any q with q(a) = 19/20 has ceiling at most 3/10 + 1/20 = 7/20."""
    emitted, accepted = argmax_against_argmax(P_COUNTER, Q_COUNTER)
    assert emitted == {0: ONE}
    assert accepted == Fraction(19, 20)
    assert sum_min(P_COUNTER, Q_COUNTER) == Fraction(7, 20)
    law = tuple(emitted.get(x, ZERO) for x in range(4))
    assert law != P_COUNTER
    assert sum((abs(a - b) for a, b in zip(law, P_COUNTER, strict=True)), ZERO) / 2 == (
        Fraction(7, 10))
    for rest in simplex(3, 20):
        q = (Fraction(19, 20), *(r / 20 for r in rest))
        assert sum_min(P_COUNTER, q) <= Fraction(7, 20) < argmax_against_argmax(P_COUNTER, q)[1]


def test_the_library_greedy_rule_at_temperature_above_zero_is_this_rule() -> None:
    """Lemma 4 on the library: greedy-argmax handed the non-greedy p emits a for every
    draft and uniform, and its closed form says 0.95 where stochastic's says 0.35."""
    p = mx.array([float(x) for x in P_COUNTER], dtype=mx.float32)
    q = mx.array([float(x) for x in Q_COUNTER], dtype=mx.float32)
    for token in range(4):
        for u in (0.0, 0.5, 0.99):
            verdict = verify_draft_token(AcceptanceRule.GREEDY_ARGMAX, p, q, token, u, u)
            assert verdict.token.item() == 0
            assert verdict.accepted.item() is (token == 0)
    greedy = acceptance_probability(AcceptanceRule.GREEDY_ARGMAX, p, q).item()
    stochastic = acceptance_probability(AcceptanceRule.STOCHASTIC, p, q).item()
    assert isinstance(greedy, float) and isinstance(stochastic, float)
    assert abs(greedy - 0.95) < 1e-6 and abs(stochastic - 0.35) < 1e-6


P_DYADIC = (Fraction(10, 32), Fraction(8, 32), Fraction(8, 32), Fraction(6, 32))
Q_DYADIC = (Fraction(30, 32), Fraction(2, 32), ZERO, ZERO)
"""Lemma 4's pair in the shape float32 holds exactly: argmax p = 0 with p(0) = 5/16 and
q(0) = 15/16, so the argmax rule accepts 15/16 against a ceiling of 3/8."""


def test_a_fixed_rule_is_not_flagged_on_the_counterexample() -> None:
    """The counterexample check discriminates, on the library: the library's rejection
    sampling, integrated exactly over its draft and both uniforms on lemma 4's dyadic
    pair, emits p exactly and accepts the ceiling 3/8, while the library's greedy-argmax
    (argmax-against-argmax on this tempered p) and resampling from p, run through the
    same integration, do not emit p."""
    law = exact_rounds.position_law(exact_rounds.STOCHASTIC, P_DYADIC, Q_DYADIC)
    assert exact_rounds.emitted_token_law(law) == exact_rounds.as_law(P_DYADIC)
    assert exact_rounds.acceptance(law) == sum_min(P_DYADIC, Q_DYADIC) == Fraction(3, 8)
    greedy = exact_rounds.position_law(exact_rounds.GREEDY, P_DYADIC, Q_DYADIC)
    assert exact_rounds.emitted_token_law(greedy) == {(0,): ONE}
    assert exact_rounds.acceptance(greedy) == Fraction(15, 16) > Fraction(3, 8)
    resampled = exact_rounds.position_law(exact_rounds.RESAMPLE_FROM_P, P_DYADIC, Q_DYADIC)
    assert exact_rounds.emitted_token_law(resampled) != exact_rounds.as_law(P_DYADIC)


# --------------------------------------------------------------------------------------
# Lemma 8: expected tokens per round and speedup.


def round_tokens(alphas: Sequence[Fraction]) -> Fraction:
    """E[tokens per round] by enumerating all 2**k accept/reject patterns, position i
    accepting with probability alphas[i] given that all before it accepted: a round emits
    its accepted prefix and one more token."""
    expected = ZERO
    for pattern in itertools.product((True, False), repeat=len(alphas)):
        weight = prod((a if ok else 1 - a for a, ok in zip(alphas, pattern, strict=True)),
                      start=ONE)
        prefix = next((i for i, ok in enumerate(pattern) if not ok), len(alphas))
        expected += weight * (prefix + 1)
    return expected


def closed_form_tokens(alpha: Fraction, k: int) -> Fraction:
    return Fraction(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


ALPHAS = [ZERO, Fraction(1, 8), Fraction(1, 4), Fraction(1, 3), Fraction(1, 2),
          Fraction(2, 3), Fraction(3, 4), Fraction(7, 8), ONE]


@pytest.mark.parametrize("k", range(1, 9))
def test_expected_tokens_closed_form(k: int) -> None:
    """Lemma 8: i.i.d. acceptance alpha gives (1 - alpha**(k+1)) / (1 - alpha) exactly, and
    the library's expected_tokens_per_round agrees."""
    for alpha in ALPHAS:
        exact = round_tokens([alpha] * k)
        assert exact == closed_form_tokens(alpha, k)
        assert abs(expected_tokens_per_round([float(alpha)] * k) - float(exact)) < 1e-12


def test_expected_tokens_from_per_position_acceptance() -> None:
    """Lemma 8: with position-dependent alpha_i, E = sum_j prod_{i<=j} alpha_i, which is
    what expected_tokens_per_round computes."""
    for alphas in itertools.product(ALPHAS[1:-1:2], repeat=4):
        exact = round_tokens(alphas)
        assert exact == sum((prod(alphas[:j], start=ONE) for j in range(5)), ZERO)
        assert abs(expected_tokens_per_round([float(a) for a in alphas]) - float(exact)) < 1e-12


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_expected_speedup(k: int) -> None:
    """Lemma 8: speedup = E[tokens] / (k c + verify_cost); with verify_cost = 1 it is
    (1 - alpha**(k+1)) / ((1 - alpha)(k c + 1)), the i.i.d. formula."""
    for alpha in ALPHAS:
        for c in (ZERO, Fraction(1, 8), Fraction(1, 2)):
            for verify_cost in (ONE, Fraction(3, 2), Fraction(k + 1)):
                exact = round_tokens([alpha] * k) / (k * c + verify_cost)
                library = expected_speedup(float(alpha), k, float(c),
                                           verify_cost=float(verify_cost))
                assert abs(library - float(exact)) < 1e-12
            if alpha < 1:
                leviathan = (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))
                assert abs(expected_speedup(float(alpha), k, float(c)) - float(leviathan)) < 1e-12


def all_accepted_probability(alphas: Sequence[Fraction]) -> Fraction:
    """P(a = k) by enumerating the 2**k accept/reject patterns."""
    total = ZERO
    for pattern in itertools.product((True, False), repeat=len(alphas)):
        if all(pattern):
            total += prod(alphas, start=ONE)
    return total


@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_backfill_cost_enters_through_verify_cost(k: int) -> None:
    """Lemma 8 part 3 with a backfill cost b: S = E[N] / (k c + kappa + b P(a = k)), and
    expected_speedup gives it when handed verify_cost = kappa + b alpha**k; leaving b out
    overstates S whenever b > 0 and alpha > 0."""
    c, kappa, b = Fraction(1, 8), Fraction(3, 2), Fraction(1, 8)
    for alpha in ALPHAS:
        all_accepted = all_accepted_probability([alpha] * k)
        assert all_accepted == alpha**k
        exact = round_tokens([alpha] * k) / (k * c + kappa + b * all_accepted)
        library = expected_speedup(float(alpha), k, float(c),
                                   verify_cost=float(kappa + b * alpha**k))
        assert abs(library - float(exact)) < 1e-12
        without = expected_speedup(float(alpha), k, float(c), verify_cost=float(kappa))
        assert (without > float(exact) + 1e-12) == (alpha > 0)


def test_wrong_expected_tokens_formulas_are_caught() -> None:
    """The check has power: forgetting the round's extra token, or ignoring that a round
    stops at its first rejection, misses the enumeration."""
    k = 4
    wrong: dict[str, Callable[[Fraction], Fraction]] = {
        "(1 - a**k) / (1 - a)": lambda a: (1 - a**k) / (1 - a),
        "1 + k a": lambda a: 1 + k * a,
    }
    for name, formula in wrong.items():
        assert any(formula(a) != round_tokens([a] * k) for a in ALPHAS[1:-1]), name
