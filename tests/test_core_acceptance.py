"""The acceptance primitives' exact contracts: boundaries, fallbacks and which uniform is read.

The statistical tests cannot see these (a boundary has measure zero, and any
uniform is as good as another in distribution), but a port that replays a
seeded run bit for bit depends on every one of them.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from specaccept import (
    AcceptanceRule,
    accept_draft_token,
    residual_distribution,
    residual_resample,
    sample_from_distribution,
    verify_draft_token,
    verify_tokenwise,
)


def test_the_accept_test_is_inclusive_at_u_q_equal_p() -> None:
    p, q = mx.array([0.25, 0.75]), mx.array([0.5, 0.5])
    got = [accept_draft_token(p, q, 0, u).item() for u in (0.25, 0.5, 0.5 + 2**-24, 0.75)]
    assert got == [True, True, False, False]
    # q[t] = 0 with p[t] > 0: always accepted (the ratio is infinite).
    assert accept_draft_token(mx.array([0.5, 0.5]), mx.array([1.0, 0.0]), 1, 0.999).item()


def test_residual_distribution_values_and_fallback() -> None:
    got = residual_distribution(mx.array([0.5, 0.25, 0.25]), mx.array([0.25, 0.5, 0.25]))
    assert got.tolist() == [1.0, 0.0, 0.0]
    got = residual_distribution(mx.array([0.5, 0.375, 0.125]), mx.array([0.25, 0.25, 0.5]))
    np.testing.assert_allclose(np.array(got), [2 / 3, 1 / 3, 0.0], rtol=1e-6)
    # No residual mass (p <= q everywhere): documented to fall back to p, not q.
    p, q = mx.array([0.5, 0.5, 0.0]), mx.array([0.5, 0.5, 0.25])
    assert residual_distribution(p, q).tolist() == [0.5, 0.5, 0.0]
    assert residual_distribution(p, p).tolist() == [0.5, 0.5, 0.0]
    # Per row of [k, V].
    rows = residual_distribution(mx.array([[0.5, 0.5], [1.0, 0.0]]),
                                 mx.array([[0.5, 0.5], [0.0, 1.0]]))
    assert rows.tolist() == [[0.5, 0.5], [1.0, 0.0]]
    assert residual_resample(mx.array([[0.5, 0.5], [0.25, 0.75]]),
                             mx.array([[0.5, 0.5], [0.75, 0.25]]), 0.75).tolist() == [1, 1]


def test_greedy_rule_breaks_ties_towards_the_lowest_id() -> None:
    p = mx.array([[0.25, 0.375, 0.375], [0.375, 0.25, 0.375]])
    for token, expected_accept in ((1, [True, False]), (2, [False, False]), (0, [False, True])):
        accepted, emitted = verify_draft_token(AcceptanceRule.GREEDY_ARGMAX, p, None,
                                               mx.array([token, token]), 0.5, 0.5)
        assert emitted.tolist() == [1, 0]
        assert accepted.tolist() == expected_accept


@pytest.mark.parametrize(
    "rule",
    [AcceptanceRule.SAMPLER_MATCH, AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION],
    ids=lambda r: r.value,
)
def test_sampler_match_draws_with_u_sample_and_ignores_u_accept(rule: AcceptanceRule) -> None:
    p = mx.array([0.125, 0.375, 0.0, 0.5])
    grid = mx.array([i / 16 for i in range(16)])
    ua, us = mx.repeat(grid, 16), mx.tile(grid, 16)
    rows = mx.broadcast_to(p, (256, 4))
    for token in range(4):
        accepted, emitted = verify_draft_token(rule, rows, None, token, ua, us)
        draw = sample_from_distribution(rows, us)
        assert emitted.tolist() == draw.tolist()
        assert accepted.tolist() == (draw == token).tolist()


def _int(value: mx.array) -> int:
    return int(np.asarray(value))


def _expected_round(
    rule: AcceptanceRule, target: mx.array, draft: mx.array, tokens: mx.array, u: mx.array
) -> tuple[int, int]:
    """verify_tokenwise spelled out: position i reads u[i, 0] to accept and u[i, 1] to sample."""
    k = tokens.shape[0]
    for i in range(k):
        t = _int(tokens[i])
        if rule is AcceptanceRule.STOCHASTIC:
            if not bool(np.asarray(accept_draft_token(target[i], draft[i], t, u[i, 0]))):
                return i, _int(residual_resample(target[i], draft[i], u[i, 1]))
        else:
            draw = _int(sample_from_distribution(target[i], u[i, 1]))
            if draw != t:
                return i, draw
    return k, _int(sample_from_distribution(target[k], u[k, 1]))


@pytest.mark.parametrize(
    "rule", [AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH], ids=lambda r: r.value
)
def test_verify_tokenwise_reads_the_documented_uniform_slots(rule: AcceptanceRule) -> None:
    rng = np.random.default_rng(12)
    vocab, k = 4, 3
    seen_accepts = set()
    for _ in range(60):
        target = rng.dirichlet(np.full(vocab, 0.6), size=k + 1).astype(np.float32)
        draft = rng.dirichlet(np.full(vocab, 0.6), size=k).astype(np.float32)
        # Drafts are often the target's likely tokens, so long accepted runs happen too.
        tokens = np.array([int(np.argmax(target[i])) if rng.random() < 0.7
                           else int(rng.integers(vocab)) for i in range(k)], dtype=np.int32)
        u = rng.random((k + 1, 2)).astype(np.float32)
        args = (mx.array(target), mx.array(draft), mx.array(tokens), mx.array(u))
        verdict = verify_tokenwise(rule, *args)
        got = (_int(verdict.num_accepted), _int(verdict.next_token))
        assert got == _expected_round(rule, *args)
        seen_accepts.add(got[0])
    assert seen_accepts == set(range(k + 1))  # every exit position was exercised
