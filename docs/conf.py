"""Sphinx configuration of the specaccept site.

CI builds it twice, as html and as doctests, with ``-n -W --keep-going``
(see ``.ci/check.py``): every warning fails the build, nitpicky included.
"""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

project = "specaccept"
author = "the specaccept authors"
copyright = "the specaccept authors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    # Copies MathJax 3 (from the PyPI package) into _static/mathjax, so formulas typeset
    # with no network; `mathjax_path` below points at that copy.
    "sphinx-mathjax-offline",
    # Local: every spec/ and proofs/ page has a stub here (stub_check), and the
    # acceptance-ceiling table is computed from the code at build time (ceiling_table).
    "stub_check",
    "ceiling_table",
    # Local: the float32 draw's error budget, computed at build time (float_budget_table).
    "float_budget_table",
    # Local: autodoc fixes for api.md (dataclass <factory> defaults).
    "api_support",
    # Local: MathJax on every page (titles with math sit in every sidebar).
    "math_everywhere",
    # Local: spec/vectors/ shipped in the build, and the pages' links to its files resolved.
    "vectors_in_build",
    # Local: the CLI reference of cli.md, rendered from the argparse parser.
    "cli_reference",
    # Local: the API page's groups from __all__ and the home page's module table.
    "code_index",
    # Local: reference tables (Field | Type | ..., Symbol, Step, Rule id) marked, to read as
    # cards on a phone.
    "card_tables",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = [
    "_build",
    # Written by the measurement commands and included by results.md, not pages of their own.
    "results/*.md",
]

myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

# Furo rather than the PyData theme: one column of reading with a sidebar that wraps long
# API names, Previous/Next links under every page (the proofs are a sequence of lemmas),
# wide tables scrolling inside their own box, a phone layout, and no Bootstrap or web fonts
# to fetch. It is maintained (yearly releases) and used by pip, attrs and urllib3.
html_theme = "furo"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_title = "specaccept"

# The vendored MathJax (sphinx-mathjax-offline), never a CDN: the site must read offline.
mathjax_path = "mathjax/tex-chtml.js"
# MathJax 3 reads \text{} and \texttt{} as plain text unless textmacros is loaded: without
# it \texttt{sum\_min} shows its backslash. (The vendored copy has the extension.)
mathjax3_config = {
    "loader": {"load": ["[tex]/textmacros"]},
    "tex": {"packages": {"[+]": ["textmacros"]}},
}

# Copy the code, not the prompts or the outputs, from doctest blocks and shell sessions.
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

# Google-style docstrings only; types live in the annotations.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# The core's annotations name mx.array through the ``Scalar`` and ``TokenIds`` aliases of
# specaccept.core.validation; render the alias names rather than their expansion.
autodoc_type_aliases = {
    "Scalar": "specaccept.core.validation.Scalar",
    "TokenIds": "specaccept.core.validation.TokenIds",
    "TokenLaw": "specaccept.shell.seeded_run.TokenLaw",
}

# Targets outside this site that a nitpicky build cannot resolve: the build is offline, so
# there is no intersphinx inventory for Python, MLX or mlx-lm. Listed one by one, so that
# any other unresolved reference still fails the build.
nitpick_ignore = [
    ("py:class", "collections.abc.Callable"),
    ("py:class", "collections.abc.Iterable"),
    ("py:class", "collections.abc.Iterator"),
    ("py:class", "collections.abc.Mapping"),
    ("py:class", "collections.abc.Sequence"),
    ("py:class", "enum.Enum"),
    ("py:class", "mlx.core.array"),
    ("py:class", "mx.array"),
    ("py:class", "numpy.ndarray"),
    ("py:class", "os.PathLike"),
    ("py:class", "pathlib.Path"),
    # Private parts of the checks' states, named by their fields' types.
    ("py:class", "specaccept.conformance.acceptance._BugTerms"),
    ("py:class", "specaccept.conformance.batch._Entry"),
    ("py:class", "specaccept.conformance.history._Growth"),
    # What autodoc makes of the dataclass signature of a state's dict-of-states field.
    ("py:class", "dict[str"),
]

# Plain ``>>>`` paragraphs (the docstring examples autodoc pulls into api.md) run under
# ``pytest --doctest-modules`` in their own module's namespace; here only the explicit
# {doctest} blocks of the pages run, each importing what it uses.
doctest_test_doctest_blocks = ""
# Sphinx's default flags minus IGNORE_EXCEPTION_DETAIL: a page that shows an error shows the
# library's own message, so an example whose message has gone stale fails the doctest build.
doctest_default_flags = doctest.ELLIPSIS | doctest.DONT_ACCEPT_TRUE_FOR_1
