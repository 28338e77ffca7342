"""One adapter from an acceptance rule to the block function the statistical tests drive.

The chi-square and zero-tolerance suites run correct and deliberately wrong rules through
the same harness; this is the one place the correct rule is wrapped for it.
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx

from specaccept import AcceptanceRule, TokenwiseVerdict, verify_tokenwise

__all__ = ["BlockFn", "rule_block"]

# (target_probs [k+1, V], draft_probs [k, V], draft_tokens [k], uniforms [k+1, 2]) -> verdict
BlockFn = Callable[[mx.array, mx.array, mx.array, mx.array], tuple[mx.array, mx.array]]


def rule_block(
    rule: AcceptanceRule, verify: Callable[..., TokenwiseVerdict] = verify_tokenwise
) -> BlockFn:
    """`verify` under `rule` as a BlockFn returning (num_accepted, next_token)."""

    def block(
        target: mx.array, draft: mx.array, tokens: mx.array, uniforms: mx.array
    ) -> tuple[mx.array, mx.array]:
        # sampler-match is run as a drafter without q would run it: draft_probs=None.
        draft_probs = draft if rule.needs_proposal_distribution else None
        verdict: TokenwiseVerdict = verify(rule, target, draft_probs, tokens, uniforms)
        return verdict.num_accepted, verdict.next_token

    return block
