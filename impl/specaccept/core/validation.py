"""Eager argument validation shared by the core functions.

Every check here looks only at Python values, shapes and dtypes, never at array
contents: reading an array's values would force an evaluation, and the core
stays lazy so that the caller pays one evaluation per speculative round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeAlias

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


def token_history(name: str, value: object, *, vocab_size: int) -> mx.array:
    """A 1-d int32 array of token ids; Python ids are range-checked now."""
    if isinstance(value, mx.array):
        if value.ndim != 1:
            raise ValueError(f"{name} must be 1-d, got shape {tuple(value.shape)}")
        if value.size and not mx.issubdtype(value.dtype, mx.integer):
            raise TypeError(f"{name} must be an integer array, got {value.dtype}")
        return value.astype(mx.int32)
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
