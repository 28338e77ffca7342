#!/usr/bin/env python3
"""Open the built site offline in headless Chromium: screenshots, and math typeset or not.

Run from the repository root after the html build (needs a ``chromium`` on the PATH; this
is a manual review, not a CI step):

    python docs/review_in_browser.py docs/_build/html OUT_DIR

1. Screenshots of the index, start here, two proofs, a spec page, the ceiling table, the
   results, the porting guide, the API and CLI references
   at 1280 px (desktop) and 390 px (phone) wide, into OUT_DIR, for a person to look at.
2. For every page (the highlighted sources under ``_modules/`` aside), the DOM after the
   page's scripts ran: each math element must hold a MathJax ``mjx-container``, no
   ``mjx-merror``, and no backslash in the text MathJax reads out: it was typeset, not left
   as raw TeX, shown as a TeX error, or shown with a macro's backslash.
   Prints the totals and every page that fails, and exits 1 if any does.
3. For every page at both widths, once MathJax is done: the page's height, its display
   equations that are wider than their box (they scroll, with a shadow on the side that has
   more), any that are cut off instead (wider than their box, which does not scroll), and
   whether the page itself scrolls sideways. Prints pages over `TALL_PX` tall and every
   clipped equation or sideways page; those last two fail the review.

Chromium resolves no host name but ``localhost`` here (``--host-resolver-rules``), so a
page that needed the network would show it. ``--virtual-time-budget`` lets MathJax finish
before the screenshot or the DOM is taken.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bs4 import BeautifulSoup, Tag

PAGES = ("index", "start_here", "proofs/single_position", "proofs/block_verification",
         "spec/rewind_trim", "spec/verify_tokenwise", "ceiling", "results", "results_mutation",
         "porting", "api", "generator")
WIDTHS = (1280, 390)
TALL_PX = 15_000
"""A page taller than this, at either width, is named for a person to look at."""
MEASURE = """<script>
window.addEventListener("load", () => {
  const done = () => {
    const equations = [...document.querySelectorAll('mjx-container[display="true"]')];
    const wider = equations.filter(e => e.scrollWidth > e.clientWidth + 1);
    const scrolls = e => ["auto", "scroll"].includes(getComputedStyle(e).overflowX);
    document.body.setAttribute("data-review", JSON.stringify({
      height: document.documentElement.scrollHeight,
      equations: equations.length,
      scrolling: wider.length,
      clipped: wider.filter(e => !scrolls(e)).map(e => e.textContent.slice(0, 40)),
      sideways: document.documentElement.scrollWidth > window.innerWidth + 1,
    }));
  };
  const ready = window.MathJax && MathJax.startup && MathJax.startup.promise;
  ready ? MathJax.startup.promise.then(() => setTimeout(done, 200)) : setTimeout(done, 500);
});
</script>"""
HEIGHT = 2400
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


def take_screenshots(site: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for page in PAGES:
        for width in WIDTHS:
            target = out / f"{page.replace('/', '_')}-{width}.png"
            chromium(f"--window-size={width},{HEIGHT}", f"--screenshot={target}",
                     (site / f"{page}.html").as_uri())
            print(f"wrote {target}" if target.exists() else f"NO SCREENSHOT: {target}")


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


def measure(page: Path, width: int) -> dict[str, object]:
    """Height, display equations and overflow of `page` at `width`, once MathJax is done.

    A copy of the page with the measuring script sits beside it (so its relative links to
    the stylesheets and MathJax hold) while Chromium reads it, and is removed after.
    """
    copy = page.with_name(f".review-{page.name}")
    copy.write_text(page.read_text("utf-8").replace("</body>", MEASURE + "</body>"), "utf-8")
    try:
        dom = BeautifulSoup(chromium(f"--window-size={width},{HEIGHT}", "--dump-dom",
                                     copy.as_uri()), "html.parser")
    finally:
        copy.unlink()
    body = dom.find("body")
    found = body.get("data-review") if isinstance(body, Tag) else None
    return json.loads(str(found)) if found else {"height": -1, "error": "no measurement"}


def review_layout(site: Path, pages: list[Path]) -> int:
    """Measure every page at both widths; print tall pages and any clipped equation."""
    problems = 0
    for page in pages:
        for width in WIDTHS:
            found = measure(page, width)
            name = f"{page.relative_to(site)} at {width} px"
            if found.get("clipped") or found.get("sideways") or "error" in found:
                problems += 1
                print(f"{name}: {found}")
            elif int(str(found["height"])) > TALL_PX:
                print(f"{name}: {found['height']} px tall")
    print(f"{len(pages)} pages at {' and '.join(map(str, WIDTHS))} px: "
          f"{problems} with a clipped equation, a sideways scroll or no measurement")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("site", type=Path, help="the html build directory")
    parser.add_argument("out", type=Path, help="where the screenshots go")
    args = parser.parse_args(argv)
    site: Path = args.site.resolve()
    if shutil.which("chromium") is None:
        sys.exit("review_in_browser: no `chromium` on the PATH")
    take_screenshots(site, args.out)
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
    problems = review_layout(site, pages)
    return 1 if failing or problems else 0


if __name__ == "__main__":
    sys.exit(main())
