"""The fused sampler compiled or not: does it run, and which is faster, in one process.

Run from the repository root:

    python benchmarks/compiled_sampler.py [--random-pair llama-3-8b-self] [-n 128]
        [--repeats 5] [--temp 1.0] [--skip-crash-check]

Two parts, one Markdown block:

1. **Does it run.** Each variant of the fast path runs in a child process of its own
   (a crash kills only the child): a bench-like sequence on a pair at the real
   vocabulary (a target-only run, then two speculative runs per rule), with the fused
   functions uncompiled, all compiled (`FusedSampler(compiled=True)`), only the draft
   step compiled, only the round's verdict compiled, or all compiled with one
   `mx.compile`d function per input shape. The table gives each child's exit status
   (a negative status is the signal that killed it) and the last step it finished.
2. **Which is faster.** In this process, interleaved repeat by repeat: k draft steps
   from fixed logits (host time to build and dispatch them, and the whole chain to its
   result), mlx-lm's draft step (`make_sampler`, one compiled categorical draw over the
   log-probabilities) beside them; the round's verdict; then whole speculative runs of
   the pair, per rule, uncompiled against compiled, with mlx-lm's speculative decoding.

MLX's CUDA backend: set ``MLX_CUDA_USE_CUDNN_SDPA=0`` (this script sets it unless set).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("MLX_CUDA_USE_CUDNN_SDPA", "0")

import mlx.core as mx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "impl"))

from specaccept.core.sampler_config import SamplerConfig  # noqa: E402
from specaccept.shell import random_pairs  # noqa: E402
from specaccept.shell.fused import FusedSampler, compiled_per_shape  # noqa: E402
from specaccept.shell.generator import SpeculativeGenerator  # noqa: E402
from specaccept.shell.target_only import target_only_generate  # noqa: E402

VARIANTS = ("uncompiled", "compiled", "draft step compiled", "verdict compiled",
            "compiled per shape")
RULES = ("sampler-match", "stochastic", "block")
PROMPT = list(b"ROMEO: But soft, what light through yonder window breaks?")


def _sampler(variant: str, config: SamplerConfig) -> FusedSampler:
    """The fast path of one variant (private attributes: this script is a diagnosis)."""
    sampler = FusedSampler(config, config, compiled=variant == "compiled")
    if variant == "draft step compiled":
        sampler._draft_step = mx.compile(sampler._draft_step_uncompiled)
    elif variant == "verdict compiled":
        sampler._wrap = mx.compile
    elif variant == "compiled per shape":
        sampler._wrap = compiled_per_shape
        sampler._draft_step = compiled_per_shape(sampler._draft_step_uncompiled)
        sampler._target_step = compiled_per_shape(sampler._target_step_uncompiled)
    return sampler


def _generator(pair: Any, config: SamplerConfig, rule: Any, sampler: FusedSampler | None
               ) -> SpeculativeGenerator:
    generator = SpeculativeGenerator(pair.target, pair.drafter, config, rule=rule)
    if sampler is not None:
        generator._fused = sampler
    return generator


def _small_vocab_pair() -> Any:
    """The self-speculative 8B preset's vocabulary and dtype with few, narrow layers."""
    preset = random_pairs.RANDOM_PAIRS["llama-3-8b-self"]
    narrow = {"hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8,
              "num_key_value_heads": 4, "head_dim": 64}
    random_pairs.RANDOM_PAIRS["crash-check"] = replace(
        preset, target={**preset.target, **narrow, "num_hidden_layers": 4},
        drafter={**preset.target, **narrow, "num_hidden_layers": 1}, residual_scale=0.02)
    return random_pairs.random_pair("crash-check")


def crash_child(variant: str, n: int, temp: float, preset: str | None) -> None:
    """The bench's sequence under one variant; prints each finished step."""
    pair = _small_vocab_pair() if preset is None else random_pairs.random_pair(preset)
    config = SamplerConfig(temperature=temp)
    sampler = _sampler(variant, config)
    for seed in range(2):
        list(target_only_generate(pair.target, PROMPT, config, n, seed=seed))
        print(f"seed {seed} target-only", flush=True)
        for rule in RULES:
            for _ in range(2):
                run = _generator(pair, config, rule, sampler).generate(PROMPT, n, seed=seed)
                sum(len(block) for block in run)
            print(f"seed {seed} {rule} x2", flush=True)
    print("done", flush=True)


def crash_table(n: int, temp: float, survivors: list[str], variants: tuple[str, ...],
                preset: str | None) -> list[str]:
    """Each variant in a child; the variants that exit 0 are appended to `survivors`."""
    pair = "a 4-layer, width-512 pair at V = 128,256" if preset is None else f"`{preset}`"
    lines = [f"Each variant in a child process, on {pair}:", "",
             "| variant | exit status | last step finished |", "|---|---:|---|"]
    for variant in variants:
        try:
            child = subprocess.run(
                [sys.executable, __file__, "--crash-child", variant, "-n", str(n),
                 "--temp", str(temp), *(["--child-pair", preset] if preset else [])],
                capture_output=True, text=True, timeout=120, check=False,
            )
        except subprocess.TimeoutExpired:
            lines.append(f"| {variant} | timed out after 120 s | |")
            continue
        steps = child.stdout.strip().splitlines()
        if child.returncode == 0:
            survivors.append(variant)
        lines.append(f"| {variant} | {child.returncode} | {steps[-1] if steps else 'none'} |")
        if child.returncode and child.stderr:
            print(f"<!-- {variant} stderr tail: {child.stderr.strip()[-300:]} -->")
    return lines


def _median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.3f}"


def timing_tables(pair: Any, config: SamplerConfig, k: int, n: int, repeats: int,
                  variants: list[str], iterations: int) -> list[str]:
    from mlx_lm.generate import speculative_generate_step
    from mlx_lm.sample_utils import make_sampler

    vocab = pair.target.args.vocab_size
    key = mx.random.key(1)
    draft_logits = (mx.random.normal((k, vocab), key=key) * 3).astype(mx.bfloat16)
    target_logits = (mx.random.normal((k + 1, vocab), key=key) * 3).astype(mx.bfloat16)
    uniforms = mx.full((k + 1, 2), 0.5, dtype=mx.float32)
    draft_u = mx.full((k,), 0.5, dtype=mx.float32)
    mx.eval(draft_logits, target_logits, uniforms, draft_u)
    samplers = {variant: _sampler(variant, config) for variant in variants}
    mlx_lm_sampler = make_sampler(temp=config.temperature)

    def fused_chain(sampler: FusedSampler) -> Callable[[], list[mx.array]]:
        def chain() -> list[mx.array]:
            outputs = []
            for j in range(k):
                step = sampler.draft_step(draft_logits[j], draft_u[j])
                mx.async_eval(step.token)
                outputs += [step.token, step.probs, step.invalid]
            return outputs
        return chain

    def mlx_lm_chain() -> list[mx.array]:
        outputs = []
        for j in range(k):
            logits = draft_logits[j][None]
            token = mlx_lm_sampler(logits - mx.logsumexp(logits, axis=-1, keepdims=True))
            mx.async_eval(token)
            outputs.append(token)
        return outputs

    def fused_verdict(sampler: FusedSampler, rule: Any) -> Callable[[], list[mx.array]]:
        q = mx.softmax(draft_logits.astype(mx.float32), axis=-1)
        mx.eval(q)
        tokens = mx.zeros((k,), dtype=mx.int32)

        def verdict() -> list[mx.array]:
            needed = q if rule.needs_proposal_distribution else None
            return list(sampler.verify_round(rule, target_logits, needed, tokens, uniforms))
        return verdict

    from specaccept.core.acceptance import AcceptanceRule

    chains: dict[str, Callable[[], list[mx.array]]] = {
        **{f"{k} draft steps, fused {v}": fused_chain(s) for v, s in samplers.items()},
        f"{k} draft steps, mlx-lm's sampler": mlx_lm_chain,
        **{f"verdict {rule.value}, fused {v}": fused_verdict(s, rule)
           for rule in (AcceptanceRule.SAMPLER_MATCH, AcceptanceRule.STOCHASTIC,
                        AcceptanceRule.BLOCK) for v, s in samplers.items()},
    }
    arms: dict[str, Callable[[int], int]] = {}
    for rule in ("sampler-match", "block"):  # the rules the targets name
        for variant, sampler in samplers.items():
            generator = _generator(pair, config, rule, sampler)
            arms[f"{rule}, fused {variant}"] = (
                lambda seed, g=generator: sum(len(b) for b in g.generate(PROMPT, n, seed=seed)))
    prompt_array = mx.array(PROMPT, dtype=mx.uint32)

    def mlx_lm(seed: int) -> int:
        mx.random.seed(seed)
        return sum(1 for _ in speculative_generate_step(
            prompt_array, pair.target, pair.drafter, num_draft_tokens=k, max_tokens=n,
            sampler=mlx_lm_sampler))
    arms["mlx-lm speculative"] = mlx_lm
    rates: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for repeat in range(repeats + 1):
        for name in names[repeat % len(names):] + names[: repeat % len(names)]:
            print(f"repeat {repeat} {name}", file=sys.stderr, flush=True)
            start = time.perf_counter()
            count = arms[name](repeat)
            if repeat:
                rates[name].append(count / (time.perf_counter() - start))
    base = rates["mlx-lm speculative"]
    lines = [f"Whole runs, {n} tokens, k = {k}, {repeats} interleaved repeats "
              "(seeds 1.., one warm-up discarded), tokens/s:", "",
              "| arm | tokens/s median | min-max | / mlx-lm speculative (median of per-repeat) |",
              "|---|---:|---:|---:|"]
    for name, values in rates.items():
        ratio = statistics.median(a / b for a, b in zip(values, base, strict=True))
        lines.append(f"| {name} | {statistics.median(values):.1f} | "
                     f"{min(values):.1f}-{max(values):.1f} | {ratio:.3f} |")
    host: dict[str, list[float]] = {name: [] for name in chains}
    total: dict[str, list[float]] = {name: [] for name in chains}
    for iteration in range(iterations + 5):
        for name, chain in chains.items():
            if iteration == 0:
                print(f"piece {name}", file=sys.stderr, flush=True)
            start = time.perf_counter()
            outputs = chain()
            built = time.perf_counter()
            mx.eval(*outputs)
            end = time.perf_counter()
            if iteration >= 5:  # the first five trace, compile and allocate
                host[name].append(built - start)
                total[name].append(end - start)
    lines += ["", f"Pieces at V = {vocab:,} from evaluated bf16 logits, medians of {iterations} "
             "interleaved iterations, ms:", "",
             "| piece | host: build and dispatch | to its result |", "|---|---:|---:|"]
    lines += [f"| {name} | {_median_ms(host[name])} | {_median_ms(total[name])} |"
              for name in chains]

    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-pair", default="llama-3-8b-self",
                        choices=sorted(random_pairs.RANDOM_PAIRS))
    parser.add_argument("-n", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--temp", type=float, default=1.0)
    parser.add_argument("-k", type=int, default=4)
    parser.add_argument("--variants", nargs="+",
                        default=["uncompiled", "draft step compiled", "compiled per shape"],
                        choices=VARIANTS,
                        help="the variants timed in part 2 (those of them that ran in part 1)")
    parser.add_argument("--iterations", type=int, default=35, help="of each piece")
    parser.add_argument("--skip-crash-check", action="store_true")
    parser.add_argument("--crash-child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--child-pair", help=argparse.SUPPRESS)
    parser.add_argument("--reproduce", nargs="+", choices=VARIANTS, default=[],
                        help="after the timings, run these variants in children on the "
                        "timed pair itself (part 1 runs them on a small pair)")
    args = parser.parse_args()
    if args.crash_child:
        crash_child(args.crash_child, args.n, args.temp, args.child_pair)
        return
    from importlib.metadata import version
    print(f"device {mx.default_device()}, mlx {version('mlx')}, temperature {args.temp}, "
          f"MLX_CUDA_USE_CUDNN_SDPA={os.environ['MLX_CUDA_USE_CUDNN_SDPA']}")
    print()
    variants = args.variants
    if not args.skip_crash_check:
        survivors: list[str] = []
        print("\n".join(crash_table(min(args.n, 24), args.temp, survivors, VARIANTS, None)),
              flush=True)
        print()
        variants = [v for v in variants if v in survivors]
    pair = random_pairs.random_pair(args.random_pair)
    config = SamplerConfig(temperature=args.temp)
    print("\n".join(timing_tables(pair, config, args.k, args.n, args.repeats, variants,
                                  args.iterations)),
          flush=True)
    if args.reproduce:
        del pair
        print()
        print("\n".join(crash_table(24, args.temp, [], tuple(args.reproduce),
                                    args.random_pair)))


if __name__ == "__main__":
    main()
