"""The acceptance check: accepted drafts against the claimed rule's closed form, as one z-score."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, Outcome
from specaccept.conformance.exact import ExactSum, LogSurvival, State, merge_notes, merge_per_key
from specaccept.conformance.positions import (
    RoundFacts,
    TestedStats,
    token_rule,
)
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["AcceptanceState"]


def _closed_form(rule: AcceptanceRule, p: np.ndarray, q: np.ndarray) -> float:
    """The token-level rule's acceptance probability (as `acceptance_probability`)."""
    if rule is AcceptanceRule.STOCHASTIC:
        return float(np.minimum(p, q).sum())
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        return float(q[int(np.argmax(p))])
    return float(np.dot(p, q))


def _closed_form_of(rule: AcceptanceRule, tested: TestedStats) -> float:
    """`_closed_form` from a position's statistics."""
    if rule is AcceptanceRule.STOCHASTIC:
        return tested.overlap
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        return tested.q_at_argmax_p
    return tested.dot


def _is_certain(alpha: float) -> bool:
    return alpha <= 1e-12 or alpha >= 1 - 1e-12


NORMAL_MIN_VARIANCE = 25.0
"""Below this variance of the drift (sigma < 5) its normal approximation cannot be trusted
at a tail of 1e-4: a request of three tested positions whose acceptance probabilities sum
to 0.002, one accepted, is not a 9-sigma event. There the drift is judged by
`bennett_tail` instead, a bound that holds at any count."""


def bennett_tail(drift: float, variance: float, span: float) -> float:
    """An upper bound on the probability that a martingale drifts `drift` or more above 0.

    Bennett's inequality in Freedman's martingale form: increments at most `span` above
    their conditional mean, conditional variances summing to `variance`:
    P <= exp(-(variance / span^2) h(span drift / variance)), h(u) = (1 + u) log(1 + u) - u.
    """
    if drift <= 0:
        return 1.0
    if variance <= 0:
        return 0.0
    u = span * drift / variance
    return math.exp(-(variance / span**2) * ((1 + u) * math.log1p(u) - u))


def drift_rejected(drift: float, variance: float, span: float, critical: float,
                   alpha_side: float) -> bool:
    """Whether the drift lies beyond its threshold: |z| > critical where the normal
    approximation holds, Bennett's bound at `alpha_side` below `NORMAL_MIN_VARIANCE`."""
    if variance >= NORMAL_MIN_VARIANCE:
        return abs(drift) > critical * math.sqrt(variance)
    return variance > 0 and bennett_tail(abs(drift), variance, span) <= alpha_side


@dataclass
class _BugTerms(State):
    """One bug's acceptance power terms: sums over the positions it applies to."""

    shift: ExactSum = field(default_factory=ExactSum)
    """sum of (alpha_bug - alpha)."""
    variance: ExactSum = field(default_factory=ExactSum)
    """sum of alpha (1 - alpha)."""
    variance_bug: ExactSum = field(default_factory=ExactSum)
    """sum of alpha_bug (1 - alpha_bug)."""
    certain: LogSurvival = field(default_factory=LogSurvival)
    """prod of (1 - |alpha_bug - alpha|) over positions where alpha is certain."""

    def add(self, alpha: float, alpha_bug: float) -> None:
        self.shift.add(alpha_bug - alpha)
        self.variance.add(alpha * (1 - alpha))
        self.variance_bug.add(alpha_bug * (1 - alpha_bug))
        if _is_certain(alpha):
            self.certain.add(abs(alpha_bug - alpha))

    def merge(self, other: _BugTerms) -> None:
        self.shift.merge(other.shift)
        self.variance.merge(other.variance)
        self.variance_bug.merge(other.variance_bug)
        self.certain.merge(other.certain)

    def power(self, critical: float, scale: float) -> float:
        caught_certain = 1.0 - self.certain.scaled(scale)
        sd0 = math.sqrt(self.variance.value * scale)
        if sd0 == 0:
            return caught_certain
        shift = self.shift.value * scale / sd0
        sd = math.sqrt(self.variance_bug.value * scale) / sd0
        if sd == 0:
            caught_z = 1.0 if abs(shift) > critical else 0.0
        else:
            caught_z = (0.5 * math.erfc((critical - shift) / (sd * math.sqrt(2)))
                        + 0.5 * math.erfc((critical + shift) / (sd * math.sqrt(2))))
        return max(caught_certain, caught_z)


@dataclass
class AcceptanceState(State):
    """The acceptance check's state: exact sums of the martingale's terms and variances,
    for token-level positions and block rounds, and the power model's sums per bug."""

    positions_tested: int = 0
    """Every tested position, scored or not (the difference is reported as left out)."""
    tested: int = 0
    accepted: int = 0
    claimed: ExactSum = field(default_factory=ExactSum)
    claimed_variance: ExactSum = field(default_factory=ExactSum)
    impossible: int = 0
    ceiling: ExactSum = field(default_factory=ExactSum)
    ceiling_variance: ExactSum = field(default_factory=ExactSum)
    beyond_ceiling: int = 0
    accepted_at_zero_ceiling: int = 0
    blocks: int = 0
    block_span: int = 0
    """The largest k of a scored block round, since a kept length moves at most k off its
    mean."""
    block_tested: int = 0
    kept: int = 0
    block_means: ExactSum = field(default_factory=ExactSum)
    block_variances: ExactSum = field(default_factory=ExactSum)
    bug_terms: dict[str, _BugTerms] = field(default_factory=dict)
    bug_notes: dict[str, set[str]] = field(default_factory=dict)

    def update(self, facts: RoundFacts) -> None:
        round_ = facts.round
        self.positions_tested += sum(1 for pos in facts.positions if pos.tested)
        rule = token_rule(round_)
        for pos in facts.positions:
            tested = pos.stats.tested
            if not (pos.tested and tested is not None and rule is not None):
                continue
            claimed = _closed_form_of(rule, tested)
            ceiling = tested.overlap
            self.tested += 1
            self.accepted += pos.accepted
            self.claimed.add(claimed)
            self.claimed_variance.add(claimed * (1 - claimed))
            self.impossible += _is_certain(claimed) and abs(pos.accepted - claimed) > 0.5
            self.ceiling.add(ceiling)
            self.ceiling_variance.add(ceiling * (1 - ceiling))
            self.beyond_ceiling += _is_certain(ceiling) and abs(pos.accepted - ceiling) > 0.5
            self.accepted_at_zero_ceiling += ceiling <= 1e-12 and pos.accepted
        if facts.block is not None:
            # Kept length against its law given the drafts.
            law = facts.block.accepted_length_law
            mean = float(np.dot(np.arange(law.size), law))
            variance = float(np.dot(np.arange(law.size) ** 2, law)) - mean * mean
            self.blocks += 1
            self.block_span = max(self.block_span, round_.k)
            self.block_tested += min(len(round_.emitted), round_.k)
            self.kept += round_.num_accepted
            self.block_means.add(mean)
            self.block_variances.add(max(variance, 0.0))
            self.impossible += law[round_.num_accepted] <= 0
        if facts.modelled:
            self._power_terms(facts)

    def _power_terms(self, facts: RoundFacts) -> None:
        rule = token_rule(facts.round)
        for bug in BUG_CLASSES:
            outcomes = facts.outcomes.get(bug)
            if outcomes is None:
                continue
            notes = self.bug_notes.setdefault(bug.id, set())
            for pos, outcome in zip(facts.positions, outcomes, strict=True):
                if not (pos.tested and pos.q is not None and rule is not None):
                    continue
                if isinstance(outcome, str):
                    notes.add(outcome)
                elif isinstance(outcome, Outcome):
                    assert pos.p is not None, "the power model reads rounds with rows"
                    self.bug_terms.setdefault(bug.id, _BugTerms()).add(
                        _closed_form(rule, pos.p, outcome.claimed_q), outcome.acceptance)

    def merge(self, other: AcceptanceState) -> None:
        for name in ("positions_tested", "tested", "accepted", "impossible", "beyond_ceiling",
                     "accepted_at_zero_ceiling", "blocks", "block_tested", "kept"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.block_span = max(self.block_span, other.block_span)
        for name in ("claimed", "claimed_variance", "ceiling", "ceiling_variance",
                     "block_means", "block_variances"):
            getattr(self, name).merge(getattr(other, name))
        merge_notes(self.bug_notes, other.bug_notes)
        merge_per_key(self.bug_terms, other.bug_terms)

    def result(self, alpha_level: float, power_scale: float = 1.0) -> CheckResult:
        """Acceptance against the claimed rule's closed form, as one martingale z-score.

        Token-level rules contribute one term per tested position, accepted minus the
        rule's acceptance probability; block verification one term per round, the kept
        length minus its mean under `accepted_length_law`.
        """
        from scipy import stats

        name = "acceptance"
        critical = float(stats.norm.isf(alpha_level / 2))
        ceiling_critical = float(stats.norm.isf(alpha_level))
        threshold = f"|z| <= {critical:.3f}, z_ceiling <= {ceiling_critical:.3f}"
        skipped = self.positions_tested - self.tested - self.block_tested
        if not self.tested and not self.blocks:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "no tested position has q and a rule with a closed form")
        claimed, ceiling = self.claimed.value, self.ceiling.value
        variance = self.claimed_variance.value + self.block_variances.value
        drift = ExactSum([self.accepted, -claimed, self.kept, -self.block_means.value]).value
        z = drift / math.sqrt(variance) if variance > 0 else 0.0
        ceiling_variance = self.ceiling_variance.value
        z_ceiling = ((self.accepted - ceiling) / math.sqrt(ceiling_variance)
                     if self.tested and ceiling_variance > 0 else 0.0)
        span = float(max(1, self.block_span))
        above_ceiling = bool(self.tested) and (
            (self.accepted > ceiling and drift_rejected(
                self.accepted - ceiling, ceiling_variance, 1.0, ceiling_critical, alpha_level))
            or (self.beyond_ceiling > 0 and self.accepted_at_zero_ceiling > 0))
        failed = (drift_rejected(drift, variance, span, critical, alpha_level / 2)
                  or self.impossible > 0 or above_ceiling)
        details = []
        z_beyond = variance > 0 and abs(drift) > critical * math.sqrt(variance)
        if variance < NORMAL_MIN_VARIANCE and (z_beyond or failed):
            details.append(
                f"variance {variance:.3g} < {NORMAL_MIN_VARIANCE:g}: judged by Bennett's bound "
                f"P <= {bennett_tail(abs(drift), variance, span):.3g} (threshold "
                f"{alpha_level / 2:g}), not by z")
        if above_ceiling:
            details.append(
                f"IMPOSSIBLE: acceptance {self.accepted / self.tested:.4f} lies above the "
                f"lossless ceiling sum min(p, q) = {ceiling / self.tested:.4f} (z_ceiling = "
                f"{z_ceiling:.2f}): no lossless rule accepts this often"
            )
        if self.impossible:
            details.append(f"{self.impossible} decisions against a certain outcome "
                           "(probability 0 or 1)")
        if self.blocks:
            details.append(f"{self.blocks} block-verification rounds scored by their kept "
                           f"length (mean {self.kept / self.blocks:.3f}, closed form "
                           f"{self.block_means.value / self.blocks:.3f})")
        if skipped > 0:
            details.append(f"{skipped} tested positions without q, full rows or a known rule "
                           "were left out")
        powers = []
        for bug in BUG_CLASSES:
            if bug.id not in self.bug_notes:
                continue
            terms = self.bug_terms.get(bug.id)
            if terms is None:
                powers.append(Power(bug.id, None, "; ".join(sorted(self.bug_notes[bug.id]))
                                    or "no token-level tested position"))
                continue
            powers.append(Power(bug.id, terms.power(critical, power_scale),
                                "normal approximation"))
        counted = "; ".join(
            [f"accepted {self.accepted} of {self.tested}, closed form {claimed:.1f}"]
            * bool(self.tested)
            + [f"{self.blocks} block rounds kept {self.kept}, closed form "
               f"{self.block_means.value:.1f}"] * bool(self.blocks))
        return CheckResult(
            name, Verdict.FAIL if failed else Verdict.PASS,
            f"z = {z:.3f} ({counted}); z_ceiling = {z_ceiling:.3f}",
            threshold, "; ".join(details), powers,
        )
