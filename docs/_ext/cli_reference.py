"""The CLI reference, written from the `specaccept` argument parser at build time.

A page writes

    ```{cli-reference}
    ```

and gets, for the command and for every subcommand (nested ones included), its usage line,
its description and a table of its options: flags, default, help, exactly as
`specaccept ... --help` would print them. A subcommand or a flag added to the parser is on
the page at the next build, and none can be documented that the parser lacks.
tests/test_cli_reference.py checks the rendering covers every subcommand and option.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(one-line help, parser) of every subcommand of `parser`, depth first, in order."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            yield helps.get(name, ""), sub
            yield from subcommands(sub)


def code(text: str) -> str:
    """`text` as Markdown inline code (a double fence when it holds a backtick)."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def flags(action: argparse.Action) -> str:
    """The action's spellings as --help shows them: ``-n N``, ``--max-tokens N``."""
    if not action.option_strings:
        return code(str(action.metavar or action.dest))
    if action.nargs == 0:
        return ", ".join(code(option) for option in action.option_strings)
    metavar: Any = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices
        else action.dest.upper()
    )
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    suffix = f" {metavar} [{metavar} ...]" if action.nargs in ("+", "*") else f" {metavar}"
    return ", ".join(code(option + suffix) for option in action.option_strings)


def default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
        return ""
    value = action.default
    if isinstance(value, list | tuple):
        value = " ".join(map(str, value))
    if isinstance(value, str) and (value == "" or value != " ".join(value.split())):
        return code(json.dumps(value))  # a prompt's newline, shown as the escape --help reads
    return code(str(value))


def cell(text: str) -> str:
    """One table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def help_text(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "default": action.default, "prog": parser.prog}
    return text


def option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, str, str]]:
    """(flags, default, help) of every option --help lists, in its order."""
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        rows.append((flags(action), default(action), help_text(action, parser)))
    return rows


def reference_markdown(parser: argparse.ArgumentParser) -> list[str]:
    """The reference of `parser` and its subcommands, as MyST Markdown lines."""
    lines: list[str] = []
    entries = [(parser.description or "", parser), *subcommands(parser)]
    for summary, command in entries:
        # A tilde fence: CommonMark forbids backticks in a backtick fence's info string.
        lines += [f"~~~{{rubric}} {code(command.prog)}", ":class: cli-command",
                  f":name: cli-{command.prog.replace(' ', '-')}", "~~~", ""]
        text = command.description or summary
        if text:
            lines += [" ".join(text.split()), ""]
        usage = command.format_usage().removeprefix("usage: ").rstrip()
        lines += ["```text", *usage.splitlines(), "```", ""]
        rows = option_rows(command)
        if rows:
            lines += ["| Option | Default | Meaning |", "| ------ | ------- | ------- |"]
            lines += [f"| {cell(f)} | {cell(d)} | {cell(h)} |" for f, d, h in rows]
            lines.append("")
        if command.epilog:  # what --help prints after the options (generate's summary line)
            lines += ["```text", *command.epilog.splitlines(), "```", ""]
    return lines


class CliReference(SphinxDirective):
    """``{cli-reference}``: the reference of the `specaccept` command, from its parser."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from specaccept.cli import build_parser  # the build puts impl/ on the path

        container = nodes.container(classes=["cli-reference"])
        content = StringList(reference_markdown(build_parser()), source="specaccept.cli")
        self.state.nested_parse(content, self.content_offset, container)
        return [container]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("cli-reference", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
