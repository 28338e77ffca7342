"""The acceptance ceiling by linear programming: the check of lemma 3 (``proofs/ceiling.md``).

A lossless single-draft rule is a coupling of the draft X ~ q and the emitted token
Y ~ p that accepts only where X = Y. Over all couplings pi(x, y) (rows sum to q, columns
to p) the largest P(X = Y) is a linear program; these checks solve it with HiGHS on 200
random instances and compare it with sum min(p, q), with rejection sampling's coupling
(built exactly, in Fractions) and with the library's closed forms.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from typing import Any, NamedTuple

import mlx.core as mx
import numpy as np
import pytest
from scipy.optimize import linprog

from specaccept import AcceptanceRule, acceptance_probability

ZERO = Fraction(0)
LP_TOLERANCE = 1e-9
FLOAT32_TOLERANCE = 1e-6


class Instance(NamedTuple):
    kind: str
    p: tuple[Fraction, ...]
    q: tuple[Fraction, ...]


def _normalise(weights: Any) -> tuple[Fraction, ...]:
    total = int(weights.sum())
    return tuple(Fraction(int(w), total) for w in weights)


def _instances(count: int, seed: int) -> list[Instance]:
    """Rational (p, q) pairs, V in 2..8, of five kinds in turn: dense, sparse (random
    zeros on either side), one-hot q, p = q, and disjoint supports."""
    rng = np.random.default_rng(seed)
    kinds = ("dense", "sparse", "one-hot q", "equal", "disjoint")
    out: list[Instance] = []
    for i in range(count):
        kind, vocab = kinds[i % len(kinds)], int(rng.integers(2, 9))
        p_weights = rng.integers(1, 33, size=vocab)
        q_weights = rng.integers(1, 33, size=vocab)
        if kind == "sparse":
            p_weights[rng.random(vocab) < 0.4] = 0
            q_weights[rng.random(vocab) < 0.4] = 0
            p_weights[rng.integers(vocab)] += 1
            q_weights[rng.integers(vocab)] += 1
        elif kind == "one-hot q":
            q_weights = np.eye(vocab, dtype=np.int64)[rng.integers(vocab)]
        elif kind == "equal":
            q_weights = p_weights.copy()
        elif kind == "disjoint":
            split = int(rng.integers(1, vocab))
            p_weights[split:] = 0
            q_weights[:split] = 0
        out.append(Instance(kind, _normalise(p_weights), _normalise(q_weights)))
    return out


INSTANCES = _instances(200, seed=902)


def sum_min(p: tuple[Fraction, ...], q: tuple[Fraction, ...]) -> Fraction:
    return sum((min(a, b) for a, b in zip(p, q, strict=True)), ZERO)


def max_agreement(p: tuple[Fraction, ...], q: tuple[Fraction, ...]) -> tuple[float, Any]:
    """max sum_x pi(x, x) over couplings pi >= 0 with rows q (draft) and columns p (emitted).

    Returns the optimum and the optimal `[V, V]` coupling.
    """
    vocab = len(p)
    objective = -np.eye(vocab).reshape(-1)  # linprog minimises
    rows = np.kron(np.eye(vocab), np.ones(vocab))  # sum_y pi(x, y) = q(x)
    columns = np.kron(np.ones(vocab), np.eye(vocab))  # sum_x pi(x, y) = p(y)
    result = linprog(
        objective,
        A_eq=np.vstack([rows, columns]),
        b_eq=np.array([float(x) for x in (*q, *p)]),
        bounds=(0, None),
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    assert result.status == 0, result.message
    return -float(result.fun), np.asarray(result.x).reshape(vocab, vocab)


def rejection_coupling(
    p: tuple[Fraction, ...], q: tuple[Fraction, ...]
) -> list[list[Fraction]]:
    """pi(x, x) = min(p, q)(x), pi(x, y) = (q - p)+(x) (p - q)+(y) / sum (p - q)+ otherwise:
    draft x, rejected with probability (q - p)+(x) / q(x), replaced from the residual."""
    over = [max(b - a, ZERO) for a, b in zip(p, q, strict=True)]
    under = [max(a - b, ZERO) for a, b in zip(p, q, strict=True)]
    mass = sum(under, ZERO)
    return [
        [min(p[x], q[x]) if x == y else (over[x] * under[y] / mass if mass else ZERO)
         for y in range(len(p))]
        for x in range(len(p))
    ]


def is_coupling(pi: list[list[Fraction]], p: tuple[Fraction, ...],
                q: tuple[Fraction, ...]) -> bool:
    """Exactly: non-negative, rows sum to q, columns sum to p."""
    vocab = len(p)
    return (
        all(pi[x][y] >= 0 for x in range(vocab) for y in range(vocab))
        and all(sum(pi[x], ZERO) == q[x] for x in range(vocab))
        and all(sum((pi[x][y] for x in range(vocab)), ZERO) == p[y] for y in range(vocab))
    )


def closed_form(rule: AcceptanceRule, p: tuple[Fraction, ...], q: tuple[Fraction, ...]) -> float:
    """The library's acceptance_probability on float32 copies of (p, q)."""
    as_array = [mx.array([float(x) for x in d], dtype=mx.float32) for d in (p, q)]
    value = acceptance_probability(rule, *as_array).item()
    assert isinstance(value, float)
    return value


@cache
def optimum(index: int) -> tuple[float, Any]:
    """The LP optimum and an optimal coupling of ``INSTANCES[index]`` (solved once)."""
    return max_agreement(INSTANCES[index].p, INSTANCES[index].q)


@pytest.mark.parametrize("index", range(len(INSTANCES)))
def test_the_lp_optimum_is_sum_min(index: int) -> None:
    """Lemma 3: no coupling of q and p agrees more often than sum min(p, q); rejection
    sampling's coupling is one (exactly) and attains it; the library's stochastic
    closed form is that optimum to float32 precision."""
    p, q = INSTANCES[index].p, INSTANCES[index].q
    best, pi = optimum(index)
    ceiling = sum_min(p, q)
    assert abs(best - float(ceiling)) < LP_TOLERANCE
    # The solver's coupling is a coupling, and its diagonal respects min(p, q) pointwise.
    assert np.all(pi > -LP_TOLERANCE)
    assert np.allclose(pi.sum(axis=1), [float(x) for x in q], atol=LP_TOLERANCE)
    assert np.allclose(pi.sum(axis=0), [float(x) for x in p], atol=LP_TOLERANCE)
    assert np.all(np.diag(pi) <= np.minimum([float(x) for x in p], [float(x) for x in q])
                  + LP_TOLERANCE)
    coupling = rejection_coupling(p, q)
    assert is_coupling(coupling, p, q)
    assert sum((coupling[x][x] for x in range(len(p))), ZERO) == ceiling
    assert abs(closed_form(AcceptanceRule.STOCHASTIC, p, q) - best) < FLOAT32_TOLERANCE


def test_sampler_match_sits_under_the_ceiling_and_meets_it_on_a_one_hot_q() -> None:
    """Lemmas 3 and 5: sum p*q (sampler-match, an independent coupling) is at most the LP
    optimum, with equality on every one-hot q; the gap is strict on some dense pair."""
    gaps = []
    for index, instance in enumerate(INSTANCES):
        best = optimum(index)[0]
        matched = closed_form(AcceptanceRule.SAMPLER_MATCH, instance.p, instance.q)
        assert matched <= best + FLOAT32_TOLERANCE
        if instance.kind == "one-hot q":
            assert abs(matched - best) < FLOAT32_TOLERANCE
        gaps.append(best - matched)
    assert max(gaps) > 0.1


def test_greedy_argmax_is_not_bounded_by_the_ceiling() -> None:
    """Lemma 4: q(argmax p) is no coupling's agreement; it exceeds the optimum somewhere."""
    above = [
        index for index, instance in enumerate(INSTANCES)
        if closed_form(AcceptanceRule.GREEDY_ARGMAX, instance.p, instance.q)
        > optimum(index)[0] + FLOAT32_TOLERANCE
    ]
    assert above


def test_a_wrong_ceiling_is_caught() -> None:
    """The LP check has power: each plausible wrong ceiling misses the optimum on some
    instance by far more than the tolerance."""
    def wrong_ceilings(p: tuple[Fraction, ...], q: tuple[Fraction, ...]) -> dict[str, float]:
        return {
            "sum p*q": float(sum((a * b for a, b in zip(p, q, strict=True)), ZERO)),
            "1 - sum |p - q| (TV without the 1/2)":
                float(1 - sum((abs(a - b) for a, b in zip(p, q, strict=True)), ZERO)),
            "max_x min(p, q)": float(max(min(a, b) for a, b in zip(p, q, strict=True))),
        }

    for name in wrong_ceilings(INSTANCES[0].p, INSTANCES[0].q):
        misses = [abs(wrong_ceilings(inst.p, inst.q)[name] - optimum(i)[0])
                  for i, inst in enumerate(INSTANCES)]
        assert max(misses) > 0.05, name


def test_a_wrong_coupling_is_caught() -> None:
    """The feasibility check has power: replacing from p instead of the residual breaks
    the column marginals on every instance where something is rejected and the residual
    is not p itself (it is p exactly when the supports are disjoint)."""
    broken = 0
    for instance in INSTANCES:
        p, q = instance.p, instance.q
        over = [max(b - a, ZERO) for a, b in zip(p, q, strict=True)]
        under = [max(a - b, ZERO) for a, b in zip(p, q, strict=True)]
        wrong = [[(min(p[x], q[x]) if x == y else ZERO) + over[x] * p[y]
                  for y in range(len(p))] for x in range(len(p))]
        mass = sum(under, ZERO)
        if mass > 0 and tuple(u / mass for u in under) != p:
            assert not is_coupling(wrong, p, q)
            broken += 1
        else:
            assert is_coupling(wrong, p, q)
    assert broken > 100
