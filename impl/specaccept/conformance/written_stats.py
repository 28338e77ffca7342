"""The stats check: in a compact trace, the statistics the engine wrote agree with its rows.

A compact trace's checks read, for most rounds, the per-decision statistics its writer
computed (``stats``) in place of the rows. The rounds that keep their rows carry both, so
that the statistics can be recomputed from the rows as the checks compute them and
compared: a writer, or an engine handing it laws other than the rows it records, that
writes statistics which disagree fails here. The discrete facts the verdicts turn on
(p(y) > 0, q(d) > 0, a residual with mass; q(d) <= p(d) and p(y) <= q(y) unless the two
values tie within the tolerance) must agree, every value within `STATS_TOLERANCE` plus
`RELATIVE_TOLERANCE` of its size (of the law's mass, 1, for a sum over the law). Zero
tolerance: one disagreeing round fails.

A PIT interval's lower end (the mass ordered before a token) is the one statistic that
jumps: where the rows are logits, the engine's laws and the ones the reader rebuilds may
differ in their last bits, and tokens whose keys (p, q, or q / p) are that close may swap
places. So a written lower end is held to lie between the mass of the tokens whose key
exceeds the token's by more than a relative `KEY_TOLERANCE` and the mass of those within
it or above (the token itself left out), each widened by `STATS_TOLERANCE`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from specaccept.conformance.exact import State
from specaccept.conformance.positions import RoundFacts, qp_key, token_rule
from specaccept.conformance.report import CheckResult, Verdict
from specaccept.conformance.trace import RoundStats

__all__ = ["KEY_TOLERANCE", "RELATIVE_TOLERANCE", "STATS_TOLERANCE", "WrittenStatsState",
           "pit_bands", "stats_disagreement"]

STATS_TOLERANCE = 1e-6
"""The largest difference allowed between a written statistic and the one its rows give
(sums over V in another order, laws rebuilt from logits by another library's exp)."""
RELATIVE_TOLERANCE = 1e-4
"""Laws rebuilt from logits by two libraries differ by far more than an ulp: each divides by
a float32 sum over V, summed in its own order (measured: up to 3.5e-5 of a probability at
V = 128,256 between the synthetic engine's NumPy softmax and the reader's MLX one)."""
KEY_TOLERANCE = 3e-4
"""Tokens whose PIT keys lie within this relative distance may be ordered either way: the
key is p, q, or q / p, each of two laws `RELATIVE_TOLERANCE` apart."""
_POINT_VALUES = ("p_token", "p_draft", "q_token", "q_at_argmax_p", "q_draft")
"""The statistics that are one probability; the others are sums over a law."""

_PIT_KEYS = ("pit_p", "pit_qp", "pit_q")
Band = tuple[np.ndarray, np.ndarray]


def _band(p: np.ndarray, key: np.ndarray, token: int) -> tuple[float, float]:
    pivot = key[token]
    with np.errstate(invalid="ignore", over="ignore"):
        above, below = pivot * (1 + KEY_TOLERANCE), pivot * (1 - KEY_TOLERANCE)
    ahead = float(p[key > above].sum())
    near = key >= below
    near[token] = False
    return ahead, float(p[near].sum())


def pit_bands(facts: RoundFacts) -> dict[str, Band]:
    """Per PIT statistic, the lowest and highest lower end its rows allow (see above)."""
    round_ = facts.round
    bands: dict[str, list[tuple[float, float]]] = {key: [] for key in _PIT_KEYS}
    for pos in facts.positions:
        assert pos.p is not None
        bands["pit_p"].append(_band(pos.p, pos.p, pos.emitted))
        by_q = pos.q is not None and token_rule(round_) is not None
        key = qp_key(pos.p, pos.q) if by_q and pos.q is not None else pos.p
        bands["pit_qp"].append(_band(pos.p, key, pos.emitted))
    draft = facts.rows[1] if facts.rows is not None else None
    if draft is not None:
        for i in range(min(draft.shape[0], round_.k)):
            bands["pit_q"].append(_band(draft[i], draft[i], round_.draft_tokens[i]))
    return {key: (np.array([lo for lo, _ in pairs]), np.array([hi for _, hi in pairs]))
            for key, pairs in bands.items()}


def _near(a: np.ndarray, b: np.ndarray, size: np.ndarray | float | None = None) -> np.ndarray:
    """Within the tolerance of each other; `size` the scale of the relative part (default:
    the larger of the two)."""
    scale = np.maximum(np.abs(a), np.abs(b)) if size is None else size
    near: np.ndarray = np.abs(a - b) <= STATS_TOLERANCE + RELATIVE_TOLERANCE * scale
    return near


def _discrete(stats: RoundStats) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each fact, and where it is decided (not a tie within the tolerance)."""
    def always(fact: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return fact, np.ones(fact.shape, dtype=bool)

    facts = {
        "p_token > 0": always(stats.p_token > 0),
        "q_draft > 0": always(stats.q_draft > 0),
        "residual > 0": always(stats.residual > 0),
    }
    if stats.q_token.size:
        tested = stats.q_token.size
        q_d, p_d = stats.q_draft[:tested], stats.p_draft[:tested]
        p_y = stats.p_token[:tested]
        facts["q_draft <= p_draft"] = (q_d <= p_d, ~_near(q_d, p_d))
        facts["p_token <= q_token"] = (p_y <= stats.q_token, ~_near(p_y, stats.q_token))
    return facts


def stats_disagreement(written: RoundStats, computed: RoundStats,
                       bands: dict[str, Band]) -> str:
    """Where the written statistics disagree with those computed from the rows ("" when
    they agree): the first statistic, its index and both values. `bands`: `pit_bands`."""
    for item in fields(RoundStats):
        mine, theirs = getattr(written, item.name), getattr(computed, item.name)
        if mine.shape != theirs.shape:
            return f"{item.name} holds {mine.size} values, the rows give {theirs.size}"
        if item.name in bands:
            low, high = bands[item.name]
            slack = STATS_TOLERANCE + RELATIVE_TOLERANCE
            outside = (mine < low - slack) | (mine > high + slack)
            if outside.any():
                i = int(np.flatnonzero(outside)[0])
                return (f"{item.name}[{i}] = {float(mine[i])!r}, outside [{float(low[i])!r}, "
                        f"{float(high[i])!r}], what the rows allow")
            continue
        far = ~_near(mine, theirs, None if item.name in _POINT_VALUES else 1.0)
        if far.any():
            i = int(np.flatnonzero(far)[0])
            return (f"{item.name}[{i}] = {float(mine[i])!r}, the rows give "
                    f"{float(theirs[i])!r} (more than {STATS_TOLERANCE:g} apart)")
    theirs_facts = _discrete(computed)
    for fact, (mine_fact, _) in _discrete(written).items():
        theirs_fact, decided = theirs_facts[fact]
        differs = (mine_fact != theirs_fact) & decided
        if differs.any():
            i = int(np.flatnonzero(differs)[0])
            return (f"{fact} at index {i} is {bool(mine_fact[i])} in the written statistics, "
                    f"{bool(theirs_fact[i])} from the rows")
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
        why = stats_disagreement(round_.stats, facts.stats, pit_bands(facts))
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
