"""Lemma 8, expected tokens per round, from the exact round law: the checks of
``proofs/expected_tokens.md``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from math import prod
from typing import TypeAlias

import pytest

from proofs.exact_rounds import (
    ARGMAX_AGAINST_ARGMAX,
    DRAFTER,
    ONE,
    PROMPTS,
    SAMPLER_MATCH,
    STOCHASTIC,
    TARGET,
    ZERO,
    Dist,
    Rule,
    Table,
    Tokens,
    dist,
    round_outcomes,
    sum_min,
    sum_prod,
)
from specaccept import (
    expected_tokens_per_round,
)

Pointwise: TypeAlias = Callable[[Fraction, Fraction], Fraction]
"""P(draft x drawn and accepted) from (p(x), q(x)): lemma 1's or lemma 2's closed form."""


def _min(p_x: Fraction, q_x: Fraction) -> Fraction:
    return min(p_x, q_x)


def _product(p_x: Fraction, q_x: Fraction) -> Fraction:
    return p_x * q_x


CLOSED_FORM: dict[str, Pointwise] = {STOCHASTIC.name: _min, SAMPLER_MATCH.name: _product}


def closed_form_alphas(target: Table, drafter: Table, prefix: Tokens, k: int,
                       pointwise: Pointwise) -> list[Fraction]:
    """alpha_1..alpha_k from the tables and the per-position closed form alone (no
    library call): P(a >= j) sums, over draft prefixes d_<j, the product of
    P(d_i drawn and accepted) = pointwise(p_i(d_i), q_i(d_i)), and alpha_j is the ratio
    P(a >= j) / P(a >= j - 1)."""
    reach = [ONE]
    frontier: list[tuple[Tokens, Fraction]] = [((), ONE)]
    for _ in range(k):
        frontier = [
            ((*drafts, x), weight * pointwise(p_x, q_x))
            for drafts, weight in frontier
            for x, (p_x, q_x) in enumerate(zip(target(prefix + drafts),
                                                drafter(prefix + drafts), strict=True))
            if weight * pointwise(p_x, q_x)
        ]
        reach.append(sum((w for _, w in frontier), ZERO))
    return [reach[j] / reach[j - 1] for j in range(1, k + 1) if reach[j - 1]]


def round_tokens(rule: Rule, prefix: Tokens, k: int) -> Fraction:
    """E[tokens per round] from the exact law of a round run with `rule`."""
    outcomes = round_outcomes(rule, TARGET, DRAFTER, prefix, prefix, k)
    return sum((w * len(o.emitted) for o, w in outcomes.items()), ZERO)


def survival_sum(alphas: Sequence[Fraction]) -> Fraction:
    return sum((prod(alphas[:j], start=ONE) for j in range(len(alphas) + 1)), ZERO)


@pytest.mark.parametrize("rule", [STOCHASTIC, SAMPLER_MATCH], ids=lambda r: r.name)
def test_expected_tokens_is_the_sum_of_survival_products(rule: Rule) -> None:
    """Lemma 8 part 1 on the library: the expected tokens of the exact round law (the
    library's verifier, integrated over its uniforms) equal sum_j prod_{i<=j} alpha_i,
    with the alpha_i computed independently from the tables and lemma 1's or 2's
    per-position closed form; the library's expected_tokens_per_round agrees. Two sides
    computed two ways, so a wrong verifier or a wrong formula fails (next test)."""
    k = 3
    for prefix in PROMPTS:
        alphas = closed_form_alphas(TARGET, DRAFTER, prefix, k, CLOSED_FORM[rule.name])
        assert len(alphas) == k and all(0 < a < 1 for a in alphas)
        tokens = round_tokens(rule, prefix, k)
        assert tokens == survival_sum(alphas)
        assert abs(expected_tokens_per_round([float(a) for a in alphas]) - float(tokens)) < 1e-12


def test_the_survival_product_check_catches_wrong_verifiers_and_formulas() -> None:
    """The check of lemma 8 part 1 has power: a verifier that accepts differently
    (argmax-against-argmax), the other rule's closed form, a formula without the round's
    extra token, and the pooled i.i.d. substitution each break the equality."""
    k, prefix = 3, (1,)
    alphas = closed_form_alphas(TARGET, DRAFTER, prefix, k, _min)
    assert round_tokens(ARGMAX_AGAINST_ARGMAX, prefix, k) != survival_sum(alphas)
    assert round_tokens(STOCHASTIC, prefix, k) != survival_sum(
        closed_form_alphas(TARGET, DRAFTER, prefix, k, _product))
    tokens = round_tokens(STOCHASTIC, prefix, k)
    assert sum((prod(alphas[:j], start=ONE) for j in range(1, k + 1)), ZERO) != tokens
    outcomes = round_outcomes(STOCHASTIC, TARGET, DRAFTER, prefix, prefix, k)
    tested = sum((w * min(o.accepted + 1, k) for o, w in outcomes.items()), ZERO)
    pooled = (tokens - 1) / tested
    assert survival_sum([pooled] * k) != tokens


@pytest.mark.parametrize("p,q", [(dist(8, 4, 2, 2), dist(4, 4, 4, 4)),
                                 (dist(1, 3, 5, 7), dist(12, 2, 1, 1)),
                                 (dist(0, 8, 8, 0), dist(6, 6, 0, 4))])
def test_a_history_free_pair_gives_the_iid_closed_form(p: Dist, q: Dist) -> None:
    """Lemma 8's i.i.d. case from the library's rules: one (p, q) at every position makes
    acceptance i.i.d. with alpha = sum min(p, q) (stochastic) or sum p*q (sampler-match),
    and E[tokens] = (1 - alpha**(k+1)) / (1 - alpha) exactly."""
    k = 3
    for rule, alpha in ((STOCHASTIC, sum_min(p, q)), (SAMPLER_MATCH, sum_prod(p, q))):
        outcomes = round_outcomes(rule, lambda c: p, lambda c: q, (), (), k)
        tokens = sum((w * len(o.emitted) for o, w in outcomes.items()), ZERO)
        assert tokens == (1 - alpha ** (k + 1)) / (1 - alpha)
