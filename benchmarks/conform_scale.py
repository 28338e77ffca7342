"""Conformance at scale: writer ms a round, trace bytes a round, `conform` rounds/s and peak memory.

Run from the repository root (a fresh clone's venv with `.[dev]`):

    python benchmarks/conform_scale.py [--vocab 67 8192 128256] [--rounds 100 1000 10000]
        [--jobs 1 2] [--runs 4] [--max-trace-gb 4] [--dir DIR] [--baseline REV]

For each vocabulary and length, `benchmarks/synthetic_engine.py` writes a correct
stochastic-rule trace (float16 logits rows, `--runs` requests in lockstep, k = 4,
temperature 0.7, every uniform recorded), then `specaccept conform TRACE --jobs N --json`
checks it in a child process, once per process count. Peak memory is the largest sum of the
resident sets of the checking process and its workers, sampled every 50 ms from /proc.
A combination whose trace would exceed `--max-trace-gb` is skipped and listed as such.

With `--baseline REV`, the library as of git revision REV (its `impl/`, extracted with
`git archive`) checks each trace too, right before the current code, in the same way: the
table adds its rounds/s, the ratios of the two in wall time and in CPU time (the child's user
and system seconds, which other work on a loaded machine disturbs less), and whether the two
reports give every check the same verdict and statistic.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BYTES_PER_ENTRY = 3.0  # float16 base64 is 8/3 bytes an entry, plus the JSON around it


def _tree_rss(pid: int) -> int:
    """The resident bytes of `pid` and every descendant (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += rss.get(current, 0)
        stack += children.get(current, [])
    return total


def _conform(trace: Path, jobs: int, library: Path | None = None) -> dict[str, Any]:
    """`conform` on the trace in a child process; with `library`, that folder's `specaccept`
    is imported instead of the installed one."""
    command = [sys.executable, "-c", "from specaccept.cli import main; raise SystemExit(main())",
               "conform", str(trace), "--jobs", str(jobs), "--json"]
    env = dict(os.environ)
    if library is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(library), env.get("PYTHONPATH", "")])
    start = time.perf_counter()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_rss(process.pid))
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    out, err = process.communicate()
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    if process.returncode not in (0, 1):
        raise RuntimeError(f"conform failed ({process.returncode}): {err.strip()}")
    report = json.loads(out)
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_bytes": peak, "passed": report["passed"],
            "rounds": report["rounds"],
            "checks": [(c["name"], c["verdict"], c["statistic"]) for c in report["checks"]]}


def _write(vocab: int, rounds: int, runs: int, out: Path) -> dict[str, float]:
    command = [sys.executable, str(ROOT / "benchmarks" / "synthetic_engine.py"),
               "--vocab", str(vocab), "--rounds", str(max(1, rounds // runs)), "--runs",
               str(runs), "--k", "4", "--seed", "0", "--temperature", "0.7", "--out", str(out)]
    printed = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    found = re.search(r"writer ms a round: median ([0-9.]+)", printed)
    return {"writer_ms": float(found.group(1)) if found else float("nan"),
            "bytes_per_round": out.stat().st_size / max(1, rounds // runs * runs)}


def _numpy_blas() -> str:
    """The BLAS NumPy was built with, as NumPy reports it."""
    import numpy as np

    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas['version']}"
    except (KeyError, TypeError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, nargs="+", default=[67, 8192, 128256])
    parser.add_argument("--rounds", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=int, default=4, help="requests in lockstep")
    parser.add_argument("--max-trace-gb", type=float, default=4.0)
    parser.add_argument("--dir", default=None, help="where the traces go (default: a temp dir)")
    parser.add_argument("--baseline", default=None, metavar="REV",
                        help="also time the library as of this git revision, side by side")
    args = parser.parse_args()
    import mlx.core as mx
    import numpy as np

    from specaccept.cli.options import blas_in_use

    print("Produced by:\n\n```sh\npython benchmarks/conform_scale.py "
          + " ".join(sys.argv[1:]) + "\n```\n")
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"mlx {mx.__version__} ({mx.default_device()}), numpy {np.__version__}; BLAS: "
          f"{blas_in_use()} for MLX, {_numpy_blas()} for NumPy. Rounds/s "
          "is the trace's rounds over the whole `conform` command's wall time (start-up, "
          "reading, checking, report); peak memory is the largest resident total of the "
          "checking processes.\n")
    extra = (f" | {args.baseline} rounds/s | speed-up (wall) | speed-up (CPU) | same checks |"
             if args.baseline else " |")
    print("| V | rounds | writer ms/round | trace MB/round | trace GB | jobs | conform s "
          "| rounds/s | peak memory GB | verdict" + extra)
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---" + ("|---:|---:|---:|---" if
                                                                args.baseline else "") + "|")
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        baseline = None
        if args.baseline:
            baseline = Path(folder) / "baseline"
            baseline.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "impl"],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(baseline)], input=archive, check=True)
            baseline = baseline / "impl"
        for vocab in args.vocab:
            for rounds in args.rounds:
                estimate = rounds * 9 * vocab * BYTES_PER_ENTRY / 1e9
                if estimate > args.max_trace_gb:
                    print(f"| {vocab:,} | {rounds:,} | | | ~{estimate:.0f} | | skipped: over "
                          f"--max-trace-gb {args.max_trace_gb:g} | | | |", flush=True)
                    continue
                trace = Path(folder) / f"v{vocab}-r{rounds}.jsonl"
                written = _write(vocab, rounds, args.runs, trace)
                for jobs in args.jobs:
                    before = _conform(trace, jobs, baseline) if baseline else None
                    result = _conform(trace, jobs)
                    compared = " |"
                    if before is not None:
                        speed = result["rounds"] / result["seconds"]
                        old = before["rounds"] / before["seconds"]
                        cpu = before["cpu_seconds"] / result["cpu_seconds"]
                        compared = (f" | {old:.1f} | {speed / old:.2f}x | {cpu:.2f}x | "
                                    f"{'yes' if before['checks'] == result['checks'] else 'NO'} |")
                    print(f"| {vocab:,} | {result['rounds']:,} | {written['writer_ms']:.2f} | "
                          f"{written['bytes_per_round'] / 1e6:.3f} | "
                          f"{trace.stat().st_size / 1e9:.2f} | {jobs} | "
                          f"{result['seconds']:.1f} | {result['rounds'] / result['seconds']:.1f}"
                          f" | {result['peak_bytes'] / 2**30:.2f} | "
                          f"{'CONFORMS' if result['passed'] else 'DOES NOT CONFORM'}"
                          + compared, flush=True)
                trace.unlink()


if __name__ == "__main__":
    main()
