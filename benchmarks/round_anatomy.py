"""Where a speculative round's host time goes on a lazy, asynchronous backend.

Run from the repository root:

    python benchmarks/round_anatomy.py [--random-pair llama-3-8b-1b] [-n 64] [--repeats 5]

A round queues its drafter forwards, the target forward and the verdict, and waits once.
If the host built and dispatched all of it faster than the device runs it, the round
would cost the forwards' device time; `specaccept bench` finds it costs more. This
script times, in one process and under whatever MLX settings the environment holds:

- each forward the round runs (the drafter over 1 token, the target over 1 and k + 1),
  split into building its graph in Python, dispatching it (`mx.async_eval`) and waiting
  for it (`mx.eval`), and, separately, back to back without waiting (the forward's cost
  when the host can run ahead, as it may inside a round);
- the target alone and the drafter alone generating, one token per forward, pipelined
  as in mlx-lm's `generate_step` (what the bench's target-only arm measures);
- the fused sampler's pieces at the pair's vocabulary, timed the same two ways, run
  uncompiled as the generator's round runs them (`--compiled-sampler`: through
  `mx.compile`, as `target_only_generate` runs its step);
- a round built by hand from those pieces (every draft rejected, so the caches keep
  their lengths), run four ways: launching each draft and the target forward early
  (as the generator does), launching nothing before the one synchronisation,
  synchronising after every piece, and launching early with Python's garbage
  collector off;
- whole speculative runs, per rule, with the bench's pipelined round clock.

It prints one Markdown block; run it once per setting to compare settings (MLX reads
its command-buffer variables once per process).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import mlx.core as mx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "impl")]

from specaccept import SamplerConfig, SpeculativeGenerator  # noqa: E402
from specaccept.cli.options import MLX_TUNING_ENV  # noqa: E402
from specaccept.core.acceptance import AcceptanceRule  # noqa: E402
from specaccept.shell.fused import FusedSampler, fused_sampler  # noqa: E402
from specaccept.shell.profiling import RoundClock  # noqa: E402
from specaccept.shell.random_pairs import RANDOM_PAIRS, random_pair  # noqa: E402
from specaccept.shell.target_only import target_only_generate  # noqa: E402


def _median_ms(samples: list[float]) -> str:
    return f"{1e3 * statistics.median(samples):.2f}"


def _forward_split(model: Any, cache: list[Any], length: int, repeats: int) -> list[str]:
    """Build, dispatch, wait and their sum, then back-to-back cost, in ms (medians)."""
    from mlx_lm.models.cache import trim_prompt_cache

    tokens = mx.array([[7] * length])
    build, dispatch, wait, total = [], [], [], []
    for _ in range(repeats + 2):
        t0 = time.perf_counter()
        logits = model(tokens, cache=cache)
        t1 = time.perf_counter()
        mx.async_eval(logits)  # type: ignore[no-untyped-call]  # mlx ships it untyped
        t2 = time.perf_counter()
        mx.eval(logits)
        t3 = time.perf_counter()
        trim_prompt_cache(cache, length)
        build.append(t1 - t0)
        dispatch.append(t2 - t1)
        wait.append(t3 - t2)
        total.append(t3 - t0)
    # Back to back: each forward queued without waiting for the one before.
    start = time.perf_counter()
    pending = []
    for _ in range(repeats):
        logits = model(tokens, cache=cache)
        mx.async_eval(logits)  # type: ignore[no-untyped-call]
        trim_prompt_cache(cache, length)
        pending.append(logits)
    mx.eval(pending)
    queued = (time.perf_counter() - start) / repeats
    return [_median_ms(x[2:]) for x in (build, dispatch, wait, total)] + [f"{1e3 * queued:.2f}"]


def _piece(build: Any, repeats: int) -> list[str]:
    """`build()` returns arrays: ms to build and evaluate it, and queued back to back."""
    samples = []
    for _ in range(repeats + 2):
        start = time.perf_counter()
        mx.eval(build())
        samples.append(time.perf_counter() - start)
    start = time.perf_counter()
    pending = []
    for _ in range(repeats):
        outputs = build()
        mx.async_eval(outputs)  # type: ignore[no-untyped-call]
        pending.append(outputs)
    mx.eval(pending)
    return [_median_ms(samples[2:]), f"{1e3 * (time.perf_counter() - start) / repeats:.2f}"]


def _hand_round(pair: Any, caches: tuple[list[Any], list[Any]], fused: FusedSampler,
                k: int, mode: str) -> float:
    """Seconds for one round built from the fused pieces, every draft rejected."""
    from mlx_lm.models.cache import trim_prompt_cache

    target_cache, draft_cache = caches
    start = time.perf_counter()
    uniforms = mx.full((k + 1, 2), 0.5, dtype=mx.float32)
    draft_uniforms = mx.full((k,), 0.5, dtype=mx.float32)
    step_input = mx.array([7])
    drafts, probs, checks = [], [], []
    for j in range(k):
        logits = pair.drafter(step_input[None], cache=draft_cache)[0, -1]
        token, q, check = fused.draft_step(logits, draft_uniforms[j])
        if mode == "launch early":
            mx.async_eval(token)  # type: ignore[no-untyped-call]
        elif mode == "synchronise each piece":
            mx.eval(token, q, check)
        drafts.append(token)
        probs.append(q)
        checks.append(check[None])
        step_input = token.reshape(1)
    draft_tokens = mx.stack(drafts)
    target_input = mx.concatenate([mx.array([7], dtype=mx.int32), draft_tokens])
    target_logits = pair.target(target_input[None], cache=target_cache)[0]
    if mode == "launch early":
        mx.async_eval(target_logits)  # type: ignore[no-untyped-call]
    elif mode == "synchronise each piece":
        mx.eval(target_logits)
    verdict = fused.verify_round(AcceptanceRule.STOCHASTIC, target_logits, mx.stack(probs),
                                 draft_tokens, uniforms)
    outputs = [verdict.num_accepted, verdict.next_token, draft_tokens, verdict.invalid,
               mx.concatenate(checks)]
    mx.eval(*outputs)
    _ = [array.tolist() for array in outputs]
    trim_prompt_cache(target_cache, k + 1)
    trim_prompt_cache(draft_cache, k)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-pair", default="llama-3-8b-1b", choices=sorted(RANDOM_PAIRS))
    parser.add_argument("-n", "--max-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("-k", "--num-draft-tokens", type=int, default=4)
    parser.add_argument("--compiled-sampler", action="store_true",
                        help="time the fused sampler through mx.compile (the generator's "
                        "round runs it uncompiled)")
    args = parser.parse_args()
    from mlx_lm.models.cache import make_prompt_cache

    k, n = args.num_draft_tokens, args.max_tokens
    pair = random_pair(args.random_pair)
    target, drafter = pair.target, pair.drafter
    assert drafter is not None
    prompt = list(b"ROMEO: ")
    config = SamplerConfig(temperature=1.0)
    settings = " ".join(f"{name}={os.environ[name]}" for name in sorted(MLX_TUNING_ENV)
                        if name in os.environ) or "(no MLX tuning variables set)"
    print(f"device={mx.default_device()} mlx={version('mlx')} pair={args.random_pair} "
          f"k={k} n={n} repeats={args.repeats} sampler "
          f"{'compiled' if args.compiled_sampler else 'uncompiled'}; {settings}\n")

    print("Forwards, ms (medians): build = the Python call, dispatch = `mx.async_eval`, "
          "wait = the `mx.eval` after it; queued = back to back, no wait between.\n")
    print("| forward | build | dispatch | wait | build + dispatch + wait | queued |")
    print("|---|---:|---:|---:|---:|---:|")
    forwards: list[tuple[str, Any, int]] = [("drafter, 1 token", drafter, 1),
                                 ("target, 1 token", pair.target, 1),
                                 (f"target, {k + 1} tokens", pair.target, k + 1)]
    for label, model, length in forwards:
        cache = make_prompt_cache(model)
        mx.eval(model(mx.array([prompt * 8]), cache=cache))
        cells = _forward_split(model, cache, length, 4 * args.repeats)
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)

    fused = fused_sampler(config, config, compiled=args.compiled_sampler)
    vocab = pair.target.args.vocab_size
    draft_logits = mx.random.normal((vocab,)).astype(mx.bfloat16)
    target_logits = mx.random.normal((k + 1, vocab)).astype(mx.bfloat16)
    q_rows = mx.softmax(mx.random.normal((k, vocab)), axis=-1)
    drafts = mx.zeros((k,), dtype=mx.int32)
    uniforms = mx.full((k + 1, 2), 0.5, dtype=mx.float32)
    u = mx.array(0.5, dtype=mx.float32)
    mx.eval(draft_logits, target_logits, q_rows)
    print(f"\nFused sampler pieces at V = {vocab:,}, ms (medians): evaluated alone, and "
          "queued back to back.\n")
    print("| piece | alone | queued |")
    print("|---|---:|---:|")
    pieces: dict[str, Any] = {
        "draft step (1 row)": lambda: list(fused.draft_step(draft_logits, u)),
        "target-only step (1 row)": lambda: list(fused.target_step(draft_logits, u)),
        **{f"verify round, {rule.value} ({k + 1} rows)": (
            lambda rule=rule: list(fused.verify_round(
                rule, target_logits, q_rows if rule.needs_proposal_distribution else None,
                drafts, uniforms)))
           for rule in (AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH,
                        AcceptanceRule.BLOCK)},
        "an empty synchronisation": lambda: [mx.array(1) + 1],
    }
    for label, build in pieces.items():
        print(f"| {label} | " + " | ".join(_piece(build, 4 * args.repeats)) + " |", flush=True)

    caches = (make_prompt_cache(pair.target), make_prompt_cache(pair.drafter))
    mx.eval(target(mx.array([prompt * 8]), cache=caches[0]),
            drafter(mx.array([prompt * 8]), cache=caches[1]))
    modes = ("launch early", "launch nothing early", "synchronise each piece",
             "launch early, gc off")
    hand: dict[str, list[float]] = {mode: [] for mode in modes}
    for repeat in range(4 * args.repeats + 2):
        for mode in modes:
            if mode.endswith("gc off"):
                gc.disable()
            seconds = _hand_round(pair, caches, fused, k, mode.split(",")[0])
            gc.enable()
            if repeat >= 2:
                hand[mode].append(seconds)
    print("\nA round built by hand (stochastic verdict, every draft rejected), ms per round "
          "(medians):\n")
    print("| how the round is dispatched | ms per round |")
    print("|---|---:|")
    for mode, samples in hand.items():
        print(f"| {mode} | {_median_ms(samples)} |", flush=True)

    generators = {rule: SpeculativeGenerator(pair.target, pair.drafter, config,
                                             num_draft_tokens=k, rule=rule)
                  for rule in ("stochastic", "sampler-match")}
    per_token: dict[str, list[float]] = {"target alone": [], "drafter alone": []}
    clocks: dict[str, list[RoundClock]] = {rule: [] for rule in generators}
    for repeat in range(args.repeats + 1):  # repeat 0 warms up
        for label, model in (("target alone", pair.target), ("drafter alone", pair.drafter)):
            start = time.perf_counter()
            count = sum(1 for _ in target_only_generate(model, prompt, config, n, seed=repeat))
            if repeat:
                per_token[label].append((time.perf_counter() - start) / count)
        for rule, generator in generators.items():
            clock = RoundClock()
            for _ in generator.generate(prompt, n, seed=repeat, clock=clock):
                pass
            if repeat:
                clocks[rule].append(clock)
    print("\nGenerating, ms per token (pipelined, one synchronisation per token):\n")
    print("| model | ms per token |")
    print("|---|---:|")
    for label, samples in per_token.items():
        print(f"| {label} | {_median_ms(samples)} |")
    parts = ("round", "host sync wait", "host", "host: drafter forward", "host: draft sampling",
             "host: target forward", "host: sampling and verification", "host: after sync")
    print("\nSpeculative rounds, ms per round (medians over repeats):\n")
    print("| rule | " + " | ".join(parts) + " |")
    print("|---|" + "---:|" * len(parts))
    for rule, rule_clocks in clocks.items():
        means = [statistics.median(c.per_round()[part] for c in rule_clocks) for part in parts]
        print(f"| {rule} | " + " | ".join(f"{1e3 * x:.2f}" for x in means) + " |")


if __name__ == "__main__":
    main()
