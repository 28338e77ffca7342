"""The speculative generator: the imperative shell around the functional core.

A round drafts k tokens with the drafter's sampler (keeping each draft's law q
lazy), forwards ``[current, d0 .. d(k-1)]`` through the target once, builds the
target rows with the drafts in their history, lets `verify_tokenwise` decide (or
`verify_blockwise`, under block verification), and evaluates once. Every
decision is a core function; this module only moves tokens, caches and counters.

Models are anything mlx-lm runs: ``model(tokens[None], cache=cache)`` returns
``[1, T, V]`` logits and `mlx_lm.models.cache.make_prompt_cache` builds the
caches, which must be trimmable.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import mlx.core as mx

from specaccept.core.acceptance import (
    AcceptanceRule,
    BlockVerdict,
    verify_tokenwise,
)
from specaccept.core.joint import verify_blockwise
from specaccept.core.randomness import SAMPLE, position_uniform, round_uniforms
from specaccept.core.rewind import rewind_trim
from specaccept.core.sampling import (
    SamplerConfig,
    effective_token_distribution,
    sample_from_distribution,
    sample_token_with_distribution,
)
from specaccept.core.theory import acceptance_closed_forms
from specaccept.shell.fused import FusedSampler, fused_sampler
from specaccept.shell.guards import (
    NonFiniteLogitsError,
    check_width,
    invalid_rows,
    raise_on_invalid,
)
from specaccept.shell.profiling import RoundClock
from specaccept.shell.rule_choice import RuleChoice, choose_rule

__all__ = [
    "CacheInvariantError",
    "NonFiniteLogitsError",
    "RoundObservation",
    "RuleChoice",
    "SpeculativeGenerator",
    "SpeculativeRun",
    "SpeculativeStats",
    "target_only_generate",
]

logger = logging.getLogger("specaccept")

_logged_rules: set[AcceptanceRule] = set()


class CacheInvariantError(AssertionError):
    """A cache offset differs from the number of tokens before the current token."""


@dataclass(frozen=True)
class RoundObservation:
    """What one round saw and decided, handed to a generator's `round_observer`.

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


@dataclass
class SpeculativeStats:
    """Counters of one generation run; the ratios follow the summary line's definitions."""

    rule: AcceptanceRule
    rounds: int = 0
    proposed: int = 0
    positions_tested: int = 0
    accepted: int = 0
    generated: int = 0
    host_syncs: int = 0
    diagnostics: bool = False
    sum_min_total: float = 0.0
    sum_prod_total: float = 0.0
    accepted_len_total: float = 0.0
    """Σ over rounds of E[accepted | the round's drafts] under the rule that ran."""
    accepted_len_variance_total: float = 0.0
    """Σ over rounds of Var[accepted | the round's drafts] under the rule that ran."""
    block_len_total: float = 0.0
    """Σ over rounds of E[accepted | the round's drafts] under block verification."""

    @property
    def per_position_acceptance(self) -> float:
        """The ratio accepted / positions_tested, predicted by theory (Σ min(p, q), stochastic)."""
        return self.accepted / self.positions_tested if self.positions_tested else 0.0

    @property
    def acceptance_rate(self) -> float:
        """The ratio accepted / proposed, low because drafts behind a rejection go untested."""
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def mean_accepted_len(self) -> float:
        """The ratio accepted / rounds, the drafts kept per round."""
        return self.accepted / self.rounds if self.rounds else 0.0

    @property
    def closed_form_sum_min(self) -> float:
        """Σ min(p, q) averaged over the tested positions (diagnostics only)."""
        return self.sum_min_total / self.positions_tested if self.positions_tested else 0.0

    @property
    def closed_form_sum_prod(self) -> float:
        """Σ p·q averaged over the tested positions (diagnostics only)."""
        return self.sum_prod_total / self.positions_tested if self.positions_tested else 0.0

    @property
    def closed_form_accepted_len(self) -> float:
        """E[accepted | drafts] of the rule that ran, per round (diagnostics only)."""
        return self.accepted_len_total / self.rounds if self.rounds else 0.0

    @property
    def closed_form_block(self) -> float:
        """E[accepted | drafts] under block verification on the same drafts, per round."""
        return self.block_len_total / self.rounds if self.rounds else 0.0

    @property
    def accepted_len_z(self) -> float:
        """(accepted - Σ E[accepted | drafts]) / sqrt(Σ Var[accepted | drafts]).

        Given each round's drafts, its accepted count has the closed-form law the
        sums read, so the numerator is a martingale with that variance: a correct
        rule reads a z within 4 of zero.
        """
        difference = self.accepted - self.accepted_len_total
        if self.accepted_len_variance_total > 0:
            return float(difference / math.sqrt(self.accepted_len_variance_total))
        return 0.0 if abs(difference) < 1e-6 else math.copysign(math.inf, difference)

    def summary_line(self) -> str:
        """The stable, greppable one-line summary of the run."""
        line = (
            f"[Speculative acceptance] rule={self.rule.value} rounds={self.rounds} "
            f"proposed={self.proposed} positions_tested={self.positions_tested} "
            f"accepted={self.accepted} "
            f"per_position_acceptance={self.per_position_acceptance:.4f} "
            f"acceptance_rate={self.acceptance_rate:.4f} "
            f"mean_accepted_len={self.mean_accepted_len:.4f}"
        )
        if self.diagnostics:
            line += (
                f" closed_form_sum_min={self.closed_form_sum_min:.4f}"
                f" closed_form_sum_prod={self.closed_form_sum_prod:.4f}"
                f" closed_form_accepted_len={self.closed_form_accepted_len:.4f}"
                f" closed_form_block={self.closed_form_block:.4f}"
            )
        return line


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


def _make_cache(model: Any, name: str) -> list[Any]:
    from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache

    cache: list[Any] = make_prompt_cache(model)
    rotating = sorted({type(c).__name__ for c in cache if hasattr(c, "max_size")})
    if rotating:
        # A sliding-window cache reports itself trimmable until it fills, then trims nothing.
        raise ValueError(
            f"{name} uses a sliding-window cache {rotating}, which cannot be rewound once "
            "full: speculative decoding needs a trimmable prompt cache"
        )
    if not can_trim_prompt_cache(cache):
        kinds = sorted({type(c).__name__ for c in cache if not c.is_trimmable()})
        raise ValueError(
            f"{name} must have a trimmable prompt cache for speculative decoding, got {kinds}"
        )
    return cache


def _trim(cache: list[Any], count: int, name: str) -> None:
    if count:
        from mlx_lm.models.cache import trim_prompt_cache

        # mlx-lm annotates the return as a list, but it is the number of entries trimmed.
        trimmed: Any = trim_prompt_cache(cache, count)
        if trimmed != count:
            raise CacheInvariantError(f"the {name} cache trimmed {trimmed} of {count} entries")


def _offset(cache: list[Any]) -> int:
    return int(cache[0].offset)


def vocab_size_of(model: Any) -> int:
    """The vocabulary size a model declares (mlx-lm's `args.vocab_size`), else a probe."""
    args = getattr(model, "args", None)
    declared = getattr(args, "vocab_size", None)
    if isinstance(declared, int):
        return declared
    probe = model(mx.array([[0]]), cache=None)
    return int(probe.shape[-1])


def _check_prompt(prompt: Sequence[int], vocab_size: int) -> list[int]:
    tokens = list(prompt)
    if not tokens:
        raise ValueError("prompt must hold at least one token, got an empty prompt")
    for position, token in enumerate(tokens):
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"prompt[{position}] must be an int token id, got {token!r}")
        if not 0 <= token < vocab_size:
            raise ValueError(f"prompt[{position}] must lie in [0, {vocab_size}), got {token}")
    return tokens


def _check_model(name: str, model: object) -> None:
    if not callable(model):
        raise TypeError(
            f"{name} must be a model, callable as model(tokens[None], cache=cache), "
            f"got {type(model).__name__}"
        )


def _check_eos_token_ids(eos_token_ids: object) -> frozenset[int]:
    if isinstance(eos_token_ids, str | bytes) or not isinstance(eos_token_ids, Iterable):
        raise TypeError(
            "eos_token_ids must be a collection of int token ids (e.g. frozenset({2})), "
            f"got {type(eos_token_ids).__name__} {eos_token_ids!r}"
        )
    ids = frozenset(eos_token_ids)
    for token in ids:
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"eos_token_ids must hold int token ids, got {token!r}")
    return ids


def _check_run_arguments(max_tokens: int, seed: int, prefill_step_size: int) -> None:
    for name, value in (
        ("max_tokens", max_tokens), ("seed", seed), ("prefill_step_size", prefill_step_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed must lie in [0, 2**64), got {seed}")
    if prefill_step_size < 1:
        raise ValueError(f"prefill_step_size must be >= 1, got {prefill_step_size}")


def _prefill(model: Any, cache: list[Any], tokens: list[int], step: int) -> None:
    """Forward every prompt token but the last, in chunks of `step`."""
    body = tokens[:-1]
    for start in range(0, len(body), step):
        model(mx.array(body[start : start + step])[None], cache=cache)
        mx.eval([c.state for c in cache])


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
        num_draft_tokens: k, drafts per round (>= 1).
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
        round_observer: called with a `RoundObservation` after every round (for
            tracing; it costs one extra read-back of the round's rows).
        fast_path: sample and verify through `specaccept.shell.fused`, which
            returns what the core functions return, bit for bit, with fewer
            kernels; False runs the core functions as written. Samplers with
            history penalties or XTC always run the core functions.
    """

    target: Any
    drafter: Any
    target_config: SamplerConfig
    draft_config: SamplerConfig | None = None
    num_draft_tokens: int = 4
    rule: RuleChoice = "auto"
    eos_token_ids: frozenset[int] = field(default_factory=frozenset)
    check_caches: bool = False
    diagnostics: bool = False
    prefill_step_size: int = 512
    round_observer: Callable[[RoundObservation], None] | None = None
    fast_path: bool = True
    _fused: FusedSampler | None = field(init=False, repr=False)
    _observed: tuple[Any, Any, list[int], Any, int] = field(
        init=False, repr=False
    )

    def __post_init__(self) -> None:
        _check_model("target", self.target)
        _check_model("drafter", self.drafter)
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
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"num_draft_tokens must be an int >= 1, got {k!r}")
        # Before any model runs: a bad rule or a bad switch in the environment is an error now.
        self.acceptance_rule = choose_rule(self.rule, self.target_config)
        self.eos_token_ids = _check_eos_token_ids(self.eos_token_ids)
        self.vocab_size = vocab_size_of(self.target)
        draft_vocab = vocab_size_of(self.drafter)
        if draft_vocab != self.vocab_size:
            raise ValueError(
                f"drafter vocabulary ({draft_vocab}) differs from the target's "
                f"({self.vocab_size}): speculative decoding needs one shared vocabulary"
            )
        # Refuse a non-trimmable cache now, before a prompt is prefilled.
        _make_cache(self.target, "target")
        _make_cache(self.drafter, "drafter")
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

    @staticmethod
    def _sync(
        stats: SpeculativeStats, *arrays: mx.array, clock: RoundClock | None = None
    ) -> list[Any]:
        """The round's one host synchronisation: evaluate, then read back."""
        stats.host_syncs += 1
        if clock is None:
            mx.eval(*arrays)
        else:
            clock.synchronise(*arrays)
        return [array.tolist() for array in arrays]

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

    def generate(
        self, prompt: Sequence[int], max_tokens: int, *, seed: int = 0,
        clock: RoundClock | None = None,
    ) -> SpeculativeRun:
        """Start a run: iterate the result for the emitted blocks; its `stats` counts them.

        The arguments are checked here, before any model runs. The round that
        starts at output position n (0-based, counted from the first generated
        token) reads ``round_uniforms(seed, n, k)``: its accept tests and drafts
        keyed by (n, offset), fresh in every round, and the target's draw at each
        position m by m alone (spec/randomness.md). A `clock` times the run's
        drafting rounds (`RoundClock`).
        """
        _check_run_arguments(max_tokens, seed, self.prefill_step_size)
        tokens = _check_prompt(prompt, self.vocab_size)
        stats = SpeculativeStats(self.acceptance_rule, diagnostics=self.diagnostics)
        return SpeculativeRun(self._blocks(tokens, max_tokens, seed, stats, clock), stats)

    def _blocks(
        self, tokens: list[int], max_tokens: int, seed: int, stats: SpeculativeStats,
        clock: RoundClock | None,
    ) -> Iterator[list[int]]:
        assert self.draft_config is not None
        k_max = self.num_draft_tokens
        target_cache = _make_cache(self.target, "target")
        draft_cache = _make_cache(self.drafter, "drafter")
        _prefill(self.target, target_cache, tokens, self.prefill_step_size)
        _prefill(self.drafter, draft_cache, tokens, self.prefill_step_size)

        # The prompt and every emitted token so far; its last entry is `current`.
        history = mx.array(tokens, dtype=mx.int32)
        current = tokens[-1]
        backfill: list[int] = []  # the last draft of an all-accepted round, owed to the drafter
        generated = 0
        while generated < max_tokens:
            k = min(k_max, max_tokens - generated - 1)
            offsets_before = (_offset(target_cache), _offset(draft_cache), len(backfill) + 1)
            if k == 0:
                # One token left: a plain target step decides it.
                emitted = self._final_step(
                    stats, target_cache, history, current, generated, seed
                )
            else:
                if clock is not None:
                    clock.start_round()
                emitted, owes_backfill = self._round(
                    stats, target_cache, draft_cache, history, current, backfill, generated, k,
                    seed, clock,
                )
                if clock is not None:
                    clock.end_round()
                # The drafter never forwarded the round's last draft, emitted just before
                # the bonus token: it leads the next round's first drafter forward.
                backfill = [emitted[-2]] if owes_backfill else []
            # EOS anywhere in the block ends the run at it.
            cut = next(
                (i + 1 for i, t in enumerate(emitted) if t in self.eos_token_ids), len(emitted)
            )
            emitted = emitted[:cut]
            generated += len(emitted)
            stats.generated = generated
            if self.round_observer is not None:
                self._observe(
                    emitted, generated, max_tokens, offsets_before, target_cache, draft_cache
                )
            yield emitted
            if emitted[-1] in self.eos_token_ids or generated == max_tokens:
                return
            history = mx.concatenate([history, mx.array(emitted, dtype=mx.int32)])
            current = emitted[-1]
            if self.check_caches:
                self._check_offsets(
                    stats.rounds, target_cache, draft_cache, backfill, history.shape[0] - 1
                )

    def _observe(
        self, emitted: list[int], generated: int, max_tokens: int,
        offsets_before: tuple[int, int, int], target_cache: list[Any], draft_cache: list[Any],
    ) -> None:
        assert self.round_observer is not None
        target_probs, draft_probs, drafts, uniforms, accepted = self._observed
        has_drafts = bool(drafts)
        self.round_observer(RoundObservation(
            position=generated - len(emitted), rule=self.acceptance_rule,
            target_probs=target_probs, draft_probs=draft_probs, draft_tokens=drafts,
            uniforms=uniforms, num_accepted=accepted, emitted=emitted,
            stopped=emitted[-1] in self.eos_token_ids or generated == max_tokens,
            target_offset_before=offsets_before[0],
            draft_offset_before=offsets_before[1] if has_drafts else None,
            draft_fed=offsets_before[2] if has_drafts else 0,
            target_offset_after=_offset(target_cache),
            draft_offset_after=_offset(draft_cache) if has_drafts else None,
        ))

    @staticmethod
    def _check_offsets(
        rounds: int, target_cache: list[Any], draft_cache: list[Any], backfill: list[int],
        before: int,
    ) -> None:
        target_offset, draft_offset = _offset(target_cache), _offset(draft_cache)
        if target_offset != before or draft_offset + len(backfill) != before:
            raise CacheInvariantError(
                f"after round {rounds}: {before} tokens precede the current token, "
                f"but the target cache holds {target_offset} and the drafter cache "
                f"{draft_offset} (+{len(backfill)} owed)"
            )

    def _final_step(
        self,
        stats: SpeculativeStats,
        target_cache: list[Any],
        history: mx.array,
        current: int,
        position: int,
        seed: int,
    ) -> list[int]:
        logits = self.target(mx.array([current])[None], cache=target_cache)[0, -1]
        check_width(logits, self.vocab_size, "the target")
        probs = effective_token_distribution(logits, self.target_config, history)
        uniforms = round_uniforms(seed, position, 0).verify
        token = sample_from_distribution(probs, uniforms[0][1])
        stats.rounds += 1
        observed = [probs[None]] if self.round_observer is not None else []
        token_value, invalid, *rows = self._sync(
            stats, token, invalid_rows(logits[None], probs[None]), *observed
        )
        if rows:
            self._observed = (rows[0], None, [], uniforms, 0)
        raise_on_invalid(invalid, "the target", position)
        return [int(token_value)]

    def _round(
        self,
        stats: SpeculativeStats,
        target_cache: list[Any],
        draft_cache: list[Any],
        history: mx.array,
        current: int,
        backfill: list[int],
        position: int,
        k: int,
        seed: int,
        clock: RoundClock | None = None,
    ) -> tuple[list[int], bool]:
        assert self.draft_config is not None
        rule, fused = self.acceptance_rule, self._fused
        keep_q = (rule.needs_proposal_distribution or self.diagnostics
                  or self.round_observer is not None)
        draft_history = history
        drafts: list[mx.array] = []
        draft_probs: list[mx.array] = []
        # Each draft's logits and law are checked as it is sampled; the codes ride the sync.
        draft_checks: list[mx.array] = []
        # Keyed by the round's first position: fresh in every round, under every rule.
        round_randomness = round_uniforms(seed, position, k)
        draft_uniforms = mx.array(round_randomness.draft, dtype=mx.float32)
        step_input = mx.array([*backfill, current])
        for j in range(k):
            logits = self.drafter(step_input[None], cache=draft_cache)[0, -1]
            check_width(logits, self.vocab_size, "the drafter")
            if clock is not None:
                clock.phase("drafter forward", logits)
            if fused is not None:
                token, q, check = fused.draft_step(logits, draft_uniforms[j])
                check = check[None]
            else:
                token, q = sample_token_with_distribution(
                    logits, self.draft_config, draft_history, draft_uniforms[j]
                )
                check = invalid_rows(logits[None], q[None])
                draft_history = mx.concatenate([draft_history, token.reshape(1)])
            _launch(clock, token)  # the draft's work starts while Python builds the next step
            if clock is not None:
                clock.phase("draft sampling", token, q, check)
            drafts.append(token)
            draft_checks.append(check)
            if keep_q:
                draft_probs.append(q)
            step_input = token.reshape(1)

        draft_tokens = mx.stack(drafts)
        target_input = mx.concatenate([mx.array([current], dtype=mx.int32), draft_tokens])
        target_logits = self.target(target_input[None], cache=target_cache)[0]
        check_width(target_logits, self.vocab_size, "the target")
        _launch(clock, target_logits)  # the device runs it while Python builds the verdict
        if clock is not None:
            clock.phase("target forward", target_logits)
        proposal = mx.stack(draft_probs) if keep_q else None
        uniforms = mx.array(round_randomness.verify, dtype=mx.float32)
        needed_q = proposal if rule.needs_proposal_distribution else None
        joint = None
        if fused is not None:
            fused_verdict = fused.verify_round(
                rule, target_logits, needed_q, draft_tokens, uniforms
            )
            verdict = BlockVerdict(fused_verdict.num_accepted, fused_verdict.next_token)
            target_probs, target_invalid = fused_verdict.target_probs, fused_verdict.invalid
        else:
            target_probs = self._target_rows(target_logits, history, drafts)
            if rule.verifies_jointly:
                assert proposal is not None
                joint = verify_blockwise(target_probs, proposal, draft_tokens, uniforms)
                verdict = BlockVerdict(joint.num_accepted, joint.next_token)
            else:
                verdict = verify_tokenwise(rule, target_probs, needed_q, draft_tokens, uniforms)
            target_invalid = invalid_rows(target_logits, target_probs)
        draft_invalid = mx.concatenate(draft_checks)
        outputs = [verdict.num_accepted, verdict.next_token, draft_tokens,
                   target_invalid, draft_invalid]
        if clock is not None:
            clock.phase("sampling and verification", *outputs)
        if self.diagnostics:
            assert proposal is not None
            forms = acceptance_closed_forms(target_probs[:k], proposal)
            if joint is None:
                joint = verify_blockwise(target_probs, proposal, draft_tokens, uniforms)
            block_survival = _survival(joint.accepted_length_law)
            survival = (block_survival if rule.verifies_jointly
                        else _token_survival(rule, target_probs[:k], proposal, draft_tokens))
            outputs += [forms.sum_min, forms.sum_prod, survival, block_survival]
        if self.round_observer is not None:
            assert proposal is not None
            outputs += [target_probs, proposal, uniforms]
        values = self._sync(stats, *outputs, clock=clock)
        accepted, next_token, draft_values, target_invalid, draft_invalid = values[:5]
        # Rows past the emitted block decide nothing; only a row that decided a token counts.
        raise_on_invalid(draft_invalid[: accepted + 1], "the drafter", position)
        raise_on_invalid(target_invalid[: accepted + 1], "the target", position)

        tested = min(accepted + 1, k)
        stats.rounds += 1
        stats.proposed += k
        stats.positions_tested += tested
        stats.accepted += accepted
        if self.diagnostics:
            stats.sum_min_total += sum(values[5][:tested])
            stats.sum_prod_total += sum(values[6][:tested])
            # P(accepted >= i | drafts), i = 1..k: the mean is their sum, and
            # E[accepted^2] = Σ (2i - 1) P(accepted >= i).
            survival = values[7]
            mean = sum(survival)
            stats.accepted_len_total += mean
            stats.accepted_len_variance_total += max(
                sum((2 * i + 1) * s for i, s in enumerate(survival)) - mean * mean, 0.0
            )
            stats.block_len_total += sum(values[8])

        if self.round_observer is not None:
            self._observed = (*values[-3:-1], draft_values, values[-1], accepted)
        plan = rewind_trim(k, accepted)
        _trim(target_cache, plan.target_trim, "target")
        _trim(draft_cache, plan.draft_trim, "drafter")
        return [*draft_values[:accepted], next_token], plan.draft_backfill


def _launch(clock: RoundClock | None, *arrays: mx.array) -> None:
    """Start the arrays' work on the device now, without a host synchronisation.

    A phased clock evaluates each phase itself, and must find its work not yet
    started, or the device time would land in the Python between phases.
    """
    if clock is None or not clock.phased:
        mx.async_eval(*arrays)  # type: ignore[no-untyped-call]  # mlx ships it untyped


def _survival(law: mx.array) -> mx.array:
    """P(tau >= i), i = 1..k, from the law of tau over 0..k."""
    return mx.cumsum(law[::-1])[::-1][1:]


def _token_survival(
    rule: AcceptanceRule, target_probs: mx.array, draft_probs: mx.array, draft_tokens: mx.array
) -> mx.array:
    """P(accepted >= i | drafts), i = 1..k, for a rule that verifies token by token.

    Position j keeps its draft t with probability c_j given t: min(1, p(t)/q(t)) for
    stochastic (0 when p(t) = 0, 1 when q(t) = 0 < p(t)), p(t) for sampler-match (the
    target's draw equals t), [t = argmax p] for greedy-argmax; the prefix survives
    position i with probability c_1 ... c_i.
    """
    p_t = mx.take_along_axis(target_probs, draft_tokens[:, None], axis=-1)[:, 0]
    if rule is AcceptanceRule.STOCHASTIC:
        q_t = mx.take_along_axis(draft_probs, draft_tokens[:, None], axis=-1)[:, 0]
        ratio = mx.minimum(p_t / mx.where(q_t > 0, q_t, 1.0), 1.0)
        keep = mx.where(p_t > 0, mx.where(q_t > 0, ratio, 1.0), 0.0)
    elif rule is AcceptanceRule.GREEDY_ARGMAX:
        keep = (mx.argmax(target_probs, axis=-1) == draft_tokens).astype(mx.float32)
    else:
        keep = p_t
    return mx.cumprod(keep)


def target_only_generate(
    target: Any,
    prompt: Sequence[int],
    config: SamplerConfig,
    max_tokens: int,
    *,
    seed: int = 0,
    eos_token_ids: frozenset[int] = frozenset(),
    prefill_step_size: int = 512,
    fast_path: bool = True,
) -> Iterator[int]:
    """Sample the target alone, one token per forward, with the generator's randomness.

    Output position n draws with ``position_uniform(seed, n, SAMPLE)``, the
    uniform a speculative round's sampler-match draw uses, so the two streams
    coincide under sampler-match (up to the numerics of a batched forward).
    `fast_path` means what it means for `SpeculativeGenerator`.
    """
    _check_model("target", target)
    if not isinstance(config, SamplerConfig):
        raise TypeError(f"config must be a SamplerConfig, got {type(config).__name__}")
    eos_token_ids = _check_eos_token_ids(eos_token_ids)
    _check_run_arguments(max_tokens, seed, prefill_step_size)
    vocab_size = vocab_size_of(target)
    tokens = _check_prompt(prompt, vocab_size)
    cache = _make_cache(target, "target")
    _prefill(target, cache, tokens, prefill_step_size)
    history = mx.array(tokens, dtype=mx.int32)
    # Compiled: a compiled target-only step measured faster than plain or core steps.
    fused = fused_sampler(config, config) if fast_path and FusedSampler.serves(config) else None

    def step(history: mx.array, position: int) -> tuple[mx.array, mx.array]:
        logits = target(history[-1:][None], cache=cache)[0, -1]
        check_width(logits, vocab_size, "the target")
        if fused is not None:
            u = mx.array(position_uniform(seed, position, SAMPLE), dtype=mx.float32)
            token, invalid = fused.target_step(logits, u)
            return token, invalid[None]
        probs = effective_token_distribution(logits, config, history)
        token = sample_from_distribution(probs, position_uniform(seed, position, SAMPLE))
        return token, invalid_rows(logits[None], probs[None])

    if max_tokens == 0:
        return
    # Pipelined like mlx-lm's generate_step: position n + 1 is queued on the lazy
    # token of position n before n is read back, so the forward never waits on Python.
    pending = step(history, 0)
    mx.async_eval(*pending)  # type: ignore[no-untyped-call]
    for position in range(max_tokens):
        token, invalid = pending
        history = mx.concatenate([history, token.reshape(1)])
        if position + 1 < max_tokens:
            pending = step(history, position + 1)
            mx.async_eval(*pending)  # type: ignore[no-untyped-call]
        raise_on_invalid(cast("list[int]", invalid.tolist()), "the target", position)
        value = token.item()
        assert isinstance(value, int)
        yield value
        if value in eos_token_ids:
            return
