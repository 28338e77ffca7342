"""The ``grid_draw_counts`` vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from specaccept import UNIFORM_GRID_SIZE, grid_draw_counts

from .common import (
    GenerationError,
    Vector,
    arr,
    check_equal,
    encode_reals,
    f32,
    id_list,
    ints,
    rational,
    vector,
)

# --- grid_draw_counts -----------------------------------------------------------------------


def searched_grid_counts(probs: Sequence[float]) -> list[int]:
    """The grid counts by bisection on the draw's own float32 arithmetic (NumPy).

    ``u * total`` (float32) never decreases as the grid index i grows, so the number c_j of
    grid points with ``u * total < S_j`` is found by bisection for each id, exactly; the
    counts follow as in the draw: ids of zero weight get none, the points where no id is
    eligible go to the last id of positive weight. Independent of the library's code: one
    scalar bisection per id in NumPy, where the library bisects every id at once in MLX.
    """
    weights = np.array(probs, dtype=np.float32)
    partial = np.cumsum(weights, dtype=np.float32)
    step = np.float32(1.0 / UNIFORM_GRID_SIZE)

    def below(i: int, bound: np.float32) -> bool:
        return bool(np.float32(np.float32(i) * step) * partial[-1] < bound)

    counts_below = []
    for bound in partial:
        low, high = 0, UNIFORM_GRID_SIZE  # below(i) holds for i < answer, fails from there on
        while low < high:
            middle = (low + high) // 2
            if below(middle, bound):
                low = middle + 1
            else:
                high = middle
        counts_below.append(low)
    counts, before = [], 0
    for j, c in enumerate(counts_below):
        counts.append(c - before if weights[j] > 0 else 0)
        before = c if weights[j] > 0 else before
    last_positive = max(j for j in range(len(probs)) if weights[j] > 0)
    counts[last_positive] += UNIFORM_GRID_SIZE - counts_below[-1]
    return counts


def grid_draw_counts_vectors() -> list[Vector]:
    dyadic: list[tuple[str, str, list[float]]] = [
        ("dyadic_law_exact", "prefix sums and u * total exact: counts = 2**24 * w",
         [0.5, 0.0, 0.25, 0.25]),
        ("one_hot", "a one-hot law gets every grid point", [0.0, 1.0, 0.0]),
        ("breakpoint_at_the_first_grid_point",
         "w = [2**-24, 1 - 2**-24]: only u = 0 draws id 0, the grid point at index 0",
         [2.0**-24, 1.0 - 2.0**-24]),
        ("unnormalized_dyadic", "weights need not sum to 1: total 4", [2.0, 1.0, 0.0, 1.0]),
    ]
    brute: list[tuple[str, str, list[float]]] = [
        ("tiny_weight_absorbed",
         "2**-30 is absorbed by the prefix sum 1 + 2**-30 = 1 in float32: id 1 gets no point",
         [1.0, 2.0**-30, 1.0]),
        ("thirds", "total 3: the breakpoints round, and the counts are not 2**24 / 3",
         [1.0, 1.0, 1.0]),
        ("decimal_weights", "a float32 law of decimals", [f32(0.1), f32(0.2), f32(0.3), f32(0.4)]),
        ("subnormal_total",
         "total 2**-148: u * total takes few values, so the breakpoint lies far from "
         "2**24 * S_j / total (an estimate-and-window search misses it by millions)",
         [2.0**-149, 2.0**-149, 0.0]),
    ]
    out = []
    for name, note, probs in dyadic + brute:
        got = ints(grid_draw_counts(arr(probs)))
        if (name, note, probs) in dyadic:
            total = sum(rational(probs))
            want = [int(Fraction(w) / total * UNIFORM_GRID_SIZE) for w in probs]
        else:
            want = searched_grid_counts(probs)
        check_equal(name, got, want)
        if sum(got) != UNIFORM_GRID_SIZE:
            raise GenerationError(f"{name}: the counts do not sum to 2**24")
        out.append(vector(name, note, {"probs": encode_reals(probs)}, {"counts": id_list(got)},
                          0.0))
    return out
