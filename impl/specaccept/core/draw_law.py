"""The exact law `sample_from_distribution` realizes on the grid of float32 uniforms.

The draw is an inverse CDF over float32 prefix sums, read with a uniform that is a
multiple of 2**-24 (see `specaccept.core.randomness`). Its law is therefore not the law
of its weights: prefix-sum rounding moves the breakpoints, and a token below one grid
step gets zero or one grid point. `grid_draw_counts` computes that law exactly, by
counting grid points, so that the error can be stated rather than estimated.
"""

from __future__ import annotations

import mlx.core as mx

from specaccept.core import validation

__all__ = ["UNIFORM_GRID_SIZE", "grid_draw_counts"]

UNIFORM_GRID_SIZE = 1 << 24
"""The uniforms of a run are ``i / 2**24`` for ``i`` in ``[0, 2**24)``: exact in float32."""

_BISECTION_STEPS = 25
"""Halvings that pin a breakpoint among the ``2**24 + 1`` possible counts: 2**25 > 2**24 + 1.
A search over the whole grid, not a window around an estimate, because near the bottom of
the float32 range (a subnormal total) the products ``u * total`` are so coarse that an
estimate from the real quotient can miss the breakpoint by millions of grid points."""


def grid_draw_counts(probs: mx.array) -> mx.array:
    """How many grid uniforms ``u = i / 2**24`` make `sample_from_distribution` return each id.

    The realized law of the draw on the uniform grid is ``counts / 2**24`` exactly: for
    each id it counts the ``i`` in ``[0, 2**24)`` whose draw
    ``sample_from_distribution(probs, i / 2**24)`` returns it. Nothing is sampled. The
    breakpoints are read off the same float32 prefix sums the draw computes
    (``mx.cumsum``) and the same float32 product ``u * total``, so the counts are those
    of the library on this device, rounding included, for the `[V]` call.

    Let ``c_j`` be the number of grid points with ``u * total < S_j``, where ``S_j`` is
    the prefix sum through id ``j``. The draw returns the first id ``j`` of positive
    weight with ``S_j > u * total``, and ``u * total`` grows with ``i``, so an id ``x`` of
    positive weight receives ``c_x - c_{x-1}`` points (``c_{-1} = 0``), an id of zero
    weight none, and the points where no id is eligible (``u * total`` rounded up to the
    total, possible only for a total near the bottom of the float32 range) go to the last
    id of positive weight, as the draw's fallback does.

    Args:
        probs: `[V]` float32 non-negative weights with a positive, finite sum, the
            draw's own precondition (values are not read).

    Returns:
        `[V]` int32 counts, summing to ``2**24``.

    Raises:
        TypeError: `probs` is not a float32 array.
        ValueError: `probs` is not 1-d.

    >>> import mlx.core as mx
    >>> grid_draw_counts(mx.array([0.5, 0.0, 0.25, 0.25])).tolist() == [2**23, 0, 2**22, 2**22]
    True
    >>> tiny = grid_draw_counts(mx.array([1.0, 2.0**-30, 1.0]))  # absorbed by the prefix sum
    >>> tiny.tolist() == [2**23, 0, 2**23]
    True
    """
    probs = validation.require_probabilities("probs", probs, ndims=(1,))
    vocab_size = probs.shape[-1]
    positive = probs > 0
    partial_sums = mx.cumsum(probs, axis=-1)
    total = partial_sums[-1]
    # c_j = #{i : fl(i / 2**24 * total) < S_j}, the draw's own float32 comparison. The
    # product grows with i, so c_j is where that comparison first fails: bisect for it,
    # every id at once, keeping "grid points below low are below S_j, those from high on
    # are not" (i = 2**24 is off the grid, so never below).
    # Zeros computed from partial_sums (which are >= 0), not made from a shape: under
    # mx.vmap (MLX 0.32) mx.zeros_like and a `&` with an unbatched operand both drop the
    # batch axis, and the float32 budget maps this function over blocks.
    low = (partial_sums < 0).astype(mx.int32)
    high = low + UNIFORM_GRID_SIZE
    for _ in range(_BISECTION_STEPS):
        middle = (low + high) // 2
        uniforms = middle.astype(mx.float32) * (1.0 / UNIFORM_GRID_SIZE)  # exact
        below = (middle < UNIFORM_GRID_SIZE) & (uniforms * total < partial_sums)
        low = mx.where(below, middle + 1, low)
        high = mx.where(below, high, middle)
    below_count = low
    before = mx.concatenate([mx.zeros((1,), dtype=mx.int32), below_count[:-1]])
    counts = mx.where(positive, below_count - before, 0)
    last_positive = vocab_size - 1 - mx.argmax(positive[::-1], axis=-1)
    no_id_eligible = UNIFORM_GRID_SIZE - below_count[-1]
    ids = mx.arange(vocab_size, dtype=mx.int32)
    return (counts + mx.where(ids == last_positive, no_id_eligible, 0)).astype(mx.int32)
