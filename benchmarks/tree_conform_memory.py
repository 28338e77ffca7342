"""Peak memory of `specaccept conform` on tree traces of growing length.

Run from the repository root (a fresh clone's venv with `.[dev]`):

    python benchmarks/tree_conform_memory.py [--vocab 4096] [--trees 200 2000] [--dir DIR]

For each length, writes a correct tree trace (a full 2x2 tree each round, i.i.d. siblings,
random target and drafter laws over `--vocab` tokens as base64 float32 rows, decided by
`verify_tree` on recorded uniforms, cache offsets recorded), then checks it with
`specaccept conform TRACE --jobs 1 --json` in a child process and reads the child's peak
resident set from the kernel (`os.wait4`'s ``ru_maxrss``). The tree checks stream, so the
peak should not grow with the number of tree rounds; a checker that kept every tree round
would grow by about the rows' size a round.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mlx.core as mx
import numpy as np

import specaccept_trace
from specaccept.core.tree import TreeScheme, verify_tree
from specaccept.shell.tree_generator import full_tree_parents

PROMPT_LENGTH = 8


def _law(rng: np.random.Generator, vocab: int) -> np.ndarray:
    logits = 2.0 * rng.standard_normal(vocab)
    weights = np.exp(logits - logits.max())
    return (weights / weights.sum()).astype(np.float32)


def _uniforms(rng: np.random.Generator, count: int) -> np.ndarray:
    return (rng.integers(0, 2**24, count) / 2.0**24).astype(np.float32)


def write_trace(path: Path, vocab: int, trees: int, seed: int = 0) -> None:
    """A correct tree trace of `trees` rounds (2x2 trees, i.i.d. siblings)."""
    rng = np.random.default_rng(seed)
    parents = full_tree_parents(2, 2)
    size = len(parents)
    children: list[list[int]] = [[] for _ in range(size + 1)]
    for i, parent in enumerate(parents):
        children[parent + 1].append(i)
    inner = [row for row in range(size + 1) if children[row]]
    with path.open("w") as stream:
        writer = specaccept_trace.TraceWriter(stream, vocab_size=vocab,
                                              engine="tree_conform_memory benchmark")
        run = writer.start_run("0", prompt_length=PROMPT_LENGTH)
        position = 0
        for _ in range(trees):
            p = np.stack([_law(rng, vocab) for _ in range(size + 1)])
            q = np.stack([_law(rng, vocab) for _ in range(size + 1)])
            tokens = [0] * size
            for row in inner:
                cdf = np.cumsum(q[row].astype(np.float64))
                for child in children[row]:
                    tokens[child] = int(min(np.searchsorted(cdf, rng.random() * cdf[-1]),
                                            vocab - 1))
            accept, sample = _uniforms(rng, size), _uniforms(rng, 3)
            verdict = verify_tree(TreeScheme.IID, parents, mx.array(p), mx.array(q), tokens,
                                  mx.array(accept), mx.array(sample))
            count = int(np.array(verdict.num_accepted))
            path_nodes = np.array(verdict.accepted_nodes).astype(int).tolist()[:count]
            emitted = [*(tokens[n] for n in path_nodes), int(np.array(verdict.next_token))]
            start = PROMPT_LENGTH + position - 1
            end = start + len(emitted)
            run.write_tree_round(
                scheme=TreeScheme.IID, parents=parents, node_tokens=tokens,
                target=specaccept_trace.b64_block(p.tobytes(), rows=size + 1),
                draft=specaccept_trace.b64_block(q[inner].tobytes(), rows=len(inner)),
                path=path_nodes, emitted=emitted,
                uniforms={"accept": accept.tolist(), "sample": sample.tolist()},
                cache={"target_before": start, "target_after": end})
            position += len(emitted)


def conform_peak(trace: Path) -> tuple[int, float, dict[str, object]]:
    """(peak resident bytes, seconds, the JSON report) of `conform` on `trace`."""
    command = [sys.executable, "-c", "from specaccept.cli import main; raise SystemExit(main())",
               "conform", str(trace), "--jobs", "1", "--json"]
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        out.seek(0)
        report = json.loads(out.read())
    return usage.ru_maxrss * 1024, seconds, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--trees", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the traces are written (default: a temporary folder)")
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="tree-memory-"))
    print(f"V = {args.vocab}, full 2x2 trees, i.i.d. siblings, base64 float32 rows; "
          f"`specaccept conform TRACE --jobs 1 --json`, peak resident set of the process\n")
    print("| tree rounds | trace MB | conform s | peak RSS MB | verdict |")
    print("|---|---|---|---|---|")
    for trees in args.trees:
        trace = folder / f"trees-{args.vocab}-{trees}.jsonl"
        write_trace(trace, args.vocab, trees)
        peak, seconds, report = conform_peak(trace)
        verdict = "conforms" if report["passed"] else "DOES NOT CONFORM"
        print(f"| {report['rounds']} | {trace.stat().st_size / 1e6:.0f} | {seconds:.1f} | "
              f"{peak / 1e6:.0f} | {verdict} |", flush=True)
        trace.unlink()


if __name__ == "__main__":
    main()
