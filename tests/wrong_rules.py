"""Deliberately wrong acceptance rules, with `verify_block`'s signature.

Each is the real rule with one mistake that engines have shipped. The
statistical tests run them on the very uniforms of the correct rule to show
that they have the power to reject; the core and the generator tests share
these copies so that both reject the same mistake.
"""

from __future__ import annotations

import mlx.core as mx

from specaccept import AcceptanceRule, BlockVerdict, accept_draft_token, sample_from_distribution

__all__ = ["resample_from_p_verify_block"]


def resample_from_p_verify_block(
    rule: AcceptanceRule,
    target_probs: mx.array,
    draft_probs: mx.array | None,
    draft_tokens: mx.array,
    uniforms: mx.array,
) -> BlockVerdict:
    """`verify_block` with the naive mistake: on rejection draw from p, not relu(p - q)."""
    assert draft_probs is not None, "the broken rule is the stochastic one"
    del rule
    k = draft_tokens.shape[0]
    accepted = accept_draft_token(target_probs[:k], draft_probs, draft_tokens, uniforms[:k, 0])
    replacement = sample_from_distribution(target_probs[:k], uniforms[:k, 1])
    emitted = mx.where(accepted, draft_tokens.astype(mx.int32), replacement)
    bonus = sample_from_distribution(target_probs[k:], uniforms[k:, 1])
    num_accepted = mx.cumprod(accepted.astype(mx.int32)).sum().astype(mx.int32)
    return BlockVerdict(num_accepted, mx.concatenate([emitted, bonus])[num_accepted])
