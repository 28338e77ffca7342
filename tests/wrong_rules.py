"""Deliberately wrong acceptance rules, with `verify_tokenwise`'s signature.

Each is the real rule with one mistake that engines have shipped. The
statistical tests run them on the very uniforms of the correct rule to show
that they have the power to reject; the core and the generator tests share
these copies so that both reject the same mistake.
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx

from specaccept import (
    AcceptanceRule,
    BlockwiseVerdict,
    TokenwiseVerdict,
    accept_draft_token,
    sample_from_distribution,
)
from specaccept.core.joint import _prefix_weights as prefix_weights

__all__ = ["joint_verification", "resample_from_p_verify_tokenwise"]


def resample_from_p_verify_tokenwise(
    rule: AcceptanceRule,
    target_probs: mx.array,
    draft_probs: mx.array | None,
    draft_tokens: mx.array,
    uniforms: mx.array,
) -> TokenwiseVerdict:
    """`verify_tokenwise` with the naive mistake: on rejection draw from p, not relu(p - q)."""
    assert draft_probs is not None, "the broken rule is the stochastic one"
    del rule
    k = draft_tokens.shape[0]
    accepted = accept_draft_token(target_probs[:k], draft_probs, draft_tokens, uniforms[:k, 0])
    replacement = sample_from_distribution(target_probs[:k], uniforms[:k, 1])
    emitted = mx.where(accepted, draft_tokens.astype(mx.int32), replacement)
    bonus = sample_from_distribution(target_probs[k:], uniforms[k:, 1])
    num_accepted = mx.cumprod(accepted.astype(mx.int32)).sum().astype(mx.int32)
    return TokenwiseVerdict(num_accepted, mx.concatenate([emitted, bonus])[num_accepted])


def joint_verification(
    *,
    longest_prefix: bool = True,
    weighted_residual: bool = True,
    last_keep_is_weight: bool = True,
) -> Callable[[mx.array, mx.array, mx.array, mx.array], BlockwiseVerdict]:
    """`verify_blockwise` rewritten with three switches, each one a shipped mistake.

    All switches on is the library's rule (tests/test_core_chisquare.py pins that it returns
    the library's verdicts); turning one off gives: the prefix before the first failing test
    instead of the longest passing one; the residual relu(p - q) without the weight w_tau;
    h_k = 1 instead of w_k.
    """

    def verify(
        target_probs: mx.array, draft_probs: mx.array, draft_tokens: mx.array,
        uniforms: mx.array,
    ) -> BlockwiseVerdict:
        k = draft_tokens.shape[0]
        drafted = draft_tokens.astype(mx.int32)[:, None]
        p_drafted = mx.take_along_axis(target_probs[:k], drafted, axis=-1)[:, 0]
        q_drafted = mx.take_along_axis(draft_probs, drafted, axis=-1)[:, 0]
        weights = prefix_weights(p_drafted, q_drafted)
        excess = mx.maximum(weights[:k, None] * target_probs[:k] - draft_probs, 0.0)
        mass = excess.sum(axis=-1)
        z, w = mass[1:], weights[1:k]
        denominator = z + (1.0 - w)
        inner = mx.where(denominator > 0, z / mx.where(denominator > 0, denominator, 1.0), 1.0)
        last = weights[k:] if last_keep_is_weight else mx.ones((1,), dtype=mx.float32)
        keep = mx.concatenate([inner, last])
        passes = mx.logical_and(keep > 0, uniforms[:k, 0] <= keep)
        lengths = mx.arange(1, k + 1, dtype=mx.int32)
        if longest_prefix:
            num_accepted = mx.where(passes, lengths, 0).max(axis=-1).astype(mx.int32)
        else:
            num_accepted = mx.cumprod(passes.astype(mx.int32)).sum().astype(mx.int32)
        if not weighted_residual:
            excess = mx.maximum(target_probs[:k] - draft_probs, 0.0)
            mass = excess.sum(axis=-1)
        rows = mx.concatenate([
            mx.where(mass[:, None] > 0, excess / mx.where(mass > 0, mass, 1.0)[:, None],
                     target_probs[:k]),
            target_probs[k:],
        ])
        next_token = sample_from_distribution(rows, uniforms[:, 1])[num_accepted]
        return BlockwiseVerdict(num_accepted, next_token, mx.zeros((k + 1,), dtype=mx.float32))

    return verify
