"""The trace's decided positions and the round facts every check reads.

A position is one emitted token: a tested draft's outcome, or a bonus token. The
helpers here say which rule a round claims and decide a block-verified round as the
spec does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, BonusLaws, PositionOutcomes
from specaccept.conformance.trace import Round, RoundStats, Trace, unit_hash
from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.joint import verify_blockwise
from specaccept.core.sampling import effective_token_distribution

__all__ = [
    "POWER_MODEL_VOCAB",
    "BlockDecision",
    "Position",
    "PositionStats",
    "RoundFacts",
    "TestedStats",
    "block_decision",
    "claimed_rule",
    "decided_positions",
    "is_full_block_round",
    "models_power",
    "position_stats",
    "prefix_weight",
    "qp_key",
    "read_cells",
    "round_facts",
    "round_stats",
    "row_dot",
    "token_rule",
    "unit_hash",
    "verify_block_round",
]


@dataclass(frozen=True)
class TestedStats:
    """A tested position's scalar facts that read q (see `RoundStats`): the draft's and the
    token's masses under q, and the sums over V the rules' closed forms read."""

    q_draft: float
    q_token: float
    residual: float
    """The float32 sum of relu(p - q): the stochastic residual has mass when it is > 0."""
    overlap: float
    dot: float
    q_at_argmax_p: float


@dataclass(frozen=True)
class PositionStats:
    """A position's scalar facts, whether read from its rows or from a compact trace."""

    p_token: float
    pit_p: float
    pit_qp: float
    p_draft: float | None
    """p of the draft at a tested position; None at a bonus token."""
    p_below_draft: float | None
    """The mass of p on ids below the draft; None at a bonus token."""
    tested: TestedStats | None
    """None at a bonus token, or where the drafter's law is not recorded."""


@dataclass
class Position:
    """One decided output position: a tested draft, or a bonus token. `p` and `q` are its
    rows (None in a compact round without rows); `stats` its scalar facts either way."""

    round: Round
    offset: int
    p: np.ndarray | None
    q: np.ndarray | None
    draft: int | None
    emitted: int
    accepted: bool
    stats: PositionStats
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


@dataclass(frozen=True)
class BlockDecision:
    """`verify_block_round` on a full block round, evaluated once for every check: on the
    recorded uniforms (an unrecorded one read as 0) when the round records them in full
    shape, else on zeros; the law of the kept length does not read the uniforms."""

    num_accepted: int
    next_token: int
    accepted_length_law: np.ndarray
    """P(tau = i | drafts), `[k + 1]` float64."""
    on_recorded_uniforms: bool


def block_decision(round_: Round) -> BlockDecision | None:
    """The round's `BlockDecision`, or None when it is not a full block round with rows."""
    if not (round_.has_rows and is_full_block_round(round_)):
        return None
    u = round_.uniforms
    if u is not None and u.shape != (round_.k + 1, 2):
        u = None
    verdict = verify_block_round(round_, None if u is None else np.nan_to_num(u, nan=0.0))
    return BlockDecision(int(np.array(verdict.num_accepted)), int(np.array(verdict.next_token)),
                         np.array(verdict.accepted_length_law, dtype=np.float64), u is not None)


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


def _pit_lower(p: np.ndarray, key: np.ndarray, token: int) -> float:
    """The mass ordered before `token` (key descending, ties by id): `pit_value` at jitter 0."""
    pivot = key[token]
    return float(p[key > pivot].sum()) + float(p[:token][key[:token] == pivot].sum())


def qp_key(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The q/p order's key: q / p where p > 0, +inf where p = 0 (such tokens first)."""
    # One pass: the quotient written only where p > 0, over a key of +inf.
    key = np.full(p.shape, np.inf, dtype=np.result_type(q, p))
    np.divide(q, p, out=key, where=p > 0)
    return key


def row_dot(p: np.ndarray, q: np.ndarray) -> float:
    """sum p q over V, summed by NumPy's einsum as the trace writer sums it: not `np.dot`,
    whose BLAS splits a long row among its threads (the bits then depend on the thread
    count, and waking the threads for one row costs milliseconds on a busy host)."""
    return float(np.einsum("i,i->", p, q))


WideRows = tuple[np.ndarray, np.ndarray | None]
"""A round's target and draft rows in float64 (`wide_rows`)."""


def wide_rows(round_: Round) -> WideRows:
    """The round's target rows and draft rows (None when not recorded) in float64, widened
    once per round for every reader."""
    draft = round_.draft_rows
    return (round_.target_rows.astype(np.float64),
            draft.astype(np.float64) if draft is not None else None)


def round_stats(round_: Round, rows: WideRows | None = None) -> RoundStats:
    """The round's statistics (`RoundStats`) computed from its rows in float64, as a compact
    trace's writer computes them; the float32 residual as the support check reads it.
    `rows` are the round's `wide_rows`, when already widened."""
    target, draft = rows if rows is not None else wide_rows(round_)
    emitted, drafts = round_.emitted, round_.draft_tokens
    tested = min(len(emitted), round_.k) if draft is not None else 0
    by_q = token_rule(round_) is not None
    tokens = np.array(emitted, dtype=np.int64)
    at = np.arange(len(emitted))
    pit_p = [_pit_lower(target[n], target[n], y) for n, y in enumerate(emitted)]
    pit_qp = [_pit_lower(target[n], qp_key(target[n], draft[n]), y)
              if by_q and n < tested and draft is not None else pit_p[n]
              for n, y in enumerate(emitted)]
    decided = min(len(emitted), round_.k)
    d = np.array(drafts[:decided], dtype=np.int64)
    p_d = target[:decided]
    p_draft = p_d[np.arange(decided), d]
    p_below_draft = np.array([float(p_d[n, :d[n]].sum()) for n in range(decided)])
    t = np.arange(tested)
    p_t = target[:tested]
    empty = np.zeros(0)
    if draft is not None and tested and round_.draft_rows is not None:
        q_t = draft[:tested]
        # In float32, as the support check has always summed it: only its sign is read.
        residual = np.maximum(round_.target_rows[:tested] - round_.draft_rows[:tested],
                              np.float32(0)).sum(axis=1)
        compared = dict(
            q_token=q_t[t, tokens[:tested]], residual=residual.astype(np.float64),
            overlap=np.minimum(p_t, q_t).sum(axis=1),
            dot=np.array([row_dot(p_t[n], q_t[n]) for n in range(tested)]),
            q_at_argmax_p=q_t[t, np.argmax(p_t, axis=1)],
        )
    else:
        compared = {key: empty for key in ("q_token", "residual", "overlap", "dot",
                                           "q_at_argmax_p")}
    if draft is not None:
        m = min(draft.shape[0], round_.k)
        q_draft = draft[np.arange(m), np.array(drafts[:m], dtype=np.int64)]
        pit_q = np.array([_pit_lower(draft[i], draft[i], drafts[i]) for i in range(m)])
    else:
        q_draft, pit_q = empty, empty
    return RoundStats(
        p_token=target[at, tokens], pit_p=np.array(pit_p), pit_qp=np.array(pit_qp),
        p_draft=p_draft, p_below_draft=p_below_draft, q_draft=q_draft, pit_q=pit_q,
        **compared)


def position_stats(stats: RoundStats, n: int) -> PositionStats:
    """Position n's scalar facts from its round's statistics."""
    tested = None
    if n < stats.q_token.size:
        tested = TestedStats(
            float(stats.q_draft[n]), float(stats.q_token[n]), float(stats.residual[n]),
            float(stats.overlap[n]), float(stats.dot[n]), float(stats.q_at_argmax_p[n]))
    decided = n < stats.p_draft.size
    return PositionStats(
        float(stats.p_token[n]), float(stats.pit_p[n]), float(stats.pit_qp[n]),
        float(stats.p_draft[n]) if decided else None,
        float(stats.p_below_draft[n]) if decided else None, tested)


def round_positions(round_: Round, history: list[int], stats: RoundStats | None = None,
                    rows: WideRows | None = None) -> list[Position]:
    """The round's emitted tokens with the laws each was decided on; `history` is the run's
    prompt and emitted tokens before the round; `stats` its statistics (from its rows when
    not given); `rows` its `wide_rows`, when already widened."""
    out: list[Position] = []
    if round_.has_rows and rows is None:
        rows = wide_rows(round_)
    stats = stats if stats is not None else (round_stats(round_, rows) if round_.has_rows
                                             else round_.stats)
    assert stats is not None, "a round without rows holds its statistics"
    blind = _blind_rows(round_, history) if round_.has_rows else None
    target, draft = rows if rows is not None else (None, None)
    for i, token in enumerate(round_.emitted):
        tested = i < round_.k
        q = draft[i] if tested and draft is not None and i < draft.shape[0] else None
        out.append(Position(
            round=round_, offset=i, p=target[i] if target is not None else None, q=q,
            draft=round_.draft_tokens[i] if tested else None, emitted=token,
            accepted=i < round_.num_accepted, stats=position_stats(stats, i),
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


def models_power(round_: Round, vocab_size: int) -> bool:
    """Whether the round's positions feed the power model (see `POWER_MODEL_VOCAB`): in a
    compact trace its rounds with rows, and never one without (the model reads the laws)."""
    if not round_.has_rows:
        return False
    if round_.stats is not None:
        return True  # a compact trace's rounds with rows are a seeded share already
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
            assert pos.p is not None, "the power model reads rounds with rows"
            if pos.tested and pos.q is not None and rule is not None:
                outcomes[bug].append(bug.outcome(
                    rule, pos.p, pos.q, draft_sampler=pos.round.run.draft_sampler,
                    p_blind=pos.p_blind, target_sampler=pos.round.run.target_sampler,
                ))
                bonus[bug].append(None)
                continue
            outcomes[bug].append(None)
            bonus[bug].append(bug.bonus_law(pos.p, pos.p_blind,
                                            target_sampler=pos.round.run.target_sampler))
    return outcomes, bonus


@dataclass
class RoundFacts:
    """One chain round as every check reads it: its positions (their statistics from the
    rows where the round holds rows, else the ones the trace wrote), the round's statistics,
    and, when the round feeds the power model, each bug's law at each position."""

    round: Round
    positions: list[Position]
    modelled: bool
    stats: RoundStats
    outcomes: PositionOutcomes = field(default_factory=dict)
    bonus: BonusLaws = field(default_factory=dict)
    block: BlockDecision | None = None
    """The joint decision of a full block round (`block_decision`)."""
    rows: WideRows | None = None
    """The round's rows in float64 (`wide_rows`), None for a round without rows."""


def round_facts(round_: Round, history: list[int], vocab_size: int) -> RoundFacts:
    """The round's positions, and its bug models when `models_power` selects it."""
    rows = wide_rows(round_) if round_.has_rows else None
    stats = round_stats(round_, rows) if rows is not None else round_.stats
    assert stats is not None, "a round without rows holds its statistics"
    positions = round_positions(round_, history, stats, rows)
    block = block_decision(round_)
    if not models_power(round_, vocab_size):
        return RoundFacts(round_, positions, False, stats, block=block, rows=rows)
    outcomes, bonus = bug_models(positions)
    return RoundFacts(round_, positions, True, stats, outcomes, bonus, block, rows)
