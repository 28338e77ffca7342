"""The support check: every emitted token is one the spec could have emitted."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, BonusLaws, Outcome, PositionOutcomes
from specaccept.conformance.positions import Position, claimed_rule, prefix_weight
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["check_support", "support_power"]


def _support_violation(position: Position) -> str:
    p, token = position.p, position.emitted
    where = f"round {position.round.index} (line {position.round.line}), position {position.offset}"
    if p[token] <= 0:
        return f"{where}: emitted token {token} has p = 0"
    rule = claimed_rule(position.round)
    if (position.tested and not position.accepted and rule is AcceptanceRule.STOCHASTIC
            and position.q is not None and position.draft is not None):
        # The test keeps draft t when p[t] > 0 and u * q[t] <= p[t], u < 1: certain once
        # p[t] >= q[t], so rejecting such a draft is impossible, not unlikely.
        t = position.draft
        if p[t] > 0 and position.q[t] <= p[t]:
            return (f"{where}: draft {t} was rejected though p = {p[t]:.6g} >= q = "
                    f"{position.q[t]:.6g}: its acceptance probability is 1")
    if (position.tested and not position.accepted and rule in (AcceptanceRule.STOCHASTIC,
                                                                AcceptanceRule.BLOCK)
            and position.q is not None):
        q = position.q
        # Block verification draws from max(w p - q, 0) with w <= 1: inside {p > q} too.
        weight = (prefix_weight(position.round, position.offset)
                  if rule is AcceptanceRule.BLOCK else 1.0)
        residual_mass = np.maximum(
            np.float32(weight) * p.astype(np.float32) - q.astype(np.float32), 0).sum()
        if residual_mass > 0 and p[token] <= q[token]:
            return (f"{where}: replacement {token} has p = {p[token]:.6g} <= q = {q[token]:.6g}: "
                    "outside the residual's support")
    return ""


def check_support(positions: Sequence[Position], powers: list[Power]) -> CheckResult:
    """No emitted token with p = 0, no stochastic replacement with p <= q, no stochastic
    rejection of a draft with p >= q (accepted with probability 1); zero tolerance."""
    violations = [v for v in map(_support_violation, positions) if v]
    return CheckResult(
        "support", Verdict.FAIL if violations else Verdict.PASS,
        f"violations = {len(violations)} of {len(positions)} tokens", "0 violations",
        violations[0] if violations else "", powers,
    )


def support_power(
    positions: Sequence[Position], outcomes: PositionOutcomes,
    bonus: BonusLaws,
) -> list[Power]:
    powers = []
    for bug in BUG_CLASSES:
        if bug not in outcomes:
            continue
        survive, notes, applicable = 1.0, set(), False
        for pos, outcome, bonus_law in zip(positions, outcomes[bug], bonus[bug], strict=True):
            if isinstance(outcome, str):
                notes.add(outcome)
                continue
            if isinstance(outcome, Outcome):
                applicable = True
                emitted = outcome.emitted
                violation = float(emitted[pos.p <= 0].sum())
                if (claimed_rule(pos.round) is AcceptanceRule.STOCHASTIC and pos.q is not None
                        and np.maximum(pos.p - outcome.claimed_q, 0).sum() > 0):
                    outside = (pos.p <= outcome.claimed_q) & (pos.p > 0)
                    violation += float(outcome.replaced[outside].sum())
            elif isinstance(bonus_law, np.ndarray):
                applicable = True
                violation = float(bonus_law[pos.p <= 0].sum())
            else:
                continue
            survive *= 1.0 - min(1.0, violation)
        powers.append(Power(bug.id, 1.0 - survive if applicable else None,
                            "" if applicable else "; ".join(sorted(notes))))
    return powers
