#!/usr/bin/env python3
"""Copy the normative code from impl/ into the spec pages, or check that the copies are current.

Usage::

    python spec/inline_code.py          # rewrite every normative block of spec/**/*.md
    python spec/inline_code.py --check  # exit 1, naming each stale block, if any differs

impl/ is the source of truth: it is the code the tests, the proofs and the golden vectors run.
A spec page shows that code inline, so that it reads completely on a code host or in an editor,
as a fenced block announced by a marker line naming the file and the top-level object:

    <!-- normative: impl/specaccept/core/sampling.py sample_from_distribution -->
    ```python
    def sample_from_distribution(probs: mx.array, u: Scalar) -> mx.array:
        ...
    ```

The block is the object's exact source lines (decorators included), found with `ast`, so the
script needs no import of the library. A module-level constant is an object too: its
assignment and the docstring string that follows it. One marker may name several objects of
the file, separated by spaces (a page's constants, say); their sources follow one another in
one block. A marker with no block after it gets one. The marker is
an HTML comment: invisible where the page is rendered, by a code host or by Sphinx.
tests/test_spec_pages.py fails if any block differs from impl/.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
MARKER = re.compile(
    r"^<!-- normative: (?P<path>\S+) (?P<names>[A-Za-z_][A-Za-z0-9_]*(?: [A-Za-z_][A-Za-z0-9_]*)*)"
    r" -->$"
)
FENCE = "```"


class MarkerError(ValueError):
    """A marker names a file or an object that does not exist."""


def assigned_name(node: ast.stmt) -> str | None:
    """The name a module-level ``NAME = ...`` or ``NAME: T = ...`` binds, else None."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def is_docstring(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def object_source(path: Path, name: str) -> str:
    """The source lines of the top-level function, class or constant `name` of `path`:
    decorators included, and a constant's docstring (the string right after it) too."""
    if not path.is_file():
        raise MarkerError(f"{path} does not exist")
    text = path.read_text("utf-8")
    lines = text.splitlines()
    body = ast.parse(text).body
    for index, node in enumerate(body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
            node.name == name
        ):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            return "\n".join(lines[first - 1 : node.end_lineno]) + "\n"
        if assigned_name(node) == name:
            last = node
            if index + 1 < len(body) and is_docstring(body[index + 1]):
                last = body[index + 1]
            assert last.end_lineno is not None
            return "\n".join(lines[node.lineno - 1 : last.end_lineno]) + "\n"
    raise MarkerError(f"{name} is not a top-level function, class or constant of {path}")


def inline(page_text: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """`page_text` with every normative block replaced by the current source.

    Returns the new text and, for each block whose old text differed, a line naming it.
    """
    lines = page_text.splitlines(keepends=True)
    out: list[str] = []
    stale: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        match = MARKER.match(line.rstrip("\n"))
        if match is None:
            continue
        path, name = match["path"], match["names"]
        source = "".join(object_source(root / path, one) for one in name.split())
        old = None
        if i < len(lines) and lines[i].rstrip("\n") == FENCE + "python":
            end = i + 1
            while end < len(lines) and lines[end].rstrip("\n") != FENCE:
                end += 1
            if end == len(lines):
                raise MarkerError(f"the block after the marker of {name} is never closed")
            old = "".join(lines[i + 1 : end])
            i = end + 1
        if old != source:
            stale.append(f"{path} {name}")
        out.append(f"{FENCE}python\n{source}{FENCE}\n")
    return "".join(out), stale


def markers(page_text: str) -> list[tuple[str, str]]:
    """The (path, object) of every object a normative marker of a page names, in order."""
    found = []
    for line in page_text.splitlines():
        match = MARKER.match(line)
        if match is not None:
            found += [(match["path"], name) for name in match["names"].split()]
    return found


def pages(spec: Path = SPEC) -> list[Path]:
    return sorted(spec.rglob("*.md"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if any block differs from impl/")
    args = parser.parse_args(argv)
    all_stale: list[str] = []
    for page in pages():
        text = page.read_text("utf-8")
        new, stale = inline(text)
        all_stale += [f"{page.relative_to(ROOT)}: {item}" for item in stale]
        if stale and not args.check:
            page.write_text(new, "utf-8")
    for item in all_stale:
        print(("stale: " if args.check else "updated: ") + item)
    return 1 if args.check and all_stale else 0


if __name__ == "__main__":
    sys.exit(main())
