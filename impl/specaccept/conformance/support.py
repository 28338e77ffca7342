"""The support check: every emitted token is one the spec could have emitted."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, Outcome
from specaccept.conformance.exact import State
from specaccept.conformance.positions import Position, RoundFacts, claimed_rule, prefix_weight
from specaccept.conformance.replay import PowerProduct
from specaccept.conformance.report import CheckResult, Verdict
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["SupportState"]


def _support_violation(position: Position) -> str:
    stats, token = position.stats, position.emitted
    where = f"round {position.round.index} (line {position.round.line}), position {position.offset}"
    if stats.p_token <= 0:
        return f"{where}: emitted token {token} has p = 0"
    rule = claimed_rule(position.round)
    tested = stats.tested
    if (tested is not None and not position.accepted and rule is AcceptanceRule.STOCHASTIC
            and position.draft is not None and stats.p_draft is not None):
        # The test keeps draft t when p[t] > 0 and u * q[t] <= p[t], u < 1: certain once
        # p[t] >= q[t], so rejecting such a draft is impossible, not unlikely.
        t, p_t, q_t = position.draft, stats.p_draft, tested.q_draft
        if p_t > 0 and q_t <= p_t:
            return (f"{where}: draft {t} was rejected though p = {p_t:.6g} >= q = "
                    f"{q_t:.6g}: its acceptance probability is 1")
    if (tested is not None and not position.accepted
            and rule in (AcceptanceRule.STOCHASTIC, AcceptanceRule.BLOCK)):
        if rule is AcceptanceRule.BLOCK:
            # Block verification draws from max(w p - q, 0) with w <= 1: inside {p > q}
            # too. Block rounds keep their rows in every trace.
            assert position.p is not None and position.q is not None
            weight = prefix_weight(position.round, position.offset)
            residual_mass = float(np.maximum(
                np.float32(weight) * position.p.astype(np.float32)
                - position.q.astype(np.float32), 0).sum())
        else:
            residual_mass = tested.residual
        if residual_mass > 0 and stats.p_token <= tested.q_token:
            return (f"{where}: replacement {token} has p = {stats.p_token:.6g} <= q = "
                    f"{tested.q_token:.6g}: outside the residual's support")
    return ""


@dataclass
class SupportState(State):
    """The support check's state: tokens seen, violations, the first one, the power model."""

    tokens: int = 0
    violations: int = 0
    first: str = ""
    power: PowerProduct = field(default_factory=PowerProduct)

    def update(self, facts: RoundFacts) -> None:
        for position in facts.positions:
            self.tokens += 1
            violation = _support_violation(position)
            if violation:
                self.violations += 1
                self.first = self.first or violation
        if facts.modelled:
            _power_terms(facts, self.power)

    def merge(self, other: SupportState) -> None:
        self.tokens += other.tokens
        self.violations += other.violations
        self.first = self.first or other.first
        self.power.merge(other.power)

    def result(self, power_scale: float) -> CheckResult:
        """No emitted token with p = 0, no stochastic replacement with p <= q, no stochastic
        rejection of a draft with p >= q (accepted with probability 1); zero tolerance."""
        return CheckResult(
            "support", Verdict.FAIL if self.violations else Verdict.PASS,
            f"violations = {self.violations} of {self.tokens} tokens", "0 violations",
            self.first, self.power.powers(
                power_scale, "", "no modelled position is tested, and the bug leaves the law "
                "of every untested one at p"),
        )


def _power_terms(facts: RoundFacts, power: PowerProduct) -> None:
    for bug in BUG_CLASSES:
        if bug not in facts.outcomes:
            continue
        power.touch(bug.id)
        for pos, outcome, bonus_law in zip(facts.positions, facts.outcomes[bug],
                                           facts.bonus[bug], strict=True):
            assert pos.p is not None, "the power model reads rounds with rows"
            if isinstance(outcome, str):
                power.add(bug.id, None, outcome)
                continue
            if isinstance(outcome, Outcome):
                emitted = outcome.emitted
                violation = float(emitted[pos.p <= 0].sum())
                if (claimed_rule(pos.round) is AcceptanceRule.STOCHASTIC and pos.q is not None
                        and np.maximum(pos.p - outcome.claimed_q, 0).sum() > 0):
                    outside = (pos.p <= outcome.claimed_q) & (pos.p > 0)
                    violation += float(outcome.replaced[outside].sum())
            elif isinstance(bonus_law, np.ndarray):
                violation = float(bonus_law[pos.p <= 0].sum())
            else:
                continue
            power.add(bug.id, violation)
