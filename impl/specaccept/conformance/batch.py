"""The batch check: a round verified in a batch must not depend on the batch's other rows.

A trace of a batching engine says, per round, which verification step decided it and in
which row (version 2's ``batch``; one round per request per step). Three tests, at
alpha / 3 each:

1. shared uniforms (uniforms recorded): no uniform one request's round read is read by
   another request's round of the same step. Fresh uniforms coincide with the fresh
   check's bound, P(D >= c) <= mu^c / c!, over the pairs of the step only.
2. shared coins (no uniforms needed): at one offset of one step, the accept outcomes of two
   requests are independent given their drafts. With rho the acceptance probability given
   the draft (min(1, p(t)/q(t)) for stochastic, p(t) for sampler-match), the terms
   (A_a - rho_a)(A_b - rho_b) over pairs of requests have mean 0 and are uncorrelated, so
   their sum over its standard deviation is a z-score; a coin shared by the rows makes the
   outcomes move together.
3. each request alone: the acceptance and law checks on one request's positions, with
   Bonferroni over requests, so that a batch that mixes requests' rows is named by request.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from specaccept.conformance.acceptance import AcceptanceState
from specaccept.conformance.bugs import SHARED_BATCH_COIN
from specaccept.conformance.exact import State, merge_per_key
from specaccept.conformance.fresh import coincidence_threshold, read_uniforms, uniform_spacing
from specaccept.conformance.law import LawState
from specaccept.conformance.positions import Position, RoundFacts, claimed_rule, read_cells
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["BatchState", "PieceConflict"]


@dataclass
class _Entry(State):
    """One batched round as the batch check reads it."""

    slot: int
    run: str
    index: int
    line: int
    values: list[float]
    cells: list[tuple[int, int]]
    recorded: bool
    tests: list[tuple[int, bool, float, float]]
    """(offset, accepted, lo, hi) of each tested position with an interval."""


class PieceConflict(ValueError):
    """Two pieces of a trace claim the same thing (a batch slot, a run's rounds)."""


def _interval(position: Position, rule: AcceptanceRule) -> tuple[float, float] | None:
    """The accept event as u in [lo, hi) for the uniform that decides it, given the draft."""
    stats = position.stats
    p, below = stats.p_draft, stats.p_below_draft
    assert p is not None and below is not None, "a tested position"
    if rule is AcceptanceRule.STOCHASTIC and stats.tested is not None:
        q = stats.tested.q_draft
        rho = 0.0 if p <= 0 else (1.0 if q <= 0 else min(1.0, p / q))
        return 0.0, rho
    if rule in (AcceptanceRule.SAMPLER_MATCH,
                AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION):
        return below, below + p
    return None


def _shared_uniforms(
    steps: dict[tuple[str, int], list[_Entry]], alpha_level: float
) -> tuple[int, int, float, str, int]:
    """(coincidences D, threshold c, mu, first diagnosis, coincidences a shared coin gives)."""
    spacing = uniform_spacing([v for rounds in steps.values() for r in rounds for v in r.values])
    coincidences, mean_bound, first, shared = 0, 0.0, "", 0
    for step, rounds in steps.items():
        seen: dict[float, _Entry] = {}
        cells_seen: set[tuple[int, int]] = set()
        for entry in rounds:
            for value in entry.values:
                mean_bound += len(seen) * spacing
                other = seen.get(value)
                if other is not None and other is not entry:
                    coincidences += 1
                    first = first or (
                        f"step {step[1]}: round {entry.index} of run {entry.run!r} (line "
                        f"{entry.line}) reads u = {value!r}, which round {other.index} of run "
                        f"{other.run!r} (line {other.line}) read in the same step: the rows "
                        "of a batch share their uniforms")
            for value in entry.values:
                seen.setdefault(value, entry)
            if entry.recorded:
                cells = set(entry.cells)
                shared += len(cells & cells_seen)
                cells_seen |= cells
    return (coincidences, coincidence_threshold(mean_bound, alpha_level), mean_bound, first,
            shared)


def _pairs(steps: dict[tuple[str, int], list[_Entry]]) -> list[tuple[float, float, float, float]]:
    """Per pair of requests tested at one offset of one step: (A_a - rho_a)(A_b - rho_b),
    its variance under independence, and its mean under a shared coin; plus rho_a rho_b."""
    out = []
    for rounds in steps.values():
        offsets: dict[int, list[tuple[bool, float, float]]] = defaultdict(list)
        for entry in rounds:
            for offset, accepted, lo, hi in entry.tests:
                offsets[offset].append((accepted, lo, hi))
        for entries in offsets.values():
            for a in range(len(entries)):
                for b in range(a + 1, len(entries)):
                    (acc_a, lo_a, hi_a), (acc_b, lo_b, hi_b) = entries[a], entries[b]
                    rho_a, rho_b = hi_a - lo_a, hi_b - lo_b
                    term = (float(acc_a) - rho_a) * (float(acc_b) - rho_b)
                    variance = rho_a * (1 - rho_a) * rho_b * (1 - rho_b)
                    overlap = max(0.0, min(hi_a, hi_b) - max(lo_a, lo_b))
                    out.append((term, variance, overlap - rho_a * rho_b, rho_a * rho_b))
    return out


@dataclass
class BatchState(State):
    """The batch check's state: each step's rounds (what the step's tests read), and each
    batched request's own acceptance and law states."""

    steps: dict[tuple[str, int], list[_Entry]] = field(default_factory=dict)
    """The entries of each (trace file, step), since a step number names one forward pass
    of one engine."""
    acceptance: dict[str, AcceptanceState] = field(default_factory=dict)
    law: dict[str, LawState] = field(default_factory=dict)

    def update(self, facts: RoundFacts, source: str = "") -> None:
        round_ = facts.round
        if round_.batch is None:
            return
        step, slot = round_.batch
        rule = claimed_rule(round_)
        tests = []
        if rule is not None and not rule.verifies_jointly:
            for pos in facts.positions:
                if pos.tested:
                    interval = _interval(pos, rule)
                    if interval is not None:
                        tests.append((pos.offset, pos.accepted, *interval))
        self.steps.setdefault((source, step), []).append(_Entry(
            slot, round_.run.id, round_.index, round_.line, read_uniforms(round_),
            read_cells(round_) if round_.uniforms is not None else [],
            round_.uniforms is not None, tests))
        alone = RoundFacts(round_, facts.positions, False, facts.stats)
        self.acceptance.setdefault(round_.run.id, AcceptanceState()).update(alone)
        self.law.setdefault(round_.run.id, LawState()).update(alone, model_power=False)

    def merge(self, other: BatchState) -> None:
        for step, entries in other.steps.items():
            mine = self.steps.setdefault(step, [])
            slots = {entry.slot: entry.line for entry in mine}
            for entry in entries:
                if entry.slot in slots:
                    raise PieceConflict(f"slot {entry.slot} of step {step[1]} is claimed by line "
                                        f"{slots[entry.slot]} and by line {entry.line}: one row "
                                        "of a batch verifies one round")
            mine += entries
        merge_per_key(self.acceptance, other.acceptance)
        merge_per_key(self.law, other.law)

    def result(self, alpha_level: float) -> CheckResult:
        """The batched rounds: no uniform shared within a step, no coin shared within a step,
        and each request's acceptance and law checks passing on their own."""
        from scipy import stats

        name = "batch"
        part = alpha_level / 3
        z_critical = float(stats.norm.isf(part / 2))
        steps = {step: sorted(entries, key=lambda e: e.slot)
                 for step, entries in sorted(self.steps.items())}
        threshold = (f"D < c (shared uniforms), |z| <= {z_critical:.3f} (shared coins), each "
                     f"request's acceptance and law at {part:g} / requests; alpha / 3 each")
        if not steps:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "no round records its batch step ('batch', version 2)")
        failures: list[str] = []
        coincidences, critical, mean_bound, first, shared = _shared_uniforms(steps, part)
        if coincidences >= critical:
            failures.append(first)
        pairs = _pairs(steps)
        variance = sum(v for _, v, _, _ in pairs)
        z = sum(t for t, _, _, _ in pairs) / math.sqrt(variance) if variance > 0 else 0.0
        if abs(z) > z_critical:
            failures.append(f"the accept outcomes of requests verified in one step move "
                            f"together (z = {z:.2f} over {len(pairs)} pairs): the rows of a "
                            "batch share their coins")
        runs = sorted(self.acceptance, key=lambda run_id: min(
            e.line for entries in steps.values() for e in entries if e.run == run_id))
        alone = part / (2 * len(runs))
        failed_runs = []
        for run_id in runs:
            for check in (self.acceptance[run_id].result(alone),
                          self.law[run_id].result(alone)):
                if check.verdict is Verdict.FAIL:
                    failed_runs.append(f"run {run_id!r}: {check.name} {check.statistic}")
        if failed_runs:
            failures.append(f"on its own, {failed_runs[0]}"
                            + (f" ({len(failed_runs) - 1} more)" if len(failed_runs) > 1
                               else ""))
        # Power against a coin shared by the rows, on this trace's own pairs.
        shift = sum(m for _, _, m, _ in pairs)
        caught_z = 0.0
        if variance > 0:
            sd = math.sqrt(variance)
            caught_z = float(stats.norm.sf(z_critical - shift / sd) +
                             stats.norm.cdf(-z_critical - shift / sd))
        recorded = any(e.recorded for entries in steps.values() for e in entries)
        caught = max(caught_z, 1.0 if recorded and shared >= critical else 0.0)
        note = (f"uniforms: {shared} shared cells against {critical} needed; " if recorded
                else "") + "coins: normal approximation"
        return CheckResult(
            name, Verdict.FAIL if failures else Verdict.PASS,
            f"shared uniforms D = {coincidences} (mu = {mean_bound:.3g}); shared coins z = "
            f"{z:.3f} over {len(pairs)} pairs; {len(failed_runs)} of {2 * len(runs)} "
            f"per-request checks failed; {len(steps)} steps",
            threshold, "; ".join(failures), [Power(SHARED_BATCH_COIN.id, caught, note)],
        )
