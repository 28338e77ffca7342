"""The trace's decided positions and the round facts every check reads.

A position is one emitted token: a tested draft's outcome, or a bonus token. The
helpers here say which rule a round claims and decide a block-verified round as the
spec does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np

from specaccept.conformance.trace import Round, Trace
from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.joint import verify_blockwise
from specaccept.core.sampling import effective_token_distribution

__all__ = [
    "Position",
    "claimed_rule",
    "decided_positions",
    "is_full_block_round",
    "prefix_weight",
    "read_cells",
    "token_rule",
    "verify_block_round",
]


@dataclass
class Position:
    """One decided output position: a tested draft, or a bonus token."""

    round: Round
    offset: int
    p: np.ndarray
    q: np.ndarray | None
    draft: int | None
    emitted: int
    accepted: bool
    p_blind: np.ndarray | None = None

    @property
    def tested(self) -> bool:
        """True for a draft's position, False for a bonus token's."""
        return self.draft is not None


def claimed_rule(round_: Round) -> AcceptanceRule | None:
    """The round's rule; None when this library has no such rule."""
    return round_.rule if isinstance(round_.rule, AcceptanceRule) else None


def token_rule(round_: Round) -> AcceptanceRule | None:
    """The rule when it decides position by position (every rule but block)."""
    rule = claimed_rule(round_)
    return None if rule is None or rule.verifies_jointly else rule


def read_cells(round_: Round) -> list[tuple[int, int]]:
    """The `(position, slot)` cells of `uniforms` the claimed rule reads: what the round's
    outcome depends on (slot 0 the accept test, slot 1 the draw).

    Block verification reads the test of every draft (its kept length is the longest
    passing prefix) and one draw; stochastic the tests up to the first rejection and one
    draw; sampler-match the target's draw at every compared position; greedy none.
    """
    rule = claimed_rule(round_)
    kept, k = round_.num_accepted, round_.k
    if rule is AcceptanceRule.BLOCK:
        cells = [(i, 0) for i in range(k)] + [(kept, 1)]
    elif rule is AcceptanceRule.STOCHASTIC:
        cells = [(i, 0) for i in range(min(kept + 1, k))] + [(kept, 1)]
    elif rule in (AcceptanceRule.SAMPLER_MATCH,
                  AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION):
        cells = [(i, 1) for i in range(min(kept + 1, k + 1))]
    else:
        cells = []
    return [(i, j) for i, j in cells if i < k + 1]


def is_full_block_round(round_: Round) -> bool:
    """A block round with every row the joint decision reads, not cut short."""
    return (claimed_rule(round_) is AcceptanceRule.BLOCK and not round_.stopped and round_.k >= 1
            and round_.target_rows.shape[0] == round_.k + 1
            and round_.draft_rows is not None and round_.draft_rows.shape[0] == round_.k)


def verify_block_round(round_: Round, uniforms: np.ndarray | None = None) -> Any:
    """`verify_blockwise` on a full block round (zero uniforms when none recorded)."""
    assert round_.draft_rows is not None
    u = uniforms if uniforms is not None else np.zeros((round_.k + 1, 2), dtype=np.float32)
    return verify_blockwise(
        mx.array(round_.target_rows), mx.array(round_.draft_rows),
        mx.array(round_.draft_tokens), mx.array(u),
    )


def prefix_weight(round_: Round, kept: int) -> float:
    """w_kept of block verification: min(1, w * p_i(X_i) / q_i(X_i)) along the kept drafts."""
    assert round_.draft_rows is not None
    weight = 1.0
    for i in range(kept):
        token = round_.draft_tokens[i]
        p_i, q_i = float(round_.target_rows[i, token]), float(round_.draft_rows[i, token])
        weight = 0.0 if p_i <= 0 or weight == 0 else (1.0 if q_i <= 0 else
                                                       min(1.0, weight * p_i / q_i))
    return weight


def _blind_rows(round_: Round, history: list[int]) -> np.ndarray | None:
    """Row i computed with the history as it stood before the round, drafts left out."""
    config = round_.run.target_sampler
    if round_.target_logits is None or config is None or not config.uses_history:
        return None
    if round_.run.prompt is None:
        return None
    context = mx.array(history, dtype=mx.int32)
    logits = mx.array(round_.target_logits)
    rows = [effective_token_distribution(logits[i], config, context)
            for i in range(logits.shape[0])]
    return np.array(mx.stack(rows), dtype=np.float64)


def decided_positions(trace: Trace) -> list[Position]:
    """Every emitted token of the trace, in file order, with the laws it was decided on."""
    out: list[Position] = []
    histories = {run.id: list(run.prompt or []) for run in trace.runs.values()}
    for round_ in trace.rounds:
        history = histories[round_.run.id]
        blind = _blind_rows(round_, history)
        for i, token in enumerate(round_.emitted):
            tested = i < round_.k
            q = None
            if tested and round_.draft_rows is not None and i < round_.draft_rows.shape[0]:
                q = round_.draft_rows[i].astype(np.float64)
            out.append(Position(
                round=round_, offset=i, p=round_.target_rows[i].astype(np.float64), q=q,
                draft=round_.draft_tokens[i] if tested else None, emitted=token,
                accepted=i < round_.num_accepted,
                p_blind=blind[i] if blind is not None and i > 0 else None,
            ))
        history += round_.emitted
    return out
