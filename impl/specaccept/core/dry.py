"""DRY ("don't repeat yourself"): the penalty on a token that would extend a repeat.

This module is DRY's definition, written to be read: the window, the sequence breakers, each
candidate's match length by the n x n comparison the definition states, and the penalty of a
match length (`dry_penalty_by_definition`). The chain calls `dry_penalty`, which is the same
function with the match lengths taken from `specaccept.core.dry_fast`: the same penalties,
bit for bit, in O(n * L) or O(n log^2 n) work instead of an n x n table. That equality is
proved in CI by tests/test_dry.py (and the saturation length it relies on by
tests/test_core_dry_paths.py).
"""

from __future__ import annotations

import mlx.core as mx

from specaccept.core import dry_fast
from specaccept.core.sampler_config import SamplerConfig

__all__ = [
    "DRY_PENALTY_CAP",
    "dry_penalty",
    "dry_penalty_by_definition",
    "dry_window",
    "longest_match_penalty",
    "match_lengths",
    "penalty_of_match_length",
    "sequence_breakers",
]

DRY_PENALTY_CAP = 1e30
"""The largest DRY penalty subtracted: finite in float32 (below FLOAT32_MAX) yet far beyond
any logit of the envelope, so a capped penalty still masks in effect and never makes inf."""


def dry_window(history: mx.array, config: SamplerConfig) -> mx.array:
    """The ids DRY reads: the whole history (`dry_penalty_last_n` -1), else its last N."""
    return history if config.dry_penalty_last_n == -1 else history[-config.dry_penalty_last_n :]


def sequence_breakers(window: mx.array, config: SamplerConfig) -> mx.array:
    """Whether each id of `window` ends every match it is part of, `[n]` bool.

    A breaker is an id of `dry_sequence_breakers`, or NO_TOKEN (an id outside the
    vocabulary, from token_history).
    """
    breakers = mx.array(list(config.dry_sequence_breakers) or [-1], dtype=mx.int32)
    return mx.logical_or((window[:, None] == breakers[None, :]).any(axis=1), window < 0)


def match_lengths(window: mx.array, is_breaker: mx.array) -> mx.array:
    """Each candidate's match length, by the definition: `[n - 1]` float32 for i = 1 .. n - 1.

    The candidate at position i is window[i]; its match length is the longest L with
    window[i-L:i] == window[n-L:n] where the matched suffix holds no breaker, and 0 for a
    candidate that is itself a breaker. Written as the n x n comparison: entry [i, j] says
    whether the ids j + 1 places before candidate i and before the end agree (and the
    latter is no breaker); L is the run of agreements from j = 0.
    """
    n = window.shape[0]
    candidates = mx.arange(1, n)
    lags = mx.arange(n - 1)
    earlier = candidates[:, None] - 1 - lags[None, :]
    suffix = n - 1 - lags
    equal = (window[mx.maximum(earlier, 0)] == window[suffix][None, :]) & (earlier >= 0)
    equal = equal & ~is_breaker[suffix][None, :]
    lengths = mx.cumprod(equal.astype(mx.float32), axis=1).sum(axis=1)
    return mx.where(is_breaker[1:], 0.0, lengths)


def penalty_of_match_length(longest: mx.array, config: SamplerConfig) -> mx.array:
    """multiplier * base ** (L - allowed_length) capped at 1e30 where L >= allowed_length, else 0.

    `longest` holds match lengths L as float32; the result has its shape, float32.
    """
    exponent = longest - config.dry_allowed_length
    penalty = config.dry_multiplier * mx.power(mx.array(config.dry_base, mx.float32), exponent)
    # Long repeats would overflow float32 to inf; a finite cap excludes the token just as
    # surely and keeps a fully penalised row from turning into NaN.
    penalty = mx.minimum(penalty, DRY_PENALTY_CAP)
    return mx.where(longest >= config.dry_allowed_length, penalty, 0.0)


def longest_match_penalty(
    window: mx.array, match_length: mx.array, config: SamplerConfig, vocab_size: int
) -> mx.array:
    """The penalty per token, `[V]` float32, of the longest match among its candidates.

    `match_length` holds, as float32, the match length of every candidate window[1:].
    """
    # A NO_TOKEN candidate is a breaker, of length 0: gathered at id 0, it changes nothing.
    candidate_tokens = mx.maximum(window[1:], 0)
    longest = mx.zeros((vocab_size,), dtype=mx.float32).at[candidate_tokens].maximum(match_length)
    return penalty_of_match_length(longest, config)


def dry_penalty_by_definition(
    history: mx.array, config: SamplerConfig, vocab_size: int
) -> mx.array:
    """The DRY penalty per token, `[V]` float32 (0 where none applies), as defined.

    For every earlier position i of the window, the candidate is window[i] and its match
    length is the longest L with window[i-L:i] == window[n-L:n], where the matched suffix
    holds no sequence breaker (`match_lengths`). A token whose longest match reaches
    `dry_allowed_length` is penalised by multiplier * base ** (L - allowed_length), capped
    at 1e30 (`penalty_of_match_length`). Breakers are never penalised.
    """
    window = dry_window(history, config)
    if window.shape[0] < 2:
        return mx.zeros((vocab_size,), dtype=mx.float32)
    is_breaker = sequence_breakers(window, config)
    return longest_match_penalty(window, match_lengths(window, is_breaker), config, vocab_size)


def dry_penalty(history: mx.array, config: SamplerConfig, vocab_size: int) -> mx.array:
    """`dry_penalty_by_definition`, with the match lengths of `dry_fast`: what the chain uses.

    `dry_fast.saturated_match_lengths` returns `match_lengths` cut at a length from which
    every longer match gets the same penalty, so the penalties are the definition's bit for
    bit (tests/test_dry.py is the proof CI runs) at a fraction of its cost.
    """
    window = dry_window(history, config)
    if window.shape[0] < 2:
        return mx.zeros((vocab_size,), dtype=mx.float32)
    is_breaker = sequence_breakers(window, config)
    lengths = dry_fast.saturated_match_lengths(window, is_breaker, config, DRY_PENALTY_CAP)
    return longest_match_penalty(window, lengths, config, vocab_size)
