"""The fresh-randomness check: no uniform a round read is read again by a later round."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from specaccept.conformance.bugs import POSITION_KEYED_UNIFORMS
from specaccept.conformance.positions import claimed_rule, read_cells
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Round, Trace
from specaccept.core.acceptance import AcceptanceRule

__all__ = [
    "MAX_MEAN_BOUND", "UNIFORM_SPACING", "check_fresh", "coincidence_threshold", "read_uniforms",
    "uniform_spacing",
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


def _position_keyed_rereads(rounds: Sequence[Round]) -> int:
    """How many read tests a position-keyed block engine would re-read, given these rounds.

    A round at n keeping tau of k drafts read tests keyed n .. n + k - 1; the next round
    starts at n + tau + 1 and, keyed by position, reads keys n + tau + 1 .. n + k - 1 again
    as its first k - tau - 1 tests, every one of which block verification reads.
    """
    total = 0
    for this, after in itertools.pairwise(rounds):
        if AcceptanceRule.BLOCK is claimed_rule(this) is claimed_rule(after):
            total += max(0, min(this.k - this.num_accepted - 1, after.k))
    return total


def check_fresh(trace: Trace, alpha_level: float) -> CheckResult:
    """No uniform a round read re-appears among the uniforms a later round read.

    D counts the read uniforms equal to one read by an earlier round. Fresh uniforms
    on a grid of spacing s: given everything before it, a read uniform hits one of the m
    values earlier rounds read with probability at most m s, so with mu the sum of those
    bounds, P(D >= c) <= E[C(D, c)] <= mu^c / c!; the check fails at the least c making
    that bound <= alpha.
    """
    name = "fresh"
    rounds = [r for r in trace.rounds if r.uniforms is not None]
    if not rounds:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", "no re-read uniforms",
                           "the trace records no uniforms")
    read = [read_uniforms(r) for r in rounds]
    spacing = uniform_spacing([v for values in read for v in values])
    earlier: dict[float, Round] = {}
    rereads, mean_bound, first = 0, 0.0, ""
    for round_, values in zip(rounds, read, strict=True):
        for value in values:
            mean_bound += len(earlier) * spacing
            if value in earlier:
                rereads += 1
                first = first or (
                    f"round {round_.index} (line {round_.line}) reads u = {value!r}, which "
                    f"round {earlier[value].index} (line {earlier[value].line}) already read: "
                    "a later round must read fresh uniforms (keyed by round, not by position)")
        for value in values:
            earlier.setdefault(value, round_)
    critical = coincidence_threshold(mean_bound, alpha_level)
    expected = _position_keyed_rereads(rounds)
    power = Power(POSITION_KEYED_UNIFORMS.id, float(expected >= critical) if any(
        claimed_rule(r) is AcceptanceRule.BLOCK for r in rounds) else None,
        f"deterministic given the kept lengths: {expected} re-read tests, {critical} needed"
        if any(claimed_rule(r) is AcceptanceRule.BLOCK for r in rounds)
        else "position keys are harmless to the token-by-token rules")
    return CheckResult(
        name, Verdict.FAIL if rereads >= critical else Verdict.PASS,
        f"re-read uniforms D = {rereads} of {sum(map(len, read))} read "
        f"(mu = {mean_bound:.3g} at spacing 2^{math.log2(spacing):.0f})",
        f"D < {critical} (P(D >= {critical}) <= mu^{critical}/{critical}! <= {alpha_level:g})",
        first if rereads >= critical else "", [power],
    )
