"""The speculative generator: the imperative shell around the functional core.

A round reads as the algorithm does (docs/generator.md, "How a round works"): draft
k tokens with the drafter's sampler, keeping each draft's law q lazy; forward
``[current, d0 .. d(k-1)]`` through the target once; let `verify_tokenwise` decide
(spec/verify_tokenwise.md), or `verify_blockwise` under block verification
(spec/verify_blockwise.md), on the round's uniforms (spec/randomness.md); evaluate
and read back once; rewind both caches by `rewind_trim` (spec/rewind_trim.md).
Every decision is a core function; this module only moves tokens, caches and
counters, and everything one run owns lives in one `_Run`.

Models are anything mlx-lm runs: ``model(tokens[None], cache=cache)`` returns
``[1, T, V]`` logits and `mlx_lm.models.cache.make_prompt_cache` builds the
caches, which must be trimmable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import mlx.core as mx

from specaccept.core.acceptance import AcceptanceRule, verify_tokenwise
from specaccept.core.joint import BlockwiseVerdict, verify_blockwise
from specaccept.core.randomness import round_uniforms
from specaccept.core.rewind import rewind_trim
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.sampling import (
    effective_token_distribution,
    sample_from_distribution,
    sample_token_with_distribution,
)
from specaccept.core.tree import MAX_TREE_NODES
from specaccept.shell.arguments import (
    LanguageModel,
    check_eos_token_ids,
    check_model,
    check_prompt,
    check_run_arguments,
    vocab_size_of,
)
from specaccept.shell.caches import (
    CacheInvariantError,
    check_offsets,
    make_cache,
    offset,
    prefill,
    trim,
)
from specaccept.shell.fused import FusedSampler, fused_sampler
from specaccept.shell.guards import (
    NonFiniteLogitsError,
    check_width,
    invalid_rows,
    raise_on_invalid,
)
from specaccept.shell.profiling import RoundClock
from specaccept.shell.rule_choice import RuleChoice, choose_rule
from specaccept.shell.stats import SpeculativeStats, round_closed_forms

__all__ = [
    "CacheInvariantError",
    "NonFiniteLogitsError",
    "RoundObservation",
    "RuleChoice",
    "SpeculativeGenerator",
    "SpeculativeRun",
    "SpeculativeStats",
]

logger = logging.getLogger("specaccept")

_logged_rules: set[AcceptanceRule] = set()


@dataclass(frozen=True)
class RoundObservation:
    """What one round saw and decided, handed to the `observer` a run was started with.

    A conformance trace is built from these (`specaccept.shell.conformance`). The
    rows are read back in the round's one host synchronisation; a round with no
    drafts is the final single target step.
    """

    position: int
    """Tokens generated before the round."""
    rule: AcceptanceRule
    """The rule that decided the round."""
    target_probs: list[list[float]]
    """`[k+1, V]` float32 values, row i the target's law after the drafts before position i."""
    draft_probs: list[list[float]] | None
    """`[k, V]` float32 values, the law each draft was drawn from (None when k = 0)."""
    draft_tokens: list[int]
    """The k drafts."""
    uniforms: list[list[float]]
    """`[k+1, 2]` float32 values, the uniforms `verify_tokenwise` read."""
    num_accepted: int
    """The accepted prefix length."""
    emitted: list[int]
    """The tokens the round emitted, after any cut at an end-of-sequence token."""
    stopped: bool
    """True when the run ended in this round (EOS or max_tokens)."""
    target_offset_before: int
    """Target cache entries when the round began."""
    draft_offset_before: int | None
    """Drafter cache entries before the round's first draft forward (None when k = 0)."""
    draft_fed: int
    """The drafter's first forward took this many tokens (current token plus owed backfill)."""
    target_offset_after: int
    """Target cache entries after the rewind."""
    draft_offset_after: int | None
    """Drafter cache entries after the rewind (None when k = 0)."""



_Observer = Callable[[RoundObservation], None]


class SpeculativeRun(Iterator[list[int]]):
    """One generation run: iterating it yields the tokens each round emits.

    `stats` counts this run alone and is current after every block, so a run
    stopped early (a break, an exception, Ctrl-C) still reports what it did.
    Runs of one generator are independent: interleaving them mixes no counters.
    """

    def __init__(self, blocks: Iterator[list[int]], stats: SpeculativeStats) -> None:
        self.stats = stats
        self._blocks = blocks

    def __iter__(self) -> SpeculativeRun:
        return self

    def __next__(self) -> list[int]:
        return next(self._blocks)


class _UntimedClock(RoundClock):
    """The clock of a run nobody times: every mark is free, and the sync a plain eval."""

    def start_round(self) -> None:
        pass

    def phase(self, name: str, *arrays: Any) -> None:
        pass

    def synchronise(self, *arrays: mx.array) -> None:
        mx.eval(*arrays)

    def end_round(self) -> None:
        pass


_UNTIMED = _UntimedClock()


@dataclass
class _Run:
    """Everything one run owns: both caches, the history, the counters and its keys."""

    seed: int
    max_tokens: int
    target_cache: list[Any]
    draft_cache: list[Any]
    history: mx.array
    """The prompt and every token emitted so far; its last entry is `current`."""
    current: int
    stats: SpeculativeStats
    clock: RoundClock
    observer: _Observer | None
    backfill: list[int] = field(default_factory=list)
    """The last draft of an all-accepted round: the drafter never forwarded it, and owes it."""
    generated: int = 0

    @property
    def keeps_rows(self) -> bool:
        """An observer is shown every round's rows, which the sync then reads back."""
        return self.observer is not None


class _Drafts(NamedTuple):
    """A round's k drafts, lazy."""

    each: list[mx.array]
    """The 0-d tokens, in order."""
    tokens: mx.array
    """`[k]` int32, the same tokens."""
    probs: mx.array | None
    """`[k, V]`, the law each was drawn from; None when neither the rule nor anyone reads q."""
    codes: mx.array
    """`[k]`, the row guard's code of each draft's logits and law."""


class _RoundArrays(NamedTuple):
    """What the round's one synchronisation evaluates, lazy; `_ReadBack` is it read back."""

    num_accepted: mx.array
    next_token: mx.array
    draft_tokens: mx.array
    target_codes: mx.array
    draft_codes: mx.array
    sum_min: mx.array | None
    sum_prod: mx.array | None
    survival: mx.array | None
    block_survival: mx.array | None
    target_probs: mx.array | None
    draft_probs: mx.array | None
    uniforms: mx.array | None


class _ReadBack(NamedTuple):
    """The round's values on the host: closed forms with diagnostics, rows with an observer."""

    num_accepted: int
    next_token: int
    draft_tokens: list[int]
    target_codes: list[int]
    draft_codes: list[int]
    sum_min: list[float] | None
    sum_prod: list[float] | None
    survival: list[float] | None
    block_survival: list[float] | None
    target_probs: list[list[float]] | None
    draft_probs: list[list[float]] | None
    uniforms: list[list[float]] | None


class _Outcome(NamedTuple):
    """What a round decided: the tokens it emits, and what an observer is shown of it."""

    emitted: list[int]
    owes_backfill: bool
    draft_tokens: list[int]
    num_accepted: int
    target_probs: list[list[float]] | None
    draft_probs: list[list[float]] | None
    uniforms: list[list[float]] | None


def _read_back(stats: SpeculativeStats, clock: RoundClock, *arrays: mx.array | None) -> list[Any]:
    """The round's one host synchronisation: evaluate, then read back (None stays None)."""
    stats.host_syncs += 1
    clock.synchronise(*[array for array in arrays if array is not None])
    return [None if array is None else array.tolist() for array in arrays]


def _launch(clock: RoundClock, *arrays: mx.array) -> None:
    """Start the arrays' work on the device now, without a host synchronisation.

    A phased clock evaluates each phase itself, and must find its work not yet
    started, or the device time would land in the Python between phases.
    """
    if not clock.phased:
        mx.async_eval(*arrays)  # type: ignore[no-untyped-call]  # mlx ships it untyped


@dataclass
class SpeculativeGenerator:
    """Speculative decoding of `target` with `drafter`, lossless under every rule it picks.

    On MLX's CUDA backend, set ``MLX_CUDA_USE_CUDNN_SDPA=0`` before the first forward
    (the `specaccept` command does): with cuDNN attention, each multi-token forward at a
    key/value length not met before builds a graph first, about 63 ms on an H200, and
    every round has one or two (docs/results/forward-shapes-gpu.md).

    Args:
        target, drafter: mlx-lm models with the same vocabulary.
        target_config: the target's sampler; it defines the output law.
        draft_config: the drafter's sampler (default: the target's).
        num_draft_tokens: k, drafts per round, in [1, `MAX_TREE_NODES`] (4096).
        rule: "auto" chooses with `acceptance_rule` (block verification at
            temperature > 0 unless ``SPECACCEPT_BLOCK_VERIFY`` turns it into the
            stochastic rule or ``SPECACCEPT_STOCHASTIC_ACCEPT`` into sampler-match);
            "stochastic", "sampler-match" and "block" force a rule and read neither
            variable. A greedy target is always greedy-argmax.
        eos_token_ids: generation stops at the first of these emitted.
        check_caches: after every round, assert both cache offsets equal the
            number of tokens before the next current token.
        diagnostics: accumulate Σ min(p, q) and Σ p·q over the tested positions, and
            per round E[accepted | drafts] (and its variance) under the rule that ran
            and under block verification.
        prefill_step_size: prompt tokens per prefill forward.
        fast_path: sample and verify through `specaccept.shell.fused`, which
            returns what the core functions return, bit for bit, with fewer
            kernels; False runs the core functions as written. Samplers with
            history penalties or XTC always run the core functions.
    """

    target: LanguageModel
    drafter: LanguageModel
    target_config: SamplerConfig
    draft_config: SamplerConfig | None = None
    num_draft_tokens: int = 4
    rule: RuleChoice = "auto"
    eos_token_ids: frozenset[int] = field(default_factory=frozenset)
    check_caches: bool = False
    diagnostics: bool = False
    prefill_step_size: int = 512
    fast_path: bool = True
    _fused: FusedSampler | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_model("target", self.target)
        check_model("drafter", self.drafter)
        if not isinstance(self.target_config, SamplerConfig):
            raise TypeError(
                f"target_config must be a SamplerConfig, got {type(self.target_config).__name__}"
            )
        if self.draft_config is None:
            self.draft_config = self.target_config
        if not isinstance(self.draft_config, SamplerConfig):
            raise TypeError(
                f"draft_config must be a SamplerConfig, got {type(self.draft_config).__name__}"
            )
        k = self.num_draft_tokens
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_TREE_NODES:
            # A chain of k drafts is a tree of k nodes: the trees' bound, before a round
            # sizes its rows, (k + 1) x V, by it (k = 10**11 ended in MemoryError).
            raise ValueError(f"num_draft_tokens must be an int in [1, {MAX_TREE_NODES}], "
                             f"got {k!r}")
        # Before any model runs: a bad rule or a bad switch in the environment is an error now.
        self.acceptance_rule = choose_rule(self.rule, self.target_config)
        self.eos_token_ids = check_eos_token_ids(self.eos_token_ids)
        self.vocab_size = vocab_size_of(self.target, "target")
        draft_vocab = vocab_size_of(self.drafter, "drafter")
        if draft_vocab != self.vocab_size:
            raise ValueError(
                f"drafter vocabulary ({draft_vocab}) differs from the target's "
                f"({self.vocab_size}): speculative decoding needs one shared vocabulary"
            )
        # Refuse a non-trimmable cache now, before a prompt is prefilled.
        make_cache(self.target, "target")
        make_cache(self.drafter, "drafter")
        served = FusedSampler.serves(self.target_config) and FusedSampler.serves(
            self.draft_config)
        # Uncompiled: development runs on an H200 at V = 128k (not kept) found mx.compile'd
        # draft steps and verdicts slower than the same functions run plainly; no recorded
        # run has compared the two since (docs/results.md says so).
        self._fused = (
            fused_sampler(self.target_config, self.draft_config, compiled=False)
            if self.fast_path and served else None
        )
        if self.acceptance_rule not in _logged_rules:
            _logged_rules.add(self.acceptance_rule)
            logger.info(
                "speculative acceptance rule active rule=%s distribution_preserving=true",
                self.acceptance_rule.value,
            )

    @property
    def fast_path_sampler(self) -> FusedSampler | None:
        """The fused sampler the rounds run through; None on the core path."""
        return self._fused

    def generate(
        self, prompt: Sequence[int], max_tokens: int, *, seed: int = 0,
        clock: RoundClock | None = None,
        observer: Callable[[RoundObservation], None] | None = None,
    ) -> SpeculativeRun:
        """Start a run: iterate the result for the emitted blocks; its `stats` counts them.

        The arguments are checked here, before any model runs. The round that
        starts at output position n (0-based, counted from the first generated
        token) reads ``round_uniforms(seed, n, k)``: its accept tests and drafts
        keyed by (n, offset), fresh in every round, and the target's draw at each
        position m by m alone (spec/randomness.md).

        Args:
            prompt: token ids, at least one.
            max_tokens: tokens to generate at most (an EOS ends the run earlier).
            seed: the run's seed, in [0, 2**64).
            clock: times the run's drafting rounds (`RoundClock`).
            observer: called with a `RoundObservation` after every round (for
                tracing; it costs one extra read-back of the round's rows).
        """
        check_run_arguments(max_tokens, seed, self.prefill_step_size)
        tokens = check_prompt(prompt, self.vocab_size)
        if clock is not None and not isinstance(clock, RoundClock):
            raise TypeError(f"clock must be a RoundClock or None, got {clock!r}")
        if observer is not None and not callable(observer):
            raise TypeError(f"observer must be callable or None, got {observer!r}")
        stats = SpeculativeStats(self.acceptance_rule, diagnostics=self.diagnostics)
        blocks = self._blocks(tokens, max_tokens, seed, stats, clock or _UNTIMED, observer)
        return SpeculativeRun(blocks, stats)

    def _blocks(
        self, tokens: list[int], max_tokens: int, seed: int, stats: SpeculativeStats,
        clock: RoundClock, observer: _Observer | None,
    ) -> Iterator[list[int]]:
        target_cache = make_cache(self.target, "target")
        draft_cache = make_cache(self.drafter, "drafter")
        prefill(self.target, target_cache, tokens, self.prefill_step_size)
        prefill(self.drafter, draft_cache, tokens, self.prefill_step_size)
        run = _Run(seed, max_tokens, target_cache, draft_cache,
                   history=mx.array(tokens, dtype=mx.int32), current=tokens[-1],
                   stats=stats, clock=clock, observer=observer)
        while run.generated < max_tokens:
            k = min(self.num_draft_tokens, max_tokens - run.generated - 1)
            offsets_before = (offset(target_cache), offset(draft_cache), len(run.backfill) + 1)
            if k == 0:  # one token left: a plain target step decides it
                outcome = self._final_step(run)
            else:
                clock.start_round()
                outcome = self._round(run, k)
                clock.end_round()
                # The round's last draft, emitted just before the bonus token, leads the
                # next round's first drafter forward.
                run.backfill = [outcome.emitted[-2]] if outcome.owes_backfill else []
            # EOS anywhere in the block ends the run at it.
            emitted = outcome.emitted
            cut = next((i + 1 for i, t in enumerate(emitted) if t in self.eos_token_ids),
                       len(emitted))
            emitted = emitted[:cut]
            run.generated += len(emitted)
            stats.generated = run.generated
            stopped = emitted[-1] in self.eos_token_ids or run.generated == max_tokens
            if observer is not None:
                observer(self._observation(run, outcome, emitted, stopped, offsets_before))
            yield emitted
            if stopped:
                return
            run.history = mx.concatenate([run.history, mx.array(emitted, dtype=mx.int32)])
            run.current = emitted[-1]
            if self.check_caches:
                check_offsets(stats.rounds, target_cache, draft_cache, len(run.backfill),
                              run.history.shape[0] - 1)

    def _round(self, run: _Run, k: int) -> _Outcome:
        """Draft k tokens, forward them through the target once, decide, sync once, rewind."""
        position = run.generated
        # Keyed by the round's first position: fresh in every round, under every rule.
        randomness = round_uniforms(run.seed, position, k)
        drafts = self._draft(run, k, mx.array(randomness.draft, dtype=mx.float32))
        target_input = mx.concatenate([mx.array([run.current], dtype=mx.int32), drafts.tokens])
        target_logits = self.target(target_input[None], cache=run.target_cache)[0]
        check_width(target_logits, self.vocab_size, "the target")
        _launch(run.clock, target_logits)  # the device runs it while Python builds the verdict
        run.clock.phase("target forward", target_logits)
        uniforms = mx.array(randomness.verify, dtype=mx.float32)
        values = _ReadBack(*_read_back(
            run.stats, run.clock, *self._decide(run, target_logits, drafts, uniforms)
        ))
        accepted = values.num_accepted
        # Rows past the emitted block decide nothing; only a row that decided a token counts.
        raise_on_invalid(values.draft_codes[: accepted + 1], "the drafter", position)
        raise_on_invalid(values.target_codes[: accepted + 1], "the target", position)
        tested = run.stats.count_round(k, accepted)
        if self.diagnostics:
            assert values.sum_min is not None and values.sum_prod is not None
            assert values.survival is not None and values.block_survival is not None
            run.stats.count_closed_forms(tested, values.sum_min, values.sum_prod,
                                         values.survival, values.block_survival)
        plan = rewind_trim(k, accepted)
        trim(run.target_cache, plan.target_trim, "target")
        trim(run.draft_cache, plan.draft_trim, "drafter")
        return _Outcome(
            [*values.draft_tokens[:accepted], values.next_token], plan.draft_backfill,
            values.draft_tokens, accepted, values.target_probs, values.draft_probs,
            values.uniforms,
        )

    def _draft(self, run: _Run, k: int, uniforms: mx.array) -> _Drafts:
        """k drafts from the drafter: it forwards ``[*backfill, current]``, then each draft."""
        assert self.draft_config is not None
        keep_q = (self.acceptance_rule.needs_proposal_distribution or self.diagnostics
                  or run.keeps_rows)
        fused, clock, history = self._fused, run.clock, run.history
        drafts: list[mx.array] = []
        draft_probs: list[mx.array] = []
        # Each draft's logits and law are checked as it is sampled; the codes ride the sync.
        codes: list[mx.array] = []
        step_input = mx.array([*run.backfill, run.current])
        for j in range(k):
            logits = self.drafter(step_input[None], cache=run.draft_cache)[0, -1]
            check_width(logits, self.vocab_size, "the drafter")
            clock.phase("drafter forward", logits)
            if fused is not None:
                token, q, code = fused.draft_step(logits, uniforms[j])
                code = code[None]
            else:
                token, q = sample_token_with_distribution(
                    logits, self.draft_config, history, uniforms[j]
                )
                code = invalid_rows(logits[None], q[None])
                history = mx.concatenate([history, token.reshape(1)])
            _launch(clock, token)  # the draft's work starts while Python builds the next step
            clock.phase("draft sampling", token, q, code)
            drafts.append(token)
            codes.append(code)
            if keep_q:
                draft_probs.append(q)
            step_input = token.reshape(1)
        probs = mx.stack(draft_probs) if keep_q else None
        return _Drafts(drafts, mx.stack(drafts), probs, mx.concatenate(codes))

    def _decide(
        self, run: _Run, target_logits: mx.array, drafts: _Drafts, uniforms: mx.array
    ) -> _RoundArrays:
        """The target's rows, the rule's verdict and the guard's codes, lazy."""
        rule = self.acceptance_rule
        needed_q = drafts.probs if rule.needs_proposal_distribution else None
        joint: BlockwiseVerdict | None = None
        if self._fused is not None:
            verdict = self._fused.verify_round(
                rule, target_logits, needed_q, drafts.tokens, uniforms
            )
            num_accepted, next_token = verdict.num_accepted, verdict.next_token
            target_probs, target_codes = verdict.target_probs, verdict.invalid
        else:
            target_probs = self._target_rows(target_logits, run.history, drafts.each)
            if rule.verifies_jointly:
                assert drafts.probs is not None
                joint = verify_blockwise(target_probs, drafts.probs, drafts.tokens, uniforms)
                num_accepted, next_token = joint.num_accepted, joint.next_token
            else:
                tokenwise = verify_tokenwise(rule, target_probs, needed_q, drafts.tokens,
                                             uniforms)
                num_accepted, next_token = tokenwise.num_accepted, tokenwise.next_token
            target_codes = invalid_rows(target_logits, target_probs)
        run.clock.phase("sampling and verification", num_accepted, next_token, drafts.tokens,
                        target_codes, drafts.codes)
        forms: tuple[mx.array | None, ...] = (None,) * 4
        if self.diagnostics:
            assert drafts.probs is not None
            if joint is None:
                joint = verify_blockwise(target_probs, drafts.probs, drafts.tokens, uniforms)
            forms = round_closed_forms(rule, target_probs, drafts.probs, drafts.tokens, joint)
        rows = (target_probs, drafts.probs, uniforms) if run.keeps_rows else (None,) * 3
        return _RoundArrays(num_accepted, next_token, drafts.tokens, target_codes, drafts.codes,
                            *forms, *rows)

    def _target_rows(self, logits: mx.array, history: mx.array, drafts: list[mx.array]) -> mx.array:
        """Row i: the target's law after the prefix plus drafts[:i], `[k+1, V]`."""
        config = self.target_config
        if not config.uses_history:
            return effective_token_distribution(logits, config)
        rows = []
        for i in range(logits.shape[0]):
            row_history = mx.concatenate([history, *[d.reshape(1) for d in drafts[:i]]])
            rows.append(effective_token_distribution(logits[i], config, row_history))
        return mx.stack(rows)

    def _final_step(self, run: _Run) -> _Outcome:
        """The last token: the target alone draws it, in a round that proposes nothing."""
        logits = self.target(mx.array([run.current])[None], cache=run.target_cache)[0, -1]
        check_width(logits, self.vocab_size, "the target")
        probs = effective_token_distribution(logits, self.target_config, run.history)
        uniforms = round_uniforms(run.seed, run.generated, 0).verify
        token = sample_from_distribution(probs, uniforms[0][1])
        run.stats.rounds += 1
        # Untimed: a clock times the drafting rounds only.
        token_value, codes, rows = _read_back(
            run.stats, _UNTIMED, token, invalid_rows(logits[None], probs[None]),
            probs[None] if run.keeps_rows else None,
        )
        raise_on_invalid(codes, "the target", run.generated)
        return _Outcome([token_value], False, [], 0, rows, None, uniforms)

    def _observation(
        self, run: _Run, outcome: _Outcome, emitted: list[int], stopped: bool,
        offsets_before: tuple[int, int, int],
    ) -> RoundObservation:
        assert outcome.target_probs is not None and outcome.uniforms is not None
        drafted = bool(outcome.draft_tokens)
        return RoundObservation(
            position=run.generated - len(emitted), rule=self.acceptance_rule,
            target_probs=outcome.target_probs, draft_probs=outcome.draft_probs,
            draft_tokens=outcome.draft_tokens, uniforms=outcome.uniforms,
            num_accepted=outcome.num_accepted, emitted=emitted, stopped=stopped,
            target_offset_before=offsets_before[0],
            draft_offset_before=offsets_before[1] if drafted else None,
            draft_fed=offsets_before[2] if drafted else 0,
            target_offset_after=offset(run.target_cache),
            draft_offset_after=offset(run.draft_cache) if drafted else None,
        )
