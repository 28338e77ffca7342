#!/usr/bin/env python3
"""Check that a built Sphinx site is self-contained and that its mathematics can render.

    python .ci/check_site.py docs/_build/html

Fails, naming the page and the offending resource or text, when

- a page or a stylesheet loads anything from outside the build directory: the ``src`` or
  ``href`` of a script, stylesheet, image, frame or media element, a ``url()`` or
  ``@import`` in CSS, with a scheme (``https:``), a host (``//cdn...``), an absolute path,
  or a relative path that leaves the build directory or names a file that is not there.
  Plain ``<a>`` links may point anywhere: following one is the reader's choice, not a load;
- a page shows raw TeX delimiters (``\\(``, ``\\)``, ``\\[``, ``\\]``, ``$$``, or a ``$x$``
  pair) in its visible text outside code and outside the math elements MathJax typesets,
  or a dollar sign right beside a math element (a ``$$`` block MyST typeset but whose
  delimiters still show);
- a page holds math elements but loads no MathJax from the build directory;
- a page holds display math but none of its stylesheets lets a display equation scroll in
  its own box with a cue that it does (``overflow-x: auto`` on MathJax's display container,
  and a background of ``local`` covers over ``scroll`` shadows): MathJax cannot break an
  equation, so at 390 px, or at 1280 px for the longest, one would be cut off at the
  column's edge with nothing to say that more of it exists;
- a plain ``<a>`` link to a data file of the site (a relative ``.json`` or ``.py`` path, the
  golden vectors and their generator) names a file the build does not hold: a porter would
  follow it to nothing.

A reader offline, or behind a proxy, then sees every page as the build wrote it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup, Comment, NavigableString, Tag

# Elements whose attribute makes the browser fetch something when the page loads.
LOADING_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "script": ("src",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "frame": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "input": ("src",),
    "base": ("href",),
}
# Text a reader does not see as prose: code, and the math MathJax replaces by typesetting.
NOT_PROSE = ("script", "style", "pre", "code", "kbd", "samp", "textarea", "noscript")
NOT_PROSE_CLASSES = {"math", "highlight"}
# \( \) \[ \] $$, and a $...$ pair as pandoc reads one (no space inside either dollar, no
# digit after the closing one), so "between $5 and $10" is prose, "$p(t)$" is raw TeX.
RAW_TEX = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\$[^\s$](?:[^$]*[^\s$\\])?\$(?!\d)")
CSS_URL = re.compile(r"""url\(\s*(?P<quote>['"]?)(?P<url>.*?)(?P=quote)\s*\)""", re.IGNORECASE)
CSS_IMPORT = re.compile(r"""@import\s+(?P<quote>['"])(?P<url>.*?)(?P=quote)""", re.IGNORECASE)
CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
MATHJAX = re.compile(r"(^|/)mathjax/[^/]*\.js$")
# Relative links to these are downloads the build must ship (the golden vectors).
DATA_FILE = re.compile(r"\.(json|py)$")


def outside_reference(url: str, referrer: Path, root: Path) -> str | None:
    """Why loading `url` from the file `referrer` leaves `root`, or None if it stays inside."""
    url = url.strip()
    if not url or url.startswith("#") or url.lower().startswith("data:"):
        return None
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        return "is not in the build directory"
    if parts.path.startswith("/"):
        return "is an absolute path, outside the build directory"
    if not parts.path:  # "?v=1" alone names the referrer itself
        return None
    target = (referrer.parent / unquote(parts.path)).resolve()
    if not target.is_relative_to(root):
        return "leaves the build directory"
    if not target.exists():
        return "names a file the build did not write"
    return None


def srcset_urls(srcset: str) -> list[str]:
    """The URLs of a ``srcset`` attribute (each candidate is 'URL [descriptor]')."""
    return [candidate.split()[0] for candidate in srcset.split(",") if candidate.split()]


def css_urls(css: str) -> list[str]:
    """Every ``url()`` and ``@import "..."`` target in a stylesheet, comments left out."""
    css = CSS_COMMENT.sub("", css)
    return [m.group("url") for m in CSS_URL.finditer(css)] + [
        m.group("url") for m in CSS_IMPORT.finditer(css)
    ]


def is_prose(node: Tag) -> bool:
    for parent in [node, *node.parents]:
        if parent.name in NOT_PROSE:
            return False
        classes = parent.get("class") or []
        if NOT_PROSE_CLASSES.intersection(classes):
            return False
    return True


def page_problems(page: Path, root: Path) -> list[str]:
    """What makes `page` load from outside `root`, or show raw TeX."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    problems = []

    def check(url: str, where: str) -> None:
        reason = outside_reference(url, page, root)
        if reason:
            problems.append(f"{where} {url!r} {reason}")

    for name, attributes in LOADING_ATTRIBUTES.items():
        for element in soup.find_all(name):
            for attribute in attributes:
                value = element.get(attribute)
                if not isinstance(value, str):
                    continue
                urls = srcset_urls(value) if attribute == "srcset" else [value]
                for url in urls:
                    check(url, f"<{name} {attribute}>")
    for anchor in soup.find_all("a", href=True):
        href = str(anchor["href"])
        parts = urlsplit(href)
        if not parts.scheme and not parts.netloc and DATA_FILE.search(parts.path):
            check(href, "<a href>")
    for style in soup.find_all("style"):
        for url in css_urls(style.get_text()):
            check(url, "<style>")
    for element in soup.find_all(style=True):
        for url in css_urls(str(element["style"])):
            check(url, f"<{element.name} style>")

    for text in soup.find_all(string=RAW_TEX):
        if isinstance(text, Comment) or text.parent is None or not is_prose(text.parent):
            continue
        snippet = " ".join(text.split())[:80]
        problems.append(f"raw TeX delimiter in visible text: {snippet!r}")

    for math in soup.find_all(class_="math"):
        # A display block that MyST read as inline math inside a list item renders typeset,
        # with the dollar signs of its `$$` delimiters still showing on either side.
        before, after = math.previous_sibling, math.next_sibling
        if (isinstance(before, NavigableString) and before.rstrip().endswith("$")) or (
            isinstance(after, NavigableString) and after.lstrip().startswith("$")
        ):
            problems.append(f"dollar sign beside typeset math: {math.get_text()[:60]!r}")

    if soup.find(class_="math"):
        scripts = [s.get("src") for s in soup.find_all("script")]
        local_mathjax = [
            src for src in scripts
            if isinstance(src, str) and MATHJAX.search(urlsplit(src).path)
            and outside_reference(src, page, root) is None
        ]
        if not local_mathjax:
            problems.append("has math but loads no MathJax from the build directory")
    return problems + display_math_problems(soup, page, root)


DISPLAY_MATH_SELECTOR = 'mjx-container[display="true"]'
CSS_RULE = re.compile(r"(?P<selectors>[^{}]+)\{(?P<body>[^{}]*)\}")


def scrolls_with_a_cue(css: str) -> bool:
    """Whether `css` gives MathJax's display container a horizontal scroll and shadows that
    show while there is more to see: rules read one by one, media queries ignored (the rule
    must hold at every width, so it must stand outside any)."""
    css = CSS_COMMENT.sub("", css)
    css = re.sub(r"@media[^{]*\{(?:[^{}]*\{[^{}]*\})*[^{}]*\}", "", css)
    scroll = cue = False
    for rule in CSS_RULE.finditer(css):
        selectors = [s.strip() for s in rule["selectors"].split(",")]
        if DISPLAY_MATH_SELECTOR not in selectors:
            continue
        body = " ".join(rule["body"].split())
        scroll = scroll or re.search(r"overflow-x:\s*(auto|scroll)", body) is not None
        cue = cue or ("background" in body and " local" in body and " scroll" in body)
    return scroll and cue


def display_math_problems(soup: BeautifulSoup, page: Path, root: Path) -> list[str]:
    """A page with display math whose stylesheets would let an equation be cut off."""
    if soup.find("div", class_="math") is None:
        return []
    css = ""
    for link in soup.find_all("link", rel="stylesheet", href=True):
        href = str(link["href"])
        if outside_reference(href, page, root) is None:
            css += (page.parent / unquote(urlsplit(href).path)).read_text("utf-8", "replace")
    if scrolls_with_a_cue(css):
        return []
    return ["has display math, but no stylesheet lets an equation scroll with a cue "
            f"(overflow-x and local/scroll shadows on {DISPLAY_MATH_SELECTOR})"]


def stylesheet_problems(stylesheet: Path, root: Path) -> list[str]:
    problems = []
    for url in css_urls(stylesheet.read_text(encoding="utf-8", errors="replace")):
        reason = outside_reference(url, stylesheet, root)
        if reason:
            problems.append(f"url {url!r} {reason}")
    return problems


def site_problems(root: Path) -> list[str]:
    """Every problem in the built site at `root`, each prefixed with its file."""
    root = root.resolve()
    problems = []
    for path in sorted(root.rglob("*")):
        if path.suffix == ".html":
            found = page_problems(path, root)
        elif path.suffix == ".css":
            found = stylesheet_problems(path, root)
        else:
            continue
        problems += [f"{path.relative_to(root)}: {problem}" for problem in found]
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check_site.py BUILD_DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    pages = sorted(root.rglob("*.html")) if root.is_dir() else []
    if not pages:
        print(f"check_site: no HTML pages under {argv[0]!r}: build the site first",
              file=sys.stderr)
        return 2
    problems = site_problems(root)
    for problem in problems:
        print(problem)
    print(f"check_site: {len(pages)} pages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
