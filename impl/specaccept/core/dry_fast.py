"""DRY's match lengths, computed fast: not normative, proved equal to `specaccept.core.dry`.

DRY's definition (`dry.match_lengths`) compares every candidate with every lag, an n x n
table. Here, as in llama.cpp, the match lengths come from the Z-array of the reversed
window: window[i-L:i] == window[n-L:n] says that the reversed window, read from n - i,
matches its own first L entries. Matches longer than the saturation length
(`saturation_length`) all get the capped penalty, so they are cut there and compared
directly, O(n * length) work; otherwise prefix doubling builds the whole Z-array in
O(n log^2 n). Either way `dry.dry_penalty` gives the definition's penalty bit for bit:
tests/test_dry.py proves it on random and adversarial histories, tests/test_core_dry_paths.py
proves the saturation length exact. A port may ignore this module.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import mlx.core as mx

from specaccept.core.sampler_config import SamplerConfig

__all__ = ["saturated_match_lengths", "saturation_length"]

_LONGEST_DIRECT_MATCH = 512
"""DRY compares match lengths up to this one column per length; beyond it, prefix doubling
is cheaper (benchmarks/dry.py measures both) and needs O(n) memory, not O(n * length)."""
_FLOAT32_SMALLEST_NORMAL = 2.0**-126
"""Below this DRY multiplier no saturation length is derived: a subnormal multiplier may be
flushed to 0, so the cap cannot be relied on to bound the lengths that matter."""


def saturated_match_lengths(
    window: mx.array, is_breaker: mx.array, config: SamplerConfig, cap: float
) -> mx.array:
    """`dry.match_lengths`, each cut at the saturation length, `[n - 1]` float32; n >= 2.

    The cut changes no penalty capped at `cap`: from the saturation length on, every match
    length gets exactly the cap. Without a saturation length (or past
    _LONGEST_DIRECT_MATCH) the lengths are uncut.
    """
    n = window.shape[0]
    reversed_window = window[::-1]
    # The matched suffix stops at the last breaker: it may span only the ids after it.
    breaker_free = mx.where(
        is_breaker.any(), mx.argmax(is_breaker[::-1].astype(mx.int32)), n
    )
    # No match from t >= 1 is longer than n - 1: a short window needs no saturation.
    saturation = saturation_length(config, cap)
    longest_needed = n - 1 if saturation is None else min(saturation, n - 1)
    if longest_needed <= _LONGEST_DIRECT_MATCH:
        prefix_matches = _capped_prefix_match_lengths(reversed_window, longest_needed)
    else:
        prefix_matches = _prefix_match_lengths(reversed_window)
    # Candidate i (1 <= i < n) reads Z at n - i.
    match_length = mx.minimum(prefix_matches[::-1][:-1], breaker_free)
    return mx.where(is_breaker[1:], 0, match_length).astype(mx.float32)


def saturation_length(config: SamplerConfig, cap: float) -> int | None:
    """The match length from which DRY's penalty is `cap`, if it is at most _LONGEST_DIRECT_MATCH.

    The penalty reads a match length L only through L >= allowed and
    min(multiplier * base ** (L - allowed), cap), in float32. Once the exact
    multiplier * base ** e reaches twice the cap, a float32 pow within a factor 2 of the exact
    power (or inf when it overflows) leaves the product at or above the cap for this e and
    every larger one, so every match at least allowed + e long gets exactly the cap: capping
    match lengths at allowed + e changes no penalty. The smallest such e is found exactly,
    in rational arithmetic on the float32 values the graph sees.

    None when that length exceeds _LONGEST_DIRECT_MATCH, and when the float32 multiplier is
    0 or subnormal (0 * inf is NaN and subnormals may be flushed to 0: no cap to rely on).
    """
    allowed = config.dry_allowed_length
    multiplier, base = _float32(config.dry_multiplier), _float32(config.dry_base)
    if multiplier < _FLOAT32_SMALLEST_NORMAL or allowed > _LONGEST_DIRECT_MATCH:
        return None
    if base == 1.0:
        return allowed  # pow(1, e) == 1 exactly: every match from `allowed` on gets one penalty
    power_needed = 2 * Fraction(_float32(cap)) / Fraction(multiplier)
    # A float estimate of the exponent, then settled exactly.
    excess = max(0, math.ceil(math.log(power_needed) / math.log(base)))
    if allowed + excess > _LONGEST_DIRECT_MATCH + 1:
        return None
    while Fraction(base) ** excess < power_needed:
        excess += 1
    while excess > 0 and Fraction(base) ** (excess - 1) >= power_needed:
        excess -= 1
    return allowed + excess if allowed + excess <= _LONGEST_DIRECT_MATCH else None


def _dense_ranks(keys: mx.array) -> mx.array:
    """Label each entry by the rank of its value among the distinct values, `[n]` int32.

    Equal keys get equal labels and different keys different ones, in [0, n).
    """
    order = mx.argsort(keys)
    ordered = keys[order]
    starts = (ordered[1:] != ordered[:-1]).astype(mx.int32)
    labels = mx.cumsum(mx.concatenate([mx.zeros((1,), dtype=mx.int32), starts]))
    return mx.zeros(keys.shape, dtype=mx.int32).at[order].add(labels)


def _prefix_match_lengths(sequence: mx.array) -> mx.array:
    """Z[t] = the longest L with sequence[t:t+L] == sequence[:L], for t >= 1, `[n]` int32.

    The Z-array, computed without reading the sequence: prefix doubling labels
    every block of length 2**k (equal blocks, equal labels), then each Z[t]
    is built from the largest block down, adding 2**k while the blocks at t + Z
    and at Z still match. O(n log^2 n) work in O(log n) lazy steps; entry 0 is
    unused (it holds n - 1 or less).
    """
    n = sequence.shape[0]
    labels = _dense_ranks(sequence)
    levels = [labels]
    span = 1
    while 2 * span <= n - 1:  # blocks longer than n - 1 never match at t >= 1
        following = mx.concatenate([labels[span:] + 1, mx.zeros((span,), dtype=mx.int32)])
        pairs = labels.astype(mx.int64) * (n + 1) + following.astype(mx.int64)
        labels = _dense_ranks(pairs)
        levels.append(labels)
        span *= 2
    positions = mx.arange(n)
    length = mx.zeros((n,), dtype=mx.int32)
    for level in range(len(levels) - 1, -1, -1):
        block, table = 1 << level, levels[level]
        here = positions + length
        same = table[mx.minimum(here, n - 1)] == table[mx.minimum(length, n - 1)]
        length = mx.where((here + block <= n) & same, length + block, length)
    return length


def _capped_prefix_match_lengths(sequence: mx.array, cap: int) -> mx.array:
    """min(Z[t], cap), Z the Z-array of `sequence`, for t >= 1, `[n]` int32; 1 <= cap <= n.

    Compares every position directly with the first `cap` entries: O(n * cap) work in a
    fixed handful of lazy steps, which beats prefix doubling while `cap` is small. Entry 0
    is unused (it holds cap).
    """
    n = sequence.shape[0]
    padded = mx.concatenate([sequence, mx.zeros((cap,), dtype=sequence.dtype)])
    # following[t, s] = padded[t + s]: a strided view of padded, not a gather.
    following = mx.as_strided(padded, shape=(n, cap), strides=(1, 1))
    differs = following != sequence[:cap][None, :]
    # A last column that always differs, so that a row matching all `cap` entries stops at cap.
    differs = mx.concatenate([differs, mx.ones((n, 1), dtype=mx.bool_)], axis=1)
    first_difference = mx.argmax(differs, axis=1)  # argmax returns the first of equal maxima
    # The padding is not part of the sequence: a match from t ends after n - t entries,
    # whatever the padding holds.
    return mx.minimum(first_difference, n - mx.arange(n)).astype(mx.int32)


def _float32(value: float) -> float:
    """`value` rounded to the nearest float32, as MLX rounds a Python float in float32 math."""
    return float(struct.unpack("f", struct.pack("f", value))[0])
