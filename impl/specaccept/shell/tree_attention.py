"""A tree of tokens in one forward: a tree-attention mask, per-node positions, path compaction.

A round's tree lives in one row of each model's KV cache. Its entries follow the committed
context (`TreeLayout.prefix` entries): entry 0 is the round's current token (the root),
entry i + 1 is node i, in the breadth-first order of the parent array. A forward feeds a
run of consecutive entries (all of them for the target, one level at a time for the
drafter); each fed entry attends to the whole prefix, to its ancestors and to itself, and
sits at position ``prefix + its depth``: the positions and the visible context of a chain
forward of its root path, so its logits are that chain's (`docs/results/tree-forward.md`
measures the difference on the demo target). After the verdict, `keep_path` moves the
accepted path's entries down to follow the root and cuts the rest off; nothing else of
the cache is touched.

mlx-lm's attention asks the first layer's cache for its mask (``cache.make_mask``) and
rotates queries and keys with ``self.rope(x, offset=cache.offset)``: `TreeKVCache`
answers the first with the tree's mask, and `tree_forward` swaps each layer's RoPE for
one that gives every token its own position, for the one forward, calling the model's
own RoPE with its own frequencies. A Llama-family model (each layer's ``self_attn.rope``
one of mlx's `nn.RoPE` or mlx-lm's Llama-3 RoPE) qualifies; so does a model that declares
``reads_positions = False`` and reads each fed token's visible entries from
`TreeKVCache.visible` (the tests' synthetic models).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import mlx.core as mx
from mlx.nn.layers.base import Module

__all__ = ["TreeLayout", "keep_path", "make_tree_cache", "tree_forward", "tree_forward_refusal"]


@dataclass(frozen=True)
class TreeLayout:
    """Where a round's tree sits in a cache, and each of its entries' parent.

    `prefix`: the committed entries before the root. `parents`: the tree's parent array
    (node i's parent, -1 for the root), as `full_tree_parents` writes it.
    """

    prefix: int
    parents: tuple[int, ...]

    @functools.cached_property
    def depths(self) -> tuple[int, ...]:
        """Each entry's depth, 0 for the root and the path length for node i at i + 1."""
        depths = [0]
        for parent in self.parents:
            depths.append(depths[parent + 1] + 1)
        return tuple(depths)

    @functools.cached_property
    def lineages(self) -> tuple[tuple[int, ...], ...]:
        """Each entry's ancestors and itself, root first, as entry indices."""
        lines: list[tuple[int, ...]] = [(0,)]
        for i, parent in enumerate(self.parents):
            lines.append((*lines[parent + 1], i + 1))
        return tuple(lines)

    def visible(self, start: int, stop: int) -> tuple[tuple[int, ...], ...]:
        """For each fed entry in [start, stop), the cache columns it attends to."""
        return tuple(tuple(range(self.prefix)) + tuple(self.prefix + e for e in self.lineages[e])
                     for e in range(start, stop))

    def mask(self, start: int, stop: int) -> mx.array:
        """`[stop - start, prefix + stop]` bool: row r lets entry start + r see a column."""
        tree_part = mx.array([[c in self.lineages[e] for c in range(stop)]
                              for e in range(start, stop)], dtype=mx.bool_)
        return mx.concatenate(
            [mx.ones((stop - start, self.prefix), dtype=mx.bool_), tree_part], axis=1)

    def positions(self, start: int, stop: int) -> mx.array:
        """`[stop - start]` int32: entry e sits at position prefix + depth(e)."""
        return mx.array([self.prefix + self.depths[e] for e in range(start, stop)],
                        dtype=mx.int32)


@functools.cache
def _tree_cache_class() -> type:
    from mlx_lm.models.cache import KVCache

    class TreeKVCache(KVCache):
        """mlx-lm's `KVCache`, whose next forward may attend as a tree.

        While `mask` is set, ``make_mask`` answers with it; `visible` lists, per fed
        token, the columns that mask lets it see.
        """

        def __init__(self) -> None:
            cast(Any, super()).__init__()
            self.mask: mx.array | None = None
            self.visible: tuple[tuple[int, ...], ...] | None = None

        def make_mask(self, *args: Any, **kwargs: Any) -> Any:
            if self.mask is not None:
                return self.mask
            return cast(Any, super()).make_mask(*args, **kwargs)

    return TreeKVCache


def make_tree_cache(model: Any, name: str) -> list[Any]:
    """A fresh prompt cache for `model`, one `TreeKVCache` per layer.

    Raises:
        ValueError: naming `name` when a layer's cache is not mlx-lm's plain `KVCache`
            (a sliding window, a quantised cache) or the model cannot run a tree forward.
    """
    from mlx_lm.models.cache import KVCache, make_prompt_cache

    refusal = tree_forward_refusal(model)
    if refusal is not None:
        raise ValueError(f"{name} cannot verify a tree in one forward: {refusal}")
    cache: list[Any] = make_prompt_cache(model)
    kinds = sorted({type(c).__name__ for c in cache if type(c) is not KVCache})
    if kinds:
        raise ValueError(
            f"{name} must use mlx-lm's plain KVCache in every layer for tree speculation, "
            f"got {kinds}")
    tree_cache_class = _tree_cache_class()
    return [tree_cache_class() for _ in cache]


def _rope_kinds() -> tuple[type, ...]:
    from mlx.nn.layers.positional_encoding import RoPE
    from mlx_lm.models.rope_utils import Llama3RoPE

    return (RoPE, Llama3RoPE)


def _attention_layers(model: Any) -> list[Any]:
    return [layer.self_attn for layer in getattr(model, "layers", [])]


def tree_forward_refusal(model: Any) -> str | None:
    """Why `model` cannot run `tree_forward`, or None when it can."""
    if getattr(model, "reads_positions", True) is False:
        return None
    attentions = _attention_layers(model)
    if not attentions:
        return (f"{type(model).__name__} has no mlx-lm `layers` with `self_attn`; a model "
                "without positions declares reads_positions = False")
    kinds = _rope_kinds()
    for index, attention in enumerate(attentions):
        rope = getattr(attention, "rope", None)
        if not isinstance(rope, kinds):
            return (f"layer {index}'s attention has RoPE {type(rope).__name__}, not one of "
                    f"{[k.__name__ for k in kinds]}, which take a position per token")
    return None


class _PositionedRoPE(Module):
    """A model's own RoPE, each token at its own position (one row of a batch of one)."""

    def __init__(self, rope: Module, positions: mx.array) -> None:
        cast(Any, super()).__init__()
        self.rope = rope
        self.positions = positions

    def __call__(self, x: mx.array, offset: Any = 0) -> mx.array:
        del offset  # the positions replace the cache's offset
        batch, heads, length, dims = x.shape
        # mlx.fast.rope takes one offset per batch row: make every token a row of its own.
        rows = x.transpose(0, 2, 1, 3).reshape(batch * length, heads, 1, dims)
        offsets = mx.tile(self.positions, (batch,))
        rotated: mx.array = self.rope(rows, offset=offsets)
        return rotated.reshape(batch, length, heads, dims).transpose(0, 2, 1, 3)


@contextmanager
def _positioned(model: Any, positions: mx.array) -> Iterator[None]:
    if getattr(model, "reads_positions", True) is False:
        yield
        return
    attentions = _attention_layers(model)
    originals = [attention.rope for attention in attentions]
    try:
        for attention, rope in zip(attentions, originals, strict=True):
            attention.rope = _PositionedRoPE(rope, positions)
        yield
    finally:
        for attention, rope in zip(attentions, originals, strict=True):
            attention.rope = rope


def tree_forward(
    model: Any, cache: list[Any], tokens: mx.array, layout: TreeLayout, start: int
) -> mx.array:
    """Forward the tree's entries ``start .. start + len(tokens) - 1``; their `[T, V]` logits.

    `cache` is `make_tree_cache`'s and holds ``layout.prefix + start`` entries: the prefix
    and the tree's earlier entries. `tokens` is `[T]` int (lazy is fine).
    """
    stop = start + tokens.shape[0]
    if int(cache[0].offset) != layout.prefix + start:
        raise ValueError(f"the cache holds {cache[0].offset} entries; feeding tree entry "
                         f"{start} needs {layout.prefix + start}")
    mask, visible = layout.mask(start, stop), layout.visible(start, stop)
    for layer in cache:
        layer.mask, layer.visible = mask, visible
    try:
        with _positioned(model, layout.positions(start, stop)):
            logits: mx.array = model(tokens[None], cache=cache)[0]
    finally:
        for layer in cache:
            layer.mask, layer.visible = None, None
    return logits


def keep_path(cache: list[Any], prefix: int, entries: Sequence[int]) -> None:
    """Keep the prefix and the tree entries `entries` (in that order) right after it.

    Every layer gathers those entries' keys and values and writes them at ``prefix ..``,
    in its own buffer, then cuts its offset there; the prefix is not copied.
    """
    kept = len(entries)
    moved = [e for e in range(kept) if entries[e] != e]
    for layer in cache:
        if moved:
            source = mx.array([prefix + e for e in entries], dtype=mx.int32)
            keys = layer.keys[..., source, :]
            values = layer.values[..., source, :]
            layer.keys[..., prefix : prefix + kept, :] = keys
            layer.values[..., prefix : prefix + kept, :] = values
        layer.offset = prefix + kept
