"""Typeset every formula the site shows, on every page, with the vendored MathJax.

Sphinx loads MathJax only on pages whose body holds math, but page titles with math
(lemma 1's ``exactly $p$``) appear on every page: in the sidebar and in the Previous/Next
links. Without MathJax there they read as raw ``\\(p\\)``. So MathJax is loaded on all
pages (the ``always`` assets policy; the browser caches the script after the first page).

The browser tab cannot typeset anything: the ``<title>`` gets the formula's TeX without
its delimiters (``exactly p``), not ``exactly \\(p\\)``.

``.ci/check_site.py`` fails on a page that shows math without loading MathJax, and on raw
delimiters in any visible text, the title included.
"""

from __future__ import annotations

import re
from typing import Any

from sphinx.application import Sphinx

INLINE_MATH = re.compile(r"\\\((.*?)\\\)")


def plain_title(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    title = context.get("title")
    if isinstance(title, str):
        context["title"] = INLINE_MATH.sub(r"\1", title)


def setup(app: Sphinx) -> dict[str, Any]:
    app.set_html_assets_policy("always")
    app.connect("html-page-context", plain_title)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
