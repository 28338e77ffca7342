#!/usr/bin/env python3
"""Check the built site's layout in a real browser: no page too tall, no equation cut off.

    python .ci/check_layout.py docs/_build/html [--install] [--budget-s 420]

Opens every page of the build (the highlighted sources under ``_modules/`` aside) in one
headless Chromium, at 390 px (a phone) and 1280 px (a laptop) wide, waits until MathJax has
typeset it, and fails, naming the page and the width, when

- the page is taller than `MAX_HEIGHT_PX`: a reader scrolls past a dozen screens of one
  page and the sidebar stops showing where they are; split the page by topic;
- a display equation is wider than its box and its box does not scroll, or an inline
  formula runs past the column with no scrolling box around it: the right end is cut off
  with nothing to say that it exists (the stylesheet gives scrolling boxes a shadow on the
  side that has more; .ci/check_site.py checks that rule is there);
- the page itself scrolls sideways: something in it is wider than the phone.

Chromium is driven over ``--remote-debugging-pipe`` (the DevTools protocol on two file
descriptors, JSON messages ending in a NUL byte), so one browser serves every page with no
client library. It resolves no host but ``localhost``: a page that needed the network would
show it. With ``--install`` and no ``chromium`` on the PATH, Debian's package is installed
first (``apt-get``; CI reaches Debian's mirrors). Before the site, the check measures a few
planted pages (too tall, a display and an inline formula cut off, each beside one that
scrolls as it should, a page wider than the phone) and fails unless it flags exactly the
defects. The whole check, install included, runs under ``--budget-s`` seconds and prints
how long each part took.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_HEIGHT_PX = 15_000
"""The tallest page allowed, at either width (about 18 laptop screens, 22 phone screens)."""
WIDTHS = (390, 1280)
SCREEN_HEIGHT_PX = 900
SHOT_HEIGHT_PX = 6_000
"""How much of a page's top a screenshot holds."""
OFFLINE_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
)
# Run in the page once it has loaded: wait for MathJax (when the page has it), then measure.
MEASURE = """new Promise(resolve => {
  const done = () => {
    const equations = [...document.querySelectorAll('mjx-container[display="true"]')];
    const wider = equations.filter(e => e.scrollWidth > e.clientWidth + 1);
    const scrolls = e => ["auto", "scroll"].includes(getComputedStyle(e).overflowX);
    // An inline formula is cut off when it runs past the column and no box around it
    // (itself, a table's wrapper) scrolls to show the rest.
    const column = document.querySelector("article") || document.body;
    const edge = column.getBoundingClientRect().right;
    const scrolled = e => {
      for (let box = e; box && box !== column; box = box.parentElement) {
        if (scrolls(box)) return true;
      }
      return false;
    };
    const inline = [...document.querySelectorAll('mjx-container:not([display="true"])')];
    const runOff = inline.filter(e => e.getBoundingClientRect().right > edge + 1 && !scrolled(e));
    resolve({
      height: document.documentElement.scrollHeight,
      equations: equations.length,
      scrolling: wider.length,
      clipped: [...wider.filter(e => !scrolls(e)), ...runOff].map(e => e.textContent.slice(0, 50)),
      sideways: document.documentElement.scrollWidth > window.innerWidth + 1,
    });
  };
  const ready = window.MathJax && MathJax.startup && MathJax.startup.promise;
  ready ? MathJax.startup.promise.then(() => setTimeout(done, 100)) : setTimeout(done, 100);
})"""


@dataclass(frozen=True)
class Layout:
    """What one page measured at one width."""

    page: str
    width: int
    height: int
    equations: int
    scrolling: int
    clipped: tuple[str, ...]
    sideways: bool

    def problems(self, max_height: int) -> list[str]:
        found = []
        if self.height > max_height:
            found.append(f"{self.height:,} px tall (limit {max_height:,}): split it by topic")
        found += [f"display equation cut off with no scroll: {text!r}" for text in self.clipped]
        if self.sideways:
            found.append("the page scrolls sideways")
        return found


class DevTools:
    """A headless Chromium spoken to over ``--remote-debugging-pipe``."""

    def __init__(self, browser: str, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="check-layout-")
        to_browser_r, self._to_browser_w = os.pipe()
        self._from_browser_r, from_browser_w = os.pipe()

        def wire_fds() -> None:  # the browser reads commands on fd 3, writes replies on fd 4
            # Copies first: either pipe end may itself be fd 3 or 4.
            commands, replies = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(commands, 3)  # dup2 leaves the copy inheritable by the browser
            os.dup2(replies, 4)

        self.process = subprocess.Popen(
            [browser, *OFFLINE_FLAGS, "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds, close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._writer = os.fdopen(self._to_browser_w, "wb")
        self._reader = io.BufferedReader(io.FileIO(self._from_browser_r, "rb"))
        self._next_id = 0
        self._buffer = b""
        self._events: list[dict[str, Any]] = []

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = self._reader.read1(1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        """Call `method` and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method,
                                   "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._writer.write(json.dumps(message).encode() + b"\0")
        self._writer.flush()
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)
        raise TimeoutError(f"{method}: no reply in {self.timeout_s} s")

    def wait_for_event(self, name: str, session: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            event = self._events.pop(0) if self._events else self._read_message()
            if event.get("method") == name and event.get("sessionId") == session:
                return
        raise TimeoutError(f"no {name} in {self.timeout_s} s")

    def drop_events(self) -> None:
        self._events.clear()

    def close(self) -> None:
        try:
            self._writer.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


def measure_site(site: Path, browser: str, widths: tuple[int, ...] = WIDTHS,
                 timeout_s: float = 60.0, shots: Path | None = None,
                 shot_pages: tuple[str, ...] = ()) -> list[Layout]:
    """Every page of `site` measured at every width, in one browser; with `shots`, a PNG of
    the top of each page of `shot_pages` (all pages when empty) at each width goes there."""
    pages = sorted(p for p in site.rglob("*.html") if "_modules" not in p.parts)
    tools = DevTools(browser, timeout_s)
    layouts = []
    try:
        target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = tools.send("Target.attachToTarget",
                             {"targetId": target, "flatten": True})["sessionId"]
        tools.send("Page.enable", session=session)
        for width in widths:
            tools.send("Emulation.setDeviceMetricsOverride",
                       {"width": width, "height": SCREEN_HEIGHT_PX, "deviceScaleFactor": 1,
                        "mobile": width < 600}, session=session)
            for page in pages:
                tools.drop_events()
                tools.send("Page.navigate", {"url": page.as_uri()}, session=session)
                tools.wait_for_event("Page.loadEventFired", session)
                found = tools.send("Runtime.evaluate",
                                   {"expression": MEASURE, "awaitPromise": True,
                                    "returnByValue": True}, session=session)
                value = found["result"]["value"]
                name = str(page.relative_to(site))
                if shots is not None and (not shot_pages or name in shot_pages):
                    clip = {"x": 0, "y": 0, "width": width, "scale": 1,
                            "height": min(int(value["height"]), SHOT_HEIGHT_PX)}
                    image = tools.send("Page.captureScreenshot",
                                       {"format": "png", "captureBeyondViewport": True,
                                        "clip": clip}, session=session)["data"]
                    target = shots / f"{name.removesuffix('.html').replace('/', '_')}-{width}.png"
                    target.write_bytes(base64.b64decode(image))
                layouts.append(Layout(
                    page=str(page.relative_to(site)), width=width, height=int(value["height"]),
                    equations=int(value["equations"]), scrolling=int(value["scrolling"]),
                    clipped=tuple(value["clipped"]), sideways=bool(value["sideways"])))
    finally:
        tools.close()
    return layouts


PLANTED = {
    "fine.html": ("<p>A short page.</p>", []),
    "tall.html": ('<div style="height: 20000px">a page too tall</div>', ["tall"]),
    "clipped.html": ('<mjx-container display="true" style="display: block; overflow: hidden">'
                     '<span style="display: inline-block; width: 3000px">x</span>'
                     "</mjx-container>", ["cut off"]),
    "scrolling.html": ('<mjx-container display="true" style="display: block; overflow-x: auto">'
                       '<span style="display: inline-block; width: 3000px">x</span>'
                       "</mjx-container>", []),
    "inline-clipped.html": ('<article style="overflow: hidden"><p>A formula '
                            '<mjx-container jax="CHTML"><span style="display: inline-block; '
                            'width: 3000px">x</span></mjx-container></p></article>', ["cut off"]),
    "inline-scrolling.html": ('<article style="overflow: hidden"><p>A formula '
                              '<mjx-container jax="CHTML" style="display: inline-block; '
                              'max-width: 100%; overflow-x: auto"><span style="display: '
                              'inline-block; width: 3000px">x</span></mjx-container></p></article>',
                              []),
    "sideways.html": ('<div style="width: 3000px">a table too wide</div>', ["sideways"]),
}
"""Pages with one planted defect each (or none), and the words its problems must hold."""


def self_test(browser: str) -> list[str]:
    """Measure the planted pages; what the check got wrong (empty: it caught each defect
    and passed the sound pages)."""
    wrong = []
    with tempfile.TemporaryDirectory(prefix="check-layout-planted-") as folder:
        site = Path(folder)
        for name, (body, _) in PLANTED.items():
            (site / name).write_text(
                '<!doctype html><html><head><meta name="viewport" '
                f'content="width=device-width, initial-scale=1"></head><body>{body}</body></html>',
                "utf-8")
        for layout in measure_site(site, browser):
            problems = " ".join(layout.problems(MAX_HEIGHT_PX))
            wanted = PLANTED[layout.page][1]
            if not wanted and problems:
                wrong.append(f"{layout.page} at {layout.width} px: flagged: {problems}")
            for word in wanted:
                if word not in problems:
                    wrong.append(f"{layout.page} at {layout.width} px: missed {word!r}")
    return wrong


def ensure_chromium(install: bool) -> str:
    """The path of ``chromium``; with `install`, Debian's package is installed if missing."""
    found = shutil.which("chromium")
    if found is not None or not install:
        if found is None:
            sys.exit("check_layout: no `chromium` on the PATH (pass --install to apt-get it)")
        return found
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]):
        if subprocess.run([*sudo, *command], env=env, check=False).returncode != 0:
            sys.exit(f"check_layout: `{' '.join(command)}` failed")
    found = shutil.which("chromium")
    if found is None:
        sys.exit("check_layout: apt-get installed no `chromium` on the PATH")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("site", type=Path, help="the html build directory")
    parser.add_argument("--install", action="store_true",
                        help="apt-get Debian's chromium when none is on the PATH")
    parser.add_argument("--budget-s", type=float, default=420.0,
                        help="fail when the check, install included, takes longer (default 420)")
    parser.add_argument("--max-height", type=int, default=MAX_HEIGHT_PX,
                        help=f"the tallest page allowed, px (default {MAX_HEIGHT_PX})")
    parser.add_argument("--heights", action="store_true", help="print every page's heights")
    parser.add_argument("--screenshots", type=Path, metavar="DIR",
                        help="write a PNG of the top of each page at each width into DIR")
    parser.add_argument("--pages", nargs="*", default=(), metavar="PAGE",
                        help="with --screenshots, only these pages (e.g. index.html)")
    args = parser.parse_args(argv)
    site: Path = args.site.resolve()
    if not (site / "index.html").is_file():
        sys.exit(f"check_layout: site={args.site} holds no index.html (build the html first)")
    start = time.monotonic()
    browser = ensure_chromium(args.install)
    wrong = self_test(browser)
    if wrong:
        print("check_layout: the check itself is broken on planted pages:", *wrong, sep="\n  ")
        return 1
    installed = time.monotonic()
    if args.screenshots is not None:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    layouts = measure_site(site, browser, shots=args.screenshots, shot_pages=tuple(args.pages))
    measured = time.monotonic()
    if args.heights:
        by_page: dict[str, dict[int, int]] = {}
        for layout in layouts:
            by_page.setdefault(layout.page, {})[layout.width] = layout.height
        print("| page | " + " | ".join(f"{w} px" for w in WIDTHS) + " |")
        print("| ---- |" + " ---: |" * len(WIDTHS))
        for page, heights in by_page.items():
            print(f"| {page} | " + " | ".join(f"{heights[w]:,}" for w in WIDTHS) + " |")
    failures = 0
    for layout in layouts:
        for problem in layout.problems(args.max_height):
            failures += 1
            print(f"{layout.page} at {layout.width} px: {problem}")
    pages = len({layout.page for layout in layouts})
    equations = sum(layout.equations for layout in layouts if layout.width == WIDTHS[0])
    print(f"check_layout: {pages} pages at {' and '.join(map(str, WIDTHS))} px, "
          f"{equations} display equations, {failures} problems; chromium ready and "
          f"self-tested in {installed - start:.1f} s, measured in {measured - installed:.1f} s")
    if measured - start > args.budget_s:
        print(f"check_layout: took {measured - start:.0f} s, over its budget of "
              f"{args.budget_s:.0f} s")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
