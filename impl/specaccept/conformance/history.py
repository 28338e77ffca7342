"""The history check: do the target's penalties see the round's drafts? No uniforms needed.

When the trace stores the target's logits and a sampler that reads the history (penalties,
DRY), the kit computes at each position both p, with the accepted drafts before it in the
history, and p_blind, with the history as it stood before the round. A correct engine emits
y ~ p; an engine whose penalties ignore the drafts emits y ~ p_blind. The check bets on the
second: with lambda = 1/2,

    M_n = prod_{j <= n} (1 + lambda (p_blind(y_j) / p(y_j) - 1)),

and since p and p_blind are fixed before y_j is drawn, E[factor | past] = 1 - lambda +
lambda sum_{p > 0} p_blind <= 1 under a correct engine: M is a nonnegative supermartingale
from 1, and Ville's inequality gives P(sup_n M_n >= 1 / alpha) <= alpha at every trace
length, with no asymptotics. The factor is at least 1 - lambda, so one token that p_blind
rules out does not end the bet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, Outcome
from specaccept.conformance.exact import ExactSum, LogSurvival, State, merge_notes, merge_per_key
from specaccept.conformance.positions import RoundFacts
from specaccept.conformance.report import CheckResult, Power, Verdict

__all__ = ["HISTORY_BET", "HistoryState"]

HISTORY_BET = 0.5
"""lambda, the share of the wealth bet on p_blind at each position."""


def _log_factor(p: np.ndarray, p_blind: np.ndarray) -> np.ndarray:
    """Per token, ln(1 + lambda (p_blind / p - 1)); +inf where p = 0 < p_blind."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p > 0, p_blind / np.where(p > 0, p, 1.0), np.inf)
        factor = np.where((p <= 0) & (p_blind <= 0), 1.0,
                          1.0 + HISTORY_BET * (ratio - 1.0))
    out: np.ndarray = np.log(factor)
    return out


def _power(mean: float, variance: float, certain: float, alpha_level: float) -> float:
    """P(ln M_N >= ln(1 / alpha)) by a normal approximation, or the chance of a token with
    p = 0 < p_blind, whichever is larger: the supremum is caught at least as often."""
    from scipy import stats

    target = math.log(1 / alpha_level)
    if variance <= 0:
        normal = 1.0 if mean >= target else 0.0
    else:
        normal = float(stats.norm.sf((target - mean) / math.sqrt(variance)))
    return 1.0 - (1.0 - certain) * (1.0 - normal)


def _log_growth(p: np.ndarray, p_blind: np.ndarray, law: np.ndarray) -> tuple[float, float,
                                                                             float]:
    """(mean, variance, probability of +inf) of one position's ln factor when its token is
    drawn from `law`."""
    log_factor = _log_factor(p, p_blind)
    infinite = np.isposinf(log_factor)
    certain = float(law[infinite].sum())
    values = np.where(infinite, 0.0, log_factor)
    weights = np.where(infinite, 0.0, law)
    total = float(weights.sum())
    if total <= 0:
        return 0.0, 0.0, certain
    m = float(np.dot(weights, values)) / total
    return m, float(np.dot(weights, (values - m) ** 2)) / total, certain


@dataclass
class _Growth(State):
    mean: ExactSum = field(default_factory=ExactSum)
    variance: ExactSum = field(default_factory=ExactSum)
    finite: LogSurvival = field(default_factory=LogSurvival)
    moved: bool = False

    def merge(self, other: _Growth) -> None:
        self.mean.merge(other.mean)
        self.variance.merge(other.variance)
        self.finite.merge(other.finite)
        self.moved = self.moved or other.moved


@dataclass
class HistoryState(State):
    """The history check's state: the betting wealth's path (its final log and each new
    high, with the round that set it), and the power model's sums per bug."""

    seen: bool = False
    """Whether any position had p_blind (else the check does not run)."""
    used: int = 0
    log_wealth: float = 0.0
    highs: list[tuple[float, int, int]] = field(default_factory=list)
    """(ln M, round index, line) at each new high of ln M above 0, in order."""
    growth: dict[str, _Growth] = field(default_factory=dict)
    notes: dict[str, set[str]] = field(default_factory=dict)

    def update(self, facts: RoundFacts) -> None:
        for pos in facts.positions:
            if pos.p_blind is None or pos.p is None:
                continue
            self.seen = True
            if np.array_equal(pos.p_blind, pos.p):
                continue
            self.used += 1
            self.log_wealth += float(_log_factor(pos.p, pos.p_blind)[pos.emitted])
            if self.log_wealth > (self.highs[-1][0] if self.highs else 0.0):
                self.highs.append((self.log_wealth, pos.round.index, pos.round.line))
        if facts.modelled:
            self._power_terms(facts)

    def _power_terms(self, facts: RoundFacts) -> None:
        for bug in BUG_CLASSES:
            if bug not in facts.outcomes:
                continue
            notes = self.notes.setdefault(bug.id, set())
            growth = self.growth.setdefault(bug.id, _Growth())
            for n, pos in enumerate(facts.positions):
                outcome, bonus = facts.outcomes[bug][n], facts.bonus[bug][n]
                law = outcome.emitted if isinstance(outcome, Outcome) else bonus
                if isinstance(outcome, str):
                    notes.add(outcome)
                assert pos.p is not None, "the power model reads rounds with rows"
                law = law if isinstance(law, np.ndarray) else pos.p
                growth.moved = growth.moved or not np.array_equal(law, pos.p)
                if pos.p_blind is None:
                    continue
                mean, variance, certain = _log_growth(pos.p, pos.p_blind, law)
                growth.mean.add(mean)
                growth.variance.add(variance)
                growth.finite.add(certain)

    def merge(self, other: HistoryState) -> None:
        self.seen = self.seen or other.seen
        self.used += other.used
        for value, index, line in other.highs:
            shifted = self.log_wealth + value
            if shifted > (self.highs[-1][0] if self.highs else 0.0):
                self.highs.append((shifted, index, line))
        self.log_wealth += other.log_wealth
        merge_notes(self.notes, other.notes)
        merge_per_key(self.growth, other.growth)

    def result(self, alpha_level: float, power_scale: float = 1.0) -> CheckResult:
        """Ville's test of p against p_blind on the emitted tokens: fails when the betting
        wealth M reaches 1 / alpha."""
        name = "history"
        target = math.log(1 / alpha_level)
        threshold = (f"sup ln M < ln(1/alpha) = {target:.2f} (Ville: P(sup M >= 1/alpha) "
                     "<= alpha)")
        if not self.seen:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "needs target logits, a target sampler that reads the history "
                               "(penalties, DRY) and the prompt")
        peak = self.highs[-1][0] if self.highs else 0.0
        failed = peak >= target
        detail = ""
        if failed:
            _, index, line = next(high for high in self.highs if high[0] >= target)
            detail = (f"the wealth bet on p_blind reached 1/alpha at round {index} (line "
                      f"{line}): the emitted tokens follow the law computed without the "
                      "round's drafts in the history, not p (penalties blind to the drafts)")
        powers = []
        for bug in BUG_CLASSES:
            if bug.id not in self.growth:
                continue
            growth = self.growth[bug.id]
            if not growth.moved:
                powers.append(Power(bug.id, None, "; ".join(sorted(self.notes[bug.id]))
                                    or "no position affected"))
                continue
            powers.append(Power(bug.id, _power(
                growth.mean.value * power_scale, growth.variance.value * power_scale,
                1.0 - growth.finite.scaled(power_scale), alpha_level),
                "normal approximation of ln M at the trace's end"))
        return CheckResult(
            name, Verdict.FAIL if failed else Verdict.PASS,
            f"sup ln M = {peak:.2f}, final ln M = {self.log_wealth:.2f} over {self.used} "
            "positions where p_blind differs from p",
            threshold, detail, powers,
        )
