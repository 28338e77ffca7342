"""`specaccept bench`: performance as ratios measured side by side in one process.

Every figure is a ratio of two timings taken in the same process, with the
arms interleaved repetition by repetition and each summarised by its median,
so that a noisy, shared machine slows both sides of a ratio alike.

Each repeat also times the round's pieces alone (`ForwardCosts`) and a fixed
Python loop: a repeat's predicted speedup comes from the pieces timed beside its
arms, and the loop's spread over repeats shows how far the host's speed drifted.

`--random-pair` benchmarks a random-weight pair with real shapes, built in memory
(`specaccept.shell.random_pairs`): its round costs are a real pair's, its
acceptance is not. After the arms, the bench breaks a round down (each phase
evaluated alone, `specaccept.shell.profiling`) and counts the sampler's and the
verifier's kernels at the pair's vocabulary, on the fused path and the core path.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlx.core as mx

import specaccept
from specaccept.cli.options import (
    DEFAULT_PROMPT,
    add_model_arguments,
    add_run_arguments,
    add_sampler_arguments,
    add_tree_arguments,
    attention_in_use,
    blas_in_use,
    encode_prompt,
    mlx_version,
    output_path,
    positive_int,
    print_invocation,
    progress_bar,
    sampler_config,
    tree_options,
)
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.theory import expected_tokens_per_round
from specaccept.shell.fused import compile_status
from specaccept.shell.generator import (
    RuleChoice,
    SpeculativeGenerator,
    SpeculativeStats,
)
from specaccept.shell.profiling import HOST_PARTS, PHASES, RoundClock
from specaccept.shell.random_pairs import RANDOM_PAIRS
from specaccept.shell.target_only import target_only_generate

__all__ = [
    "BenchResult", "BenchSamples", "add_parser", "collect", "render_markdown",
    "render_tree_markdown", "run_benchmark", "summarise", "tree_comparison",
]

SPECULATIVE_RULES: tuple[RuleChoice, ...] = ("stochastic", "sampler-match", "block")
"""The rules benchmarked, each an arm `speculative-<rule>`; every table iterates this."""


def add_parser(commands: Any) -> None:
    """Register `bench` on the subparsers action `commands`."""
    bench: argparse.ArgumentParser = commands.add_parser(
        "bench", help="side-by-side performance ratios"
    )
    add_model_arguments(bench)
    bench.add_argument(
        "--random-pair", choices=sorted(RANDOM_PAIRS),
        help="instead of models on disk, a random-weight pair of real shapes built in memory "
        "(its acceptance is not a trained pair's): "
        + "; ".join(f"{name}: {preset.description}" for name, preset in RANDOM_PAIRS.items()),
    )
    bench.add_argument(
        "--core-arms", action="store_true",
        help="add arms that run each rule through the core functions as written, "
        "beside the default fused path",
    )
    add_run_arguments(bench, tokens=200, measures=True)
    add_sampler_arguments(bench)
    bench.add_argument("--repeats", type=positive_int, default=5,
                       help="timed repeats of every arm, interleaved, after one warm-up repeat "
                       "that is discarded; the results are medians over them")
    bench.add_argument("-p", "--prompt", default=DEFAULT_PROMPT, help="the prompt every run reads")
    bench.add_argument(
        "--json", dest="json_path", type=output_path, help="also write the results to this file"
    )
    add_tree_arguments(bench)
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
    ratio_spread: dict[str, list[float]]
    """Each headline ratio computed repeat by repeat: [median, min, max] over the repeats."""
    tokens_per_second_spread: dict[str, list[float]]
    """[min, max] tokens/s of each arm over the repeats."""
    round_breakdown: dict[str, dict[str, float]]
    pipelined_round: dict[str, dict[str, float]]
    kernel_counts: dict[str, dict[str, int]]
    round_cost_block_over_stochastic: float
    accepted_per_round: dict[str, float]
    """Drafts kept per round, per arm."""
    piece_seconds: dict[str, float]
    """The round's pieces evaluated alone (`ForwardCosts`), medians over repeats."""
    python_loop_seconds: list[float]
    """A fixed pure-Python loop, once per repeat: [median, min, max] (the host's drift)."""
    agreement: dict[str, float]
    """A random pair's agreement along the target's own samples (`random_pairs.agreement`):
    sum_min, sum_prod, target_entropy (nats), positions; empty for models on disk."""


@dataclass
class BenchSamples:
    """What the interleaved repeats measured, warm-up dropped: per arm, one entry a repeat."""

    rates: dict[str, list[float]]
    """Tokens per second of every arm."""
    seconds: dict[str, list[float]]
    """Wall seconds of every arm's run."""
    stats: dict[str, list[SpeculativeStats]]
    """Each speculative run's counters, keyed by generator name."""
    clocks: dict[str, list[RoundClock]]
    """Each speculative run's pipelined round clock, keyed by generator name."""
    pieces: list[dict[str, float]]
    """The round's pieces timed alone (`ForwardCosts.sample`)."""
    python_loop: list[float]
    """The fixed Python loop's seconds."""
    breakdown: dict[str, dict[str, float]]
    """One phased run per rule: seconds per round of each phase."""
    agreement: dict[str, float]
    kernels: dict[str, dict[str, int]]


def run_benchmark(args: argparse.Namespace) -> int:
    """Run every arm, print Markdown to stdout, and write JSON when asked."""
    config = sampler_config(args)
    tree = tree_options(args)
    pair, prompt = _pair_and_prompt(args, config)
    if tree is not None:
        comparison = tree_comparison(args, pair, prompt, config, *tree)
        print_invocation(args)
        print(render_tree_markdown(comparison))
        if args.json_path:
            with open(args.json_path, "w", encoding="utf-8") as handle:
                json.dump({"command": getattr(args, "invocation", None),
                           "tree_comparison": comparison}, handle, indent=2)
                handle.write("\n")
        return 0
    paths = {"": True, "-core": False} if args.core_arms else {"": True}
    generators = {
        f"{rule}{suffix}": SpeculativeGenerator(
            pair.target, pair.drafter, config, num_draft_tokens=args.num_draft_tokens,
            rule=rule, fast_path=fast_path,
        )
        for rule in SPECULATIVE_RULES
        for suffix, fast_path in paths.items()
    }
    samples = collect(args, pair, prompt, config, generators)
    result = summarise(args, pair, config, generators, samples)
    print_invocation(args)
    print(render_markdown(result))
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as handle:
            json.dump({"command": getattr(args, "invocation", None), **result.__dict__},
                      handle, indent=2)
            handle.write("\n")
    return 0


def _pair_and_prompt(args: argparse.Namespace, config: SamplerConfig) -> tuple[Any, list[int]]:
    """The pair the arguments name and the prompt's token ids, after checking both."""
    from specaccept.shell.loading import load_pair
    from specaccept.shell.random_pairs import random_pair

    if config.uses_history:
        raise ValueError("bench compares against mlx-lm's sampler: leave the penalties off")
    if args.random_pair is not None and (args.model or args.draft_model):
        raise ValueError("--random-pair builds its own models: drop --model and --draft-model")
    if args.random_pair is not None:
        pair = random_pair(args.random_pair)
        # No tokenizer: the prompt's UTF-8 bytes are its token ids (every vocabulary has 256).
        prompt = list(args.prompt.encode("utf-8"))
        if not prompt:
            raise ValueError("--prompt must not be empty")
    else:
        pair = load_pair(args.model, args.draft_model)
        prompt = encode_prompt(pair.tokenizer, args.prompt, chat_template=False)
    if args.max_tokens < 2:
        # The last token is a plain target step: with one token no round drafts.
        raise ValueError(
            f"bench times drafting rounds, which need -n/--max-tokens >= 2, got {args.max_tokens}"
        )
    return pair, prompt


def collect(
    args: argparse.Namespace, pair: Any, prompt: list[int], config: SamplerConfig,
    generators: dict[str, SpeculativeGenerator],
) -> BenchSamples:
    """Run the arms interleaved, repeat by repeat, then the breakdown and kernel counts."""
    from specaccept.shell.measure import (
        ForwardCosts,
        mlx_lm_arms,
        python_loop_seconds,
        sampler_kernel_counts,
    )
    from specaccept.shell.random_pairs import agreement

    k, n, seed = args.num_draft_tokens, args.max_tokens, args.seed
    stats: dict[str, list[SpeculativeStats]] = {name: [] for name in generators}
    clocks: dict[str, list[RoundClock]] = {name: [] for name in generators}

    # Repeat r runs every arm with seed + r: each arm sees the same set of trajectories,
    # and no ratio rests on one lucky or unlucky trajectory.
    def speculative(name: str) -> Callable[[int], int]:
        def run(seed: int) -> int:
            clock = RoundClock()
            run = generators[name].generate(prompt, n, seed=seed, clock=clock)
            count = sum(len(b) for b in run)
            stats[name].append(run.stats)
            clocks[name].append(clock)
            return count
        return run

    def target_only(seed: int) -> int:
        return sum(1 for _ in target_only_generate(pair.target, prompt, config, n, seed=seed))

    def target_only_core(seed: int) -> int:
        steps = target_only_generate(pair.target, prompt, config, n, seed=seed, fast_path=False)
        return sum(1 for _ in steps)

    arms: dict[str, Callable[[int], int]] = {
        "target-only": target_only,
        **({"target-only-core": target_only_core} if args.core_arms else {}),
        **{f"speculative-{name}": speculative(name) for name in generators},
        **mlx_lm_arms(pair, prompt, config, k, n),
    }
    # Distinct rules only: at temperature 0 every arm's rule is greedy-argmax.
    rules = list(dict.fromkeys(generators[rule].acceptance_rule for rule in SPECULATIVE_RULES))
    probe = ForwardCosts(pair, prompt, k, config, rules)
    progress = progress_bar(
        (len(arms) + 1) * (args.repeats + 1) + 1, "bench", quiet=args.json_path is not None
    )
    rates: dict[str, list[float]] = {name: [] for name in arms}
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    # The round's pieces, and the host's speed, sampled in every repeat: a prediction
    # then rests on pieces timed beside the arm it predicts.
    pieces: list[dict[str, float]] = []
    python_loop: list[float] = []
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
        sampled, loop = probe.sample(5), python_loop_seconds()
        if repeat:
            pieces.append(sampled)
            python_loop.append(loop)
        progress.update()
    for name in generators:
        del stats[name][0], clocks[name][0]  # the warm-up run
    # The breakdown: one more run per rule with every phase evaluated alone (slower, and
    # not a throughput figure), on the path the arms above ran by default.
    breakdown: dict[str, dict[str, float]] = {}
    for rule in SPECULATIVE_RULES:
        phased = RoundClock(phased=True)
        for _ in generators[rule].generate(prompt, n, seed=seed, clock=phased):
            pass
        breakdown[rule] = phased.per_round()
    # What the acceptance figures rest on, for a pair whose agreement is built, not learned.
    pair_agreement = (
        agreement(pair, prompt, config, n, seed=seed).__dict__ if args.random_pair else {}
    )
    kernels = sampler_kernel_counts(generators[SPECULATIVE_RULES[0]].vocab_size, config, k, rules)
    progress.update()
    progress.close()
    return BenchSamples(
        rates=rates, seconds=seconds, stats=stats, clocks=clocks, pieces=pieces,
        python_loop=python_loop, breakdown=breakdown, agreement=pair_agreement,
        kernels=kernels,
    )


def tree_comparison(
    args: argparse.Namespace, pair: Any, prompt: list[int], config: SamplerConfig,
    width: int, depth: int, scheme: str,
) -> dict[str, Any]:
    """A tree against chains drafting as many tokens per round, interleaved repeat by repeat.

    Arms: target-only, the tree, and the stochastic and block chains at k = N (the tree's
    drafted tokens per round) and at k = D (its depth); medians over the repeats of
    tokens/s and tokens/round, and tokens/s over target-only repeat by repeat.
    """
    from specaccept.core.tree import TreeScheme
    from specaccept.shell.tree_generator import TreeSpeculativeGenerator, full_tree_parents

    n, seed = args.max_tokens, args.seed
    drafted = len(full_tree_parents(width, depth))
    tree_name = f"tree-{width}x{depth}-{scheme}"
    tree_generator = TreeSpeculativeGenerator(
        pair.target, pair.drafter, config, width=width, depth=depth, scheme=TreeScheme(scheme))
    chains = {
        f"chain-{rule}-k{k}": SpeculativeGenerator(
            pair.target, pair.drafter, config, num_draft_tokens=k, rule=rule)
        for k in dict.fromkeys((drafted, depth)) for rule in ("stochastic", "block")
    }
    per_round: dict[str, list[float]] = {name: [] for name in (tree_name, *chains)}

    def tree_arm(seed: int) -> int:
        run = tree_generator.generate(prompt, n, seed=seed)
        count = sum(len(b) for b in run)
        per_round[tree_name].append(run.stats.tokens_per_round)
        return count

    def chain_arm(name: str) -> Callable[[int], int]:
        def arm(seed: int) -> int:
            run = chains[name].generate(prompt, n, seed=seed)
            count = sum(len(b) for b in run)
            per_round[name].append(run.stats.generated / run.stats.rounds)
            return count
        return arm

    arms: dict[str, Callable[[int], int]] = {
        "target-only": lambda seed: sum(
            1 for _ in target_only_generate(pair.target, prompt, config, n, seed=seed)),
        tree_name: tree_arm,
        **{name: chain_arm(name) for name in chains},
    }
    rates: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    progress = progress_bar(len(arms) * (args.repeats + 1), "bench --tree",
                            quiet=args.json_path is not None)
    for repeat in range(args.repeats + 1):  # repeat 0 warms up and is discarded
        for name in names[repeat % len(names):] + names[: repeat % len(names)]:
            start = time.perf_counter()
            count = arms[name](seed + repeat)
            elapsed = time.perf_counter() - start
            if repeat:
                rates[name].append(count / elapsed)
            elif name in per_round:
                per_round[name].clear()
            progress.update()
    progress.close()
    return {
        "settings": {"tree": f"{width}x{depth}", "scheme": scheme, "drafted_per_round": drafted,
                     "max_tokens": n, "temperature": config.temperature, "seed": seed,
                     "repeats": args.repeats, "device": str(mx.default_device()),
                     "mlx": mlx_version(), "blas": blas_in_use()},
        "tokens_per_second": {name: statistics.median(v) for name, v in rates.items()},
        "tokens_per_round": {name: statistics.median(v) for name, v in per_round.items()},
        "over_target_only": {
            name: _per_repeat(rates[name], rates["target-only"]) for name in per_round},
    }


def render_tree_markdown(comparison: dict[str, Any]) -> str:
    """The tree comparison as Markdown: its settings line, then one row per arm."""
    s = comparison["settings"]
    lines = [
        f"Tree {s['tree']} ({s['scheme']}, {s['drafted_per_round']} drafted tokens per round) "
        f"against chains of as many drafts and of its depth: {s['max_tokens']} tokens, "
        f"temperature={s['temperature']}, seeds {s['seed']}..{s['seed'] + s['repeats']}, "
        f"{s['repeats']} interleaved repeats (medians; the first, warm-up, discarded); device "
        f"{s['device']}, mlx {s['mlx']}, BLAS: {s['blas']}",
        "",
        "| arm | tokens/s | tokens/round | tokens/s over target-only [median, min, max] |",
        "|---|---:|---:|---|",
    ]
    rates = comparison["tokens_per_second"]
    for name, rate in rates.items():
        per_round = comparison["tokens_per_round"].get(name)
        ratio = comparison["over_target_only"].get(name)
        lines.append(
            f"| {name} | {rate:.2f} | {'' if per_round is None else f'{per_round:.3f}'} | "
            f"{'' if ratio is None else ', '.join(f'{x:.3f}' for x in ratio)} |")
    return "\n".join(lines)


def _per_repeat(numerators: list[float], denominators: list[float]) -> list[float]:
    """The ratios repeat by repeat: [median, min, max]."""
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True)]
    return [statistics.median(ratios), min(ratios), max(ratios)]


def summarise(
    args: argparse.Namespace, pair: Any, config: SamplerConfig,
    generators: dict[str, SpeculativeGenerator], samples: BenchSamples,
) -> BenchResult:
    """Medians, ratios repeat by repeat, and lemma 8's predictions from the samples."""
    k = args.num_draft_tokens
    rates, pieces, stats, clocks = samples.rates, samples.pieces, samples.stats, samples.clocks
    piece_seconds = {name: statistics.median(p[name] for p in pieces) for name in pieces[0]}
    # Keyed by the rule each arm runs: at temperature 0 every arm runs greedy-argmax.
    verify_ratio: dict[str, float] = {
        rule: statistics.median(
            p[f"verify_{generators[rule].acceptance_rule.value}"] / p[f"target_{k + 1}"]
            for p in pieces
        )
        for rule in SPECULATIVE_RULES
    }
    pipelined = {
        name: {
            part: statistics.median(clock.per_round()[part] for clock in clocks[name])
            for part in ("round", "host sync wait", "host", *HOST_PARTS)
        }
        for name in generators
    }
    tokens_per_second = {name: statistics.median(values) for name, values in rates.items()}
    round_seconds = {
        name: [t / run.rounds for t, run in zip(samples.seconds[f"speculative-{name}"],
                                                 stats[name], strict=True)]
        for name in generators
    }
    spread = {
        "round cost, stochastic / sampler-match": _per_repeat(
            round_seconds["stochastic"], round_seconds["sampler-match"]),
        # The same, timed by the round clock from each round's start to its end: a run's
        # prompt prefill, paid once, is then not spread over its rounds (a run of n tokens
        # has fewer stochastic rounds than sampler-match ones, so the spread favours the
        # rule that makes more).
        "round cost inside rounds, stochastic / sampler-match": _per_repeat(
            [clock.per_round()["round"] for clock in clocks["stochastic"]],
            [clock.per_round()["round"] for clock in clocks["sampler-match"]]),
        "round cost, block / stochastic": _per_repeat(
            round_seconds["block"], round_seconds["stochastic"]),
        "target-only / mlx-lm target-only": _per_repeat(
            rates["target-only"], rates["mlx-lm-target-only"]),
        **{f"speculative-{name} / mlx-lm-speculative": _per_repeat(
            rates[f"speculative-{name}"], rates["mlx-lm-speculative"]) for name in generators},
    }
    # Lemma 8's cost model, per repeat: c and the (k+1)-token cost ratio from that
    # repeat's pieces, acceptance from that repeat's run of the rule.
    c_values = [p["drafter_1"] / p["target_1"] for p in pieces]
    r_values = [p[f"target_{k + 1}"] / p["target_1"] for p in pieces]
    c, r = statistics.median(c_values), statistics.median(r_values)
    per_round: dict[str, float] = {}
    syncs: dict[str, float] = {}
    alpha: dict[str, float] = {}
    tokens_round: dict[str, float] = {}
    accepted_round: dict[str, float] = {}
    measured: dict[str, list[float]] = {}
    predicted: dict[str, list[float]] = {}
    for name in generators:
        runs = stats[name]
        arm = f"speculative-{name}"
        per_round[name] = statistics.median(round_seconds[name])
        syncs[name] = statistics.mean(run.host_syncs / run.rounds for run in runs)
        alpha[name] = statistics.mean(run.per_position_acceptance for run in runs)
        tokens_round[name] = statistics.mean(run.generated / run.rounds for run in runs)
        accepted_round[name] = statistics.mean(run.mean_accepted_len for run in runs)
        measured[name] = [a / b for a, b in zip(rates[arm], rates["target-only"], strict=True)]
        # Block verification has no per-position acceptance to feed lemma 8: its
        # prediction reads the measured tokens per round (so it checks the cost model only).
        predicted[name] = [
            (run.generated / run.rounds if name.startswith("block")
             else expected_tokens_per_round([run.per_position_acceptance] * k))
            / (k * c_i + r_i)
            for run, c_i, r_i in zip(runs, c_values, r_values, strict=True)
        ]
        spread[f"measured / predicted speedup, {name}"] = _per_repeat(
            measured[name], predicted[name])
    # measured / predicted, repeat by repeat, is exactly the product of three factors:
    # the trajectory's tokens per round over lemma 8's expectation, the target-only arm's
    # seconds per token over a 1-token forward timed alone (below 1 where generation
    # overlaps host and device), and the round's forwards timed alone over the round.
    spread["target-only token / 1-token forward alone"] = _per_repeat(
        [1.0 / rate for rate in rates["target-only"]], [p["target_1"] for p in pieces])
    for name in generators:
        spread[f"forwards alone / round, {name}"] = _per_repeat(
            [k * p["drafter_1"] + p[f"target_{k + 1}"] for p in pieces], round_seconds[name])
    python_loop = samples.python_loop
    return BenchResult(
        settings=_settings(args, pair, config, generators),
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
        speedup_measured={name: statistics.median(v) for name, v in measured.items()},
        speedup_predicted={name: statistics.median(v) for name, v in predicted.items()},
        speedup_measured_over_predicted={
            name: spread[f"measured / predicted speedup, {name}"][0] for name in generators
        },
        speculative_over_mlx_lm={
            name: tokens_per_second[f"speculative-{name}"]
            / tokens_per_second["mlx-lm-speculative"]
            for name in generators
        },
        ratio_spread=spread,
        tokens_per_second_spread={
            name: [min(values), max(values)] for name, values in rates.items()
        },
        round_breakdown=samples.breakdown,
        pipelined_round=pipelined,
        kernel_counts=samples.kernels,
        round_cost_block_over_stochastic=per_round["block"] / per_round["stochastic"],
        accepted_per_round=accepted_round,
        piece_seconds=piece_seconds,
        python_loop_seconds=[statistics.median(python_loop), min(python_loop),
                             max(python_loop)],
        agreement=samples.agreement,
    )


def _settings(
    args: argparse.Namespace, pair: Any, config: SamplerConfig,
    generators: dict[str, SpeculativeGenerator],
) -> dict[str, Any]:
    """What the run was: models, path, sampler and machine."""
    default = generators[SPECULATIVE_RULES[0]]
    return {
        "target": _model_label(pair.target_path),
        "drafter": _model_label(pair.drafter_path),
        "random_pair": args.random_pair,
        "random_pair_shapes": (
            RANDOM_PAIRS[args.random_pair].description if args.random_pair else None
        ),
        "vocab_size": default.vocab_size,
        "compile": compile_status(),
        "round_compile": _round_compile(default),
        "num_draft_tokens": args.num_draft_tokens, "max_tokens": args.max_tokens,
        "seed": args.seed, "repeats": args.repeats,
        "temperature": config.temperature, "top_p": config.top_p, "top_k": config.top_k,
        "min_p": config.min_p, "device": str(mx.default_device()),
        "mlx": mlx_version(), "machine": platform.machine(), "blas": blas_in_use(),
        "attention": attention_in_use(),
    }


def _round_compile(generator: SpeculativeGenerator) -> str:
    """How the generator's fused round runs: its sampler's `compiled` flag, read."""
    sampler = generator.fast_path_sampler
    if sampler is None:
        return "on the core path"
    return compile_status() if sampler.compiled else "uncompiled"


def _model_label(path: Path | None) -> str:
    """A model's path as a result records it: the embedded pair's relative to the package,
    so that a result names no directory of the machine it ran on."""
    if path is None:
        return "none"
    package = Path(specaccept.__file__).resolve().parent
    try:
        return f"specaccept/{path.resolve().relative_to(package).as_posix()}"
    except ValueError:
        return str(path)


def render_markdown(result: BenchResult) -> str:
    """The benchmark as Markdown: settings, then one table per question."""
    s = result.settings
    k = s["num_draft_tokens"]
    lines = [
        f"Benchmark: {s['max_tokens']} tokens, k={k}, temperature={s['temperature']}, "
        f"seeds {s['seed']}..{s['seed'] + s['repeats']}, {s['repeats']} interleaved repeats "
        "(medians; the first, warm-up, discarded); "
        f"device {s['device']}, mlx {s['mlx']}, BLAS: {s['blas']}, "
        f"attention: {s['attention']}; "
        f"vocabulary {s['vocab_size']:,}; fused path: target-only step {s['compile']}, "
        f"round {s['round_compile']}",
        "",
    ]
    if s.get("random_pair"):
        lines += [
            f"Models: the random-weight pair `{s['random_pair']}` ({s['random_pair_shapes']}), "
            "built in memory. Its costs are those of a real pair of these shapes; its "
            "acceptance is not a trained pair's"
            + (
                ": its agreement is built in (a self-speculative drafter of the target's "
                "first layers), so acceptance, tokens/round and speedups are those of a "
                "self-speculative pair of the agreement below."
                if result.agreement and "self" in s["random_pair"] else
                " (two independent random models rarely agree), so acceptance, tokens/round "
                "and speedups describe this random pair only."
            ),
            "",
        ]
    if result.agreement:
        a = result.agreement
        lines += [
            f"Agreement along {a['positions']} of the target's own samples at temperature "
            f"{s['temperature']} (seed {s['seed']}): Σ min(p, q) = {a['sum_min']:.4f} (the "
            f"stochastic rule's acceptance there), Σ p·q = {a['sum_prod']:.4f} "
            f"(sampler-match's), the target's entropy {a['target_entropy']:.3f} nats.",
            "",
        ]
    if s["temperature"] == 0:
        lines += [
            "At temperature 0 every speculative arm runs greedy-argmax, as mlx-lm's "
            "speculative arm runs its greedy decoding: the arms emit the same tokens (up to "
            "the numerics of a batched forward), so their ratios compare cost alone.",
            "",
        ]
    lines += [
        "| arm | tokens/s | min-max over repeats | ratio to target-only |",
        "|---|---:|---:|---:|",
    ]
    base = result.tokens_per_second["target-only"]
    for arm, rate in result.tokens_per_second.items():
        low, high = result.tokens_per_second_spread[arm]
        lines.append(f"| {arm} | {rate:.1f} | {low:.1f}-{high:.1f} | {rate / base:.3f} |")
    lines += [
        "",
        "Ratios taken repeat by repeat (arms of one repeat run back to back):",
        "",
        "| ratio | median | min | max |",
        "|---|---:|---:|---:|",
    ]
    for label, (median, low, high) in result.ratio_spread.items():
        lines.append(f"| {label} | {median:.3f} | {low:.3f} | {high:.3f} |")
    lines += [
        "",
        "| rule | s/round | host syncs/round | per-position acceptance | accepted/round "
        "| tokens/round | verify / target forward | measured speedup | predicted "
        "| measured/predicted | vs mlx-lm speculative |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rule in result.seconds_per_round:
        verify_ratio = result.verify_cost_over_forward[rule.removesuffix("-core")]
        accepted = result.accepted_per_round[rule]
        lines.append(
            f"| {rule} | {result.seconds_per_round[rule] * 1e3:.2f} ms "
            f"| {result.host_syncs_per_round[rule]:.2f} "
            f"| {result.per_position_acceptance[rule]:.4f} "
            f"| {accepted:.3f} "
            f"| {result.tokens_per_round[rule]:.3f} "
            f"| {verify_ratio:.3f} "
            f"| {result.speedup_measured[rule]:.3f} | {result.speedup_predicted[rule]:.3f} "
            f"| {result.speedup_measured_over_predicted[rule]:.3f} "
            f"| {result.speculative_over_mlx_lm[rule]:.3f} |"
        )
    c = result.forward_cost["drafter_token_over_target_token_c"]
    r = result.forward_cost[f"target_{k + 1}_tokens_over_1_token"]
    lines += [
        "",
        f"Round cost, stochastic / sampler-match: "
        f"{result.round_cost_stochastic_over_sampler_match:.3f}; block / stochastic: "
        f"{result.round_cost_block_over_stochastic:.3f}. "
        f"Drafter token / target token (c): {c:.3f}; target {k + 1}-token forward / "
        # A code span: bare, `[alpha]*k ... (k*c` reads as a link and emphasis in Markdown.
        f"1-token forward: {r:.3f}. Predicted speedup = "
        f"`expected_tokens_per_round([alpha]*k) / (k*c + {k + 1}-token cost ratio)`; "
        "for block, whose acceptance is not per position, the measured tokens/round "
        "replace `expected_tokens_per_round([alpha]*k)`.",
    ]
    piece = result.piece_seconds
    low_loop = result.python_loop_seconds[1] / result.python_loop_seconds[0]
    high_loop = result.python_loop_seconds[2] / result.python_loop_seconds[0]
    lines += [
        "",
        "The pieces, each evaluated and synchronised alone once per repeat, between the "
        "arms (medians over repeats): "
        f"target over 1 token {piece['target_1'] * 1e3:.2f} ms, over {k + 1} tokens "
        f"{piece[f'target_{k + 1}'] * 1e3:.2f} ms; drafter over 1 token "
        f"{piece['drafter_1'] * 1e3:.2f} ms. Measured speedup, predicted speedup and "
        "their ratio are medians of per-repeat values, each repeat's prediction built "
        "from the pieces and the acceptance of that repeat. In each repeat, "
        "measured/predicted = (tokens per round / lemma 8's expectation) x (target-only "
        "token / 1-token forward alone) x (forwards alone / round): the trajectory's "
        "luck (1 for block, whose prediction reads its measured tokens per round), the "
        "target-only arm's gain from overlapping host and device, which prices a target "
        "token below its cost alone, and the round's cost beyond its forwards "
        f"({k} drafter forwards and a {k + 1}-token target forward, each timed alone). "
        "Host drift: a fixed "
        f"pure-Python loop, timed once per repeat, took {low_loop:.2f}-{high_loop:.2f} "
        "times its median.",
    ]
    lines += _breakdown_markdown(result)
    return "\n".join(lines)


def _breakdown_markdown(result: BenchResult) -> list[str]:
    """Where a round's time goes, and how many kernels the sampler and verifier launch."""
    vocab = result.settings["vocab_size"]
    lines = [
        "",
        "Where a round's time goes, ms per round. Phased: one run per rule with every phase "
        "evaluated and synchronised alone (device time per phase, and the Python between "
        "phases). Pipelined: the timed arms above, one synchronisation per round "
        "(host = round - host sync wait: building, dispatching and booking the round).",
        "",
        "| rule | " + " | ".join(PHASES) + " | sum |",
        "|---|" + "---:|" * (len(PHASES) + 1),
    ]
    for rule, phases in result.round_breakdown.items():
        cells = [phases.get(name, 0.0) * 1e3 for name in PHASES]
        lines.append(
            f"| {rule} (phased) | " + " | ".join(f"{cell:.2f}" for cell in cells)
            + f" | {sum(cells):.2f} |"
        )
    lines += [
        "",
        "Pipelined host time, split where each phase ends (building its graphs, and "
        "dispatching the drafts and the target forward, which the round launches early; "
        "the verification is dispatched inside the sync). Medians over repeats, so the "
        "parts need not add up to the host column exactly.",
        "",
        "| arm (pipelined) | round | host sync wait | host | "
        + " | ".join(part.removeprefix("host: ") for part in HOST_PARTS) + " |",
        "|---|" + "---:|" * (3 + len(HOST_PARTS)),
    ]
    for name, parts in result.pipelined_round.items():
        cells = [parts[part] * 1e3 for part in HOST_PARTS]
        lines.append(
            f"| speculative-{name} | {parts['round'] * 1e3:.2f} | "
            f"{parts['host sync wait'] * 1e3:.2f} | {parts['host'] * 1e3:.2f} | "
            + " | ".join(f"{cell:.2f}" for cell in cells) + " |"
        )
    lines += [
        "",
        f"Kernels launched by the sampler and verifier at V = {vocab:,} (views left out, "
        "models' forwards excluded): per draft step, and for the round's verification "
        "(the target rows, the verdict, the NaN/inf guards); the fused path uncompiled, "
        "as the generator's round runs it.",
        "",
        "| rule | core draft step | fused draft step | core verification | fused verification "
        "| core round | fused round |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    k = result.settings["num_draft_tokens"]
    for rule, counts in result.kernel_counts.items():
        core = k * counts["core draft step"] + counts["core verification"]
        fused = k * counts["fused draft step"] + counts["fused verification"]
        lines.append(
            f"| {rule} | {counts['core draft step']} | {counts['fused draft step']} "
            f"| {counts['core verification']} | {counts['fused verification']} "
            f"| {core} | {fused} |"
        )
    return lines
