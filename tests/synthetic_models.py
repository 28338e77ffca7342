"""Tiny synthetic language models for the generator tests.

A `SyntheticLM` runs like an mlx-lm model: ``model(tokens[None], cache=cache)``
returns ``[1, T, V]`` logits, `make_cache()` returns one trimmable
`mlx_lm.models.cache.KVCache`, and ``args.vocab_size`` declares the vocabulary.

A `[B, T]` batch runs each row on its own row of the cache. A tree forward (the cache's
`visible` set by `specaccept.shell.tree_attention.tree_forward`) computes each fed token's
logits from the entries it sees, as tree attention does; the model reads no positions.

The model is honest about rewinds: every forward stores the token ids it is fed
as the cached "keys" (``update_and_fetch`` on ``[1, 1, T, 1]`` arrays, so the
offset advances exactly as a real model's does), then reads the whole cached
context back and computes the logits of the last T positions from it. A
generator that trims too little leaves stale tokens in that context, one that
trims too much drops real ones, and a history-dependent model then sees the
wrong context, just as a transformer would.

A logits function maps ``(context, T)`` (``context``: `[L]` int32, every token
the model has been fed, oldest first; the last T are this forward's) to `[T, V]`
float32 logits for those last T positions. All of them are array ops, so a
model never forces an evaluation of the lazy tokens the generator feeds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace
from typing import Any

import mlx.core as mx
import numpy as np
import numpy.typing as npt
from mlx_lm.models import cache as mlx_lm_cache

from specaccept import RewindPlan, rewind_trim

__all__ = [
    "PEAK",
    "LogitsFn",
    "SyntheticLM",
    "agree_one_in_six",
    "cached_tokens",
    "collect",
    "constant_logits",
    "cycle_logits",
    "markov2_logits",
    "mlxcel_rewind",
    "nan_after",
    "never_agree",
    "no_backfill",
    "random_markov2_table",
    "shifted_cycle_logits",
    "target_trims_one_too_few",
]

LogitsFn = Callable[[mx.array, int], mx.array]
"""(context `[L]` int32, T) -> `[T, V]` float32 logits of the last T positions."""

KVCache: Any = mlx_lm_cache.KVCache
"""mlx-lm's trimmable KV cache (typed Any: mlx-lm ships no annotations for it)."""

PEAK = 30.0
"""The logit margin of a deterministic model: softmax puts all but ~1e-13 on the winner."""


class SyntheticLM:
    """A model whose logits are a function of the context its cache holds.

    Args:
        vocab_size: the declared vocabulary (``args.vocab_size``).
        logits_fn: see the module docstring.
        cache_factory: what `make_cache` returns (default: one `KVCache`); a test
            passes a non-trimmable cache here.
    """

    reads_positions = False
    """Logits are a function of the visible context alone: a tree forward needs no RoPE."""

    def __init__(
        self,
        vocab_size: int,
        logits_fn: LogitsFn,
        *,
        cache_factory: Callable[[], list[Any]] | None = None,
    ) -> None:
        self.args = SimpleNamespace(vocab_size=vocab_size)
        self.logits_fn = logits_fn
        self.cache_factory = cache_factory
        self.forward_sizes: list[int] = []
        """The number of tokens of every forward, in order (prefill included)."""
        self.last_cache: list[Any] | None = None
        """The cache of the latest forward: the generator's own, to inspect between rounds."""

    @property
    def forward_calls(self) -> int:
        return len(self.forward_sizes)

    def make_cache(self) -> list[Any]:
        if self.cache_factory is not None:
            return self.cache_factory()
        return [KVCache()]

    def __call__(self, tokens: mx.array, cache: list[Any] | None = None) -> mx.array:
        if tokens.ndim == 2 and tokens.shape[0] > 1:
            return self._batch(tokens, cache)
        fed = tokens.reshape(-1).astype(mx.int32)
        count = fed.shape[0]
        self.forward_sizes.append(count)
        self.last_cache = cache
        if cache is None:
            context = fed
        else:
            entries = fed.astype(mx.float32).reshape(1, 1, count, 1)
            keys, _ = cache[0].update_and_fetch(entries, entries)
            context = keys.reshape(-1).astype(mx.int32)
            visible = getattr(cache[0], "visible", None)
            if visible is not None:
                return mx.stack([
                    self.logits_fn(context[mx.array(columns, dtype=mx.int32)], 1)[0]
                    for columns in visible]).astype(mx.float32)[None]
        logits = self.logits_fn(context, count)
        return logits.astype(mx.float32)[None]

    def _batch(self, tokens: mx.array, cache: list[Any] | None) -> mx.array:
        """A `[B, T]` forward: row b extends row b of the cache, as a batched model's does."""
        rows, count = tokens.shape
        self.forward_sizes.append(count)
        self.last_cache = cache
        fed = tokens.astype(mx.int32)
        if cache is None:
            contexts = fed
        else:
            entries = fed.astype(mx.float32).reshape(rows, 1, count, 1)
            keys, _ = cache[0].update_and_fetch(entries, entries)
            contexts = keys.reshape(rows, -1).astype(mx.int32)
        return mx.stack([self.logits_fn(contexts[b], count) for b in range(rows)]).astype(
            mx.float32)


def cached_tokens(cache: list[Any]) -> list[int]:
    """The token ids a `SyntheticLM` cache holds, oldest first (forces an evaluation)."""
    layer = cache[0]
    if layer.offset == 0:
        return []
    values: list[float] = layer.keys.reshape(-1)[: layer.offset].tolist()
    return [int(v) for v in values]


def collect(blocks: Iterable[list[int]]) -> list[int]:
    """Concatenate the blocks a speculative run yields."""
    return [token for block in blocks for token in block]


def _one_hot_logits(winners: mx.array, vocab_size: int, peak: float) -> mx.array:
    return (mx.arange(vocab_size)[None, :] == winners[:, None]).astype(mx.float32) * peak


def cycle_logits(vocab_size: int, *, peak: float = PEAK) -> LogitsFn:
    """Deterministic: the next token is ``(last + 1) % vocab_size``, as peaked logits."""
    return shifted_cycle_logits(vocab_size, lambda last: (last + 1) % vocab_size, peak=peak)


def shifted_cycle_logits(
    vocab_size: int, successor: Callable[[mx.array], mx.array], *, peak: float = PEAK
) -> LogitsFn:
    """Deterministic: the next token is ``successor(last)`` (elementwise on an int32 array)."""

    def logits(context: mx.array, count: int) -> mx.array:
        last = context[context.shape[0] - count :]
        return _one_hot_logits(successor(last).astype(mx.int32), vocab_size, peak)

    return logits


def constant_logits(row: Sequence[float]) -> LogitsFn:
    """Ignores its input: the same logits at every position (i.i.d. target-only draws)."""
    fixed = mx.array(list(row), dtype=mx.float32)

    def logits(context: mx.array, count: int) -> mx.array:
        del context
        return mx.broadcast_to(fixed[None, :], (count, fixed.shape[0]))

    return logits


def markov2_logits(table: npt.NDArray[np.float64]) -> LogitsFn:
    """A second-order Markov chain: position j's logits are ``log table[c[j-1], c[j]]``.

    `table` is `[V, V, V]`, rows summing to one. The token before the first of
    the context is taken to be 0. Position j's previous token comes from the
    cache whenever j is the first token of a forward, so a wrong rewind shows.
    """
    log_table = mx.array(np.log(table).astype(np.float32))

    def logits(context: mx.array, count: int) -> mx.array:
        padded = mx.concatenate([mx.zeros((1,), dtype=mx.int32), context])
        length = padded.shape[0]
        current = padded[length - count :]
        previous = padded[length - count - 1 : length - 1]
        return log_table[previous, current]

    return logits


def random_markov2_table(
    vocab_size: int, seed: int, *, concentration: float = 0.6
) -> npt.NDArray[np.float64]:
    """A `[V, V, V]` second-order transition table with every entry positive.

    A small Dirichlet concentration makes the rows differ strongly, so the
    chain depends on the previous token and not only on the current one.
    """
    rng = np.random.default_rng(seed)
    table = rng.dirichlet(np.full(vocab_size, concentration), size=(vocab_size, vocab_size))
    table = np.maximum(table, 0.02)
    normalised: npt.NDArray[np.float64] = table / table.sum(axis=-1, keepdims=True)
    return normalised


def nan_after(inner: LogitsFn, nan_from: int) -> LogitsFn:
    """`inner`, but NaN at every context position >= `nan_from` (0-based, prompt included)."""

    def logits(context: mx.array, count: int) -> mx.array:
        rows = inner(context, count)
        length = context.shape[0]
        positions = mx.arange(length - count, length)[:, None]
        return mx.where(positions >= nan_from, mx.array(float("nan"), mx.float32), rows)

    return logits


def agree_one_in_six(last: mx.array) -> mx.array:
    """A drafter successor for the 6-cycle: right ((last + 1) % 6) only after token 0."""
    return mx.where(last == 0, (last + 1) % 6, (last + 2) % 6)


def never_agree(last: mx.array) -> mx.array:
    """A drafter successor for the 6-cycle that is always wrong: (last + 2) % 6."""
    return (last + 2) % 6


# Deliberately broken pieces: a test that cannot fail them proves nothing.


def mlxcel_rewind(num_draft: int, num_accepted: int) -> RewindPlan:
    """mlxcel's pre-#994 rewind: target n - a, drafter min(n - a + 1, n), never a backfill."""
    rejected = num_draft - num_accepted
    if rejected == 0:
        return RewindPlan(target_trim=0, draft_trim=0, draft_backfill=False)
    return RewindPlan(
        target_trim=rejected, draft_trim=min(rejected + 1, num_draft), draft_backfill=False
    )


def target_trims_one_too_few(num_draft: int, num_accepted: int) -> RewindPlan:
    """The correct plan, except that the target keeps one stale entry after a rejection."""
    plan = rewind_trim(num_draft, num_accepted)
    return plan._replace(target_trim=max(plan.target_trim - 1, 0))


def no_backfill(num_draft: int, num_accepted: int) -> RewindPlan:
    """The correct trims, but the plan never asks for the drafter's backfill."""
    return rewind_trim(num_draft, num_accepted)._replace(draft_backfill=False)
