"""The ``residual_distribution`` vectors (with ``residual_resample``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from specaccept import residual_distribution, residual_resample

from .common import (
    Json,
    Lcg,
    Row,
    Vector,
    arr,
    check_close,
    check_equal,
    draw_is_robust,
    encode_reals,
    exact_atol,
    f32,
    floats,
    oracle_residual,
    oracle_sample,
    rational,
    scalar_int,
    seed_of,
    vector,
)

# --- residual_distribution + residual_resample --------------------------------------------


def residual_vector(name: str, note: str, p: Row, q: Row, uniforms: Sequence[float],
                    bit_exact: bool = False) -> Vector:
    """`bit_exact`: the quotients are correctly rounded float32 divisions of exact values, so
    the vector pins them at atol 0 (checked here against the float32 division)."""
    residual = floats(residual_distribution(arr(p), arr(q)))
    want = oracle_residual(rational(p), rational(q))
    atol = exact_atol(want)
    check_close(name, residual, [float(x) for x in want], atol)
    if bit_exact:
        excess = np.maximum(np.array(p, np.float32) - np.array(q, np.float32), np.float32(0))
        divided = excess / excess.sum(dtype=np.float32)
        check_equal(f"{name} float32 division", residual, [float(x) for x in divided])
        atol = 0.0
    kept_u: list[Json] = []
    tokens: list[Json] = []
    for u in uniforms:
        if not draw_is_robust(want, Fraction(u)):
            continue
        token = scalar_int(residual_resample(arr(p), arr(q), u))
        check_equal(f"{name} u={u}", token, oracle_sample(want, Fraction(u)))
        kept_u.append(u)
        tokens.append(token)
    return vector(name, note, {"p": encode_reals(p), "q": encode_reals(q), "u": kept_u},
                  {"residual": encode_reals(residual), "tokens": tokens}, atol)


def residual_distribution_vectors() -> list[Vector]:
    us = (0.0, 0.25, 0.5, 0.75, 0.96875)
    out = [
        residual_vector("excess_on_one_id", "relu(p - q) has mass only at id 0",
                        [0.5, 0.25, 0.25], [0.25, 0.5, 0.25], us),
        residual_vector("p_equals_q_falls_back_to_p",
                        "no residual mass: the fallback returns p itself", [0.5, 0.5], [0.5, 0.5],
                        us),
        residual_vector("no_mass_falls_back_to_p_not_q",
                        "p <= q everywhere yet p != q: p is a float32 distribution one rounding "
                        "short of 1, and the fallback returns p itself, not q",
                        [0.5, f32(0.49999997)], [0.5, 0.5], us),
        residual_vector("order_residual_divides_by_mass",
                        "float32 order: relu(p - q) / mass, one correctly rounded division per "
                        "id, bit for bit: multiplying by 1 / mass gives 5/6 one ulp too high",
                        [0.0, 0.0625, 0.9375], [0.375, 0.0, 0.625], us, bit_exact=True),
        residual_vector("residual_inside_target_support",
                        "ids with p = 0 never get residual mass", [0.0, 0.5, 0.5, 0.0],
                        [0.25, 0.25, 0.25, 0.25], us),
        residual_vector("inexact_thirds", "mass 0.75: the residual is [2/3, 1/3, 0]",
                        [0.5, 0.5, 0.0], [0.0, 0.25, 0.75], us),
        residual_vector("greedy_drafter_one_hot_q", "a one-hot q removes the draft's id",
                        [0.25, 0.5, 0.25], [1.0, 0.0, 0.0], us),
    ]
    rng = Lcg(seed_of(3))
    for i in range(12):
        size = 2 + rng.below(6)
        p = rng.dyadic_distribution(size)
        q = rng.dyadic_distribution(size)
        out.append(residual_vector(f"random_{i:02d}", "pseudo-random dyadic case", p, q,
                                   [rng.uniform() for _ in range(3)]))
    return out
