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

import numpy as np
from scipy import stats

from specaccept.conformance.bugs import BUG_CLASSES
from specaccept.conformance.law import pit_bounds, pit_chi_square, pit_power
from specaccept.conformance.positions import claimed_rule
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Trace
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["DRAFT_LAW_SEED", "check_draft_law"]

DRAFT_LAW_SEED = 1
"""The seed of the randomised PIT of the drafts, so a verdict is reproducible."""
_MIN_DRAFTS = 10


def _drafted(trace: Trace) -> list[tuple[np.ndarray, int]]:
    """(recorded q row as float64, draft token) for every draft whose row the trace holds."""
    out = []
    for round_ in trace.rounds:
        if round_.draft_rows is None:
            continue
        for i in range(min(round_.draft_rows.shape[0], round_.k)):
            out.append((round_.draft_rows[i].astype(np.float64), round_.draft_tokens[i]))
    return out


def _powers(trace: Trace, bins: int, critical: float) -> list[Power]:
    """Per bug: the chance the chi-square exceeds `critical` on the trace's drafted rows had
    the engine drawn its drafts from `Outcome.drafted` while recording `claimed_q`.

    The drafter's part of an outcome reads q and the drafter's sampler alone; a drafted row
    the target recorded no row for is given q in p's place.
    """
    rows = []
    for round_ in trace.rounds:
        rule = claimed_rule(round_)
        if round_.draft_rows is None or rule is None or rule is AcceptanceRule.BLOCK:
            continue
        for i in range(min(round_.draft_rows.shape[0], round_.k)):
            q = round_.draft_rows[i].astype(np.float64)
            p = (round_.target_rows[i].astype(np.float64)
                 if i < round_.target_rows.shape[0] else q)
            rows.append((rule, p, q, round_.run.draft_sampler))
    powers = []
    for bug in BUG_CLASSES:
        if not bug.models_positions:
            continue
        pairs, notes = [], set()
        for rule, p, q, sampler in rows:
            outcome = bug.outcome(rule, p, q, draft_sampler=sampler)
            if isinstance(outcome, str):
                notes.add(outcome)
                continue
            pairs.append((outcome.claimed_q,
                          outcome.drafted if outcome.drafted is not None else outcome.claimed_q))
        if not pairs or all(np.array_equal(recorded, drawn) for recorded, drawn in pairs):
            powers.append(Power(bug.id, None, "; ".join(sorted(notes))
                                or "the drafts come from the q the engine records"))
            continue
        bounds = [pit_bounds(recorded, recorded) for recorded, _ in pairs]
        probability = pit_power(bounds, [drawn for _, drawn in pairs], bins, critical)
        powers.append(Power(bug.id, probability, "non-central chi-square approximation"))
    return powers


def check_draft_law(trace: Trace, alpha_level: float) -> CheckResult:
    """The drafts against their recorded q rows: randomised PIT (tokens by q descending),
    chi-square on equal bins, at `alpha_level`."""
    name = "draft-law"
    drafted = _drafted(trace)
    n = len(drafted)
    if n < _MIN_DRAFTS:
        why = ("the trace records no drafter law (no 'draft' rows)" if n == 0 else
               f"needs at least {_MIN_DRAFTS} drafts with a recorded q, the trace has {n}")
        return CheckResult(name, Verdict.NOT_RUN, "n/a", f"p-value >= {alpha_level:g}", why)
    bins = max(2, min(20, n // 5))
    jitter = np.random.default_rng(DRAFT_LAW_SEED).random(n)
    u = np.empty(n)
    for j, (q, token) in enumerate(drafted):
        # Ordered by q descending: a drafter sharper than its record piles up near 0.
        lo, width = pit_bounds(q, q)
        u[j] = lo[token] + jitter[j] * width[token]
    chi2, p_value = pit_chi_square(u, bins)
    critical = float(stats.chi2.isf(alpha_level, bins - 1))
    failed = p_value < alpha_level
    zero = sum(1 for q, token in drafted if q[token] <= 0)
    detail = ""
    if zero:
        failed = True
        detail = f"{zero} drafts have q = 0 in their own recorded row: "
    if failed:
        low = float(np.mean(u < 1 / bins))
        detail += (f"the drafts are not distributed as the recorded q (share of PIT values in "
                   f"the lowest bin {low:.3f}, expected {1 / bins:.3f}; above it the drafter "
                   "is sharper than its record, as when a temperature is applied twice)")
    return CheckResult(
        name, Verdict.FAIL if failed else Verdict.PASS,
        f"chi2 = {chi2:.2f}, {bins - 1} d.o.f. over {n} drafts; p-value = {p_value:.3g}",
        f"p-value >= {alpha_level:g}, no draft with q = 0", detail,
        _powers(trace, bins, critical),
    )
