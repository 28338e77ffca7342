"""Pages that list the code, written from the code at build time so they cannot go stale.

``{api-group} core`` (or ``shell``, ``conformance``, ``tracers``) documents, with autodoc,
every name the group exports: ``core`` and ``shell`` split `specaccept.__all__` by the layer
each name is imported from, ``conformance`` is `specaccept.conformance.__all__` and
``tracers`` is `specaccept.shell.conformance.__all__`. Within a group
the classes come first, then the functions, then the constants, each alphabetical; a
class is documented with its fields. A group too long for one page is split over several
with ``:kinds: class`` (or ``function data``, say), ``:names: a b`` and ``:except: a b``:
each page documents only those members, and tests/test_code_index.py checks that the API
pages together document every member of every group exactly once.

``{module-table}`` is the architecture table of the home page: one row per module of
`specaccept.core`, `specaccept.conformance`, `specaccept.shell`,
`specaccept.shell.conformance` and `specaccept.cli`, with the first line of its docstring.

Both read the sources with `ast` (for the import lines and the docstrings) and import the
package only for autodoc. tests/test_code_index.py checks that the groups hold every
exported name exactly once and that the pages use these directives.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "impl" / "specaccept"
GROUPS = ("core", "shell", "conformance", "tracers")
"""The API pages' groups, in page order."""
KINDS = ("class", "function", "data")
"""How a name is defined, in the order a group lists them."""
LAYERS = (
    ("specaccept.core", "functional core"),
    ("specaccept.conformance", "conformance kit"),
    ("specaccept.shell", "shell"),
    ("specaccept.shell.conformance", "tracers"),
    ("specaccept.cli", "command line"),
)
"""The packages of the architecture table, in table order, with the part each one is."""


def exported_from(init: Path) -> dict[str, str]:
    """Each name of the package's ``__all__`` -> the module it is imported from."""
    tree = ast.parse(init.read_text("utf-8"))
    sources: dict[str, str] = {}
    exported: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                sources[alias.asname or alias.name] = node.module
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            exported = list(ast.literal_eval(node.value))
    missing = [name for name in exported if name not in sources]
    if missing:
        raise ValueError(f"{init}: exported but not imported from a module: {missing}")
    return {name: sources[name] for name in exported}


def group_members(group: str) -> list[tuple[str, str]]:
    """(the documented name, its defining module) of every name `group` exports."""
    packages = {"conformance": "specaccept.conformance",
                "tracers": "specaccept.shell.conformance"}
    if group in packages:
        package = packages[group]
        names = exported_from(PACKAGE.parent / package.replace(".", "/") / "__init__.py")
        return [(f"{package}.{n}", m) for n, m in names.items()]
    if group not in ("core", "shell"):
        raise ValueError(f"api-group must be one of {GROUPS}, got {group!r}")
    names = exported_from(PACKAGE / "__init__.py")
    return [(f"specaccept.{n}", m) for n, m in names.items()
            if m.startswith(f"specaccept.{group}.")]


def kind(name: str, module: str) -> str:
    """'class', 'function' or 'data': how `name` is defined in its module's source."""
    short = name.rsplit(".", 1)[1]
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == short:
            return "class"
        if isinstance(node, ast.FunctionDef) and node.name == short:
            return "function"
    return "data"


def selected_members(group: str, kinds: tuple[str, ...] = KINDS,
                     names: tuple[str, ...] | None = None,
                     excluded: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """`group`'s members of `kinds`, of `names` only when given, less `excluded` (short
    names), in page order: classes, functions, constants, each alphabetical."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"api-group kinds must be among {KINDS}, got {unknown}")
    members = group_members(group)
    short = {m[0].rsplit(".", 1)[1] for m in members}
    strangers = sorted((set(names or ()) | set(excluded)) - short)
    if strangers:
        raise ValueError(f"api-group {group}: no member named {strangers}")
    order = {name: place for place, name in enumerate(KINDS)}
    chosen = [m for m in members if kind(*m) in kinds
              and (names is None or m[0].rsplit(".", 1)[1] in names)
              and m[0].rsplit(".", 1)[1] not in excluded]
    return sorted(chosen, key=lambda m: (order[kind(*m)], m[0].rsplit(".", 1)[1].lower()))


def group_markdown(group: str, kinds: tuple[str, ...] = KINDS,
                   names: tuple[str, ...] | None = None,
                   excluded: tuple[str, ...] = ()) -> list[str]:
    """The autodoc directives of `group`'s members that `selected_members` picks, as MyST
    lines (one eval-rst block)."""
    members = selected_members(group, kinds, names, excluded)
    lines = ["```{eval-rst}"]
    for name, module in members:
        what = kind(name, module)
        if what == "class":
            lines += [f".. autoclass:: {name}", "   :members:", "   :undoc-members:", ""]
        elif what == "function":
            lines += [f".. autofunction:: {name}", ""]
        else:
            lines += [f".. autodata:: {name}", ""]
    return [*lines, "```"]


def module_rows() -> list[tuple[str, str, str]]:
    """(part, module, first docstring line) of every module of the architecture table."""
    rows = []
    for package, part in LAYERS:
        folder = PACKAGE.parent / package.replace(".", "/")
        for path in [folder / "__init__.py", *sorted(folder.glob("[!_]*.py"))]:
            docstring = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
            summary = docstring.strip().splitlines()[0] if docstring.strip() else ""
            where = str(path.relative_to(ROOT)) if path.name != "__init__.py" else (
                str(folder.relative_to(ROOT)) + "/")
            rows.append((part, where, summary))
    return rows


def table_markdown() -> list[str]:
    lines = ["| Part | Where | What |", "| ---- | ----- | ---- |"]
    for part, where, summary in module_rows():
        cell = summary.replace("|", "\\|")
        lines.append(f"| {part} | `{where}` | {cell} |")
    return lines


class _Generated(SphinxDirective):
    def parse(self, lines: list[str]) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]),
                                self.content_offset, container)
        return list(container.children)


class ApiGroup(_Generated):
    """``{api-group} core|shell|conformance|tracers``: autodoc of every name the group exports
    (of the ``:kinds:`` given, all by default)."""

    required_arguments = 1
    option_spec: ClassVar[dict[str, Callable[[str], Any]]] = {
        "kinds": directives.unchanged, "names": directives.unchanged,
        "except": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        kinds = tuple(self.options.get("kinds", " ".join(KINDS)).split())
        names = tuple(self.options["names"].split()) if "names" in self.options else None
        excluded = tuple(self.options.get("except", "").split())
        return self.parse(group_markdown(self.arguments[0], kinds, names, excluded))


class ModuleTable(_Generated):
    """``{module-table}``: one row per module, with its docstring's first line."""

    def run(self) -> list[nodes.Node]:
        return self.parse(table_markdown())


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("api-group", ApiGroup)
    app.add_directive("module-table", ModuleTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
