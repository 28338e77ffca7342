"""Do two vLLM requests whose seeds differ only in their high bits share accept coins?

vLLM 0.34.0 keys block verification's coin for draft i at position pos by
``tl_rand32(seed ^ (i << 32), pos)`` (`spec_step_seed`), and the standard rule's by
``tl_rand32(seed, pos)``. This script draws the coins with the wheel's own functions (the
recorder's `accept_coins`, under Triton's interpreter on a CPU) for a request seeded `s` and
one seeded ``s ^ (j << 32)``, at the same positions, and counts the coins they share: per
rule, per draft step, and per offset j. It prints a Markdown table.

    python examples/engines/vllm/seed_mixing.py [--seed S] [--positions N] [--drafts K]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def _load_recorder() -> Any:
    """record.py beside this file (run as a script, so not importable by package)."""
    spec = importlib.util.spec_from_file_location(
        "vllm_recorder", Path(__file__).resolve().parent / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["vllm_recorder"] = module
    spec.loader.exec_module(module)
    return module


record = _load_recorder()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1234, help="the first request's seed s")
    parser.add_argument("--positions", type=int, default=4096,
                        help="positions compared for each pair (default 4096)")
    parser.add_argument("--drafts", type=int, default=4, help="draft steps k (default 4)")
    parser.add_argument("--cache", type=Path, default=record.DEFAULT_CACHE)
    args = parser.parse_args(argv)
    if not -(2**63) <= args.seed < 2**63:
        parser.error(f"--seed must be an int64, got {args.seed}")
    if args.positions < 1 or args.drafts < 2:
        parser.error(f"--positions must be >= 1 and --drafts >= 2, got {args.positions} "
                     f"and {args.drafts}")
    import torch

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with tempfile.TemporaryDirectory(prefix="specaccept-vllm-") as tmp:
        vllm = record.load_vllm(record.wheel_path(args.cache, True), Path(tmp), None, True)

        drawn: dict[tuple[int, int, bool], list[float]] = {}

        def coins(seed: int, step: int, step_keyed: bool) -> list[float]:
            """The coins of draft `step` at positions 0..N-1 of a request seeded `seed`."""
            if (seed, step, step_keyed) in drawn:
                return drawn[seed, step, step_keyed]
            n = args.positions
            pos = torch.arange(n, dtype=torch.int64, device=device)
            seeds = torch.tensor([seed], dtype=torch.int64, device=device)
            zeros = torch.zeros(n, dtype=torch.int32, device=device)
            steps = torch.full((n,), step, dtype=torch.int32, device=device)
            values: list[float] = vllm.accept_coins(seeds, pos, zeros, steps, step_keyed).tolist()
            drawn[seed, step, step_keyed] = values
            return values

        def shared(a: list[float], b: list[float]) -> int:
            return sum(x == y for x, y in zip(a, b, strict=True))

        s, k, n = args.seed, args.drafts, args.positions
        print(f"First request's seed s = {s}; {n} positions; draft steps i < k = {k}; "
              f"vLLM {record.VLLM_VERSION}, Triton {vllm.triton_version} "
              f"{'interpreter' if device == 'cpu' else device}.\n")
        print("| second seed | rule | draft step pairs (i of s, i' of the other) | "
              "coins shared, of positions compared |")
        print("| --- | --- | --- | --- |")
        for j in range(1, k):
            other = s ^ (j << 32)
            # Block: every pair of steps; a pair shares the key iff i ^ i' == j.
            for i in range(k):
                for i2 in range(k):
                    count = shared(coins(s, i, True), coins(other, i2, True))
                    if count or i ^ i2 == j:
                        print(f"| s ^ ({j} << 32) | block | ({i}, {i2}) | {count} of {n} |")
            count = shared(coins(s, 0, False), coins(other, 0, False))
            print(f"| s ^ ({j} << 32) | standard | (any, any) | {count} of {n} |")
        for other, label in ((s ^ (k << 32), f"s ^ ({k} << 32)"), (s + 1, "s + 1")):
            count = sum(shared(coins(s, i, True), coins(other, i2, True))
                        for i in range(k) for i2 in range(k))
            print(f"| {label} | block | all {k * k} | {count} of {k * k * n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
