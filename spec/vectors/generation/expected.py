"""The ``expected_tokens_per_round`` and ``expected_speedup`` vectors.
"""

from __future__ import annotations

from fractions import Fraction

from specaccept import expected_speedup, expected_tokens_per_round

from .common import Vector, check_close, vector

DOUBLE_ATOL = 1e-12
"""The tolerance of a float64 closed form whose value is not exact in binary."""


def expected_tokens_per_round_vectors() -> list[Vector]:
    cases = [
        ("no_drafts", "k = 0: the round emits one token", []),
        ("two_halves", "1 + 1/2 + 1/4", [0.5, 0.5]),
        ("all_accepted", "alpha = 1 everywhere: k + 1 tokens", [1.0, 1.0, 1.0]),
        ("zero_stops", "a zero ends the products", [0.75, 0.0, 1.0]),
        ("dyadic_mixed", "1 + 3/4 + 3/8 + 3/32", [0.75, 0.5, 0.25]),
        ("decimal_alphas", "not exact in binary: compared within 1e-12", [0.9, 0.8, 0.7, 0.6]),
    ]
    out = []
    for name, note, alphas in cases:
        want, survival = Fraction(1), Fraction(1)
        for alpha in alphas:
            survival *= Fraction(alpha)
            want += survival
        got = expected_tokens_per_round(alphas)
        atol = 0.0 if Fraction(got) == want else DOUBLE_ATOL
        check_close(name, [got], [float(want)], atol)
        out.append(vector(name, note, {"alphas": list(alphas)}, {"tokens": got}, atol))
    return out


def expected_speedup_vectors() -> list[Vector]:
    cases = [
        ("free_drafter", "c = 0: the speedup is the tokens per round", 0.5, 2, 0.0, 1.0),
        ("docstring_example", "alpha = 1, k = 3, c = 1/4: 4 / 1.75", 1.0, 3, 0.25, 1.0),
        ("no_acceptance", "alpha = 0: one token per round costs k c + 1", 0.0, 4, 0.125, 1.0),
        ("verify_cost", "a (k+1)-token verify costing 1.5 forwards", 0.75, 2, 0.25, 1.5),
        ("decimal_inputs", "not exact in binary: compared within 1e-12", 0.8, 5, 0.05, 1.2),
        ("one_draft", "k = 1 is allowed: (1 + alpha) / (c + 1)", 0.5, 1, 0.25, 1.0),
        ("verify_cost_default", "verify_cost left out: it defaults to 1", 0.5, 2, 0.5, None),
    ]
    out = []
    for name, note, alpha, k, c, given_cost in cases:
        cost = 1.0 if given_cost is None else given_cost
        tokens, survival = Fraction(1), Fraction(1)
        for _ in range(k):
            survival *= Fraction(alpha)
            tokens += survival
        want = tokens / (k * Fraction(c) + Fraction(cost))
        got = (expected_speedup(alpha, k, c) if given_cost is None
               else expected_speedup(alpha, k, c, verify_cost=given_cost))
        atol = 0.0 if Fraction(got) == want else DOUBLE_ATOL
        check_close(name, [got], [float(want)], atol)
        inputs: Vector = {"alpha": alpha, "k": k, "c": c}
        if given_cost is not None:
            inputs["verify_cost"] = given_cost
        out.append(vector(name, note, inputs, {"speedup": got}, atol))
    return out
