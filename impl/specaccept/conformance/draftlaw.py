"""The draft-law check: each draft against the q the trace records for it.

A round's draft row i is the law d_i was drawn from, given the history and d_0 .. d_{i-1}.
The law check's randomised probability integral transform (`specaccept.conformance.law`)
maps each draft to a value that is uniform on [0, 1) when it was drawn from its recorded
row, independently across drafts; one chi-square over every drafted position then tests
that the recorded q is the law the drafter drew from. Rows are recorded for the drafts
before the first rejection and may be for all k; whether row i is recorded depends on the
drafts before d_i only, so the transform of d_i stays uniform given the rows kept. The counts
are kept per drafter setting, as the law check keeps them per target setting
(`specaccept.conformance.law.sampler_stratum`): a drafter applying its temperature twice is
sharper than its record below temperature 1 and flatter above, which pooled cancel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES
from specaccept.conformance.exact import State, merge_notes, merge_per_key
from specaccept.conformance.law import (
    BinLaws,
    PitCounts,
    group_label,
    law_bins,
    merge_strata,
    pit_cdf,
    pooled_counts,
    pooled_laws,
    sampler_stratum,
    stratified_chi_square,
    stratum_cell,
    stratum_groups,
)
from specaccept.conformance.positions import RoundFacts, claimed_rule
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import unit_hash
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["DRAFT_LAW_SEED", "DraftLawCell", "DraftLawState"]

DRAFT_LAW_SEED = 1
"""The seed of the randomised PIT of the drafts, so a verdict is reproducible."""
_MIN_DRAFTS = 10


@dataclass
class DraftLawCell(State):
    """One drafter setting's share of the draft-law check: the drafts' PIT counts and the
    power model's sums per bug."""

    pit: PitCounts = field(default_factory=PitCounts)
    laws: dict[str, BinLaws] = field(default_factory=dict)

    def merge(self, other: DraftLawCell) -> None:
        self.pit.merge(other.pit)
        merge_per_key(self.laws, other.laws)


@dataclass
class DraftLawState(State):
    """The draft-law check's state: per drafter setting (`sampler_stratum`) the drafts' PIT
    counts and the model; drafts with q = 0."""

    strata: dict[str, DraftLawCell] = field(default_factory=dict)
    zero: int = 0
    notes: dict[str, set[str]] = field(default_factory=dict)
    modelled: bool = False

    def update(self, facts: RoundFacts) -> None:
        round_, stats = facts.round, facts.stats
        if not stats.records_drafter:
            return
        cell = stratum_cell(self.strata, sampler_stratum(round_.run.draft_sampler),
                            DraftLawCell)
        rows = stats.q_draft.size
        for i in range(rows):
            # Ordered by q descending: a drafter sharper than its record piles up near 0.
            jitter = unit_hash(DRAFT_LAW_SEED, round_.run.id, round_.index, i)
            q_token = float(stats.q_draft[i])
            cell.pit.add(float(stats.pit_q[i]) + jitter * q_token)
            self.zero += q_token <= 0
        rule = claimed_rule(round_)
        if facts.modelled:
            self.modelled = True
        if not facts.modelled or rule is None or rule is AcceptanceRule.BLOCK:
            return
        for i in range(rows):
            self._power_terms(facts, rule, i, cell)

    def _power_terms(self, facts: RoundFacts, rule: AcceptanceRule, i: int,
                     cell: DraftLawCell) -> None:
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
            outcome = bug.outcome(rule, p, q, draft_sampler=round_.run.draft_sampler,
                                  target_sampler=round_.run.target_sampler)
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
                cell.laws.setdefault(bug_id, BinLaws()).add(
                    cdf, not np.array_equal(recorded, drawn))

    def merge(self, other: DraftLawState) -> None:
        merge_strata(self.strata, other.strata)
        self.zero += other.zero
        self.modelled = self.modelled or other.modelled
        merge_notes(self.notes, other.notes)

    def result(self, alpha_level: float) -> CheckResult:
        """The drafts against their recorded q rows: randomised PIT (tokens by q descending),
        chi-square on equal bins, pooled and summed over drafter settings (Bonferroni over
        the two when the drafts fall into two groups of settings or more), at `alpha_level`."""
        from scipy import stats

        name = "draft-law"
        pooled = pooled_counts(cell.pit for cell in self.strata.values())
        n = pooled.n
        if n < _MIN_DRAFTS:
            why = ("the trace records no drafter law (no 'draft' rows)" if n == 0 else
                   f"needs at least {_MIN_DRAFTS} drafts with a recorded q, the trace has {n}")
            return CheckResult(name, Verdict.NOT_RUN, "n/a", f"p-value >= {alpha_level:g}",
                               why)
        bins = law_bins(n)
        chi2, p_value = pooled.chi_square(bins)
        groups = stratum_groups({key: cell.pit.n for key, cell in self.strata.items()})
        level, stratified = alpha_level, None
        if len(groups) >= 2:
            level = alpha_level / 2
            stratified = stratified_chi_square(
                [(group_label(group), pooled_counts(self.strata[key].pit for key in group))
                 for group in groups])
        critical = float(stats.chi2.isf(level, bins - 1))
        failed = p_value < level or (stratified is not None and stratified.p_value < level)
        detail = ""
        if self.zero:
            failed = True
            detail = f"{self.zero} drafts have q = 0 in their own recorded row: "
        if failed:
            counts, where = pooled, ""
            if stratified is not None and stratified.p_value < p_value:
                group = groups[[group_label(g) for g in groups].index(stratified.worst)]
                counts = pooled_counts(self.strata[key].pit for key in group)
                where = f" at {stratified.worst}"
            b = law_bins(counts.n)
            low = counts.counts[b][0] / counts.n
            detail += (f"the drafts are not distributed as the recorded q{where} (share of PIT "
                       f"values in the lowest bin {low:.3f}, expected {1 / b:.3f}; above it "
                       "the drafter is sharper than its record, as when a temperature is "
                       "applied twice)")
        powers = []
        for bug in BUG_CLASSES:
            if not bug.models_positions:
                continue
            parts = {key: cell.laws[bug.id] for key, cell in self.strata.items()
                     if bug.id in cell.laws}
            if not any(laws.moved for laws in parts.values()):
                powers.append(Power(bug.id, None, "; ".join(sorted(self.notes.get(bug.id, ())))
                                    or "the drafts come from the q the engine records"))
                continue
            power = pooled_laws(parts.values()).power(n, bins, critical)
            if stratified is not None:
                noncentrality = 0.0
                for group in groups:
                    size = sum(self.strata[key].pit.n for key in group)
                    noncentrality += pooled_laws(parts[key] for key in group if key in parts
                                                 ).noncentrality(size, law_bins(size))
                power = max(power, float(stats.ncx2.sf(
                    stats.chi2.isf(level, stratified.dof), stratified.dof, noncentrality)))
            powers.append(Power(bug.id, power, "non-central chi-square approximation"))
        statistic = f"chi2 = {chi2:.2f}, {bins - 1} d.o.f. over {n} drafts"
        threshold = f"p-value >= {level:g}, no draft with q = 0"
        if stratified is not None:
            statistic += (f"; by drafter setting ({len(groups)} groups) chi2 = "
                          f"{stratified.statistic:.2f}, {stratified.dof} d.o.f.")
            threshold = (f"min p-value >= {level:g} (pooled and by drafter setting, "
                         "Bonferroni), no draft with q = 0")
        smallest = min(p_value, stratified.p_value) if stratified is not None else p_value
        statistic += f"; {'min ' if stratified is not None else ''}p-value = {smallest:.3g}"
        return CheckResult(
            name, Verdict.FAIL if failed else Verdict.PASS, statistic, threshold, detail,
            powers,
        )
