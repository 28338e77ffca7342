#!/usr/bin/env python3
"""Open the built site offline in headless Chromium: screenshots, and math typeset or not.

Run from the repository root after the html build (needs a ``chromium`` on the PATH; this
is a manual review, not a CI step):

    python docs/review_in_browser.py docs/_build/html OUT_DIR

1. Every page at 1280 px (desktop) and 390 px (phone) wide, through `.ci/check_layout.py`'s
   DevTools session: the width is set by device emulation, so the page lays out at exactly
   that width (``--window-size`` cannot: headless Chromium widens a window narrower than
   500 px, and a "390 px" screenshot showed the 500 px layout). For the index, start here,
   two proofs, spec pages, the ceiling table, the results, the porting guide, the API and
   CLI references, a screenshot of the page's top at each width goes into OUT_DIR, for a
   person to look at. Every page's height, display equations that scroll, any equation cut
   off and any page that scrolls sideways are measured there too; pages over
   `check_layout.MAX_HEIGHT_PX` tall are named, and a clipped equation or a sideways page
   fails the review.
2. For every page (the highlighted sources under ``_modules/`` aside), the DOM after the
   page's scripts ran: each math element must hold a MathJax ``mjx-container``, no
   ``mjx-merror``, and no backslash in the text MathJax reads out: it was typeset, not left
   as raw TeX, shown as a TeX error, or shown with a macro's backslash.
   Prints the totals and every page that fails, and exits 1 if any does.

Chromium resolves no host name but ``localhost`` here (``--host-resolver-rules``), so a
page that needed the network would show it. ``--virtual-time-budget`` lets MathJax finish
before the DOM is taken.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from bs4 import BeautifulSoup, Tag


def _load_check_layout() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / ".ci" / "check_layout.py"
    spec = importlib.util.spec_from_file_location("check_layout", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


check_layout = _load_check_layout()

PAGES = ("index", "start_here", "proofs/single_position", "proofs/block_verification",
         "spec/index", "spec/rewind_trim", "spec/verify_tokenwise", "spec/trace_format",
         "ceiling", "results", "results_mutation", "results_mutation_verification", "porting",
         "api", "cli", "generator")
OFFLINE_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
    "--virtual-time-budget=15000",
)


def chromium(*arguments: str) -> str:
    """Run headless Chromium with a fresh profile and the offline flags; its stdout."""
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        result = subprocess.run(
            ["chromium", *OFFLINE_FLAGS, f"--user-data-dir={profile}", *arguments],
            capture_output=True, text=True, timeout=180, check=False,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return result.stdout


def typeset(math: Tag) -> bool:
    """Whether MathJax typeset `math`: no TeX error box, and no backslash left in the text
    it reads out (``\\_`` inside ``\\texttt`` shown as is, for instance)."""
    container = math.find("mjx-container")
    if container is None or math.find("mjx-merror") is not None:
        return False
    spoken = container.find("mjx-assistive-mml")
    return spoken is None or "\\" not in spoken.get_text()


def untypeset_math(page: Path) -> tuple[int, list[str]]:
    """The math elements of `page`, and the TeX of those MathJax left untypeset."""
    dom = BeautifulSoup(chromium("--dump-dom", page.as_uri()), "html.parser")
    if dom.find("article") is None:  # Chromium failed or the page did not render
        return 0, ["(page did not load)"]
    elements = dom.select(".math")
    raw = [" ".join(m.get_text().split())[:60] for m in elements if not typeset(m)]
    return len(elements), raw


def review_layout(site: Path, out: Path) -> int:
    """Measure every page at both widths, screenshot `PAGES` into `out`; print tall pages and
    every clipped equation or sideways page, and return how many of those last there are."""
    out.mkdir(parents=True, exist_ok=True)
    layouts = check_layout.measure_site(site, "chromium", shots=out,
                                        shot_pages=tuple(f"{page}.html" for page in PAGES))
    problems = 0
    for layout in layouts:
        name = f"{layout.page} at {layout.width} px"
        if layout.clipped or layout.sideways:
            problems += 1
            print(f"{name}: clipped {list(layout.clipped)}, sideways {layout.sideways}")
        elif layout.height > check_layout.MAX_HEIGHT_PX:
            print(f"{name}: {layout.height:,} px tall")
    pages = len({layout.page for layout in layouts})
    print(f"{pages} pages at {' and '.join(map(str, check_layout.WIDTHS))} px: "
          f"{problems} with a clipped equation or a sideways scroll; screenshots in {out}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("site", type=Path, help="the html build directory")
    parser.add_argument("out", type=Path, help="where the screenshots go")
    args = parser.parse_args(argv)
    site: Path = args.site.resolve()
    if shutil.which("chromium") is None:
        sys.exit("review_in_browser: no `chromium` on the PATH")
    problems = review_layout(site, args.out)
    pages = sorted(p for p in site.rglob("*.html") if "_modules" not in p.parts)
    total = failing = 0
    for page in pages:
        count, raw = untypeset_math(page)
        total += count
        if raw:
            failing += 1
            print(f"{page.relative_to(site)}: {len(raw)} of {count} not typeset, e.g. {raw[:3]}")
    print(f"{len(pages)} pages, {total} math elements, "
          f"{'all typeset' if not failing else f'{failing} pages with raw TeX'}")
    return 1 if failing or problems else 0


if __name__ == "__main__":
    sys.exit(main())
