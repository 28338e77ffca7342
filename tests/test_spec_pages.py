"""The spec pages show the normative code inline, exactly as impl/ has it.

impl/ is the source of truth (spec/index.md, "Scope"); `spec/inline_code.py` copies each
normative object into the page that specifies it, after a marker line
``<!-- normative: impl/<file> <object> -->``. These tests discover the pages and the core
modules rather than listing them, so a page or a module added later is held to the same rule:

- every normative block equals its object's source in impl/, byte for byte;
- no page includes code by reference (a Sphinx ``{literalinclude}`` shows a directive, not
  code, to a reader on a code host);
- every function page (a page whose title is a backticked name, "# `name`") shows code;
- every top-level function and class of a normative core module appears on some page.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec"
CORE = ROOT / "impl" / "specaccept" / "core"
NOT_NORMATIVE = {"__init__.py", "dry_fast.py"}
"""Core modules outside the contract: the package file, and DRY's fast match lengths (their
definition is `dry.py`'s; tests/test_dry.py proves the fast ones give the same penalties)."""
CONSTANT_NAME = re.compile(r"^_?[A-Z][A-Z0-9_]*$")
"""A module-level constant (``__all__`` is not one): it is normative like the code reading it."""
FUNCTION_PAGE_TITLE = re.compile(r"^# `[A-Za-z_][A-Za-z0-9_.]*`\s*$", re.MULTILINE)
"""The title of a page that specifies one function or class (STYLE: the heading is the name)."""


def load_inline_code() -> ModuleType:
    spec = importlib.util.spec_from_file_location("inline_code", SPEC / "inline_code.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("inline_code", module)
    spec.loader.exec_module(module)
    return module


inline_code = load_inline_code()
PAGES = inline_code.pages(SPEC)


def page_id(page: Path) -> str:
    return str(page.relative_to(SPEC))


def test_pages_are_discovered() -> None:
    assert len(PAGES) >= 17
    assert SPEC / "index.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_normative_blocks_match_impl(page: Path) -> None:
    _, stale = inline_code.inline(page.read_text("utf-8"), ROOT)
    assert stale == [], (
        f"spec/{page_id(page)} shows code that differs from impl/ ({stale}): "
        "run `python spec/inline_code.py` and review the diff"
    )


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_no_code_by_reference(page: Path) -> None:
    text = page.read_text("utf-8")
    assert "{literalinclude}" not in text, (
        f"spec/{page_id(page)} includes code by reference; write a normative marker instead"
    )


FUNCTION_PAGES = [p for p in PAGES if FUNCTION_PAGE_TITLE.search(p.read_text("utf-8"))]


def test_function_pages_are_recognised() -> None:
    names = {page_id(p) for p in FUNCTION_PAGES}
    assert {"sample_from_distribution.md", "verify_tokenwise.md", "sampler_config.md"} <= names
    assert "index.md" not in names


@pytest.mark.parametrize("page", FUNCTION_PAGES, ids=page_id)
def test_function_pages_show_their_code(page: Path) -> None:
    assert inline_code.markers(page.read_text("utf-8")), (
        f"spec/{page_id(page)} shows no normative code: add a marker "
        "`<!-- normative: impl/specaccept/core/<module>.py <name> -->` and run "
        "`python spec/inline_code.py`"
    )


def normative_objects() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for module in sorted(CORE.glob("*.py")):
        if module.name in NOT_NORMATIVE:
            continue
        path = str(module.relative_to(ROOT))
        for node in ast.parse(module.read_text("utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                found.add((path, node.name))
            name = inline_code.assigned_name(node)
            if name is not None and CONSTANT_NAME.match(name):
                found.add((path, name))  # a constant the normative code reads
    return found


def test_every_normative_object_is_shown_on_a_page() -> None:
    shown = {m for page in PAGES for m in inline_code.markers(page.read_text("utf-8"))}
    objects = normative_objects()
    assert len(objects) > 20
    missing = sorted(objects - shown)
    assert missing == [], f"normative code shown on no spec page: {missing}"


def test_a_drifted_block_is_reported(tmp_path: Path) -> None:
    # The check can fail: copy a module, change one line of the object, and the page that
    # showed the old text is stale against the changed copy.
    page = SPEC / "sample_from_distribution.md"
    text = page.read_text("utf-8")
    (path, name), *_ = inline_code.markers(text)
    changed = tmp_path / path
    changed.parent.mkdir(parents=True)
    source = (ROOT / path).read_text("utf-8")
    assert "partial_sums > target" in source
    changed.write_text(source.replace("partial_sums > target", "partial_sums >= target"), "utf-8")
    new_text, stale = inline_code.inline(text, tmp_path)
    assert stale == [f"{path} {name}"]
    assert "partial_sums >= target" in new_text
    assert inline_code.inline(new_text, tmp_path)[1] == []


def test_a_missing_object_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(inline_code.MarkerError, match="no_such_function"):
        inline_code.inline(
            "<!-- normative: impl/specaccept/core/sampling.py no_such_function -->\n", ROOT
        )


def test_a_constant_is_shown_with_its_docstring() -> None:
    source = inline_code.object_source(CORE / "draw_law.py", "_BISECTION_STEPS")
    assert source.startswith("_BISECTION_STEPS = 25\n")
    assert "Halvings" in source  # the docstring string after the assignment comes with it


VECTOR_LINK = re.compile(r"\]\((?P<target>(?:vectors/)?[a-z_]+\.(?:json|py))\)")


def test_every_vector_file_is_linked_from_the_schema_page() -> None:
    # The site ships spec/vectors/ (docs/_ext/vectors_in_build.py); this page is its index.
    text = (SPEC / "vectors" / "schema.md").read_text("utf-8")
    linked = {m["target"] for m in VECTOR_LINK.finditer(text)}
    files = {p.name for p in (SPEC / "vectors").glob("*.json")}
    assert files - linked == set(), "add these files to schema.md's table of vector files"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(SPEC)))
def test_vector_links_point_at_existing_files(page: Path) -> None:
    for match in VECTOR_LINK.finditer(page.read_text("utf-8")):
        assert (page.parent / match["target"]).is_file(), f"{page.name}: {match['target']}"
