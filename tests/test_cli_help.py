"""`--help`: every option of every subcommand explains itself and shows its default."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from specaccept.cli import DefaultsShownFormatter, build_parser, shown_default


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            yield action


ALL = list(parsers(build_parser()))


@pytest.mark.parametrize("parser", ALL, ids=[p.prog for p in ALL])
def test_every_option_has_help(parser: argparse.ArgumentParser) -> None:
    missing = [action.option_strings or action.dest for action in options(parser)
               if not (action.help or "").strip()]
    assert missing == []


@pytest.mark.parametrize("parser", ALL, ids=[p.prog for p in ALL])
def test_help_shows_every_default_a_run_takes(parser: argparse.ArgumentParser) -> None:
    assert parser.formatter_class is DefaultsShownFormatter
    text = " ".join(parser.format_help().split())
    for action in options(parser):
        if action.nargs == 0 or action.default in (None, argparse.SUPPRESS):
            continue
        assert "default" in " ".join((action.help or "").split()).lower() or \
            f"(default: {shown_default(action.default)})" in text, action.option_strings


def test_generate_help_states_the_defaults_a_newcomer_asks_about() -> None:
    generate = next(p for p in ALL if p.prog == "specaccept generate")
    text = " ".join(generate.format_help().split())
    for shown in ["tokens each run generates (default: 200)", "(default: 0.7)",
                  "k, drafts per round, at most 4096 (default: 4)",
                  'the prompt (default: "ROMEO:\\n")']:
        assert shown in text
    assert "for table" not in text


def test_a_flag_or_an_unset_option_shows_no_default() -> None:
    generate = next(p for p in ALL if p.prog == "specaccept generate")
    text = generate.format_help()
    assert "(default: False)" not in text and "(default: None)" not in text


def test_generate_help_explains_every_field_of_the_summary_line() -> None:
    import re

    from specaccept.cli.generate import SUMMARY_FIELDS
    from specaccept.core.acceptance import AcceptanceRule
    from specaccept.shell.stats import SpeculativeStats

    line = SpeculativeStats(rule=AcceptanceRule.STOCHASTIC, diagnostics=True).summary_line()
    fields = re.findall(r" (\w+)=", line)
    assert len(fields) >= 10
    generate = next(p for p in ALL if p.prog == "specaccept generate")
    text = generate.format_help()
    for field in [f for f in fields if f != "rule"]:
        assert re.search(rf"^  {field} ", SUMMARY_FIELDS, re.M), field
        assert f"  {field} " in text  # printed as written, not reflowed
