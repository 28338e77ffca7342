"""Exact per-position losslessness, computed from `verify_draft_token` itself.

For a target law p and a draft token t drawn from q, a rule is lossless when
the emitted token is distributed exactly as p:

    sum_t q(t) * P(emit x | t) == p(x)   for every x.

P(emit x | t) is an integral over the two uniforms (u_accept, u_sample). Here it
is computed by evaluating the rule, batched, at the midpoints of a G x G grid of
the unit square, so nothing is sampled and the test is deterministic.

The bound. For a correct implementation every event the rule decides is an
interval of one uniform: stochastic accepts iff ``u_accept <= p(t)/q(t)`` and
both samplers are inverse-CDF draws, so "emit x" is an interval of u_sample.
The fraction of grid midpoints inside an interval differs from its length by at
most 1/G. Stochastic emits x given t with probability ``[x == t] A + (1 - A) B_x``
(A the accept interval, B_x the residual interval), whose grid value then
differs by at most ``|dA| + |dB_x| <= 2/G``; averaging over t with weights q(t)
keeps that bound. Sampler-match reads one interval (1/G) and greedy-argmax is
deterministic (0), so 2/G covers every rule; 1e-5 more absorbs float32 rounding
of p, q and of the interval endpoints. The acceptance frequency is a q-average
of one interval per t, so the same bound holds for it.
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import numpy as np
import numpy.typing as npt
import pytest

from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    accept_draft_token,
    acceptance_probability,
    effective_token_distribution,
    sample_from_distribution,
    verify_draft_token,
)

G = 256
BOUND = 2.0 / G + 1e-5

F64 = npt.NDArray[np.float64]
# (p rows, q rows or None, draft tokens, u_accept, u_sample) -> (accepted, emitted)
VerifyFn = Callable[
    [mx.array, mx.array | None, mx.array, mx.array, mx.array], tuple[mx.array, mx.array]
]


def _normalised(weights: npt.ArrayLike) -> mx.array:
    w = np.asarray(weights, dtype=np.float64)
    return mx.array((w / w.sum()).astype(np.float32))


def _instances() -> list[tuple[mx.array, mx.array]]:
    """Random small (p, q) pairs, V in 2..6, with zeros in either, plus hand-picked edges."""
    rng = np.random.default_rng(20240902)
    pairs: list[tuple[mx.array, mx.array]] = []
    for _ in range(60):
        v = int(rng.integers(2, 7))
        pq = []
        for _ in range(2):
            w = rng.gamma(0.7, size=v)
            w[rng.random(v) < 0.3] = 0.0  # p(x) = 0 and q(x) = 0 entries
            if w.sum() == 0.0:
                w[rng.integers(v)] = 1.0
            pq.append(_normalised(w))
        pairs.append((pq[0], pq[1]))
    edges = [
        ([0.9, 0.1], [0.1, 0.9]),
        ([1.0, 0.0], [0.0, 1.0]),  # disjoint supports: every draft rejected
        ([0.5, 0.5, 0.0], [0.0, 0.5, 0.5]),
        ([0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]),  # p == q: no residual mass
        ([0.3, 0.7], [0.95, 0.05]),
        ([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], [0.2, 0.2, 0.2, 0.2, 0.1, 0.1]),
        ([0.1, 0.2, 0.3, 0.4, 0.0, 0.0], [0.0, 0.0, 0.0, 0.5, 0.25, 0.25]),
    ]
    pairs += [(_normalised(p), _normalised(q)) for p, q in edges]
    return pairs


INSTANCES = _instances()


def _grid() -> tuple[mx.array, mx.array]:
    mid = (mx.arange(G, dtype=mx.float32) + 0.5) / G
    return mx.repeat(mid, G), mx.tile(mid, G)  # every (u_accept, u_sample) pair once


U_ACCEPT, U_SAMPLE = _grid()


def grid_law(verify: VerifyFn, p: mx.array, q: mx.array, pass_q: bool) -> tuple[F64, float]:
    """(law of the emitted token, acceptance frequency) over the grid, draft t weighted by q."""
    v = p.shape[0]
    n = G * G
    rows = v * n  # every draft token t against the whole grid, in one batched call
    tokens = mx.repeat(mx.arange(v, dtype=mx.int32), n)
    ua, us = mx.tile(U_ACCEPT, v), mx.tile(U_SAMPLE, v)
    p_rows = mx.broadcast_to(p, (rows, v))
    q_rows = mx.broadcast_to(q, (rows, v)) if pass_q else None
    accepted, emitted = verify(p_rows, q_rows, tokens, ua, us)
    hits = (emitted[:, None] == mx.arange(v)[None, :]).astype(mx.float32)
    per_token_law = hits.reshape(v, n, v).sum(axis=1)  # counts, exact in float32 (< 2**24)
    per_token_accept = accepted.astype(mx.float32).reshape(v, n).sum(axis=1)
    mx.eval(per_token_law, per_token_accept)
    weights = np.array(q, dtype=np.float64)
    law = weights @ (np.array(per_token_law, dtype=np.float64) / n)
    accept = float(weights @ (np.array(per_token_accept, dtype=np.float64) / n))
    return law, accept


def _rule_fn(rule: AcceptanceRule) -> VerifyFn:
    def verify(
        p: mx.array, q: mx.array | None, t: mx.array, ua: mx.array, us: mx.array
    ) -> tuple[mx.array, mx.array]:
        accepted, token = verify_draft_token(rule, p, q, t, ua, us)
        return accepted, token

    return verify


def _wrong_resample_from_p(
    p: mx.array, q: mx.array | None, t: mx.array, ua: mx.array, us: mx.array
) -> tuple[mx.array, mx.array]:
    """The naive mistake: the right accept test, but the replacement drawn from p itself."""
    assert q is not None
    accepted = accept_draft_token(p, q, t, ua)
    return accepted, mx.where(accepted, t, sample_from_distribution(p, us))


def _wrong_argmax_against_argmax(
    p: mx.array, q: mx.array | None, t: mx.array, ua: mx.array, us: mx.array
) -> tuple[mx.array, mx.array]:
    """The MTP/DFlash mistake: compare against the target's argmax whatever its temperature."""
    accepted, token = verify_draft_token(AcceptanceRule.GREEDY_ARGMAX, p, None, t, ua, us)
    return accepted, token


def _greedy_target(p: mx.array) -> mx.array:
    """The one-hot law of a greedy target whose logits are log p (zeros masked)."""
    return effective_token_distribution(mx.log(p), SamplerConfig(temperature=0.0))


@pytest.mark.parametrize(
    "rule", [r for r in AcceptanceRule if not r.verifies_jointly], ids=lambda r: r.value
)
def test_emitted_law_equals_target_law_on_the_grid(rule: AcceptanceRule) -> None:
    worst_law, worst_accept = 0.0, 0.0
    for p, q in INSTANCES:
        if rule is AcceptanceRule.GREEDY_ARGMAX:
            p = _greedy_target(p)
        law, accept = grid_law(_rule_fn(rule), p, q, pass_q=rule.needs_proposal_distribution)
        target = np.array(p, dtype=np.float64)
        law_error = float(np.abs(law - target).max())
        expected_accept = acceptance_probability(rule, p, q).item()
        accept_error = abs(accept - expected_accept)
        assert law_error <= BOUND, (rule, np.array(p), np.array(q), law, law_error)
        assert accept_error <= BOUND, (rule, np.array(p), np.array(q), accept, expected_accept)
        worst_law, worst_accept = max(worst_law, law_error), max(worst_accept, accept_error)
    print(
        f"\n{rule.value}: max |law - p| = {worst_law:.5f}, "
        f"max |accept - closed form| = {worst_accept:.5f}, bound = {BOUND:.5f}"
    )


def test_greedy_rule_is_exact_on_a_greedy_target() -> None:
    # A deterministic rule has no grid error at all: demand equality, not the bound.
    for p, q in INSTANCES:
        target = _greedy_target(p)
        law, accept = grid_law(_rule_fn(AcceptanceRule.GREEDY_ARGMAX), target, q, pass_q=False)
        np.testing.assert_allclose(law, np.array(target, dtype=np.float64), rtol=0, atol=1e-6)
        winner = int(np.argmax(np.array(p)))
        assert accept == pytest.approx(float(np.array(q)[winner]), abs=1e-6)


@pytest.mark.parametrize(
    "wrong",
    [_wrong_resample_from_p, _wrong_argmax_against_argmax],
    ids=["resample-from-p", "argmax-against-argmax"],
)
def test_wrong_rules_fail_the_same_bound(wrong: VerifyFn) -> None:
    errors = []
    for p, q in INSTANCES:
        law, _ = grid_law(wrong, p, q, pass_q=True)
        errors.append(float(np.abs(law - np.array(p, dtype=np.float64)).max()))
    failing = sum(e > BOUND for e in errors)
    print(
        f"\n{wrong.__name__}: max |law - p| = {max(errors):.5f} (bound {BOUND:.5f}), "
        f"{failing}/{len(errors)} instances out of bound"
    )
    assert max(errors) > 10 * BOUND
