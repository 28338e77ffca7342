#!/usr/bin/env python3
"""The project's whole check, in the order a failure is cheapest to read.

Run from the repository root inside an environment that has `.[dev]`
installed; the README's test command creates that environment first.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON_TREES = ["impl", "tests", "proofs", "spec", "docs", ".ci", "examples", "benchmarks"]
# What pytest runs: every test, proof check and doctest (the mutation gate runs the same).
PYTEST_ARGS = [
    "--doctest-modules", "impl", "tests", "proofs", "README.md", "--doctest-glob=README.md",
]


def step(name: str, *command: str) -> None:
    print(f"\n=== {name}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, check=False)
    print(f"=== {name}: exit {result.returncode} in {time.perf_counter() - start:.1f}s")
    if result.returncode != 0:  # pytest's 5 (no tests collected) fails too
        sys.exit(f"check failed at: {name}")


def main() -> None:
    python = sys.executable
    trees = [t for t in PYTHON_TREES if (ROOT / t).exists()]
    step("ruff", python, "-m", "ruff", "check", *trees)
    step("mypy", python, "-m", "mypy", "--strict", "impl", "tests", "proofs", "examples", "spec")
    step("import contracts", str(Path(python).parent / "lint-imports"))
    # `pip install specaccept` without extras, in a fresh environment, run from elsewhere.
    step("installed wheel", python, ".ci/check_wheel.py")
    # Two workers on CI's two cores: the suite is order-independent (each test owns its
    # temporary files and seeds), and the slow soak and chi-square tests no longer queue.
    step("pytest", python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         *PYTEST_ARGS)
    if (ROOT / "docs" / "conf.py").exists():
        # From scratch: viewcode keeps a module's page when it is newer than the module,
        # so an old build's pages (say, from before MathJax was bundled) would survive.
        shutil.rmtree(ROOT / "docs" / "_build" / "html", ignore_errors=True)
        step("sphinx html", python, "-m", "sphinx", "-n", "-W", "--keep-going", "-b", "html",
             "docs", "docs/_build/html")
        # The built site loads nothing from outside docs/_build/html and shows no raw TeX.
        step("site self-contained", python, ".ci/check_site.py", "docs/_build/html")
        # Every page at 390 and 1280 px in headless Chromium (Debian's, installed here when
        # missing): none taller than 15,000 px, no display equation cut off. Its own budget.
        step("site layout", python, ".ci/check_layout.py", "--install", "--budget-s", "600",
             "docs/_build/html")
        step("sphinx doctest", python, "-m", "sphinx", "-n", "-W", "--keep-going", "-b",
             "doctest", "docs", "docs/_build/doctest")
    # vLLM's and SGLang's verification kernels from their pinned wheels under Triton's
    # interpreter: their traces must conform and the planted mutants must fail (a budget of
    # its own).
    step("engines", "bash", "examples/engines/ci.sh")
    # Last: the longest step, and it relies on the suite above passing on the unmutated tree.
    step("mutation gate", python, ".ci/mutation_gate.py", "--jobs", "2")
    print("\nall checks passed")


if __name__ == "__main__":
    main()
