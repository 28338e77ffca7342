"""The sampler as a distribution: what a sampler draws from, and a draw from it.

A speculative acceptance rule needs the exact law each token was drawn from,
so the sampler is written here as a function that *returns* that law
(`effective_token_distribution`) plus an inverse-CDF draw from it
(`sample_from_distribution`). Drawing and describing share one code path, so
the distribution the rule reasons about cannot drift from the one that drew.

The chain's steps live here, but for those with a module of their own: the settings
(`sampler_config`), the counting penalties (`penalties`) and DRY (`dry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import mlx.core as mx

from specaccept.core import validation
from specaccept.core.dry import dry_penalty
from specaccept.core.penalties import apply_repetition_penalties
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.validation import Scalar, TokenIds

__all__ = [
    "SampledToken",
    "effective_token_distribution",
    "sample_from_distribution",
    "sample_token_with_distribution",
]

_NEG_INF = float("-inf")
"""The logit of a masked id: its softmax weight is exactly 0."""


def _apply_logit_bias(logits: mx.array, bias: Mapping[int, float]) -> mx.array:
    vocab_size = logits.shape[-1]
    for token in bias:
        if token >= vocab_size:
            raise ValueError(f"logit_bias key {token} is outside the vocabulary [0, {vocab_size})")
    ids = mx.array(list(bias.keys()), dtype=mx.int32)
    values = mx.array(list(bias.values()), dtype=mx.float32)
    return logits + mx.zeros((vocab_size,), dtype=mx.float32).at[ids].add(values)


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
        logits = apply_repetition_penalties(logits, tokens, config)
    if config.dry_multiplier > 0.0 and config.dry_penalty_last_n != 0:
        logits = logits - dry_penalty(tokens, config, vocab_size)

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

