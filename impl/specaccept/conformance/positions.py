"""The trace's decided positions and the round facts every check reads.

A position is one emitted token: a tested draft's outcome, or a bonus token. The
helpers here say which rule a round claims and decide a block-verified round as the
spec does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, BonusLaws, PositionOutcomes
from specaccept.conformance.trace import Round, Trace
from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.joint import verify_blockwise
from specaccept.core.sampling import effective_token_distribution

__all__ = [
    "POWER_MODEL_VOCAB",
    "Position",
    "RoundFacts",
    "claimed_rule",
    "decided_positions",
    "is_full_block_round",
    "models_power",
    "prefix_weight",
    "read_cells",
    "round_facts",
    "token_rule",
    "unit_hash",
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


def round_positions(round_: Round, history: list[int]) -> list[Position]:
    """The round's emitted tokens with the laws each was decided on; `history` is the run's
    prompt and emitted tokens before the round."""
    out: list[Position] = []
    blind = _blind_rows(round_, history)
    target = round_.target_rows.astype(np.float64)
    draft = round_.draft_rows.astype(np.float64) if round_.draft_rows is not None else None
    for i, token in enumerate(round_.emitted):
        tested = i < round_.k
        q = draft[i] if tested and draft is not None and i < draft.shape[0] else None
        out.append(Position(
            round=round_, offset=i, p=target[i], q=q,
            draft=round_.draft_tokens[i] if tested else None, emitted=token,
            accepted=i < round_.num_accepted,
            p_blind=blind[i] if blind is not None and i > 0 else None,
        ))
    return out


def decided_positions(trace: Trace) -> list[Position]:
    """Every emitted token of the trace, in file order, with the laws it was decided on."""
    out: list[Position] = []
    histories = {run.id: list(run.prompt or []) for run in trace.runs.values()}
    for round_ in trace.rounds:
        history = histories[round_.run.id]
        out += round_positions(round_, history)
        history += round_.emitted
    return out


POWER_MODEL_VOCAB = 4096
"""Up to this vocabulary every round's positions feed the power model; above it, a seeded
share POWER_MODEL_VOCAB / vocab_size of the rounds do (about 1 in 31 at 128,256), and the
powers are scaled to the whole trace. A modelled round costs several passes over V per bug
and position and a few sorts of V; the verdicts read every round whatever the vocabulary."""


def unit_hash(*key: object) -> float:
    """A number in [0, 1) fixed by `key` alone: the same in any piece, process or language
    (the first 8 bytes of BLAKE2b over the key's text, big-endian, over 2**64)."""
    text = "/".join(str(part) for part in key).encode("utf-8")
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def models_power(round_: Round, vocab_size: int) -> bool:
    """Whether the round's positions feed the power model (see `POWER_MODEL_VOCAB`)."""
    if vocab_size <= POWER_MODEL_VOCAB:
        return True
    return unit_hash("power", round_.run.id, round_.index) < POWER_MODEL_VOCAB / vocab_size


def bug_models(positions: list[Position]) -> tuple[PositionOutcomes, BonusLaws]:
    """Per bug, per position: the tested position's Outcome (or why n/a), and a bonus law."""
    outcomes: PositionOutcomes = {}
    bonus: BonusLaws = {}
    for bug in BUG_CLASSES:
        if not bug.models_positions:
            continue
        outcomes[bug], bonus[bug] = [], []
        for pos in positions:
            rule = claimed_rule(pos.round)
            if rule is AcceptanceRule.BLOCK:
                outcomes[bug].append("not modelled for block verification")
                bonus[bug].append(None)
                continue
            if pos.tested and pos.q is not None and rule is not None:
                outcomes[bug].append(bug.outcome(
                    rule, pos.p, pos.q, draft_sampler=pos.round.run.draft_sampler,
                    p_blind=pos.p_blind,
                ))
                bonus[bug].append(None)
                continue
            outcomes[bug].append(None)
            bonus[bug].append(bug.bonus_law(pos.p, pos.p_blind))
    return outcomes, bonus


@dataclass
class RoundFacts:
    """One chain round as every check reads it: its positions and, when the round feeds the
    power model, each bug's law at each position."""

    round: Round
    positions: list[Position]
    modelled: bool
    outcomes: PositionOutcomes = field(default_factory=dict)
    bonus: BonusLaws = field(default_factory=dict)


def round_facts(round_: Round, history: list[int], vocab_size: int) -> RoundFacts:
    """The round's positions, and its bug models when `models_power` selects it."""
    positions = round_positions(round_, history)
    if not models_power(round_, vocab_size):
        return RoundFacts(round_, positions, False)
    outcomes, bonus = bug_models(positions)
    return RoundFacts(round_, positions, True, outcomes, bonus)
