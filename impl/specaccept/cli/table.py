"""`specaccept table`: closed forms against measured acceptance, per temperature and rule."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from specaccept.cli.options import (
    add_model_arguments,
    add_run_arguments,
    add_sampler_arguments,
    blas_in_use,
    encode_prompt,
    output_path,
    positive_int,
    print_invocation,
    progress_bar,
    sampler_config,
)
from specaccept.core.acceptance import AcceptanceRule
from specaccept.shell.generator import RuleChoice

__all__ = [
    "DEFAULT_PROMPTS",
    "TableRow",
    "add_parser",
    "measure_rows",
    "measurement_table",
    "render_markdown",
]

DEFAULT_PROMPTS = ("ROMEO:\n", "First Citizen:\n", "KING RICHARD III:\n", "JULIET:\nO, ")
RULES: tuple[RuleChoice, ...] = ("stochastic", "sampler-match")


@dataclass(frozen=True)
class TableRow:
    """One temperature x rule cell, pooled over the prompts."""

    temperature: float
    requested_rule: str
    rule: str
    closed_form_sum_min: float
    closed_form_sum_prod: float
    ratio: float
    per_position_acceptance: float
    closed_form_of_rule: float
    standard_error: float
    z_score: float
    mean_accepted_len: float
    positions_tested: int
    rounds: int
    generated: int


def add_parser(commands: Any) -> None:
    """Register `table` on the subparsers action `commands`."""
    table: argparse.ArgumentParser = commands.add_parser(
        "table", help="closed forms against measured acceptance"
    )
    add_model_arguments(table)
    add_run_arguments(table, tokens=200, measures=True)
    add_sampler_arguments(table, with_temp=False)
    table.add_argument(
        "--temperatures", type=float, nargs="+", default=[0.0, 0.7, 1.0, 1.5]
    )
    table.add_argument("--prompts", nargs="+", default=None, help="default: built-in prompts")
    table.add_argument(
        "--repeats", type=positive_int, default=1,
        help="runs per prompt, seeds --seed + run (the demo pair's context caps one run)",
    )
    table.add_argument(
        "--json", dest="json_path", type=output_path, help="also write the rows to this file"
    )
    table.set_defaults(handler=measurement_table)


def _prompts(args: argparse.Namespace) -> list[str]:
    return list(args.prompts or DEFAULT_PROMPTS)


def _standard_error(closed_form: float, positions: int) -> float:
    """sqrt(a(1 - a) / n) for the mean closed form a over n tested positions.

    Each tested position accepts with its own probability a_i given the prefix, so
    accepted - sum(a_i) is a martingale with variance sum a_i(1 - a_i), which is at
    most n a(1 - a) by concavity: the figure over-states the spread, never under-states.
    """
    if positions == 0:
        return 0.0
    return math.sqrt(max(closed_form * (1.0 - closed_form), 0.0) / positions)


def _z_score(difference: float, standard_error: float) -> float:
    """difference / standard_error; a closed form of 0 or 1 admits no difference at all."""
    if standard_error > 0:
        return difference / standard_error
    return 0.0 if abs(difference) < 1e-6 else math.copysign(math.inf, difference)


def measure_rows(args: argparse.Namespace) -> list[TableRow]:
    """Run every (temperature, rule, prompt) with diagnostics on and pool per cell."""
    from specaccept.shell.generator import SpeculativeGenerator, SpeculativeStats
    from specaccept.shell.loading import load_pair

    pair = load_pair(args.model, args.draft_model)
    prompts = _prompts(args)
    encoded = [encode_prompt(pair.tokenizer, p, chat_template=False) for p in prompts]
    progress = progress_bar(
        len(args.temperatures) * len(RULES) * len(prompts) * args.repeats, "table",
        quiet=args.json_path is not None,
    )
    rows = []
    for temperature in args.temperatures:
        config = sampler_config(args, temperature=temperature)
        for requested in RULES:
            generator = SpeculativeGenerator(
                pair.target, pair.drafter, config, num_draft_tokens=args.num_draft_tokens,
                rule=requested, diagnostics=True,
            )
            pooled = SpeculativeStats(generator.acceptance_rule, diagnostics=True)
            runs = [prompt for _ in range(args.repeats) for prompt in encoded]
            for run_number, prompt in enumerate(runs):
                generation = generator.generate(
                    prompt, args.max_tokens, seed=args.seed + run_number
                )
                for _ in generation:
                    pass
                run = generation.stats
                pooled.rounds += run.rounds
                pooled.proposed += run.proposed
                pooled.positions_tested += run.positions_tested
                pooled.accepted += run.accepted
                pooled.generated += run.generated
                pooled.sum_min_total += run.sum_min_total
                pooled.sum_prod_total += run.sum_prod_total
                progress.set_postfix_str(f"T={temperature} {requested}")
                progress.update()
            expected = (pooled.closed_form_sum_min if pooled.rule is AcceptanceRule.STOCHASTIC
                        else pooled.closed_form_sum_prod)
            alpha, n = pooled.per_position_acceptance, pooled.positions_tested
            rows.append(TableRow(
                temperature=temperature,
                requested_rule=requested,
                rule=pooled.rule.value,
                closed_form_sum_min=pooled.closed_form_sum_min,
                closed_form_sum_prod=pooled.closed_form_sum_prod,
                ratio=(pooled.closed_form_sum_min / pooled.closed_form_sum_prod
                       if pooled.closed_form_sum_prod > 0 else math.inf),
                per_position_acceptance=alpha,
                closed_form_of_rule=expected,
                standard_error=(se := _standard_error(expected, n)),
                z_score=_z_score(alpha - expected, se),
                mean_accepted_len=pooled.mean_accepted_len,
                positions_tested=n,
                rounds=pooled.rounds,
                generated=pooled.generated,
            ))
    progress.close()
    return rows


def render_markdown(rows: list[TableRow]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| temperature | rule | closed_form_sum_min | closed_form_sum_prod | ratio "
        "| per_position_acceptance | ± s.e. | z | mean_accepted_len | positions_tested |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.temperature:g} | {r.rule} | {r.closed_form_sum_min:.4f} "
            f"| {r.closed_form_sum_prod:.4f} | {r.ratio:.2f}x | {r.per_position_acceptance:.4f} "
            f"| {r.standard_error:.4f} | {r.z_score:+.2f} | {r.mean_accepted_len:.4f} "
            f"| {r.positions_tested} |"
        )
    return "\n".join(lines)


def measurement_table(args: argparse.Namespace) -> int:
    """Print the table to stdout, and write JSON when asked."""
    import mlx.core as mx

    rows = measure_rows(args)
    prompts = _prompts(args)
    print_invocation(args)
    last_seed = args.seed + len(prompts) * args.repeats - 1
    print(
        f"{len(prompts)} prompts x {args.repeats} runs, {args.max_tokens} tokens each, "
        f"k={args.num_draft_tokens}, seeds {args.seed}..{last_seed}; "
        f"device {mx.default_device()}, BLAS: {blas_in_use()}. z = (measured - closed form of "
        "the rule that ran) / s.e., where s.e. = sqrt(a(1-a)/n) from that closed form a: an "
        "upper bound on the spread, so |z| < 4 is what a correct rule reads.\n"
    )
    print(render_markdown(rows))
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as handle:
            json.dump([asdict(r) for r in rows], handle, indent=2)
            handle.write("\n")
    return 0
