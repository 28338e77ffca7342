"""Closed forms: what each rule accepts and what acceptance buys."""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept import (
    AcceptanceRule,
    ClosedForms,
    acceptance_closed_forms,
    acceptance_probability,
    expected_speedup,
    expected_tokens_per_round,
)

PROPERTY = settings(max_examples=50, deadline=None)


@st.composite
def distribution_pairs(draw: st.DrawFn) -> tuple[mx.array, mx.array]:
    vocab = draw(st.integers(1, 12))
    rows = []
    for _ in range(2):
        w = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=vocab, max_size=vocab)))
        w[draw(st.integers(0, vocab - 1))] += 0.5  # a positive entry
        rows.append(mx.array((w / w.sum()).astype(np.float32)))
    return rows[0], rows[1]


@PROPERTY
@given(distribution_pairs())
def test_closed_form_identities(pair: tuple[mx.array, mx.array]) -> None:
    p, q = pair
    forms = acceptance_closed_forms(p, q)
    assert isinstance(forms, ClosedForms)
    sum_min, sum_prod, tv = (float(np.asarray(f)) for f in forms)
    assert sum_min == pytest.approx(1.0 - tv, abs=1e-5)  # maximal coupling: 1 - TV
    assert sum_min >= sum_prod - 1e-6  # min(a, b) >= a * b on [0, 1]
    assert 0.0 <= sum_prod <= sum_min <= 1.0 + 1e-6
    p64, q64 = np.array(p, dtype=np.float64), np.array(q, dtype=np.float64)
    assert sum_min == pytest.approx(np.minimum(p64, q64).sum(), abs=1e-6)
    assert sum_prod == pytest.approx((p64 * q64).sum(), abs=1e-6)
    assert tv == pytest.approx(0.5 * np.abs(p64 - q64).sum(), abs=1e-6)
    # Symmetric in (p, q), and p == q accepts everything under the ceiling.
    swapped, same = acceptance_closed_forms(q, p), acceptance_closed_forms(p, p)
    assert float(np.asarray(swapped.sum_min)) == pytest.approx(sum_min, abs=1e-7)
    assert float(np.asarray(same.sum_min)) == pytest.approx(1.0, abs=1e-5)
    assert float(np.asarray(same.total_variation)) == 0.0


def test_closed_forms_per_row() -> None:
    p = mx.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    q = mx.array([[0.25, 0.25, 0.5], [0.0, 1.0, 0.0]])
    forms = acceptance_closed_forms(p, q)
    assert forms.sum_min.tolist() == [0.5, 0.0]
    assert forms.sum_prod.tolist() == [0.25, 0.0]
    assert forms.total_variation.tolist() == [0.5, 1.0]


def test_acceptance_probability_per_rule() -> None:
    p, q = mx.array([0.3, 0.7]), mx.array([0.95, 0.05])
    got = {rule: acceptance_probability(rule, p, q).item() for rule in AcceptanceRule}
    assert got[AcceptanceRule.STOCHASTIC] == pytest.approx(0.35, abs=1e-6)
    assert got[AcceptanceRule.SAMPLER_MATCH] == pytest.approx(0.3 * 0.95 + 0.7 * 0.05, abs=1e-6)
    assert got[AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION] == got[
        AcceptanceRule.SAMPLER_MATCH
    ]
    assert got[AcceptanceRule.GREEDY_ARGMAX] == pytest.approx(0.05, abs=1e-7)  # q(argmax p)
    # The PR's example: the argmax rule is not bounded by the lossless ceiling.
    p, q = mx.array([0.3, 0.25, 0.25, 0.2]), mx.array([0.95, 0.0, 0.0, 0.05])
    greedy = acceptance_probability(AcceptanceRule.GREEDY_ARGMAX, p, q).item()
    ceiling = acceptance_probability(AcceptanceRule.STOCHASTIC, p, q).item()
    assert greedy == pytest.approx(0.95) and ceiling == pytest.approx(0.35)


@PROPERTY
@given(st.floats(0.0, 0.999), st.integers(0, 12))
def test_expected_tokens_geometric_closed_form(alpha: float, k: int) -> None:
    got = expected_tokens_per_round([alpha] * k)
    assert got == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha), rel=1e-9)


def test_expected_tokens_special_cases() -> None:
    assert expected_tokens_per_round([]) == 1.0
    assert expected_tokens_per_round((1.0,) * 5) == 6.0
    assert expected_tokens_per_round([0.0, 1.0, 1.0]) == 1.0  # the chain stops at position 0
    assert expected_tokens_per_round([0.5, 0.25]) == pytest.approx(1 + 0.5 + 0.125)
    assert expected_tokens_per_round([0.5, 0.5]) == 1.75


@PROPERTY
@given(st.floats(0.0, 1.0), st.integers(1, 10), st.floats(0.0, 2.0), st.floats(0.1, 10.0))
def test_expected_speedup_formula(alpha: float, k: int, c: float, verify_cost: float) -> None:
    tokens = (k + 1) if alpha == 1.0 else (1 - alpha ** (k + 1)) / (1 - alpha)
    got = expected_speedup(alpha, k, c, verify_cost=verify_cost)
    assert got == pytest.approx(tokens / (k * c + verify_cost), rel=1e-9)


def test_expected_speedup_special_cases() -> None:
    assert expected_speedup(0.5, 2, 0.0) == 1.75
    assert expected_speedup(1.0, 3, 0.25) == pytest.approx(4 / 1.75)
    assert expected_speedup(1.0, 4, 0.0) == 5.0  # free drafter, all accepted: k + 1 tokens
    assert expected_speedup(0.0, 4, 0.1) == pytest.approx(1 / 1.4)  # nothing accepted: slower
    assert expected_speedup(0.0, 1, 0.0) == 1.0
    assert expected_speedup(0.6, 3, 0.0, verify_cost=2.0) == pytest.approx(
        (1 - 0.6**4) / 0.4 / 2.0
    )
    # Leviathan et al.'s default verify_cost = 1.
    assert expected_speedup(0.8, 5, 0.05) == pytest.approx(
        (1 - 0.8**6) / (0.2 * (5 * 0.05 + 1))
    )


def test_expected_speedup_of_a_huge_k_is_the_closed_form_in_constant_memory() -> None:
    # It built a list of k alphas: MemoryError at k = 10**12.
    assert expected_speedup(0.5, 10**12, 0.1) == pytest.approx(2 / (10**11 + 1), rel=1e-12)
    assert expected_speedup(1.0, 10**12, 0.0) == 10**12 + 1
    # Both sides of the switch from the summed series to the closed form agree.
    for k in (4096, 4097):
        assert expected_speedup(0.999, k, 0.0) == pytest.approx((1 - 0.999 ** (k + 1)) / 0.001,
                                                                rel=1e-12)


@pytest.mark.parametrize(
    ("alphas", "error", "match"),
    [
        ("0.5", TypeError, "alphas must be a sequence"),
        (b"\x01", TypeError, "alphas must be a sequence"),
        ({0.5}, TypeError, "alphas must be a sequence"),
        (0.5, TypeError, "alphas must be a sequence"),
        ([0.5, 1.5], ValueError, r"alphas\[1\] must lie in \[0, 1\]"),
        ([-0.1], ValueError, r"alphas\[0\] must lie in \[0, 1\]"),
        ([math.nan], ValueError, r"alphas\[0\] must be finite"),
        ([True], TypeError, r"alphas\[0\]"),
        (["0.5"], TypeError, r"alphas\[0\]"),
    ],
    ids=repr,
)
def test_expected_tokens_errors(alphas: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        expected_tokens_per_round(alphas)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"alpha": -0.5}, ValueError, "alpha"),
        ({"alpha": math.nan}, ValueError, "alpha"),
        ({"alpha": "0.5"}, TypeError, "alpha"),
        ({"k": 0}, ValueError, "k must be >= 1"),
        ({"k": -2}, ValueError, "k must be >= 1"),
        ({"k": 2.0}, TypeError, "k must be an int"),
        ({"k": True}, TypeError, "k must be an int"),
        ({"c": -0.1}, ValueError, "c must be >= 0"),
        ({"c": math.inf}, ValueError, "c must be finite"),
        ({"c": None}, TypeError, "c must be a real number"),
        ({"verify_cost": 0.0}, ValueError, "verify_cost must be > 0"),
        ({"verify_cost": -1.0}, ValueError, "verify_cost must be > 0"),
        ({"verify_cost": math.nan}, ValueError, "verify_cost"),
        # 1 / 5e-324 is inf: the quotient overflows, an error rather than an infinite speedup.
        ({"alpha": 0.0, "k": 1, "c": 0.0, "verify_cost": 5e-324}, ValueError,
         "overflows float64"),
        ({"k": 2**53 + 1}, ValueError, r"k must be <= 2\*\*53"),
    ],
    ids=repr,
)
def test_expected_speedup_errors(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    arguments: dict[str, object] = {"alpha": 0.5, "k": 4, "c": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        expected_speedup(**arguments)  # type: ignore[arg-type]


def test_closed_form_errors() -> None:
    p = mx.array([0.5, 0.5])
    with pytest.raises(ValueError, match="p and q must have the same shape"):
        acceptance_closed_forms(p, mx.array([1.0, 0.0, 0.0]))
    with pytest.raises(TypeError, match="q must be float32"):
        acceptance_closed_forms(p, p.astype(mx.float16))
    with pytest.raises(TypeError, match=r"p must be an mlx\.core\.array"):
        acceptance_closed_forms([0.5, 0.5], p)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="p must be 1-d or 2-d"):
        acceptance_closed_forms(mx.zeros((1, 1, 2)), mx.zeros((1, 1, 2)))
    with pytest.raises(TypeError, match="rule must be an AcceptanceRule"):
        acceptance_probability("stochastic", p, p)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="p and q must have the same shape"):
        acceptance_probability(AcceptanceRule.STOCHASTIC, p, mx.array([1.0]))
