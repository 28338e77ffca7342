"""Mark the pages' reference tables, so that a phone can show each row as a card.

The trace format, the vector schema and families describe records field by field in
tables headed ``| Field | Type | ... | Meaning | Example |``. At 390 px their five columns
squeezed an example such as ``"transformers 4.46"`` to three letters a line, and the
"Required" header broke into "Re-qui-red". The notation (``| Symbol | Meaning | In the
code |``) broke its code one letter a line; the rules side by side (``| Rule id | ...``)
and the float32 operation order (``| Step | ...``) hid their last columns behind a scroll,
and the function pages' arguments (``| Argument | Symbol | Shape / dtype | ...``) broke a
dtype such as ``0-d int32`` mid-word.
The Markdown stays a plain table (it must read on a code host); here a table of a spec
page whose first header is one of `CARD_TABLE_HEADERS` gets the class ``card-table``, and
each cell the class ``col-<its header>`` (``col-required``), which the stylesheet's phone
rules use to lay a row out as a card with labelled cells.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

CARD_TABLE_HEADERS = frozenset({"field", "symbol", "step", "rule-id", "key", "argument"})
"""The first headers (as `_slug` writes them) of the tables that read as cards on a phone."""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.strip().lower()).strip("-")


def mark_card_tables(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if not docname.startswith("spec/"):
        return  # the results' tables (the ceiling's "Rule id" too) keep their columns
    for table in doctree.findall(nodes.table):
        head = next(table.findall(nodes.thead), None)
        if head is None:
            continue
        header_row = next(head.findall(nodes.row), None)
        if header_row is None:
            continue
        headers = [_slug(entry.astext()) for entry in header_row.children]
        if not headers or headers[0] not in CARD_TABLE_HEADERS:
            continue
        table["classes"].append("card-table")
        for row in table.findall(nodes.row):
            for entry, header in zip(row.children, headers, strict=False):
                entry["classes"].append(f"col-{header}")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", mark_card_tables)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
