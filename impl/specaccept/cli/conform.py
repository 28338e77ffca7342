"""`specaccept conform TRACE`: check an engine's speculative-decoding trace against the spec.

With ``--record ENGINE`` it first runs that engine (this library's generator, or
mlx-lm's speculative decoding) on a model pair and writes the trace, then checks it.
Exit status: 0 the trace conforms, 1 a check failed, 2 the trace is malformed or an
argument is bad.
"""

from __future__ import annotations

import argparse
import json
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
    conform.add_argument("trace", help="the trace, .jsonl or .jsonl.gz")
    conform.add_argument("--alpha", type=_alpha, default=1e-4,
                         help="false-alarm probability of each statistical check")
    conform.add_argument("--json", action="store_true", help="print the report as JSON")
    conform.add_argument("--markdown", action="store_true",
                         help="print the report as a Markdown result (opens with the command)")
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
        with open(args.trace, "w", encoding="utf-8") as stream:
            stream.write(buffer.getvalue())
    except OSError as error:
        raise ValueError(f"cannot write the trace {args.trace!r}: {error.strerror}") from None
    print(f"recorded {args.record}: {len(tokens)} tokens -> {args.trace}", file=sys.stderr)
    return times


def _write(args: argparse.Namespace, text: str) -> None:
    try:
        with open(args.trace, "w", encoding="utf-8") as stream:
            stream.write(text)
    except OSError as error:
        raise ValueError(f"cannot write the trace {args.trace!r}: {error.strerror}") from None


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
          f"{args.trace}", file=sys.stderr)
    return times


def run(args: argparse.Namespace) -> int:
    """Check the trace (recording it first with --record); print the report."""
    from specaccept.conformance import check_trace, read_trace

    if args.time and not args.record:
        raise ValueError("--time needs --record: it times the engine's run")
    if args.tree is not None and not args.record:
        raise ValueError("--tree needs --record specaccept: it says which engine to record")
    times = _record(args) if args.record else {}
    start = time.perf_counter()
    try:
        trace = read_trace(args.trace)
    except OSError as error:
        raise ValueError(f"cannot read the trace {args.trace!r}: {error.strerror}") from None
    report = check_trace(trace, alpha=args.alpha)
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
        print(report.to_text())
        for name, seconds in times.items():
            print(f"time: {name} {seconds:.2f} s")
        if "untraced run" in times:
            extra = times["traced run"] - times["untraced run"] + times["read and check"]
            print(f"time: tracing overhead + read and check = {extra:.2f} s = "
                  f"{extra / times['untraced run']:.2f}x the untraced run")
        if args.markdown:
            print("```")
    if trace.truncated:
        print(f"specaccept: warning: the trace is truncated: {trace.truncated}", file=sys.stderr)
    return 0 if report.passed else 1
