"""Deliberately broken speculative engines on the embedded pair, each tracing itself.

One small engine loop (k drafts, one target forward, trimmable caches) with a switch
per known bug class; with no bug it is a correct engine. Each run writes a
conformance trace the way an engine builder would: what the engine believes p and q
are, the drafts, what it emitted and its cache offsets (no uniforms unless asked, as
most engines draw with their own generator).

Run as a script it prints the table `docs/results/broken-engines.md` records:
``python tests/broken_engines.py``; with ``--runs R`` each engine's trace is R runs of
different seeds in one version 2 trace, interleaved round by round as a batching engine
writes them (`docs/results/broken-engines-multi-run.md`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import mlx.core as mx
import numpy as np

from keyed_runs import keyed_round_uniforms, position_keyed
from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    effective_token_distribution,
    load_pair,
    rewind_trim,
    sample_from_distribution,
    verify_tokenwise,
)
from specaccept.core.joint import verify_blockwise
from specaccept.core.randomness import round_uniforms
from specaccept.shell.conformance import TraceWriter, encode_rows

__all__ = ["BATCH_BUGS", "BUGS", "EngineCase", "run_batched_engine", "run_case", "run_engine"]

PROMPT = "ROMEO:\n"


@dataclass(frozen=True)
class EngineCase:
    """A broken engine, the sampler it runs with and the checks that must catch it."""

    bug: str
    rule: AcceptanceRule
    config: SamplerConfig
    rounds: int
    """The kit flags it within this many rounds (asserted in CI)."""
    caught_by: tuple[str, ...]
    """Checks that fail on its trace."""
    records_uniforms: bool = False
    """Whether its trace carries the uniforms it read (most engines' do not)."""
    temperatures: tuple[float, ...] = ()
    """When set, its trace is one run at each of these temperatures (`config` with the
    temperature replaced), interleaved round by round: a bug that shows in opposite
    directions at different settings needs them all in one trace."""


BUGS = (
    EngineCase("resample-from-p", AcceptanceRule.STOCHASTIC, SamplerConfig(temperature=1.0),
               20, ("support",)),
    EngineCase("softmax-residual", AcceptanceRule.STOCHASTIC, SamplerConfig(temperature=1.0),
               10, ("support",)),
    EngineCase("raw-logits-q", AcceptanceRule.STOCHASTIC, SamplerConfig(temperature=0.5),
               80, ("acceptance", "draft-law")),
    EngineCase("argmax-at-temperature", AcceptanceRule.SAMPLER_MATCH,
               SamplerConfig(temperature=1.0), 30, ("law",)),
    EngineCase("penalties-blind-to-drafts", AcceptanceRule.STOCHASTIC,
               SamplerConfig(temperature=1.0, repetition_penalty=3.0, top_k=8), 20,
               ("support", "history")),
    EngineCase("draft-cache-over-trim", AcceptanceRule.STOCHASTIC,
               SamplerConfig(temperature=1.0), 3, ("rewind",)),
    # Decides every round faithfully on the uniforms it records, so replay passes; only
    # the uniforms themselves show the bug: a round re-reads the tests of the last one.
    # 11 rounds: 99.5% of 200 seeds' traces are caught by then (`python
    # tests/broken_engines.py --position-keyed`); a round that keeps k or k - 1 drafts
    # leaves no test behind, so detection waits for one that keeps fewer.
    EngineCase("position-keyed-uniforms", AcceptanceRule.BLOCK, SamplerConfig(temperature=1.0),
               11, ("fresh",), records_uniforms=True),
    # Draws its drafts at T**2 and records q at T (a temperature applied twice); it tests
    # with the q it records, so only the drafts' own law shows the bug. At T = 1.5 the
    # drafter draws at 2.25; below 1 this pair's drafter is so peaked that squaring the
    # temperature moves little mass (the power table says how little).
    EngineCase("mis-described-drafter", AcceptanceRule.STOCHASTIC,
               SamplerConfig(temperature=1.5), 40, ("draft-law",)),
    # BATCH_SLOTS requests verified together; every row of a step reads one row of
    # uniforms, which the trace records, so the batch check sees the rows of one step
    # read the same uniform (and the fresh check sees a uniform read twice). Without the
    # uniforms the batch check's shared-coin z-score has to do (the power table).
    EngineCase("shared-batch-coin", AcceptanceRule.STOCHASTIC, SamplerConfig(temperature=1.0),
               2, ("batch", "fresh"), records_uniforms=True),
    # Draws the target's tokens at T**2 and records p at T (a temperature applied twice),
    # keeping a draft while it equals the draw, as a sampler chain dividing the logits by T
    # twice does: too sharp in the run at 0.5 (drawn at 0.25), too flat in the run at 1.5
    # (2.25). The two pull a pooled law histogram in opposite directions (it passes); the
    # law check's sum over sampler settings sees each. At 0.7 and 1.3 the effect is weaker
    # on this pair (the power table's variant). Sampler-match, since the stochastic rule's
    # residual betrays the bug to the support check first.
    EngineCase("temperature-squared", AcceptanceRule.SAMPLER_MATCH,
               SamplerConfig(temperature=0.5), 200, ("law",), temperatures=(0.5, 1.5)),
)
BATCH_SLOTS = 4
"""The requests a batched engine verifies in one step."""
BATCH_PROMPTS = ("ROMEO:\n", "JULIET:\n", "MERCUTIO:\n", "TYBALT:\n")
BATCH_BUGS = frozenset({"shared-batch-coin"})


def _draw(weights: np.ndarray, u: float) -> int:
    """The spec's inverse-CDF draw, in float64 (for the broken replacements)."""
    cumulative = np.cumsum(weights)
    return int(min(np.searchsorted(cumulative, u * cumulative[-1], side="right"),
                   np.flatnonzero(weights > 0)[-1]))


def _decide(
    bug: str | None, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, drafts: list[int],
    uniforms: np.ndarray,
) -> tuple[int, int]:
    """(accepted, next token) under the engine's rule with its bug."""
    if rule is AcceptanceRule.BLOCK and bug in (None, "position-keyed-uniforms"):
        joint = verify_blockwise(mx.array(p.astype(np.float32)),
                                      mx.array(q.astype(np.float32)), mx.array(drafts),
                                      mx.array(uniforms))
        return int(np.array(joint.num_accepted)), int(np.array(joint.next_token))
    if bug == "token-level-under-block":  # claims block, decides token by token
        rule = AcceptanceRule.STOCHASTIC
        bug = None
    if bug is None or bug in ("penalties-blind-to-drafts", "draft-cache-over-trim",
                              "raw-logits-q", "mis-described-drafter", "shared-batch-coin",
                              "temperature-squared"):
        verdict = verify_tokenwise(rule, mx.array(p.astype(np.float32)),
                               mx.array(q.astype(np.float32)) if rule.needs_proposal_distribution
                               else None, mx.array(drafts), mx.array(uniforms))
        return int(np.array(verdict.num_accepted)), int(np.array(verdict.next_token))
    k = len(drafts)
    for i, token in enumerate(drafts):
        if bug == "argmax-at-temperature":
            choice = int(np.argmax(p[i]))
            if choice != token:
                return i, choice
            continue
        if p[i, token] > 0 and uniforms[i, 0] * q[i, token] <= p[i, token]:
            continue
        if bug == "resample-from-p":
            return i, _draw(p[i], uniforms[i, 1])
        shifted = np.exp(p[i] - q[i])  # softmax-residual
        return i, _draw(shifted / shifted.sum(), uniforms[i, 1])
    if bug == "argmax-at-temperature":
        return k, int(np.argmax(p[k]))
    return k, _draw(p[k], uniforms[k, 1])


def _trim(cache: list[Any], count: int) -> None:
    from mlx_lm.models.cache import trim_prompt_cache

    if count:
        trim_prompt_cache(cache, count)


def run_engine(
    case: EngineCase | None, rounds: int, *, seed: int = 0, record_uniforms: bool = False,
    config: SamplerConfig | None = None, rule: AcceptanceRule | None = None, k: int = 4,
    pair: Any = None, prompt_text: str = PROMPT, verify_seed: int | None = None,
) -> str:
    """Run `rounds` rounds of the engine (correct when `case` is None); return its trace.

    With `verify_seed`, round r verifies with the uniforms of round r of that seed, not of
    `seed`: engines given the same `verify_seed` share their verification coins round by
    round, as the rows of one batch do when a batched engine draws one row of uniforms.
    """
    from mlx_lm.models.cache import make_prompt_cache

    pair = pair or load_pair()
    bug = case.bug if case else None
    config = config or (case.config if case else SamplerConfig(temperature=1.0))
    rule = rule or (case.rule if case else AcceptanceRule.STOCHASTIC)
    prompt = [int(t) for t in pair.tokenizer.encode(prompt_text)]
    vocab = int(pair.target.args.vocab_size)
    out = io.StringIO()
    logits_rows = config.uses_history  # so the kit rebuilds p with the drafts in the history
    writer = TraceWriter(out, vocab_size=vocab, engine=f"broken engine: {bug or 'none'}",
                         prompt=prompt, target_sampler=config, draft_sampler=config)
    target_cache, draft_cache = make_prompt_cache(pair.target), make_prompt_cache(pair.drafter)
    for model, cache in ((pair.target, target_cache), (pair.drafter, draft_cache)):
        model(mx.array(prompt[:-1])[None], cache=cache)
    history, position = list(prompt), 0
    backfill: list[int] = []
    for _ in range(rounds):
        current = history[-1]
        before = (int(target_cache[0].offset), int(draft_cache[0].offset), len(backfill) + 1)
        step = mx.array([*backfill, current])
        drafts: list[int] = []
        claimed_q, draw_q = [], []
        # The position-keyed engine reads the keys it did before round keys existed.
        keyed = (keyed_round_uniforms(position_keyed) if bug == "position-keyed-uniforms"
                 else round_uniforms)
        randomness = keyed(seed, position, k)
        for j in range(k):
            logits = pair.drafter(step[None], cache=draft_cache)[0, -1]
            context = mx.array(history + drafts, dtype=mx.int32)
            law = effective_token_distribution(logits, config, context)
            claimed = (effective_token_distribution(logits, SamplerConfig(temperature=1.0))
                       if bug == "raw-logits-q" else law)
            if bug == "mis-described-drafter":  # the temperature applied a second time
                law = effective_token_distribution(
                    logits, dataclasses.replace(config, temperature=config.temperature ** 2),
                    context)
            token = int(np.array(sample_from_distribution(
                law, randomness.draft[j])))
            drafts.append(token)
            draw_q.append(law)
            claimed_q.append(claimed)
            step = mx.array([token])
        target_logits = pair.target(mx.array([current, *drafts])[None], cache=target_cache)[0]
        rows, drawn_rows = [], []
        for i in range(k + 1):
            seen = history if bug == "penalties-blind-to-drafts" else history + drafts[:i]
            rows.append(effective_token_distribution(target_logits[i], config,
                                                     mx.array(seen, dtype=mx.int32)))
            if bug == "temperature-squared":  # decides at T**2 what it records at T
                drawn_rows.append(effective_token_distribution(
                    target_logits[i],
                    dataclasses.replace(config, temperature=config.temperature ** 2),
                    mx.array(seen, dtype=mx.int32)))
        p = np.array(mx.stack(rows), dtype=np.float64)
        p_decided = np.array(mx.stack(drawn_rows), dtype=np.float64) if drawn_rows else p
        q = np.array(mx.stack(claimed_q), dtype=np.float64)
        uniforms = np.array(randomness.verify, dtype=np.float32)
        if verify_seed is not None:  # keyed by round, far apart, so no round re-reads one
            uniforms = np.array(round_uniforms(verify_seed, writer.rounds * 1000, k).verify,
                                dtype=np.float32)
        accepted, next_token = _decide(bug, rule, p_decided, q, drafts, uniforms)
        emitted = [*drafts[:accepted], next_token]
        plan = rewind_trim(k, accepted)
        _trim(target_cache, plan.target_trim)
        if bug == "draft-cache-over-trim":
            if accepted < k:
                _trim(draft_cache, min(k - accepted + 1, k))
            backfill = []
        else:
            _trim(draft_cache, plan.draft_trim)
            backfill = [drafts[-1]] if plan.draft_backfill else []
        target_block = (encode_rows(np.array(target_logits), kind="logits") if logits_rows
                        else encode_rows(p))
        writer.write_round(
            rule=rule, draft_tokens=drafts, emitted=emitted, target=target_block,
            draft=encode_rows(q), num_accepted=accepted,
            uniforms=uniforms.tolist() if record_uniforms else None,
            cache={"target_before": before[0], "draft_before": before[1], "draft_fed": before[2],
                   "target_after": int(target_cache[0].offset),
                   "draft_after": int(draft_cache[0].offset)},
        )
        history += emitted
        position += len(emitted)
    return out.getvalue()


def run_batched_engine(
    case: EngineCase | None, rounds: int, *, seed: int = 0, record_uniforms: bool = False,
    config: SamplerConfig | None = None, pair: Any = None,
) -> str:
    """`BATCH_SLOTS` requests verified in lockstep, one batch step per round; a version 2
    trace, one run per request, each round with its step and slot. With the shared-coin bug
    every row of a step reads the same uniforms; without it each request has its own seed."""
    pair = pair or load_pair()
    shared = case is not None and case.bug == "shared-batch-coin"
    config = config or (case.config if case else SamplerConfig(temperature=1.0))
    slots = []
    for slot, prompt_text in enumerate(BATCH_PROMPTS[:BATCH_SLOTS]):
        text = run_engine(None, rounds, seed=seed * BATCH_SLOTS + slot, pair=pair,
                          record_uniforms=record_uniforms, config=config,
                          prompt_text=prompt_text, verify_seed=seed if shared else None)
        slots.append([json.loads(line) for line in text.splitlines()])
    header = slots[0][0]
    lines = [{"format": header["format"], "version": 2, "vocab_size": header["vocab_size"],
              "engine": f"broken batched engine: {'shared-batch-coin' if shared else 'none'}"}]
    for slot, records in enumerate(slots):
        run = {"record": "run", "run": f"request-{slot}"}
        run.update({key: records[0][key] for key in ("prompt", "target_sampler",
                                                     "draft_sampler") if key in records[0]})
        lines.append(run)
    for step in range(rounds):
        for slot, records in enumerate(slots):
            lines.append({**records[1 + step], "run": f"request-{slot}",
                          "batch": {"step": step, "slot": slot}})
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)


def interleaved_runs(texts: list[str], rounds: int | None = None) -> str:
    """Version 1 traces as the runs ``run-0``, ``run-1``, ... of one version 2 trace: every
    run record first, then the rounds one from each run in turn, as a batching engine
    writes them; with `rounds`, only the first `rounds` of them."""
    header: dict[str, Any] = {}
    run_records: list[dict[str, Any]] = []
    queues: list[list[dict[str, Any]]] = []
    for index, text in enumerate(texts):
        first, *records = (json.loads(line) for line in text.splitlines())
        header = {"format": first["format"], "version": 2, "vocab_size": first["vocab_size"],
                  "engine": first.get("engine", "")}
        run = {"record": "run", "run": f"run-{index}"}
        run.update({key: first[key] for key in ("prompt", "prompt_length", "target_sampler",
                                                "draft_sampler") if key in first})
        run_records.append(run)
        queues.append([{**record, "run": f"run-{index}"} for record in records])
    lines = [header, *run_records]
    kept = 0
    while any(queues) and (rounds is None or kept < rounds):
        for queue in queues:
            if queue and (rounds is None or kept < rounds):
                lines.append(queue.pop(0))
                kept += 1
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)


def run_case(
    case: EngineCase | None, rounds: int, *, pair: Any = None, seed: int = 0,
    record_uniforms: bool = False, like: EngineCase | None = None, runs: int = 1,
) -> str:
    """The trace of `case` (or, with `case` None, of a correct engine run as `like` is: its
    sampler, rule and batching): `run_batched_engine` for a batch bug, else `run_engine`.

    With `runs` > 1 (not for a batch bug, whose trace is already one run per request),
    `rounds` rounds in all of `runs` runs with seeds ``seed * runs`` to
    ``seed * runs + runs - 1``, interleaved round by round (`interleaved_runs`). A case with
    `temperatures` has at least one run per temperature, run r at
    ``temperatures[r % len(temperatures)]``."""
    shape = case or like
    if shape is not None and shape.bug in BATCH_BUGS:
        return run_batched_engine(case, rounds, seed=seed, record_uniforms=record_uniforms,
                                  config=shape.config, pair=pair)

    temperatures = shape.temperatures if shape else ()
    runs = max(runs, len(temperatures))

    def one(seed: int, rounds: int, index: int) -> str:
        config = shape.config if shape else None
        if config is not None and temperatures:
            config = dataclasses.replace(
                config, temperature=temperatures[index % len(temperatures)])
        return run_engine(case, rounds, seed=seed, pair=pair, record_uniforms=record_uniforms,
                          config=config, rule=shape.rule if shape else None)

    if runs == 1:
        return one(seed, rounds, 0)
    each = -(-rounds // runs)
    return interleaved_runs([one(seed * runs + r, each, r) for r in range(runs)], rounds)


def _settings(case: EngineCase) -> str:
    """The sampler fields that differ from their defaults; the temperatures of its runs."""
    config, default = case.config, SamplerConfig()
    if case.temperatures:
        config = dataclasses.replace(config, temperature=default.temperature)
    changed = [f"{name}={getattr(config, name)}" for name in config.__dataclass_fields__
               if getattr(config, name) != getattr(default, name)]
    if case.temperatures:
        runs = " and ".join(str(t) for t in case.temperatures)
        return ", ".join([f"temperature={runs} (one run each)", *changed])
    return ", ".join(changed) or "temperature=1.0"


POWER_TARGET = 0.99
POWER_MAX_ROUNDS = 600
"""The longest correct trace the power search reads; beyond it the table says "more"."""
POWER_SEEDS = 20
POWER_VARIANTS: tuple[tuple[str, SamplerConfig | None, bool | None, tuple[float, ...] | None],
                      ...] = (
    # The same bugs at settings where they are harder to see, or without uniforms.
    ("penalties-blind-to-drafts", SamplerConfig(temperature=1.0, repetition_penalty=3.0), None,
     None),
    ("mis-described-drafter", SamplerConfig(temperature=0.5), None, None),
    ("shared-batch-coin", None, False, None),
    ("temperature-squared", None, None, (0.7, 1.3)),
)
"""(bug, sampler or None for the case's own, records_uniforms or None for the case's own,
the runs' temperatures or None for the case's own)."""


def _power_cases() -> list[EngineCase]:
    """Every broken engine, then the variants of `POWER_VARIANTS`."""
    cases = list(BUGS)
    for bug, config, uniforms, temperatures in POWER_VARIANTS:
        case = next(c for c in BUGS if c.bug == bug)
        cases.append(dataclasses.replace(
            case, config=config or case.config,
            records_uniforms=case.records_uniforms if uniforms is None else uniforms,
            temperatures=case.temperatures if temperatures is None else temperatures))
    return cases


def rounds_to_catch(
    case: EngineCase, pair: Any, read: Callable[[str], Any], *, seed: int = 0, runs: int = 1,
) -> tuple[int | None, str, float]:
    """The fewest rounds after which some check's power against `case.bug`, computed by the
    kit on a correct trace of the case's settings, reaches `POWER_TARGET`: (rounds or None
    when `POWER_MAX_ROUNDS` do not suffice, the check, its power there). With `runs`, the
    correct trace is that many runs interleaved and the rounds are counted over all of them."""
    from specaccept.conformance import check_trace

    text = run_case(None, POWER_MAX_ROUNDS, pair=pair, seed=seed, like=case,
                    record_uniforms=case.records_uniforms, runs=runs)
    full = read(text)
    per_round = BATCH_SLOTS if case.bug in BATCH_BUGS else 1

    def best(rounds: int) -> tuple[float, str]:
        prefix = dataclasses.replace(full, rounds=full.rounds[:rounds * per_round])
        report = check_trace(prefix)
        found = [(p.probability, c.name) for c in report.checks for p in c.power
                 if p.bug == case.bug and p.probability is not None]
        return max(found, default=(0.0, "none"))

    top, name = best(POWER_MAX_ROUNDS)
    if top < POWER_TARGET:
        return None, name, top
    low, high = 0, POWER_MAX_ROUNDS  # best(low) < target <= best(high)
    while high - low > 1:
        middle = (low + high) // 2
        if best(middle)[0] >= POWER_TARGET:
            high = middle
        else:
            low = middle
    top, name = best(high)
    return high, name, top


def _power_table(pair: Any, check: Callable[[str], Any], read: Callable[[str], Any], *,
                 runs: int = 1, seeds: int = POWER_SEEDS,
                 only: list[str] | None = None) -> None:
    from specaccept.conformance import Verdict

    print(f"\n### Rounds to catch each bug with probability {POWER_TARGET}\n")
    print(f"For each broken engine, the fewest rounds after which the kit's own power model, "
          f"read on a correct trace of the same settings (seed 0), gives some check a power "
          f"of at least {POWER_TARGET} against the bug (searched up to {POWER_MAX_ROUNDS} "
          f"rounds; a batched engine's rounds are batch steps of {BATCH_SLOTS} requests); "
          f"then the share of {seeds} seeds' traces of the broken engine, as long, that "
          "this check fails (alpha = 1e-4).\n")
    if runs > 1:
        print(f"Every trace but the batched engine's is {runs} runs interleaved round by round "
              f"(seed s runs seeds {runs}s to {runs}s + {runs - 1}); its rounds are counted "
              f"over all runs, so each run has about 1/{runs} of them.\n")
    print(f"| bug | rule | sampler | uniforms | check | rounds for power >= {POWER_TARGET} "
          f"(model) | caught, {seeds} seeds (measured) |")
    print("|---|---|---|---|---|---|---|")
    for case in _power_cases():
        if only and case.bug not in only:
            continue
        rounds, name, power = rounds_to_catch(case, pair, read, runs=runs)
        if rounds is None:
            cell = f"more than {POWER_MAX_ROUNDS} (power {power:.4f} at {POWER_MAX_ROUNDS})"
            measured = "not run"
        else:
            cell = str(rounds)
            caught = 0
            for seed in range(seeds):
                report = check(run_case(case, rounds, pair=pair, seed=seed,
                                        record_uniforms=case.records_uniforms, runs=runs))
                caught += any(c.name == name and c.verdict is Verdict.FAIL
                              for c in report.checks)
            measured = f"{caught} of {seeds}"
        print(f"| {case.bug} | {case.rule.value} | {_settings(case)} | "
              f"{'yes' if case.records_uniforms else 'no'} | {name} | {cell} | {measured} |")
        sys.stdout.flush()


def _main() -> None:
    import argparse
    import tempfile

    from specaccept.conformance import Verdict, check_trace, read_trace

    pair = load_pair()

    def trace(text: str) -> Any:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
            handle.write(text)
        parsed = read_trace(handle.name)
        os.unlink(handle.name)
        return parsed

    def check(text: str) -> Any:
        return check_trace(trace(text))

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--position-keyed", action="store_true",
                        help="the position-keyed engine's detection table instead")
    parser.add_argument("--runs", type=int, default=1,
                        help="runs of different seeds in each trace, interleaved (default 1)")
    parser.add_argument("--seeds", type=int, default=POWER_SEEDS,
                        help=f"broken traces measured a bug (default {POWER_SEEDS})")
    parser.add_argument("--only", nargs="+", metavar="BUG",
                        help="only these bugs (to time one)")
    args = parser.parse_args()
    if args.runs < 1 or args.seeds < 1:
        parser.error(f"--runs and --seeds must be at least 1, got {args.runs}, {args.seeds}")
    if args.position_keyed:
        _position_keyed_detection(pair, check)
        return
    runs = args.runs
    options = "".join([f" --runs {runs}" if runs > 1 else "",
                       f" --seeds {args.seeds}" if args.seeds != POWER_SEEDS else "",
                       f" --only {' '.join(args.only)}" if args.only else ""])
    print(f"Produced by:\n\n```sh\npython tests/broken_engines.py{options}\n```\n")
    print(f"Device {mx.default_device()}, seed 0, prompt {PROMPT!r}, k = 4, the embedded pair; "
          "each broken engine traced without its uniforms, so replay does not run, except "
          "where the uniforms column says yes. The batched engine verifies "
          f"{BATCH_SLOTS} requests a step (prompts {', '.join(map(repr, BATCH_PROMPTS))}); "
          "its rounds are steps.\n")
    if runs > 1:
        print(f"Each trace but the batched engine's (already one run per request) is {runs} "
              f"runs of one version 2 trace, seeds 0 to {runs - 1}, interleaved round by "
              f"round as a batching engine writes them; in the first table each run is as "
              f"long as the one-run engine's trace, so the rounds column counts all {runs}.\n")
    print("| bug | rule | sampler | rounds | uniforms | checks that fail (alpha = 1e-4 each) | "
          "power of a correct trace of as many rounds |")
    print("|---|---|---|---|---|---|---|")
    for case in BUGS:
        if args.only and case.bug not in args.only:
            continue
        total = case.rounds if case.bug in BATCH_BUGS else case.rounds * runs
        report = check(run_case(case, total, pair=pair,
                                record_uniforms=case.records_uniforms, runs=runs))
        failed = [f"{c.name} ({c.statistic})" for c in report.checks
                  if c.verdict is Verdict.FAIL]
        correct = check(run_case(None, total, pair=pair, like=case,
                                 record_uniforms=case.records_uniforms, runs=runs))
        power = [f"{c.name} {p.probability:.4f}" for c in correct.checks for p in c.power
                 if p.bug == case.bug and p.probability is not None]
        print(f"| {case.bug} | {case.rule.value} | {_settings(case)} | {total} | "
              f"{'yes' if case.records_uniforms else 'no'} | "
              f"{'; '.join(failed) or 'none'} | {', '.join(power) or 'n/a'} |")
    sys.stdout.flush()
    _power_table(pair, check, trace, runs=runs, seeds=args.seeds, only=args.only)


def _position_keyed_detection(pair: Any, check: Callable[[str], Any]) -> None:
    """How many rounds the kit needs for the position-keyed engine, with and without uniforms."""
    import tempfile

    from specaccept.conformance import DEFAULT_ALPHA, Verdict, read_trace
    from specaccept.conformance.fresh import FreshState

    def fresh_within(trace: Any, rounds: int) -> Any:
        state = FreshState()
        for round_ in trace.rounds[:rounds]:
            state.update(round_)
        return state.result(DEFAULT_ALPHA)

    case = next(c for c in BUGS if c.bug == "position-keyed-uniforms")
    seeds, rounds = 200, 14
    print("Produced by:\n\n```sh\npython tests/broken_engines.py --position-keyed\n```\n")
    print(f"Device {mx.default_device()}, prompt {PROMPT!r}, k = 4, the embedded pair, "
          "temperature 1, block verification with every uniform keyed by absolute position.\n")
    print(f"With uniforms: the fraction of {seeds} seeds' traces the fresh check fails "
          "(alpha = 1e-4) within r rounds.\n")
    caught_by = []
    for seed in range(seeds):
        text = run_engine(case, rounds, seed=seed, pair=pair, record_uniforms=True)
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
            handle.write(text)
        trace = read_trace(handle.name)
        os.unlink(handle.name)
        caught_by.append(next(
            (r for r in range(1, rounds + 1)
             if fresh_within(trace, r).verdict is Verdict.FAIL), rounds + 1))
    print("| rounds | " + " | ".join(str(r) for r in range(1, rounds + 1)) + " |")
    print("|---" * (rounds + 1) + "|")
    print("| caught | " + " | ".join(
        f"{np.mean(np.array(caught_by) <= r):.3f}" for r in range(1, rounds + 1)) + " |")
    long = 2_000
    print(f"\nWithout uniforms: the checks on traces of {long} rounds (seeds 0 and 1).\n")
    print("| seed | acceptance | law | verdict |")
    print("|---|---|---|---|")
    for seed in (0, 1):
        report = check(run_engine(case, long, seed=seed, pair=pair))
        by_name = {c.name: c for c in report.checks}
        print(f"| {seed} | {by_name['acceptance'].verdict}: {by_name['acceptance'].statistic} | "
              f"{by_name['law'].verdict}: {by_name['law'].statistic} | "
              f"{'conforms' if report.passed else 'does not conform'} |")
        sys.stdout.flush()


if __name__ == "__main__":
    _main()
