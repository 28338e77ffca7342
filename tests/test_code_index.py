"""The generated reference pages cover the code: every subcommand, option and exported name.

docs/_ext/cli_reference.py renders the CLI reference from the argument parser and
docs/_ext/code_index.py the API groups and the architecture table from the sources, when the
site is built. These tests check what they render, without a Sphinx build: a subcommand, an
option or an exported name the rendering leaves out fails here, and so does a page that
stops using the directive.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import specaccept
import specaccept.conformance as conformance
import specaccept.shell.conformance as tracers
from specaccept.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
cli_reference: Any = importlib.import_module("cli_reference")
code_index: Any = importlib.import_module("code_index")


def all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += all_parsers(sub)
    return found


def test_the_cli_reference_shows_every_subcommand_and_option() -> None:
    parser = build_parser()
    text = "\n".join(cli_reference.reference_markdown(parser))
    parsers = all_parsers(parser)
    assert {"specaccept vectors check", "specaccept conform", "specaccept bench"} <= {
        p.prog for p in parsers}
    for sub in parsers:
        assert f"`{sub.prog}`" in text, f"{sub.prog} is missing from the CLI reference"
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in text, f"{sub.prog} {option} is missing"


def test_the_cli_reference_would_miss_a_subcommand_it_did_not_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The check above has power: a renderer that stops at the first level loses `check`.
    monkeypatch.setattr(cli_reference, "subcommands",
                        lambda parser: iter([]))
    text = "\n".join(cli_reference.reference_markdown(build_parser()))
    assert "`specaccept vectors check`" not in text


def test_the_commands_page_uses_the_generated_cli_reference() -> None:
    assert "```{cli-reference}" in (DOCS / "cli.md").read_text("utf-8")


def test_the_api_groups_hold_every_exported_name_once() -> None:
    core = {n for n, _ in code_index.group_members("core")}
    shell = {n for n, _ in code_index.group_members("shell")}
    assert core.isdisjoint(shell)
    assert core | shell == {f"specaccept.{name}" for name in specaccept.__all__}, (
        "a name of specaccept.__all__ is defined outside specaccept.core and specaccept.shell"
    )
    kit = {n for n, _ in code_index.group_members("conformance")}
    assert kit == {f"specaccept.conformance.{name}" for name in conformance.__all__}
    tracing = {n for n, _ in code_index.group_members("tracers")}
    assert tracing == {f"specaccept.shell.conformance.{name}" for name in tracers.__all__}


def test_every_api_group_directive_documents_its_members() -> None:
    for group in code_index.GROUPS:
        text = "\n".join(code_index.group_markdown(group))
        for name, _ in code_index.group_members(group):
            assert f":: {name}\n" in text, f"{name} is not documented in the {group} group"


def api_page_members() -> list[str]:
    """Every name the ``{api-group}`` directives of the API pages document, once per time."""
    documented = []
    for page in sorted(DOCS.glob("api*.md")):
        text = page.read_text("utf-8")
        for group, options in re.findall(r"```\{api-group\} (\w+)\n((?::\w+:.*\n)*)```", text):
            found = dict(re.findall(r":(\w+):(.*)", options))
            kinds = tuple(found["kinds"].split()) if "kinds" in found else code_index.KINDS
            names = tuple(found["names"].split()) if "names" in found else None
            excluded = tuple(found.get("except", "").split())
            documented += [name for name, _ in
                           code_index.selected_members(group, kinds, names, excluded)]
    return documented


def test_the_api_pages_document_every_member_once_and_the_home_page_the_module_table() -> None:
    documented = api_page_members()
    wanted = [name for group in code_index.GROUPS for name, _ in code_index.group_members(group)]
    assert sorted(documented) == sorted(wanted), "each member of each group on one API page"
    assert "```{module-table}" in (DOCS / "index.md").read_text("utf-8")


def test_the_module_table_lists_every_module() -> None:
    listed = {where for _, where, _ in code_index.module_rows()}
    package = ROOT / "impl" / "specaccept"
    for folder in ("core", "conformance", "shell", "shell/conformance", "cli"):
        for module in (package / folder).glob("[!_]*.py"):
            assert str(module.relative_to(ROOT)) in listed
    assert all(summary for _, _, summary in code_index.module_rows()), "a module lacks a docstring"


def test_the_readme_layout_names_every_module() -> None:
    # README.md is the home page on a code host, where no directive runs: it is checked.
    rows = {line.split("|")[1].strip().strip("`"): line
            for line in (ROOT / "README.md").read_text("utf-8").splitlines()
            if line.startswith("| `impl/specaccept/")}
    package = ROOT / "impl" / "specaccept"
    for folder, row_folder in (("core", "core"), ("conformance", "conformance"),
                               ("shell", "shell"), ("shell/conformance", "shell"), ("cli", "cli")):
        row = rows[f"impl/specaccept/{row_folder}/"]
        for module in sorted((package / folder).glob("[!_]*.py")):
            assert f"`{module.stem}`" in row, f"README's layout omits {folder}/{module.name}"


def test_the_readme_names_every_subcommand() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    for sub in all_parsers(build_parser())[1:]:
        if not any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
            assert sub.prog in readme, f"README.md's CLI section omits {sub.prog}"


def test_the_generated_markdown_has_valid_fences() -> None:
    # CommonMark ends a backtick fence's info string at no backtick: one there turns the
    # fence into a paragraph, and the reference renders as raw text.
    lines = (cli_reference.reference_markdown(build_parser())
             + code_index.group_markdown("core") + code_index.table_markdown())
    for line in lines:
        if line.startswith("```"):
            assert "`" not in line.lstrip("`"), f"a backtick in a fence's info string: {line}"
