"""DRY's cost per call against history length: both fast paths beside the quadratic definition.

Run from the repository root:

    python benchmarks/dry.py [--lengths 1000 2000 4000 8000] [--repeats 9]

Each length times one `dry_penalty` call (evaluated) on its two paths, and one whole
`effective_token_distribution` call with DRY on, as medians over the repeats, on the
default device:

- the direct comparison, cut at the saturation length: the llama.cpp defaults
  (dry_multiplier 0.8, dry_base 1.75, dry_allowed_length 2) saturate at L* = 128, so the
  cost is O(n * 128);
- prefix doubling, the fallback: dry_base 1.0001 saturates only at a length of about
  700,000, beyond the direct limit of 512, so the whole Z-array is built, O(n log^2 n);
- the quadratic definition (`dry_penalty_by_definition`, the implementation shipped first).

All of them are timed in one process, interleaved call by call, and each fast penalty is
checked equal to the quadratic one for its setting at every length. A second table times
the direct comparison alone for several cut lengths against prefix doubling: where they
cross is why the direct limit is 512. The histories are random over 67 ids (the demo
vocabulary) with a repeated stretch, so long matches occur.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from importlib.metadata import version
from pathlib import Path

import mlx.core as mx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "impl")]

from specaccept.core.dry import (  # noqa: E402
    DRY_PENALTY_CAP,
    dry_penalty,
    dry_penalty_by_definition,
)
from specaccept.core.dry_fast import (  # noqa: E402
    _LONGEST_DIRECT_MATCH,
    _capped_prefix_match_lengths,
    _prefix_match_lengths,
    saturation_length,
)
from specaccept.core.sampler_config import SamplerConfig  # noqa: E402
from specaccept.core.sampling import effective_token_distribution  # noqa: E402

VOCAB = 67
SATURATING = SamplerConfig(dry_multiplier=0.8, dry_base=1.75, dry_allowed_length=2,
                           dry_sequence_breakers=(0,))
NOT_SATURATING = SamplerConfig(dry_multiplier=0.8, dry_base=1.0001, dry_allowed_length=2,
                               dry_sequence_breakers=(0,))
CUTS = (128, 256, 512, 768, 1024)

Timing = tuple[float, float]  # wall-clock and CPU milliseconds


def _interleaved_medians(
    actions: Sequence[tuple[Callable[[], mx.array], int]],
) -> list[Timing]:
    """Median wall-clock and CPU milliseconds per call of each (action, repeats).

    The actions take turns, one call each per round (an action whose repeats are used up
    sits out), so that a change in the machine's load falls on all of them alike. The CPU
    time counts all of the process's threads: on a shared machine the wall clock also
    counts time spent waiting for a core, the CPU time only the work.
    """
    for action, _ in actions:
        mx.eval(action())  # warm-up
    wall: list[list[float]] = [[] for _ in actions]
    cpu: list[list[float]] = [[] for _ in actions]
    for round_ in range(max(repeats for _, repeats in actions)):
        for index, (action, repeats) in enumerate(actions):
            if round_ >= repeats:
                continue
            start, start_cpu = time.perf_counter(), time.process_time()
            mx.eval(action())
            wall[index].append(time.perf_counter() - start)
            cpu[index].append(time.process_time() - start_cpu)
    return [
        (1e3 * statistics.median(w), 1e3 * statistics.median(c))
        for w, c in zip(wall, cpu, strict=True)
    ]


def _history(length: int, rng: np.random.Generator) -> mx.array:
    ids = rng.integers(1, VOCAB, length)
    stretch = min(length // 4, 500)
    if stretch:
        ids[-stretch:] = ids[length // 3 : length // 3 + stretch]  # a long repeat at the end
    return mx.array(ids.tolist(), dtype=mx.int32)


def _cell(timing: Timing, digits: int = 1) -> str:
    return f"{timing[0]:.{digits}f} / {timing[1]:.{digits}f}"


def _paths_table(lengths: Sequence[int], repeats: int, quadratic_repeats: int) -> None:
    rng = np.random.default_rng(0)
    print("Milliseconds per call, medians: wall clock / CPU time. Saturation lengths: "
          f"L* = {saturation_length(SATURATING, DRY_PENALTY_CAP)} for dry_base 1.75, none up to "
          f"{_LONGEST_DIRECT_MATCH} for dry_base 1.0001.\n")
    print("| n | direct, cut at L* = 128 | prefix doubling (dry_base 1.0001) "
          "| `effective_token_distribution` with DRY (direct) | quadratic "
          "| quadratic / direct (CPU time) | quadratic / doubling (CPU time) |")
    print("| - | - | - | - | - | - | - |")
    for length in lengths:
        history = _history(length, rng)
        logits = mx.array(rng.normal(size=VOCAB).astype(np.float32))
        for config in (SATURATING, NOT_SATURATING):
            fast = dry_penalty(history, config, VOCAB)
            if fast.tolist() != dry_penalty_by_definition(history, config, VOCAB).tolist():
                raise SystemExit(f"the penalties differ at n = {length} for {config}")
        direct, doubling, chain, quadratic = _interleaved_medians([
            (partial(dry_penalty, history, SATURATING, VOCAB), repeats),
            (partial(dry_penalty, history, NOT_SATURATING, VOCAB), repeats),
            (partial(effective_token_distribution, logits, SATURATING, history), repeats),
            (partial(dry_penalty_by_definition, history, SATURATING, VOCAB), quadratic_repeats),
        ])
        print(f"| {length} | {_cell(direct)} | {_cell(doubling)} | {_cell(chain)} "
              f"| {_cell(quadratic, 0)} | {quadratic[1] / direct[1]:.0f}x "
              f"| {quadratic[1] / doubling[1]:.0f}x |", flush=True)


def _cuts_table(lengths: Sequence[int], repeats: int) -> None:
    rng = np.random.default_rng(1)
    print("\nThe match lengths alone: the direct comparison cut at c columns against prefix "
          "doubling, milliseconds per call, medians: wall clock / CPU time.\n")
    print("| n | prefix doubling | " + " | ".join(f"direct, c = {cut}" for cut in CUTS) + " |")
    print("| - | - | " + " | ".join("-" for _ in CUTS) + " |")
    for length in lengths:
        reversed_history = _history(length, rng)[::-1]
        timings = _interleaved_medians([
            (partial(_prefix_match_lengths, reversed_history), repeats),
            *((partial(_capped_prefix_match_lengths, reversed_history, cut), repeats)
              for cut in CUTS if cut < length),
        ])
        cells = [_cell(timing) for timing in timings] + ["" for cut in CUTS if cut >= length]
        print(f"| {length} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--quadratic-repeats", type=int, default=3)
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"device={mx.default_device()} mlx={version('mlx')} machine={platform.machine()} "
          f"cpus={os.cpu_count()} load_average_1min={load:.2f} (DRY does no matmul: BLAS unused)")
    print()
    _paths_table(args.lengths, args.repeats, args.quadratic_repeats)
    _cuts_table(args.lengths, args.repeats)


if __name__ == "__main__":
    main()
