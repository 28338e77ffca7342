"""The proofs' bookkeeping, checked: every check a page names exists, every proof page
lists the hypotheses it uses, and every hypothesis of ``spec/hypotheses.md`` is a MUST
that names who needs it and what enforces it. A page that cites a renamed test, or a new
lemma page without its hypotheses, fails here rather than misleading a reader."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REGISTER = ROOT / "spec" / "hypotheses.md"
CHECK_REFERENCE = re.compile(r"`((?:proofs|tests)/[\w/]+\.py)::(\w+)`")
PLACEHOLDER = "proofs/test_x.py"
"""The example of the naming convention in proofs/index.md, not a reference."""
HYPOTHESIS_HEADING = re.compile(r"^## (H\d+): ", re.MULTILINE)
HYPOTHESES_LINE = re.compile(r"^\*\*Hypotheses\*\* \(\[register\]\(\.\./spec/hypotheses\.md\)\)"
                             r":(?P<text>.*?)(?:\n\n)", re.MULTILINE | re.DOTALL)
CITED = re.compile(r"\bH(\d+)\b")

PAGES = sorted([*ROOT.glob("spec/**/*.md"), *ROOT.glob("proofs/*.md"), *ROOT.glob("docs/*.md"),
                ROOT / "README.md"])
PROOF_PAGES = sorted(p for p in ROOT.glob("proofs/*.md") if p.name != "index.md")


@functools.cache
def defined_names(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text("utf-8"))
    return frozenset(node.name for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef | ast.ClassDef))


def dangling_checks(text: str, root: Path) -> list[str]:
    """Each `file.py::name` reference in `text` whose file or name does not exist."""
    dangling = []
    for match in CHECK_REFERENCE.finditer(text):
        path, name = match.group(1), match.group(2)
        if path == PLACEHOLDER:
            continue
        if not (root / path).is_file() or name not in defined_names(root / path):
            dangling.append(f"{path}::{name}")
    return dangling


def uncited_check_files(root: Path) -> list[str]:
    """Each ``proofs/test_<page>.py`` named after a proof page ``proofs/<page>.md`` that
    the page does not cite: a lemma's checks live in the file named after its page."""
    uncited = []
    for checks in sorted((root / "proofs").glob("test_*.py")):
        page = root / "proofs" / f"{checks.stem.removeprefix('test_')}.md"
        if page.is_file() and f"proofs/{checks.name}" not in page.read_text("utf-8"):
            uncited.append(f"proofs/{checks.name}")
    return uncited


def register_numbers() -> list[str]:
    return HYPOTHESIS_HEADING.findall(REGISTER.read_text("utf-8"))


def hypotheses_problems(text: str, known: set[str]) -> list[str]:
    """Why a proof page's text does not list its hypotheses properly; empty: it does."""
    match = HYPOTHESES_LINE.search(text)
    if match is None:
        return ["no '**Hypotheses** ([register](../spec/hypotheses.md)): ...' paragraph"]
    cited = {f"H{n}" for n in CITED.findall(match.group("text"))}
    if not cited:
        return ["the Hypotheses paragraph cites no hypothesis H<n>"]
    return [f"cites {h}, which spec/hypotheses.md does not define" for h in sorted(cited - known)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_check_a_page_names_exists(page: Path) -> None:
    assert dangling_checks(page.read_text("utf-8"), ROOT) == []


@pytest.mark.parametrize("page", PROOF_PAGES, ids=lambda p: p.name)
def test_every_proof_page_lists_its_hypotheses(page: Path) -> None:
    problems = hypotheses_problems(page.read_text("utf-8"), set(register_numbers()))
    assert problems == [], f"{page.name}: {problems} (see spec/hypotheses.md)"


def test_the_checks_named_after_a_page_are_cited_by_it() -> None:
    assert uncited_check_files(ROOT) == []


def test_every_hypothesis_is_a_must_with_its_users_and_its_enforcement() -> None:
    text = REGISTER.read_text("utf-8")
    numbers = register_numbers()
    assert numbers == [f"H{i}" for i in range(1, len(numbers) + 1)] and len(numbers) >= 7
    sections = HYPOTHESIS_HEADING.split(text)[1:]
    for number, body in zip(sections[::2], sections[1::2], strict=True):
        body = body.split("\n## ")[0]
        for required in ("MUST", "- Needed by:", "- Enforced by:"):
            assert required in body, f"{number} lacks {required!r}"
        assert f"| {number} |" in text, f"{number} is missing from the summary table"
    assert dangling_checks(text, ROOT) == []


def test_the_bookkeeping_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """A renamed check, a page that does not cite the checks named after it, a page without
    hypotheses and an unknown hypothesis are reported."""
    (tmp_path / "proofs").mkdir()
    (tmp_path / "proofs" / "test_a.py").write_text("def test_present() -> None: ...\n")
    text = "`proofs/test_a.py::test_present` and `proofs/test_a.py::test_renamed`"
    assert dangling_checks(text, tmp_path) == ["proofs/test_a.py::test_renamed"]
    assert dangling_checks("`proofs/test_gone.py::test_x`", tmp_path) == [
        "proofs/test_gone.py::test_x"]
    (tmp_path / "proofs" / "a.md").write_text("# Lemma A\n\nNo check cited.\n")
    assert uncited_check_files(tmp_path) == ["proofs/test_a.py"]
    (tmp_path / "proofs" / "a.md").write_text(text)
    assert uncited_check_files(tmp_path) == []
    known = {"H1", "H2"}
    assert hypotheses_problems("# Lemma\n\nNo list.\n", known)
    line = "**Hypotheses** ([register](../spec/hypotheses.md)): H1 and H9.\n\n"
    assert hypotheses_problems(line, known) == [
        "cites H9, which spec/hypotheses.md does not define"]
    assert hypotheses_problems(line.replace("H9", "H2"), known) == []
