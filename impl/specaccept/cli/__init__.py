"""The `specaccept` command: generate, table, bench, vectors, conform.

One module per subcommand, each registering its own options; what they share lives in
`specaccept.cli.options`, which imports none of them.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import specaccept
from specaccept.cli import bench, conform, generate, options, table, vectors
from specaccept.shell.guards import NonFiniteLogitsError
from specaccept.shell.loading import (
    SHELL_EXTRA_INSTALL,
    SHELL_EXTRA_MODULES,
    MissingExtraError,
    require_shell_extra,
)

__all__ = [
    "NEEDS_MODELS", "DefaultsShownFormatter", "DefaultsShownParser", "build_parser", "main",
    "shown_default", "version_line",
]


class DefaultsShownFormatter(argparse.HelpFormatter):
    """--help with each option's default after its help, as the site's CLI reference shows
    it: no default for a flag, None, or a help text that states its own."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Wrap a description or epilog as argparse does, except that a text whose lines
        after the first are indented (a table of fields) keeps its lines as written."""
        if "\n  " in text:
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (not action.option_strings or action.nargs == 0
                or action.default in (None, argparse.SUPPRESS) or "default" in text.lower()):
            return text
        shown = shown_default(action.default).replace("%", "%%")
        return f"{text} (default: {shown})" if text else f"default: {shown}"


def shown_default(value: object) -> str:
    """A default as typed on a command line: a list space-separated, a string with a newline
    or edge spaces as a JSON string."""
    if isinstance(value, list | tuple):
        return " ".join(map(str, value))
    if isinstance(value, str) and (value == "" or value != " ".join(value.split())):
        return json.dumps(value)
    return str(value)


class DefaultsShownParser(argparse.ArgumentParser):
    """An ArgumentParser whose --help shows defaults; its subcommands' parsers inherit it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsShownFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `specaccept` command."""
    parser = DefaultsShownParser(
        prog="specaccept",
        description="Lossless speculative decoding on MLX: run it, measure it, benchmark it.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at info on stderr")
    parser.add_argument("--version", action="version", version=version_line(),
                        help="print the versions of specaccept, MLX and mlx-lm, and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    for subcommand in (generate, table, bench, vectors, conform):
        subcommand.add_parser(commands)
    return parser


def version_line() -> str:
    """specaccept's version and those of the MLX and mlx-lm it runs on."""
    def installed(distribution: str) -> str:
        try:
            return version(distribution)
        except PackageNotFoundError:
            return "not installed"

    return (f"specaccept {specaccept.__version__} (mlx {installed('mlx')}, "
            f"mlx-lm {installed('mlx-lm')})")


NEEDS_MODELS = frozenset({"generate", "table", "bench"})
"""The subcommands that run models, and so need the `shell` extra (`conform` does when it
records)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `specaccept` command; returns the exit status."""
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    for index, argument in enumerate(arguments, start=1):
        undecodable = _undecodable(argument)
        if undecodable is not None:
            parser.exit(2, f"specaccept: error: argument {index} is not valid UTF-8 "
                        f"({undecodable}): pass text in UTF-8\n")
    args = parser.parse_args(arguments)
    # `table` and `bench` print it first, so that each result names its own command.
    # MLX variables the caller set lead it, so that a GPU result's command reproduces it.
    args.invocation = " ".join([
        *options.tuning_assignments(),
        shlex.join(["specaccept", *(sys.argv[1:] if argv is None else argv)]),
    ])
    options.prefer_shape_free_attention()  # before any model runs: see its docstring
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr, format="%(name)s: %(message)s",
    )
    try:
        if args.command in NEEDS_MODELS or getattr(args, "record", None):
            require_shell_extra(f"specaccept {args.command}")
        status: int = args.handler(args)
        sys.stdout.flush()
    except MissingExtraError as error:
        parser.exit(2, f"specaccept: error: {error}\n")
    except ModuleNotFoundError as error:
        # A path that imports the extra lazily and escaped the check above: the same line.
        if (error.name or "").partition(".")[0] not in SHELL_EXTRA_MODULES:
            raise
        parser.exit(2, f"specaccept: error: specaccept {args.command} needs {error.name}, "
                    f"not installed: {SHELL_EXTRA_INSTALL}\n")
    except NonFiniteLogitsError as error:
        # A model failed mid-run, not the caller: its own status, not a usage error's 2.
        sys.stderr.write(f"specaccept: error: {error}\n")
        return EXIT_NO_DISTRIBUTION
    except ValueError as error:
        parser.exit(2, f"specaccept: error: {error}\n")
    except BrokenPipeError:
        # The reader left (`| head`): stop quietly, as Unix tools do on SIGPIPE, and keep
        # the interpreter's final flush from reporting the same broken pipe again.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        sys.stderr.write("specaccept: interrupted\n")
        return generate.EXIT_INTERRUPTED
    except OSError as error:
        _silence_stdout()
        where = f": {error.filename}" if error.filename else ""
        sys.stderr.write(f"specaccept: error: {error.strerror or error}{where}\n")
        return 1
    return status


def _undecodable(argument: str) -> str | None:
    """What in `argument` is not UTF-8 text, or None: Python keeps an undecodable byte of
    argv as a lone surrogate, which no tokenizer or file name takes."""
    try:
        argument.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(argument[error.start])
        if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's image of byte code - 0xDC00
            return f"byte 0x{code - 0xDC00:02x}"
        return f"the lone surrogate U+{code:04X}"
    return None


EXIT_NO_DISTRIBUTION = 3
"""A model produced logits with no distribution (NaN or +inf, -inf for every token, or no
finite mass): `specaccept.NonFiniteLogitsError`, refused before any token is drawn from it."""

EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: the status of a Unix tool whose reader closed the pipe."""


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    raise SystemExit(main())
