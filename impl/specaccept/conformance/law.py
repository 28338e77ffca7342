"""The law check: the emitted tokens against the target's p, by a randomised PIT and chi-square."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from specaccept.conformance.bugs import BUG_CLASSES, BonusLaws, PositionOutcomes, emitted_laws
from specaccept.conformance.positions import Position, token_rule
from specaccept.conformance.report import CheckResult, Power, Verdict

__all__ = ["LAW_SEED", "check_law", "mean_bin_law", "pit_bounds", "pit_chi_square", "pit_power"]

LAW_SEED = 0
"""The seed of the randomised PIT, so a verdict is reproducible."""
_MIN_LAW_TOKENS = 10

def pit_bounds(p: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per token, the interval [lo, lo + p) the randomised PIT maps it into.

    Tokens are ordered by `key` descending, ties by id: an order fixed before the
    token is drawn, which is all the PIT needs.
    """
    order = np.lexsort((np.arange(p.shape[0]), -key))
    lo = np.empty_like(p)
    lo[order] = np.cumsum(p[order]) - p[order]
    return lo, p


def _keys(position: Position, ordering: str) -> np.ndarray:
    # Under block verification a token's law is p given the emitted prefix only, not
    # given the round's drafts, so its order may read nothing of the round: p alone.
    if ordering == "q/p" and position.q is not None and token_rule(position.round):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = position.q / np.where(position.p > 0, position.p, 1)
            return np.where(position.p > 0, ratio, np.inf)
    return position.p


def mean_bin_law(
    bounds: Sequence[tuple[np.ndarray, np.ndarray]], laws: Sequence[np.ndarray], bins: int
) -> np.ndarray:
    """The PIT's distribution over `bins` equal bins, averaged over positions.

    At each position a token drawn from `laws[n]` maps uniformly into its interval
    [lo, lo + width) (a zero-width token sits at lo), so the PIT's mass below an
    edge t is sum_x law(x) clip((t - lo) / width, 0, 1).
    """
    inner = np.linspace(0.0, 1.0, bins + 1)[1:-1]
    lo = np.stack([b[0] for b in bounds])
    width = np.stack([b[1] for b in bounds])
    law = np.stack(laws)
    total = np.zeros(bins)
    chunk = max(1, 2_000_000 // (inner.size * lo.shape[1] + 1))
    for start in range(0, lo.shape[0], chunk):
        part = slice(start, start + chunk)
        lo_p, width_p = lo[part, None, :], width[part, None, :]
        below = np.where(width_p > 0,
                         np.clip((inner[None, :, None] - lo_p) / np.where(width_p > 0, width_p, 1),
                                 0, 1),
                         lo_p < inner[None, :, None])
        cdf = np.einsum("nbv,nv->nb", below, law[part])
        edges = np.concatenate([np.zeros((cdf.shape[0], 1)), cdf,
                                law[part].sum(axis=1, keepdims=True)], axis=1)
        total += np.diff(edges, axis=1).sum(axis=0)
    mean: np.ndarray = total / lo.shape[0]
    return mean


def pit_chi_square(u: np.ndarray, bins: int) -> tuple[float, float]:
    """Pearson's chi-square of PIT values against the uniform law on `bins` equal bins:
    (statistic, p-value on bins - 1 degrees of freedom)."""
    counts = np.bincount(np.minimum((u * bins).astype(int), bins - 1), minlength=bins)
    expected = u.size / bins
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    return chi2, float(stats.chi2.sf(chi2, bins - 1))


def pit_power(
    bounds: Sequence[tuple[np.ndarray, np.ndarray]], laws: Sequence[np.ndarray], bins: int,
    critical: float,
) -> float:
    """The probability that `pit_chi_square` exceeds `critical` when the token at each
    position is drawn from `laws[n]` (non-central chi-square approximation)."""
    mean_bins = mean_bin_law(bounds, laws, bins)
    noncentrality = len(laws) * float(np.sum((mean_bins - 1 / bins) ** 2 * bins))
    return float(stats.ncx2.sf(critical, bins - 1, noncentrality))


def check_law(
    positions: Sequence[Position], alpha_level: float, bug_outcomes: PositionOutcomes,
    bonus_bug_laws: BonusLaws,
) -> CheckResult:
    """The emitted tokens against p at each position: randomised PIT, chi-square on bins."""
    name = "law"
    n = len(positions)
    if n < _MIN_LAW_TOKENS:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", f"p-value >= {alpha_level / 2:g}",
                           f"needs at least {_MIN_LAW_TOKENS} tokens, the trace has {n}")
    bins = max(2, min(20, n // 5))
    threshold = f"min p-value >= {alpha_level / 2:g} (two orderings, Bonferroni)"
    rng = np.random.default_rng(LAW_SEED)
    jitter = rng.random(n)
    statistics, p_values = [], []
    bounds = {ordering: [pit_bounds(pos.p, _keys(pos, ordering)) for pos in positions]
              for ordering in ("p", "q/p")}
    for ordering in ("p", "q/p"):
        u = np.array([lo[pos.emitted] + jitter[j] * width[pos.emitted]
                      for j, (pos, (lo, width)) in enumerate(zip(positions, bounds[ordering],
                                                                  strict=True))])
        chi2, p_value = pit_chi_square(u, bins)
        statistics.append(chi2)
        p_values.append(p_value)
    critical = float(stats.chi2.isf(alpha_level / 2, bins - 1))
    failed = min(p_values) < alpha_level / 2
    powers = []
    for bug in BUG_CLASSES:
        if bug not in bug_outcomes:
            continue
        laws, why_not = emitted_laws([pos.p for pos in positions], bug_outcomes[bug],
                                     bonus_bug_laws[bug])
        if laws is None:
            powers.append(Power(bug.id, None, why_not))
            continue
        best = 0.0
        for ordering in ("p", "q/p"):
            best = max(best, pit_power(bounds[ordering], laws, bins, critical))
        powers.append(Power(bug.id, best, "non-central chi-square approximation"))
    return CheckResult(
        name, Verdict.FAIL if failed else Verdict.PASS,
        f"chi2 = {statistics[0]:.2f} (p-order), {statistics[1]:.2f} (q/p-order), {bins - 1} "
        f"d.o.f.; min p-value = {min(p_values):.3g}",
        threshold,
        "" if not failed else "the emitted tokens are not distributed as the target's p",
        powers,
    )
