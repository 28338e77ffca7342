"""What a model forward costs at a key/value length it has met before, and at a new one.

Run from the repository root:

    python benchmarks/forward_shapes.py [--random-pair llama-3-8b-1b] [--steps 48]

A speculative round forwards the target over k + 1 tokens, and, after a round that
accepted every draft, the drafter over 2. Each such forward attends over a key/value
length the cache has never had before when the run is new, and over a length some
earlier run already had when a benchmark repeats one prompt. A backend that builds
per-shape state on the host (MLX's CUDA backend builds a cuDNN attention graph for each
new shape of a multi-token query, and keeps 256 of them) then charges the first visit
and not the second. This script times, per model and query length, the forward
(evaluated and synchronised) over `--steps` lengths never met before, then over the same
lengths again, and prints the medians side by side.
"""

from __future__ import annotations

import argparse
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

from specaccept.shell.random_pairs import RANDOM_PAIRS, random_pair  # noqa: E402


def _forward_ms(model: Any, cache: list[Any], query_length: int, steps: int) -> list[float]:
    """Forward `query_length` tokens `steps` times, the cache one entry longer each time."""
    from mlx_lm.models.cache import trim_prompt_cache

    tokens = mx.array([[7] * query_length])
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        mx.eval(model(tokens, cache=cache))
        times.append(1e3 * (time.perf_counter() - start))
        trim_prompt_cache(cache, query_length - 1)  # keep one entry: the next length is new
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random-pair", default="llama-3-8b-1b", choices=sorted(RANDOM_PAIRS))
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--prompt-length", type=int, default=64)
    args = parser.parse_args()
    from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

    pair = random_pair(args.random_pair)
    switch = os.environ.get("MLX_CUDA_USE_CUDNN_SDPA", "unset")
    print(f"device={mx.default_device()} mlx={version('mlx')} pair={args.random_pair} "
          f"prompt={args.prompt_length} steps={args.steps} MLX_CUDA_USE_CUDNN_SDPA={switch}")
    print("\nMilliseconds per forward, medians (min-max):\n")
    print("| model | query tokens | new key/value lengths | the same lengths again | new / again |")
    print("|---|---:|---:|---:|---:|")
    models: list[tuple[str, Any, tuple[int, ...]]] = [
        ("target", pair.target, (1, 5)), ("drafter", pair.drafter, (1, 2))]
    for label, model, query_lengths in models:
        for query_length in query_lengths:
            cache = make_prompt_cache(model)
            mx.eval(model(mx.array([[3] * args.prompt_length]), cache=cache))
            mx.eval([c.state for c in cache])
            start_offset = cache[0].offset
            # Lengths from the prompt's up: met by no forward of this process before.
            fresh = _forward_ms(model, cache, query_length, args.steps)
            trim_prompt_cache(cache, cache[0].offset - start_offset)
            again = _forward_ms(model, cache, query_length, args.steps)
            a, b = statistics.median(fresh), statistics.median(again)
            print(f"| {label} | {query_length} | {a:.2f} ({min(fresh):.2f}-{max(fresh):.2f}) "
                  f"| {b:.2f} ({min(again):.2f}-{max(again):.2f}) | {a / b:.2f} |", flush=True)


if __name__ == "__main__":
    main()
