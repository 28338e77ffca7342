"""Float32 edges the statistical tests cannot see, pinned where the arithmetic decides.

The draw: uniforms next to a breakpoint.

`sample_from_distribution` compares float32 prefix sums with ``u * total``
rounded to float32, where total is the last prefix sum. A draw that normalises
the weights first (``cumsum(w / sum(w)) > u``) has other breakpoints in the
last bits, so it returns other ids for some 24-bit uniforms; a port replaying a
seeded run would then diverge. Away from a breakpoint every order agrees, so
this test aims at the breakpoints.

The temperature: the logits are shifted by their max before the division, so a
small temperature sends every non-maximal logit towards -inf; dividing first
overflows large logits to +inf, and the softmax of two infinities is NaN.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import numpy.typing as npt

from specaccept import SamplerConfig, effective_token_distribution, sample_from_distribution

GRID = 2.0**-24  # the uniforms of a seeded run are multiples of this


def reference_draw(weights: npt.NDArray[np.float32], u: float) -> int:
    """The documented draw, spelled out in NumPy float32: sequential prefix sums, u * total."""
    partial = np.cumsum(weights, dtype=np.float32)
    target = np.float32(u) * partial[-1]
    eligible = (partial > target) & (weights > 0)
    return int(np.argmax(eligible)) if eligible.any() else int(np.flatnonzero(weights)[-1])


def normalise_first_draw(weights: npt.NDArray[np.float32], u: float) -> int:
    partial = np.cumsum(weights / weights.sum(dtype=np.float32), dtype=np.float32)
    eligible = (partial > np.float32(u)) & (weights > 0)
    return int(np.argmax(eligible)) if eligible.any() else int(np.flatnonzero(weights)[-1])


def uniforms_near_breakpoints(weights: npt.NDArray[np.float32]) -> list[float]:
    partial = np.cumsum(weights, dtype=np.float32)
    near = []
    for breakpoint in partial[:-1] / partial[-1]:
        centre = round(float(breakpoint) / GRID)
        near += [step * GRID for step in range(centre - 3, centre + 4) if 0 <= step < 2**24]
    return near


def test_the_draw_compares_prefix_sums_with_u_times_the_total_in_float32() -> None:
    rng = np.random.default_rng(20261203)
    rows: list[npt.NDArray[np.float32]] = []
    uniforms: list[float] = []
    for _ in range(200):
        weights = (rng.random(5) * rng.choice([0.25, 1.0, 3.0])).astype(np.float32)
        weights[rng.random(5) < 0.2] = 0.0  # zero weights between breakpoints
        if not weights.any():
            continue
        for u in uniforms_near_breakpoints(weights):
            rows.append(weights)
            uniforms.append(u)
    drawn = sample_from_distribution(mx.array(np.stack(rows)), mx.array(uniforms)).tolist()
    expected = [reference_draw(w, u) for w, u in zip(rows, uniforms, strict=True)]
    assert drawn == expected
    # The cases separate the documented order from normalise-then-draw, so the test can fail.
    other_order = [normalise_first_draw(w, u) for w, u in zip(rows, uniforms, strict=True)]
    assert sum(a != b for a, b in zip(expected, other_order, strict=True)) >= 10


def test_the_max_shift_precedes_the_temperature_so_large_logits_do_not_overflow() -> None:
    logits = mx.array([1e30, 1e29, 0.0])  # finite float32, 1e30 / 1e-9 is not
    probs = effective_token_distribution(logits, SamplerConfig(temperature=1e-9))
    assert probs.tolist() == [1.0, 0.0, 0.0]
    assert np.isnan(np.asarray(mx.softmax(logits / 1e-9, axis=-1))).all()  # the other order
