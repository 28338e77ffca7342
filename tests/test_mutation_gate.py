"""The mutation gate can fail: a surviving mutant or a stale catalogue entry makes it exit non-zero.

Each test hands `.ci/mutation_gate.py` a temporary catalogue. To stay fast the
survivor test replaces the gate's suite with one small test file (the gate's
own `--suite` option, meant for exactly this); the logic that turns a passing
suite into a failed gate is the same one CI runs with the whole suite.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / ".ci" / "mutation_gate.py"

HEADER = "from mutants import Mutant, mutant\n\nREWIND = 'impl/specaccept/core/rewind.py'\n"

# Both edit rewind_trim: the first breaks the plan every rewind test replays, the second only
# rewords an error message past the part the rewind tests match, so that file cannot see it.
KILLED = (
    "mutant('planted-killed', REWIND, 'draft_trim=n - a - 1, draft_backfill=False',"
    " 'draft_trim=n - a, draft_backfill=False', 'drafter one entry short',"
    " scope='rewind_trim')"
)
SURVIVOR = (
    "mutant('planted-survivor', REWIND, 'must be >= 1, got {n}', 'must be >= 1; got {n}',"
    " 'a reworded error message', scope='rewind_trim')"
)


def run_gate(tmp_path: Path, entries: list[str], *options: str) -> subprocess.CompletedProcess[str]:
    catalogue = tmp_path / "catalogue.py"
    catalogue.write_text(HEADER + "MUTANTS = (\n" + "".join(f"    {e},\n" for e in entries) + ")\n")
    return subprocess.run(
        [sys.executable, str(GATE), "--catalogue", str(catalogue), "--jobs", "1", *options],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
    )


def test_a_surviving_mutant_fails_the_gate_and_is_named(tmp_path: Path) -> None:
    result = run_gate(tmp_path, [KILLED, SURVIVOR], "--no-vectors",
                      "--suite", "tests/test_core_rewind.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[suite] planted-killed: killed by tests/test_core_rewind.py::" in result.stdout
    assert "[suite] planted-survivor: SURVIVED" in result.stdout
    assert "1 mutant(s) survived the --suite selection: planted-survivor" in result.stderr
    assert "Killed by the --suite selection: 1/2 (50.0%)" in result.stdout


def test_a_gate_whose_mutants_are_all_killed_passes(tmp_path: Path) -> None:
    result = run_gate(tmp_path, [KILLED], "--no-vectors", "--suite", "tests/test_core_rewind.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Killed by the --suite selection: 1/1 (100.0%)" in result.stdout


def test_a_mutant_whose_original_text_is_gone_fails_before_anything_runs(tmp_path: Path) -> None:
    stale = ("mutant('planted-stale', REWIND, 'draft_trim=n - a - 2', 'draft_trim=n - a',"
             " 'text the code no longer has')")
    ambiguous = ("mutant('planted-ambiguous', REWIND, 'RewindPlan(', 'Plan(',"
                 " 'text the file holds more than once')")
    result = run_gate(tmp_path, [KILLED, stale, ambiguous], "--no-vectors")
    assert result.returncode == 2, result.stdout + result.stderr
    assert ("planted-stale: impl/specaccept/core/rewind.py: its original text is gone from"
            " <module>") in result.stderr
    assert ("planted-ambiguous: impl/specaccept/core/rewind.py: its original text occurs"
            in result.stderr)
    assert "[suite]" not in result.stdout  # nothing ran


def test_the_catalogue_matches_the_code() -> None:
    # The real catalogue, checked the way the gate checks it before running anything.
    result = run_gate_check_only()
    assert result.returncode == 0, result.stderr


def run_gate_check_only() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GATE), "--check-catalogue"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=120,
    )


def load_gate() -> Any:
    sys.path.insert(0, str(ROOT / ".ci"))
    spec = importlib.util.spec_from_file_location("mutation_gate_under_test", GATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_first_tests_run_after_the_first_stage_and_before_the_rest() -> None:
    gate = load_gate()
    hinted = gate.Mutant("m", "impl/x.py", (("a", "b"),), "breaks", first_tests=("tests/t.py",))
    plain = gate.Mutant("n", "impl/x.py", (("a", "b"),), "breaks")
    stages = [["first"], ["rest"]]
    assert gate.with_first_tests(stages, hinted) == [["first"], ["tests/t.py"], ["rest"]]
    assert gate.with_first_tests(stages, plain) == stages


def test_a_mutant_no_vector_replays_runs_its_first_tests_before_the_first_stage() -> None:
    gate = load_gate()
    shell = gate.Mutant("m", "impl/x.py", (("a", "b"),), "breaks", vectors=False,
                        first_tests=("tests/t.py",))
    stages = [["first"], ["rest"]]
    assert gate.with_first_tests(stages, shell) == [["tests/t.py"], ["first"], ["rest"]]
    assert not gate.ran_vectors_first(shell)
    assert gate.ran_vectors_first(gate.Mutant("n", "impl/x.py", (("a", "b"),), "breaks"))


def test_the_pages_follow_the_mutated_source(tmp_path: Path) -> None:
    # A mutant must meet what the pages say, not the drift check: in the gate's copy the
    # page that shows the mutated function is rewritten to show the mutant, then restored.
    gate = load_gate()
    shutil.copytree(ROOT / "spec", tmp_path / "spec")
    shutil.copytree(ROOT / "impl", tmp_path / "impl",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    rewind = tmp_path / "impl" / "specaccept" / "core" / "rewind.py"
    source = rewind.read_text("utf-8")
    rewind.write_text(source.replace("must be >= 1, got {n}", "must be >= 1; got {n}"), "utf-8")
    page = tmp_path / "spec" / "rewind_trim.md"
    before = page.read_text("utf-8")
    previous = gate.follow_the_source(tmp_path)
    assert previous == {page: before}
    assert "must be >= 1; got {n}" in page.read_text("utf-8")


def test_every_group_of_the_report_has_a_page_and_every_mutant_a_group() -> None:
    # The site shows the report's tables one page a group, each page including its table by
    # the markers the report writes: a group whose markers no page includes would vanish
    # from the site, and a renamed marker would include nothing.
    gate = load_gate()
    report = (ROOT / "docs" / "results" / "mutation.md").read_text("utf-8")
    pages = "".join(p.read_text("utf-8") for p in (ROOT / "docs").glob("results_mutation*.md"))
    assert f'"{gate.GROUPS_BEGIN}"' in pages
    for group, _ in gate.MUTANT_GROUPS:
        for marker in gate.group_markers(group):
            assert marker in report, f"the report lacks {marker}"
            assert f'"{marker}"' in pages, f"no docs page includes {marker}"
    groups = {gate.mutant_group(m.path) for m in gate.default_catalogue.MUTANTS}
    assert groups == {group for group, _ in gate.MUTANT_GROUPS}
    # A planted report of two mutants in different groups lists each under its own markers.
    core = gate.Mutant("a", "impl/specaccept/core/sampling.py", (("x", "y"),), "breaks")
    kit = gate.Mutant("b", "impl/specaccept/conformance/law.py", (("x", "y"),), "breaks")
    text = gate.report("cmd", [core, kit], None, None, 1.0, 1, None)
    begin, end = gate.group_markers("sampler")
    sampler = text.split(begin)[1].split(end)[0]
    assert "`a`" in sampler and "`b`" not in sampler
    assert gate.group_markers("verification")[0] not in text  # an empty group is left out
