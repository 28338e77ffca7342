"""The summary that opens docs/results.md copies its figures; none may be typed by hand.

Every number in a row of the summary table must occur in one of the result files the row
cites (those files open with the command that wrote them), so a figure that drifts from its
file, or one that was never in it, fails here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.md"
NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?")
CITED = re.compile(r"`results/([\w.-]+\.md)`")


def summary_rows() -> list[str]:
    text = RESULTS.read_text("utf-8")
    section = text.split("## Summary\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines()
            if line.startswith("| ") and "`results/" in line]


def test_the_summary_has_rows() -> None:
    assert len(summary_rows()) >= 5


def test_every_summary_figure_is_in_a_file_it_cites() -> None:
    for row in summary_rows():
        what, figure, source = (cell.strip() for cell in row.strip().strip("|").split(" | "))
        cited = CITED.findall(source)
        assert cited, f"a summary row cites no results file: {row}"
        files = " ".join((ROOT / "docs" / "results" / name).read_text("utf-8")
                         for name in cited)
        numbers = set(NUMBER.findall(files.replace(",", "")))
        for number in NUMBER.findall(figure):
            assert number.replace(",", "") in numbers, (
                f"{number} in the summary row {what!r} is in none of {cited}")


def test_a_figure_typed_by_hand_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = summary_rows()
    planted = rows[0].replace("1.49", "1.48", 1)
    assert planted != rows[0]
    monkeypatch.setattr(sys.modules[__name__], "summary_rows", lambda: [planted])
    with pytest.raises(AssertionError, match=r"1\.48"):
        test_every_summary_figure_is_in_a_file_it_cites()
