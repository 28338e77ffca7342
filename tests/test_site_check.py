"""The site check of .ci/check_site.py fails on what it exists to catch.

Each test plants one defect in a small site that otherwise passes: a resource from a CDN,
raw TeX in a paragraph, math with no MathJax to typeset it. The real site is checked by
CI right after its html build.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

CHECKER = Path(__file__).resolve().parent.parent / ".ci" / "check_site.py"


def load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_site", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_site = load_checker()

HEAD = """<link rel="stylesheet" href="_static/site.css">
<script defer src="_static/mathjax/tex-chtml.js"></script>"""
BODY = """<p>Rejection sampling emits <span class="math notranslate">\\(p\\)</span> exactly.</p>
<div class="math">\\[\\sum_x \\min(p, q)\\]</div>
<pre>In code a \\( is only a character, and so is $$.</pre>
<p>It costs between $5 and $10, or $3.</p>
<p>See <code>re.compile(r"\\(")</code> and
<a href="https://arxiv.org/abs/2211.17192">the paper</a>.</p>
<img src="_static/plot.png" alt="a plot">"""


SCROLLING_MATH = """mjx-container[display="true"] {
  overflow-x: auto;
  background: linear-gradient(to right, white, transparent) left / 2rem 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%, grey, transparent) left / 1rem 100% no-repeat scroll;
}
"""


def write_site(root: Path, head: str = HEAD, body: str = BODY,
               css: str = SCROLLING_MATH) -> Path:
    (root / "_static" / "mathjax").mkdir(parents=True)
    (root / "_static" / "mathjax" / "tex-chtml.js").write_text("// MathJax\n")
    (root / "_static" / "plot.png").write_bytes(b"\x89PNG")
    (root / "_static" / "font.woff2").write_bytes(b"wOF2")
    (root / "_static" / "site.css").write_text(
        "/* url(https://ignored.example/in-a-comment.css) */\n"
        "@font-face { src: url('font.woff2'); }\n"
        ".icon { background: url(\"data:image/svg+xml;utf8,<svg></svg>\"); }\n" + css
    )
    (root / "index.html").write_text(
        f"<!doctype html><html><head><title>A page</title>{head}</head>"
        f"<body>{body}</body></html>"
    )
    return root


def test_a_clean_site_passes(tmp_path: Path) -> None:
    assert check_site.site_problems(write_site(tmp_path)) == []
    assert check_site.main([str(tmp_path)]) == 0


@pytest.mark.parametrize(
    "planted",
    [
        '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>',
        '<script src="//cdn.example.org/x.js"></script>',
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Lato">',
        '<script src="/usr/share/javascript/mathjax/tex-chtml.js"></script>',
        '<script src="../outside.js"></script>',
        '<script src="_static/never-written.js"></script>',
        '<iframe src="https://www.youtube.com/embed/x"></iframe>',
        '<img srcset="_static/plot.png 1x, https://example.org/plot@2x.png 2x">',
        "<style>@import url(https://example.org/theme.css);</style>",
        '<div style="background: url(https://example.org/bg.png)"></div>',
    ],
)
def test_a_resource_from_outside_fails(tmp_path: Path, planted: str) -> None:
    problems = check_site.site_problems(write_site(tmp_path, head=HEAD + planted))
    assert len(problems) == 1, problems
    assert problems[0].startswith("index.html: ")


@pytest.mark.parametrize(
    "css", ['@import "https://example.org/theme.css";', "body { background: url(/bg.png) }"]
)
def test_a_stylesheet_loading_from_outside_fails(tmp_path: Path, css: str) -> None:
    problems = check_site.site_problems(write_site(tmp_path, css=SCROLLING_MATH + css))
    assert len(problems) == 1, problems
    assert problems[0].startswith("_static/site.css: ")


@pytest.mark.parametrize(
    "planted",
    [
        "<p>the target's law \\(p(t) &gt; 0\\) holds</p>",
        "<p>a display \\[r(x) = \\frac{a}{b}\\] left raw</p>",
        "<p>dollars $$x$$ that dollarmath never saw</p>",
        "<li><em>an emphasised \\(q\\)</em></li>",
        "<p>a single-dollar $p(t)$ a parser missed</p>",
    ],
)
def test_raw_tex_in_visible_text_fails(tmp_path: Path, planted: str) -> None:
    problems = check_site.site_problems(write_site(tmp_path, body=BODY + planted))
    assert len(problems) == 1, problems
    assert "raw TeX delimiter" in problems[0]


@pytest.mark.parametrize(
    "planted",
    [
        # What a `$$` block straight after a list item's text rendered as.
        '<li>the bound is\n$<span class="math notranslate">\\(T \\le 2^{-24}\\)</span>$</li>',
        '<li>$$<div class="math">\\[x\\]</div></li>',
    ],
)
def test_dollar_signs_around_typeset_math_fail(tmp_path: Path, planted: str) -> None:
    problems = check_site.site_problems(write_site(tmp_path, body=BODY + planted))
    assert any("dollar sign beside typeset math" in problem for problem in problems), problems


def test_raw_tex_in_the_title_fails(tmp_path: Path) -> None:
    site = write_site(tmp_path)
    page = site / "index.html"
    page.write_text(page.read_text().replace("A page", "exactly \\(p\\)"))
    assert len(check_site.site_problems(site)) == 1


def test_math_without_mathjax_fails(tmp_path: Path) -> None:
    stylesheet_only = '<link rel="stylesheet" href="_static/site.css">'
    problems = check_site.site_problems(write_site(tmp_path, head=stylesheet_only))
    assert problems == ["index.html: has math but loads no MathJax from the build directory"]


def test_the_command_exits_nonzero_and_names_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cdn = '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>'
    assert check_site.main([str(write_site(tmp_path, head=HEAD + cdn))]) == 1
    assert "cdn.jsdelivr.net" in capsys.readouterr().out


def test_an_empty_build_directory_is_an_error(tmp_path: Path) -> None:
    assert check_site.main([str(tmp_path)]) == 2


def test_a_link_to_a_vector_file_the_build_lacks_fails(tmp_path: Path) -> None:
    body = BODY + '<p><a href="spec/vectors/x.json">x.json</a></p>'
    root = write_site(tmp_path, body=body)
    assert any("spec/vectors/x.json" in p for p in check_site.site_problems(root))
    (root / "spec" / "vectors").mkdir(parents=True)
    (root / "spec" / "vectors" / "x.json").write_text("{}")
    assert check_site.site_problems(root) == []


@pytest.mark.parametrize("css", [
    "",  # nothing: a wide equation is cut off at the column's edge
    'mjx-container[display="true"] { overflow-x: auto; }',  # scrolls, with no cue
    "@media (max-width: 48em) {\n" + SCROLLING_MATH + "}\n",  # at phone widths only
    SCROLLING_MATH.replace("mjx-container", "mjx-math"),  # another element
])
def test_display_math_that_can_be_cut_off_fails(tmp_path: Path, css: str) -> None:
    problems = check_site.site_problems(write_site(tmp_path, css=css))
    assert len(problems) == 1 and "no stylesheet lets an equation scroll" in problems[0]


def test_a_page_with_inline_math_only_needs_no_scrolling_rule(tmp_path: Path) -> None:
    body = '<p>Emits <span class="math notranslate">\\(p\\)</span> exactly.</p>'
    assert check_site.site_problems(write_site(tmp_path, body=body, css="")) == []


def test_the_site_stylesheet_lets_equations_scroll_with_a_cue() -> None:
    css = (CHECKER.parent.parent / "docs" / "_static" / "site.css").read_text("utf-8")
    assert check_site.scrolls_with_a_cue(css)
