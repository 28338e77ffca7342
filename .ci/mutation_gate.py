#!/usr/bin/env python3
"""The mutation gate: every catalogued mutant of the library must be killed by the suite.

Each mutant of `mutants.py` is applied alone to a private copy of the
repository, and the test-and-proof suite (the very files CI's pytest step runs,
doctests included) runs against that copy with ``-x``. A mutant is killed when
some test fails; a mutant that survives the whole suite fails the gate, which
names it. Before anything runs, every mutant's original text must occur exactly
once in the function it names (`anchoring.py`: matched as Python tokens, so a
formatter cannot strand it), so that a catalogue outgrown by the code fails
loudly instead of mutating nothing.

Two scores are reported:

- the whole suite, which must kill 100% (the gate's verdict);
- the golden vectors alone (`VECTOR_SUITE`): which mistakes a port that passes
  every vector could still make. Informational, listed mutant by mutant. The
  replays run first in each mutant's first run, so with ``-x`` the first
  failure is a vector's exactly when some vector fails: one pass gives both.

Speed, without weakening what "the whole suite" means: each mutant first runs
the vector replays and the core's own tests and doctests
(`FIRST_STAGE_PATTERNS`, seconds); only a mutant they miss runs every other
file of the suite, cheapest first, so a survivor has passed every test CI runs
(the stages together are checked to collect exactly CI's tests). Each job owns
a repository copy and a pytest fork server (`pytest_server.py`) that pays
Python's and pytest's start-up once.

Usage::

    python .ci/mutation_gate.py [--jobs 2] [--report docs/results/mutation.md]
        [--vectors-only | --no-vectors] [--only NAME ...] [--check-catalogue]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import anchoring
import check
import mutants as default_catalogue
from mutants import Mutant

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = Path(__file__).resolve().parent / "mutants.py"

# The gate's own test runs gates of its own; under a mutant it would only recurse.
GATE_TEST = "tests/test_mutation_gate.py"

# The core's unit tests and doctests: they kill most mutants in seconds.
FIRST_STAGE_PATTERNS = ("tests/test_core_*.py", "impl/specaccept/core/*.py")
# Files known to be slow run last; every other file runs in between, by name.
SLOW_LAST = (
    "proofs/test_rewind.py",
    "proofs/test_whole_round.py",
    "tests/test_core_lossless_grid.py",
    "tests/test_generator_sampling.py",
    "tests/test_generator_greedy.py",
    "tests/test_demo_pair.py",
    "tests/test_generator_chisquare.py",
    "tests/test_cli.py",
)
FAST_FIRST = (
    "tests/test_golden_vectors.py",
    "tests/test_fused.py",  # the fast path's own oracle: kills its mutants in seconds
    "proofs/test_closed_forms.py",
    "proofs/test_ceiling_lp.py",
)

# What a port replays: the committed golden vectors.
VECTOR_SUITE = ("tests/test_golden_vectors.py::test_vector_replays",)

# -x: the first failure decides. The Hypothesis profile (tests/conftest.py) skips shrinking and
# keeps no example database; the fixed seed makes every verdict reproducible.
PYTEST = ("-x", "-q", "-p", "no:cacheprovider", "--hypothesis-profile=mutation-gate",
          "--hypothesis-seed=0")
RUN_TIMEOUT_S = 600
TIMEOUT_CODE = -1  # what the server answers for a run it had to kill
SERVER = Path(__file__).resolve().parent / "pytest_server.py"
IGNORED_IN_COPY = shutil.ignore_patterns(
    ".git", "_build", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
    ".hypothesis", "*.egg-info",
)


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        sys.exit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


INLINE_CODE = load_module(ROOT / "spec" / "inline_code.py", "inline_code")
"""The script that copies impl/'s normative code into the spec pages."""


# --- the catalogue -----------------------------------------------------------------------


def mutated_text(mutant: Mutant, source: str) -> str:
    """`source` with the mutant's edits applied; raises ValueError on a stale edit."""
    text = source
    for original, replacement in mutant.edits:
        if original == replacement:
            raise ValueError("an edit replaces its text with itself")
        try:
            text = anchoring.apply_edit(text, mutant.scope, original, replacement)
        except ValueError as error:
            raise ValueError(f"{mutant.path}: {error}") from None
    return text


def catalogue_problems(mutants: Sequence[Mutant], root: Path) -> list[str]:
    """Everything wrong with the catalogue against the tree at `root`; empty when usable."""
    problems: list[str] = []
    seen: set[str] = set()
    for mutant in mutants:
        name, path = mutant.name, mutant.path
        if name in seen:
            problems.append(f"{name}: duplicate name")
        seen.add(name)
        if not mutant.breaks.strip():
            problems.append(f"{name}: says nothing about what it breaks")
        file = root / path
        if not file.is_file():
            problems.append(f"{name}: {path} does not exist")
            continue
        source = file.read_text("utf-8")
        try:
            text = mutated_text(mutant, source)
            compile(text, path, "exec")
        except (ValueError, SyntaxError) as error:
            problems.append(f"{name}: {error}")
            continue
        if mutant.scope == anchoring.MODULE_SCOPE:
            # An edit inside a function must name it: module-wide anchoring is what lets a
            # moved or duplicated function go unnoticed.
            for original, _ in mutant.edits:
                start, _end = anchoring.locate(source, anchoring.MODULE_SCOPE, original)
                inside = anchoring.enclosing_scope(source, start)
                if inside != anchoring.MODULE_SCOPE:
                    problems.append(f"{name}: its edit lies in {inside}; name it as scope=")
    return problems


# --- the suite ---------------------------------------------------------------------------


def ci_pytest_args() -> list[str]:
    """The arguments of CI's pytest step, read from check.py so the two cannot drift."""
    return list(check.PYTEST_ARGS)


def rank(path: str) -> tuple[int, str]:
    if path in SLOW_LAST:
        return 3 + SLOW_LAST.index(path), path
    if any(Path(path).match(p) for p in FIRST_STAGE_PATTERNS):
        return 0, path
    if path in FAST_FIRST:
        return 1, path
    return 2, path


def ordered_suite(root: Path) -> list[str]:
    """Every file CI's pytest step collects from, as explicit paths, cheapest first."""
    files = [str(p.relative_to(root)) for tree in ("tests", "proofs", "impl")
             for p in sorted((root / tree).rglob("*.py"))
             if p.name != "conftest.py" and "__pycache__" not in p.parts]
    files = [f for f in files if f != GATE_TEST]
    return [*sorted(files, key=rank), "README.md", "--doctest-modules", "--doctest-glob=README.md"]



def split_stages(suite: list[str]) -> list[list[str]]:
    """The suite as two runs: the core's tests, then every other file (options in both)."""
    options = [a for a in suite if a.startswith("--")]
    files = [a for a in suite if not a.startswith("--")]
    first = [f for f in files if rank(f)[0] == 0]
    return [first + options, [f for f in files if f not in first] + options]


def environment(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy / "impl")  # replaces any outer path to another tree
    env.pop("SPECACCEPT_STOCHASTIC_ACCEPT", None)
    return env


def collected(root: Path, args: Sequence[str]) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=root, env=environment(root), capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        sys.exit(f"collecting {' '.join(args)} failed:\n{result.stdout[-3000:]}{result.stderr}")
    return {line for line in result.stdout.splitlines() if "::" in line}


def check_suite_is_ci(suite: list[str]) -> int:
    """The ordered suite collects exactly CI's tests (less the gate's own); returns the count."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ours_future = pool.submit(collected, ROOT, suite)
        ci_future = pool.submit(collected, ROOT, ci_pytest_args())
        ours = ours_future.result()
        ci = {n for n in ci_future.result() if not n.startswith(GATE_TEST)}
    if ours != ci:
        missing, extra = sorted(ci - ours)[:5], sorted(ours - ci)[:5]
        sys.exit(f"the gate's suite differs from CI's pytest step: missing {missing}, "
                 f"extra {extra}")
    return len(ours)


# --- running mutants ---------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    killed: bool
    killer: str  # the first failing test, or why the run counts as a kill
    seconds: float


FAILED = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.MULTILINE)  # ids may hold spaces


class PytestServer:
    """A `pytest_server.py` process for one repository copy: pytest runs without start-up cost."""

    def __init__(self, copy: Path) -> None:
        self.copy = copy
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), str(RUN_TIMEOUT_S)], cwd=copy, env=environment(copy),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def run(self, args: Sequence[str]) -> tuple[int, str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([*PYTEST, *args]) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the pytest server of {self.copy} died")
        answer = json.loads(line)
        return int(answer["code"]), str(answer["output"])


def run_pytest(server: PytestServer, args: Sequence[str]) -> tuple[bool, str]:
    """Run pytest in the server's copy; (passed, first failing test or why the run failed)."""
    code, output = server.run(args)
    if code == 0:
        return True, ""
    if code == TIMEOUT_CODE:
        return False, f"timeout after {RUN_TIMEOUT_S}s"
    if code < 0:
        return False, f"crashed with signal {-code}"
    if code in (3, 4, 5, 70):  # internal error, usage error, nothing collected, server failure
        raise RuntimeError(f"pytest exit {code} in {server.copy}:\n{output[-3000:]}")
    match = FAILED.search(output)
    return False, match.group(1) if match else f"pytest exit {code}"


def make_copy(parent: Path, index: int) -> Path:
    """A private copy of the repository that imports `specaccept` from itself."""
    copy = parent / f"tree{index}"
    shutil.copytree(ROOT, copy, ignore=IGNORED_IN_COPY)
    probe = subprocess.run(
        [sys.executable, "-c", "import specaccept; print(specaccept.__file__)"],
        cwd=copy, env=environment(copy), capture_output=True, text=True, check=True,
    )
    if not Path(probe.stdout.strip()).resolve().is_relative_to(copy.resolve()):
        sys.exit(f"the copy imports specaccept from {probe.stdout.strip()}, not from itself")
    return copy


def follow_the_source(copy: Path) -> dict[Path, str]:
    """Rewrite the copy's spec pages from its (mutated) impl, as `spec/inline_code.py` would.

    impl/ is the source of truth and the pages show it; a mutant must be killed by what the
    pages *say* (their doctests, the vectors, the tests), not by the drift check noticing
    that a page still shows the unmutated text, which would kill every mutant, equivalent
    ones included. Returns the pages' previous texts, to restore.
    """
    previous: dict[Path, str] = {}
    for page in INLINE_CODE.pages(copy / "spec"):
        text = page.read_text("utf-8")
        new, stale = INLINE_CODE.inline(text, copy)
        if stale:
            previous[page] = text
            page.write_text(new, "utf-8")
    return previous


def with_first_tests(stages: Sequence[Sequence[str]], mutant: Mutant) -> list[Sequence[str]]:
    """`stages` with the mutant's `first_tests` run right after the first stage, if it has any;
    before it, for a mutant no vector family replays (`Mutant.vectors` false).

    An order, not a selection: the stages after still run every other test, so a mutant the
    named tests miss meets the whole suite as before. The first stage (the vector replays and
    the core's tests) takes about 15 s on two cores, and a mutant of the shell or the
    conformance kit, which no vector replays, would pay it before reaching the test that
    kills it; such a mutant gets no vector score (`ran_vectors_first`).
    """
    if not mutant.first_tests or len(stages) < 2:
        return list(stages)
    if not mutant.vectors:
        return [list(mutant.first_tests), *stages]
    return [stages[0], list(mutant.first_tests), *stages[1:]]


def ran_vectors_first(mutant: Mutant) -> bool:
    """Whether the mutant met the vector replays before any other test: its vector score."""
    return mutant.vectors or not mutant.first_tests


def run_mutant(
    mutant: Mutant, index: int, server: PytestServer, stages: Sequence[Sequence[str]]
) -> Outcome:
    """Run `stages` in order against `copy` with the mutant applied, then restore the files.

    The spec pages that show the mutated code are rewritten to show the mutant
    (`follow_the_source`). A cached .pyc is trusted when the source's size and
    whole-second mtime match, so every version of a file gets its own mtime: the
    mutant with catalogue position `index` is stamped original + index + 1
    seconds, and the original gets its own mtime back.
    """
    file = server.copy / mutant.path
    source = file.read_text("utf-8")
    stat = file.stat()
    start = time.perf_counter()
    pages: dict[Path, str] = {}
    try:
        file.write_text(mutated_text(mutant, source), "utf-8")
        stamp = stat.st_mtime_ns + (index + 1) * 1_000_000_000
        os.utime(file, ns=(stamp, stamp))
        pages = follow_the_source(server.copy)
        for args in with_first_tests(stages, mutant):
            passed, killer = run_pytest(server, args)
            if not passed:
                return Outcome(mutant.name, True, killer, time.perf_counter() - start)
        return Outcome(mutant.name, False, "", time.perf_counter() - start)
    finally:
        file.write_text(source, "utf-8")
        os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        for page, text in pages.items():
            page.write_text(text, "utf-8")


def run_all(
    mutants: Sequence[Mutant], stages: Sequence[Sequence[str]], jobs: int, label: str
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="mutation-gate-") as tmp:
        all_servers = [PytestServer(make_copy(Path(tmp), index)) for index in range(jobs)]
        servers: queue.Queue[PytestServer] = queue.Queue()
        for server in all_servers:
            servers.put(server)

        def job(index: int) -> Outcome:
            server = servers.get()
            try:
                return run_mutant(mutants[index], index, server, stages)
            finally:
                servers.put(server)

        pool = concurrent.futures.ThreadPoolExecutor(jobs)
        try:
            futures = [pool.submit(job, index) for index in range(len(mutants))]
            for future in concurrent.futures.as_completed(futures):
                outcome = future.result()
                verdict = f"killed by {outcome.killer}" if outcome.killed else "SURVIVED"
                print(f"[{label}] {outcome.name}: {verdict} ({outcome.seconds:.1f}s)",
                      flush=True)
            outcomes = [future.result() for future in futures]  # catalogue order
        finally:
            # On an error or a SIGTERM: run no further mutant, and stop the runs in flight
            # (a server whose gate is gone kills its run; see pytest_server.py).
            pool.shutdown(wait=False, cancel_futures=True)
            for server in all_servers:
                server.process.terminate()
                server.process.wait()
    return outcomes


# --- the report --------------------------------------------------------------------------


SAMPLER_FILES = frozenset({"sampling.py", "sampler_config.py", "penalties.py", "dry.py",
                           "dry_fast.py", "draw_law.py", "validation.py"})
MUTANT_GROUPS = (
    ("sampler", "The sampler: its laws, penalties, draw and checks"),
    ("verification", "Verification: acceptance, blocks, trees, rewind, keying, closed forms"),
    ("shell-and-kit", "The shell and the conformance kit"),
)
"""The report's tables, one per group of mutated files: the mutants of one table fill a page
of the site (each of docs/results_mutation_*.md includes one table by the markers the report
writes around it), where one table of every mutant made a page 18,000 px tall on a phone."""
GROUPS_BEGIN = "<!-- the mutants, by group -->"
"""Written after the scores: the site's summary page includes the report up to here."""


def mutant_group(path: str) -> str:
    """The group of `MUTANT_GROUPS` a mutant of the file `path` is listed in."""
    if not path.startswith("impl/specaccept/core/"):
        return "shell-and-kit"
    return "sampler" if Path(path).name in SAMPLER_FILES else "verification"


def group_markers(group: str) -> tuple[str, str]:
    """The comment lines the report writes before and after `group`'s table."""
    return f"<!-- mutants: {group} -->", f"<!-- end of mutants: {group} -->"


def score(outcomes: Sequence[Outcome]) -> str:
    killed = sum(o.killed for o in outcomes)
    return f"{killed}/{len(outcomes)} ({100.0 * killed / max(len(outcomes), 1):.1f}%)"


def report(
    command: str, mutants: Sequence[Mutant], suite: Sequence[Outcome] | None,
    vectors: Sequence[Outcome] | None, seconds: float, jobs: int, tests: int | None,
    suite_label: str = "the whole suite",
) -> str:
    by_suite = {o.name: o for o in suite or ()}
    by_vectors = {o.name: o for o in vectors or ()}
    lines = ["Produced by:", "", "```sh", command, "```", ""]
    lines.append(f"{len(mutants)} mutants, {jobs} parallel jobs, {seconds:.0f} s wall in all.")
    if tests is not None:
        lines.append(f"The whole suite is CI's pytest step, {tests} tests and doctests, less "
                     f"`{GATE_TEST}` (it runs gates of its own). Each mutant runs the vector "
                     "replays and the core's tests first, then the rest only if they miss it; "
                     "a mutant no vector family replays runs the tests it names first instead "
                     "(its vector cell reads 'not run'). The first failing test is named.")
    lines.append("")
    if suite is not None:
        lines.append(f"- Killed by {suite_label}: {score(suite)}")
        survivors = [o.name for o in suite if not o.killed]
        if survivors:
            lines.append(f"- Survivors (each fails the gate): {', '.join(survivors)}")
    if vectors is not None:
        lines.append(f"- Killed by the golden vectors alone (`{' '.join(VECTOR_SUITE)}`): "
                     f"{score(vectors)}")
        in_scope = [o for o in vectors if mutants_by_name(mutants)[o.name].vectors]
        lines.append(f"- ... of the {len(in_scope)} mutants of functions a vector family "
                     f"replays: {score(in_scope)}")
        missed = [o.name for o in vectors if not o.killed]
        if missed:
            lines.append(f"- Missed by the vectors: {', '.join(f'`{m}`' for m in missed)}")
    lines += ["", GROUPS_BEGIN]
    for group, title in MUTANT_GROUPS:
        members = [m for m in mutants if mutant_group(m.path) == group]
        if not members:
            continue
        begin, end = group_markers(group)
        lines += ["", f"## {title} ({len(members)} mutants)", "", begin, "",
                  "| mutant | file | whole suite: first failing test | vectors | what it breaks |",
                  "| ------ | ---- | ------------------------------- | ------- | -------------- |"]
        for m in members:
            name = m.name
            s, v = by_suite.get(name), by_vectors.get(name)
            suite_cell = "not run" if s is None else (
                f"`{s.killer}`".replace("|", "\\|") if s.killed else "SURVIVED")
            vector_cell = ("not run (no family)" if v is None and not m.vectors else
                           "not run" if v is None else "killed" if v.killed else
                           "missed" if m.vectors else "missed (no family)")
            breaks = m.breaks.replace("|", "\\|")
            lines.append(f"| `{name}` | `{Path(m.path).name}` | {suite_cell} | {vector_cell} | "
                         f"{breaks} |")
        lines += ["", end]
    lines += ["", "The catalogue, with each mutant's exact edit, is `.ci/mutants.py`; "
              "mutants left out as equivalent are listed in its docstring."]
    return "\n".join(lines) + "\n"


def mutants_by_name(mutants: Sequence[Mutant]) -> dict[str, Mutant]:
    return {m.name: m for m in mutants}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutants run in parallel")
    parser.add_argument("--catalogue", type=Path, default=CATALOGUE,
                        help="a Python file defining MUTANTS (default: .ci/mutants.py)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    passes = parser.add_mutually_exclusive_group()
    passes.add_argument("--vectors-only", action="store_true",
                        help="run only the golden vectors against each mutant (no verdict)")
    passes.add_argument("--no-vectors", action="store_true",
                        help="leave the vector replays out of the first run (no vector score)")
    parser.add_argument("--suite", nargs="+", metavar="PYTEST_ARG",
                        help="replace the suite (only to demonstrate the gate on a small one)")
    parser.add_argument("--report", type=Path, help="write the markdown report here")
    parser.add_argument("--check-catalogue", action="store_true",
                        help="only check that every mutant's original text is in the code")
    args = parser.parse_args(argv)
    # A terminated gate still removes its repository copies and stops its servers.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    # The report shows what was run; where it was written to changes none of it.
    shown = list(sys.argv[1:] if argv is None else argv)
    if "--report" in shown:
        del shown[shown.index("--report"):shown.index("--report") + 2]
    command = " ".join(["python", ".ci/mutation_gate.py", shlex.join(shown)]).strip()

    catalogue = (default_catalogue if args.catalogue.resolve() == CATALOGUE
                 else load_module(args.catalogue.resolve(), "specaccept_mutants"))
    mutants: list[Mutant] = list(catalogue.MUTANTS)
    if not all(isinstance(m, Mutant) for m in mutants):
        print(f"{args.catalogue}: MUTANTS must hold mutants.Mutant values", file=sys.stderr)
        return 2
    problems = catalogue_problems(mutants, ROOT)
    if problems:
        print("the mutant catalogue does not match the code:", *problems, sep="\n  ",
              file=sys.stderr)
        print(f"update {args.catalogue.name} to the code's new text, keeping each mistake",
              file=sys.stderr)
        return 2
    if args.only:
        unknown = sorted(set(args.only) - {m.name for m in mutants})
        if unknown:
            print(f"unknown mutants: {unknown}", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.name in args.only]
    print(f"catalogue: {len(mutants)} mutants, every original text found exactly once", flush=True)
    if args.check_catalogue:
        return 0
    suite_label = "the --suite selection" if args.suite else "the whole suite"

    start = time.perf_counter()
    tests: int | None = None
    suite_outcomes: list[Outcome] | None = None
    vector_outcomes: list[Outcome] | None = None
    if args.vectors_only:
        vector_outcomes = run_all(mutants, [list(VECTOR_SUITE)], args.jobs, "vectors")
    elif args.suite:
        suite_outcomes = run_all(mutants, [list(args.suite)], args.jobs, "suite")
    else:
        suite = ordered_suite(ROOT)
        tests = check_suite_is_ci(suite)
        first, rest = split_stages(suite)
        if args.no_vectors:
            suite_outcomes = run_all(mutants, [first, rest], args.jobs, "suite")
        else:
            # The vector replays run first: with -x, the first failure is a vector's exactly
            # when some vector fails, so one pass yields both scores.
            suite_outcomes = run_all(mutants, [[*VECTOR_SUITE, *first], rest], args.jobs, "suite")
            catalogue = mutants_by_name(mutants)
            vector_outcomes = [
                Outcome(o.name, o.killed and o.killer.startswith(VECTOR_SUITE), o.killer, 0.0)
                for o in suite_outcomes if ran_vectors_first(catalogue[o.name])
            ]
    seconds = time.perf_counter() - start

    text = report(command, mutants, suite_outcomes, vector_outcomes, seconds, args.jobs, tests,
                  suite_label)
    print("\n" + text)
    if args.report:
        args.report.write_text(text, "utf-8")
    survivors = [o.name for o in suite_outcomes or () if not o.killed]
    if survivors:
        print(f"mutation gate FAILED: {len(survivors)} mutant(s) survived {suite_label}: "
              f"{', '.join(survivors)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
