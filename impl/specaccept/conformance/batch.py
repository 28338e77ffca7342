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
from collections.abc import Sequence

from scipy import stats

from specaccept.conformance.acceptance import check_acceptance
from specaccept.conformance.bugs import SHARED_BATCH_COIN
from specaccept.conformance.fresh import coincidence_threshold, read_uniforms, uniform_spacing
from specaccept.conformance.law import check_law
from specaccept.conformance.positions import Position, claimed_rule, read_cells
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Round, Trace
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["check_batch"]


def _steps(trace: Trace) -> dict[int, list[Round]]:
    """The batched rounds by step, each step's rounds in slot order."""
    steps: dict[int, list[Round]] = defaultdict(list)
    for round_ in trace.rounds:
        if round_.batch is not None:
            steps[round_.batch[0]].append(round_)
    return {step: sorted(rounds, key=lambda r: r.batch[1] if r.batch else 0)
            for step, rounds in sorted(steps.items())}


def _shared_uniforms(
    steps: dict[int, list[Round]], alpha_level: float
) -> tuple[int, int, float, str, int]:
    """(coincidences D, threshold c, mu, first diagnosis, coincidences a shared coin gives)."""
    read = {id(r): read_uniforms(r) for rounds in steps.values() for r in rounds}
    spacing = uniform_spacing([v for values in read.values() for v in values])
    coincidences, mean_bound, first, shared = 0, 0.0, "", 0
    for step, rounds in steps.items():
        seen: dict[float, Round] = {}
        cells_seen: set[tuple[int, int]] = set()
        for round_ in rounds:
            values = read[id(round_)]
            for value in values:
                mean_bound += len(seen) * spacing
                other = seen.get(value)
                if other is not None and other is not round_:
                    coincidences += 1
                    first = first or (
                        f"step {step}: round {round_.index} of run {round_.run.id!r} (line "
                        f"{round_.line}) reads u = {value!r}, which round {other.index} of run "
                        f"{other.run.id!r} (line {other.line}) read in the same step: the rows "
                        "of a batch share their uniforms")
            for value in values:
                seen.setdefault(value, round_)
            if round_.uniforms is not None:
                cells = set(read_cells(round_))
                shared += len(cells & cells_seen)
                cells_seen |= cells
    return (coincidences, coincidence_threshold(mean_bound, alpha_level), mean_bound, first,
            shared)


def _interval(position: Position, rule: AcceptanceRule) -> tuple[float, float] | None:
    """The accept event as u in [lo, hi) for the uniform that decides it, given the draft."""
    t = position.draft
    assert t is not None
    p = position.p
    if rule is AcceptanceRule.STOCHASTIC and position.q is not None:
        q = float(position.q[t])
        rho = 0.0 if p[t] <= 0 else (1.0 if q <= 0 else min(1.0, float(p[t]) / q))
        return 0.0, rho
    if rule in (AcceptanceRule.SAMPLER_MATCH,
                AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION):
        below = float(p[:t].sum())
        return below, below + float(p[t])
    return None


def _pairs(
    steps: dict[int, list[Round]], positions: Sequence[Position]
) -> list[tuple[float, float, float, float]]:
    """Per pair of requests tested at one offset of one step: (A_a - rho_a)(A_b - rho_b),
    its variance under independence, and its mean under a shared coin; plus rho_a rho_b."""
    by_round: dict[int, list[Position]] = defaultdict(list)
    for pos in positions:
        if pos.tested:
            by_round[id(pos.round)].append(pos)
    out = []
    for rounds in steps.values():
        offsets: dict[int, list[tuple[Position, float, float]]] = defaultdict(list)
        for round_ in rounds:
            rule = claimed_rule(round_)
            if rule is None or rule.verifies_jointly:
                continue
            for pos in by_round[id(round_)]:
                interval = _interval(pos, rule)
                if interval is not None:
                    offsets[pos.offset].append((pos, *interval))
        for entries in offsets.values():
            for a in range(len(entries)):
                for b in range(a + 1, len(entries)):
                    (pa, lo_a, hi_a), (pb, lo_b, hi_b) = entries[a], entries[b]
                    rho_a, rho_b = hi_a - lo_a, hi_b - lo_b
                    term = (float(pa.accepted) - rho_a) * (float(pb.accepted) - rho_b)
                    variance = rho_a * (1 - rho_a) * rho_b * (1 - rho_b)
                    overlap = max(0.0, min(hi_a, hi_b) - max(lo_a, lo_b))
                    out.append((term, variance, overlap - rho_a * rho_b, rho_a * rho_b))
    return out


def check_batch(
    trace: Trace, positions: Sequence[Position], alpha_level: float
) -> CheckResult:
    """The batched rounds: no uniform shared within a step, no coin shared within a step,
    and each request's acceptance and law checks passing on their own."""
    name = "batch"
    part = alpha_level / 3
    z_critical = float(stats.norm.isf(part / 2))
    steps = _steps(trace)
    threshold = (f"D < c (shared uniforms), |z| <= {z_critical:.3f} (shared coins), each "
                 f"request's acceptance and law at {part:g} / requests; alpha / 3 each")
    if not steps:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                           "no round records its batch step ('batch', version 2)")
    failures: list[str] = []
    coincidences, critical, mean_bound, first, shared = _shared_uniforms(steps, part)
    if coincidences >= critical:
        failures.append(first)
    pairs = _pairs(steps, positions)
    variance = sum(v for _, v, _, _ in pairs)
    z = sum(t for t, _, _, _ in pairs) / math.sqrt(variance) if variance > 0 else 0.0
    if abs(z) > z_critical:
        failures.append(f"the accept outcomes of requests verified in one step move together "
                        f"(z = {z:.2f} over {len(pairs)} pairs): the rows of a batch share "
                        "their coins")
    runs: dict[str, list[Position]] = defaultdict(list)
    for pos in positions:
        if pos.round.batch is not None:
            runs[pos.round.run.id].append(pos)
    alone = part / (2 * len(runs))
    failed_runs = []
    for run_id, run_positions in runs.items():
        for check in (check_acceptance(run_positions, alone, {}),
                      check_law(run_positions, alone, {}, {})):
            if check.verdict is Verdict.FAIL:
                failed_runs.append(f"run {run_id!r}: {check.name} {check.statistic}")
    if failed_runs:
        failures.append(f"on its own, {failed_runs[0]}"
                        + (f" ({len(failed_runs) - 1} more)" if len(failed_runs) > 1 else ""))
    # Power against a coin shared by the rows, on this trace's own pairs.
    shift = sum(m for _, _, m, _ in pairs)
    caught_z = 0.0
    if variance > 0:
        sd = math.sqrt(variance)
        caught_z = float(stats.norm.sf(z_critical - shift / sd) +
                         stats.norm.cdf(-z_critical - shift / sd))
    recorded = any(r.uniforms is not None for rounds in steps.values() for r in rounds)
    caught = max(caught_z, 1.0 if recorded and shared >= critical else 0.0)
    note = (f"uniforms: {shared} shared cells against {critical} needed; " if recorded else "") \
        + "coins: normal approximation"
    return CheckResult(
        name, Verdict.FAIL if failures else Verdict.PASS,
        f"shared uniforms D = {coincidences} (mu = {mean_bound:.3g}); shared coins z = {z:.3f} "
        f"over {len(pairs)} pairs; {len(failed_runs)} of {2 * len(runs)} per-request checks "
        f"failed; {len(steps)} steps",
        threshold, "; ".join(failures), [Power(SHARED_BATCH_COIN.id, caught, note)],
    )
