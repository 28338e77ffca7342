"""What the core returns when an array-content precondition is violated, as the spec pages say.

The core cannot check array contents without evaluating, so the spec states the
consequence of each violation instead (spec/validation.md, and a note on each
function's page). These tests hold those sentences to the code: if the behaviour changes,
the page is wrong and this fails.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from specaccept import (
    SamplerConfig,
    accept_draft_token,
    effective_token_distribution,
    residual_distribution,
    residual_resample,
    sample_from_distribution,
    sample_token_with_distribution,
)

P = mx.array([0.5, 0.25, 0.25, 0.0])
Q = mx.array([0.25, 0.25, 0.25, 0.25])
V = 4


def test_a_nan_in_p_or_q_rejects() -> None:
    nan = float("nan")
    assert accept_draft_token(mx.array([nan, 1.0]), mx.array([0.5, 0.5]), 0, 0.0).item() is False
    assert accept_draft_token(mx.array([0.5, 0.5]), mx.array([nan, 1.0]), 0, 0.5).item() is False


def test_an_all_zero_row_draws_the_last_id() -> None:
    assert sample_from_distribution(mx.zeros(V), 0.3).item() == V - 1
    assert residual_distribution(mx.zeros(V), Q).tolist() == [0.0] * V
    assert residual_resample(mx.zeros(V), Q, 0.3).item() == V - 1


def test_a_nan_row_draws_the_last_id_of_positive_weight() -> None:
    row = mx.array([0.5, float("nan"), 0.25, 0.0])
    assert [sample_from_distribution(row, u).item() for u in (0.0, 0.5, 0.99)] == [2, 2, 2]
    assert sample_from_distribution(mx.array([float("nan")] * V), 0.5).item() == V - 1


def test_uniforms_outside_the_unit_interval_pick_the_ends() -> None:
    row = mx.array([0.0, 0.5, 0.5, 0.0])
    assert sample_from_distribution(row, mx.array(1.5)).item() == 2  # last positive
    assert sample_from_distribution(row, mx.array(float("nan"))).item() == 2
    assert sample_from_distribution(row, mx.array(-0.5)).item() == 1  # first positive


@pytest.mark.parametrize(
    "logits",
    [[0.0, float("nan"), 1.0], [0.0, float("inf"), 1.0], [float("-inf")] * 3],
    ids=["nan", "plus-inf", "all-masked"],
)
def test_invalid_logits_give_a_nan_row_and_the_last_id(logits: list[float]) -> None:
    row = mx.array(logits)
    probs = effective_token_distribution(row, SamplerConfig())
    assert np.isnan(np.array(probs)).all()
    token, _ = sample_token_with_distribution(row, SamplerConfig(), (), 0.5)
    assert token.item() == 2


def test_greedy_takes_the_first_nan_else_the_first_maximum() -> None:
    greedy = SamplerConfig(temperature=0.0)
    nan = float("nan")
    assert effective_token_distribution(mx.array([0.0, 1.0, nan, nan]), greedy).tolist() == [
        0.0, 0.0, 1.0, 0.0]
    assert effective_token_distribution(mx.array([float("-inf")] * 3), greedy).tolist() == [
        1.0, 0.0, 0.0]


def test_logits_beyond_the_envelope_overflow_as_stated() -> None:
    # Every id seen and every logit -3e38: the repetition penalty doubles them to -inf.
    row = mx.array([-3e38] * 3)
    probs = effective_token_distribution(row, SamplerConfig(repetition_penalty=2.0), [0, 1, 2])
    assert np.isnan(np.array(probs)).all()
    # Within the envelope the same config is a distribution.
    probs = effective_token_distribution(
        mx.array([-(2.0**64)] * 3), SamplerConfig(repetition_penalty=2.0), [0, 1, 2]
    )
    assert probs.tolist() == pytest.approx([1 / 3] * 3)
