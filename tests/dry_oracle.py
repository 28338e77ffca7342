"""The DRY penalty as its definition reads it: an n x n comparison, kept as a test oracle.

This is the implementation `specaccept` shipped before the Z-array one; it builds, for
every candidate position and every lag, whether the ids agree, and takes the run of
agreements with a cumulative product. Quadratic in the history, but a direct transcription
of the spec's definition, so `tests/test_dry.py` holds the fast one to it.
"""

from __future__ import annotations

import mlx.core as mx

from specaccept.core.sampling import SamplerConfig

DRY_PENALTY_CAP = 1e30


def quadratic_dry_penalty(
    history: mx.array, config: SamplerConfig, vocab_size: int
) -> mx.array:
    """The DRY penalty per token, `[V]` float32, by the n x n comparison of its definition.

    For every earlier position i of the window, the candidate is window[i] and
    its match length is the longest L with window[i-L:i] == window[n-L:n],
    where the matched suffix holds no sequence breaker. A token whose longest
    match reaches `dry_allowed_length` is penalised by
    multiplier * base ** (L - allowed_length), capped at 1e30. Breakers are never
    penalised.
    """
    window = history if config.dry_penalty_last_n == -1 else history[-config.dry_penalty_last_n :]
    n = window.shape[0]
    if n < 2:
        return mx.zeros((vocab_size,), dtype=mx.float32)
    breakers = mx.array(list(config.dry_sequence_breakers) or [-1], dtype=mx.int32)
    is_breaker = (window[:, None] == breakers[None, :]).any(axis=1)
    # equal[i, j] = window[i - 1 - j] == window[n - 1 - j], for candidates i in [1, n).
    candidates = mx.arange(1, n)
    lags = mx.arange(n - 1)
    earlier = candidates[:, None] - 1 - lags[None, :]
    suffix = n - 1 - lags
    valid = earlier >= 0
    equal = (window[mx.maximum(earlier, 0)] == window[suffix][None, :]) & valid
    equal = equal & ~is_breaker[suffix][None, :]
    match_length = mx.cumprod(equal.astype(mx.float32), axis=1).sum(axis=1)
    candidate_tokens = window[1:]
    match_length = mx.where(is_breaker[1:], 0.0, match_length)
    longest = mx.zeros((vocab_size,), dtype=mx.float32).at[candidate_tokens].maximum(match_length)
    exponent = longest - config.dry_allowed_length
    penalty = config.dry_multiplier * mx.power(mx.array(config.dry_base, mx.float32), exponent)
    # Long repeats would overflow float32 to inf; a finite cap excludes the token just as
    # surely and keeps a fully penalised row from turning into NaN.
    penalty = mx.minimum(penalty, DRY_PENALTY_CAP)
    return mx.where(longest >= config.dry_allowed_length, penalty, 0.0)
