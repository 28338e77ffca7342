"""The measurement commands print Markdown that the site includes verbatim: it must read as
the plain text it means, with no formula turned into emphasis or a link by accident."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from specaccept.cli import main

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
MARKUP = {"em_open", "strong_open", "link_open", "image"}


def accidental_markup(markdown: str) -> list[str]:
    """The emphasis, links and images in `markdown` as CommonMark (with tables) reads it."""
    found = []
    for block in MarkdownIt("commonmark").enable("table").parse(markdown):
        for token in block.children or []:
            if token.type in MARKUP:
                found.append(f"{token.type} in {block.content[:80]!r}")
    return found


def test_the_checker_sees_the_formula_that_rendered_as_italics() -> None:
    # The footer as bench used to print it: `*k ... (k*c` became emphasis.
    bare = "Predicted speedup = expected_tokens_per_round([alpha]*k) / (k*c + 5-token cost ratio)."
    assert accidental_markup(bare)


def test_bench_markdown_has_no_accidental_markup(capsys: pytest.CaptureFixture[str]) -> None:
    # A real run on the smallest in-memory pair prints every table and footer bench has.
    assert main(["bench", "--random-pair", "small", "-n", "6", "--repeats", "1"]) == 0
    printed = capsys.readouterr().out
    assert "Predicted speedup" in printed
    assert accidental_markup(printed) == []


RECORDED = [
    path for path in sorted(RESULTS.glob("*.md"))
    if path.read_text(encoding="utf-8").startswith("Produced by:")  # a command's output
]


def test_the_recorded_results_are_found() -> None:
    assert {"bench.md", "table.md"} <= {path.name for path in RECORDED}


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_results_have_no_accidental_markup(path: Path) -> None:
    assert accidental_markup(path.read_text(encoding="utf-8")) == []
