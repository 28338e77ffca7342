"""Eager argument validation shared by the core functions.

Every check here looks only at Python values, shapes and dtypes, never at array
contents: reading an array's values would force an evaluation, and the core
stays lazy so that the caller pays one evaluation per speculative round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, TypeAlias

import mlx.core as mx

Scalar: TypeAlias = "int | float | mx.array"
"""A Python number or a 0-d array."""

TokenIds: TypeAlias = "Sequence[int] | mx.array"
"""A token history, as a Python sequence of ids or a 1-d integer array."""


def require_array(name: str, value: object) -> mx.array:
    if not isinstance(value, mx.array):
        raise TypeError(f"{name} must be an mlx.core.array, got {type(value).__name__}")
    return value


def require_probabilities(name: str, value: object, *, ndims: tuple[int, ...]) -> mx.array:
    """A float32 probability array with one of the allowed ranks."""
    array = require_array(name, value)
    if array.ndim not in ndims:
        allowed = " or ".join(f"{n}-d" for n in ndims)
        raise ValueError(f"{name} must be {allowed}, got shape {tuple(array.shape)}")
    if array.dtype != mx.float32:
        raise TypeError(f"{name} must be float32, got {array.dtype}: {_why_float32(array.dtype)}")
    if array.shape[-1] < 1:
        raise ValueError(f"{name} must have a non-empty vocabulary axis, got {tuple(array.shape)}")
    if array.ndim == 2 and array.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one row, got shape {tuple(array.shape)}")
    return array


def _why_float32(dtype: mx.Dtype) -> str:
    if dtype in (mx.float16, mx.bfloat16):
        return (
            "half-precision probabilities underflow below ~6e-8, turning small ratios into "
            "certain accepts or rejects"
        )
    if mx.issubdtype(dtype, mx.floating):
        return "every rule is specified in float32; convert with .astype(mx.float32)"
    return "probabilities are real weights, not integers or booleans"


def require_same_shape(name_a: str, a: mx.array, name_b: str, b: mx.array) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape (same vocabulary), "
            f"got {tuple(a.shape)} and {tuple(b.shape)}"
        )


def uniform(name: str, value: object, *, batch_shape: tuple[int, ...]) -> mx.array:
    """A uniform in [0, 1): a Python number (checked now) or a float array of `batch_shape`.

    The values of an array are a documented precondition, not checked, because
    reading them would force an evaluation.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number in [0, 1), got bool {value!r}")
    if isinstance(value, int | float):
        if not (math.isfinite(value) and 0.0 <= value < 1.0):
            raise ValueError(f"{name} must lie in [0, 1), got {value!r}")
        if batch_shape:
            return mx.full(batch_shape, value, dtype=mx.float32)
        return mx.array(value, dtype=mx.float32)
    if isinstance(value, mx.array):
        if not mx.issubdtype(value.dtype, mx.floating):
            raise TypeError(f"{name} must be a floating array, got {value.dtype}")
        if tuple(value.shape) != batch_shape:
            raise ValueError(f"{name} must have shape {batch_shape}, got {tuple(value.shape)}")
        return value.astype(mx.float32)
    raise TypeError(f"{name} must be a float or an mlx.core.array, got {type(value).__name__}")


def token_id(
    name: str, value: object, *, vocab_size: int, batch_shape: tuple[int, ...]
) -> mx.array:
    """A token id: a Python int in range (checked now) or an integer array of `batch_shape`."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer token id, got bool {value!r}")
    if isinstance(value, int):
        if not 0 <= value < vocab_size:
            raise ValueError(f"{name} must lie in [0, {vocab_size}), got {value}")
        if batch_shape:
            return mx.full(batch_shape, value, dtype=mx.int32)
        return mx.array(value, dtype=mx.int32)
    if isinstance(value, mx.array):
        if not mx.issubdtype(value.dtype, mx.integer):
            raise TypeError(f"{name} must be an integer array, got {value.dtype}")
        if tuple(value.shape) != batch_shape:
            raise ValueError(f"{name} must have shape {batch_shape}, got {tuple(value.shape)}")
        return value.astype(mx.int32)
    raise TypeError(f"{name} must be an int or an mlx.core.array, got {type(value).__name__}")


class DraftIds(NamedTuple):
    """Draft ids made safe to gather with: a clamped index and which ids are real drafts."""

    clamped: mx.array
    """int32: the id where it lies in [0, V), else 0, so no gather reads outside a row."""
    valid: mx.array
    """bool: ``0 <= id < V``; an id outside (a negative placeholder included) is no draft."""


def in_vocabulary(ids: mx.array, vocab_size: int) -> mx.array:
    """``0 <= id < vocab_size`` per entry (bool), compared before any narrowing to int32.

    Narrowing first would wrap an int64 id 2**32 to 0 and a uint32 id 2**32 - 1 to -1;
    int64 holds every id of every narrower dtype, and uint64 ids are never negative.
    """
    if ids.dtype == mx.uint64:
        return ids < vocab_size
    wide = ids.astype(mx.int64)
    return mx.logical_and(wide >= 0, wide < vocab_size)


def draft_ids(
    name: str, value: object, *, vocab_size: int, batch_shape: tuple[int, ...]
) -> DraftIds:
    """Draft ids as `token_id` checks them, with an id outside [0, V) in an array made no draft.

    A Python int outside [0, V) raises now; in an array (where a serving engine pads
    with placeholders such as -1 or ids past the vocabulary) it is flagged invalid and
    gathered through index 0, lazily, with no evaluation.
    """
    if isinstance(value, mx.array) and mx.issubdtype(value.dtype, mx.integer):
        if tuple(value.shape) != batch_shape:
            raise ValueError(f"{name} must have shape {batch_shape}, got {tuple(value.shape)}")
        valid = in_vocabulary(value, vocab_size)
        return DraftIds(mx.where(valid, value, 0).astype(mx.int32), valid)
    ids = token_id(name, value, vocab_size=vocab_size, batch_shape=batch_shape)
    return DraftIds(ids, mx.ones(ids.shape, dtype=mx.bool_))


NO_TOKEN = -1
"""What `token_history` makes of an array id outside [0, V): no penalty counts it."""


def token_history(name: str, value: object, *, vocab_size: int) -> mx.array:
    """A 1-d int32 array of token ids; Python ids are range-checked now.

    In an array, an id outside [0, V) (padding, say) is no token and becomes `NO_TOKEN`,
    lazily: the penalties count no such id, and DRY reads it as a sequence breaker.
    """
    if isinstance(value, mx.array):
        if value.ndim != 1:
            raise ValueError(f"{name} must be 1-d, got shape {tuple(value.shape)}")
        if not value.size:
            return value.astype(mx.int32)
        if not mx.issubdtype(value.dtype, mx.integer):
            raise TypeError(f"{name} must be an integer array, got {value.dtype}")
        valid = in_vocabulary(value, vocab_size)
        return mx.where(valid, mx.where(valid, value, 0).astype(mx.int32), NO_TOKEN)
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a sequence of token ids, got {type(value).__name__}")
    pieces: list[mx.array] = []
    for position, item in enumerate(value):
        pieces.append(
            token_id(f"{name}[{position}]", item, vocab_size=vocab_size, batch_shape=()).reshape(1)
        )
    if not pieces:
        return mx.zeros((0,), dtype=mx.int32)
    return mx.concatenate(pieces)


def real(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


def integer(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return value


class RoundArguments(NamedTuple):
    """A verified round's arguments, checked: the arrays, k, and the vocabulary size."""

    target_probs: mx.array
    draft_probs: mx.array | None
    draft_tokens: DraftIds
    uniforms: mx.array
    num_drafts: int
    vocab_size: int


def round_arguments(
    target_probs: object,
    draft_probs: object,
    draft_tokens: object,
    uniforms: object,
    *,
    draft_probs_required: str | None,
    draft_probs_may_be_none: bool = True,
) -> RoundArguments:
    """Check the four arrays that verify a round of k drafts, in one order for every verifier.

    `target_probs` is `[k+1, V]` float32, `draft_tokens` `[k]` integer ids with k >= 1,
    `uniforms` `[k+1, 2]` float, and `draft_probs` `[k, V]` float32. A None `draft_probs`
    is a TypeError where the verifier's signature does not allow it
    (`draft_probs_may_be_none` False), and a ValueError where `draft_probs_required` names
    the rule that needs it. The returned `draft_tokens` are `DraftIds` (an id outside [0, V)
    is no draft) and `uniforms` float32.
    """
    target_probs = require_probabilities("target_probs", target_probs, ndims=(2,))
    draft_tokens = require_array("draft_tokens", draft_tokens)
    if draft_tokens.ndim != 1 or draft_tokens.shape[0] < 1:
        raise ValueError(f"draft_tokens must be [k] with k >= 1, got {tuple(draft_tokens.shape)}")
    k = draft_tokens.shape[0]
    vocab_size = target_probs.shape[1]
    if target_probs.shape[0] != k + 1:
        raise ValueError(
            f"target_probs must be [k+1, V] = [{k + 1}, V] for {k} drafts, "
            f"got {tuple(target_probs.shape)}"
        )
    tokens = draft_ids("draft_tokens", draft_tokens, vocab_size=vocab_size, batch_shape=(k,))
    uniforms = require_array("uniforms", uniforms)
    if tuple(uniforms.shape) != (k + 1, 2):
        raise ValueError(f"uniforms must be [k+1, 2] = [{k + 1}, 2], got {tuple(uniforms.shape)}")
    u = uniform("uniforms", uniforms, batch_shape=(k + 1, 2))
    if draft_probs is None and draft_probs_may_be_none:
        if draft_probs_required is not None:
            raise ValueError(f"draft_probs is required by {draft_probs_required}, got None")
        return RoundArguments(target_probs, None, tokens, u, k, vocab_size)
    checked = require_probabilities("draft_probs", draft_probs, ndims=(2,))
    if tuple(checked.shape) != (k, vocab_size):
        raise ValueError(
            f"draft_probs must be [k, V] = [{k}, {vocab_size}] like target_probs, "
            f"got {tuple(checked.shape)}"
        )
    return RoundArguments(target_probs, checked, tokens, u, k, vocab_size)
