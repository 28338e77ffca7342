"""The stats check: in a compact trace, the statistics the engine wrote agree with its rows.

A compact trace's checks read, for most rounds, the per-decision statistics its writer
computed (``stats``) in place of the rows. The rounds that keep their rows carry both, so
that the statistics can be recomputed from the rows as the checks compute them and
compared: a writer, or an engine handing it laws other than the rows it records, that
writes statistics which disagree fails here. The discrete facts the verdicts turn on
(p(y) > 0, q(d) > 0, q(d) <= p(d), q(y) >= p(y), a residual with mass) must agree
exactly, every value within `STATS_TOLERANCE`. Zero tolerance: one disagreeing round fails.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from specaccept.conformance.exact import State
from specaccept.conformance.positions import RoundFacts
from specaccept.conformance.report import CheckResult, Verdict
from specaccept.conformance.trace import RoundStats

__all__ = ["STATS_TOLERANCE", "WrittenStatsState", "stats_disagreement"]

STATS_TOLERANCE = 1e-6
"""The largest difference allowed between a written statistic and the one its rows give
(sums over V in another order, laws rebuilt from logits by another library's exp)."""


def _discrete(stats: RoundStats) -> dict[str, np.ndarray]:
    facts = {
        "p_token > 0": stats.p_token > 0,
        "q_draft > 0": stats.q_draft > 0,
        "residual > 0": stats.residual > 0,
    }
    if stats.q_token.size:
        tested = stats.q_token.size
        facts["q_draft <= p_draft"] = stats.q_draft[:tested] <= stats.p_draft[:tested]
        facts["p_token <= q_token"] = stats.p_token[:tested] <= stats.q_token
    return facts


def stats_disagreement(written: RoundStats, computed: RoundStats) -> str:
    """Where the written statistics disagree with those computed from the rows ("" when
    they agree): the first statistic, its index and both values."""
    for item in fields(RoundStats):
        mine, theirs = getattr(written, item.name), getattr(computed, item.name)
        if mine.shape != theirs.shape:
            return f"{item.name} holds {mine.size} values, the rows give {theirs.size}"
        far = np.abs(mine - theirs) > STATS_TOLERANCE
        if far.any():
            i = int(np.flatnonzero(far)[0])
            return (f"{item.name}[{i}] = {mine[i]!r}, the rows give {theirs[i]!r} (more than "
                    f"{STATS_TOLERANCE:g} apart)")
    theirs_facts = _discrete(computed)
    for fact, mine_fact in _discrete(written).items():
        differs = mine_fact != theirs_facts[fact]
        if differs.any():
            i = int(np.flatnonzero(differs)[0])
            return (f"{fact} at index {i} is {bool(mine_fact[i])} in the written statistics, "
                    f"{bool(theirs_facts[fact][i])} from the rows")
    return ""


@dataclass
class WrittenStatsState(State):
    """The stats check's state: rounds compared, rounds that disagree, the first one."""

    compared: int = 0
    disagreeing: int = 0
    first: str = ""

    def update(self, facts: RoundFacts) -> None:
        round_ = facts.round
        if round_.stats is None or not round_.has_rows:
            return
        self.compared += 1
        why = stats_disagreement(round_.stats, facts.stats)
        if why:
            self.disagreeing += 1
            self.first = self.first or (f"round {round_.index} of run {round_.run.id!r} (line "
                                        f"{round_.line}): {why}")

    def merge(self, other: WrittenStatsState) -> None:
        self.compared += other.compared
        self.disagreeing += other.disagreeing
        self.first = self.first or other.first

    def result(self) -> CheckResult:
        """Every round with rows: its written statistics agree with its rows."""
        name, threshold = "stats", "0 rounds whose statistics disagree with their rows"
        if not self.compared:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "no round of the compact trace keeps its rows")
        return CheckResult(
            name, Verdict.FAIL if self.disagreeing else Verdict.PASS,
            f"disagreeing rounds = {self.disagreeing} of {self.compared} with rows",
            threshold,
            (f"the statistics the engine wrote are not those of its rows: {self.first}"
             if self.disagreeing else ""),
        )
