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
    add_tree_arguments,
    blas_in_use,
    encode_prompt,
    output_path,
    positive_int,
    print_invocation,
    progress_bar,
    sampler_config,
    tree_options,
)
from specaccept.core.acceptance import AcceptanceRule
from specaccept.shell.generator import RuleChoice

__all__ = [
    "DEFAULT_PROMPTS",
    "TableRow",
    "TreeTableRow",
    "add_parser",
    "measure_rows",
    "measure_tree_rows",
    "measurement_table",
    "render_markdown",
    "render_tree_markdown",
]

DEFAULT_PROMPTS = ("ROMEO:\n", "First Citizen:\n", "KING RICHARD III:\n", "JULIET:\nO, ")
RULES: tuple[RuleChoice, ...] = ("stochastic", "sampler-match", "block")


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
    """Σ min or Σ p·q per position; for block, E[accepted | drafts] per round."""
    standard_error: float
    z_score: float
    mean_accepted_len: float
    positions_tested: int
    rounds: int
    generated: int
    closed_form_accepted_len: float = 0.0
    """E[accepted | drafts] per round under the rule that ran, averaged over the rounds."""
    accepted_len_standard_error: float = 0.0
    """sqrt(Σ Var[accepted | drafts]) / rounds, the s.e. of mean_accepted_len."""
    accepted_len_z: float = 0.0
    """(mean_accepted_len - closed_form_accepted_len) / accepted_len_standard_error."""
    closed_form_block: float = 0.0
    """E[accepted | drafts] per round that block verification has on the same drafts."""
    per_position: bool = True
    """Whether the rule decides per position, so the per-position columns test it."""


@dataclass(frozen=True)
class TreeTableRow:
    """One temperature of `--tree`, pooled over the prompts: per tested node, the scheme's
    closed form against the measured acceptance."""

    temperature: float
    tree: str
    """WIDTHxDEPTH."""
    scheme: str
    """The tree scheme's id (`TreeScheme`)."""
    per_node_acceptance: float
    closed_form_per_node: float
    """The scheme's closed form of each tested node's laws (`TreeStats.closed_form_total`),
    averaged over the tested nodes."""
    standard_error: float
    """sqrt(Σ a(1 - a)) / nodes_tested, exact given each node's laws."""
    z_score: float
    mean_accepted_len: float
    tokens_per_round: float
    nodes_tested: int
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
        "--temperatures", type=float, nargs="+", default=[0.0, 0.7, 1.0, 1.5],
        help="the temperatures to measure, each with every rule; at 0 every rule is "
        "greedy-argmax, run once",
    )
    table.add_argument("--prompts", nargs="+", default=None,
                       help="the prompts, each run on its own (default: built-in prompts)")
    table.add_argument(
        "--rules", nargs="+", choices=RULES, default=list(RULES),
        help="the rules to measure, on the same prompts and seeds",
    )
    table.add_argument(
        "--repeats", type=positive_int, default=1,
        help="runs per prompt, seeds --seed + run (the demo pair's context caps one run)",
    )
    table.add_argument(
        "--json", dest="json_path", type=output_path, help="also write the rows to this file"
    )
    add_tree_arguments(table)
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
        len(args.temperatures) * len(args.rules) * len(prompts) * args.repeats, "table",
        quiet=args.json_path is not None,
    )
    rows = []
    for temperature in args.temperatures:
        config = sampler_config(args, temperature=temperature)
        # At temperature 0 every requested rule runs greedy-argmax: the same runs, bit for
        # bit, so they run once and each requested rule's row reads them.
        measured: dict[AcceptanceRule, SpeculativeStats] = {}
        for requested in args.rules:
            generator = SpeculativeGenerator(
                pair.target, pair.require_drafter(), config, num_draft_tokens=args.num_draft_tokens,
                rule=requested, diagnostics=True,
            )
            runs = [prompt for _ in range(args.repeats) for prompt in encoded]
            if generator.acceptance_rule in measured:
                pooled = measured[generator.acceptance_rule]
                progress.update(len(runs))
                runs = []
            else:
                pooled = SpeculativeStats(generator.acceptance_rule, diagnostics=True)
                measured[generator.acceptance_rule] = pooled
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
                pooled.accepted_len_total += run.accepted_len_total
                pooled.accepted_len_variance_total += run.accepted_len_variance_total
                pooled.block_len_total += run.block_len_total
                progress.set_postfix_str(f"T={temperature} {requested}")
                progress.update()
            expected = (pooled.closed_form_sum_min if pooled.rule is AcceptanceRule.STOCHASTIC
                        else pooled.closed_form_sum_prod)
            alpha, n = pooled.per_position_acceptance, pooled.positions_tested
            round_error = (math.sqrt(pooled.accepted_len_variance_total) / pooled.rounds
                           if pooled.rounds else 0.0)
            rows.append(TableRow(
                temperature=temperature,
                requested_rule=requested,
                rule=pooled.rule.value,
                closed_form_sum_min=pooled.closed_form_sum_min,
                closed_form_sum_prod=pooled.closed_form_sum_prod,
                ratio=(pooled.closed_form_sum_min / pooled.closed_form_sum_prod
                       if pooled.closed_form_sum_prod > 0 else math.inf),
                per_position_acceptance=alpha,
                # Block verification decides per round: its closed form is E[kept | drafts].
                closed_form_of_rule=(pooled.closed_form_accepted_len
                                     if pooled.rule.verifies_jointly else expected),
                standard_error=(round_error if pooled.rule.verifies_jointly
                                else (se := _standard_error(expected, n))),
                z_score=(pooled.accepted_len_z if pooled.rule.verifies_jointly
                         else _z_score(alpha - expected, se)),
                mean_accepted_len=pooled.mean_accepted_len,
                positions_tested=n,
                rounds=pooled.rounds,
                generated=pooled.generated,
                closed_form_accepted_len=pooled.closed_form_accepted_len,
                accepted_len_standard_error=round_error,
                accepted_len_z=pooled.accepted_len_z,
                closed_form_block=pooled.closed_form_block,
                per_position=not pooled.rule.verifies_jointly,
            ))
    progress.close()
    return rows


def measure_tree_rows(
    args: argparse.Namespace, width: int, depth: int, scheme_id: str
) -> list[TreeTableRow]:
    """Run every (temperature, prompt) as a tree under the scheme and pool per temperature."""
    from specaccept.core.tree import TreeScheme
    from specaccept.shell.loading import load_pair
    from specaccept.shell.tree_generator import TreeSpeculativeGenerator, TreeStats

    scheme = TreeScheme(scheme_id)
    pair = load_pair(args.model, args.draft_model)
    encoded = [encode_prompt(pair.tokenizer, p, chat_template=False) for p in _prompts(args)]
    runs = [prompt for _ in range(args.repeats) for prompt in encoded]
    progress = progress_bar(len(args.temperatures) * len(runs), "table --tree",
                            quiet=args.json_path is not None)
    rows = []
    for temperature in args.temperatures:
        generator = TreeSpeculativeGenerator(
            pair.target, pair.require_drafter(), sampler_config(args, temperature=temperature),
            width=width, depth=depth, scheme=scheme, diagnostics=True)
        pooled = TreeStats(scheme, width, depth, diagnostics=True)
        for run_number, prompt in enumerate(runs):
            generation = generator.generate(prompt, args.max_tokens, seed=args.seed + run_number)
            for _ in generation:
                pass
            run = generation.stats
            pooled.rounds += run.rounds
            pooled.nodes_tested += run.nodes_tested
            pooled.accepted += run.accepted
            pooled.generated += run.generated
            pooled.closed_form_total += run.closed_form_total
            pooled.closed_form_variance_total += run.closed_form_variance_total
            progress.set_postfix_str(f"T={temperature} tree {width}x{depth}")
            progress.update()
        nodes = pooled.nodes_tested
        rows.append(TreeTableRow(
            temperature=temperature,
            tree=f"{width}x{depth}",
            scheme=scheme.value,
            per_node_acceptance=pooled.per_node_acceptance,
            closed_form_per_node=pooled.closed_form_per_node,
            standard_error=math.sqrt(pooled.closed_form_variance_total) / nodes if nodes else 0.0,
            z_score=pooled.acceptance_z,
            mean_accepted_len=pooled.mean_accepted_len,
            tokens_per_round=pooled.tokens_per_round,
            nodes_tested=nodes,
            rounds=pooled.rounds,
            generated=pooled.generated,
        ))
    progress.close()
    return rows


def render_tree_markdown(rows: list[TreeTableRow]) -> str:
    """The `--tree` rows as a Markdown table, one row per temperature."""
    lines = [
        "Tree speculation, per tested node (the root, then each accepted node above the "
        "tree's depth): measured acceptance against the scheme's closed form of the node's "
        "laws (iid: 1 - Π_j (1 - Σ min(r_j, q)); without-replacement: the sum over draw "
        "orders; deterministic: Σ p over the candidates):",
        "",
        "| temperature | tree | scheme | per_node_acceptance | closed form | ± s.e. | z "
        "| mean_accepted_len | tokens_per_round | nodes_tested | rounds |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.temperature:g} | {r.tree} | {r.scheme} | {r.per_node_acceptance:.4f} "
            f"| {r.closed_form_per_node:.4f} | {r.standard_error:.4f} | {r.z_score:+.2f} "
            f"| {r.mean_accepted_len:.4f} | {r.tokens_per_round:.4f} | {r.nodes_tested} "
            f"| {r.rounds} |"
        )
    return "\n".join(lines)


def render_markdown(rows: list[TableRow]) -> str:
    """The rows as two Markdown tables: per position, then per round; a rule that ran for
    several requested rules (greedy-argmax at temperature 0) is shown once."""
    firsts = {(r.temperature, r.rule): r for r in reversed(rows)}
    shared = sorted({r.temperature for r in rows if firsts[(r.temperature, r.rule)] is not r})
    rows = [r for r in rows if firsts[(r.temperature, r.rule)] is r]
    lines = [
        *([f"At temperature {', '.join(f'{t:g}' for t in shared)} every requested rule ran "
           "as the same rule (greedy-argmax at 0): one set of runs, shown once.", ""]
          if shared else []),
        "Per position (the rules that decide each position alone):",
        "",
        "| temperature | rule | closed_form_sum_min | closed_form_sum_prod | ratio "
        "| per_position_acceptance | ± s.e. | z | mean_accepted_len | positions_tested |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in (row for row in rows if row.per_position):
        lines.append(
            f"| {r.temperature:g} | {r.rule} | {r.closed_form_sum_min:.4f} "
            f"| {r.closed_form_sum_prod:.4f} | {r.ratio:.2f}x | {r.per_position_acceptance:.4f} "
            f"| {r.standard_error:.4f} | {r.z_score:+.2f} | {r.mean_accepted_len:.4f} "
            f"| {r.positions_tested} |"
        )
    lines += [
        "",
        "Per round: drafts kept against the closed form E[accepted | drafts] of the rule that "
        "ran, and what block verification keeps on the same drafts (same prompts and seeds "
        "for every rule):",
        "",
        "| temperature | rule | mean_accepted_len | closed form | ± s.e. | z "
        "| block closed form on these drafts | vs stochastic | rounds |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    stochastic = {r.temperature: r.mean_accepted_len for r in rows
                  if r.requested_rule == "stochastic"}
    for r in rows:
        base = stochastic.get(r.temperature)
        versus = f"{r.mean_accepted_len / base:.3f}x" if base else ""
        lines.append(
            f"| {r.temperature:g} | {r.rule} | {r.mean_accepted_len:.4f} "
            f"| {r.closed_form_accepted_len:.4f} | {r.accepted_len_standard_error:.4f} "
            f"| {r.accepted_len_z:+.2f} | {r.closed_form_block:.4f} | {versus} | {r.rounds} |"
        )
    return "\n".join(lines)


def measurement_table(args: argparse.Namespace) -> int:
    """Print the table to stdout, and write JSON when asked."""
    import mlx.core as mx

    tree = tree_options(args)
    rows = measure_rows(args)
    tree_rows = measure_tree_rows(args, *tree) if tree is not None else []
    prompts = _prompts(args)
    print_invocation(args)
    last_seed = args.seed + len(prompts) * args.repeats - 1
    print(
        f"{len(prompts)} prompts x {args.repeats} runs, {args.max_tokens} tokens each, "
        f"k={args.num_draft_tokens}, seeds {args.seed}..{last_seed}; "
        f"device {mx.default_device()}, BLAS: {blas_in_use()}. z = (measured - closed form of "
        "the rule that ran) / s.e., where s.e. = sqrt(a(1-a)/n) from that closed form a: an "
        "upper bound on the spread, so |z| < 4 is what a correct rule reads. Per round, "
        "z = (accepted - Σ E[accepted | drafts]) / sqrt(Σ Var[accepted | drafts]), exact "
        "given each round's drafts.\n"
    )
    print(render_markdown(rows))
    if tree_rows:
        print("\n" + render_tree_markdown(tree_rows))
    if args.json_path:
        records: list[dict[str, Any]] = [asdict(r) for r in rows]
        records += [{"kind": "tree", **asdict(r)} for r in tree_rows]
        with open(args.json_path, "w", encoding="utf-8") as handle:
            json.dump(records, handle, indent=2)
            handle.write("\n")
    return 0
