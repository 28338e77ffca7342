"""The multi-draft ceiling and the node acceptances of tree verification, checked exactly.

The checks of lemma 11's acceptance and ceiling parts (``proofs/tree_verification.md``):
`multi_draft_ceiling`'s sort-and-prefix computation equals the minimum over every token set
(in Fractions), and equals the optimum of the linear program over every coupling of the
emitted token with n i.i.d. drafts (HiGHS); `iid_siblings_acceptance` is the acceptance the
tree rule realises, summed over every draft outcome; RRS never beats the ceiling.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

from proofs.exact_rounds import Dist, as_float32
from proofs.test_tree_exact import Variant, constant, drafts, node_law, reject_update
from specaccept.core.tree import TreeScheme, iid_siblings_acceptance, multi_draft_ceiling

ZERO, ONE = Fraction(0), Fraction(1)
FLOAT32_TOLERANCE = 1e-6
LP_TOLERANCE = 1e-8


def instances(count: int, vocab: int, seed: int) -> list[tuple[Dist, Dist]]:
    """Random dyadic pairs (multiples of 1/16), some with zeros, seeded."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        pair = []
        for _ in range(2):
            counts = rng.multinomial(16, rng.dirichlet(np.full(vocab, 0.7)))
            pair.append(tuple(Fraction(int(c), 16) for c in counts))
        out.append((pair[0], pair[1]))
    return out


def brute_ceiling(p: Dist, q: Dist, n: int) -> Fraction:
    """min over every token set H of p(H) + 1 - q(H)^n."""
    ids = range(len(p))
    return min(sum((p[x] for x in h), ZERO) + 1 - sum((q[x] for x in h), ZERO) ** n
               for size in range(len(p) + 1) for h in itertools.combinations(ids, size))


def prefix_ceiling(p: Dist, q: Dist, n: int) -> Fraction:
    """The same minimum over the prefixes of the ids sorted by p/q (q = 0 last)."""
    order = sorted(range(len(p)), key=lambda x: (0, p[x] / q[x]) if q[x] else (1, ZERO))
    best, p_sum, q_sum = ONE, ZERO, ZERO
    for x in order:
        p_sum, q_sum = p_sum + p[x], q_sum + q[x]
        best = min(best, p_sum + 1 - q_sum**n)
    return best


def lp_ceiling(p: Dist, q: Dist, n: int) -> float:
    """max P(Y in {X_1..X_n}) over couplings of Y ~ p and X ~ q^n (any verifier at all)."""
    vocab = len(p)
    tuples = list(itertools.product(range(vocab), repeat=n))
    # variables pi[y, t], row-major
    objective = -np.array([float(y in t) for y in range(vocab) for t in tuples])
    rows, bounds = [], []
    for y in range(vocab):  # sum_t pi[y, t] = p(y)
        rows.append([float(yy == y) for yy in range(vocab) for _ in tuples])
        bounds.append(float(p[y]))
    for t in tuples:  # sum_y pi[y, t] = q^n(t)
        rows.append([float(tt == t) for _ in range(vocab) for tt in tuples])
        weight = ONE
        for x in t:
            weight *= q[x]
        bounds.append(float(weight))
    result: Any = linprog(objective, A_eq=np.array(rows), b_eq=np.array(bounds),
                          bounds=(0, None), method="highs")
    assert result.status == 0, result.message
    return -float(result.fun)


def iid_acceptance(p: Dist, q: Dist, n: int) -> Fraction:
    """The closed form of part 1: 1 - prod_j (1 - sum min(r_j, q))."""
    r, miss = p, ONE
    for _ in range(n):
        miss *= 1 - sum((min(a, b) for a, b in zip(r, q, strict=True)), ZERO)
        r = reject_update(r, q)
    return 1 - miss


def realised_acceptance(scheme: TreeScheme, p: Dist, q: Dist, n: int) -> Fraction:
    """P(some child accepted) of the exact tree rule, over every drafting outcome."""
    total = ZERO
    for tokens, w in drafts(scheme, (-1,) * n, constant(q), ()):
        total += w * sum((v for j, _, v in node_law(Variant(scheme), p, q, list(tokens))
                          if j is not None), ZERO)
    return total


CASES = [(p, q, n) for p, q in instances(12, 4, 7) for n in (1, 2, 3)]


@pytest.mark.parametrize(("p", "q", "n"), CASES)
def test_the_ceiling_is_reached_on_a_prefix_sorted_by_p_over_q(p: Dist, q: Dist, n: int) -> None:
    exact = brute_ceiling(p, q, n)
    assert prefix_ceiling(p, q, n) == exact
    library = multi_draft_ceiling(as_float32([p])[0], as_float32([q])[0], n).item()
    assert abs(library - float(exact)) <= FLOAT32_TOLERANCE
    if n == 1:
        assert exact == sum((min(a, b) for a, b in zip(p, q, strict=True)), ZERO)


LP_CASES = [(p, q, 2) for p, q in instances(8, 3, 11)] + [(p, q, 3) for p, q in instances(4, 2, 13)]


@pytest.mark.parametrize(("p", "q", "n"), LP_CASES)
def test_the_lp_over_every_verifier_reaches_the_ceiling(p: Dist, q: Dist, n: int) -> None:
    """No verifier, lossless by construction of the coupling, accepts more than alpha*,
    and one reaches it: the LP optimum is alpha*, and RRS stays under it."""
    optimum = lp_ceiling(p, q, n)
    assert abs(optimum - float(brute_ceiling(p, q, n))) <= LP_TOLERANCE
    assert float(iid_acceptance(p, q, n)) <= optimum + LP_TOLERANCE


@pytest.mark.parametrize(("p", "q", "n"), CASES[:18])
def test_the_iid_closed_form_is_what_the_tree_rule_accepts(p: Dist, q: Dist, n: int) -> None:
    exact = realised_acceptance(TreeScheme.IID, p, q, n)
    assert iid_acceptance(p, q, n) == exact
    library = iid_siblings_acceptance(as_float32([p])[0], as_float32([q])[0], n).item()
    assert abs(library - float(exact)) <= FLOAT32_TOLERANCE


def test_deterministic_candidates_accept_their_target_mass() -> None:
    """Part 1 for one-hot proposals: the acceptance is the sum of p over the candidates."""
    for p, q in instances(6, 4, 17):
        for n in (1, 2, 3):
            top = sorted(range(4), key=lambda x: (-q[x], x))[:n]
            assert realised_acceptance(TreeScheme.DETERMINISTIC, p, q, n) == \
                sum((p[x] for x in top), ZERO)


def test_a_wrong_ceiling_is_caught() -> None:
    """The ceiling written with q(outside H)^n, or with the ids sorted the wrong way, or
    without the power, disagrees with the minimum over every set on these instances."""
    def outside_power(p: Dist, q: Dist, n: int) -> Fraction:
        return min(sum((p[x] for x in h), ZERO)
                   + (1 - sum((q[x] for x in h), ZERO)) ** n
                   for size in range(len(p) + 1)
                   for h in itertools.combinations(range(len(p)), size))

    def descending(p: Dist, q: Dist, n: int) -> Fraction:
        order = sorted(range(len(p)), key=lambda x: (0, -p[x] / q[x]) if q[x] else (1, ZERO))
        best, p_sum, q_sum = ONE, ZERO, ZERO
        for x in order:
            p_sum, q_sum = p_sum + p[x], q_sum + q[x]
            best = min(best, p_sum + 1 - q_sum**n)
        return best

    for wrong in (outside_power, descending, lambda p, q, n: prefix_ceiling(p, q, 1)):
        assert any(wrong(p, q, n) != brute_ceiling(p, q, n) for p, q, n in CASES if n > 1)


def rsd_two_closed_form(p: Dist, q: Dist) -> Fraction:
    """Two drafts without replacement: sum min(p, q) + sum_x0 (q(x0) - p(x0))_+ times
    sum_{x1 != x0} min(q(x1) / (1 - q(x0)), r1(x1)), r1 the residual of p after q."""
    r1 = reject_update(p, q)
    total = sum((min(a, b) for a, b in zip(p, q, strict=True)), ZERO)
    for x0, q0 in enumerate(q):
        if q0 in (ZERO, ONE):
            continue
        total += max(q0 - p[x0], ZERO) * sum(
            (min(q[x1] / (1 - q0), r1[x1]) for x1 in range(len(q)) if x1 != x0), ZERO)
    return total


def test_the_two_draft_without_replacement_form_is_what_the_rule_accepts() -> None:
    """The RSD column of the demo pair's table (benchmarks/tree_acceptance.py): with q = 1 on
    one id no second distinct draft exists, so such pairs are left out, as the drafting does."""
    checked = 0
    for p, q in instances(12, 4, 19):
        if sum(1 for w in q if w) < 2:
            continue
        assert rsd_two_closed_form(p, q) == realised_acceptance(
            TreeScheme.WITHOUT_REPLACEMENT, p, q, 2)
        checked += 1
    assert checked >= 8
