"""The round functions under `mx.vmap` equal the same calls made one by one.

MLX 0.32 drops the batch axis of `a & b` when only `b` is batched, so a vmap over
the uniforms alone (the rows shared) returned one sample's verdict and token for every
sample, silently. The functions use `mx.logical_and`, which keeps it; these tests vmap each
public function over the uniforms alone, and over every argument, and compare with a loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

from specaccept import (
    AcceptanceRule,
    accept_draft_token,
    residual_resample,
    sample_from_distribution,
    verify_blockwise,
    verify_draft_token,
    verify_tokenwise,
)

BATCH = 48
TOKEN_RULES = [rule for rule in AcceptanceRule if not rule.verifies_jointly]


def _rows(rng: np.random.Generator, count: int, vocab: int) -> mx.array:
    rows = rng.dirichlet(np.full(vocab, 0.5), size=count)
    rows[:, rng.integers(0, vocab)] = 0.0  # a zero, so support matters
    rows[:, 0] += 1e-3
    return mx.array((rows / rows.sum(axis=1, keepdims=True)).astype(np.float32))


def _fields(result: Any) -> list[mx.array]:
    return list(result) if isinstance(result, tuple) else [result]


def _assert_vmap_is_the_loop(function: Callable[..., Any], arguments: list[mx.array],
                             batched: list[bool]) -> None:
    axes = tuple(0 if b else None for b in arguments and batched)
    mapped = _fields(mx.vmap(function, in_axes=axes)(*arguments))
    looped = [_fields(function(*[a[i] if b else a for a, b in zip(arguments, batched,
                                                                    strict=True)]))
              for i in range(BATCH)]
    for index, field in enumerate(mapped):
        expected = np.stack([np.array(one[index]) for one in looped])
        assert np.array_equal(np.array(field), expected), (index, field, expected)


@pytest.mark.parametrize("vocab", [2, 7, 33])
@pytest.mark.parametrize("share_rows", [True, False], ids=["uniforms only", "every argument"])
def test_sample_and_accept_under_vmap(vocab: int, share_rows: bool) -> None:
    rng = np.random.default_rng(vocab)
    p, q = _rows(rng, BATCH, vocab), _rows(rng, BATCH, vocab)
    tokens = mx.array(rng.integers(0, vocab, size=BATCH).astype(np.int32))
    u = mx.array(rng.random(BATCH).astype(np.float32))
    rows = [not share_rows]
    if share_rows:
        p, q, tokens = p[0], q[0], tokens[0]
    _assert_vmap_is_the_loop(sample_from_distribution, [p, u], [*rows, True])
    _assert_vmap_is_the_loop(accept_draft_token, [p, q, tokens, u], [*rows * 3, True])
    _assert_vmap_is_the_loop(residual_resample, [p, q, u], [*rows * 2, True])


@pytest.mark.parametrize("rule", TOKEN_RULES, ids=lambda r: r.value)
@pytest.mark.parametrize("share_rows", [True, False], ids=["uniforms only", "every argument"])
def test_verify_draft_token_and_verify_tokenwise_under_vmap(
    rule: AcceptanceRule, share_rows: bool
) -> None:
    rng = np.random.default_rng(3)
    vocab, k = 6, 3
    p, q = _rows(rng, BATCH * (k + 1), vocab), _rows(rng, BATCH * k, vocab)
    p3, q3 = p.reshape(BATCH, k + 1, vocab), q.reshape(BATCH, k, vocab)
    drafts = mx.array(rng.integers(0, vocab, size=(BATCH, k)).astype(np.int32))
    uniforms = mx.array(rng.random((BATCH, k + 1, 2)).astype(np.float32))
    if share_rows:
        p3, q3, drafts = p3[0], q3[0], drafts[0]
    rows = [not share_rows]

    def block(p: mx.array, q: mx.array, d: mx.array, u: mx.array) -> Any:
        return verify_tokenwise(rule, p, q, d, u)

    _assert_vmap_is_the_loop(block, [p3, q3, drafts, uniforms], [*rows * 3, True])

    def one(p: mx.array, q: mx.array, d: mx.array, u: mx.array) -> Any:
        return verify_draft_token(rule, p[0], q[0], d[0], u[0, 0], u[0, 1])

    _assert_vmap_is_the_loop(one, [p3, q3, drafts, uniforms], [*rows * 3, True])


@pytest.mark.parametrize("share_rows", [True, False], ids=["uniforms only", "every argument"])
def test_verify_blockwise_under_vmap(share_rows: bool) -> None:
    rng = np.random.default_rng(5)
    vocab, k = 5, 3
    p = _rows(rng, BATCH * (k + 1), vocab).reshape(BATCH, k + 1, vocab)
    q = _rows(rng, BATCH * k, vocab).reshape(BATCH, k, vocab)
    drafts = mx.array(rng.integers(0, vocab, size=(BATCH, k)).astype(np.int32))
    uniforms = mx.array(rng.random((BATCH, k + 1, 2)).astype(np.float32))
    if share_rows:
        p, q, drafts = p[0], q[0], drafts[0]
    _assert_vmap_is_the_loop(lambda *a: tuple(verify_blockwise(*a)),
                             [p, q, drafts, uniforms], [not share_rows] * 3 + [True])


def test_mlx_still_drops_the_batch_axis_of_a_mixed_and() -> None:
    # The MLX behaviour the functions work around (an unbatched left operand of &); when this
    # fails, MLX fixed it and the logical_and comments can go.
    shared, u = mx.array(0.5), mx.array([0.1, 0.9, 0.3])
    assert mx.vmap(lambda u: (shared > 0) & (u <= shared))(u).tolist() == [True]
    kept = mx.vmap(lambda u: mx.logical_and(shared > 0, u <= shared))(u)
    assert kept.tolist() == [True, False, True]
