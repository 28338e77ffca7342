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
from collections.abc import Sequence

import numpy as np
from scipy import stats

from specaccept.conformance.bugs import BUG_CLASSES, BonusLaws, PositionOutcomes, emitted_laws
from specaccept.conformance.positions import Position
from specaccept.conformance.report import CheckResult, Power, Verdict

__all__ = ["HISTORY_BET", "check_history", "history_log_growth"]

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


def _differing(positions: Sequence[Position]) -> list[int]:
    """Indices of the positions whose p_blind is known and differs from p."""
    return [n for n, pos in enumerate(positions)
            if pos.p_blind is not None and not np.array_equal(pos.p_blind, pos.p)]


def history_log_growth(
    positions: Sequence[Position], laws: Sequence[np.ndarray]
) -> tuple[float, float, float]:
    """(mean, variance, probability of +inf) of ln M at the end of the trace when position
    n's token is drawn from `laws[n]`, positions without p_blind contributing nothing."""
    mean, variance, finite = 0.0, 0.0, 1.0
    for pos, law in zip(positions, laws, strict=True):
        if pos.p_blind is None:
            continue
        log_factor = _log_factor(pos.p, pos.p_blind)
        infinite = np.isposinf(log_factor)
        finite *= 1.0 - float(law[infinite].sum())
        values = np.where(infinite, 0.0, log_factor)
        weights = np.where(infinite, 0.0, law)
        total = float(weights.sum())
        if total <= 0:
            continue
        m = float(np.dot(weights, values)) / total
        mean += m
        variance += float(np.dot(weights, (values - m) ** 2)) / total
    return mean, variance, 1.0 - finite


def _power(mean: float, variance: float, certain: float, alpha_level: float) -> float:
    """P(ln M_N >= ln(1 / alpha)) by a normal approximation, or the chance of a token with
    p = 0 < p_blind, whichever is larger: the supremum is caught at least as often."""
    target = math.log(1 / alpha_level)
    if variance <= 0:
        normal = 1.0 if mean >= target else 0.0
    else:
        normal = float(stats.norm.sf((target - mean) / math.sqrt(variance)))
    return 1.0 - (1.0 - certain) * (1.0 - normal)


def check_history(
    positions: Sequence[Position], alpha_level: float, bug_outcomes: PositionOutcomes,
    bonus_bug_laws: BonusLaws,
) -> CheckResult:
    """Ville's test of p against p_blind on the emitted tokens: fails when the betting
    wealth M reaches 1 / alpha."""
    name = "history"
    target = math.log(1 / alpha_level)
    threshold = f"sup ln M < ln(1/alpha) = {target:.2f} (Ville: P(sup M >= 1/alpha) <= alpha)"
    if not any(pos.p_blind is not None for pos in positions):
        return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                           "needs target logits, a target sampler that reads the history "
                           "(penalties, DRY) and the prompt")
    used = _differing(positions)
    log_wealth, peak, crossed = 0.0, 0.0, -1
    for n in used:
        pos = positions[n]
        assert pos.p_blind is not None
        log_wealth += float(_log_factor(pos.p, pos.p_blind)[pos.emitted])
        if log_wealth > peak:
            peak = log_wealth
            if peak >= target and crossed < 0:
                crossed = n
    failed = peak >= target
    detail = ""
    if failed:
        where = positions[crossed].round
        detail = (f"the wealth bet on p_blind reached 1/alpha at round {where.index} (line "
                  f"{where.line}): the emitted tokens follow the law computed without the "
                  "round's drafts in the history, not p (penalties blind to the drafts)")
    powers = []
    for bug in BUG_CLASSES:
        if bug not in bug_outcomes:
            continue
        laws, why_not = emitted_laws([pos.p for pos in positions], bug_outcomes[bug],
                                     bonus_bug_laws[bug])
        if laws is None:
            powers.append(Power(bug.id, None, why_not))
            continue
        mean, variance, certain = history_log_growth(positions, laws)
        powers.append(Power(bug.id, _power(mean, variance, certain, alpha_level),
                            "normal approximation of ln M at the trace's end"))
    return CheckResult(
        name, Verdict.FAIL if failed else Verdict.PASS,
        f"sup ln M = {peak:.2f}, final ln M = {log_wealth:.2f} over {len(used)} positions "
        "where p_blind differs from p",
        threshold, detail, powers,
    )
