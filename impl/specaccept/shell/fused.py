"""The round's sampling and verification as a fast path, proved equal to the core.

The core functions (`effective_token_distribution`, `sample_from_distribution`,
`verify_tokenwise`) are the normative reference: readable, one concept each, validated.
At a 128k vocabulary a round pays every full-vocabulary pass of theirs k + 1 times,
and on a GPU every pass is a kernel launch. This module computes the same values
bit for bit with fewer passes:

- `draw_from_distribution` finds the inverse-CDF draw with one reduction after the
  cumulative sum, where the reference runs four (two argmaxes, an any, a where);
- `invalid_row_codes` classifies a row (its logits and its sampler law) with two
  reductions where the reference runs five;
- `FusedSampler` wraps a draft step, a target-only step and a whole round's target
  side (the target's rows, the guard, the verdict) each in one `mx.compile`d
  function, so the elementwise work between reductions runs fused.

Every function here returns what its reference returns on the same inputs, exactly:
tests/test_fused.py replays the golden vectors and random inputs through both. The
fused functions contain no multiply-then-add, so a compiler contracting one into an
FMA cannot change a rounding. Configurations whose reference does (the history
penalties, the XTC mixture) are not served here; `FusedSampler.serves` says which.

`mx.compile` needs a C++ compiler on the CPU. Where compiling fails, the fast path
runs its functions uncompiled (the same values, more kernels) and logs it once;
`compile_status` reports which of the two is in use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple, TypeVar, cast

import mlx.core as mx

from specaccept.core import validation
from specaccept.core.acceptance import (
    AcceptanceRule,
    accept_draft_token,
    residual_distribution,
)
from specaccept.core.joint import verify_blockwise
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.sampling import effective_token_distribution
from specaccept.shell.guards import RowCode

__all__ = [
    "DraftStep",
    "FusedSampler",
    "RoundVerdict",
    "compile_status",
    "compiled_per_shape",
    "draw_by_first_eligible",
    "draw_from_distribution",
    "fused_sampler",
    "fused_verify_tokenwise",
    "invalid_row_codes",
]

logger = logging.getLogger("specaccept")

_INF = float("inf")

F = TypeVar("F", bound=Callable[..., object])


def draw_from_distribution(probs: mx.array, u: mx.array) -> mx.array:
    """`sample_from_distribution` on validated arrays, with one reduction after the cumsum.

    The reference picks the first eligible id (``cumsum > u * total`` and positive)
    and falls back to the last positive id when none is eligible. One key per id
    encodes both orders: eligible ids map to ``2V - i`` (the smallest such i has the
    largest key), positive ones to ``i`` (the largest has the largest key), the
    rest to -1. Eligible keys exceed V - 1 >= every positive key, so the maximum
    key is the reference's choice, decoded; a row with no positive entry (NaN
    probabilities) decodes to V - 1 as the reference's fallback does.

    Args:
        probs: `[V]` or `[R, V]` float32.
        u: float32 of shape ``probs.shape[:-1]``.
    """
    vocab_size = probs.shape[-1]
    positive = probs > 0
    partial_sums = mx.cumsum(probs, axis=-1)
    eligible = (partial_sums > u[..., None] * partial_sums[..., -1:]) & positive
    ids = mx.arange(vocab_size, dtype=mx.int32)
    key = mx.where(eligible, 2 * vocab_size - ids, mx.where(positive, ids, -1))
    best = mx.max(key, axis=-1)
    return mx.where(
        best >= vocab_size, 2 * vocab_size - best, mx.where(best >= 0, best, vocab_size - 1)
    )


def draw_by_first_eligible(probs: mx.array, u: mx.array) -> mx.array:
    """`sample_from_distribution` on validated arrays, in the reference's own formulation.

    Four reductions (two argmaxes, an any) but fewer operations than
    `draw_from_distribution`: run uncompiled, where every operation is a kernel
    launch, it launches 11 kernels to that function's 15; compiled, where the
    elementwise work fuses, `draw_from_distribution`'s single reduction wins.
    """
    vocab_size = probs.shape[-1]
    positive = probs > 0
    partial_sums = mx.cumsum(probs, axis=-1)
    threshold = u[..., None] * partial_sums[..., -1:]
    eligible = (partial_sums > threshold) & positive
    first_eligible = mx.argmax(eligible, axis=-1)
    last_positive = vocab_size - 1 - mx.argmax(positive[..., ::-1], axis=-1)
    return mx.where(eligible.any(axis=-1), first_eligible, last_positive).astype(mx.int32)


def _greedy_or(
    config: SamplerConfig, draw: Callable[[mx.array, mx.array], mx.array]
) -> Callable[[mx.array, mx.array], mx.array]:
    """The draw for `config`: under a greedy config, the one-hot law's argmax.

    A greedy config's law is the one-hot indicator of one id, whose cumulative sums
    are 0 before it and exactly 1 from it on: for every u in [0, 1) the inverse-CDF
    draw picks that id, the one an argmax of the law finds.
    """
    if not config.is_greedy:
        return draw

    def argmax_of_one_hot(probs: mx.array, u: mx.array) -> mx.array:
        return mx.argmax(probs, axis=-1).astype(mx.int32)

    return argmax_of_one_hot


def invalid_row_codes(logits: mx.array, probs: mx.array) -> mx.array:
    """`invalid_rows`, the shell's row guard: each row's `RowCode`, in two passes.

    NOT_FINITE: NaN or +inf logits; ALL_MASKED: -inf everywhere (a single -inf is a
    legitimate mask); NO_MASS: the sampler law `probs` is not finite with a positive
    sum. One max over the logits with NaN read as +inf is +inf exactly when some
    entry is NaN or +inf, and -inf exactly when every entry is -inf. One sum decides
    the law: `probs` comes from `effective_token_distribution`, so each entry is NaN
    or lies in [0, 1]; the sum is then NaN exactly when an entry is, and otherwise
    finite, so ``sum > 0`` fails exactly when the law is not finite or has no mass.

    >>> import mlx.core as mx
    >>> inf, nan = float("inf"), float("nan")
    >>> logits = mx.array([[0.0, -inf], [0.0, nan], [-inf, -inf], [0.0, 0.0]])
    >>> probs = mx.array([[1.0, 0.0], [nan, nan], [nan, nan], [0.0, 0.0]])
    >>> invalid_row_codes(logits, probs).tolist()
    [0, 1, 2, 3]
    """
    top = mx.max(mx.where(mx.isnan(logits), _INF, logits), axis=-1)
    has_mass = probs.sum(axis=-1) > 0
    return mx.where(
        top == _INF, RowCode.NOT_FINITE,
        mx.where(top == -_INF, RowCode.ALL_MASKED,
                 mx.where(has_mass, RowCode.VALID, RowCode.NO_MASS)),
    )


def fused_verify_tokenwise(
    rule: AcceptanceRule, target_probs: mx.array, draft_probs: mx.array | None,
    draft_tokens: mx.array, uniforms: mx.array,
    draw: Callable[[mx.array, mx.array], mx.array] = draw_from_distribution,
) -> tuple[mx.array, mx.array]:
    """`verify_tokenwise`'s (num_accepted, next_token) on validated arrays, drawing faster.

    The same steps as the reference, with `draw` (`draw_from_distribution` or
    `draw_by_first_eligible`, equal on every input) for the draw; an id outside [0, V) is
    no draft there too (rejected, the target's own row drawn instead of the residual).
    """
    if rule.verifies_jointly:
        raise ValueError(f"rule {rule.value!r} is verify_blockwise, not verify_tokenwise")
    k = draft_tokens.shape[0]
    ids = validation.draft_ids("draft_tokens", draft_tokens, vocab_size=target_probs.shape[-1],
                               batch_shape=(k,))
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        candidates = mx.argmax(target_probs, axis=-1).astype(mx.int32)
        accepted = mx.logical_and(ids.valid, candidates[:k] == ids.clamped)
    elif rule is AcceptanceRule.STOCHASTIC:
        assert draft_probs is not None
        accepted = accept_draft_token(target_probs[:k], draft_probs, draft_tokens, uniforms[:k, 0])
        replacement = mx.where(ids.valid[:, None],
                               residual_distribution(target_probs[:k], draft_probs),
                               target_probs[:k])
        rows = mx.concatenate([replacement, target_probs[k:]])
        candidates = draw(rows, uniforms[:, 1])
    else:
        candidates = draw(target_probs, uniforms[:, 1])
        accepted = mx.logical_and(ids.valid, candidates[:k] == ids.clamped)
    num_accepted = mx.cumprod(accepted.astype(mx.int32)).sum().astype(mx.int32)
    return num_accepted, candidates[num_accepted]


@lru_cache(maxsize=1)
def _compile_works() -> str | None:
    """None when `mx.compile` fuses here; otherwise why it cannot (probed once)."""
    def probe(x: mx.array) -> mx.array:
        return mx.where(x > 0, x / 2, -x)

    try:
        x = mx.array([1.0, -2.0])
        if mx.compile(probe)(x).tolist() != [0.5, 2.0]:
            return "mx.compile returned a wrong probe value"
    except Exception as error:  # a missing C++ compiler surfaces as a RuntimeError
        return f"{type(error).__name__}: {error}"
    return None


def compile_status() -> str:
    """'compiled', or 'uncompiled (<reason>)' when `mx.compile` is unavailable here."""
    reason = _compile_works()
    return "compiled" if reason is None else f"uncompiled ({reason})"


def _compiled(function: F) -> F:
    reason = _compile_works()
    if reason is None:
        return cast(F, mx.compile(function))
    logger.warning(
        "mx.compile is unavailable (%s): the fused path runs uncompiled, "
        "with the same results and more kernels", reason,
    )
    return function


def _plain(function: F) -> F:
    return function


def compiled_per_shape(function: F) -> F:
    """`function` compiled once per input signature, each signature its own `mx.compile`.

    One compiled function retraces for each new input shape and keeps every trace;
    here each signature (the inputs' shapes and dtypes) gets a compiled function of its
    own, so no compiled function ever sees two shapes.
    """
    compiled: dict[tuple[object, ...], Callable[..., object]] = {}

    def call(*arrays: mx.array) -> object:
        signature = tuple((tuple(a.shape), a.dtype) for a in arrays)
        if signature not in compiled:
            # A fresh function object: mx.compile keys its cache by the function's id.
            compiled[signature] = mx.compile(lambda *inputs: function(*inputs))
        return compiled[signature](*arrays)

    return cast(F, call)


class DraftStep(NamedTuple):
    """One draft: the token, the law q it was drawn from, and its logits' validity code."""

    token: mx.array
    """0-d int32."""
    probs: mx.array
    """`[V]` float32, what `sample_token_with_distribution` returns as probs."""
    invalid: mx.array
    """0-d int32, the row guard's code (`invalid_row_codes`)."""


class RoundVerdict(NamedTuple):
    """A round's target side: the verdict, the target's rows and their validity codes."""

    num_accepted: mx.array
    next_token: mx.array
    target_probs: mx.array
    invalid: mx.array
    """`[k+1]` int32 codes, one per target row."""


class FusedSampler:
    """The fast path for one target sampler and one drafter sampler.

    Args:
        target_config, draft_config: the samplers; both must be `serves`-able.
        compiled: run the functions through `mx.compile` (where it works here);
            False runs them as plain MLX calls, with the same results.

    Raises:
        ValueError: a config this path does not serve (history penalties or XTC).
    """

    def __init__(
        self, target_config: SamplerConfig, draft_config: SamplerConfig, *, compiled: bool = True
    ) -> None:
        for name, config in (("target_config", target_config), ("draft_config", draft_config)):
            if not self.serves(config):
                raise ValueError(
                    f"{name} uses history penalties or XTC, which the fused path does not "
                    f"serve; run the reference path for it, got {config!r}"
                )
        self.target_config = target_config
        self.draft_config = draft_config
        self.compiled = compiled
        # Each draw in the formulation that launches fewer kernels in this mode.
        draw = draw_from_distribution if compiled else draw_by_first_eligible
        self._draft_draw = _greedy_or(draft_config, draw)
        self._target_draw = _greedy_or(target_config, draw)
        self._verify_draw = draw
        wrap = _compiled if compiled else _plain
        self._wrap = wrap
        self._draft_step = wrap(self._draft_step_uncompiled)
        self._target_step = wrap(self._target_step_uncompiled)
        self._rounds: dict[AcceptanceRule, Callable[..., tuple[mx.array, ...]]] = {}

    @staticmethod
    def serves(config: SamplerConfig) -> bool:
        """True when `config` needs no token history and no XTC mixture."""
        return not config.uses_history and config.xtc_probability == 0.0

    def _draft_step_uncompiled(
        self, logits: mx.array, u: mx.array
    ) -> tuple[mx.array, mx.array, mx.array]:
        probs = effective_token_distribution(logits, self.draft_config)
        token = self._draft_draw(probs, u)
        return token, probs, invalid_row_codes(logits, probs)

    def draft_step(self, logits: mx.array, u: mx.array) -> DraftStep:
        """`sample_token_with_distribution(logits, draft_config, (), u)` and the guard code.

        Args:
            logits: `[V]` logits of a float dtype.
            u: a 0-d float32 array (an array, so that no new value retraces).
        """
        return DraftStep(*self._draft_step(logits, u))

    def _target_step_uncompiled(
        self, logits: mx.array, u: mx.array
    ) -> tuple[mx.array, mx.array]:
        probs = effective_token_distribution(logits, self.target_config)
        return self._target_draw(probs, u), invalid_row_codes(logits, probs)

    def target_step(self, logits: mx.array, u: mx.array) -> tuple[mx.array, mx.array]:
        """One target-only token from `[V]` logits with 0-d `u`, and the logits' code."""
        token, invalid = self._target_step(logits, u)
        return token, invalid

    def verify_round(
        self, rule: AcceptanceRule, target_logits: mx.array, draft_probs: mx.array | None,
        draft_tokens: mx.array, uniforms: mx.array,
    ) -> RoundVerdict:
        """The target rows, their codes and `verify_tokenwise`'s verdict, in one fused call.

        Args:
            rule: the acceptance rule.
            target_logits: `[k+1, V]` logits of a float dtype.
            draft_probs: `[k, V]` float32 when the rule reads q, else None.
            draft_tokens: `[k]` int32.
            uniforms: `[k+1, 2]` float32.
        """
        if rule not in self._rounds:
            self._rounds[rule] = self._wrap(self._round_function(rule))
        if rule.needs_proposal_distribution:
            assert draft_probs is not None
            outputs = self._rounds[rule](target_logits, draft_probs, draft_tokens, uniforms)
        else:
            outputs = self._rounds[rule](target_logits, draft_tokens, uniforms)
        return RoundVerdict(*outputs)

    def _round_function(self, rule: AcceptanceRule) -> Callable[..., tuple[mx.array, ...]]:
        config, draw = self.target_config, self._verify_draw

        def with_proposal(
            logits: mx.array, draft_probs: mx.array, tokens: mx.array, uniforms: mx.array
        ) -> tuple[mx.array, ...]:
            probs = effective_token_distribution(logits, config)
            if rule.verifies_jointly:
                # Block verification runs the core function itself: the same values, with
                # the fused rows and codes around it.
                joint = verify_blockwise(probs, draft_probs, tokens, uniforms)
                verdict: tuple[mx.array, mx.array] = (joint.num_accepted, joint.next_token)
            else:
                verdict = fused_verify_tokenwise(rule, probs, draft_probs, tokens, uniforms, draw)
            return (*verdict, probs, invalid_row_codes(logits, probs))

        def without_proposal(
            logits: mx.array, tokens: mx.array, uniforms: mx.array
        ) -> tuple[mx.array, ...]:
            probs = effective_token_distribution(logits, config)
            verdict = fused_verify_tokenwise(rule, probs, None, tokens, uniforms, draw)
            return (*verdict, probs, invalid_row_codes(logits, probs))

        return with_proposal if rule.needs_proposal_distribution else without_proposal


@lru_cache(maxsize=16)
def fused_sampler(
    target_config: SamplerConfig, draft_config: SamplerConfig, *, compiled: bool = True
) -> FusedSampler:
    """The `FusedSampler` of a pair of configs, built once, so that its compiled functions
    are traced once per process rather than once per run."""
    return FusedSampler(target_config, draft_config, compiled=compiled)
