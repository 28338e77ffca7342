"""The ``sample_from_distribution`` vectors.
"""

from __future__ import annotations

from fractions import Fraction

import mlx.core as mx
import numpy as np

from specaccept import sample_from_distribution

from .common import (
    GenerationError,
    Json,
    Lcg,
    Vector,
    arr,
    check_equal,
    draw_is_robust,
    encode_reals,
    f32,
    ints,
    oracle_sample,
    rational,
    scalar_int,
    seed_of,
    vector,
)

# --- sample_from_distribution -----------------------------------------------------------


def sample_from_distribution_vectors() -> list[Vector]:
    below_one = 1.0 - 2.0**-24
    hand: list[tuple[str, str, list[float], float]] = [
        ("zero_id_skipped_at_0", "u = 0: the first id of positive mass", [0.5, 0.0, 0.25, 0.25],
         0.0),
        ("inside_first", "u * total = 0.25 < cumsum[0] = 0.5", [0.5, 0.0, 0.25, 0.25], 0.25),
        ("strict_tie_moves_on", "u * total = 0.5 = cumsum[0]: strict >, and id 1 has no mass",
         [0.5, 0.0, 0.25, 0.25], 0.5),
        ("strict_tie_at_0_75", "u * total = 0.75 = cumsum[2]: the next id", [0.5, 0.0, 0.25, 0.25],
         0.75),
        ("last_id", "u close to 1 lands on the last id", [0.5, 0.0, 0.25, 0.25], 0.96875),
        ("largest_uniform_below_one", "u = 1 - 2**-24, the largest float32 below 1",
         [0.5, 0.5, 0.0], below_one),
        ("leading_zeros", "u = 0 with leading zero mass skips them", [0.0, 0.0, 1.0], 0.0),
        ("unnormalized_weights", "the draw compares against u * sum: 0.5 * 4 = 2 = cumsum[0]",
         [2.0, 1.0, 1.0], 0.5),
        ("unnormalized_inside", "u * sum = 1 < cumsum[0] = 2", [2.0, 1.0, 1.0], 0.25),
        ("one_hot", "a one-hot law returns its id for every u", [0.0, 0.0, 1.0, 0.0], 0.5),
        ("normalising_first_breaks_the_tie",
         "u * total = 0.5 * 14 = 7 = cumsum[2] exactly, so strict > moves on to id 3; a port "
         "that normalises first sums 2/14 + 4/14 + 1/14 to just above 0.5 and returns id 2",
         [2.0, 4.0, 1.0, 7.0], 0.5),
        ("normalising_first_breaks_the_tie_at_0_75",
         "u * total = 0.75 * 12 = 9 = cumsum[2]: id 3; normalising first returns id 2",
         [3.0, 4.0, 2.0, 3.0], 0.75),
    ]
    out: list[Vector] = []
    for name, note, probs, u in hand:
        u = f32(u)
        got = scalar_int(sample_from_distribution(arr(probs), u))
        want = oracle_sample(rational(probs), Fraction(u))
        if not draw_is_robust(rational(probs), Fraction(u)):
            raise GenerationError(f"{name} is not robust")
        check_equal(name, got, want)
        out.append(vector(name, note, {"probs": encode_reals(probs), "u": u}, {"token": got}, 0.0))

    out.extend(accumulation_order_vectors())
    out.append(fallback_vector("fallback_no_eligible_id", [2.0**-149, 2.0**-149, 0.0]))
    out.append(fallback_vector("fallback_skips_two_trailing_zeros",
                               [2.0**-149, 2.0**-149, 0.0, 0.0]))

    rows = [[0.5, 0.0, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 1.0]]
    per_row = [0.5, 0.5, 0.0]
    shared = 0.75
    cases: list[tuple[str, str, float | mx.array, list[float], Json]] = [
        ("rows_one_uniform_each", "[R, V] probs with an [R] uniform per row",
         mx.array(per_row, dtype=mx.float32), per_row, list(per_row)),
        ("rows_shared_uniform", "[R, V] probs with one number for all rows", shared,
         [shared] * len(rows), shared),
    ]
    for name, note, u_arg, u_list, u_json in cases:
        got_ids = ints(sample_from_distribution(arr(rows), u_arg))
        want_ids = [oracle_sample(rational(r), Fraction(x))
                    for r, x in zip(rows, u_list, strict=True)]
        check_equal(name, got_ids, want_ids)
        out.append(vector(name, note, {"probs": encode_reals(rows), "u": u_json},
                          {"token": list(got_ids)}, 0.0))

    rng = Lcg(seed_of(1))
    for i in range(16):
        size = 3 + rng.below(6)
        probs = rng.dyadic_distribution(size)
        u = rng.uniform()
        got = scalar_int(sample_from_distribution(arr(probs), u))
        check_equal(f"random_{i}", got, oracle_sample(rational(probs), Fraction(u)))
        out.append(vector(f"random_{i:02d}", "pseudo-random dyadic case", {
            "probs": encode_reals(probs), "u": u}, {"token": got}, 0.0))
    return out


def fallback_vector(name: str, probs: list[float]) -> Vector:
    """The one draw that reaches the fallback within the preconditions: subnormal weights.

    With w = [2**-149, 2**-149, 0] (the smallest float32 subnormals) and u = 0.75,
    u * total = 1.5 * 2**-149 rounds to 2**-148 = cumsum[1] (ties to even), so no id passes
    the strict test and the last id of positive weight is returned. The exact draw is id 1
    too; a port without the fallback returns 0 (an argmax over no eligible id) or 2.
    """
    u = 0.75
    weights = np.array(probs, dtype=np.float32)
    target = np.float32(u) * np.cumsum(weights, dtype=np.float32)[-1]
    if ((np.cumsum(weights, dtype=np.float32) > target) & (weights > 0)).any():
        raise GenerationError(f"{name}: some id is eligible in float32")
    got = scalar_int(sample_from_distribution(arr(probs), u))
    check_equal(name, got, oracle_sample(rational(probs), Fraction(u)))
    return vector(name,
                  "subnormal weights: u * total rounds up to cumsum[1], no id is eligible, and "
                  "the last id of positive weight is returned (needs IEEE subnormals, no "
                  "flush to zero)", {"probs": encode_reals(probs), "u": u}, {"token": got}, 0.0)


def _first_eligible(weights: np.ndarray, partial_sums: np.ndarray, target: float) -> int:
    for i, (w, s) in enumerate(zip(weights.tolist(), partial_sums.tolist(), strict=True)):
        if w > 0 and s > target:
            return i
    return int(np.flatnonzero(weights > 0)[-1])


def sequential_float32_draw(probs: list[float], u: float) -> int:
    """The draw as spec/sample_from_distribution.md fixes it, one float32 addition at a time:
    S_0 = w_0, S_i = fl32(S_(i-1) + w_i), target = fl32(u * S_(V-1))."""
    weights = np.array(probs, dtype=np.float32)
    sums, running = [], np.float32(0.0)
    for w in weights:
        running = np.float32(running + w)
        sums.append(running)
    partial = np.array(sums, dtype=np.float32)
    return _first_eligible(weights, partial, float(np.float32(u) * partial[-1]))


def wider_accumulator_draws(probs: list[float], u: float) -> dict[str, int]:
    """What three plausible ports draw: a float64 prefix sum; a prefix sum accumulated in
    float64 and stored as float32 (a CPU cumsum that accumulates in double); a float32
    Hillis-Steele scan (the association of a parallel GPU scan)."""
    weights = np.array(probs, dtype=np.float32)
    wide = np.cumsum(weights.astype(np.float64))
    stored = wide.astype(np.float32)
    scan = weights.copy()
    step = 1
    while step < len(scan):
        shifted = np.concatenate([np.zeros(step, np.float32), scan[:-step]])
        scan = (scan + shifted).astype(np.float32)
        step *= 2
    return {
        "float64 prefix sum": _first_eligible(weights, wide, u * float(wide[-1])),
        "float64 accumulation stored as float32": _first_eligible(
            weights, stored, float(np.float32(u) * stored[-1])),
        "float32 parallel (Hillis-Steele) scan": _first_eligible(
            weights, scan, float(np.float32(u) * scan[-1])),
    }


def accumulation_order_vectors() -> list[Vector]:
    """Draws at a float32 prefix-sum breakpoint, where only the spec's accumulation order
    (left to right, each partial sum rounded to float32) gives the expected id. Every other
    vector keeps its draws 2**-16 from a breakpoint, so a port with a wider accumulator
    passed them all; each case here is checked to fail each wider or reassociated sum."""
    cases = [
        ("accumulation_float32_sequential",
         "w = (1/2, 2**-25, 2**-25, 1/2 - 2**-24), u = 1/2. Left to right in float32, 1/2 + "
         "2**-25 rounds back to 1/2 (ties to even) twice, the total is 1 - 2**-24 and u * total "
         "< S_0 = 1/2: id 0. A float64 prefix sum gives id 1 (the exact draw), float64 "
         "accumulation stored as float32 and a parallel float32 scan give id 2",
         [0.5, 2.0**-25, 2.0**-25, 0.5 - 2.0**-24], 0.5),
        ("accumulation_float32_sequential_long_tail",
         "w = (1/2, then eight 2**-26, then 1/2 - 2**-23), u = 1/2: each 2**-26 vanishes "
         "against 1/2 in float32, so the total is 1 - 2**-23 and the draw is id 0; a float64 "
         "prefix sum gives id 1 (the exact draw), float64 accumulation stored as float32 id 3, "
         "a parallel float32 scan id 4",
         [0.5, *([2.0**-26] * 8), 0.5 - 2.0**-23], 0.5),
    ]
    out: list[Vector] = []
    for name, note, probs, u in cases:
        got = scalar_int(sample_from_distribution(arr(probs), u))
        check_equal(name, got, sequential_float32_draw(probs, u))
        wrong = wider_accumulator_draws(probs, u)
        if got in wrong.values():
            raise GenerationError(f"{name}: a wider accumulator also draws {got}: {wrong}")
        out.append(vector(name, note, {"probs": encode_reals(probs), "u": f32(u)},
                          {"token": got}, 0.0))
    return out
