"""Closed forms: what each rule accepts, and what acceptance buys."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import mlx.core as mx

from specaccept.core import validation
from specaccept.core.acceptance import AcceptanceRule

__all__ = [
    "ClosedForms",
    "acceptance_closed_forms",
    "acceptance_probability",
    "expected_speedup",
    "expected_tokens_per_round",
]


class ClosedForms(NamedTuple):
    """Per-position closed forms of a (p, q) pair, float32."""

    sum_min: mx.array
    """The sum Σ min(p, q), what modified rejection sampling accepts (the lossless ceiling)."""
    sum_prod: mx.array
    """The sum Σ p·q, what sampler-match accepts."""
    total_variation: mx.array
    """Half the L1 distance, (1/2) Σ abs(p - q) = 1 - Σ min(p, q) for two distributions."""


def acceptance_closed_forms(p: mx.array, q: mx.array) -> ClosedForms:
    """Return (Σ min(p,q), Σ p·q, TV(p,q)) for `[V]` or per row of `[k, V]`.

    >>> import mlx.core as mx
    >>> forms = acceptance_closed_forms(mx.array([0.5, 0.5, 0.0]), mx.array([0.25, 0.25, 0.5]))
    >>> [f.item() for f in forms]
    [0.5, 0.25, 0.5]
    """
    p = validation.require_probabilities("p", p, ndims=(1, 2))
    q = validation.require_probabilities("q", q, ndims=(1, 2))
    validation.require_same_shape("p", p, "q", q)
    return ClosedForms(
        sum_min=mx.minimum(p, q).sum(axis=-1),
        sum_prod=(p * q).sum(axis=-1),
        total_variation=0.5 * mx.abs(p - q).sum(axis=-1),
    )


def acceptance_probability(rule: AcceptanceRule, p: mx.array, q: mx.array) -> mx.array:
    """The exact probability that `rule` accepts a draft drawn from q against target p.

    stochastic: Σ min(p, q); sampler-match (both ids): Σ p·q; greedy-argmax:
    q(argmax p), the chance the draft is the target's argmax. block: Σ min(p, q),
    what it accepts in a round of one draft, where it is modified rejection sampling;
    over k > 1 drafts its acceptance is not per position (see
    `BlockwiseVerdict.accepted_length_law`).

    >>> import mlx.core as mx
    >>> p, q = mx.array([0.25, 0.75]), mx.array([0.5, 0.5])
    >>> [acceptance_probability(r, p, q).item() for r in AcceptanceRule]
    [0.5, 0.5, 0.75, 0.5, 0.75]
    """
    if not isinstance(rule, AcceptanceRule):
        raise TypeError(f"rule must be an AcceptanceRule, got {type(rule).__name__} {rule!r}")
    forms = acceptance_closed_forms(p, q)
    if rule in (AcceptanceRule.STOCHASTIC, AcceptanceRule.BLOCK):
        return forms.sum_min
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        winner = mx.argmax(p, axis=-1, keepdims=True)
        return mx.take_along_axis(q, winner, axis=-1)[..., 0]
    return forms.sum_prod


MAX_SPEEDUP_DRAFTS = 2**53
"""The largest k `expected_speedup` takes: every smaller int is exact in float64."""
SUMMED_DRAFTS = 4096
"""Up to this k, `expected_speedup` sums the series; beyond it, it uses the closed form."""


def _probability(name: str, value: object) -> float:
    number = validation.real(name, value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return number


def expected_tokens_per_round(alphas: Sequence[float]) -> float:
    """Expected tokens emitted by a round whose i-th draft is accepted with `alphas[i]`.

    A round emits its accepted prefix plus one token, so the expectation is
    ``1 + a1 + a1*a2 + ... + a1*...*ak``. With k equal alphas this is
    ``(1 - alpha**(k+1)) / (1 - alpha)``.

    >>> expected_tokens_per_round([0.5, 0.5])
    1.75
    >>> expected_tokens_per_round([])
    1.0
    """
    if isinstance(alphas, str | bytes) or not isinstance(alphas, Sequence):
        raise TypeError(f"alphas must be a sequence of probabilities, got {type(alphas).__name__}")
    expected, survival = 1.0, 1.0
    for position, alpha in enumerate(alphas):
        survival *= _probability(f"alphas[{position}]", alpha)
        expected += survival
    return expected


def expected_speedup(
    alpha: float, k: int, c: float, *, verify_cost: float = 1.0
) -> float:
    """Expected speedup over target-only decoding of k-draft rounds with i.i.d. acceptance alpha.

    Leviathan et al.: ``(1 - alpha**(k+1)) / ((1 - alpha) * (k*c + 1))``, where
    c is the drafter's cost per token relative to one target forward. That
    formula assumes a (k+1)-token target forward costs as much as a 1-token
    one; `verify_cost` is that ratio (the denominator becomes ``k*c +
    verify_cost``), which on a CPU with small models grows almost linearly in k.

    >>> expected_speedup(0.5, 2, 0.0)
    1.75
    >>> expected_speedup(1.0, 3, 0.25)
    2.2857142857142856
    """
    a = _probability("alpha", alpha)
    k = validation.integer("k", k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    c = validation.real("c", c)
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c!r}")
    verify_cost = validation.real("verify_cost", verify_cost)
    if verify_cost <= 0:
        raise ValueError(f"verify_cost must be > 0, got {verify_cost!r}")
    if k > MAX_SPEEDUP_DRAFTS:
        raise ValueError(f"k must be <= 2**53 = {MAX_SPEEDUP_DRAFTS}, got {k}")
    # The running sum of `expected_tokens_per_round` up to a few thousand drafts (its
    # rounding, which the vectors pin); beyond, the closed form, in constant memory and time.
    if k <= SUMMED_DRAFTS:
        tokens = expected_tokens_per_round([a] * k)
    else:
        tokens = float(k + 1) if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)
    cost = k * c + verify_cost
    speedup = tokens / cost
    if not math.isfinite(speedup):
        raise ValueError(
            f"the speedup E / (k*c + verify_cost) = {tokens!r} / {cost!r} overflows "
            f"float64: c = {c!r} and verify_cost = {verify_cost!r} are too small"
        )
    return speedup


