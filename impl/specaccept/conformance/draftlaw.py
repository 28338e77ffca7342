"""The draft-law check: each draft against the q the trace records for it.

A round's draft row i is the law d_i was drawn from, given the history and d_0 .. d_{i-1}.
The law check's randomised probability integral transform (`specaccept.conformance.law`)
maps each draft to a value that is uniform on [0, 1) when it was drawn from its recorded
row, independently across drafts; one chi-square over every drafted position then tests
that the recorded q is the law the drafter drew from. Rows are recorded for the drafts
before the first rejection and may be for all k; whether row i is recorded depends on the
drafts before d_i only, so the transform of d_i stays uniform given the rows kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES
from specaccept.conformance.exact import State, merge_notes, merge_per_key
from specaccept.conformance.law import BinLaws, PitCounts, law_bins, pit_cdf
from specaccept.conformance.positions import RoundFacts, claimed_rule
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import unit_hash
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["DRAFT_LAW_SEED", "DraftLawState"]

DRAFT_LAW_SEED = 1
"""The seed of the randomised PIT of the drafts, so a verdict is reproducible."""
_MIN_DRAFTS = 10


@dataclass
class DraftLawState(State):
    """The draft-law check's state: the drafts' PIT counts, drafts with q = 0, the model."""

    pit: PitCounts = field(default_factory=PitCounts)
    zero: int = 0
    laws: dict[str, BinLaws] = field(default_factory=dict)
    notes: dict[str, set[str]] = field(default_factory=dict)
    modelled: bool = False

    def update(self, facts: RoundFacts) -> None:
        round_, stats = facts.round, facts.stats
        if not stats.records_drafter:
            return
        rows = stats.q_draft.size
        for i in range(rows):
            # Ordered by q descending: a drafter sharper than its record piles up near 0.
            jitter = unit_hash(DRAFT_LAW_SEED, round_.run.id, round_.index, i)
            q_token = float(stats.q_draft[i])
            self.pit.add(float(stats.pit_q[i]) + jitter * q_token)
            self.zero += q_token <= 0
        rule = claimed_rule(round_)
        if facts.modelled:
            self.modelled = True
        if not facts.modelled or rule is None or rule is AcceptanceRule.BLOCK:
            return
        for i in range(rows):
            self._power_terms(facts, rule, i)

    def _power_terms(self, facts: RoundFacts, rule: AcceptanceRule, i: int) -> None:
        """Per bug: the PIT's CDF had the engine drawn draft i from `Outcome.drafted` while
        recording `claimed_q`. The drafter's part of an outcome reads q and the drafter's
        sampler alone; a drafted row the target recorded no row for is given q in p's place.
        """
        round_ = facts.round
        assert facts.rows is not None, "the power model reads rounds with rows"
        target, draft = facts.rows
        assert draft is not None, "the drafter's law is modelled on rounds with its rows"
        q = draft[i]
        p = target[i] if i < target.shape[0] else q
        # Bugs that record the same q share one ordering: one sort for all of them.
        groups: list[tuple[np.ndarray, list[tuple[str, np.ndarray]]]] = []
        for bug in BUG_CLASSES:
            if not bug.models_positions:
                continue
            notes = self.notes.setdefault(bug.id, set())
            outcome = bug.outcome(rule, p, q, draft_sampler=round_.run.draft_sampler)
            if isinstance(outcome, str):
                notes.add(outcome)
                continue
            recorded = outcome.claimed_q
            drawn = outcome.drafted if outcome.drafted is not None else recorded
            group = next((g for g in groups if np.array_equal(g[0], recorded)), None)
            if group is None:
                group = (recorded, [])
                groups.append(group)
            group[1].append((bug.id, drawn))
        for recorded, members in groups:
            cdfs = pit_cdf(recorded, recorded, [drawn for _, drawn in members])
            for (bug_id, drawn), cdf in zip(members, cdfs, strict=True):
                self.laws.setdefault(bug_id, BinLaws()).add(
                    cdf, not np.array_equal(recorded, drawn))

    def merge(self, other: DraftLawState) -> None:
        self.pit.merge(other.pit)
        self.zero += other.zero
        self.modelled = self.modelled or other.modelled
        merge_notes(self.notes, other.notes)
        merge_per_key(self.laws, other.laws)

    def result(self, alpha_level: float) -> CheckResult:
        """The drafts against their recorded q rows: randomised PIT (tokens by q descending),
        chi-square on equal bins, at `alpha_level`."""
        from scipy import stats

        name = "draft-law"
        n = self.pit.n
        if n < _MIN_DRAFTS:
            why = ("the trace records no drafter law (no 'draft' rows)" if n == 0 else
                   f"needs at least {_MIN_DRAFTS} drafts with a recorded q, the trace has {n}")
            return CheckResult(name, Verdict.NOT_RUN, "n/a", f"p-value >= {alpha_level:g}",
                               why)
        bins = law_bins(n)
        chi2, p_value = self.pit.chi_square(bins)
        critical = float(stats.chi2.isf(alpha_level, bins - 1))
        failed = p_value < alpha_level
        detail = ""
        if self.zero:
            failed = True
            detail = f"{self.zero} drafts have q = 0 in their own recorded row: "
        if failed:
            low = self.pit.counts[bins][0] / n
            detail += (f"the drafts are not distributed as the recorded q (share of PIT values "
                       f"in the lowest bin {low:.3f}, expected {1 / bins:.3f}; above it the "
                       "drafter is sharper than its record, as when a temperature is applied "
                       "twice)")
        powers = []
        for bug in BUG_CLASSES:
            if not bug.models_positions:
                continue
            laws = self.laws.get(bug.id)
            if laws is None or not laws.moved:
                powers.append(Power(bug.id, None, "; ".join(sorted(self.notes.get(bug.id, ())))
                                    or "the drafts come from the q the engine records"))
                continue
            powers.append(Power(bug.id, laws.power(n, bins, critical),
                                "non-central chi-square approximation"))
        return CheckResult(
            name, Verdict.FAIL if failed else Verdict.PASS,
            f"chi2 = {chi2:.2f}, {bins - 1} d.o.f. over {n} drafts; p-value = {p_value:.3g}",
            f"p-value >= {alpha_level:g}, no draft with q = 0", detail, powers,
        )
