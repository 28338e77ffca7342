"""The ``acceptance_closed_forms`` vectors (with ``acceptance_probability``).
"""

from __future__ import annotations

from fractions import Fraction

from specaccept import AcceptanceRule, acceptance_closed_forms, acceptance_probability

from .common import (
    Json,
    Lcg,
    Row,
    Vector,
    arr,
    check_close,
    encode_reals,
    exact_atol,
    f32,
    oracle_argmax,
    rational,
    scalar_float,
    seed_of,
    vector,
)

# --- acceptance_closed_forms + acceptance_probability -------------------------------------


def closed_forms_vector(name: str, note: str, p: Row, q: Row) -> Vector:
    pr, qr = rational(p), rational(q)
    zero = Fraction(0)
    sum_min = sum((min(a, b) for a, b in zip(pr, qr, strict=True)), zero)
    sum_prod = sum((a * b for a, b in zip(pr, qr, strict=True)), zero)
    tv = sum((abs(a - b) for a, b in zip(pr, qr, strict=True)), zero) / 2
    per_rule = {
        AcceptanceRule.GREEDY_ARGMAX: qr[oracle_argmax(pr)],
        AcceptanceRule.SAMPLER_MATCH: sum_prod,
        AcceptanceRule.STOCHASTIC: sum_min,
        AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION: sum_prod,
        AcceptanceRule.BLOCK: sum_min,
    }
    want = [sum_min, sum_prod, tv, *per_rule.values()]
    atol = exact_atol(want)
    forms = acceptance_closed_forms(arr(p), arr(q))
    got = [scalar_float(forms.sum_min), scalar_float(forms.sum_prod),
           scalar_float(forms.total_variation)]
    check_close(name, got, [float(x) for x in want[:3]], atol)
    probabilities: dict[str, Json] = {}
    for rule, value in per_rule.items():
        prob = scalar_float(acceptance_probability(rule, arr(p), arr(q)))
        check_close(f"{name} {rule.value}", [prob], [float(value)], atol)
        probabilities[rule.value] = f32(prob)
    return vector(name, note, {"p": encode_reals(p), "q": encode_reals(q)}, {
        "sum_min": f32(got[0]), "sum_prod": f32(got[1]), "total_variation": f32(got[2]),
        "acceptance_probability": probabilities,
    }, atol)


def acceptance_closed_forms_vectors() -> list[Vector]:
    out = [
        closed_forms_vector("half_overlap", "the docstring example", [0.5, 0.5, 0.0],
                            [0.25, 0.25, 0.5]),
        closed_forms_vector("identical", "p = q: sum_min = 1, TV = 0", [0.5, 0.25, 0.25],
                            [0.5, 0.25, 0.25]),
        closed_forms_vector("disjoint", "disjoint supports: nothing is accepted", [1.0, 0.0],
                            [0.0, 1.0]),
        closed_forms_vector("argmax_rule_above_ceiling",
                            "PR 902: q(argmax p) = 0.95 exceeds the lossless ceiling 0.35",
                            [f32(0.3), f32(0.25), f32(0.25), f32(0.2)],
                            [f32(0.95), f32(0.05), 0.0, 0.0]),
        closed_forms_vector("greedy_tie_lowest_id", "argmax p ties: q is read at the lowest id",
                            [0.5, 0.5], [0.25, 0.75]),
    ]
    rng = Lcg(seed_of(6))
    for i in range(8):
        size = 2 + rng.below(6)
        out.append(closed_forms_vector(f"random_{i:02d}", "pseudo-random dyadic case",
                                       rng.dyadic_distribution(size),
                                       rng.dyadic_distribution(size)))
    return out
