"""The trace writer's time and size a round, on both of its value-checking paths.

Run from the repository root:

    python benchmarks/writer_speed.py [--vocabs 67 8192 128256] [--megabytes 300] \
        [--baseline OLD_WRITER.py] [--out DIR]

For each vocabulary it runs `synthetic_engine.py` (one request, k = 4 drafts, stochastic
rule, float16 logits rows given to ``b64_block`` as raw bytes, every uniform recorded) with
the writer checking values through NumPy, through the standard library (the path of a
process without NumPy), and not at all (``check_values=False``), each with every row and
with ``omit_undecided_rows``. It times ``b64_block`` plus ``write_round`` a round (the
median over the run; the engine's own arithmetic is not timed) and divides the trace's size
by its rounds. With ``--baseline``, another copy of ``specaccept_trace.py`` (an earlier
release's, say) is timed the same way in the same run, with its value checks and without,
so that the two are compared side by side on one host. The writing thread's CPU time a
round is printed beside the wall clock: on a shared host the wall clock also counts the
time other processes held the cores. It prints one Markdown table with the machine it ran
on.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

_SPEC = importlib.util.spec_from_file_location(
    "synthetic_engine", Path(__file__).resolve().parent / "synthetic_engine.py")
assert _SPEC is not None and _SPEC.loader is not None
engine: Any = importlib.util.module_from_spec(_SPEC)  # its writer, `st`, is swapped below
sys.modules[_SPEC.name] = engine
_SPEC.loader.exec_module(engine)

BYTES_A_ROUND_FULL = 9 * 2
"""5 target and 4 draft rows of float16: bytes a round per vocabulary entry."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocabs", type=int, nargs="+", default=[67, 8192, 128256])
    parser.add_argument("--megabytes", type=float, default=300.0,
                        help="about how much trace to write per setting (sets the rounds)")
    parser.add_argument("--max-rounds", type=int, default=2000)
    parser.add_argument("--out", default=None, help="folder for the traces (default: temp)")
    parser.add_argument("--baseline", default=None,
                        help="another specaccept_trace.py to time beside this one")
    args = parser.parse_args()
    writers = {"this": engine.st}
    if args.baseline:
        spec = importlib.util.spec_from_file_location("baseline_trace_writer", args.baseline)
        assert spec is not None and spec.loader is not None
        baseline = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(baseline)
        writers["baseline"] = baseline
    folder = Path(args.out or tempfile.mkdtemp(prefix="writer-speed-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python "
          f"{platform.python_version()}, NumPy {np.__version__}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start.\n")
    print("Each setting: one request, k = 4, stochastic rule at temperature 1, 5 target and 4 "
          "draft rows of float16 logits handed to b64_block as raw bytes, every uniform "
          "recorded, written to an uncompressed .jsonl file. Timed a round: b64_block and "
          "write_round, from the raw bytes to the flushed line (not the engine's arithmetic), "
          "as wall clock (perf_counter) and as the writing thread's CPU time (thread_time). "
          "Rows 'decided': omit_undecided_rows=True. Value checks 'none': check_values=False."
          + (f" Writer 'baseline': {args.baseline}, with its own value checks or none."
             if args.baseline else "") + "\n")
    print("| V | writer | value checks | rows | rounds | writer ms a round, median | mean | "
          "CPU ms a round, median | bytes a round |")
    print("|---:|---|---|---|---:|---:|---:|---:|---:|")
    for vocab in args.vocabs:
        rounds = max(20, min(args.max_rounds,
                             int(args.megabytes * 1e6 / (BYTES_A_ROUND_FULL * vocab * 4 / 3))))
        settings = [("this", checks, omit) for checks in ("numpy", "stdlib", "none")
                    for omit in (False, True)]
        if args.baseline:  # its per-number checks are slow: fewer rounds
            settings += [("baseline", checks, False) for checks in ("its-own", "none")]
        for writer, checks, omit in settings:
            engine.st = writers[writer]
            count = rounds if writer == "this" else max(10, rounds // 10)
            out = folder / f"v{vocab}-{writer}-{checks}-{'decided' if omit else 'all'}.jsonl"
            result = engine.run(argparse.Namespace(
                vocab=vocab, rounds=count, runs=1, k=4, seed=0, out=str(out),
                rule="stochastic", bug=None, temperature=1.0, omit_undecided_rows=omit,
                no_check_values=checks == "none", stdlib_checks=checks == "stdlib"))
            engine.st = writers["this"]
            out.unlink()
            print(f"| {vocab:,} | {writer} | {checks} | {'decided' if omit else 'all'} | "
                  f"{count} | {result['median_ms']:.2f} | {result['mean_ms']:.2f} | "
                  f"{result['median_cpu_ms']:.2f} | {result['bytes_per_round']:,.0f} |",
                  flush=True)
    print(f"\nLoad average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
