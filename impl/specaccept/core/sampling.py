"""The sampler as a distribution: what a sampler draws from, and a draw from it.

A speculative acceptance rule needs the exact law each token was drawn from,
so the sampler is written here as a function that *returns* that law
(`effective_token_distribution`) plus an inverse-CDF draw from it
(`sample_from_distribution`). Drawing and describing share one code path, so
the distribution the rule reasons about cannot drift from the one that drew.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

import mlx.core as mx

from specaccept.core import validation
from specaccept.core.validation import Scalar, TokenIds

__all__ = [
    "SampledToken",
    "SamplerConfig",
    "effective_token_distribution",
    "sample_from_distribution",
    "sample_token_with_distribution",
]

_NEG_INF = float("-inf")
"""The logit of a masked id: its softmax weight is exactly 0."""
_DRY_PENALTY_CAP = 1e30
"""The largest DRY penalty subtracted: finite in float32 (below FLOAT32_MAX) yet far beyond
any logit of the envelope, so a capped penalty still masks in effect and never makes inf."""
_LONGEST_DIRECT_MATCH = 512
"""DRY compares match lengths up to this one column per length; beyond it, prefix doubling
is cheaper (benchmarks/dry.py measures both) and needs O(n) memory, not O(n * length)."""
_FLOAT32_SMALLEST_NORMAL = 2.0**-126
"""Below this DRY multiplier no saturation length is derived: a subnormal multiplier may be
flushed to 0, so the cap cannot be relied on to bound the lengths that matter."""

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: a config real beyond it would become inf in the arithmetic."""
SMALLEST_TEMPERATURE = 2.0**-126
"""The smallest usable temperature, float32's smallest normal (subnormals may flush to 0)."""
LOGIT_LIMIT = 2.0**64
"""Finite logits of magnitude up to this bound keep every step of the chain finite."""
ADJUSTMENT_LIMIT = 2.0**64
"""The bound on a logit bias, a frequency penalty and a presence penalty."""
REPETITION_PENALTY_LIMIT = 2.0**32
"""The repetition penalty lies in [1 / this, this]: it divides and multiplies logits."""
MAX_TOKEN_ID = 2**31 - 1
"""Token ids are int32 in the arithmetic."""


@dataclass(frozen=True)
class SamplerConfig:
    """The settings of one sampler, validated on construction.

    Every field defaults to "off", except `temperature`, which defaults to 1.
    The repetition, frequency and presence penalties all read the last
    `repetition_context_size` tokens; DRY reads the last `dry_penalty_last_n`
    (-1: the whole history, 0: DRY off).
    `dry_sequence_breakers` are token ids (the shell maps strings to ids).
    `logit_bias` maps token ids to additive biases and is copied on construction.

    Every real must be one the float32 arithmetic can use: each range below
    keeps every step of `effective_token_distribution` finite for logits within
    +-`LOGIT_LIMIT`, so a valid config can never turn a valid row into NaN.

    Raises:
        TypeError: a field has the wrong type.
        ValueError: a field is out of range; the message names the field and the range.

    >>> SamplerConfig(temperature=0.0).is_greedy
    True
    >>> SamplerConfig(temperature=0.7, top_k=1).is_greedy
    True
    >>> SamplerConfig(top_p=0.0)
    Traceback (most recent call last):
    ...
    ValueError: top_p must lie in (0, 1], got 0.0
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    repetition_context_size: int = 20
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = -1
    dry_sequence_breakers: tuple[int, ...] = ()
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1
    logit_bias: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        def check(name: str, ok: bool, bound: str) -> None:
            if not ok:
                raise ValueError(f"{name} must {bound}, got {getattr(self, name)!r}")

        for name in (
            "temperature", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
            "presence_penalty", "dry_multiplier", "dry_base", "xtc_probability", "xtc_threshold",
        ):
            # Stored as float: an int such as 2**63 would reach MLX as an int64 scalar.
            object.__setattr__(self, name, validation.real(name, getattr(self, name)))
        for name in (
            "top_k", "repetition_context_size", "dry_allowed_length", "dry_penalty_last_n",
        ):
            check(
                name, validation.integer(name, getattr(self, name)) <= MAX_TOKEN_ID,
                "be <= 2**31 - 1 (MLX indexes and slices with int32)",
            )
        temperature = self.temperature
        check(
            "temperature",
            temperature == 0.0 or SMALLEST_TEMPERATURE <= temperature <= FLOAT32_MAX,
            f"be 0 (greedy) or lie in [{SMALLEST_TEMPERATURE!r}, {FLOAT32_MAX!r}] "
            "(float32's normal range: a smaller one rounds towards 0)",
        )
        check("top_k", self.top_k >= 0, "be >= 0 (0 is off)")
        check("top_p", 0.0 < self.top_p <= 1.0, "lie in (0, 1]")
        check("min_p", 0.0 <= self.min_p <= 1.0, "lie in [0, 1]")
        check(
            "repetition_penalty",
            1.0 / REPETITION_PENALTY_LIMIT <= self.repetition_penalty <= REPETITION_PENALTY_LIMIT,
            f"lie in [2**-32, 2**32] = [{1.0 / REPETITION_PENALTY_LIMIT!r}, "
            f"{REPETITION_PENALTY_LIMIT!r}] (1 is off) so that penalised logits stay finite",
        )
        for name in ("frequency_penalty", "presence_penalty"):
            check(
                name, abs(getattr(self, name)) <= ADJUSTMENT_LIMIT,
                f"lie in [-2**64, 2**64] = [{-ADJUSTMENT_LIMIT!r}, {ADJUSTMENT_LIMIT!r}] "
                "(0 is off) so that penalised logits stay finite",
            )
        check("repetition_context_size", self.repetition_context_size >= 1, "be >= 1")
        check(
            "dry_multiplier",
            self.dry_multiplier == 0.0
            or SMALLEST_TEMPERATURE <= self.dry_multiplier <= FLOAT32_MAX,
            f"be 0 (off) or lie in [{SMALLEST_TEMPERATURE!r}, {FLOAT32_MAX!r}] (float32's "
            "normal range: a smaller one rounds to 0 and multiplies an overflowed power to NaN)",
        )
        check(
            "dry_base", 1.0 <= self.dry_base <= FLOAT32_MAX,
            f"lie in [1, {FLOAT32_MAX!r}] (float32's finite range)",
        )
        check("dry_allowed_length", self.dry_allowed_length >= 1, "be >= 1")
        check("dry_penalty_last_n", self.dry_penalty_last_n >= -1, "be >= -1 (-1: whole history)")
        check("xtc_probability", 0.0 <= self.xtc_probability <= 1.0, "lie in [0, 1]")
        check("xtc_threshold", 0.0 <= self.xtc_threshold <= 1.0, "lie in [0, 1]")
        if not isinstance(self.dry_sequence_breakers, tuple):
            raise TypeError(
                "dry_sequence_breakers must be a tuple of token ids, "
                f"got {type(self.dry_sequence_breakers).__name__}"
            )
        for breaker in self.dry_sequence_breakers:
            breaker_id = validation.integer("dry_sequence_breakers", breaker)
            check(
                "dry_sequence_breakers", 0 <= breaker_id <= MAX_TOKEN_ID,
                f"hold token ids in [0, 2**31 - 1] (int32), found {breaker_id}",
            )
        if not isinstance(self.logit_bias, Mapping):
            raise TypeError(
                f"logit_bias must be a mapping of token id to bias, got "
                f"{type(self.logit_bias).__name__}"
            )
        bias = {}
        for token, value in self.logit_bias.items():
            token = validation.integer("logit_bias key", token)
            if not 0 <= token <= MAX_TOKEN_ID:
                raise ValueError(
                    f"logit_bias keys must be token ids in [0, 2**31 - 1] (int32), got {token}"
                )
            bias[token] = validation.real(f"logit_bias[{token}]", value)
            if abs(bias[token]) > ADJUSTMENT_LIMIT:
                raise ValueError(
                    f"logit_bias[{token}] must lie in [-2**64, 2**64] = "
                    f"[{-ADJUSTMENT_LIMIT!r}, {ADJUSTMENT_LIMIT!r}] so that biased logits "
                    f"stay finite, got {value!r}"
                )
        object.__setattr__(self, "logit_bias", bias)

    def __hash__(self) -> int:
        # logit_bias is a dict (for a natural constructor); hash its items instead.
        values = tuple(
            tuple(sorted(v.items())) if isinstance(v, Mapping) else v
            for v in (getattr(self, f) for f in self.__dataclass_fields__)
        )
        return hash(values)

    @property
    def is_greedy(self) -> bool:
        """True when the sampler is an argmax (temperature 0 or top-k 1)."""
        return self.temperature == 0.0 or self.top_k == 1

    @property
    def uses_history(self) -> bool:
        """True when some penalty reads the token history."""
        return (
            self.repetition_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
            or (self.dry_multiplier > 0.0 and self.dry_penalty_last_n != 0)
        )


def _apply_logit_bias(logits: mx.array, bias: Mapping[int, float]) -> mx.array:
    vocab_size = logits.shape[-1]
    for token in bias:
        if token >= vocab_size:
            raise ValueError(f"logit_bias key {token} is outside the vocabulary [0, {vocab_size})")
    ids = mx.array(list(bias.keys()), dtype=mx.int32)
    values = mx.array(list(bias.values()), dtype=mx.float32)
    return logits + mx.zeros((vocab_size,), dtype=mx.float32).at[ids].add(values)


def _apply_repetition_penalties(
    logits: mx.array, history: mx.array, config: SamplerConfig
) -> mx.array:
    vocab_size = logits.shape[-1]
    recent = history[-config.repetition_context_size :]
    # An id outside the vocabulary (NO_TOKEN, from token_history) adds 0, at id 0.
    is_token = (recent >= 0).astype(mx.float32)
    counts = mx.zeros((vocab_size,), dtype=mx.float32).at[mx.maximum(recent, 0)].add(is_token)
    seen = counts > 0
    if config.repetition_penalty != 1.0:
        # CTRL's penalty: shrink positive logits, grow negative ones, towards less likely.
        penalised = mx.where(
            logits > 0, logits / config.repetition_penalty, logits * config.repetition_penalty
        )
        logits = mx.where(seen, penalised, logits)
    return (
        logits
        - counts * config.frequency_penalty
        - seen.astype(mx.float32) * config.presence_penalty
    )


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


def _dry_saturation_length(config: SamplerConfig) -> int | None:
    """The match length from which DRY's penalty is the cap, if it is at most _LONGEST_DIRECT_MATCH.

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
    power_needed = 2 * Fraction(_float32(_DRY_PENALTY_CAP)) / Fraction(multiplier)
    # A float estimate of the exponent, then settled exactly.
    excess = max(0, math.ceil(math.log(power_needed) / math.log(base)))
    if allowed + excess > _LONGEST_DIRECT_MATCH + 1:
        return None
    while Fraction(base) ** excess < power_needed:
        excess += 1
    while excess > 0 and Fraction(base) ** (excess - 1) >= power_needed:
        excess -= 1
    return allowed + excess if allowed + excess <= _LONGEST_DIRECT_MATCH else None


def _dry_penalty(history: mx.array, config: SamplerConfig, vocab_size: int) -> mx.array:
    """The DRY penalty per token, `[V]` float32 (0 where none applies).

    For every earlier position i of the window, the candidate is window[i] and
    its match length is the longest L with window[i-L:i] == window[n-L:n],
    where the matched suffix holds no sequence breaker. A token whose longest
    match reaches `dry_allowed_length` is penalised by
    multiplier * base ** (L - allowed_length), capped at 1e30. Breakers are never
    penalised.

    As in llama.cpp, the match lengths come from the Z-array of the reversed
    window: window[i-L:i] == window[n-L:n] says that the reversed window,
    read from n - i, matches its own first L entries. Matches longer than the
    saturation length (`_dry_saturation_length`) all get the capped penalty, so
    they are cut there and compared directly, O(n * length) work; otherwise
    prefix doubling builds the whole Z-array in O(n log^2 n). Either way the
    penalty is the one the n x n comparison of the definition gives.
    """
    window = history if config.dry_penalty_last_n == -1 else history[-config.dry_penalty_last_n :]
    n = window.shape[0]
    if n < 2:
        return mx.zeros((vocab_size,), dtype=mx.float32)
    breakers = mx.array(list(config.dry_sequence_breakers) or [-1], dtype=mx.int32)
    # NO_TOKEN (an id outside the vocabulary, from token_history) breaks every match.
    is_breaker = mx.logical_or((window[:, None] == breakers[None, :]).any(axis=1), window < 0)
    reversed_window = window[::-1]
    # The matched suffix stops at the last breaker: it may span only the ids after it.
    breaker_free = mx.where(
        is_breaker.any(), mx.argmax(is_breaker[::-1].astype(mx.int32)), n
    )
    # No match from t >= 1 is longer than n - 1: a short window needs no saturation.
    saturation = _dry_saturation_length(config)
    longest_needed = n - 1 if saturation is None else min(saturation, n - 1)
    if longest_needed <= _LONGEST_DIRECT_MATCH:
        prefix_matches = _capped_prefix_match_lengths(reversed_window, longest_needed)
    else:
        prefix_matches = _prefix_match_lengths(reversed_window)
    # Candidate i (1 <= i < n) reads Z at n - i.
    match_length = mx.minimum(prefix_matches[::-1][:-1], breaker_free)
    match_length = mx.where(is_breaker[1:], 0, match_length).astype(mx.float32)
    # A NO_TOKEN candidate is a breaker, of length 0: gathered at id 0, it changes nothing.
    candidate_tokens = mx.maximum(window[1:], 0)
    longest = mx.zeros((vocab_size,), dtype=mx.float32).at[candidate_tokens].maximum(match_length)
    return _dry_penalty_of_match_length(longest, config)


def _dry_penalty_of_match_length(longest: mx.array, config: SamplerConfig) -> mx.array:
    """multiplier * base ** (L - allowed_length) capped at 1e30 where L >= allowed_length, else 0.

    `longest` holds match lengths L as float32; the result has its shape, float32.
    """
    exponent = longest - config.dry_allowed_length
    penalty = config.dry_multiplier * mx.power(mx.array(config.dry_base, mx.float32), exponent)
    # Long repeats would overflow float32 to inf; a finite cap excludes the token just as
    # surely and keeps a fully penalised row from turning into NaN.
    penalty = mx.minimum(penalty, _DRY_PENALTY_CAP)
    return mx.where(longest >= config.dry_allowed_length, penalty, 0.0)


def _xtc_cut(logits: mx.array, threshold: float) -> mx.array:
    """Exclude Top Choices: mask every token at or above `threshold` but the least likely.

    The cut applies only when at least two tokens reach the threshold; every
    token tied at the smallest qualifying probability survives.
    """
    probs = mx.softmax(logits, axis=-1, precise=True)
    # A token of zero probability never qualifies, even at threshold 0.
    above = (probs >= threshold) & (probs > 0)
    smallest_above = mx.min(mx.where(above, probs, 2.0), axis=-1, keepdims=True)
    cut = above & (probs > smallest_above) & (above.sum(axis=-1, keepdims=True) >= 2)
    return mx.where(cut, _NEG_INF, logits)


def _filtered_distribution(logits: mx.array, config: SamplerConfig) -> mx.array:
    """Temperature -> top-k -> top-p -> min-p -> softmax, on `[..., V]` float32 logits."""
    vocab_size = logits.shape[-1]
    # Shift by the max first so that a tiny temperature scales towards -inf, never to +inf/NaN.
    logits = (logits - mx.max(logits, axis=-1, keepdims=True)) / config.temperature
    if 0 < config.top_k < vocab_size:
        # Every token tied with the k-th largest logit is kept.
        kth_largest = mx.min(mx.topk(logits, config.top_k, axis=-1), axis=-1, keepdims=True)
        logits = mx.where(logits >= kth_largest, logits, _NEG_INF)
    if config.top_p < 1.0:
        # Keep the smallest most-likely prefix whose mass reaches top_p (the crossing
        # token included), and every token tied with its least likely member.
        probs = mx.softmax(logits, axis=-1, precise=True)
        descending = -mx.sort(-probs, axis=-1)
        below = (mx.cumsum(descending, axis=-1) < config.top_p).sum(axis=-1, keepdims=True)
        cutoff_index = mx.minimum(below, vocab_size - 1)
        cutoff = mx.take_along_axis(descending, cutoff_index, axis=-1)
        logits = mx.where(probs >= cutoff, logits, _NEG_INF)
    if config.min_p > 0.0:
        probs = mx.softmax(logits, axis=-1, precise=True)
        floor = config.min_p * mx.max(probs, axis=-1, keepdims=True)
        logits = mx.where(probs >= floor, logits, _NEG_INF)
    return mx.softmax(logits, axis=-1, precise=True)


def _one_hot_argmax(logits: mx.array) -> mx.array:
    vocab_size = logits.shape[-1]
    winner = mx.argmax(logits, axis=-1, keepdims=True)  # lowest id on ties
    return (mx.arange(vocab_size) == winner).astype(mx.float32)


def effective_token_distribution(
    logits: mx.array, config: SamplerConfig, history: TokenIds = ()
) -> mx.array:
    """Return the distribution the sampler draws from, `[V]` float32.

    The chain is normative: logit bias -> history penalties (repetition,
    frequency/presence, DRY) -> XTC -> temperature -> top-k -> top-p -> min-p
    -> softmax. XTC, random in a sampler, is returned as its exact mixture
    ``(1 - xtc_probability) * F(no cut) + xtc_probability * F(cut)``, so no
    randomness is consumed. A greedy config returns the one-hot indicator of
    the argmax after bias and penalties (lowest id on ties); XTC does not apply.
    Entries outside the support are exact zeros.

    Args:
        logits: `[V]` logits of any float dtype (upcast to float32), or `[R, V]`
            rows that share one `history`. Finite, or -inf for masked tokens.
        config: the sampler settings.
        history: the tokens before this position, oldest first, for the penalties.

    Raises:
        TypeError: an argument has the wrong type or dtype.
        ValueError: a bad shape or an out-of-range token id.

    >>> import mlx.core as mx
    >>> logits = mx.log(mx.array([0.5, 0.25, 0.125, 0.125]))
    >>> effective_token_distribution(logits, SamplerConfig()).tolist()
    [0.5, 0.25, 0.125, 0.125]
    >>> effective_token_distribution(logits, SamplerConfig(top_p=0.5)).tolist()
    [1.0, 0.0, 0.0, 0.0]
    >>> effective_token_distribution(logits, SamplerConfig(top_k=3)).tolist()
    [0.5, 0.25, 0.125, 0.125]
    >>> effective_token_distribution(logits, SamplerConfig(temperature=0.0)).tolist()
    [1.0, 0.0, 0.0, 0.0]
    """
    logits = validation.require_array("logits", logits)
    if logits.ndim not in (1, 2) or logits.shape[-1] < 1 or logits.shape[0] < 1:
        raise ValueError(
            f"logits must be [V] or [R, V] with R, V >= 1, got {tuple(logits.shape)}"
        )
    if not mx.issubdtype(logits.dtype, mx.floating):
        raise TypeError(f"logits must be a floating array, got {logits.dtype}")
    if not isinstance(config, SamplerConfig):
        raise TypeError(f"config must be a SamplerConfig, got {type(config).__name__}")
    vocab_size = logits.shape[-1]
    tokens = validation.token_history("history", history, vocab_size=vocab_size)
    logits = logits.astype(mx.float32)

    if config.logit_bias:
        logits = _apply_logit_bias(logits, config.logit_bias)
    if config.repetition_penalty != 1.0 or config.frequency_penalty or config.presence_penalty:
        logits = _apply_repetition_penalties(logits, tokens, config)
    if config.dry_multiplier > 0.0 and config.dry_penalty_last_n != 0:
        logits = logits - _dry_penalty(tokens, config, vocab_size)

    if config.is_greedy:
        return _one_hot_argmax(logits)
    if config.xtc_probability == 0.0:
        return _filtered_distribution(logits, config)
    cut = _filtered_distribution(_xtc_cut(logits, config.xtc_threshold), config)
    if config.xtc_probability == 1.0:
        return cut
    uncut = _filtered_distribution(logits, config)
    return (1.0 - config.xtc_probability) * uncut + config.xtc_probability * cut


def sample_from_distribution(probs: mx.array, u: Scalar) -> mx.array:
    """Draw the smallest id i with ``cumsum(probs)[i] > u * sum(probs)``: an int32 id.

    An inverse-CDF draw, portable to any language that has a cumulative sum.
    It never returns a zero-probability id: should float rounding push
    ``u * total`` past the last partial sum, the last id of positive mass is
    returned.

    Args:
        probs: `[V]` float32 non-negative weights with positive sum, or `[R, V]` rows.
        u: a uniform in [0, 1); for `[R, V]` rows, a `[R]` array or one number for all.

    Returns:
        A 0-d int32 id, or `[R]` ids.

    >>> import mlx.core as mx
    >>> probs = mx.array([0.5, 0.0, 0.25, 0.25])
    >>> [sample_from_distribution(probs, u).item() for u in (0.0, 0.49, 0.5, 0.75, 0.99)]
    [0, 0, 2, 3, 3]
    """
    probs = validation.require_probabilities("probs", probs, ndims=(1, 2))
    u = validation.uniform("u", u, batch_shape=tuple(probs.shape[:-1]))
    vocab_size = probs.shape[-1]
    positive = probs > 0
    partial_sums = mx.cumsum(probs, axis=-1)
    target = u[..., None] * partial_sums[..., -1:]
    # logical_and, not &: under mx.vmap (MLX 0.32) & with an unbatched operand drops the
    # batch axis, and a vmap over the uniforms alone returned the first row's id for all.
    eligible = mx.logical_and(partial_sums > target, positive)
    first_eligible = mx.argmax(eligible, axis=-1)
    last_positive = vocab_size - 1 - mx.argmax(positive[..., ::-1], axis=-1)
    chosen = mx.where(eligible.any(axis=-1), first_eligible, last_positive)
    return chosen.astype(mx.int32)


class SampledToken(NamedTuple):
    """A token and the distribution it was drawn from."""

    token: mx.array
    """The drawn token, a 0-d int32."""
    probs: mx.array
    """The law ``token`` was drawn from, ``[V]`` float32 (the q of a drafter)."""


def sample_token_with_distribution(
    logits: mx.array, config: SamplerConfig, history: TokenIds, u: Scalar
) -> SampledToken:
    """Draw one token and return it with the exact law it was drawn from.

    This is the "q contract" of a drafter: the `probs` returned are the
    distribution `token` was sampled from, computed once, so a verifier that
    uses them as q is never handed a reconstruction.

    >>> import mlx.core as mx
    >>> logits = mx.log(mx.array([0.5, 0.25, 0.25]))
    >>> token, probs = sample_token_with_distribution(logits, SamplerConfig(), (), 0.6)
    >>> token.item(), probs.tolist()
    (1, [0.5, 0.25, 0.25])
    """
    probs = effective_token_distribution(logits, config, history)
    if probs.ndim != 1:
        raise ValueError(f"logits must be [V] for one draw, got {tuple(logits.shape)}")
    return SampledToken(sample_from_distribution(probs, u), probs)

