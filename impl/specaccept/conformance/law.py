"""The law check: the emitted tokens against the target's p, by a randomised PIT and chi-square.

The randomised probability integral transform maps a token drawn from p to a value uniform
on [0, 1): tokens are ordered by a key fixed before the draw, token x covers [lo_x, lo_x +
p(x)), and the value is lo + jitter * p(x). The check keeps, per possible number of bins
(2 to 20: the bins follow the trace's length, known only at the end), the counts of those
values in each bin, so that its state is a few hundred integers per sampler setting
whatever the trace's length and two pieces' states merge by addition. The jitter of a
position is fixed by the position's identity (`unit_hash`), so a piece checked anywhere
draws the same one.

The counts are kept per sampler setting (`sampler_stratum`), since a bug can push the PIT one
way at one setting and the other way at another (a temperature applied twice sharpens the
law below temperature 1 and flattens it above): pooled, the two cancel. The verdict reads
the pooled chi-square and the sum of the settings' chi-squares (`stratum_groups`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, Self, TypeVar

import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, Outcome
from specaccept.conformance.exact import State, merge_notes, merge_per_key
from specaccept.conformance.positions import Position, RoundFacts, qp_key, token_rule
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import unit_hash
from specaccept.core.sampler_config import SamplerConfig

__all__ = [
    "BIN_CHOICES",
    "LAW_SEED",
    "STRATUM_MIN",
    "TEMPERATURE_BANDS",
    "BinLaws",
    "LawCell",
    "LawState",
    "LawTests",
    "PitCounts",
    "StratifiedChiSquare",
    "group_label",
    "law_bins",
    "law_tests",
    "merge_strata",
    "pit_bounds",
    "pit_chi_square",
    "pit_value",
    "pooled_counts",
    "pooled_laws",
    "sampler_stratum",
    "stratified_chi_square",
    "stratum_cell",
    "stratum_groups",
]

LAW_SEED = 0
"""The seed of the randomised PIT's jitter, so a verdict is reproducible."""
_MIN_LAW_TOKENS = 10
BIN_CHOICES = tuple(range(2, 21))
"""The bin counts a chi-square may use: `law_bins` picks one from the count of values."""
_EDGES = sorted({Fraction(j, b) for b in BIN_CHOICES for j in range(1, b)})
EDGES = np.array([float(edge) for edge in _EDGES])
"""Every inner bin edge of every bin count, ascending (the Farey sequence of order 20)."""
_EDGE_INDEX = {b: np.array([_EDGES.index(Fraction(j, b)) for j in range(1, b)])
               for b in BIN_CHOICES}


def law_bins(n: int) -> int:
    """The chi-square's bins for n values: about five values a bin, 2 to 20 bins."""
    return max(2, min(20, n // 5))


def pit_bounds(p: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per token, the interval [lo, lo + p) the randomised PIT maps it into.

    Tokens are ordered by `key` descending, ties by id: an order fixed before the
    token is drawn, which is all the PIT needs.
    """
    order = np.argsort(-key, kind="stable")
    lo = np.empty_like(p)
    lo[order] = np.cumsum(p[order]) - p[order]
    return lo, p


def pit_value(p: np.ndarray, key: np.ndarray, token: int, jitter: float) -> float:
    """The randomised PIT of `token`: the mass of the tokens ordered before it (key
    descending, ties by id) plus `jitter` times its own, in one pass over V (no sort)."""
    pivot = key[token]
    # Ties with the token's key come before it only at lower ids: count them apart.
    ahead = float(p[key > pivot].sum()) + float(p[:token][key[:token] == pivot].sum())
    return ahead + jitter * float(p[token])


def pit_chi_square(u: np.ndarray, bins: int) -> tuple[float, float]:
    """Pearson's chi-square of PIT values against the uniform law on `bins` equal bins:
    (statistic, p-value on bins - 1 degrees of freedom)."""
    counts = np.bincount(np.minimum((u * bins).astype(int), bins - 1), minlength=bins)
    return _chi_square(counts)


def _chi_square(counts: np.ndarray) -> tuple[float, float]:
    from scipy import stats

    bins = counts.size
    expected = counts.sum() / bins
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    return chi2, float(stats.chi2.sf(chi2, bins - 1))


@dataclass
class PitCounts(State):
    """PIT values counted into the bins of every bin count in `BIN_CHOICES`."""

    n: int = 0
    counts: dict[int, list[int]] = field(default_factory=dict)

    def add(self, u: float) -> None:
        self.n += 1
        for bins in BIN_CHOICES:
            row = self.counts.setdefault(bins, [0] * bins)
            row[min(int(u * bins), bins - 1)] += 1

    def merge(self, other: PitCounts) -> None:
        self.n += other.n
        for bins, row in other.counts.items():
            mine = self.counts.setdefault(bins, [0] * bins)
            for i, count in enumerate(row):
                mine[i] += count

    def chi_square(self, bins: int) -> tuple[float, float]:
        """(statistic, p-value) on `bins` equal bins."""
        return _chi_square(np.array(self.counts[bins], dtype=np.float64))


_CDF_UNIT = 2.0**32
"""The power model's sums of CDF values are integers in units of 2**-32: exact under any
merge, at a resolution far below what a printed power shows."""


@dataclass
class BinLaws(State):
    """The power model's sum, over modelled positions, of the PIT's CDF at `EDGES` when
    each position's token is drawn from a bug's law (in units of 2**-32, so that pieces
    merge exactly); `moved` once a law differs from p."""

    positions: int = 0
    cdf: np.ndarray = field(default_factory=lambda: np.zeros(len(_EDGES) + 1, np.int64))
    moved: bool = False

    def add(self, cdf: np.ndarray, moved: bool) -> None:
        self.positions += 1
        self.cdf += np.rint(np.clip(cdf, 0.0, 1.0) * _CDF_UNIT).astype(np.int64)
        self.moved = self.moved or moved

    def merge(self, other: BinLaws) -> None:
        self.positions += other.positions
        self.cdf = self.cdf + other.cdf
        self.moved = self.moved or other.moved

    def noncentrality(self, n: int, bins: int) -> float:
        """The non-centrality of the chi-square on `bins` bins over n values, the mean bin
        law estimated from the modelled positions; 0 when none was modelled."""
        if self.positions == 0:
            return 0.0
        mean_cdf = self.cdf.astype(np.float64) / _CDF_UNIT / self.positions
        edges = np.concatenate([[0.0], mean_cdf[_EDGE_INDEX[bins]], [mean_cdf[-1]]])
        mean_bins = np.diff(edges)
        return n * float(np.sum((mean_bins - 1 / bins) ** 2 * bins))

    def power(self, n: int, bins: int, critical: float) -> float:
        """The chance that the chi-square on `bins` bins over n values exceeds `critical`
        (non-central chi-square approximation), the mean bin law estimated from the
        modelled positions."""
        from scipy import stats

        if self.positions == 0:
            return 0.0
        return float(stats.ncx2.sf(critical, bins - 1, self.noncentrality(n, bins)))


def pooled_laws(laws: Iterable[BinLaws]) -> BinLaws:
    """The power model's sums of several strata as one (new state; the parts are kept)."""
    out = BinLaws()
    for part in laws:
        out.merge(part)
    return out


# --- strata: the counts per sampler setting ------------------------------------------------

TEMPERATURE_BANDS = 16
"""Temperatures from 2**-4 to 2**4 fall in bands a quarter octave wide (`sampler_stratum`),
those outside in one band below and one above: with greedy and an unrecorded sampler, at most
2 * TEMPERATURE_BANDS + 5 strata, however many temperatures an engine uses."""
STRATUM_MIN = 50
"""A stratum of fewer values (10 bins of 5) joins the remainder in `stratum_groups`."""


def _quarter_octave(temperature: float) -> int:
    """j with 2**((2j - 1) / 8) <= temperature < 2**((2j + 1) / 8): the temperature to the
    nearest quarter octave, decided in exact arithmetic (the same on every machine)."""
    j = math.floor(4 * math.log2(temperature) + 0.5)
    eighth = Fraction(temperature) ** 8
    while eighth >= Fraction(2) ** (2 * j + 1):
        j += 1
    while eighth < Fraction(2) ** (2 * j - 1):
        j -= 1
    return j


def sampler_stratum(config: SamplerConfig | None) -> str:
    """The stratum of a run's sampler setting: its temperature's band, a quarter octave wide
    (a ratio of 2**(1/4)), so that an engine drawing a temperature per request fills a few
    strata, not one a request. The other fields do not split strata: the temperature is the
    field a known bug pushes one way on one side of a setting and the other way on the other
    (applied twice, it sharpens below 1 and flattens above).

    >>> sampler_stratum(SamplerConfig(temperature=0.7)), sampler_stratum(None)
    ('temperature in [0.648, 0.771)', 'sampler not recorded')
    >>> sampler_stratum(SamplerConfig(temperature=0.72, top_k=40))
    'temperature in [0.648, 0.771)'
    >>> sampler_stratum(SamplerConfig(temperature=0.0)), sampler_stratum(SamplerConfig(100.0))
    ('temperature 0 (greedy)', 'temperature >= 17.4')
    """
    if config is None:
        return "sampler not recorded"
    if config.temperature == 0.0:
        return "temperature 0 (greedy)"
    j = _quarter_octave(config.temperature)
    low, high = 2 ** ((2 * j - 1) / 8), 2 ** ((2 * j + 1) / 8)
    if j < -TEMPERATURE_BANDS:
        return f"temperature < {2 ** ((-2 * TEMPERATURE_BANDS - 1) / 8):.3g}"
    if j > TEMPERATURE_BANDS:
        return f"temperature >= {2 ** ((2 * TEMPERATURE_BANDS + 1) / 8):.3g}"
    return f"temperature in [{low:.3g}, {high:.3g})"


class _Mergeable(Protocol):
    def merge(self, other: Self, /) -> None: ...


_Cell = TypeVar("_Cell", bound=_Mergeable)


def stratum_cell(strata: dict[str, _Cell], setting: str, new: Callable[[], _Cell]) -> _Cell:
    """The cell a value of `setting` is counted in, opened when new."""
    cell = strata.get(setting)
    if cell is None:
        cell = strata[setting] = new()
    return cell


def merge_strata(mine: dict[str, _Cell], other: dict[str, _Cell]) -> None:
    """Merge a later piece's strata into these: a stratum both hold merges, one only the later
    piece holds is taken as it is (so the strata keep the order one pass meets them in)."""
    merge_per_key(mine, other)


def stratum_groups(sizes: Mapping[str, int]) -> list[list[str]]:
    """The groups of strata whose chi-squares the stratified statistic sums: each stratum of
    at least `STRATUM_MIN` values alone, then every other stratum together as a remainder,
    when it holds at least 10 values (fewer are left out of the sum: they still count in the
    pooled chi-square). Strata go by name, so that pieces merged in any order give the same
    groups; the groups depend on how many values each setting has, never on the values."""
    alone = [[key] for key in sorted(sizes) if sizes[key] >= STRATUM_MIN]
    rest = [key for key in sorted(sizes) if [key] not in alone]
    if sum(sizes[key] for key in rest) >= _MIN_LAW_TOKENS:
        alone.append(rest)
    return alone


def group_label(group: list[str]) -> str:
    """How a report names a group of `stratum_groups`."""
    if len(group) == 1:
        return group[0]
    return f"the other settings ({len(group)} strata pooled)"


def pooled_counts(parts: Iterable[PitCounts]) -> PitCounts:
    """Several strata's counts as one (new state; the parts are kept)."""
    out = PitCounts()
    for part in parts:
        out.merge(part)
    return out


@dataclass(frozen=True)
class StratifiedChiSquare:
    """The sum of the groups' Pearson chi-squares, each on `law_bins` of its own values: under
    uniform PIT values a sum of independent chi-squares, on the sum of their d.o.f."""

    statistic: float
    dof: int
    p_value: float
    worst: str
    """The label of the group with the smallest p-value alone."""
    worst_statistic: float
    worst_dof: int


def stratified_chi_square(groups: list[tuple[str, PitCounts]]) -> StratifiedChiSquare:
    """The stratified statistic over labelled groups' counts (`stratum_groups`)."""
    from scipy import stats

    total, dof = 0.0, 0
    worst = ("", 0.0, 0, 2.0)
    for label, counts in groups:
        bins = law_bins(counts.n)
        chi2, p_value = counts.chi_square(bins)
        total += chi2
        dof += bins - 1
        if p_value < worst[3]:
            worst = (label, chi2, bins - 1, p_value)
    return StratifiedChiSquare(total, dof, float(stats.chi2.sf(total, dof)), worst[0],
                               worst[1], worst[2])


def pit_cdf(p: np.ndarray, key: np.ndarray, laws: list[np.ndarray]) -> np.ndarray:
    """Per law: the randomised PIT's CDF at `EDGES` (and, last, the law's total mass) when the
    token is drawn from the law. At an edge t, the tokens whose interval lies below t count
    whole, the one straddling it in part, a zero-width token at lo < t whole. Tied keys
    may come in any order here (a model of the PIT's law; `pit_value` orders ties by id)."""
    order = np.argsort(-key)
    width = p[order]
    lo = np.cumsum(width) - width
    index = np.searchsorted(lo, EDGES, side="left")  # tokens [0, index) start below t
    last = np.maximum(index - 1, 0)
    share = np.where(width[last] > 0,
                     np.clip((EDGES - lo[last]) / np.where(width[last] > 0, width[last], 1),
                             0, 1), 1.0)
    out = np.empty((len(laws), EDGES.size + 1))
    for n, law in enumerate(laws):
        sorted_law = law[order]
        below = np.concatenate([[0.0], np.cumsum(sorted_law)])
        out[n, :-1] = np.where(index > 0, below[last] + sorted_law[last] * share, 0.0)
        out[n, -1] = below[-1]
    return out


def _keys(position: Position, ordering: str) -> np.ndarray:
    # Under block verification a token's law is p given the emitted prefix only, not
    # given the round's drafts, so its order may read nothing of the round: p alone.
    assert position.p is not None, "the power model reads rounds with rows"
    if ordering == "q/p" and position.q is not None and token_rule(position.round):
        return qp_key(position.p, position.q)
    return position.p


ORDERINGS = ("p", "q/p")


def position_jitter(seed: int, position: Position) -> float:
    """The PIT's jitter at a position: fixed by the seed and the position's identity."""
    round_ = position.round
    return unit_hash(seed, round_.run.id, round_.index, position.offset)


@dataclass
class LawCell(State):
    """One stratum's share of the law check: the PIT counts under each ordering, and the power
    model's sums per bug and ordering."""

    pit: dict[str, PitCounts] = field(
        default_factory=lambda: {ordering: PitCounts() for ordering in ORDERINGS})
    laws: dict[str, dict[str, BinLaws]] = field(default_factory=dict)
    """Per bug, per ordering."""

    def merge(self, other: LawCell) -> None:
        for ordering in ORDERINGS:
            self.pit[ordering].merge(other.pit[ordering])
        for bug, by_ordering in other.laws.items():
            merge_per_key(self.laws.setdefault(bug, {}), by_ordering)


@dataclass(frozen=True)
class LawTests:
    """The law check's chi-squares over strata of PIT counts: the pooled one and, when the
    values fall into two groups or more (`stratum_groups`), the stratified one, each under
    both orderings; every p-value is judged at alpha over the number of tests (Bonferroni)."""

    n: int
    bins: int
    pooled: tuple[tuple[float, float], ...]
    """(statistic, p-value) per ordering."""
    groups: list[list[str]]
    stratified: tuple[StratifiedChiSquare, ...] | None
    """Per ordering; None when the values form fewer than two groups."""

    @property
    def tests(self) -> int:
        """The number of p-values the verdict reads."""
        return len(ORDERINGS) * (2 if self.stratified is not None else 1)

    @property
    def min_p_value(self) -> float:
        """The smallest of the tests' p-values."""
        values = [p for _, p in self.pooled]
        values += [s.p_value for s in self.stratified or ()]
        return min(values)

    def statistic(self) -> str:
        """The report's statistic: the pooled chi-squares as before, then the stratified."""
        text = (f"chi2 = {self.pooled[0][0]:.2f} (p-order), {self.pooled[1][0]:.2f} "
                f"(q/p-order), {self.bins - 1} d.o.f.")
        if self.stratified is not None:
            by_p, by_qp = self.stratified
            text += (f"; by sampler setting ({len(self.groups)} groups) chi2 = "
                     f"{by_p.statistic:.2f}, {by_qp.statistic:.2f}, {by_p.dof} d.o.f.")
        return text

    def threshold(self, alpha_level: float) -> str:
        """The report's threshold at `alpha_level`."""
        if self.stratified is None:
            return f"min p-value >= {alpha_level / 2:g} (two orderings, Bonferroni)"
        return (f"min p-value >= {alpha_level / self.tests:g} (two orderings, pooled and by "
                "sampler setting, Bonferroni)")

    def where(self) -> str:
        """Which group deviates most, when the stratified test was made."""
        if self.stratified is None:
            return ""
        worst = min(self.stratified, key=lambda s: s.p_value)
        return (f" (by sampler setting: most at {worst.worst}, chi2 = "
                f"{worst.worst_statistic:.2f} on {worst.worst_dof} d.o.f.)")


def law_tests(strata: Mapping[str, Mapping[str, PitCounts]]) -> LawTests:
    """The pooled and the stratified chi-squares over the strata's counts per ordering."""
    pooled = {ordering: pooled_counts(cell[ordering] for cell in strata.values())
              for ordering in ORDERINGS}
    n = pooled["p"].n
    bins = law_bins(n)
    groups = stratum_groups({key: cell["p"].n for key, cell in strata.items()})
    stratified = None
    if len(groups) >= 2:
        stratified = tuple(stratified_chi_square(
            [(group_label(group), pooled_counts(strata[key][ordering] for key in group))
             for group in groups]) for ordering in ORDERINGS)
    return LawTests(n, bins, tuple(pooled[ordering].chi_square(bins) for ordering in ORDERINGS),
                    groups, stratified)


@dataclass
class LawState(State):
    """The law check's state: per sampler setting (`sampler_stratum`), the PIT counts under
    each ordering and the power model."""

    strata: dict[str, LawCell] = field(default_factory=dict)
    notes: dict[str, set[str]] = field(default_factory=dict)

    def update(self, facts: RoundFacts, model_power: bool = True) -> None:
        cell = stratum_cell(self.strata, sampler_stratum(facts.round.run.target_sampler),
                            LawCell)
        for pos in facts.positions:
            # `pit_value` with the lower ends the position's statistics hold.
            jitter = position_jitter(LAW_SEED, pos)
            lower = {"p": pos.stats.pit_p, "q/p": pos.stats.pit_qp}
            for ordering in ORDERINGS:
                cell.pit[ordering].add(lower[ordering] + jitter * pos.stats.p_token)
        if facts.modelled and model_power:
            self._power_terms(facts, cell)

    def _power_terms(self, facts: RoundFacts, cell: LawCell) -> None:
        bugs = [bug for bug in BUG_CLASSES if bug in facts.outcomes]
        for bug in bugs:
            self.notes.setdefault(bug.id, set())
            cell.laws.setdefault(bug.id, {ordering: BinLaws() for ordering in ORDERINGS})
        for n, pos in enumerate(facts.positions):
            assert pos.p is not None, "the power model reads rounds with rows"
            laws, moved = [], []
            for bug in bugs:
                outcome, bonus = facts.outcomes[bug][n], facts.bonus[bug][n]
                law = outcome.emitted if isinstance(outcome, Outcome) else bonus
                if isinstance(outcome, str):
                    self.notes[bug.id].add(outcome)
                law = law if isinstance(law, np.ndarray) else pos.p
                laws.append(law)
                moved.append(not np.array_equal(law, pos.p))
            if not bugs:
                continue
            for ordering in ORDERINGS:
                cdf = pit_cdf(pos.p, _keys(pos, ordering), laws)
                for bug, row, changed in zip(bugs, cdf, moved, strict=True):
                    cell.laws[bug.id][ordering].add(row, changed)

    def merge(self, other: LawState) -> None:
        merge_strata(self.strata, other.strata)
        merge_notes(self.notes, other.notes)

    def pooled(self, ordering: str) -> PitCounts:
        """Every stratum's PIT counts under `ordering` together."""
        return pooled_counts(cell.pit[ordering] for cell in self.strata.values())

    def result(self, alpha_level: float) -> CheckResult:
        """The emitted tokens against p at each position: randomised PIT, chi-square on bins,
        pooled and summed over sampler settings."""
        from scipy import stats

        name = "law"
        n = sum(cell.pit["p"].n for cell in self.strata.values())
        if n < _MIN_LAW_TOKENS:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", f"p-value >= {alpha_level / 2:g}",
                               f"needs at least {_MIN_LAW_TOKENS} tokens, the trace has {n}")
        tests = law_tests({key: cell.pit for key, cell in self.strata.items()})
        level = alpha_level / tests.tests
        failed = tests.min_p_value < level
        critical = float(stats.chi2.isf(level, tests.bins - 1))
        powers = []
        for bug in BUG_CLASSES:
            if bug.id not in self.notes:
                continue
            laws = {key: cell.laws[bug.id] for key, cell in self.strata.items()
                    if bug.id in cell.laws}
            if not any(law.moved for by_ordering in laws.values()
                       for law in by_ordering.values()):
                powers.append(Power(bug.id, None,
                                    "; ".join(sorted(self.notes[bug.id])) or
                                    "no position affected"))
                continue
            best = 0.0
            for ordering in ORDERINGS:
                pooled = pooled_laws(by_ordering[ordering] for by_ordering in laws.values())
                best = max(best, pooled.power(n, tests.bins, critical))
                if tests.stratified is not None:
                    best = max(best, self._stratified_power(bug.id, ordering, tests, level))
            powers.append(Power(bug.id, best, "non-central chi-square approximation"))
        return CheckResult(
            name, Verdict.FAIL if failed else Verdict.PASS,
            f"{tests.statistic()}; min p-value = {tests.min_p_value:.3g}",
            tests.threshold(alpha_level),
            "" if not failed else
            f"the emitted tokens are not distributed as the target's p{tests.where()}",
            powers,
        )

    def _stratified_power(self, bug: str, ordering: str, tests: LawTests, level: float) -> float:
        """The chance that the stratified chi-square exceeds its critical value: the groups'
        non-centralities summed (a group no modelled position fell in counts 0, so the power
        is a lower bound there)."""
        from scipy import stats

        assert tests.stratified is not None
        dof = tests.stratified[0].dof
        noncentrality = 0.0
        for group in tests.groups:
            n = sum(self.strata[key].pit["p"].n for key in group)
            laws = pooled_laws(self.strata[key].laws[bug][ordering] for key in group
                               if bug in self.strata[key].laws)
            noncentrality += laws.noncentrality(n, law_bins(n))
        return float(stats.ncx2.sf(stats.chi2.isf(level, dof), dof, noncentrality))
