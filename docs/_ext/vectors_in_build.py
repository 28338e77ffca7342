"""Ship the golden vectors with the site, and make every link to one a working link.

A page says ``Vectors: [`x.json`](vectors/x.json)``, a link that works where the page is
read on a code host (``spec/vectors/x.json`` beside ``spec/x.md``). In the site the JSON
files are no source documents, so MyST would leave such a link unresolved. This extension

- copies ``spec/vectors/*.json`` (the vectors and their JSON schema),
  ``spec/vectors/generate.py`` and the package it runs, ``spec/vectors/generation/``, into
  ``<html out>/spec/vectors/`` when an html build finishes, so the built site holds the
  very files the repository holds, at the same path relative to each page;
- turns each MyST link whose target, read from the linking page's place in the site, is one
  of those files into a plain link to the copy. A link to a file that does not exist is left
  alone, so MyST's "cross-reference target not found" warning fails the ``-W`` build.
"""

from __future__ import annotations

import posixpath
import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform

ROOT = Path(__file__).resolve().parents[2]
VECTORS = "spec/vectors"
"""The vectors' folder, relative to both the repository root and the site's root."""


def shipped_files(root: Path = ROOT) -> list[Path]:
    """The files of spec/vectors/ the site ships: every JSON file and the generator (its
    script and its package)."""
    folder = root / VECTORS
    return [*sorted(folder.glob("*.json")), folder / "generate.py",
            *sorted((folder / "generation").glob("*.py"))]


def shipped_name(path: Path, root: Path = ROOT) -> str:
    """Where a shipped file lies, relative to spec/vectors/ (in the repository and the site)."""
    return path.relative_to(root / VECTORS).as_posix()


def site_path(docname: str, target: str) -> str | None:
    """The site path of a link `target` written on the page `docname`, or None if it is
    not a relative link into spec/vectors/."""
    if "://" in target or target.startswith(("/", "#")):
        return None
    path = posixpath.normpath(posixpath.join(posixpath.dirname(docname), target))
    return path if path.startswith(VECTORS + "/") else None


class VectorLinks(SphinxPostTransform):
    """Resolve links to shipped vector files before MyST reports them as missing."""

    default_priority = 8  # before MyST's reference resolver (9)

    def run(self, **kwargs: Any) -> None:
        shipped = {f"{VECTORS}/{shipped_name(path)}" for path in shipped_files()}
        for node in list(self.document.findall(pending_xref)):
            if node.get("reftype") != "myst":
                continue
            target = str(node["reftarget"])
            if site_path(self.env.docname, target) not in shipped:
                continue
            link = nodes.reference("", "", internal=False, refuri=target)
            link += node.children
            node.replace_self(link)


def copy_vectors(app: Sphinx, exception: BaseException | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir) / VECTORS
    for path in shipped_files():
        copy = out / shipped_name(path)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_post_transform(VectorLinks)
    app.connect("build-finished", copy_vectors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
