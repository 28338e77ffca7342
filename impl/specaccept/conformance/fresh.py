"""The fresh-randomness check: no uniform a round read is read again by a later round."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from specaccept.conformance.bugs import POSITION_KEYED_UNIFORMS
from specaccept.conformance.exact import ExactSum, LogSurvival, State
from specaccept.conformance.positions import claimed_rule, read_cells
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Round
from specaccept.core.acceptance import AcceptanceRule

__all__ = [
    "MAX_MEAN_BOUND", "UNIFORM_SPACING", "FreshState", "coincidence_threshold",
    "read_uniforms", "uniform_spacing",
]

UNIFORM_SPACING = 2.0**-24
"""The spec's uniforms are multiples of 2**-24: two fresh ones coincide with that probability."""


def read_uniforms(round_: Round) -> list[float]:
    """The recorded uniforms the claimed rule reads (`read_cells`), unrecorded ones left out."""
    u = round_.uniforms
    if u is None:
        return []
    return [float(u[i, j]) for i, j in read_cells(round_) if not math.isnan(u[i, j])]


def uniform_spacing(values: Sequence[float]) -> float:
    """The spacing of the coarsest grid every recorded uniform lies on, at least 2**-24.

    Values that all lie on a coarser grid (fewer binary digits, or decimals written
    short) coincide more often, and the bound uses that grid instead. The reader holds
    uniforms as float32, so a decimal is counted in float32's shortest form.
    """
    from fractions import Fraction

    if not values:
        return UNIFORM_SPACING
    binary = max(Fraction(v).denominator.bit_length() - 1 for v in values)
    decimals = max(len(np.format_float_positional(np.float32(v), unique=True, trim="-")
                       .partition(".")[2]) for v in values)
    # Every value lies on both grids; the coarser one is the resolution they show.
    return max(UNIFORM_SPACING, 2.0**-binary, 10.0**-decimals)


MAX_MEAN_BOUND = 1e300
"""The largest mean bound `coincidence_threshold` takes: its answer, some e**2 times the
bound, must stay a finite float (no trace comes near: the bound grows as the square of the
uniforms it reads)."""


def coincidence_threshold(mean_bound: float, alpha: float) -> int:
    """The least c >= 1 with mean_bound**c / c! <= alpha: P(D >= c) <= alpha.

    A block trace of 1,000 rounds of k = 4 reads 5,000 uniforms, 40 rounds 200:

    >>> [coincidence_threshold(n * (n - 1) / 2 * UNIFORM_SPACING, 1e-4) for n in (5000, 200)]
    [7, 2]

    Computed in log space, c log(mu) - log(c!), so that a bound past 709 (uniforms on a
    coarse grid: quarters, two decimals) does not overflow float64: the bound rises while
    c < mu and falls after, so the least c past its peak is found by bisection, in
    O(log mu) steps whatever mu is.
    """
    if not (math.isfinite(mean_bound) and 0 <= mean_bound <= MAX_MEAN_BOUND):
        raise ValueError(f"mean_bound must be a number in [0, {MAX_MEAN_BOUND:g}], got "
                         f"{mean_bound!r}")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    if mean_bound <= alpha:
        return 1
    # Within a relative 1e-12 in log space: an exact tie (mu = 1, alpha = 1/2: 1/2! = alpha)
    # is a tie, whichever way lgamma rounds.
    log_mu, log_alpha = math.log(mean_bound), math.log(alpha)
    slack = 1e-12 * max(1.0, abs(log_alpha))

    def within(c: int) -> bool:
        return c * log_mu - math.lgamma(c + 1) <= log_alpha + slack

    # Below mu the bound rises from its value at c = 1, which is above alpha; past
    # c = e**2 mu it is below (e mu / c)**c <= e**-c, so the answer lies in between.
    low = max(1, math.floor(mean_bound))
    high = max(low + 1, math.ceil(math.e**2 * mean_bound - log_alpha) + 1)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if within(middle) else (middle, high)
    return high


RoundEnd = tuple[bool, int, int, tuple[float, ...] | None]
"""A run's last round in a piece: (block, k, kept, the law of its kept length or None)."""


def _keyed_rereads(this: tuple[bool, int, int], after: tuple[bool, int]) -> int:
    """How many read tests a position-keyed block engine would re-read in the round after
    `this`, given (block, k, kept) of this round and (block, k) of the next round of its run.

    A round at n keeping tau of k drafts read tests keyed n .. n + k - 1; the next round
    starts at n + tau + 1 and, keyed by position, reads keys n + tau + 1 .. n + k - 1 again
    as its first k - tau - 1 tests, every one of which block verification reads.
    """
    if not (this[0] and after[0]):
        return 0
    return max(0, min(this[1] - this[2] - 1, after[1]))


def _keyed_terms(this: RoundEnd, after: tuple[bool, int]) -> tuple[float, float, int]:
    """The re-reads `_keyed_rereads` counts with the kept length drawn from its law given
    the round's drafts, as (P(some re-read), mean, the most there can be); a round without
    that law counts none, which only lowers the power."""
    block, k, _, law = this
    if not (block and after[0]) or law is None:
        return 0.0, 0.0, 0
    counts = [_keyed_rereads((True, k, kept), after) for kept in range(len(law))]
    some = math.fsum(chance for chance, count in zip(law, counts, strict=True) if count)
    mean = math.fsum(chance * count for chance, count in zip(law, counts, strict=True))
    return some, mean, max(counts)


def _decimals(value: float) -> int:
    return len(np.format_float_positional(np.float32(value), unique=True, trim="-")
               .partition(".")[2])


@dataclass
class FreshState(State):
    """The fresh check's state over the rounds of a piece, in file order.

    `values` maps each value read to (the piece's ordinal of the first round that read it,
    the reads up to the end of that round, that round's reads of it): enough to count, when
    an earlier piece is merged in front, the reads that become re-reads and the bound's
    growth, exactly.
    """

    rounds: int = 0
    reads: int = 0
    rereads: int = 0
    earlier_count: int = 0
    """Per read, the count of distinct values earlier rounds read, summed (mu is this
    times the spacing)."""
    values: dict[float, tuple[int, int, int]] = field(default_factory=dict)
    table: list[tuple[int, int, str]] = field(default_factory=list)
    """The (round index, line, run id) of each round by ordinal, for the diagnosis."""
    first: tuple[int, float, int] | None = None
    """The ordinal of the first re-reading round, the value, and the ordinal of the round
    that read it first."""
    max_binary: int = 0
    max_decimals: int = 0
    block: bool = False
    keyed: int = 0
    """Re-reads a position-keyed block engine would make, within the piece, at the kept
    lengths this trace shows."""
    keyed_none: LogSurvival = field(default_factory=LogSurvival)
    """Per pair of successive rounds of a run, the chance of no such re-read, with the kept
    length drawn from its law (`_keyed_terms`): their product."""
    keyed_mean: ExactSum = field(default_factory=ExactSum)
    keyed_range: int = 0
    """The sum over those pairs of the square of the most re-reads there can be."""
    run_ends: dict[str, tuple[tuple[bool, int], RoundEnd]] = field(default_factory=dict)
    """The (block, k) of each run's first round in the piece and `RoundEnd` of its last."""

    def update(self, round_: Round, kept_law: np.ndarray | None = None) -> None:
        """A chain round; `kept_law` the law of a block round's kept length given its drafts
        (`accepted_length_law`), for the power model."""
        block = claimed_rule(round_) is AcceptanceRule.BLOCK
        self.block = self.block or block
        if round_.uniforms is None:
            return
        ends = self.run_ends.get(round_.run.id)
        if ends is not None:
            self._pair(ends[1], (block, round_.k))
        first = ends[0] if ends is not None else (block, round_.k)
        law = tuple(kept_law.tolist()) if kept_law is not None else None
        self.run_ends[round_.run.id] = (first, (block, round_.k, round_.num_accepted, law))
        self.read(read_uniforms(round_), round_.index, round_.line, round_.run.id)

    def _pair(self, this: RoundEnd, after: tuple[bool, int]) -> None:
        """Two successive rounds of a run: what a position-keyed engine would re-read."""
        self.keyed += _keyed_rereads(this[:3], after)
        some, mean, most = _keyed_terms(this, after)
        self.keyed_none.add(some)
        self.keyed_mean.add(mean)
        self.keyed_range += most * most

    def read(self, values: Sequence[float], index: int, line: int, run_id: str) -> None:
        """One round's read uniforms (of a chain or a tree round: freshness holds across the
        whole file)."""
        ordinal = len(self.table)
        self.table.append((index, line, run_id))
        self.rounds += 1
        seen: set[float] = set()
        for i, value in enumerate(values):
            # Earlier values, and the round's own earlier reads: one coin shared by a
            # round's tests is a re-read too.
            self.earlier_count += len(self.values) + i
            if value in self.values and self.values[value][0] < ordinal:
                self.rereads += 1
                if self.first is None:
                    self.first = (ordinal, value, self.values[value][0])
            elif value in seen:
                self.rereads += 1
                if self.first is None:
                    self.first = (ordinal, value, ordinal)
            seen.add(value)
        end = self.reads + len(values)
        for value in values:
            if value not in self.values:
                self.values[value] = (ordinal, end, values.count(value))
            if value:
                self.max_binary = max(self.max_binary,
                                      Fraction(value).denominator.bit_length() - 1)
                self.max_decimals = max(self.max_decimals, _decimals(value))
        self.reads = end

    def merge(self, other: FreshState) -> None:
        """Append a later piece's state."""
        shared = [value for value in other.values if value in self.values]
        # The piece counted all but the first read of a shared value in the round that first
        # read it (the others re-read it within that round); one pass counts that one too.
        self.rereads += other.rereads + len(shared)
        self.earlier_count += (other.earlier_count + other.reads * len(self.values)
                               - sum(other.reads - other.values[v][1] for v in shared))
        offset, reads = len(self.table), self.reads
        if self.first is None:
            candidates = [(other.values[v][0] + offset, v, self.values[v][0]) for v in shared]
            if other.first is not None:
                ordinal, value, earlier = other.first
                earlier = self.values[value][0] if value in self.values else earlier + offset
                candidates.append((ordinal + offset, value, earlier))
            self.first = min(candidates, key=lambda c: c[0], default=None)
        for value, (ordinal, end, count) in other.values.items():
            if value not in self.values:
                self.values[value] = (ordinal + offset, end + reads, count)
        self.table += other.table
        self.rounds += other.rounds
        self.reads += other.reads
        self.max_binary = max(self.max_binary, other.max_binary)
        self.max_decimals = max(self.max_decimals, other.max_decimals)
        self.block = self.block or other.block
        self.keyed += other.keyed
        self.keyed_none.merge(other.keyed_none)
        self.keyed_mean.merge(other.keyed_mean)
        self.keyed_range += other.keyed_range
        for run_id, (first, last) in other.run_ends.items():
            mine = self.run_ends.get(run_id)
            if mine is None:
                self.run_ends[run_id] = (first, last)
                continue
            self._pair(mine[1], first)
            self.run_ends[run_id] = (mine[0], last)

    def spacing(self) -> float:
        """`uniform_spacing` of every value read."""
        if not self.values:
            return UNIFORM_SPACING
        return max(UNIFORM_SPACING, 2.0**-self.max_binary, 10.0**-self.max_decimals)

    def result(self, alpha_level: float) -> CheckResult:
        """No uniform a round read re-appears among the uniforms a later round read.

        D counts the read uniforms equal to one read by an earlier round. Fresh uniforms
        on a grid of spacing s: given everything before it, a read uniform hits one of the m
        values earlier rounds read with probability at most m s, so with mu the sum of those
        bounds, P(D >= c) <= E[C(D, c)] <= mu^c / c!; the check fails at the least c making
        that bound <= alpha.
        """
        name = "fresh"
        if not self.rounds:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", "no re-read uniforms",
                               "the trace records no uniforms")
        spacing = self.spacing()
        mean_bound = self.earlier_count * spacing
        critical = coincidence_threshold(mean_bound, alpha_level)
        first = ""
        if self.first is not None and self.rereads >= critical:
            ordinal, value, earlier = self.first
            index, line, _ = self.table[ordinal]
            e_index, e_line, _ = self.table[earlier]
            first = (f"round {index} (line {line}) reads u = {value!r}, which round {e_index} "
                     f"(line {e_line}) already read: a later round must read fresh uniforms "
                     "(keyed by round, not by position)") if earlier != ordinal else (
                f"round {index} (line {line}) reads u = {value!r} twice: each test and draw "
                "of a round reads a uniform of its own")
        power = (self._keyed_power(critical) if self.block else Power(
            POSITION_KEYED_UNIFORMS.id, None,
            "position keys are harmless to the token-by-token rules"))
        return CheckResult(
            name, Verdict.FAIL if self.rereads >= critical else Verdict.PASS,
            f"re-read uniforms D = {self.rereads} of {self.reads} read "
            f"(mu = {mean_bound:.3g} at spacing 2^{math.log2(spacing):.0f})",
            f"D < {critical} (P(D >= {critical}) <= mu^{critical}/{critical}! <= "
            f"{alpha_level:g})",
            first, [power],
        )

    def _keyed_power(self, critical: int) -> Power:
        """The chance that a position-keyed block engine re-reads at least `critical` tests,
        each run's kept lengths drawn from their laws on this trace's rows, independently.

        Only successive rounds of one run can re-read (a run's first round has no round
        before it), so a short trace of many runs holds few chances. At `critical` = 1 the
        chance is exact: 1 minus the product of the chances of no re-read. Above it,
        Hoeffding's bound on a sum of independent counts in [0, m_i] gives a lower bound:
        P(S >= c) >= 1 - exp(-2 (E S - c + 1)^2 / sum m_i^2) when E S > c - 1, else 0.
        """
        mean = self.keyed_mean.value
        if critical <= 1:
            probability = 1.0 - self.keyed_none.scaled(1.0)
            how = "exact given the kept lengths' laws"
        else:
            gap = mean - (critical - 1)
            probability = (-math.expm1(-2 * gap * gap / self.keyed_range)
                           if gap > 0 and self.keyed_range else 0.0)
            how = "Hoeffding lower bound"
        return Power(POSITION_KEYED_UNIFORMS.id, probability,
                     f"{how}: {mean:.3g} re-read tests expected over successive rounds of a "
                     f"run, {critical} needed ({self.keyed} at this trace's kept lengths)")
