"""Zero-tolerance properties: where a goodness-of-fit test is blind, one wrong token fails.

A chi-square cannot see a single token outside the target's support, so these
tests assert support properties exactly, over many batched trials.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import numpy.typing as npt
import pytest

from block_adapter import BlockFn, rule_block
from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    accept_draft_token,
    effective_token_distribution,
    residual_resample,
    sample_from_distribution,
    verify_draft_token,
)

VOCAB = 6
LOGITS = mx.array([1.6, 1.0, 0.4, 0.0, -0.6, -1.2])
TOP2_TARGET = effective_token_distribution(LOGITS, SamplerConfig(temperature=0.7, top_k=2))
UNFILTERED_DRAFTER = effective_token_distribution(mx.array([0.0, 0.2, 0.5, 0.9, 0.4, 1.1]),
                                                  SamplerConfig(temperature=1.0))

def _wrong_swapped_residual(
    target: mx.array, draft: mx.array, tokens: mx.array, uniforms: mx.array
) -> tuple[mx.array, mx.array]:
    """A sign slip, relu(q - p) for relu(p - q): the replacement lands where q exceeds p."""
    k = tokens.shape[0]
    accepted = accept_draft_token(target[:k], draft, tokens, uniforms[:k, 0])
    replacement = residual_resample(draft, target[:k], uniforms[:k, 1])
    emitted = mx.where(accepted, tokens, replacement)
    bonus = sample_from_distribution(target[k:], uniforms[k:, 1])
    num_accepted = mx.cumprod(accepted.astype(mx.int32)).sum().astype(mx.int32)
    return num_accepted, mx.concatenate([emitted, bonus])[num_accepted]


def _emitted(block: BlockFn, rounds: int, k: int, seed: int) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    keys = mx.random.split(mx.random.key(seed), 2)
    draft_u = mx.random.uniform(shape=(rounds * k,), key=keys[0])
    drafts = sample_from_distribution(
        mx.broadcast_to(UNFILTERED_DRAFTER, (rounds * k, VOCAB)), draft_u
    ).reshape(rounds, k)
    uniforms = mx.random.uniform(shape=(rounds, k + 1, 2), key=keys[1])
    target = mx.broadcast_to(TOP2_TARGET, (rounds, k + 1, VOCAB))
    draft = mx.broadcast_to(UNFILTERED_DRAFTER, (rounds, k, VOCAB))
    num_accepted, next_token = mx.vmap(block)(target, draft, drafts, uniforms)
    mx.eval(drafts, num_accepted, next_token)
    d = np.array(drafts, dtype=np.int64)
    a = np.array(num_accepted, dtype=np.int64)
    kept = np.arange(k)[None, :] < a[:, None]
    return np.concatenate([d[kept], np.array(next_token, dtype=np.int64)]), d


@pytest.mark.parametrize(
    "rule", [AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH], ids=lambda r: r.value
)
def test_filtered_target_support_is_never_violated(rule: AcceptanceRule) -> None:
    support = set(np.flatnonzero(np.array(TOP2_TARGET)).tolist())
    assert support == {0, 1}
    tokens, drafts = _emitted(rule_block(rule), rounds=3000, k=4, seed=11)
    outside = ~np.isin(tokens, list(support))
    proposed_outside = int((~np.isin(drafts, list(support))).sum())
    print(f"\n{rule.value}: {tokens.size} emitted, {proposed_outside} drafts proposed outside "
          f"the support, {int(outside.sum())} emitted outside")
    assert proposed_outside > 1000  # the drafter really does propose excluded tokens
    assert not outside.any(), np.unique(tokens[outside])


def test_the_support_check_catches_a_swapped_residual() -> None:
    tokens, _ = _emitted(_wrong_swapped_residual, rounds=3000, k=4, seed=11)
    outside = int((~np.isin(tokens, [0, 1])).sum())
    print(f"\nswapped residual: {outside} of {tokens.size} emitted outside the support")
    assert outside > 0


def _underflow_cases(seed: int, trials: int) -> tuple[mx.array, mx.array, mx.array]:
    """Rows (p, q, t) where the 'proposed' token t has p[t] = 0 and q[t] = 0 (underflowed)."""
    rng = np.random.default_rng(seed)
    ps, qs, ts = [], [], []
    for _ in range(trials):
        v = int(rng.integers(2, 9))
        t = int(rng.integers(v))
        p, q = rng.gamma(0.8, size=v) + 1e-3, rng.gamma(0.8, size=v) + 1e-3
        p[t] = q[t] = 0.0
        ps.append(np.pad(p / p.sum(), (0, 8 - v)))
        qs.append(np.pad(q / q.sum(), (0, 8 - v)))
        ts.append(t)
    return (mx.array(np.array(ps, dtype=np.float32)), mx.array(np.array(qs, dtype=np.float32)),
            mx.array(np.array(ts, dtype=np.int32)))


UNDERFLOW_US = np.concatenate([[0.0, 2.0**-24, 2.0**-12, 1.0 - 2.0**-24],
                               (np.arange(60) + 0.5) / 60]).astype(np.float32)


def _tile_over_u(
    p: mx.array, q: mx.array, t: mx.array
) -> tuple[mx.array, mx.array, mx.array, mx.array]:
    n, m = p.shape[0], UNDERFLOW_US.size
    u = mx.array(np.tile(UNDERFLOW_US, n))
    return mx.repeat(p, m, axis=0), mx.repeat(q, m, axis=0), mx.repeat(t, m), u


def test_underflowed_proposal_mass_never_admits_an_excluded_token() -> None:
    p, q, t, u = _tile_over_u(*_underflow_cases(seed=3, trials=300))
    accepted = accept_draft_token(p, q, t, u)
    verdict = verify_draft_token(AcceptanceRule.STOCHASTIC, p, q, t, u, u)
    mx.eval(accepted, verdict.token)
    assert not np.array(accepted).any()
    emitted = np.array(verdict.token)
    assert (np.take_along_axis(np.array(p), emitted[:, None], axis=1) > 0).all()


def test_the_accept_test_without_its_support_conjunct_would_admit_it() -> None:
    # The first conjunct of `p[t] > 0 and u * q[t] <= p[t]` is load-bearing: the product
    # test alone reads 0 <= 0 and admits the excluded token, which the test above forbids.
    p, q, t, u = _tile_over_u(*_underflow_cases(seed=3, trials=300))
    p_t = mx.take_along_axis(p, t[:, None], axis=1)[:, 0]
    q_t = mx.take_along_axis(q, t[:, None], axis=1)[:, 0]
    naive = u * q_t <= p_t
    assert np.array(naive).all()


def test_residual_resample_only_emits_tokens_where_p_exceeds_q() -> None:
    rng = np.random.default_rng(5)
    rows, us_per_row, v = 400, 128, 8
    p = rng.gamma(0.6, size=(rows, v))
    q = rng.gamma(0.6, size=(rows, v))
    p[rng.random((rows, v)) < 0.25] = 0.0
    q[rng.random((rows, v)) < 0.25] = 0.0
    p[:, 0] += 1e-3  # keep every row a distribution
    q[:, 1] += 1e-3
    p32 = (p / p.sum(axis=1, keepdims=True)).astype(np.float32)
    q32 = (q / q.sum(axis=1, keepdims=True)).astype(np.float32)
    # A few rows where p and q differ by one ulp in two entries: the residual is a rounding
    # crumb at token 0, and must still be the only thing drawn.
    q32[:20] = p32[:20]
    q32[:20, 0] = np.nextafter(p32[:20, 0], np.float32(0.0))
    q32[:20, 1] = np.nextafter(p32[:20, 1], np.float32(1.0))
    # p <= q everywhere leaves no residual and documentedly falls back to p; exclude it.
    assert ((p32 - q32) > 0).any(axis=1).all()
    u = rng.random(rows * us_per_row).astype(np.float32)
    u[:us_per_row] = np.float32(1.0 - 2.0**-24)
    p_rows = mx.repeat(mx.array(p32), us_per_row, axis=0)
    q_rows = mx.repeat(mx.array(q32), us_per_row, axis=0)
    token = np.array(residual_resample(p_rows, q_rows, mx.array(u)))
    p_t = np.take_along_axis(np.repeat(p32, us_per_row, axis=0), token[:, None], axis=1)
    q_t = np.take_along_axis(np.repeat(q32, us_per_row, axis=0), token[:, None], axis=1)
    assert (p_t > q_t).all()
