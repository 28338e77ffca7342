"""Timings the benchmark needs that touch mlx-lm: its caches and its own generation loops.

The command line may not import mlx-lm (the layering contract in pyproject.toml), so
everything that does lives here, in the shell.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import mlx.core as mx

from specaccept.core.acceptance import AcceptanceRule, verify_block
from specaccept.core.sampling import SamplerConfig, effective_token_distribution

__all__ = ["forward_costs", "mlx_lm_arms"]


def _time(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def forward_costs(
    pair: Any, prompt: list[int], k: int, config: SamplerConfig, repeats: int,
    rules: Sequence[str],
) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds of the round's pieces, and verify cost over the target forward."""
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    target, drafter = pair.target, pair.drafter
    target_cache, draft_cache = make_prompt_cache(target), make_prompt_cache(drafter)
    context = mx.array(prompt)[None]
    target(context, cache=target_cache)
    drafter(context, cache=draft_cache)
    mx.eval([c.state for c in target_cache] + [c.state for c in draft_cache])
    one = mx.array([[prompt[-1]]])
    block = mx.array([[prompt[-1]] * (k + 1)])

    def forward(model: Any, cache: list[Any], tokens: mx.array) -> mx.array:
        logits: mx.array = model(tokens, cache=cache)
        mx.eval(logits)
        trim_prompt_cache(cache, tokens.shape[1])
        return logits

    block_logits = forward(target, target_cache, block)[0]
    draft_logits = forward(drafter, draft_cache, mx.array([[prompt[-1]]] * 1))[0, -1]
    q = effective_token_distribution(draft_logits, config)
    q_rows = mx.stack([q] * k)
    drafts = mx.zeros((k,), dtype=mx.int32)
    uniforms = mx.full((k + 1, 2), 0.5, dtype=mx.float32)

    def verify(rule: AcceptanceRule) -> None:
        rows = effective_token_distribution(block_logits, config)
        verdict = verify_block(
            rule, rows, q_rows if rule.needs_proposal_distribution else None, drafts, uniforms
        )
        mx.eval(verdict.num_accepted, verdict.next_token)

    arms: dict[str, Callable[[], object]] = {
        "target_1": lambda: forward(target, target_cache, one),
        f"target_{k + 1}": lambda: forward(target, target_cache, block),
        "drafter_1": lambda: forward(drafter, draft_cache, one),
        "verify_stochastic": lambda: verify(AcceptanceRule.STOCHASTIC),
        "verify_sampler-match": lambda: verify(AcceptanceRule.SAMPLER_MATCH),
    }
    samples: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(3):
        for action in arms.values():
            action()
    for _ in range(repeats):
        for name, action in arms.items():
            samples[name].append(_time(action))
    seconds = {name: statistics.median(values) for name, values in samples.items()}
    forward_seconds = seconds[f"target_{k + 1}"]
    verify_ratio: dict[str, float] = {
        rule: seconds[f"verify_{rule}"] / forward_seconds for rule in rules
    }
    return seconds, verify_ratio




def mlx_lm_arms(
    pair: Any, prompt: list[int], config: SamplerConfig, k: int, n: int
) -> dict[str, Callable[[int], int]]:
    """mlx-lm's speculative and plain generation as bench arms: seed -> tokens generated."""
    from mlx_lm.generate import generate_step, speculative_generate_step
    from mlx_lm.sample_utils import make_sampler

    sampler = make_sampler(
        temp=config.temperature, top_p=config.top_p, min_p=config.min_p, top_k=config.top_k
    )
    prompt_array = mx.array(prompt, dtype=mx.uint32)

    def speculative(seed: int) -> int:
        mx.random.seed(seed)
        steps = speculative_generate_step(
            prompt_array, pair.target, pair.drafter, num_draft_tokens=k, max_tokens=n,
            sampler=sampler,
        )
        return sum(1 for _ in steps)

    def target_only(seed: int) -> int:
        mx.random.seed(seed)
        steps = generate_step(prompt_array, pair.target, max_tokens=n, sampler=sampler)
        return sum(1 for _ in steps)

    return {"mlx-lm-speculative": speculative, "mlx-lm-target-only": target_only}
