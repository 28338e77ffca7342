"""Each script under benchmarks/ still runs, at sizes small enough for CI.

The scripts time things, so no figure is checked here: only that each one runs to the
end and prints its table, so that the commands the results files open with keep working.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

RUNS = {
    "round_anatomy.py": (["--random-pair", "small", "-n", "8", "--repeats", "1"],
                         "| how the round is dispatched | ms per round |"),
    "top_p.py": (["--vocab", "512", "--repeats", "1"], "| top-p 0.9 |"),
    "forward_shapes.py": (["--random-pair", "small", "--steps", "2", "--prompt-length", "8"],
                          "| target | 5 |"),
    "compiled_sampler.py": (["--random-pair", "small-self", "-n", "8", "--repeats", "1",
                             "--iterations", "1", "--skip-crash-check"],
                            "| sampler-match, fused uncompiled |"),
    "dry.py": (["--lengths", "64", "--repeats", "1", "--quadratic-repeats", "1"], "| 64 |"),
    "speculation_physics.py": (["--random-pair", "small-self", "--repeats", "1", "--ks", "1",
                                "--context", "8", "--tree", "2x2", "--agreement-tokens", "4"],
                               "| k | target forward of k + 1 tokens, ms |"),
    "tree_conform_memory.py": (["--vocab", "64", "--trees", "12"],
                               "| tree rounds | trace MB | conform s | peak RSS MB |"),
    "tree_acceptance.py": (["--positions", "16", "--temperatures", "1.0"],
                           "| n | chain (sum min) | RRS, n i.i.d. | RSD, n without replacement |"),
}


@pytest.mark.parametrize("script", sorted(RUNS))
def test_the_benchmark_runs_and_prints_its_table(script: str) -> None:
    arguments, expected = RUNS[script]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *arguments],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert expected in done.stdout, done.stdout[-2000:]
