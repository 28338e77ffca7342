"""Compact traces beside full ones: which check catches each broken engine, and bytes a round.

Run from the repository root:

    python benchmarks/compact_traces.py power [--vocab 4096] [--rounds 50] [--runs 4] \
        [--share 0.05] [--seed 0]
    python benchmarks/compact_traces.py size [--vocabs 67 8192 128256] [--rounds 200] \
        [--share 0.01]

``power`` runs `synthetic_engine.py` correct and with each of its planted bugs, once writing
every row and once compact (the same seed: the same decisions, rounds and uniforms), checks
each trace with the conformance kit, and prints one Markdown table: per engine and mode,
each check's verdict and the power the check states against the bug (the kit's own
estimate, which the compact mode scales to the rounds each check reads). ``size`` writes a
correct engine's trace at each vocabulary, full and compact, and prints the bytes a round:
of the compact trace's rounds without rows, of its rounds with rows, and of each trace on
average.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

_SPEC = importlib.util.spec_from_file_location(
    "synthetic_engine", Path(__file__).resolve().parent / "synthetic_engine.py")
assert _SPEC is not None and _SPEC.loader is not None
engine = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = engine
_SPEC.loader.exec_module(engine)

from specaccept.conformance import Verdict, check_trace, read_trace  # noqa: E402

CHECKS = ("replay", "fresh", "support", "acceptance", "law", "draft-law", "batch", "stats")
ENGINES = ((None, "stochastic"), ("resample-from-p", "stochastic"),
           ("shared-batch-coin", "stochastic"), ("position-keyed-uniforms", "block"))
_MARK = {Verdict.PASS: "pass", Verdict.FAIL: "**FAIL**", Verdict.NOT_RUN: "not run"}


def _write(out: Path, *, vocab: int, rounds: int, runs: int, seed: int, rule: str,
           bug: str | None, compact: float | None) -> dict[str, Any]:
    result: dict[str, Any] = engine.run(argparse.Namespace(
        vocab=vocab, rounds=rounds, runs=runs, k=4, seed=seed, out=str(out), rule=rule,
        bug=bug, temperature=1.0, omit_undecided_rows=False, no_check_values=False,
        stdlib_checks=False, compact=compact))
    return result


def power(args: argparse.Namespace) -> None:
    print(f"V = {args.vocab}, {args.runs} requests x {args.rounds} rounds, k = 4, seed "
          f"{args.seed}; compact: full_rows_share {args.share}\n")
    print("| engine | mode | rounds with rows | " + " | ".join(CHECKS) + " | verdict |")
    print("|---|---|---:|" + "---|" * (len(CHECKS) + 1))
    with tempfile.TemporaryDirectory() as tmp:
        for bug, rule in ENGINES:
            for mode, share in (("full", None), ("compact", args.share)):
                path = Path(tmp) / f"{bug}-{mode}.jsonl"
                _write(path, vocab=args.vocab, rounds=args.rounds, runs=args.runs,
                       seed=args.seed, rule=rule, bug=bug, compact=share)
                trace = read_trace(path)
                report = check_trace(trace)
                results = {check.name: check for check in report.checks}
                cells = []
                for name in CHECKS:
                    check = results.get(name)
                    if check is None:
                        cells.append("-")
                        continue
                    cell = _MARK[check.verdict]
                    stated = next((p.probability for p in check.power
                                   if bug is not None and p.bug == bug), None)
                    if stated is not None:
                        cell += f" ({stated:.2f})"
                    cells.append(cell)
                with_rows = sum(r.has_rows for r in trace.rounds)
                verdict = ("DOES NOT CONFORM" if any(c.verdict is Verdict.FAIL
                                                     for c in report.checks) else "conforms")
                print(f"| {bug or 'correct'} ({rule}) | {mode} | {with_rows} of "
                      f"{len(trace.rounds)} | " + " | ".join(cells) + f" | {verdict} |")
    print("\nA cell: the verdict, and in parentheses the power the check states against the "
          "engine's bug (its own model's estimate at this trace's length).")


def size(args: argparse.Namespace) -> None:
    print(f"{args.rounds} rounds (1 request), k = 4, stochastic rule, float16 logits rows; "
          f"compact: full_rows_share {args.share}\n")
    print("| V | full: bytes a round | compact: a round without rows (median) | "
          "compact: a round with rows (median) | rounds with rows | compact: bytes a round |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for vocab in args.vocabs:
            full = _write(Path(tmp) / "full.jsonl", vocab=vocab, rounds=args.rounds, runs=1,
                          seed=0, rule="stochastic", bug=None, compact=None)
            path = Path(tmp) / "compact.jsonl"
            compact = _write(path, vocab=vocab, rounds=args.rounds, runs=1, seed=0,
                             rule="stochastic", bug=None, compact=args.share)
            bare: list[int] = []
            kept: list[int] = []
            for raw in path.read_bytes().splitlines()[1:]:
                record = json.loads(raw)
                if "round" in record:
                    (kept if "target" in record else bare).append(len(raw) + 1)
            kept_cell = f"{statistics.median(kept):,.0f}" if kept else "-"
            print(f"| {vocab:,} | {full['bytes_per_round']:,.0f} | "
                  f"{statistics.median(bare):,.0f} | {kept_cell} | {len(kept)} of "
                  f"{len(kept) + len(bare)} | {compact['bytes_per_round']:,.0f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    power_parser = commands.add_parser("power", help="which check catches each broken engine")
    power_parser.add_argument("--vocab", type=int, default=4096)
    power_parser.add_argument("--rounds", type=int, default=50, help="rounds a request")
    power_parser.add_argument("--runs", type=int, default=4, help="requests in lockstep")
    power_parser.add_argument("--share", type=float, default=0.05)
    power_parser.add_argument("--seed", type=int, default=0)
    size_parser = commands.add_parser("size", help="bytes a round, full and compact")
    size_parser.add_argument("--vocabs", type=int, nargs="+", default=[67, 8192, 128256])
    size_parser.add_argument("--rounds", type=int, default=200)
    size_parser.add_argument("--share", type=float, default=0.01)
    args = parser.parse_args(argv)
    if not 0 <= args.share <= 1:
        parser.error(f"--share must lie in [0, 1], got {args.share}")
    (power if args.command == "power" else size)(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
