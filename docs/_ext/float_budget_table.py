"""The float32 draw's error budget table, computed from the code at build time.

``{float-budget-table}`` (no arguments, no content) renders one row per case of
``proofs/float_budget.py``: the exact total variation between the realized law of
`specaccept.sample_from_distribution` on the 2**-24 uniform grid (`grid_draw_counts`)
and the distribution it draws from, beside the proved bound. At ``builder-inited`` a
warning of type ``specaccept.float_budget`` is emitted, which ``-W`` turns into a
failure, for every row above the proved bound or the budget the page states, so the
page cannot drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: proofs/

from proofs.float_budget import BudgetRow, budget_problems, budget_rows, proved_bound

logger = logging.getLogger(__name__)

_ROWS: list[BudgetRow] = []


def rows() -> list[BudgetRow]:
    """The cases, computed once per build."""
    if not _ROWS:
        _ROWS.extend(budget_rows())
    return _ROWS


def _cell(text: str) -> nodes.entry:
    paragraph = nodes.paragraph()
    paragraph += nodes.Text(text)
    return nodes.entry("", paragraph)


class FloatBudgetTable(SphinxDirective):
    has_content = False
    required_arguments = 0
    optional_arguments = 0

    def run(self) -> list[nodes.Node]:
        headers = ["logits", "V", "T", "TV(rho, p)", "proved bound", "mass below 2^-24",
                   "ids never drawn", "ids with p > 0", "two-level TV"]
        table = nodes.table(classes=["float-budget"])
        group = nodes.tgroup(cols=len(headers))
        table += group
        for _ in headers:
            group += nodes.colspec(colwidth=10)
        head = nodes.thead()
        group += head
        head += nodes.row("", *[_cell(h) for h in headers])
        body = nodes.tbody()
        group += body
        for row in rows():
            body += nodes.row("", *[
                _cell(row.kind), _cell(f"{row.vocab_size:,}"), _cell(f"{row.temperature}"),
                _cell(f"{row.total_variation:.3e}"),
                _cell(f"{proved_bound(row.positive_ids):.3e}"),
                _cell(f"{row.sub_grid_mass:.2e}"), _cell(f"{row.lost_ids:,}"),
                _cell(f"{row.positive_ids:,}"), _cell(f"{row.two_level_total_variation:.2e}"),
            ])
        return [table]


def _check(app: Sphinx) -> None:
    for problem in budget_problems(rows()):
        logger.warning(f"proofs/float_budget.py: {problem}", type="specaccept",
                       subtype="float_budget")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("float-budget-table", FloatBudgetTable)
    app.connect("builder-inited", _check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
