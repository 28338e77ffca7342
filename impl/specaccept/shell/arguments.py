"""The checks a generator runs on what it is given, before any model runs.

Each names the argument and the bad value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import mlx.core as mx

__all__ = [
    "LanguageModel", "Tokenizer", "check_eos_token_ids", "check_model", "check_prompt",
    "check_run_arguments", "vocab_size_of",
]


class LanguageModel(Protocol):
    """A causal language model as the generators call it, an mlx-lm model for one: token ids
    ``[batch, n]`` and its KV cache in, logits ``[batch, n, vocabulary]`` out."""

    def __call__(self, inputs: mx.array, /, cache: Any = None) -> mx.array: ...


class Tokenizer(Protocol):
    """What the commands read of a tokenizer; mlx-lm's `TokenizerWrapper` is one."""

    def encode(self, text: str) -> list[int]: ...

    @property
    def detokenizer(self) -> Any:
        """The streaming detokenizer, which has ``reset``, ``add_token`` and ``last_segment``."""


def vocab_size_of(model: Any, name: str = "model") -> int:
    """The vocabulary size a model declares (mlx-lm's `args.vocab_size`), else a probe.

    Raises:
        TypeError: `model` (called `name` in the message) declares no vocabulary size of at
            least 1 and probing it with one token fails or returns no ``[1, 1, V]`` logits:
            it is no model, whatever it raised.
    """
    args = getattr(model, "args", None)
    declared = getattr(args, "vocab_size", None)
    if isinstance(declared, int) and not isinstance(declared, bool) and declared >= 1:
        return declared
    try:
        shape = tuple(model(mx.array([[0]]), cache=None).shape)
    except Exception as error:  # whatever a non-model raises when probed
        raise TypeError(f"{name} must be an mlx-lm model (callable as model(tokens, "
                        f"cache=cache), returning [1, T, V] logits); probing it raised "
                        f"{type(error).__name__}: {error}") from error
    if len(shape) != 3 or shape[:2] != (1, 1) or not shape[2] >= 1:
        raise TypeError(f"{name} must be an mlx-lm model returning [1, T, V] logits; one "
                        f"token gave shape {list(shape)}")
    return int(shape[2])


def check_prompt(prompt: Sequence[int], vocab_size: int) -> list[int]:
    """The prompt as a list of token ids, each in [0, vocab_size), at least one of them.

    Raises:
        TypeError: `prompt` is not a sequence (a str or bytes is text, not ids), or holds
            something other than an int.
        ValueError: it is empty, or an id lies outside [0, vocab_size).
    """
    if isinstance(prompt, str | bytes) or not isinstance(prompt, Sequence):
        raise TypeError(f"prompt must be a sequence of token ids, got "
                        f"{type(prompt).__name__} {_brief(prompt)}")
    tokens = list(prompt)
    if not tokens:
        raise ValueError("prompt must hold at least one token, got an empty prompt")
    for position, token in enumerate(tokens):
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"prompt[{position}] must be an int token id, got {token!r}")
        if not 0 <= token < vocab_size:
            raise ValueError(f"prompt[{position}] must lie in [0, {vocab_size}), got {token}")
    return tokens


def check_model(name: str, model: object) -> None:
    """Refuse a model that cannot be called; a missing one (None) in words of its own."""
    if model is None and name == "drafter":
        raise TypeError(
            "drafter must be a model, got NoneType: speculative decoding needs a drafter (a "
            "pair loaded with_drafter=False has none; target_only_generate runs the target alone)"
        )
    if not callable(model):
        raise TypeError(
            f"{name} must be a model, callable as model(tokens[None], cache=cache), "
            f"got {type(model).__name__}"
        )


def check_eos_token_ids(eos_token_ids: object) -> frozenset[int]:
    """The end-of-sequence ids as a frozenset of ints."""
    if isinstance(eos_token_ids, str | bytes) or not isinstance(eos_token_ids, Iterable):
        raise TypeError(
            "eos_token_ids must be a collection of int token ids (e.g. frozenset({2})), "
            f"got {type(eos_token_ids).__name__} {eos_token_ids!r}"
        )
    ids = frozenset(eos_token_ids)
    for token in ids:
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"eos_token_ids must hold int token ids, got {token!r}")
    return ids


def check_run_arguments(max_tokens: int, seed: int, prefill_step_size: int) -> None:
    """Refuse a run length, seed or prefill chunk that is not an int in range."""
    for name, value in (
        ("max_tokens", max_tokens), ("seed", seed), ("prefill_step_size", prefill_step_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must lie in [0, 2**64), got {seed}")
    if prefill_step_size < 1:
        raise ValueError(f"prefill_step_size must be >= 1, got {prefill_step_size}")


def _brief(value: object) -> str:
    """`value`'s repr, cut to 60 characters (a prompt may be a whole document)."""
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
