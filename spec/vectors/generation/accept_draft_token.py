"""The ``accept_draft_token`` vectors.
"""

from __future__ import annotations

from fractions import Fraction

import mlx.core as mx
import numpy as np

from specaccept import accept_draft_token

from .common import (
    INEXACT_ATOL,
    PLACEHOLDER_IDS,
    PLACEHOLDER_P,
    PLACEHOLDER_Q,
    GenerationError,
    Lcg,
    Vector,
    arr,
    bools,
    check_equal,
    draw_from,
    encode_ids,
    encode_reals,
    f32,
    id_array,
    oracle_accept,
    rational,
    scalar_bool,
    seed_of,
    vector,
)

# --- accept_draft_token -------------------------------------------------------------------


def accept_draft_token_vectors() -> list[Vector]:
    tiny = 2.0**-30
    hand: list[tuple[str, str, list[float], list[float], int, float]] = [
        ("ratio_half_u_quarter", "u * q = 0.125 <= p = 0.25", [0.25, 0.75], [0.5, 0.5], 0, 0.25),
        ("ratio_half_boundary_inclusive", "u * q = 0.25 = p: accepted (<=)", [0.25, 0.75],
         [0.5, 0.5], 0, 0.5),
        ("ratio_half_u_three_quarters", "u * q = 0.375 > p = 0.25", [0.25, 0.75], [0.5, 0.5], 0,
         0.75),
        ("p_above_q_always", "p[t] >= q[t]: accepted for every u", [0.75, 0.25], [0.5, 0.5], 0,
         0.96875),
        ("underflowed_q_and_p_zero",
         "q[t] = 0 (underflowed) and p[t] = 0: u * q <= p reads 0 <= 0, the p[t] > 0 conjunct "
         "rejects", [0.0, 1.0], [0.0, 1.0], 0, 0.0),
        ("p_zero_u_zero", "p[t] = 0 rejects even with u = 0", [0.0, 1.0], [0.5, 0.5], 0, 0.0),
        ("q_zero_p_positive", "q[t] = 0 < p[t]: accepted without a division", [0.5, 0.5],
         [0.0, 1.0], 0, 0.96875),
        ("tiny_p_u_zero", "p[t] = 2**-30: u = 0 accepts", [tiny, 1.0 - tiny], [0.5, 0.5], 0, 0.0),
        ("tiny_p_boundary", "u * q = 2**-29 * 0.5 = 2**-30 = p[t]: accepted", [tiny, 1.0 - tiny],
         [0.5, 0.5], 0, 2.0**-29),
        ("tiny_p_rejects", "u * q = 2**-25 > p[t] = 2**-30", [tiny, 1.0 - tiny], [0.5, 0.5], 0,
         2.0**-24),
        ("divided_accept_test_differs",
         "u = fl(p[0] / q[0]) exactly: u * q[0] > p[0] rejects (exactly and in float32), while "
         "a port testing u <= p[0] / q[0] accepts",
         [0.33957093954086304, 0.660429060459137], [0.627545177936554, 0.37245482206344604], 0,
         0.5411099791526794),
    ]
    out: list[Vector] = []
    for name, note, p, q, token, u in hand:
        p, q = [f32(x) for x in p], [f32(x) for x in q]
        if abs(sum(p) - 1) > INEXACT_ATOL or abs(sum(q) - 1) > INEXACT_ATOL:
            raise GenerationError(f"{name}: p and q must be distributions (up to rounding)")
        got = scalar_bool(accept_draft_token(arr(p), arr(q), token, u))
        check_equal(name, got, oracle_accept(rational(p), rational(q), token, Fraction(u)))
        if name == "divided_accept_test_differs":
            divided = np.float32(u) <= np.float32(p[token]) / np.float32(q[token])
            check_equal(f"{name}: a dividing port", bool(divided), not got)
        out.append(vector(name, note, {"p": encode_reals(p), "q": encode_reals(q),
                                       "token": token, "u": u}, {"accepted": got}, 0.0))

    p_rows = [[0.25, 0.75], [0.0, 1.0], [0.5, 0.5]]
    q_rows = [[0.5, 0.5], [0.5, 0.5], [0.0, 1.0]]
    tokens, us = [0, 0, 0], [0.5, 0.0, 0.75]
    got_rows = bools(accept_draft_token(arr(p_rows), arr(q_rows), mx.array(tokens),
                                        mx.array(us)))
    want_rows = [oracle_accept(rational(a), rational(b), t, Fraction(u))
                 for a, b, t, u in zip(p_rows, q_rows, tokens, us, strict=True)]
    check_equal("rows", got_rows, want_rows)
    out.append(vector("rows", "[k, V] rows with [k] tokens and uniforms",
                      {"p": encode_reals(p_rows), "q": encode_reals(q_rows), "token": list(tokens),
                       "u": list(us)}, {"accepted": list(got_rows)}, 0.0))

    rng = Lcg(seed_of(2))
    for i in range(16):
        size = 2 + rng.below(5)
        p = rng.dyadic_distribution(size)
        q = rng.dyadic_distribution(size)
        token = draw_from(q, rng)
        u = rng.uniform()
        got = scalar_bool(accept_draft_token(arr(p), arr(q), token, u))
        check_equal(f"random_{i}", got, oracle_accept(rational(p), rational(q), token, Fraction(u)))
        out.append(vector(f"random_{i:02d}", "pseudo-random dyadic case; token drawn from q",
                          {"p": encode_reals(p), "q": encode_reals(q), "token": token, "u": u},
                          {"accepted": got}, 0.0))

    # A placeholder next to a real draft that is kept: id 0, where the placeholder is
    # gathered, would be kept too, and -4 read Python-style would be id 0.
    p_rows, q_rows = [PLACEHOLDER_P] * 2, [PLACEHOLDER_Q] * 2
    for label, value, dtype in PLACEHOLDER_IDS:
        tokens = [0, value]
        got_rows = bools(accept_draft_token(arr(p_rows), arr(q_rows), id_array(tokens, dtype),
                                            mx.array([0.0, 0.0])))
        want_rows = [oracle_accept(rational(a), rational(b), t, Fraction(0))
                     for a, b, t in zip(p_rows, q_rows, tokens, strict=True)]
        check_equal(f"placeholder_{label}", got_rows, want_rows)
        check_equal(f"placeholder_{label} is rejected", want_rows, [True, False])
        out.append(vector(f"placeholder_{label}",
                          f"id {value} ({dtype or 'int32'}) is no draft: rejected, never read",
                          {"p": encode_reals(p_rows), "q": encode_reals(q_rows),
                           "token": encode_ids(tokens, dtype), "u": [0.0, 0.0]},
                          {"accepted": list(got_rows)}, 0.0))
    return out
