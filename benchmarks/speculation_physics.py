"""Why speculation pays on one device and loses on another: the forward costs behind it.

Run from the repository root:

    python benchmarks/speculation_physics.py [--random-pair NAME] [--temp 0.7] [--tree 2x3]

Leviathan et al.'s speedup of k-draft rounds over target-only decoding is
``E_k / (k c + r_k)``: E_k = (1 - a**(k+1)) / (1 - a) tokens per round at acceptance a,
c the drafter's forward over the target's (one token each), r_k the target's forward of
k + 1 tokens over its forward of one. Their paper takes r_k = 1, which a GPU whose 1-token
forward is bound by reading the weights comes close to; a CPU computes every token, so
r_k grows with k, and no acceptance pays for it. This script measures c and r_k on the
device it runs on (medians of interleaved repeats, every forward evaluated and
synchronised, the cache cut back to the same context after each), the acceptance
a = Σ min(p, q) along the target's own samples (`random_pairs.agreement`), and prints
the speedup the formula allows with r_k = 1 and with the measured r_k
(`specaccept.core.theory.expected_speedup`), for each k. It also times the target's one
tree forward of a W x D tree's N + 1 tokens against a chain forward of as many tokens.
A round's sampling, verification and host round trips come on top: the speedups are
ceilings for a generator, not predictions of one.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "impl")]

from specaccept.cli.options import blas_in_use, mlx_version  # noqa: E402
from specaccept.core.sampler_config import SamplerConfig  # noqa: E402
from specaccept.core.theory import expected_speedup, expected_tokens_per_round  # noqa: E402
from specaccept.shell.random_pairs import RANDOM_PAIRS, agreement, random_pair  # noqa: E402
from specaccept.shell.tree_attention import (  # noqa: E402
    TreeLayout,
    make_tree_cache,
    tree_forward,
)
from specaccept.shell.tree_generator import full_tree_parents  # noqa: E402


def _timed(forward: Callable[[], Any], cache: list[Any], context: int) -> float:
    start = time.perf_counter()
    mx.eval(forward())
    elapsed = time.perf_counter() - start
    for layer in cache:
        layer.offset = context  # cut back: every forward sees the same context
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-pair", choices=sorted(RANDOM_PAIRS),
                        help="a random-weight preset (default: the embedded demo pair)")
    parser.add_argument("--temp", type=float, default=0.7)
    parser.add_argument("--context", type=int, default=128, help="tokens in the KV cache")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 3, 4, 6])
    parser.add_argument("--tree", default="2x3", help="WIDTHxDEPTH of the tree timed")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--agreement-tokens", type=int, default=64)
    args = parser.parse_args()
    width, depth = (int(part) for part in args.tree.split("x"))

    if args.random_pair is None:
        from specaccept.shell.loading import load_pair

        pair, name = load_pair(), "the demo pair"
        prompt = list(pair.tokenizer.encode("ROMEO:\n"))
    else:
        pair, name = random_pair(args.random_pair), f"the random pair `{args.random_pair}`"
        prompt = list(b"ROMEO:\n")
    assert pair.drafter is not None
    config = SamplerConfig(temperature=args.temp)
    accept = agreement(pair, prompt, config, args.agreement_tokens).sum_min

    context_tokens = [(7 * i + 3) % 64 for i in range(args.context)]
    caches = {}
    for role, model in (("target", pair.target), ("drafter", pair.drafter)):
        cache = make_tree_cache(model, role)
        model(mx.array(context_tokens)[None], cache=cache)
        mx.eval([c.state for c in cache])
        caches[role] = cache
    target, drafter = pair.target, pair.drafter
    target_cache, draft_cache = caches["target"], caches["drafter"]
    parents = full_tree_parents(width, depth)
    size = len(parents) + 1
    layout = TreeLayout(args.context, parents)
    tree_tokens = mx.array([(5 * i + 1) % 64 for i in range(size)])

    def chain(length: int) -> Callable[[], Any]:
        tokens = mx.array([[11] * length])
        return lambda: target(tokens, cache=target_cache)

    shapes: dict[str, tuple[Callable[[], Any], list[Any]]] = {
        "drafter 1": (lambda: drafter(mx.array([[11]]), cache=draft_cache), draft_cache),
        f"tree {size}": (lambda: tree_forward(target, target_cache, tree_tokens, layout, 0),
                         target_cache),
    }
    for length in sorted({1, size, *(k + 1 for k in args.ks)}):
        shapes[f"target {length}"] = (chain(length), target_cache)
    times: dict[str, list[float]] = {label: [] for label in shapes}
    labels = list(shapes)
    for repeat in range(args.repeats + 3):  # three warm-up passes, discarded
        for label in labels[repeat % len(labels):] + labels[: repeat % len(labels)]:
            forward, cache = shapes[label]
            elapsed = _timed(forward, cache, args.context)
            if repeat >= 3:
                times[label].append(elapsed)
    ms = {label: 1e3 * statistics.median(values) for label, values in times.items()}
    one = ms["target 1"]
    c = ms["drafter 1"] / one

    switch = os.environ.get("MLX_CUDA_USE_CUDNN_SDPA", "unset")
    print(f"Device {mx.default_device()} ({platform.machine()}), mlx {mlx_version()}, BLAS: "
          f"{blas_in_use()}, MLX_CUDA_USE_CUDNN_SDPA={switch}; {name}, a context of "
          f"{args.context} tokens, medians of {args.repeats} interleaved repeats.\n")
    print(f"Target forward of 1 token: {one:.2f} ms; drafter forward of 1 token: "
          f"{ms['drafter 1']:.2f} ms, so c = {c:.3f}. Acceptance at temperature "
          f"{args.temp}: a = {accept:.3f} (Σ min(p, q) along {args.agreement_tokens} of "
          "the target's own samples).\n")
    print("| k | target forward of k + 1 tokens, ms | r_k = its cost over 1 token | E_k "
          "tokens/round | speedup allowed, r_k = 1 | speedup allowed, measured r_k |")
    print("|---:|---:|---:|---:|---:|---:|")
    for k in args.ks:
        r = ms[f"target {k + 1}"] / one
        tokens = expected_tokens_per_round([accept] * k)
        print(f"| {k} | {ms[f'target {k + 1}']:.2f} | {r:.2f} | {tokens:.2f} | "
              f"{expected_speedup(accept, k, c):.2f} | "
              f"{expected_speedup(accept, k, c, verify_cost=r):.2f} |")
    print(f"\nTree {width}x{depth} ({size} tokens: the current one and {size - 1} nodes): one "
          f"tree forward (mask and per-node positions) {ms[f'tree {size}']:.2f} ms, a chain "
          f"forward of {size} tokens {ms[f'target {size}']:.2f} ms: "
          f"{ms[f'tree {size}'] / ms[f'target {size}']:.2f}x.")


if __name__ == "__main__":
    main()
