"""The models' prompt caches: built trimmable, prefilled, rewound, and checked.

A speculative round forwards drafts that may be rejected, so both caches must be
trimmable back to the accepted prefix (`specaccept.core.rewind.rewind_trim` says how
far). mlx-lm builds them with `mlx_lm.models.cache.make_prompt_cache`.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

__all__ = ["CacheInvariantError", "check_offsets", "make_cache", "offset", "prefill", "trim"]


class CacheInvariantError(AssertionError):
    """A cache offset differs from the number of tokens before the current token."""


def make_cache(model: Any, name: str) -> list[Any]:
    """A fresh prompt cache for `model`, refused unless it can be rewound at any length.

    Raises:
        ValueError: naming `name` (the model) and the cache kinds that cannot be trimmed.
    """
    from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache

    cache: list[Any] = make_prompt_cache(model)
    rotating = sorted({type(c).__name__ for c in cache if hasattr(c, "max_size")})
    if rotating:
        # A sliding-window cache reports itself trimmable until it fills, then trims nothing.
        raise ValueError(
            f"{name} uses a sliding-window cache {rotating}, which cannot be rewound once "
            "full: speculative decoding needs a trimmable prompt cache"
        )
    if not can_trim_prompt_cache(cache):
        kinds = sorted({type(c).__name__ for c in cache if not c.is_trimmable()})
        raise ValueError(
            f"{name} must have a trimmable prompt cache for speculative decoding, got {kinds}"
        )
    return cache


def trim(cache: list[Any], count: int, name: str) -> None:
    """Drop the last `count` entries of every layer's cache."""
    if count:
        from mlx_lm.models.cache import trim_prompt_cache

        # mlx-lm annotates the return as a list, but it is the number of entries trimmed.
        trimmed: Any = trim_prompt_cache(cache, count)
        if trimmed != count:
            raise CacheInvariantError(f"the {name} cache trimmed {trimmed} of {count} entries")


def offset(cache: list[Any]) -> int:
    """The number of tokens the cache holds."""
    return int(cache[0].offset)


def prefill(model: Any, cache: list[Any], tokens: list[int], step: int) -> None:
    """Forward every prompt token but the last, in chunks of `step`."""
    body = tokens[:-1]
    for start in range(0, len(body), step):
        model(mx.array(body[start : start + step])[None], cache=cache)
        mx.eval([c.state for c in cache])


def check_offsets(
    rounds: int, target_cache: list[Any], draft_cache: list[Any], owed: int, before: int
) -> None:
    """Both caches hold the `before` tokens before the current token (the drafter `owed` fewer).

    Raises:
        CacheInvariantError: naming the round and both offsets.
    """
    target_offset, draft_offset = offset(target_cache), offset(draft_cache)
    if target_offset != before or draft_offset + owed != before:
        raise CacheInvariantError(
            f"after round {rounds}: {before} tokens precede the current token, "
            f"but the target cache holds {target_offset} and the drafter cache "
            f"{draft_offset} (+{owed} owed)"
        )
