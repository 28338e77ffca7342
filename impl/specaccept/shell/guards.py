"""The row guard: which rows of logits, and of the laws drawn from them, decide nothing.

A model's output row has no distribution when it holds NaN or +inf, or is -inf for
every token; a sampler law has none when it is not finite with a positive sum. Each
row gets a `RowCode`, computed lazily beside the round's other work so that the codes
ride along the round's one host synchronisation; `raise_on_invalid` then refuses the
first row that decided a token, so no token is ever drawn from NaN.

`invalid_rows` is the reference guard, written as the definition reads;
`specaccept.shell.fused.invalid_row_codes` computes the same codes in fewer passes.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

import mlx.core as mx

__all__ = ["NonFiniteLogitsError", "RowCode", "check_width", "invalid_rows", "raise_on_invalid"]


class NonFiniteLogitsError(ValueError):
    """A model produced logits with no distribution: NaN or +inf, or -inf for every token."""


class RowCode(IntEnum):
    """A row's verdict, the int32 value of the guard's output."""

    VALID = 0
    NOT_FINITE = 1
    """NaN or +inf logits."""
    ALL_MASKED = 2
    """-inf for every token (a single -inf is a legitimate mask)."""
    NO_MASS = 3
    """Valid logits whose sampler law is not finite with a positive sum."""


def invalid_rows(logits: mx.array, probs: mx.array) -> mx.array:
    """Per row, its `RowCode`: NaN or +inf logits, -inf everywhere, or a law with no mass.

    `probs` is the row's effective distribution: with valid logits and a valid
    config it is always finite with a positive sum (the float32 envelope of
    `SamplerConfig`), so a row failing that check names the arithmetic, not the
    model.

    Args:
        logits: `[R, V]` logits of a float dtype.
        probs: `[R, V]` float32, the laws drawn from them.
    """
    not_finite = (mx.isnan(logits) | (logits == float("inf"))).any(axis=-1)
    all_masked = (logits == float("-inf")).all(axis=-1)
    no_mass = ~(mx.isfinite(probs).all(axis=-1) & (probs.sum(axis=-1) > 0))
    return mx.where(
        not_finite, RowCode.NOT_FINITE,
        mx.where(all_masked, RowCode.ALL_MASKED,
                 mx.where(no_mass, RowCode.NO_MASS, RowCode.VALID)),
    )


def raise_on_invalid(codes: Iterable[int], what: str, first_position: int) -> None:
    """Raise for the first row whose code is not VALID; row i decided first_position + i.

    Raises:
        specaccept.NonFiniteLogitsError: naming `what` (the model), the position, the cause.
    """
    for row, code in enumerate(codes):
        position = first_position + row
        if code == RowCode.NOT_FINITE:
            raise NonFiniteLogitsError(
                f"{what} produced NaN or +inf logits at output position {position}"
            )
        if code == RowCode.ALL_MASKED:
            raise NonFiniteLogitsError(
                f"{what} produced logits that are -inf for every token at output position "
                f"{position}: there is no token to draw"
            )
        if code == RowCode.NO_MASS:
            raise NonFiniteLogitsError(
                f"{what}'s sampler left no finite probability mass at output position "
                f"{position}: its finite logits overflowed float32 in the sampler's "
                f"arithmetic (logits of magnitude above 2**64 void the sampler's guarantee)"
            )


def check_width(logits: mx.array, vocab_size: int, what: str) -> None:
    """Refuse logits wider or narrower than the vocabulary the model declares (a shape: free).

    Raises:
        ValueError: naming `what` (the model), both widths and the cause.
    """
    if logits.shape[-1] != vocab_size:
        raise ValueError(
            f"{what} produced logits over {logits.shape[-1]} tokens, but it declares a "
            f"vocabulary of {vocab_size} (config vocab_size): its output layer and its "
            "declared vocabulary disagree"
        )
