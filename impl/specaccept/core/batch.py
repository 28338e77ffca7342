"""Batched verification: the rounds of many requests in one ragged layout, verified as a map.

A serving engine verifies the rounds of every running request in one call: their target
rows stacked as ``[Σ (k_r + 1), V]`` with offsets, greedy and sampled requests mixed, each
with its own seed. Nothing in the rules changes: request r's verdict is the verdict of its
own round, computed by `verify_tokenwise` or `verify_blockwise` on its rows alone, so it
cannot depend on its batch-mates, on how the batch is chunked, or on which shard of a
tensor-parallel group verifies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import mlx.core as mx

from specaccept.core import randomness, validation
from specaccept.core.acceptance import AcceptanceRule, verify_tokenwise
from specaccept.core.joint import verify_blockwise
from specaccept.core.sampling import sample_from_distribution

__all__ = ["BatchVerdict", "batch_uniforms", "verify_batch"]


class BatchVerdict(NamedTuple):
    """The verdicts of R requests: request r emits its first ``num_accepted[r]`` drafts, then
    ``next_token[r]``."""

    num_accepted: mx.array
    """`[R]` int32, request r's accepted prefix length, in [0, k_r]."""
    next_token: mx.array
    """`[R]` int32, request r's replacement at its first rejection, or its bonus token."""


def _row_offsets(cu_num_rows: object, total_rows: int) -> list[int]:
    """The offsets, checked: Python ints, 0 first, `total_rows` last, each request one row
    or more (its bonus row)."""
    if isinstance(cu_num_rows, str | bytes) or not isinstance(cu_num_rows, Sequence):
        raise TypeError(
            f"cu_num_rows must be a sequence of ints, got {type(cu_num_rows).__name__}")
    offsets = [validation.integer(f"cu_num_rows[{i}]", v) for i, v in enumerate(cu_num_rows)]
    if len(offsets) < 2 or offsets[0] != 0 or offsets[-1] != total_rows:
        raise ValueError(
            f"cu_num_rows must run from 0 to the number of rows {total_rows} with one entry "
            f"per request and one more, got {offsets}")
    for r in range(len(offsets) - 1):
        if offsets[r + 1] <= offsets[r]:
            raise ValueError(
                f"cu_num_rows must increase: request {r} needs its bonus row, got {offsets}")
    return offsets


def verify_batch(
    rules: Sequence[AcceptanceRule],
    target_probs: mx.array,
    draft_probs: mx.array | None,
    draft_tokens: mx.array,
    cu_num_rows: Sequence[int],
    uniforms: mx.array,
) -> BatchVerdict:
    """Verify the rounds of R requests laid out ragged, each under its own rule.

    Request r owns rows ``cu_num_rows[r] : cu_num_rows[r + 1]`` of every array: ``k_r + 1``
    rows for ``k_r`` drafts. In those rows, row i < k_r holds draft i (`draft_tokens`), the
    law it was drawn from (`draft_probs`) and the target's law after the drafts before it
    (`target_probs`); row k_r holds the target's law after all of them, for the bonus
    token, and its entries of `draft_tokens` and `draft_probs` are never read. Request r's
    verdict is ``verify_tokenwise(rules[r], ...)`` on its rows (``verify_blockwise`` when
    its rule is block); a request with no drafts (k_r = 0) takes the target's own step:
    the argmax of its row under greedy-argmax, else the draw with ``uniforms[row, 1]``.
    Placeholder ids (outside [0, V), such as -1) end a request's round as they end any
    round; a stale draft is passed as one.

    Args:
        rules: R rules, one per request (greedy and sampling requests mixed).
        target_probs: `[Σ (k_r + 1), V]` float32.
        draft_probs: `[Σ (k_r + 1), V]` float32, or None when no rule reads q.
        draft_tokens: `[Σ (k_r + 1)]` ids of any integer dtype.
        cu_num_rows: R + 1 Python ints, 0 first, increasing, the number of rows last.
        uniforms: `[Σ (k_r + 1), 2]` float, values in [0, 1), in `verify_tokenwise`'s layout
            per request (`batch_uniforms` keys them by request).

    Raises:
        TypeError: an argument has the wrong type or dtype.
        ValueError: a bad shape, bad offsets, or a missing `draft_probs` a rule needs.

    >>> import mlx.core as mx
    >>> rows = mx.array([[0.5, 0.5], [0.25, 0.75], [0.0, 1.0]])
    >>> rules = [AcceptanceRule.STOCHASTIC, AcceptanceRule.GREEDY_ARGMAX]
    >>> verdict = verify_batch(rules, rows, rows, mx.array([1, -1, -1]), [0, 2, 3],
    ...                        mx.array([[0.5, 0.0], [0.0, 0.5], [0.0, 0.0]]))
    >>> verdict.num_accepted.tolist(), verdict.next_token.tolist()
    ([1, 0], [1, 1])
    """
    target_probs = validation.require_probabilities("target_probs", target_probs, ndims=(2,))
    total = target_probs.shape[0]
    offsets = _row_offsets(cu_num_rows, total)
    if isinstance(rules, str | bytes) or not isinstance(rules, Sequence):
        raise TypeError(f"rules must be a sequence of AcceptanceRule, got {type(rules).__name__}")
    if len(rules) != len(offsets) - 1:
        raise ValueError(
            f"rules must hold one rule per request ({len(offsets) - 1}), got {len(rules)}")
    for r, rule in enumerate(rules):
        if not isinstance(rule, AcceptanceRule):
            raise TypeError(f"rules[{r}] must be an AcceptanceRule, got {rule!r}")
    draft_tokens = validation.require_array("draft_tokens", draft_tokens)
    if not mx.issubdtype(draft_tokens.dtype, mx.integer):
        raise TypeError(f"draft_tokens must be an integer array, got {draft_tokens.dtype}")
    if tuple(draft_tokens.shape) != (total,):
        raise ValueError(f"draft_tokens must have shape ({total},), got {draft_tokens.shape}")
    uniforms = validation.uniform("uniforms", validation.require_array("uniforms", uniforms),
                                  batch_shape=(total, 2))
    if draft_probs is not None:
        draft_probs = validation.require_probabilities("draft_probs", draft_probs, ndims=(2,))
        validation.require_same_shape("target_probs", target_probs, "draft_probs", draft_probs)
    else:
        for rule in rules:
            if rule.needs_proposal_distribution:
                raise ValueError(f"draft_probs is required by rule {rule.value!r}, got None")

    accepted: list[mx.array] = []
    emitted: list[mx.array] = []
    for r, rule in enumerate(rules):
        start, stop = offsets[r], offsets[r + 1]
        k = stop - start - 1
        p, u = target_probs[start:stop], uniforms[start:stop]
        if k == 0:
            accepted.append(mx.array(0, dtype=mx.int32))
            if rule is AcceptanceRule.GREEDY_ARGMAX:
                emitted.append(mx.argmax(p[0]).astype(mx.int32))
            else:
                emitted.append(sample_from_distribution(p[0], u[0, 1]))
            continue
        q = None if draft_probs is None or not rule.needs_proposal_distribution else (
            draft_probs[start:stop - 1])
        drafts = draft_tokens[start:stop - 1]
        if rule.verifies_jointly:
            assert q is not None
            verdict = verify_blockwise(p, q, drafts, u)
            accepted.append(verdict.num_accepted)
            emitted.append(verdict.next_token)
        else:
            tokenwise = verify_tokenwise(rule, p, q, drafts, u)
            accepted.append(tokenwise.num_accepted)
            emitted.append(tokenwise.next_token)
    return BatchVerdict(mx.stack(accepted), mx.stack(emitted))


def batch_uniforms(
    seeds: Sequence[int], round_positions: Sequence[int], cu_num_rows: Sequence[int]
) -> mx.array:
    """The `[Σ (k_r + 1), 2]` uniforms of a batch: request r's rows are its own round's,
    ``round_uniforms(seeds[r], round_positions[r], k_r).verify``.

    A request's coins are a function of its own seed, round position and draft count, never
    of its batch-mates or its place in the batch. Requests with equal seeds read equal coins
    at equal positions, so an engine that derives per-request seeds MUST give distinct
    requests distinct seeds, all 64 bits of which enter the hash.

    >>> u = batch_uniforms([7, 7 + 2**32], [0, 0], [0, 2, 4])
    >>> u.shape, u[:2].tolist() == u[2:].tolist()
    ((4, 2), False)
    """
    for name, values in (("seeds", seeds), ("round_positions", round_positions)):
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise TypeError(f"{name} must be a sequence of ints, got {type(values).__name__}")
    if isinstance(cu_num_rows, str | bytes) or not isinstance(cu_num_rows, Sequence) or (
            not cu_num_rows):
        raise TypeError(f"cu_num_rows must be a non-empty sequence of ints, got {cu_num_rows!r}")
    offsets = _row_offsets(cu_num_rows, validation.integer("cu_num_rows[-1]", cu_num_rows[-1]))
    requests = len(offsets) - 1
    if len(seeds) != requests or len(round_positions) != requests:
        raise ValueError(
            f"seeds and round_positions must hold one entry per request ({requests}), got "
            f"{len(seeds)} and {len(round_positions)}")
    rows: list[list[float]] = []
    for r in range(requests):
        num_drafts = offsets[r + 1] - offsets[r] - 1
        rows.extend(randomness.round_uniforms(seeds[r], round_positions[r], num_drafts).verify)
    return mx.array(rows, dtype=mx.float32)
