"""The `specaccept` command: generate, table, bench."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any

from specaccept.sampling import SamplerConfig

__all__ = ["main"]

DEFAULT_PROMPT = "ROMEO:\n"
DIAG_ENV = "SPECACCEPT_ACCEPT_DIAG"


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("models (default: the embedded demo pair)")
    group.add_argument("-m", "--model", help="target: a local mlx-lm model directory")
    group.add_argument("--draft-model", help="drafter: a local mlx-lm model directory")


def _add_sampler_arguments(parser: argparse.ArgumentParser, *, with_temp: bool = True) -> None:
    group = parser.add_argument_group("sampler (the target's; the drafter uses the same)")
    if with_temp:
        group.add_argument("--temp", type=float, default=0.7, help="temperature, 0 = greedy")
    group.add_argument("--top-k", type=_non_negative_int, default=0, help="0 = off")
    group.add_argument("--top-p", type=float, default=1.0)
    group.add_argument("--min-p", type=float, default=0.0)
    group.add_argument("--repetition-penalty", type=float, default=1.0)
    group.add_argument("--repetition-context-size", type=_positive_int, default=20)
    group.add_argument("--frequency-penalty", type=float, default=0.0)
    group.add_argument("--presence-penalty", type=float, default=0.0)


def _add_run_arguments(parser: argparse.ArgumentParser, *, tokens: int) -> None:
    parser.add_argument("-n", "--max-tokens", type=_non_negative_int, default=tokens)
    parser.add_argument("--seed", type=_non_negative_int, default=0)
    parser.add_argument("--num-draft-tokens", type=_positive_int, default=4, help="k")


def sampler_config(args: argparse.Namespace, temperature: float | None = None) -> SamplerConfig:
    """The SamplerConfig the flags describe (a ValueError names a bad field)."""
    return SamplerConfig(
        temperature=args.temp if temperature is None else temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        repetition_context_size=args.repetition_context_size,
        frequency_penalty=args.frequency_penalty,
        presence_penalty=args.presence_penalty,
    )


def encode_prompt(tokenizer: Any, prompt: str, *, chat_template: bool) -> list[int]:
    """Token ids of `prompt`, through the chat template when asked and available."""
    if chat_template and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        return [int(t) for t in ids]
    return [int(t) for t in tokenizer.encode(prompt)]


def diagnostics_enabled(flag: bool) -> bool:
    """--diag, or SPECACCEPT_ACCEPT_DIAG set to 1/true/yes/on."""
    return flag or os.environ.get(DIAG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def _generate(args: argparse.Namespace) -> int:
    from specaccept.generator import SpeculativeGenerator, target_only_generate
    from specaccept.loading import load_pair

    config = sampler_config(args)
    pair = load_pair(args.model, args.draft_model, with_drafter=not args.no_draft)
    tokenizer = pair.tokenizer
    prompt = encode_prompt(tokenizer, args.prompt, chat_template=args.chat_template)
    eos = frozenset(int(t) for t in getattr(tokenizer, "eos_token_ids", ()) or ())
    detokenizer = tokenizer.detokenizer
    detokenizer.reset()
    out = sys.stdout
    out.write(args.prompt if not args.chat_template else "")
    out.flush()

    def stream(tokens: Sequence[int]) -> None:
        for token in tokens:
            detokenizer.add_token(token)
        out.write(detokenizer.last_segment)
        out.flush()

    start = time.perf_counter()
    count = 0
    if pair.drafter is None:
        for token in target_only_generate(
            pair.target, prompt, config, args.max_tokens, seed=args.seed, eos_token_ids=eos
        ):
            stream([token])
            count += 1
        summary = "[Target only] no drafter"
    else:
        generator = SpeculativeGenerator(
            pair.target, pair.drafter, config,
            num_draft_tokens=args.num_draft_tokens, rule=args.rule, eos_token_ids=eos,
            check_caches=args.check_caches, diagnostics=diagnostics_enabled(args.diag),
        )
        for block in generator.generate(prompt, args.max_tokens, seed=args.seed):
            stream(block)
            count += len(block)
        summary = generator.stats.summary_line()
    elapsed = time.perf_counter() - start
    detokenizer.finalize()
    out.write(detokenizer.last_segment + "\n")
    print(summary)
    rate = count / elapsed if elapsed > 0 else 0.0
    print(f"generated={count} seconds={elapsed:.3f} tokens_per_second={rate:.2f}")
    return 0


def _table(args: argparse.Namespace) -> int:
    from specaccept.table import measurement_table

    status: int = measurement_table(args)
    return status


def _bench(args: argparse.Namespace) -> int:
    from specaccept.bench import run_benchmark

    status: int = run_benchmark(args)
    return status


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `specaccept` command."""
    parser = argparse.ArgumentParser(
        prog="specaccept",
        description="Lossless speculative decoding on MLX: run it, measure it, benchmark it.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at info on stderr")
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser("generate", help="generate text speculatively")
    _add_model_arguments(generate)
    generate.add_argument("-p", "--prompt", default=DEFAULT_PROMPT)
    _add_run_arguments(generate, tokens=200)
    _add_sampler_arguments(generate)
    generate.add_argument(
        "--rule", choices=("auto", "stochastic", "sampler-match"), default="auto",
        help="auto: stochastic unless SPECACCEPT_STOCHASTIC_ACCEPT disables it",
    )
    generate.add_argument("--no-draft", action="store_true", help="target only, for A/B")
    generate.add_argument("--diag", action="store_true", help="report the closed forms")
    generate.add_argument(
        "--check-caches", action="store_true", help="assert both cache offsets every round"
    )
    generate.add_argument(
        "--chat-template", action="store_true", help="wrap the prompt in the chat template"
    )
    generate.set_defaults(handler=_generate)

    table = commands.add_parser("table", help="closed forms against measured acceptance")
    _add_model_arguments(table)
    _add_run_arguments(table, tokens=200)
    _add_sampler_arguments(table, with_temp=False)
    table.add_argument(
        "--temperatures", type=float, nargs="+", default=[0.0, 0.7, 1.0, 1.5]
    )
    table.add_argument("--prompts", nargs="+", default=None, help="default: built-in prompts")
    table.add_argument(
        "--repeats", type=_positive_int, default=1,
        help="runs per prompt, seeds --seed + run (the demo pair's context caps one run)",
    )
    table.add_argument("--json", dest="json_path", help="also write the rows to this file")
    table.set_defaults(handler=_table)

    bench = commands.add_parser("bench", help="side-by-side performance ratios")
    _add_model_arguments(bench)
    _add_run_arguments(bench, tokens=200)
    _add_sampler_arguments(bench)
    bench.add_argument("--repeats", type=_positive_int, default=5)
    bench.add_argument("-p", "--prompt", default=DEFAULT_PROMPT)
    bench.add_argument("--json", dest="json_path", help="also write the results to this file")
    bench.set_defaults(handler=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `specaccept` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # `table` and `bench` print it first, so that each result names its own command.
    args.invocation = shlex.join(["specaccept", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr, format="%(name)s: %(message)s",
    )
    try:
        status: int = args.handler(args)
    except ValueError as error:
        parser.exit(2, f"specaccept: error: {error}\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
