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

_WINDOW_START = -4
_WINDOW = mx.arange(_WINDOW_START, -_WINDOW_START, dtype=mx.int32)
"""Grid indices tried around each estimated breakpoint. The estimate is off by at most 1
(one float32 division), and rounding the product ``u * total`` shifts the breakpoint by at
most 1 more, so 4 on either side holds the true breakpoint with room to spare (the tests
compare against the draw itself at every grid point and at every breakpoint)."""


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
    estimate = mx.ceil(partial_sums / total * UNIFORM_GRID_SIZE).astype(mx.int32)
    candidates = estimate[:, None] + _WINDOW[None, :]
    on_grid = (candidates >= 0) & (candidates < UNIFORM_GRID_SIZE)
    # The draw's own float32 target: u (exact, a multiple of 2**-24) times the total.
    uniforms = candidates.astype(mx.float32) * (1.0 / UNIFORM_GRID_SIZE)
    below = on_grid & (uniforms * total < partial_sums[:, None])
    below_count = mx.clip(estimate + _WINDOW_START, 0, UNIFORM_GRID_SIZE)
    below_count = below_count + below.astype(mx.int32).sum(axis=-1)
    before = mx.concatenate([mx.zeros((1,), dtype=mx.int32), below_count[:-1]])
    counts = mx.where(positive, below_count - before, 0)
    last_positive = vocab_size - 1 - mx.argmax(positive[::-1], axis=-1)
    no_id_eligible = UNIFORM_GRID_SIZE - below_count[-1]
    ids = mx.arange(vocab_size, dtype=mx.int32)
    return (counts + mx.where(ids == last_positive, no_id_eligible, 0)).astype(mx.int32)
