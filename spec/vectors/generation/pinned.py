"""Choices a port could get wrong without failing an earlier vector, one vector each.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specaccept import sample_from_distribution

from .common import (
    GenerationError,
    Vector,
    arr,
    check_equal,
    encode_reals,
    scalar_int,
    typed,
    vector,
)
from .errors import base_inputs, error_vector
from .verify_blockwise import joint_vector

# --- choices a port could get wrong without failing an earlier vector ------------------------
# Each vector below pins one observable choice that a port written from spec/ once got wrong
# while passing every other vector: the input on which the wrong choice and the normative one
# part. They are appended to their families (after the families' own vectors, before the
# error vectors) so that no earlier vector moves.


def draw_rounding_vector(name: str, note: str, probs: list[float], grid_index: int) -> Vector:
    """A draw whose answer hangs on float32 rounding of ``u * total``: checked against the
    normative float32 expression (spec/sample_from_distribution.md) evaluated in NumPy, not
    against the exact oracle, since rounding is the point. ``u = grid_index / 2**24``."""
    u = grid_index / 2.0**24
    weights = np.array(probs, dtype=np.float32)
    partial = np.cumsum(weights, dtype=np.float32)
    normative = partial > np.float32(u) * partial[-1]
    divided = partial / partial[-1] > np.float32(u)
    want = int(np.argmax(normative))
    if want == int(np.argmax(divided)):
        raise GenerationError(f"{name}: S_i / S > u does not differ here")
    got = scalar_int(sample_from_distribution(arr(probs), u))
    check_equal(name, got, want)
    return vector(name, note, {"probs": encode_reals(probs), "u": u}, {"token": got}, 0.0)


def pinned_draw_vectors() -> list[Vector]:
    return [
        draw_rounding_vector(
            "compares_partial_sums_with_u_times_total",
            "u = 9868950 / 2**24 on the uniform grid, total = fl(1.7): cumsum[0] = 1 > "
            "fl(u * total), so id 0; S_i / S > u instead rounds 1 / fl(1.7) below u and "
            "returns id 1", [1.0, 0.7], 9868950),
        draw_rounding_vector(
            "compares_partial_sums_with_u_times_total_upwards",
            "u = 14680063 / 2**24, total = fl(0.8): cumsum[0] = fl(0.7) <= fl(u * total), "
            "so id 1; S_i / S > u instead returns id 0", [0.7, 0.1], 14680063),
    ]


def pinned_joint_vectors() -> list[Vector]:
    made = [
        joint_vector(
            "zero_residual_keep_convention_is_one",
            "Z_1 = 0 with w_1 = 1 (p_2 = q_2) gives h_1 = 1 by convention, and the second "
            "draft is one neither model can produce (w_2 = h_2 = 0), so h_1 decides: "
            "tau = 1 (h_1 = 0 would give tau = 0 and a draw from p_1)",
            [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]],
            [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], [0, 2],
            [[0.96875, 0.25], [0.5, 0.75], [0.0, 0.0]]),
        joint_vector(
            "q_zero_reset_outweighs_a_deep_deficit",
            "w_1 = 1/8 (a log deficit of 2.08), then q_2(X_2) = 0 < p_2(X_2): w_2 = 1, so "
            "eta_2 = 1/2 keeps both drafts; a reset of log ratio 1 instead of "
            "sum |log r| + 1 leaves w_2 = e**-1.08 < 1/2",
            [[0.0625, 0.9375], [0.5, 0.5], [1.0, 0.0]], [[0.5, 0.5], [1.0, 0.0]], [0, 1],
            [[0.96875, 0.0], [0.5, 0.0], [0.0, 0.0]]),
        joint_vector(
            "log_ratio_of_a_subnormal_q",
            "q_1(X_1) = 2**-140, subnormal: log p - log q = 96.3 and w_1 = 1, so the draft "
            "is kept; log(p / q) overflows p / q to inf and turns w_1 into NaN",
            [[0.5, 0.5], [1.0, 0.0]], [[2.0**-140, 1.0]], [0], [[0.5, 0.0], [0.0, 0.0]]),
    ]
    kept = [v for v in made if v is not None]
    if len(kept) != len(made):
        raise GenerationError("a pinned verify_blockwise case is not robust")
    return kept


def float64_error_vectors(family: str) -> list[Vector]:
    """float64 probabilities are refused like float16 ones: every rule is specified in
    float32, and a float64 array would run the same formulas at another precision."""
    f64 = typed([0.5, 0.5], "float64")
    cases = {
        "sample_from_distribution": ("probs", {"probs": f64}),
        "accept_draft_token": ("q", {"q": f64}),
        "verify_blockwise": ("draft_probs", {"draft_probs": typed([[0.5, 0.5]], "float64")}),
    }
    if family not in cases:
        return []
    argument, changes = cases[family]
    inputs = base_inputs(family)
    inputs.update(changes)
    return [error_vector(family, f"error_{argument}_float64",
                         "float64 probabilities are refused: every rule is specified in float32",
                         inputs, "TypeError", argument)]


PINNED_CHOICES: dict[str, Callable[[], list[Vector]]] = {
    "sample_from_distribution": pinned_draw_vectors,
    "verify_blockwise": pinned_joint_vectors,
}


def pinned_choice_vectors(family: str) -> list[Vector]:
    """The family's pinned-choice vectors, then its float64 error vector (if any)."""
    make = PINNED_CHOICES.get(family)
    return (make() if make is not None else []) + float64_error_vectors(family)
