"""Block verification in exact arithmetic: the one rational oracle of the rule.

`exact_round` computes, in ``Fraction`` arithmetic, every quantity of one round of block
verification (``spec/verify_blockwise.md``) given its rows and drafts: the prefix weights
w_0 .. w_k, the keep probabilities h_1 .. h_k and the k + 1 laws of the next token;
`kept_length_law` gives the law of the kept length tau from the keep probabilities. Three
switches (`Variant`) turn the rule into the wrong variants an engine can ship.

Lemma 9's checks (``proofs/test_block_verification.py``), the whole-run enumerator
(``proofs/exact_runs.py``) and the golden vectors' generator (``spec/vectors/generate.py``,
its ``verify_blockwise`` and ``seeded_run`` cases) all use this module, so the rule is
written out once outside the library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import prod

from proofs.exact_rounds import Dist, Tokens

__all__ = [
    "BLOCK",
    "FIRST_FAILURE",
    "LAST_KEEP_ONE",
    "UNWEIGHTED_RESIDUAL",
    "WRONG_VARIANTS",
    "Round",
    "Variant",
    "exact_round",
    "kept_length_law",
]

ZERO, ONE = Fraction(0), Fraction(1)


@dataclass(frozen=True)
class Variant:
    """Block verification, or one of its wrong variants (one switch off)."""

    name: str
    longest_prefix: bool = True
    """Keep the longest passing prefix; off: keep up to the first failing position."""
    weighted_residual: bool = True
    """Draw from relu(w_tau p - q); off: from relu(p - q)."""
    last_keep_is_weight: bool = True
    """h_k = w_k; off: h_k = 1."""


BLOCK = Variant("block")
FIRST_FAILURE = Variant("first failure instead of longest prefix", longest_prefix=False)
UNWEIGHTED_RESIDUAL = Variant("residual without the w_tau weight", weighted_residual=False)
LAST_KEEP_ONE = Variant("h_k = 1", last_keep_is_weight=False)
WRONG_VARIANTS = (FIRST_FAILURE, UNWEIGHTED_RESIDUAL, LAST_KEEP_ONE)


@dataclass(frozen=True)
class Round:
    """The exact quantities of block verification for one round's drafts."""

    weights: tuple[Fraction, ...]
    """w_0 .. w_k."""
    keep: tuple[Fraction, ...]
    """h_1 .. h_k."""
    rows: tuple[Dist, ...]
    """The k + 1 laws of the next token: the residual after keeping i drafts, then p_{k+1}."""


def exact_round(ps: Sequence[Dist], qs: Sequence[Dist], drafts: Tokens,
                variant: Variant = BLOCK) -> Round:
    k = len(drafts)
    weights = [ONE]
    for p, q, x in zip(ps[:k], qs, drafts, strict=True):
        if p[x] == 0 or weights[-1] == 0:
            weights.append(ZERO)
        elif q[x] == 0:
            weights.append(ONE)
        else:
            weights.append(min(ONE, weights[-1] * p[x] / q[x]))

    def excess(i: int, weight: Fraction) -> Dist:
        return tuple(max(weight * a - b, ZERO) for a, b in zip(ps[i], qs[i], strict=True))

    masses = [sum(excess(i, weights[i]), ZERO) for i in range(k)]
    keep = []
    for i in range(1, k):
        denominator = masses[i] + 1 - weights[i]
        keep.append(masses[i] / denominator if denominator > 0 else ONE)
    keep.append(weights[k] if variant.last_keep_is_weight else ONE)
    rows = []
    for i in range(k):
        row = excess(i, weights[i] if variant.weighted_residual else ONE)
        mass = sum(row, ZERO)
        rows.append(tuple(e / mass for e in row) if mass > 0 else ps[i])
    rows.append(ps[k])
    return Round(tuple(weights), tuple(keep), tuple(rows))


def kept_length_law(keep: Sequence[Fraction], *, longest_prefix: bool = True) -> list[Fraction]:
    """P(tau = i), i = 0..k, for independent tests passing with probabilities h_1..h_k."""
    k = len(keep)
    if longest_prefix:  # tau = max{i : eta_i <= h_i}
        return [prod((1 - h for h in keep[i:]), start=ONE) * (ONE if i == 0 else keep[i - 1])
                for i in range(k + 1)]
    # tau = the number of tests passed before the first failure
    return [prod(keep[:i], start=ONE) * (1 - keep[i] if i < k else ONE) for i in range(k + 1)]
