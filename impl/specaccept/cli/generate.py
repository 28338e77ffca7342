"""`specaccept generate`: stream text from a speculative run and print its summary."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from specaccept.cli.options import (
    DEFAULT_PROMPT,
    add_model_arguments,
    add_run_arguments,
    add_sampler_arguments,
    add_tree_arguments,
    diagnostics_enabled,
    encode_prompt,
    sampler_config,
    tree_options,
)
from specaccept.shell.rule_choice import BLOCK_VERIFY_ENV, RULE_CHOICES, STOCHASTIC_ACCEPT_ENV

__all__ = ["EXIT_INTERRUPTED", "add_parser", "run", "warn_past_context"]

EXIT_INTERRUPTED = 130
"""128 + SIGINT: the status a shell reports for a command stopped by Ctrl-C."""


SUMMARY_FIELDS = """\
The summary line a chain run ends with ([Speculative acceptance]):
  rounds                   drafting rounds: up to k drafts, then one target forward
  proposed                 drafts proposed, k a round (fewer in a last, short round)
  positions_tested         drafts the rule tested: those up to and including the first
                           rejection (the ones behind it are never tested), so it is
                           below proposed whenever a round rejects before its last draft
  accepted                 drafts kept
  per_position_acceptance  accepted / positions_tested: hold it against
                           closed_form_sum_min under stochastic, closed_form_sum_prod
                           under sampler-match
  acceptance_rate          accepted / proposed, lower than the above because untested
                           drafts count against it
  mean_accepted_len        accepted / rounds: hold it against closed_form_accepted_len
With --diag, per tested position or per round given the round's drafts:
  closed_form_sum_min      sum_x min(p, q): the stochastic rule's acceptance
  closed_form_sum_prod     sum_x p q: sampler-match's acceptance
  closed_form_accepted_len E[accepted | drafts] under the rule that ran, per round
  closed_form_block        E[accepted | drafts] under block verification, per round
A tree run ends with [Tree speculation] (nodes for positions) and a --no-draft run with
[Target only]; every run then prints generated=, seconds= and tokens_per_second=."""


def add_parser(commands: Any) -> None:
    """Register `generate` on the subparsers action `commands`."""
    generate: argparse.ArgumentParser = commands.add_parser(
        "generate", help="generate text speculatively", epilog=SUMMARY_FIELDS,
    )
    add_model_arguments(generate)
    generate.add_argument("-p", "--prompt", default=DEFAULT_PROMPT, help="the prompt")
    add_run_arguments(generate, tokens=200)
    add_sampler_arguments(generate)
    generate.add_argument(
        "--rule", choices=RULE_CHOICES, default="auto",
        help="auto: block verification at temperature > 0 (greedy at 0), unless "
        f"{BLOCK_VERIFY_ENV}=0 makes it stochastic or {STOCHASTIC_ACCEPT_ENV}=0 sampler-match; "
        "block: the round's drafts verified jointly; stochastic and sampler-match: "
        "token by token",
    )
    add_tree_arguments(generate)
    generate.add_argument("--no-draft", action="store_true", help="target only, for A/B")
    generate.add_argument("--diag", action="store_true", help="report the closed forms")
    generate.add_argument(
        "--check-caches", action="store_true", help="assert both cache offsets every round"
    )
    generate.add_argument(
        "--chat-template", action="store_true", help="wrap the prompt in the chat template"
    )
    generate.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Generate, streaming the text to stdout, then print the summary lines."""
    from specaccept.shell.generator import SpeculativeGenerator
    from specaccept.shell.loading import load_pair
    from specaccept.shell.target_only import target_only_generate

    config = sampler_config(args)
    tree = tree_options(args)
    if args.no_draft and (args.diag or args.check_caches):
        flag = "--diag" if args.diag else "--check-caches"
        raise ValueError(f"--no-draft does not combine with {flag}: it reports on the drafts "
                         "and the drafter's cache, and a target-only run has neither")
    pair = load_pair(args.model, args.draft_model, with_drafter=not args.no_draft)
    tokenizer = pair.require_tokenizer()
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

    # One warning is enough: the target's, else the drafter's.
    if not warn_past_context(pair.target, "target", len(prompt), args.max_tokens) and (
        pair.drafter is not None
    ):
        warn_past_context(pair.drafter, "drafter", len(prompt), args.max_tokens)
    start = time.perf_counter()
    count = 0
    interrupted = False
    run: Any = None
    try:
        if pair.drafter is None:
            for token in target_only_generate(
                pair.target, prompt, config, args.max_tokens, seed=args.seed, eos_token_ids=eos
            ):
                stream([token])
                count += 1
        elif tree is not None:
            from specaccept.core.tree import TreeScheme
            from specaccept.shell.tree_generator import TreeSpeculativeGenerator

            width, depth, scheme = tree
            tree_generator = TreeSpeculativeGenerator(
                pair.target, pair.drafter, config, width=width, depth=depth,
                scheme=TreeScheme(scheme), eos_token_ids=eos, check_caches=args.check_caches,
                diagnostics=diagnostics_enabled(args.diag),
            )
            run = tree_generator.generate(prompt, args.max_tokens, seed=args.seed)
            for block in run:
                stream(block)
                count += len(block)
        else:
            generator = SpeculativeGenerator(
                pair.target, pair.drafter, config,
                num_draft_tokens=args.num_draft_tokens, rule=args.rule, eos_token_ids=eos,
                check_caches=args.check_caches, diagnostics=diagnostics_enabled(args.diag),
            )
            run = generator.generate(prompt, args.max_tokens, seed=args.seed)
            for block in run:
                stream(block)
                count += len(block)
    except KeyboardInterrupt:
        # Ctrl-C ends the run, not the report: the stats are current after every block.
        interrupted = True
    elapsed = time.perf_counter() - start
    detokenizer.finalize()
    out.write(detokenizer.last_segment + "\n")
    print(run.stats.summary_line() if run is not None else "[Target only] no drafter")
    if args.check_caches and run is not None and not interrupted:
        # Silence would read as "not checked": a failed check raises before this line.
        print(f"[Cache check] passed: both cache offsets matched after each of the "
              f"{run.stats.rounds} rounds")
    rate = count / elapsed if elapsed > 0 else 0.0
    ending = " interrupted=true" if interrupted else ""
    print(f"generated={count} seconds={elapsed:.3f} tokens_per_second={rate:.2f}{ending}")
    return EXIT_INTERRUPTED if interrupted else 0


def warn_past_context(model: Any, role: str, prompt_tokens: int, max_tokens: int) -> bool:
    """Warn on stderr when the run reaches past the context the model declares; say if so."""
    declared = getattr(getattr(model, "args", None), "max_position_embeddings", None)
    if not (isinstance(declared, int) and prompt_tokens + max_tokens > declared):
        return False
    print(
        f"specaccept: warning: the prompt ({prompt_tokens} tokens) plus -n {max_tokens} "
        f"exceeds the {role}'s max_position_embeddings ({declared}); output past position "
        f"{declared} is outside what it was trained on",
        file=sys.stderr,
    )
    return True
