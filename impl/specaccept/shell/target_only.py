"""The target alone, one token per forward: the baseline a speculative run is measured by.

It reads the generator's randomness (output position n draws with
``position_uniform(seed, n, SAMPLE)``), so sampler-match reproduces its stream.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

import mlx.core as mx

from specaccept.core.randomness import SAMPLE, position_uniform
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.sampling import (
    effective_token_distribution,
    sample_from_distribution,
)
from specaccept.shell.arguments import (
    check_eos_token_ids,
    check_model,
    check_prompt,
    check_run_arguments,
    vocab_size_of,
)
from specaccept.shell.caches import make_cache, prefill
from specaccept.shell.fused import FusedSampler, fused_sampler
from specaccept.shell.guards import check_width, invalid_rows, raise_on_invalid

__all__ = ["target_only_generate"]


def target_only_generate(
    target: Any,
    prompt: Sequence[int],
    config: SamplerConfig,
    max_tokens: int,
    *,
    seed: int = 0,
    eos_token_ids: frozenset[int] = frozenset(),
    prefill_step_size: int = 512,
    fast_path: bool = True,
) -> Iterator[int]:
    """Sample the target alone, one token per forward, with the generator's randomness.

    Output position n draws with ``position_uniform(seed, n, SAMPLE)``, the
    uniform a speculative round's sampler-match draw uses, so the two streams
    coincide under sampler-match (up to the numerics of a batched forward).
    `fast_path` means what it means for `SpeculativeGenerator`.
    """
    check_model("target", target)
    if not isinstance(config, SamplerConfig):
        raise TypeError(f"config must be a SamplerConfig, got {type(config).__name__}")
    eos_token_ids = check_eos_token_ids(eos_token_ids)
    check_run_arguments(max_tokens, seed, prefill_step_size)
    vocab_size = vocab_size_of(target, "target")
    tokens = check_prompt(prompt, vocab_size)
    cache = make_cache(target, "target")
    prefill(target, cache, tokens, prefill_step_size)
    history = mx.array(tokens, dtype=mx.int32)
    # Compiled: a compiled target-only step measured faster than plain or core steps.
    fused = fused_sampler(config, config) if fast_path and FusedSampler.serves(config) else None

    def step(history: mx.array, position: int) -> tuple[mx.array, mx.array]:
        logits = target(history[-1:][None], cache=cache)[0, -1]
        check_width(logits, vocab_size, "the target")
        if fused is not None:
            u = mx.array(position_uniform(seed, position, SAMPLE), dtype=mx.float32)
            token, invalid = fused.target_step(logits, u)
            return token, invalid[None]
        probs = effective_token_distribution(logits, config, history)
        token = sample_from_distribution(probs, position_uniform(seed, position, SAMPLE))
        return token, invalid_rows(logits[None], probs[None])

    if max_tokens == 0:
        return
    # Pipelined like mlx-lm's generate_step: position n + 1 is queued on the lazy
    # token of position n before n is read back, so the forward never waits on Python.
    pending = step(history, 0)
    mx.async_eval(*pending)  # type: ignore[no-untyped-call]
    for position in range(max_tokens):
        token, invalid = pending
        history = mx.concatenate([history, token.reshape(1)])
        if position + 1 < max_tokens:
            pending = step(history, position + 1)
            mx.async_eval(*pending)  # type: ignore[no-untyped-call]
        raise_on_invalid(cast("list[int]", invalid.tolist()), "the target", position)
        value = token.item()
        assert isinstance(value, int)
        yield value
        if value in eos_token_ids:
            return
