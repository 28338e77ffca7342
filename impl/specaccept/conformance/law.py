"""The law check: the emitted tokens against the target's p, by a randomised PIT and chi-square.

The randomised probability integral transform maps a token drawn from p to a value uniform
on [0, 1): tokens are ordered by a key fixed before the draw, token x covers [lo_x, lo_x +
p(x)), and the value is lo + jitter * p(x). The check keeps, per possible number of bins
(2 to 20: the bins follow the trace's length, known only at the end), the counts of those
values in each bin, so that its state is a few hundred integers whatever the trace's length
and two pieces' states merge by addition. The jitter of a position is fixed by the
position's identity (`unit_hash`), so a piece checked anywhere draws the same one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, Outcome
from specaccept.conformance.exact import State, merge_notes, merge_per_key
from specaccept.conformance.positions import Position, RoundFacts, qp_key, token_rule
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import unit_hash

__all__ = [
    "BIN_CHOICES",
    "LAW_SEED",
    "BinLaws",
    "LawState",
    "PitCounts",
    "law_bins",
    "pit_bounds",
    "pit_chi_square",
    "pit_value",
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

    def power(self, n: int, bins: int, critical: float) -> float:
        """The chance that the chi-square on `bins` bins over n values exceeds `critical`
        (non-central chi-square approximation), the mean bin law estimated from the
        modelled positions."""
        from scipy import stats

        if self.positions == 0:
            return 0.0
        mean_cdf = self.cdf.astype(np.float64) / _CDF_UNIT / self.positions
        edges = np.concatenate([[0.0], mean_cdf[_EDGE_INDEX[bins]], [mean_cdf[-1]]])
        mean_bins = np.diff(edges)
        noncentrality = n * float(np.sum((mean_bins - 1 / bins) ** 2 * bins))
        return float(stats.ncx2.sf(critical, bins - 1, noncentrality))


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
class LawState(State):
    """The law check's state: the PIT counts under each ordering, and the power model."""

    pit: dict[str, PitCounts] = field(
        default_factory=lambda: {ordering: PitCounts() for ordering in ORDERINGS})
    laws: dict[str, dict[str, BinLaws]] = field(default_factory=dict)
    """Per bug, per ordering."""
    notes: dict[str, set[str]] = field(default_factory=dict)

    def update(self, facts: RoundFacts, model_power: bool = True) -> None:
        for pos in facts.positions:
            # `pit_value` with the lower ends the position's statistics hold.
            jitter = position_jitter(LAW_SEED, pos)
            lower = {"p": pos.stats.pit_p, "q/p": pos.stats.pit_qp}
            for ordering in ORDERINGS:
                self.pit[ordering].add(lower[ordering] + jitter * pos.stats.p_token)
        if facts.modelled and model_power:
            self._power_terms(facts)

    def _power_terms(self, facts: RoundFacts) -> None:
        bugs = [bug for bug in BUG_CLASSES if bug in facts.outcomes]
        for bug in bugs:
            self.notes.setdefault(bug.id, set())
            self.laws.setdefault(bug.id, {ordering: BinLaws() for ordering in ORDERINGS})
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
                    self.laws[bug.id][ordering].add(row, changed)

    def merge(self, other: LawState) -> None:
        for ordering in ORDERINGS:
            self.pit[ordering].merge(other.pit[ordering])
        merge_notes(self.notes, other.notes)
        for bug, by_ordering in other.laws.items():
            merge_per_key(self.laws.setdefault(bug, {}), by_ordering)

    def result(self, alpha_level: float) -> CheckResult:
        """The emitted tokens against p at each position: randomised PIT, chi-square on bins."""
        from scipy import stats

        name = "law"
        n = self.pit["p"].n
        if n < _MIN_LAW_TOKENS:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", f"p-value >= {alpha_level / 2:g}",
                               f"needs at least {_MIN_LAW_TOKENS} tokens, the trace has {n}")
        bins = law_bins(n)
        threshold = f"min p-value >= {alpha_level / 2:g} (two orderings, Bonferroni)"
        statistics, p_values = zip(*(self.pit[ordering].chi_square(bins)
                                     for ordering in ORDERINGS), strict=True)
        critical = float(stats.chi2.isf(alpha_level / 2, bins - 1))
        failed = min(p_values) < alpha_level / 2
        powers = []
        for bug in BUG_CLASSES:
            if bug.id not in self.notes:
                continue
            laws = self.laws[bug.id]
            if not any(law.moved for law in laws.values()):
                powers.append(Power(bug.id, None,
                                    "; ".join(sorted(self.notes[bug.id])) or
                                    "no position affected"))
                continue
            best = max(laws[ordering].power(n, bins, critical) for ordering in ORDERINGS)
            powers.append(Power(bug.id, best, "non-central chi-square approximation"))
        return CheckResult(
            name, Verdict.FAIL if failed else Verdict.PASS,
            f"chi2 = {statistics[0]:.2f} (p-order), {statistics[1]:.2f} (q/p-order), "
            f"{bins - 1} d.o.f.; min p-value = {min(p_values):.3g}",
            threshold,
            "" if not failed else "the emitted tokens are not distributed as the target's p",
            powers,
        )


