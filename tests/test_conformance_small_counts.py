"""The acceptance check at small counts: a drift whose variance is too small for its normal
approximation is judged by Bennett's bound, which holds at any count.

Found on vLLM's kernels at V = 128,256: a request of three tested positions whose acceptance
probabilities summed to about 0.002 accepted one draft, and the normal z of 9.4 failed a
correct engine."""

from __future__ import annotations

import math

import numpy as np

from specaccept.conformance.acceptance import (
    NORMAL_MIN_VARIANCE,
    AcceptanceState,
    bennett_tail,
)
from specaccept.conformance.exact import ExactSum


def _state(probabilities: np.ndarray, accepted: int) -> AcceptanceState:
    """The state `update` leaves after token-level positions with these acceptance
    probabilities (the stochastic rule's sum min(p, q) doubling as its ceiling)."""
    terms = [float(a) for a in probabilities]
    variances = [a * (1 - a) for a in terms]
    return AcceptanceState(
        positions_tested=len(terms), tested=len(terms), accepted=accepted,
        claimed=ExactSum(terms), claimed_variance=ExactSum(variances),
        ceiling=ExactSum(terms), ceiling_variance=ExactSum(variances))


def test_one_acceptance_against_a_tiny_closed_form_is_no_failure() -> None:
    state = _state(np.array([0.0005, 0.0007, 0.0009]), accepted=1)
    result = state.result(1e-4)
    assert result.verdict.value == "pass", result.detail
    assert "Bennett" in result.detail


def test_an_engine_accepting_what_the_rule_almost_never_accepts_still_fails() -> None:
    # The nearest wrong variant at this size: all three accepted where the rule's
    # probabilities sum to 0.0021 (P about 3e-10 under the claim).
    state = _state(np.array([0.0005, 0.0007, 0.0009]), accepted=3)
    assert state.result(1e-4).verdict.value == "fail"


def test_bennett_bounds_the_exact_tail_of_small_counts() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        a = rng.uniform(0, 0.05, size=int(rng.integers(1, 30)))
        # The exact Poisson-binomial law of the count, by convolution.
        law = np.array([1.0])
        for ai in a:
            law = np.convolve(law, [1 - ai, ai])
        mean, variance = float(a.sum()), float((a * (1 - a)).sum())
        for count in range(1, min(len(a), 6) + 1):
            if count <= mean:
                continue
            exact = float(law[count:].sum())
            assert exact <= bennett_tail(count - mean, variance, 1.0) * (1 + 1e-9)


def test_a_correct_engine_of_many_short_requests_false_alarms_at_most_alpha() -> None:
    """20,000 correct requests of three positions with acceptance probabilities near 0.001:
    the normal z failed every request that accepted anything (about 0.4% of them, 4 times
    alpha); Bennett's bound fails none that accepted once."""
    rng = np.random.default_rng(11)
    alpha, requests = 1e-3, 20_000
    failed = normal_failed = 0
    critical = 3.2905267314918945  # the normal quantile at alpha / 2 = 5e-4
    for _ in range(requests):
        a = rng.uniform(0.0005, 0.002, size=3)
        accepted = int((rng.random(3) < a).sum())
        state = _state(a, accepted)
        failed += state.result(alpha).verdict.value == "fail"
        variance = float((a * (1 - a)).sum())
        normal_failed += abs(accepted - a.sum()) / math.sqrt(variance) > critical
    assert variance < NORMAL_MIN_VARIANCE
    assert normal_failed > 2 * alpha * requests  # the approximation this replaces
    assert failed <= alpha * requests


def test_bennett_with_the_span_of_a_block_round_bounds_its_kept_length() -> None:
    # One block round of k = 4 that keeps all four with probability 0.001, else none: the
    # increment moves up to 4 above its mean, and the bound must say so.
    k, rare = 4, 0.001
    mean = k * rare
    variance = k * k * rare - mean * mean
    exact = rare  # P(kept >= 4)
    assert bennett_tail(k - mean, variance, float(k)) >= exact
    assert bennett_tail(k - mean, variance, 1.0) < exact  # span 1 would understate it


def test_three_block_rounds_that_keep_all_four_against_a_law_of_one_in_a_thousand_fail() -> None:
    # P = 1e-9 under the claimed law; the bound must see that a kept length moves by k.
    k, rare, rounds = 4, 0.001, 3
    mean = k * rare
    state = AcceptanceState(
        positions_tested=rounds * k, blocks=rounds, block_span=k, block_tested=rounds * k,
        kept=rounds * k, block_means=ExactSum([mean] * rounds),
        block_variances=ExactSum([k * k * rare - mean * mean] * rounds))
    result = state.result(1e-4)
    assert result.verdict.value == "fail", result.detail
