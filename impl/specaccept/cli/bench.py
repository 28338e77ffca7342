"""`specaccept bench`: performance as ratios measured side by side in one process.

Every figure is a ratio of two timings taken in the same process, with the
arms interleaved repetition by repetition and each summarised by its median,
so that a noisy, shared machine slows both sides of a ratio alike.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from specaccept.cli.options import (
    DEFAULT_PROMPT,
    add_model_arguments,
    add_run_arguments,
    add_sampler_arguments,
    blas_in_use,
    encode_prompt,
    mlx_version,
    output_path,
    positive_int,
    print_invocation,
    progress_bar,
    sampler_config,
)
from specaccept.core.theory import expected_tokens_per_round
from specaccept.shell.generator import RuleChoice, SpeculativeGenerator, target_only_generate

__all__ = ["BenchResult", "add_parser", "render_markdown", "run_benchmark"]

SPECULATIVE_RULES: tuple[RuleChoice, ...] = ("stochastic", "sampler-match")


def add_parser(commands: Any) -> None:
    """Register `bench` on the subparsers action `commands`."""
    bench: argparse.ArgumentParser = commands.add_parser(
        "bench", help="side-by-side performance ratios"
    )
    add_model_arguments(bench)
    add_run_arguments(bench, tokens=200, measures=True)
    add_sampler_arguments(bench)
    bench.add_argument("--repeats", type=positive_int, default=5)
    bench.add_argument("-p", "--prompt", default=DEFAULT_PROMPT)
    bench.add_argument(
        "--json", dest="json_path", type=output_path, help="also write the results to this file"
    )
    bench.set_defaults(handler=run_benchmark)


@dataclass
class BenchResult:
    """Medians and ratios of one benchmark run."""

    settings: dict[str, Any]
    tokens_per_second: dict[str, float]
    seconds_per_round: dict[str, float]
    host_syncs_per_round: dict[str, float]
    per_position_acceptance: dict[str, float]
    tokens_per_round: dict[str, float]
    forward_cost: dict[str, float]
    verify_cost_over_forward: dict[str, float]
    round_cost_stochastic_over_sampler_match: float
    speedup_measured: dict[str, float]
    speedup_predicted: dict[str, float]
    speedup_measured_over_predicted: dict[str, float]
    speculative_over_mlx_lm: dict[str, float]


def run_benchmark(args: argparse.Namespace) -> int:
    """Run every arm, print Markdown to stdout, and write JSON when asked."""
    from specaccept.shell.loading import load_pair
    from specaccept.shell.measure import forward_costs, mlx_lm_arms

    config = sampler_config(args)
    if config.uses_history:
        raise ValueError("bench compares against mlx-lm's sampler: leave the penalties off")
    pair = load_pair(args.model, args.draft_model)
    prompt = encode_prompt(pair.tokenizer, args.prompt, chat_template=False)
    k, n, seed = args.num_draft_tokens, args.max_tokens, args.seed
    generators = {
        rule: SpeculativeGenerator(
            pair.target, pair.drafter, config, num_draft_tokens=k, rule=rule
        )
        for rule in SPECULATIVE_RULES
    }
    stats: dict[str, list[Any]] = {rule: [] for rule in SPECULATIVE_RULES}

    # Repeat r runs every arm with seed + r: each arm sees the same set of trajectories,
    # and no ratio rests on one lucky or unlucky trajectory.
    def speculative(rule: RuleChoice) -> Callable[[int], int]:
        def run(seed: int) -> int:
            run = generators[rule].generate(prompt, n, seed=seed)
            count = sum(len(b) for b in run)
            stats[rule].append(run.stats)
            return count
        return run

    def target_only(seed: int) -> int:
        return sum(1 for _ in target_only_generate(pair.target, prompt, config, n, seed=seed))

    arms: dict[str, Callable[[int], int]] = {
        "target-only": target_only,
        "speculative-stochastic": speculative("stochastic"),
        "speculative-sampler-match": speculative("sampler-match"),
        **mlx_lm_arms(pair, prompt, config, k, n),
    }
    progress = progress_bar(
        len(arms) * (args.repeats + 1) + 1, "bench", quiet=args.json_path is not None
    )
    rates: dict[str, list[float]] = {name: [] for name in arms}
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for repeat in range(args.repeats + 1):  # repeat 0 warms up and is discarded
        order = names[repeat % len(names):] + names[: repeat % len(names)]
        for name in order:
            start = time.perf_counter()
            count = arms[name](seed + repeat)
            elapsed = time.perf_counter() - start
            if repeat:
                rates[name].append(count / elapsed)
                seconds[name].append(elapsed)
            progress.set_postfix_str(name)
            progress.update()
    for rule in SPECULATIVE_RULES:
        del stats[rule][0]  # the warm-up run
    piece_seconds, verify_ratio = forward_costs(
        pair, prompt, k, config, 5 * args.repeats, SPECULATIVE_RULES
    )
    progress.update()
    progress.close()

    tokens_per_second = {name: statistics.median(values) for name, values in rates.items()}
    target_rate = tokens_per_second["target-only"]
    c = piece_seconds["drafter_1"] / piece_seconds["target_1"]
    r = piece_seconds[f"target_{k + 1}"] / piece_seconds["target_1"]
    per_round: dict[str, float] = {}
    syncs: dict[str, float] = {}
    alpha: dict[str, float] = {}
    tokens_round: dict[str, float] = {}
    measured: dict[str, float] = {}
    predicted: dict[str, float] = {}
    for rule in SPECULATIVE_RULES:
        runs = stats[rule]
        arm = f"speculative-{rule}"
        per_round[rule] = statistics.median(
            s / run.rounds for s, run in zip(seconds[arm], runs, strict=True)
        )
        syncs[rule] = statistics.mean(run.host_syncs / run.rounds for run in runs)
        alpha[rule] = statistics.mean(run.per_position_acceptance for run in runs)
        tokens_round[rule] = statistics.mean(run.generated / run.rounds for run in runs)
        measured[rule] = tokens_per_second[arm] / target_rate
        predicted[rule] = expected_tokens_per_round([alpha[rule]] * k) / (k * c + r)
    result = BenchResult(
        settings={
            "target": str(pair.target_path), "drafter": str(pair.drafter_path),
            "num_draft_tokens": k, "max_tokens": n, "seed": seed, "repeats": args.repeats,
            "temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k,
            "min_p": config.min_p, "device": str(mx.default_device()),
            "mlx": mlx_version(), "machine": platform.machine(), "blas": blas_in_use(),
        },
        tokens_per_second=tokens_per_second,
        seconds_per_round=per_round,
        host_syncs_per_round=syncs,
        per_position_acceptance=alpha,
        tokens_per_round=tokens_round,
        forward_cost={"drafter_token_over_target_token_c": c,
                      f"target_{k + 1}_tokens_over_1_token": r},
        verify_cost_over_forward=verify_ratio,
        round_cost_stochastic_over_sampler_match=per_round["stochastic"]
        / per_round["sampler-match"],
        speedup_measured=measured,
        speedup_predicted=predicted,
        speedup_measured_over_predicted={
            rule: measured[rule] / predicted[rule] for rule in SPECULATIVE_RULES
        },
        speculative_over_mlx_lm={
            rule: tokens_per_second[f"speculative-{rule}"]
            / tokens_per_second["mlx-lm-speculative"]
            for rule in SPECULATIVE_RULES
        },
    )
    print_invocation(args)
    print(render_markdown(result))
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as handle:
            json.dump({"command": getattr(args, "invocation", None), **result.__dict__},
                      handle, indent=2)
            handle.write("\n")
    return 0


def render_markdown(result: BenchResult) -> str:
    """The benchmark as Markdown: settings, then one table per question."""
    s = result.settings
    k = s["num_draft_tokens"]
    lines = [
        f"Benchmark: {s['max_tokens']} tokens, k={k}, temperature={s['temperature']}, "
        f"seeds {s['seed']}..{s['seed'] + s['repeats']}, {s['repeats']} interleaved repeats "
        "(medians; the first, warm-up, discarded); "
        f"device {s['device']}, mlx {s['mlx']}, BLAS: {s['blas']}",
        "",
        "| arm | tokens/s | ratio to target-only |",
        "|---|---:|---:|",
    ]
    base = result.tokens_per_second["target-only"]
    for arm, rate in result.tokens_per_second.items():
        lines.append(f"| {arm} | {rate:.1f} | {rate / base:.3f} |")
    lines += [
        "",
        "| rule | s/round | host syncs/round | per-position acceptance | tokens/round "
        "| verify / target forward | measured speedup | predicted | measured/predicted "
        "| vs mlx-lm speculative |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rule in SPECULATIVE_RULES:
        lines.append(
            f"| {rule} | {result.seconds_per_round[rule] * 1e3:.2f} ms "
            f"| {result.host_syncs_per_round[rule]:.2f} "
            f"| {result.per_position_acceptance[rule]:.4f} "
            f"| {result.tokens_per_round[rule]:.3f} "
            f"| {result.verify_cost_over_forward[rule]:.3f} "
            f"| {result.speedup_measured[rule]:.3f} | {result.speedup_predicted[rule]:.3f} "
            f"| {result.speedup_measured_over_predicted[rule]:.3f} "
            f"| {result.speculative_over_mlx_lm[rule]:.3f} |"
        )
    c = result.forward_cost["drafter_token_over_target_token_c"]
    r = result.forward_cost[f"target_{k + 1}_tokens_over_1_token"]
    lines += [
        "",
        f"Round cost, stochastic / sampler-match: "
        f"{result.round_cost_stochastic_over_sampler_match:.3f}. "
        f"Drafter token / target token (c): {c:.3f}; target {k + 1}-token forward / "
        # A code span: bare, `[alpha]*k ... (k*c` reads as a link and emphasis in Markdown.
        f"1-token forward: {r:.3f}. Predicted speedup = "
        f"`expected_tokens_per_round([alpha]*k) / (k*c + {k + 1}-token cost ratio)`.",
    ]
    return "\n".join(lines)
