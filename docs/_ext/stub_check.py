"""Fail the build when a page of spec/ or proofs/ has no stub in docs/.

The site includes the normative pages, it never copies them: every page
``spec/<path>.md`` is built through a stub ``docs/spec/<path>.md`` whose only
content is a MyST include of that page (likewise for ``proofs/``). The stub keeps
the page's place in the tree, so the page's relative links (``[x](x.md)``) resolve from the
stub exactly as written.

At ``builder-inited`` this extension lists every source page and every stub and
emits one warning (type ``specaccept.stub``) for each page without a stub, each
stub whose content is not exactly the include, and each stub whose page is gone,
naming the fix. CI builds with ``-W``, so any of them fails the build; a new page
therefore cannot be silently left out of the site. Sphinx's own "document isn't
included in any toctree" warning then catches a stub that no toctree lists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

INCLUDED_TREES = ("spec", "proofs")
"""Folders of the repository whose Markdown pages the site must include, by stub."""


def stub_text(page: Path) -> str:
    """The exact content of the stub of `page`, a path relative to the repository root."""
    up = "../" * len(page.parts)  # from docs/<page>'s folder up to the repository root
    return f"```{{include}} {up}{page.as_posix()}\n```\n"


def stub_problems(root: Path, docs: Path) -> list[str]:
    """Every missing, altered or orphaned stub, one message each; empty: all is well."""
    problems: list[str] = []
    for tree in INCLUDED_TREES:
        pages = {p.relative_to(root) for p in sorted((root / tree).rglob("*.md"))}
        stubs = {p.relative_to(docs) for p in sorted((docs / tree).rglob("*.md"))}
        for page in sorted(pages):
            stub = docs / page
            expected = stub_text(page)
            if page not in stubs:
                problems.append(
                    f"{page} has no stub, so the site leaves it out: create docs/{page} "
                    f"containing only {expected!r}"
                )
            elif stub.read_text(encoding="utf-8").strip() != expected.strip():
                problems.append(
                    f"docs/{page} must contain only the include {expected!r}, "
                    "never a copy or an addition"
                )
        for orphan in sorted(stubs - pages):
            problems.append(
                f"docs/{orphan} is a stub of {orphan}, which does not exist: remove it"
            )
    return problems


def _check(app: Sphinx) -> None:
    docs = Path(app.srcdir)
    for message in stub_problems(docs.parent, docs):
        logger.warning(message, type="specaccept", subtype="stub")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
