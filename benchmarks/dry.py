"""DRY's cost per call against history length: the Z-array penalty beside the quadratic one.

Run from the repository root:

    python benchmarks/dry.py [--lengths 1000 2000 4000 8000] [--repeats 7]

Each length times one `_dry_penalty` call (evaluated) and one whole
`effective_token_distribution` call with DRY on, as medians over the repeats, on the default
device; the quadratic definition (tests/dry_oracle.py, the implementation shipped before) is
timed in the same process, interleaved with the Z-array one, and the ratio is printed. The
two results are checked equal at every length. The histories are random over 67 ids (the demo
vocabulary) with a repeated stretch, so long matches occur.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import mlx.core as mx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "impl"), str(ROOT / "tests")]

from dry_oracle import quadratic_dry_penalty  # noqa: E402
from specaccept.core.sampling import (  # noqa: E402
    SamplerConfig,
    _dry_penalty,
    effective_token_distribution,
)

VOCAB = 67
CONFIG = SamplerConfig(dry_multiplier=0.8, dry_base=1.75, dry_allowed_length=2,
                       dry_sequence_breakers=(0,))


def _median_ms(action: Callable[[], mx.array], repeats: int) -> tuple[float, float]:
    """Median wall-clock and median CPU milliseconds (all of the process's threads) per call.

    On a shared machine the wall clock counts time spent waiting for a core; the CPU
    time counts only the work, so it is the steadier of the two there.
    """
    mx.eval(action())  # warm-up
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        mx.eval(action())
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return 1e3 * statistics.median(wall), 1e3 * statistics.median(cpu)


def _history(length: int, rng: np.random.Generator) -> mx.array:
    ids = rng.integers(1, VOCAB, length)
    stretch = min(length // 4, 500)
    if stretch:
        ids[-stretch:] = ids[length // 3 : length // 3 + stretch]  # a long repeat at the end
    return mx.array(ids.tolist(), dtype=mx.int32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quadratic-repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"device={mx.default_device()} mlx={version('mlx')} machine={platform.machine()} "
          f"cpus={os.cpu_count()} load_average_1min={load:.2f} (DRY does no matmul: BLAS unused)")
    print("\nMilliseconds per call, medians: wall clock / CPU time.\n")
    print("| n | Z-array `_dry_penalty` | `effective_token_distribution` with DRY "
          "| quadratic `_dry_penalty` | quadratic / Z-array (CPU time) |")
    print("| - | - | - | - | - |")
    for length in args.lengths:
        history = _history(length, rng)
        logits = mx.array(rng.normal(size=VOCAB).astype(np.float32))
        fast = _dry_penalty(history, CONFIG, VOCAB)
        slow = quadratic_dry_penalty(history, CONFIG, VOCAB)
        if fast.tolist() != slow.tolist():
            raise SystemExit(f"the two penalties differ at n = {length}")
        fast_ms = _median_ms(lambda h=history: _dry_penalty(h, CONFIG, VOCAB), args.repeats)
        chain_ms = _median_ms(
            lambda h=history, z=logits: effective_token_distribution(z, CONFIG, h), args.repeats
        )
        slow_ms = _median_ms(
            lambda h=history: quadratic_dry_penalty(h, CONFIG, VOCAB), args.quadratic_repeats
        )
        print(f"| {length} | {fast_ms[0]:.1f} / {fast_ms[1]:.1f} "
              f"| {chain_ms[0]:.1f} / {chain_ms[1]:.1f} | {slow_ms[0]:.0f} / {slow_ms[1]:.0f} "
              f"| {slow_ms[1] / fast_ms[1]:.0f}x |", flush=True)


if __name__ == "__main__":
    main()
