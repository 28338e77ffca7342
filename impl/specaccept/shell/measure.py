"""Timings the benchmark needs that touch mlx-lm: its caches and its own generation loops.

The command line may not import mlx-lm (the layering contract in pyproject.toml), so
everything that does lives here, in the shell.
"""

from __future__ import annotations

import io
import re
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import mlx.core as mx

from specaccept.core.acceptance import AcceptanceRule, verify_tokenwise
from specaccept.core.joint import verify_blockwise
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.sampling import effective_token_distribution

__all__ = [
    "ForwardCosts", "kernels_in_graph", "mlx_lm_arms", "python_loop_seconds",
    "sampler_kernel_counts",
]


def _time(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


class ForwardCosts:
    """The round's pieces, each evaluated and synchronised alone, sampled on demand.

    The bench samples them once per repeat, between the arms, so that a prediction
    built from them and the arm it is compared with ran within seconds of each other:
    on a shared host, speed drifts between minutes far more than the figures compared.

    Pieces (keys of `sample`): ``target_1`` and ``target_<k+1>`` (the target over 1 and
    k + 1 tokens), ``drafter_1``, and ``verify_<rule>`` for each of `rules` (the target
    rows and the rule's verdict from evaluated logits).
    """

    def __init__(
        self, pair: Any, prompt: list[int], k: int, config: SamplerConfig,
        rules: Sequence[AcceptanceRule],
    ) -> None:
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
        draft_logits = forward(drafter, draft_cache, one)[0, -1]
        q = effective_token_distribution(draft_logits, config)
        q_rows = mx.stack([q] * k)
        drafts = mx.zeros((k,), dtype=mx.int32)
        uniforms = mx.full((k + 1, 2), 0.5, dtype=mx.float32)

        def verify(rule: AcceptanceRule) -> None:
            rows = effective_token_distribution(block_logits, config)
            if rule.verifies_jointly:
                joint = verify_blockwise(rows, q_rows, drafts, uniforms)
                mx.eval(joint.num_accepted, joint.next_token)
                return
            verdict = verify_tokenwise(
                rule, rows, q_rows if rule.needs_proposal_distribution else None, drafts,
                uniforms,
            )
            mx.eval(verdict.num_accepted, verdict.next_token)

        self._pieces: dict[str, Callable[[], object]] = {
            "target_1": lambda: forward(target, target_cache, one),
            f"target_{k + 1}": lambda: forward(target, target_cache, block),
            "drafter_1": lambda: forward(drafter, draft_cache, one),
            **{f"verify_{rule.value}": partial(verify, rule) for rule in rules},
        }
        self.sample(3)  # warm-up: first calls trace, compile and allocate

    def sample(self, times: int) -> dict[str, float]:
        """Each piece run `times` times, in turn; the median seconds of each."""
        samples: dict[str, list[float]] = {name: [] for name in self._pieces}
        for _ in range(times):
            for name, piece in self._pieces.items():
                samples[name].append(_time(piece))
        return {name: statistics.median(values) for name, values in samples.items()}


def python_loop_seconds() -> float:
    """Seconds a fixed pure-Python loop takes: how fast the host runs Python right now.

    The loop touches no array, so its spread over a run's repeats is the host's own
    drift, the noise every host-bound timing in the run carries too.
    """
    start = time.perf_counter()
    total = 0
    for i in range(200_000):
        total += i * i
    assert total > 0
    return time.perf_counter() - start


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


_VIEWS = frozenset({
    "Broadcast", "Reshape", "Squeeze", "ExpandDims", "Slice", "Transpose", "AsStrided",
    "Flatten", "Unflatten", "StopGradient", "Depends",
})
"""Primitives that make a view of their input and launch no kernel."""


def kernels_in_graph(*outputs: mx.array) -> list[str]:
    """The primitives that run to compute `outputs` from what is already evaluated.

    Read from `mx.export_to_dot`; views are left out, a compiled (fused) group counts
    once, so the count is the kernels launched, up to primitives that launch several.
    """
    dot = io.StringIO()
    mx.export_to_dot(dot, *outputs)
    labels = re.findall(r'\[label ="([^"]+)"', dot.getvalue())
    return [label for label in labels if label not in _VIEWS]


def sampler_kernel_counts(
    vocab_size: int, config: SamplerConfig, k: int, rules: Sequence[AcceptanceRule],
) -> dict[str, dict[str, int]]:
    """Kernels per draft step and per round's verification, core path and fused path.

    The models' forwards are left out: the logits are evaluated first, so the graphs
    counted are the sampler's and the verifier's alone, at this vocabulary.
    """
    from specaccept.core.sampling import sample_token_with_distribution
    from specaccept.shell.fused import fused_sampler
    from specaccept.shell.guards import invalid_rows

    key_target, key_draft = mx.random.split(mx.random.key(0))
    target_logits = mx.random.normal((k + 1, vocab_size), key=key_target)
    draft_logits = mx.random.normal((k, vocab_size), key=key_draft)
    tokens = mx.zeros((k,), dtype=mx.int32)
    uniforms = mx.full((k + 1, 2), 0.5, dtype=mx.float32)
    u = mx.array(0.5, dtype=mx.float32)
    q_rows = effective_token_distribution(draft_logits, config)
    mx.eval(target_logits, draft_logits, q_rows)
    # Uncompiled, as the generator runs its round (a compiled group would count once).
    fused = fused_sampler(config, config, compiled=False)
    counts: dict[str, dict[str, int]] = {}
    for rule in rules:
        q = q_rows if rule.needs_proposal_distribution else None
        token, law = sample_token_with_distribution(draft_logits[0], config, (), u)
        core_step = (token, law, invalid_rows(draft_logits[:1], law[None]))
        target_probs = effective_token_distribution(target_logits, config)
        if rule.verifies_jointly:
            assert q is not None
            joint = verify_blockwise(target_probs, q, tokens, uniforms)
            core_verdict: tuple[mx.array, mx.array] = (joint.num_accepted, joint.next_token)
        else:
            verdict = verify_tokenwise(rule, target_probs, q, tokens, uniforms)
            core_verdict = (verdict.num_accepted, verdict.next_token)
        core_round = kernels_in_graph(*core_verdict, invalid_rows(target_logits, target_probs))
        fused_step = fused.draft_step(draft_logits[0], u)
        fused_verdict = fused.verify_round(rule, target_logits, q, tokens, uniforms)
        counts[rule.value] = {
            "core draft step": len(kernels_in_graph(*core_step)),
            "core verification": len(core_round),
            "fused draft step": len(kernels_in_graph(*fused_step)),
            "fused verification": len(kernels_in_graph(*fused_verdict)),
        }
    return counts
