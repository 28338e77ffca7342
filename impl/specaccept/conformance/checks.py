"""`check_trace`: the conformance checks on one trace, and the power model they share.

Each check has its own module (replay, fresh, support, acceptance, law, rewind, and
draftlaw, history, batch) with its
statistic, threshold, verdict and power; ``spec/trace_format.md`` defines the trace and
``docs/conformance.md`` says why each check is built as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specaccept.conformance.acceptance import check_acceptance
from specaccept.conformance.batch import check_batch
from specaccept.conformance.bugs import BUG_CLASSES, BonusLaws, PositionOutcomes
from specaccept.conformance.draftlaw import check_draft_law
from specaccept.conformance.fresh import check_fresh
from specaccept.conformance.history import check_history
from specaccept.conformance.law import check_law
from specaccept.conformance.positions import Position, claimed_rule, decided_positions
from specaccept.conformance.replay import check_replay, replay_power
from specaccept.conformance.report import CheckResult, ConformanceReport
from specaccept.conformance.rewind import check_rewind
from specaccept.conformance.support import check_support, support_power
from specaccept.conformance.trace import Trace
from specaccept.conformance.tree_checks import check_tree_rounds
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["DEFAULT_ALPHA", "check_trace"]

DEFAULT_ALPHA = 1e-4
"""The false-alarm probability of each statistical check."""


def _bug_models(trace: Trace, positions: Sequence[Position]) -> tuple[PositionOutcomes, BonusLaws]:
    """Per bug, per position: the tested position's Outcome (or why n/a), and a bonus law."""
    outcomes: PositionOutcomes = {}
    bonus: BonusLaws = {}
    for bug in BUG_CLASSES:
        if not bug.models_positions:
            continue
        outcomes[bug], bonus[bug] = [], []
        for pos in positions:
            rule = claimed_rule(pos.round)
            if rule is AcceptanceRule.BLOCK:
                outcomes[bug].append("not modelled for block verification")
                bonus[bug].append(None)
                continue
            if pos.tested and pos.q is not None and rule is not None:
                outcomes[bug].append(bug.outcome(
                    rule, pos.p, pos.q, draft_sampler=pos.round.run.draft_sampler,
                    p_blind=pos.p_blind,
                ))
                bonus[bug].append(None)
                continue
            outcomes[bug].append(None)
            bonus[bug].append(bug.bonus_law(pos.p, pos.p_blind))
    return outcomes, bonus


def check_trace(
    trace: Trace, *, alpha: float = DEFAULT_ALPHA,
    progress: Callable[[str], None] | None = None,
) -> ConformanceReport:
    """Run the chain checks on a parsed trace's chain rounds, and the six tree checks on its
    tree rounds (a trace of tree rounds alone gets the tree checks alone).

    Args:
        trace: from `read_trace`.
        alpha: the false-alarm probability of each statistical check.
        progress: called with each check's name as it starts.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    positions = decided_positions(trace)
    outcomes, bonus = _bug_models(trace, positions)
    checks: list[CheckResult] = []
    runs: tuple[tuple[str, Callable[[], CheckResult]], ...] = (
        ("replay", lambda: check_replay(trace, replay_power(positions, outcomes, bonus))),
        ("fresh", lambda: check_fresh(trace, alpha)),
        ("support", lambda: check_support(positions, support_power(positions, outcomes, bonus))),
        ("acceptance", lambda: check_acceptance(positions, alpha, outcomes)),
        ("law", lambda: check_law(positions, alpha, outcomes, bonus)),
        ("rewind", lambda: check_rewind(trace)),
        ("draft-law", lambda: check_draft_law(trace, alpha)),
        ("history", lambda: check_history(positions, alpha, outcomes, bonus)),
        ("batch", lambda: check_batch(trace, positions, alpha)),
    )
    if trace.rounds or not trace.tree_rounds:
        for label, run in runs:
            if progress is not None:
                progress(label)
            checks.append(run())
    # Tree rounds: their own six checks (tree_checks.py), after the chain's.
    if trace.tree_rounds and progress is not None:
        progress("tree checks")
    checks += check_tree_rounds(trace, alpha)
    tree_tested = sum(1 for r in trace.tree_rounds for row in r.path_rows if r.children[row])
    return ConformanceReport(
        rounds=trace.round_count,
        positions_tested=sum(1 for pos in positions if pos.tested) + tree_tested,
        tokens=len(positions) + sum(len(r.emitted) for r in trace.tree_rounds), alpha=alpha,
        checks=checks, truncated=trace.truncated,
    )
