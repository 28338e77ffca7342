"""Lemma 1, modified rejection sampling at one position: the checks of
``proofs/single_position.md`` (and lemma 3's coupling of ``proofs/ceiling.md``)."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import mlx.core as mx
import numpy as np
import pytest

from proofs.exact_rounds import (
    ONE,
    PAIRS,
    RESAMPLE_FROM_P,
    STOCHASTIC,
    TARGETS,
    ZERO,
    Dist,
    accept_breaks,
    acceptance,
    as_float32,
    as_law,
    cut_points,
    dist,
    draws,
    emitted_token_law,
    inside,
    position_law,
    read_ints,
    residual,
    sum_min,
    support,
)
from specaccept import (
    accept_draft_token,
    residual_resample,
    sample_from_distribution,
)


def test_library_decisions_switch_at_the_exact_breakpoints() -> None:
    """The premise of the method. Each float32 decision is monotone in its uniform (float
    rounding of u * q and of u * total is monotone), so it is a step function; here every
    step is shown to sit within 2**-20 of its exact breakpoint, for the accept test, the
    draw from p and the residual draw, on every pair."""
    delta = Fraction(1, 2**20)

    def near(b: Fraction) -> list[float]:
        """float32 uniforms just below and just above b (those inside (0, 1))."""
        return [inside(u - delta / 4, u + delta / 4) for u in (b - delta, b + delta)
                if ZERO < u < ONE]

    def first_above(points: list[Fraction], u: float) -> int:
        return min(i for i, s in enumerate(points) if s > Fraction(u))

    accept_cases: list[tuple[Dist, Dist, int, float]] = [
        (p, q, t, u) for p, q in PAIRS for t in range(len(p))
        for b in accept_breaks(p, q, t) for u in near(b)
    ]
    p_rows, q_rows, tokens, us = zip(*accept_cases, strict=True)
    accepted = accept_draft_token(as_float32(p_rows), as_float32(q_rows),
                                  mx.array(tokens, dtype=mx.int32), mx.array(us))
    assert [bool(a) for a in read_ints(accepted)] == [
        p[t] > 0 and Fraction(u) * q[t] <= p[t] for p, q, t, u in accept_cases]

    for draw_from_residual in (False, True):
        cases = [
            (p, q, u) for p, q in PAIRS
            for b in cut_points(residual(p, q) if draw_from_residual else p) for u in near(b)
        ]
        p_rows, q_rows, us = zip(*cases, strict=True)
        u_array = mx.array(us, dtype=mx.float32)
        drawn = (residual_resample(as_float32(p_rows), as_float32(q_rows), u_array)
                 if draw_from_residual else sample_from_distribution(as_float32(p_rows), u_array))
        assert read_ints(drawn) == [
            first_above(cut_points(residual(p, q) if draw_from_residual else p), u)
            for p, q, u in cases]

    # On a breakpoint itself (dyadic here, so float32 computes u * q and the partial sums
    # exactly) the library follows its docstrings: the accept test is closed, u = p/q
    # accepts; a draw is right-continuous, u = S_i gives the next token of positive mass.
    # Continuous uniforms hit these points with probability zero, 24-bit ones with 2**-24.
    on_break = [(p, q, t, p[t] / q[t]) for p, q in PAIRS for t in range(len(p))
                if q[t] > 0 and ZERO < p[t] / q[t] < ONE
                and Fraction(float(np.float32(float(p[t] / q[t])))) == p[t] / q[t]]
    assert len(on_break) > 10
    p_rows, q_rows, tokens, bs = zip(*on_break, strict=True)
    accepted = accept_draft_token(as_float32(p_rows), as_float32(q_rows),
                                  mx.array(tokens, dtype=mx.int32),
                                  mx.array([float(b) for b in bs], dtype=mx.float32))
    assert all(bool(a) for a in read_ints(accepted))
    at_sums = [(p, b) for p in TARGETS for b in cut_points(p) if ZERO < b < ONE]
    drawn = sample_from_distribution(as_float32([p for p, _ in at_sums]),
                                     mx.array([float(b) for _, b in at_sums], dtype=mx.float32))
    assert read_ints(drawn) == [first_above(cut_points(p), float(b)) for p, b in at_sums]


@pytest.mark.parametrize("p,q", PAIRS)
def test_rejection_sampling_emits_exactly_p(p: Dist, q: Dist) -> None:
    """Lemma 1: the emitted token's law is p and the acceptance is sum min(p, q), exactly."""
    law = position_law(STOCHASTIC, p, q)
    assert emitted_token_law(law) == as_law(p)
    assert acceptance(law) == sum_min(p, q)


def rejection_coupling(p: Dist, q: Dist) -> dict[tuple[int, int], Fraction]:
    """pi(x, x) = min(p, q)(x); pi(x, y) = (q - p)+(x) (p - q)+(y) / sum (p - q)+ off it."""
    over = [max(b - a, ZERO) for a, b in zip(p, q, strict=True)]
    under = [max(a - b, ZERO) for a, b in zip(p, q, strict=True)]
    mass = sum(under, ZERO)
    pi = {(x, y): (min(p[x], q[x]) if x == y else over[x] * under[y] / mass if mass else ZERO)
          for x in range(len(p)) for y in range(len(p))}
    return support(pi)


@pytest.mark.parametrize("p,q", PAIRS)
def test_rejection_sampling_realises_the_maximal_coupling(p: Dist, q: Dist) -> None:
    """Lemma 3: the library's joint law of (draft, emitted) is exactly the coupling whose
    diagonal is min(p, q), so it attains the ceiling (test_ceiling_lp.py checks that
    coupling against the linear program)."""
    joint: defaultdict[tuple[int, int], Fraction] = defaultdict(Fraction)
    for token, wq in draws(q).items():
        for (_, emitted), w in STOCHASTIC.verdicts(p, q, token).items():
            joint[(token, emitted)] += wq * w
    assert support(joint) == rejection_coupling(p, q)


def test_resampling_from_p_instead_of_the_residual_is_caught() -> None:
    """The naive replacement fails the same equality on most pairs (and never on p = q,
    where nothing is rejected)."""
    failing = [(p, q) for p, q in PAIRS
               if emitted_token_law(position_law(RESAMPLE_FROM_P, p, q)) != as_law(p)]
    assert len(failing) >= len(PAIRS) // 2
    assert (dist(8, 4, 2, 2), dist(4, 4, 4, 4)) in failing


def test_accept_test_never_admits_a_token_outside_the_target_support() -> None:
    """Lemma 1, in practice: with p(t) = 0 the library rejects, even where u * q(t) <= p(t)
    reads 0 <= 0: at u = 0 (a possible float uniform) or with q(t) underflowed to 0."""
    p = mx.array([0.0, 1.0])
    underflowed = mx.array([1e-46, 1.0 - 1e-46], dtype=mx.float32)  # 1e-46 is below float32
    assert np.array(underflowed)[0] == 0.0
    cases = [(mx.array([0.5, 0.5]), 0.0), (underflowed, 0.0), (underflowed, 0.75)]
    for q, u in cases:
        assert accept_draft_token(p, q, 0, u).item() is False
        without_conjunct = (u * q[0] <= p[0]).item()
        assert without_conjunct is True  # what the first conjunct is there to stop


def test_float32_carries_the_small_ratios_that_float16_flushes() -> None:
    """Lemma 1, in practice: float16 has no value below 2**-24 (about 6e-8), flushes what
    lies under 2**-25 to zero and rounds what lies just above to multiples of 2**-24, so
    acceptance ratios between such probabilities are lost; the library refuses float16
    and keeps them in float32."""
    small_p, small_q = 2.0**-27, 2.0**-26
    assert mx.array(2.0**-24, dtype=mx.float16).item() == 2.0**-24
    assert mx.array(small_q, dtype=mx.float16).item() == 0.0
    p = mx.array([small_p, 1.0 - small_p], dtype=mx.float32)
    q = mx.array([small_q, 1.0 - small_q], dtype=mx.float32)
    assert [accept_draft_token(p, q, 0, u).item() for u in (0.25, 0.75)] == [True, False]
    p16, q16 = p.astype(mx.float16), q.astype(mx.float16)
    assert np.array(p16)[0] == 0.0 and np.array(q16)[0] == 0.0
    with pytest.raises(TypeError, match="float32"):
        accept_draft_token(p16, q16, 0, 0.25)
    # Through float16 the ratio is gone: the product test accepts at every u, the
    # conjunct rejects at every u; neither is the true 1/2.
    p_back, q_back = p16.astype(mx.float32), q16.astype(mx.float32)
    assert [(u * q_back[0] <= p_back[0]).item() for u in (0.25, 0.75)] == [True, True]
    assert [accept_draft_token(p_back, q_back, 0, u).item() for u in (0.25, 0.75)] == [
        False, False,
    ]
    # Just above the flush, float16 rounds to multiples of 2**-24: a 5/7 ratio between
    # 5 * 2**-27 and 7 * 2**-27 reads 1, a certain accept even with the conjunct.
    p = mx.array([5 * 2.0**-27, 1.0 - 5 * 2.0**-27], dtype=mx.float32)
    q = mx.array([7 * 2.0**-27, 1.0 - 7 * 2.0**-27], dtype=mx.float32)
    assert [accept_draft_token(p, q, 0, u).item() for u in (0.5, 0.75)] == [True, False]
    p_back, q_back = (d.astype(mx.float16).astype(mx.float32) for d in (p, q))
    assert np.array(p_back)[0] == np.array(q_back)[0] == 2.0**-24
    assert [accept_draft_token(p_back, q_back, 0, u).item() for u in (0.5, 0.75)] == [
        True, True,
    ]
