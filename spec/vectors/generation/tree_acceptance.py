"""The ``tree_acceptance`` vectors: a node's acceptance under each tree scheme
(``iid_siblings_acceptance``, ``without_replacement_siblings_acceptance``,
``candidate_siblings_acceptance``) and ``multi_draft_ceiling``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from specaccept.core.tree import (
    candidate_siblings_acceptance,
    iid_siblings_acceptance,
    multi_draft_ceiling,
    without_replacement_siblings_acceptance,
)

from .common import (
    INEXACT_ATOL,
    PLACEHOLDER_IDS,
    GenerationError,
    Json,
    Lcg,
    Rational,
    Row,
    Vector,
    arr,
    check_close,
    encode_ids,
    encode_reals,
    f32,
    id_array,
    id_list,
    rational,
    scalar_float,
    seed_of,
    vector,
)


def oracle_iid_siblings(p: Rational, q: Rational, n: int) -> Fraction:
    r, miss = list(p), Fraction(1)
    for _ in range(n):
        miss *= 1 - sum(min(a, b) for a, b in zip(r, q, strict=True))
        excess = [max(a - b, Fraction(0)) for a, b in zip(r, q, strict=True)]
        mass = sum(excess)
        r = r if mass == 0 else [e / mass for e in excess]
    return 1 - miss


def oracle_without_replacement(p: Rational, q: Rational, n: int) -> Fraction:
    """RSD's acceptance by recursion over the draw orders, in exact rationals: draft x from
    the proposal, accepted with min(1, r(x) / q_j(x)); a rejection moves r to its normalised
    excess and removes x from the proposal."""
    def accept(r: list[Fraction], proposal: list[Fraction], left: int) -> Fraction:
        if left == 0 or sum(proposal) == 0:
            return Fraction(0)
        total = sum((min(a, b) for a, b in zip(r, proposal, strict=True)), Fraction(0))
        excess = [max(a - b, Fraction(0)) for a, b in zip(r, proposal, strict=True)]
        mass = sum(excess)
        after = r if mass == 0 else [e / mass for e in excess]
        for x, w in enumerate(proposal):
            rejected = max(w - r[x], Fraction(0))
            if rejected:
                kept = [Fraction(0) if y == x else v for y, v in enumerate(proposal)]
                kept_mass = sum(kept)
                rest = kept if kept_mass == 0 else [v / kept_mass for v in kept]
                total += rejected * accept(after, rest, left - 1)
        return total
    return accept(list(p), list(q), n)


def top_candidates(q: Row, n: int) -> list[int]:
    """The min(n, V) most likely ids of q, ties to the lowest id: distinct candidates."""
    return sorted(range(len(q)), key=lambda x: (-q[x], x))[:min(n, len(q))]


def oracle_ceiling(p: Rational, q: Rational, n: int) -> Fraction:
    """min over every token set H of p(H) + 1 - q(H)^n, by enumeration."""
    best = Fraction(1)
    for mask in range(1 << len(p)):
        inside = [x for x in range(len(p)) if mask >> x & 1]
        best = min(best, sum((p[x] for x in inside), Fraction(0)) + 1
                   - sum((q[x] for x in inside), Fraction(0)) ** n)
    return best


def tree_acceptance_vector(name: str, note: str, p: Row, q: Row, n: int,
                           placeholder: tuple[int, str | None] | None = None) -> Vector:
    """`placeholder` (an id outside [0, V) and its dtype): the candidates are then an id
    array of it and the top candidates, and it counts no mass."""
    exact_p, exact_q = rational(p), rational(q)
    candidates = top_candidates(q, n)
    want = {
        "iid_siblings_acceptance": oracle_iid_siblings(exact_p, exact_q, n),
        "without_replacement_siblings_acceptance": oracle_without_replacement(
            exact_p, exact_q, n),
        "candidate_siblings_acceptance": sum((exact_p[x] for x in candidates), Fraction(0)),
        "multi_draft_ceiling": oracle_ceiling(exact_p, exact_q, n),
    }
    given: Any = candidates
    encoded: Json = id_list(candidates)
    if placeholder is not None:
        value, dtype = placeholder
        given = id_array([value, *candidates], dtype)
        encoded = encode_ids([value, *candidates], dtype or "int32")
    got = [
        scalar_float(iid_siblings_acceptance(arr(p), arr(q), n)),
        scalar_float(without_replacement_siblings_acceptance(arr(p), arr(q), n)),
        scalar_float(candidate_siblings_acceptance(arr(p), given)),
        scalar_float(multi_draft_ceiling(arr(p), arr(q), n)),
    ]
    check_close(name, got, [float(w) for w in want.values()], INEXACT_ATOL)
    if want["iid_siblings_acceptance"] > want["multi_draft_ceiling"]:
        raise GenerationError(f"{name}: RRS accepts more than the ceiling")
    return vector(name, note, {"p": encode_reals(p), "q": encode_reals(q), "num_drafts": n,
                               "candidates": encoded},
                  {field: f32(float(w)) for field, w in want.items()}, INEXACT_ATOL)


def tree_acceptance_vectors() -> list[Vector]:
    out = [
        tree_acceptance_vector("one_draft_is_sum_min", "n = 1: both are sum min(p, q) = 1/2",
                               [0.5, 0.5], [1.0, 0.0], 1),
        tree_acceptance_vector("one_hot_q_gains_nothing",
                               "q one-hot: every draft is id 0, both stay at p(0) = 1/2",
                               [0.5, 0.5], [1.0, 0.0], 3),
        tree_acceptance_vector("equal_laws_accept_always", "p = q: 1 for any n",
                               [0.25, 0.75], [0.25, 0.75], 2),
        tree_acceptance_vector("rrs_below_the_ceiling",
                               "p = (1/2, 1/4, 1/4), q = (1/4, 1/4, 1/2), n = 2: RRS 13/16 "
                               "against the ceiling 15/16", [0.5, 0.25, 0.25],
                               [0.25, 0.25, 0.5], 2),
        tree_acceptance_vector("disjoint_supports", "p and q disjoint: 0 for any n",
                               [1.0, 0.0, 0.0], [0.0, 0.5, 0.5], 3),
        tree_acceptance_vector("without_replacement_renormalises_q",
                               "p = (1/2, 1/4, 1/4), q = (1/4, 1/4, 1/2), n = 2: without "
                               "replacement 7/8 (the second draft from q without the first), "
                               "i.i.d. 13/16, candidates {2, 0} 3/4", [0.5, 0.25, 0.25],
                               [0.25, 0.25, 0.5], 2),
        tree_acceptance_vector("without_replacement_exhausts_q",
                               "q on two ids, n = 3: the third draft has nothing left to draw",
                               [0.25, 0.25, 0.5], [0.5, 0.5, 0.0], 3),
    ]
    # V = 4, the placeholders' vocabulary: read Python-style, -1 would count p(3) = 1/4,
    # and -4 (or an int64 2**32 narrowed to 0) p(0) a second time.
    for label, value, dtype in PLACEHOLDER_IDS:
        out.append(tree_acceptance_vector(
            f"candidate_placeholder_{label}", f"candidate id {value} ({dtype or 'int32'}) "
            "is no draft and counts no mass: the top candidate's p(0) = 1/2 alone",
            [0.5, 0.125, 0.125, 0.25], [0.25, 0.25, 0.25, 0.25], 1, (value, dtype)))
    rng = Lcg(seed_of(13))
    for index in range(12):
        size = 2 + index % 4
        p, q = rng.dyadic_distribution(size), rng.dyadic_distribution(size)
        n = 1 + index % 3
        out.append(tree_acceptance_vector(f"pseudo_random_{index}",
                                          f"pseudo-random dyadic pair, V = {size}, n = {n}",
                                          p, q, n))
    return out
