"""`specaccept conform TRACE`: check an engine's speculative-decoding trace against the spec.

With ``--record ENGINE`` it first runs that engine (this library's generator, or
mlx-lm's speculative decoding) on a model pair and writes the trace, then checks it.
Exit status: 0 the trace conforms, 1 a check failed, 2 the trace is malformed or an
argument is bad.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from specaccept.cli.options import (
    DEFAULT_PROMPT,
    add_model_arguments,
    add_run_arguments,
    add_sampler_arguments,
    add_tree_arguments,
    blas_in_use,
    encode_prompt,
    mlx_version,
    print_invocation,
    sampler_config,
    tree_options,
)

__all__ = ["add_parser", "run"]


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text!r}")
    return value


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def _piece(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be I/N with whole numbers, got {text!r}") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"must have 1 <= I <= N, got {text!r}")
    return i, n


def add_parser(commands: Any) -> None:
    """Register `conform` on the subparsers action `commands`."""
    conform: argparse.ArgumentParser = commands.add_parser(
        "conform", help="check an engine's trace against the spec (nine checks)",
        description="Check a speculative-decoding trace (spec/trace_format.md): replay, "
        "fresh randomness, support, acceptance, law, rewind, draft law, history and batch, "
        "each with its statistic, threshold, verdict "
        "and power against the known bug classes; a trace's tree rounds get the same checks "
        "made for trees.",
    )
    conform.add_argument(
        "trace", nargs="+",
        help="the trace, .jsonl or .jsonl.gz; several files are one engine's trace in "
        "pieces (one per replica, say), checked as one; with --merge, saved states")
    conform.add_argument(
        "--jobs", type=_jobs, default=None,
        help="processes checking pieces of the trace in parallel (default: the machine's "
        f"cores, {os.cpu_count() or 1}; a file is cut into pieces of at least 8 MiB)")
    conform.add_argument(
        "--save-state", metavar="FILE",
        help="write the checks' state (JSON; .gz compresses) instead of a report, to merge "
        "later with --merge: check pieces anywhere, merge their states here")
    conform.add_argument(
        "--piece", type=_piece, metavar="I/N",
        help="check only piece I of N of the trace (1-based; cut at lines into N parts of "
        "about equal bytes), for --save-state")
    conform.add_argument(
        "--merge", action="store_true",
        help="the positional files are states saved by --save-state, in file order: merge "
        "them and report")
    conform.add_argument("--alpha", type=_alpha, default=1e-4,
                         help="false-alarm probability of each statistical check")
    conform.add_argument("--json", action="store_true", help="print the report as JSON")
    conform.add_argument("--markdown", action="store_true",
                         help="print the report as a Markdown result (opens with the command; "
                         "verbose)")
    conform.add_argument("-v", "--verbose", action="store_true",
                         help="print every check, including those that did not run, and each "
                         "check's power against the known bug classes")
    record = conform.add_argument_group(
        "recording (optional): run an engine first and write its trace to TRACE"
    )
    record.add_argument("--record", choices=("specaccept", "mlx-lm"),
                        help="the engine to run and trace")
    record.add_argument("-p", "--prompt", default=DEFAULT_PROMPT, help="the recorded run's prompt")
    record.add_argument("--rule", choices=("auto", "stochastic", "sampler-match", "block"),
                        default="auto", help="specaccept's rule (mlx-lm has only sampler-match)")
    record.add_argument("--time", action="store_true",
                        help="also run the engine untraced first, and report both run times "
                        "beside the time to read and check the trace")
    add_tree_arguments(conform)
    add_model_arguments(conform)
    add_run_arguments(conform, tokens=200)
    add_sampler_arguments(conform)
    conform.set_defaults(handler=run)


def _record(args: argparse.Namespace) -> dict[str, float]:
    """Run the engine traced (and untraced first with --time); the run times in seconds."""
    import io

    from specaccept.shell.conformance import trace_generator
    from specaccept.shell.conformance.mlx_lm_adapter import run_mlx_lm, trace_mlx_lm
    from specaccept.shell.generator import SpeculativeGenerator
    from specaccept.shell.loading import load_pair

    config = sampler_config(args)
    tree = tree_options(args)
    if tree is not None and args.record != "specaccept":
        raise ValueError(f"--tree records this library's tree generator: it needs --record "
                         f"specaccept, got --record {args.record}")
    pair = load_pair(args.model, args.draft_model)
    assert pair.drafter is not None
    prompt = encode_prompt(pair.tokenizer, args.prompt, chat_template=False)
    if tree is not None:
        return _record_tree(args, pair, prompt, config, tree)
    if args.record == "mlx-lm" and config != type(config)(
        temperature=config.temperature, top_k=config.top_k, top_p=config.top_p,
        min_p=config.min_p,
    ):
        raise ValueError("--record mlx-lm takes --temp, --top-k, --top-p and --min-p only: "
                         "mlx-lm's penalties are logits processors it applies differently")
    mlx_options = {"temperature": config.temperature,
                   "top_p": config.top_p if config.top_p < 1 else 0.0,
                   "min_p": config.min_p, "top_k": config.top_k,
                   "num_draft_tokens": args.num_draft_tokens, "seed": args.seed}
    generator = SpeculativeGenerator(
        pair.target, pair.drafter, config, num_draft_tokens=args.num_draft_tokens, rule=args.rule,
    )
    times: dict[str, float] = {}
    if args.time:
        start = time.perf_counter()
        if args.record == "mlx-lm":
            run_mlx_lm(pair.target, pair.drafter, prompt, args.max_tokens, **mlx_options)
        else:
            for _ in generator.generate(prompt, args.max_tokens, seed=args.seed):
                pass
        times["untraced run"] = time.perf_counter() - start
    buffer = io.StringIO()
    start = time.perf_counter()
    if args.record == "mlx-lm":
        tokens = trace_mlx_lm(pair.target, pair.drafter, prompt, args.max_tokens, buffer,
                              **mlx_options)
    else:
        tokens = trace_generator(generator, prompt, args.max_tokens, buffer, seed=args.seed)
    times["traced run"] = time.perf_counter() - start
    try:
        with open(args.trace_path, "w", encoding="utf-8") as stream:
            stream.write(buffer.getvalue())
    except OSError as error:
        raise ValueError(f"cannot write the trace {args.trace_path!r}: {error.strerror}") from None
    print(f"recorded {args.record}: {len(tokens)} tokens -> {args.trace_path}", file=sys.stderr)
    return times


def _write(args: argparse.Namespace, text: str) -> None:
    try:
        with open(args.trace_path, "w", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as error:
        raise ValueError(f"cannot write the trace {args.trace_path!r}: {error.strerror}") from None


def _record_tree(
    args: argparse.Namespace, pair: Any, prompt: list[int], config: Any,
    tree: tuple[int, int, str],
) -> dict[str, float]:
    """Run `TreeSpeculativeGenerator` traced (untraced first with --time): tree rounds."""
    import io

    from specaccept.core.tree import TreeScheme
    from specaccept.shell.conformance.tree_record import trace_tree_generator
    from specaccept.shell.tree_generator import TreeSpeculativeGenerator

    width, depth, scheme = tree
    generator = TreeSpeculativeGenerator(pair.target, pair.drafter, config, width=width,
                                         depth=depth, scheme=TreeScheme(scheme))
    times: dict[str, float] = {}
    if args.time:
        start = time.perf_counter()
        for _ in generator.generate(prompt, args.max_tokens, seed=args.seed):
            pass
        times["untraced run"] = time.perf_counter() - start
    buffer = io.StringIO()
    start = time.perf_counter()
    tokens = trace_tree_generator(generator, prompt, args.max_tokens, buffer, seed=args.seed)
    times["traced run"] = time.perf_counter() - start
    _write(args, buffer.getvalue())
    print(f"recorded specaccept --tree {width}x{depth} ({scheme}): {len(tokens)} tokens -> "
          f"{args.trace_path}", file=sys.stderr)
    return times


def _checker(args: argparse.Namespace) -> Any:
    """The checks' state over the trace files, their pieces, or saved states."""
    from specaccept.conformance.pieces import (
        check_on_cpu,
        check_paths,
        check_piece,
        load_state,
        merge_states,
        split_trace,
    )

    check_on_cpu()
    if args.merge:
        return merge_states([load_state(path) for path in args.trace])
    for path in args.trace:
        if not os.path.isfile(path):
            raise ValueError(f"cannot read the trace {path!r}: no such file")
    if args.piece is not None:
        if len(args.trace) != 1:
            raise ValueError(f"--piece cuts one trace file, got {len(args.trace)}")
        index, count = args.piece
        pieces = split_trace(args.trace[0], count, smallest=1)
        if index > len(pieces):
            raise ValueError(f"--piece {index}/{count}: the trace has lines for "
                             f"{len(pieces)} pieces only")
        return check_piece(pieces[index - 1])
    return check_paths(args.trace, args.jobs or os.cpu_count() or 1)


def run(args: argparse.Namespace) -> int:
    """Check the trace (recording it first with --record); print the report."""
    from specaccept.conformance.batch import PieceConflict
    from specaccept.conformance.pieces import save_state

    if args.time and not args.record:
        raise ValueError("--time needs --record: it times the engine's run")
    if args.tree is not None and not args.record:
        raise ValueError("--tree needs --record specaccept: it says which engine to record")
    if args.record and (len(args.trace) != 1 or args.merge):
        raise ValueError("--record writes one trace: give one TRACE path, without --merge")
    if args.merge and args.piece is not None:
        raise ValueError("--piece checks a piece of a trace; --merge merges saved states")
    if args.record:
        args.trace_path = args.trace[0]
    times = _record(args) if args.record else {}
    start = time.perf_counter()
    try:
        checker = _checker(args)
    except OSError as error:
        raise ValueError(f"cannot read {error.filename!r}: {error.strerror}") from None
    except PieceConflict as error:
        raise ValueError(f"the pieces do not make one trace: {error}") from None
    if args.save_state:
        try:
            save_state(checker, args.save_state)
        except OSError as error:
            raise ValueError(f"cannot write the state {args.save_state!r}: "
                             f"{error.strerror}") from None
        print(f"state of {checker.rounds + checker.tree.rounds} rounds -> "
              f"{args.save_state}", file=sys.stderr)
        return 0
    report = checker.report(args.alpha)
    if times:
        times["read and check"] = time.perf_counter() - start
    if args.json:
        result = report.to_json()
        result["times_s"] = times
        print(json.dumps(result, indent=2))
    else:
        if args.markdown:
            import mlx.core as mx

            print_invocation(args)
            print(f"Device {mx.default_device()}, mlx {mlx_version()}, BLAS: {blas_in_use()}.\n")
            print("```text")
        print(report.to_text(verbose=args.verbose or args.markdown))
        for name, seconds in times.items():
            print(f"time: {name} {seconds:.2f} s")
        if "untraced run" in times:
            extra = times["traced run"] - times["untraced run"] + times["read and check"]
            print(f"time: tracing overhead + read and check = {extra:.2f} s = "
                  f"{extra / times['untraced run']:.2f}x the untraced run")
        if args.markdown:
            print("```")
    if report.truncated:
        print(f"specaccept: warning: the trace is truncated: {report.truncated}",
              file=sys.stderr)
    return 0 if report.passed else 1
