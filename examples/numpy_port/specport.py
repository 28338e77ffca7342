"""The speculative-acceptance spec, ported to NumPy from the pages of spec/ alone.

A second implementation, written the way an engine team would write theirs: every function
below follows its spec page (spec/<name>.md), in float32, in the operation order of
spec/float32_operation_order.md, and rejects what spec/validation.md says
a port must reject, raising `ArgumentTypeError` or `ArgumentValueError` (subclasses of
`TypeError` and `ValueError`) that carry the `argument` they name. It imports no MLX.

`serve.py` puts it behind the JSON-line protocol of spec/vectors/schema.md, so that
``specaccept vectors check --port "python examples/numpy_port/serve.py"`` replays every golden
vector through it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

F32 = np.float32
NEG_INF = F32(-np.inf)
DRY_PENALTY_CAP = F32(1e30)
RULES = ("greedy-argmax", "sampler-match", "stochastic", "sampler-match-no-proposal-distribution",
         "block")
JOINT_RULES = ("block",)
"""Rules whose decisions are not one per position (verify_blockwise.md)."""
FLOAT32_MAX = float(np.finfo(np.float32).max)
SMALLEST_TEMPERATURE = 2.0**-126  # float32's smallest normal
ADJUSTMENT_LIMIT = 2.0**64  # |logit bias|, |frequency penalty|, |presence penalty|
MAX_TOKEN_ID = 2**31 - 1  # ids are int32

Array = NDArray[Any]


# --- validation (spec/validation.md) -----------------------------------------------------------


class ArgumentTypeError(TypeError):
    """An argument of the wrong type or dtype."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message)
        self.argument = argument


class ArgumentValueError(ValueError):
    """An argument of the wrong shape, or out of range."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message)
        self.argument = argument


def is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def is_real(value: object) -> bool:
    return (isinstance(value, int | float | np.integer | np.floating)
            and not isinstance(value, bool | np.bool_))


def require_array(name: str, value: object) -> Array:
    if not isinstance(value, np.ndarray):
        raise ArgumentTypeError(name, f"{name} must be an array, got {type(value).__name__}")
    return value


def require_probabilities(name: str, value: object, ndims: tuple[int, ...]) -> Array:
    array = require_array(name, value)
    if array.ndim not in ndims:
        raise ArgumentValueError(name, f"{name} must have rank {ndims}, got {array.shape}")
    if array.dtype != np.float32:
        raise ArgumentTypeError(name, f"{name} must be float32, got {array.dtype}")
    if array.shape[-1] < 1:
        raise ArgumentValueError(name, f"{name} must have a non-empty vocabulary axis")
    if array.ndim == 2 and array.shape[0] < 1:
        raise ArgumentValueError(name, f"{name} must hold at least one row")
    return array


def require_same_shape(name: str, a: Array, b: Array) -> None:
    if a.shape != b.shape:
        raise ArgumentValueError(name, f"p and {name} must have the same shape")


def uniform(name: str, value: object, batch_shape: tuple[int, ...]) -> Array:
    if isinstance(value, bool | np.bool_):
        raise ArgumentTypeError(name, f"{name} must be a number, got a bool")
    if is_real(value):
        number = float(value)  # type: ignore[arg-type]
        if not (math.isfinite(number) and 0.0 <= number < 1.0):
            raise ArgumentValueError(name, f"{name} must lie in [0, 1), got {number}")
        return np.full(batch_shape, number, dtype=F32)
    if isinstance(value, np.ndarray):
        if not np.issubdtype(value.dtype, np.floating):
            raise ArgumentTypeError(name, f"{name} must be a floating array")
        if value.shape != batch_shape:
            raise ArgumentValueError(name, f"{name} must have shape {batch_shape}")
        return value.astype(F32)
    raise ArgumentTypeError(name, f"{name} must be a number or an array")


def token_id(name: str, value: object, vocab_size: int, batch_shape: tuple[int, ...]) -> Array:
    if isinstance(value, bool | np.bool_):
        raise ArgumentTypeError(name, f"{name} must be a token id, got a bool")
    if is_int(value):
        number = int(value)  # type: ignore[call-overload]
        if not 0 <= number < vocab_size:
            raise ArgumentValueError(name, f"{name} must lie in [0, {vocab_size}), got {number}")
        return np.full(batch_shape, number, dtype=np.int32)
    if isinstance(value, np.ndarray):
        if not np.issubdtype(value.dtype, np.integer):
            raise ArgumentTypeError(name, f"{name} must be an integer array")
        if value.shape != batch_shape:
            raise ArgumentValueError(name, f"{name} must have shape {batch_shape}")
        return value.astype(np.int32)
    raise ArgumentTypeError(name, f"{name} must be an int or an array")


class DraftIds(NamedTuple):
    """spec/validation.md: an array id outside [0, V) is a placeholder, no draft."""
    clamped: Array  # int32: the id where it is a draft, else 0 (safe to gather with)
    valid: Array  # bool: 0 <= id < V


def in_vocabulary(ids: Array, vocab_size: int) -> Array:
    # Compared before any narrowing: int64 2**32 must not wrap to id 0.
    if ids.dtype == np.uint64:
        return ids < vocab_size
    wide = ids.astype(np.int64)
    return (wide >= 0) & (wide < vocab_size)


def draft_ids(name: str, value: object, vocab_size: int, batch_shape: tuple[int, ...]) -> DraftIds:
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.integer):
        if value.shape != batch_shape:
            raise ArgumentValueError(name, f"{name} must have shape {batch_shape}")
        valid = in_vocabulary(value, vocab_size)
        return DraftIds(np.where(valid, value, 0).astype(np.int32), valid)
    ids = token_id(name, value, vocab_size, batch_shape)
    return DraftIds(ids, np.ones(ids.shape, dtype=bool))


def token_history(name: str, value: object, vocab_size: int) -> Array:
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ArgumentValueError(name, f"{name} must be 1-d")
        if not value.size:
            return value.astype(np.int32)
        if not np.issubdtype(value.dtype, np.integer):
            raise ArgumentTypeError(name, f"{name} must be an integer array")
        # An id outside [0, V) is no token: -1, which no penalty counts and DRY breaks at.
        valid = in_vocabulary(value, vocab_size)
        return np.where(valid, np.where(valid, value, 0).astype(np.int32), np.int32(-1))
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ArgumentTypeError(name, f"{name} must be a sequence of token ids")
    ids = [int(token_id(name, item, vocab_size, ())) for item in value]
    return np.array(ids, dtype=np.int32)


def real(name: str, value: object) -> float:
    if not is_real(value):
        raise ArgumentTypeError(name, f"{name} must be a real number, got {value!r}")
    number = float(value)  # type: ignore[arg-type]
    if not math.isfinite(number):
        raise ArgumentValueError(name, f"{name} must be finite, got {number}")
    return number


def integer(name: str, value: object) -> int:
    if not is_int(value):
        raise ArgumentTypeError(name, f"{name} must be an int, got {value!r}")
    assert isinstance(value, int | np.integer)
    return int(value)


# --- SamplerConfig (spec/sampler_config.md) ------------------------------------------------


@dataclass(frozen=True)
class SamplerConfig:
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    repetition_context_size: int = 20
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = -1
    dry_sequence_breakers: tuple[int, ...] = ()
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1
    logit_bias: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
                     "presence_penalty", "dry_multiplier", "dry_base", "xtc_probability",
                     "xtc_threshold"):
            real(name, getattr(self, name))
        for name in ("top_k", "repetition_context_size", "dry_allowed_length",
                     "dry_penalty_last_n"):
            integer(name, getattr(self, name))
        checks = [
            ("temperature", self.temperature == 0.0
             or SMALLEST_TEMPERATURE <= self.temperature <= FLOAT32_MAX),
            ("top_k", 0 <= self.top_k <= MAX_TOKEN_ID),
            ("top_p", 0.0 < self.top_p <= 1.0),
            ("min_p", 0.0 <= self.min_p <= 1.0),
            ("repetition_penalty", 2.0**-32 <= self.repetition_penalty <= 2.0**32),
            ("frequency_penalty", abs(self.frequency_penalty) <= ADJUSTMENT_LIMIT),
            ("presence_penalty", abs(self.presence_penalty) <= ADJUSTMENT_LIMIT),
            ("repetition_context_size", 1 <= self.repetition_context_size <= MAX_TOKEN_ID),
            ("dry_multiplier", self.dry_multiplier == 0.0
             or SMALLEST_TEMPERATURE <= self.dry_multiplier <= FLOAT32_MAX),
            ("dry_base", 1.0 <= self.dry_base <= FLOAT32_MAX),
            ("dry_allowed_length", 1 <= self.dry_allowed_length <= MAX_TOKEN_ID),
            ("dry_penalty_last_n", -1 <= self.dry_penalty_last_n <= MAX_TOKEN_ID),
            ("xtc_probability", 0.0 <= self.xtc_probability <= 1.0),
            ("xtc_threshold", 0.0 <= self.xtc_threshold <= 1.0),
        ]
        for name, ok in checks:
            if not ok:
                raise ArgumentValueError(name, f"{name} is out of range: {getattr(self, name)}")
        if not isinstance(self.dry_sequence_breakers, tuple):
            raise ArgumentTypeError("dry_sequence_breakers", "dry_sequence_breakers: a tuple")
        for breaker in self.dry_sequence_breakers:
            if not 0 <= integer("dry_sequence_breakers", breaker) <= MAX_TOKEN_ID:
                raise ArgumentValueError("dry_sequence_breakers", "breaker ids are int32 >= 0")
        if not isinstance(self.logit_bias, Mapping):
            raise ArgumentTypeError("logit_bias", "logit_bias must be a mapping")
        bias = {}
        for token, value in self.logit_bias.items():
            if not 0 <= integer("logit_bias", token) <= MAX_TOKEN_ID:
                raise ArgumentValueError("logit_bias", "logit_bias ids are int32 >= 0")
            bias[int(token)] = real("logit_bias", value)
            if abs(bias[int(token)]) > ADJUSTMENT_LIMIT:
                raise ArgumentValueError("logit_bias", "a logit bias lies in [-2**64, 2**64]")
        object.__setattr__(self, "logit_bias", bias)

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    @property
    def uses_history(self) -> bool:
        return (self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0
                or self.presence_penalty != 0.0
                or (self.dry_multiplier > 0.0 and self.dry_penalty_last_n != 0))


# --- effective_token_distribution (spec/effective_token_distribution.md) ----------------


def softmax(z: Array) -> Array:
    """exp(z - max z) * (1 / sum), row by row, in float32."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        e = np.exp(z - z.max(axis=-1, keepdims=True)).astype(F32)
        total = e.sum(axis=-1, keepdims=True, dtype=F32)
        return np.asarray(e * (F32(1) / total), dtype=F32)


def apply_logit_bias(logits: Array, bias: Mapping[int, float]) -> Array:
    vocab_size = logits.shape[-1]
    for token in bias:
        if token >= vocab_size:
            raise ArgumentValueError("logit_bias", f"logit_bias key {token} is outside [0, V)")
    added = np.zeros(vocab_size, dtype=F32)
    for token, value in bias.items():
        added[token] += F32(value)
    return (logits + added).astype(F32)


def apply_repetition_penalties(logits: Array, history: Array, cfg: SamplerConfig) -> Array:
    vocab_size = logits.shape[-1]
    recent = history[-cfg.repetition_context_size:]
    counts = np.zeros(vocab_size, dtype=F32)
    np.add.at(counts, np.maximum(recent, 0), (recent >= 0).astype(F32))  # -1: no token
    seen = counts > 0
    if cfg.repetition_penalty != 1.0:
        rho = F32(cfg.repetition_penalty)
        penalised = np.where(logits > 0, logits / rho, logits * rho)
        logits = np.where(seen, penalised, logits).astype(F32)
    logits = (logits - counts * F32(cfg.frequency_penalty)).astype(F32)
    return np.asarray(logits - seen.astype(F32) * F32(cfg.presence_penalty), dtype=F32)


def dry_penalty(history: Array, cfg: SamplerConfig, vocab_size: int) -> Array:
    window = history if cfg.dry_penalty_last_n == -1 else history[-cfg.dry_penalty_last_n:]
    n = len(window)
    if n < 2:
        return np.zeros(vocab_size, dtype=F32)
    breakers = {*cfg.dry_sequence_breakers, -1}  # -1, no token (token_history), breaks too
    longest = np.zeros(vocab_size, dtype=F32)
    for i in range(1, n):
        candidate = int(window[i])
        if candidate < 0:
            continue
        length = 0
        if candidate not in breakers:  # a candidate that is itself a breaker has L = 0
            while (i - 1 - length >= 0 and int(window[n - 1 - length]) not in breakers
                   and window[i - 1 - length] == window[n - 1 - length]):
                length += 1
        longest[candidate] = max(longest[candidate], F32(length))
    exponent = (longest - F32(cfg.dry_allowed_length)).astype(F32)
    with np.errstate(over="ignore"):
        penalty = (F32(cfg.dry_multiplier) * np.power(F32(cfg.dry_base), exponent)).astype(F32)
    penalty = np.minimum(penalty, DRY_PENALTY_CAP)
    return np.where(longest >= cfg.dry_allowed_length, penalty, F32(0)).astype(F32)


def xtc_cut(logits: Array, threshold: float) -> Array:
    probs = softmax(logits)
    above = (probs >= F32(threshold)) & (probs > 0)
    smallest = np.where(above, probs, F32(2)).min(axis=-1, keepdims=True)
    count = above.sum(axis=-1, keepdims=True)
    cut = above & (probs > smallest) & (count >= 2)
    return np.where(cut, NEG_INF, logits).astype(F32)


def filtered_distribution(logits: Array, cfg: SamplerConfig) -> Array:
    vocab_size = logits.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        z = ((logits - logits.max(axis=-1, keepdims=True)) / F32(cfg.temperature)).astype(F32)
    if 0 < cfg.top_k < vocab_size:
        kth_largest = -np.sort(-z, axis=-1)[..., cfg.top_k - 1: cfg.top_k]
        z = np.where(z >= kth_largest, z, NEG_INF).astype(F32)
    if cfg.top_p < 1.0:
        probs = softmax(z)
        descending = -np.sort(-probs, axis=-1)
        below = (np.cumsum(descending, axis=-1, dtype=F32) < F32(cfg.top_p)).sum(
            axis=-1, keepdims=True)
        cutoff = np.take_along_axis(descending, np.minimum(below, vocab_size - 1), axis=-1)
        z = np.where(probs >= cutoff, z, NEG_INF).astype(F32)
    if cfg.min_p > 0.0:
        probs = softmax(z)
        floor = F32(cfg.min_p) * probs.max(axis=-1, keepdims=True)
        z = np.where(probs >= floor, z, NEG_INF).astype(F32)
    return softmax(z)


def one_hot_argmax(logits: Array) -> Array:
    winner = np.argmax(logits, axis=-1)[..., None]
    return np.asarray(np.arange(logits.shape[-1]) == winner, dtype=F32)


def effective_token_distribution(logits: object, config: object,
                                 history: object = ()) -> Array:
    logits = require_array("logits", logits)
    if logits.ndim not in (1, 2) or logits.shape[-1] < 1 or logits.shape[0] < 1:
        raise ArgumentValueError("logits", f"logits must be [V] or [R, V], got {logits.shape}")
    if not np.issubdtype(logits.dtype, np.floating):
        raise ArgumentTypeError("logits", "logits must be floating")
    if not isinstance(config, SamplerConfig):
        raise ArgumentTypeError("config", "config must be a SamplerConfig")
    vocab_size = logits.shape[-1]
    tokens = token_history("history", history, vocab_size)
    out = logits.astype(F32)
    if config.logit_bias:
        out = apply_logit_bias(out, config.logit_bias)
    if config.repetition_penalty != 1.0 or config.frequency_penalty or config.presence_penalty:
        out = apply_repetition_penalties(out, tokens, config)
    if config.dry_multiplier > 0.0 and config.dry_penalty_last_n != 0:
        out = (out - dry_penalty(tokens, config, vocab_size)).astype(F32)
    if config.is_greedy:
        return one_hot_argmax(out)
    if config.xtc_probability == 0.0:
        return filtered_distribution(out, config)
    cut = filtered_distribution(xtc_cut(out, config.xtc_threshold), config)
    if config.xtc_probability == 1.0:
        return cut
    uncut = filtered_distribution(out, config)
    keep = F32(1.0 - config.xtc_probability)
    return (keep * uncut + F32(config.xtc_probability) * cut).astype(F32)


# --- the draw (spec/sample_from_distribution.md, sample_token_with_distribution.md) --------


def sample_from_distribution(probs: object, u: object) -> Array:
    probs = require_probabilities("probs", probs, (1, 2))
    uniforms = uniform("u", u, probs.shape[:-1])
    vocab_size = probs.shape[-1]
    positive = probs > 0
    partial_sums = np.cumsum(probs, axis=-1, dtype=F32)
    target = uniforms[..., None] * partial_sums[..., -1:]
    eligible = (partial_sums > target) & positive
    first_eligible = np.argmax(eligible, axis=-1)
    last_positive = vocab_size - 1 - np.argmax(positive[..., ::-1], axis=-1)
    return np.asarray(np.where(eligible.any(axis=-1), first_eligible, last_positive),
                      dtype=np.int32)


def sample_token_with_distribution(logits: object, config: object, history: object,
                                   u: object) -> tuple[Array, Array]:
    probs = effective_token_distribution(logits, config, history)
    if probs.ndim != 1:
        raise ArgumentValueError("logits", "logits must be [V] for one draw")
    return sample_from_distribution(probs, u), probs


# --- modified rejection sampling (accept_draft_token.md, residual_*.md) --------------------


def pair(p: object, q: object) -> tuple[Array, Array]:
    p = require_probabilities("p", p, (1, 2))
    q = require_probabilities("q", q, (1, 2))
    require_same_shape("q", p, q)
    return p, q


def at(probs: Array, token: Array) -> Array:
    return np.take_along_axis(probs, token[..., None].astype(np.intp), axis=-1)[..., 0]


def accept_draft_token(p: object, q: object, token: object, u: object) -> Array:
    p, q = pair(p, q)
    batch = p.shape[:-1]
    ids = draft_ids("token", token, p.shape[-1], batch)
    return accepts(p, q, ids, uniform("u", u, batch))


def accepts(p: Array, q: Array, ids: DraftIds, u: Array) -> Array:
    p_t, q_t = at(p, ids.clamped), at(q, ids.clamped)
    return ids.valid & (p_t > 0) & (u * q_t <= p_t)


def replacement_rows(p: Array, q: Array, ids: DraftIds) -> Array:
    """The residual, or p where the id is a placeholder (nothing was drawn from q there)."""
    return np.where(ids.valid[..., None], residual_distribution(p, q), p).astype(F32)


def residual_distribution(p: object, q: object) -> Array:
    p, q = pair(p, q)
    excess = np.maximum(p - q, F32(0))
    mass = excess.sum(axis=-1, keepdims=True, dtype=F32)
    has_mass = mass > 0
    return np.where(has_mass, excess / np.where(has_mass, mass, F32(1)), p).astype(F32)


def residual_resample(p: object, q: object, u: object) -> Array:
    return sample_from_distribution(residual_distribution(p, q), u)


# --- the rules (acceptance_rule*.md, verify_draft_token.md, verify_tokenwise.md) --------------


def require_rule(rule: object) -> str:
    if not isinstance(rule, str) or rule not in RULES:
        raise ArgumentTypeError("rule", f"rule must be a rule id, got {rule!r}")
    return rule


def acceptance_rule(target_config: object, *, drafter_has_distribution: object,
                    stochastic: object = None, block: object = None) -> str:
    if not isinstance(target_config, SamplerConfig):
        raise ArgumentTypeError("target_config", "target_config must be a SamplerConfig")
    if not isinstance(drafter_has_distribution, bool):
        raise ArgumentTypeError("drafter_has_distribution", "drafter_has_distribution: a bool")
    if stochastic is not None and not isinstance(stochastic, bool):
        raise ArgumentTypeError("stochastic", "stochastic must be a bool or None")
    if block is not None and not isinstance(block, bool):
        raise ArgumentTypeError("block", "block must be a bool or None")
    # None is the automatic choice: both switches at their default, on.
    automatic = stochastic is None
    if automatic:
        stochastic = True
    if block is None:
        block = automatic
    if target_config.is_greedy:
        return "greedy-argmax"
    if not stochastic:
        return "sampler-match"
    if not drafter_has_distribution:
        return "sampler-match-no-proposal-distribution"
    return "block" if block else "stochastic"


class Verdict(NamedTuple):
    accepted: Array
    token: Array


def verify(rule: str, p: Array, q: Array | None, ids: DraftIds, u_accept: Array,
           u_sample: Array) -> Verdict:
    if rule == "greedy-argmax":
        emitted = np.argmax(p, axis=-1).astype(np.int32)
        return Verdict(ids.valid & (emitted == ids.clamped), emitted)
    if rule == "stochastic":
        assert q is not None
        accepted = accepts(p, q, ids, u_accept)
        replacement = sample_from_distribution(replacement_rows(p, q, ids), u_sample)
        return Verdict(accepted, np.where(accepted, ids.clamped, replacement).astype(np.int32))
    draw = sample_from_distribution(p, u_sample)
    return Verdict(ids.valid & (draw == ids.clamped), draw)


def refuse_joint(rule: str, function: str) -> str:
    if rule in JOINT_RULES:
        raise ArgumentValueError("rule", f"rule {rule!r} is verify_blockwise, not {function}")
    return rule


def verify_draft_token(rule: object, p: object, q: object, token: object, u_accept: object,
                       u_sample: object) -> Verdict:
    rule = refuse_joint(require_rule(rule), "verify_draft_token")
    if q is None:
        if rule == "stochastic":
            raise ArgumentValueError("q", "q is required by the stochastic rule")
        p = require_probabilities("p", p, (1, 2))
    else:
        p, q = pair(p, q)
    batch = p.shape[:-1]
    ids = draft_ids("token", token, p.shape[-1], batch)
    ua = uniform("u_accept", u_accept, batch)
    us = uniform("u_sample", u_sample, batch)
    return verify(rule, p, q, ids, ua, us)


def verify_tokenwise(rule: object, target_probs: object, draft_probs: object, draft_tokens: object,
                 uniforms: object) -> tuple[int, int]:
    rule = refuse_joint(require_rule(rule), "verify_tokenwise")
    target = require_probabilities("target_probs", target_probs, (2,))
    tokens_in = require_array("draft_tokens", draft_tokens)
    if tokens_in.ndim != 1 or tokens_in.shape[0] < 1:
        raise ArgumentValueError("draft_tokens", "draft_tokens must be [k] with k >= 1")
    k, vocab_size = tokens_in.shape[0], target.shape[1]
    if target.shape[0] != k + 1:
        raise ArgumentValueError("target_probs", "target_probs must be [k+1, V]")
    tokens = draft_ids("draft_tokens", tokens_in, vocab_size, (k,))
    u_in = require_array("uniforms", uniforms)
    if u_in.shape != (k + 1, 2):
        raise ArgumentValueError("uniforms", "uniforms must be [k+1, 2]")
    u = uniform("uniforms", u_in, (k + 1, 2))
    draft: Array | None = None
    if draft_probs is None:
        if rule == "stochastic":
            raise ArgumentValueError("draft_probs", "draft_probs is required by stochastic")
    else:
        draft = require_probabilities("draft_probs", draft_probs, (2,))
        if draft.shape != (k, vocab_size):
            raise ArgumentValueError("draft_probs", "draft_probs must be [k, V]")
    # A placeholder is rejected and replaced by the target's own draw: the round of the
    # drafts before it.
    if rule == "greedy-argmax":
        candidates = np.argmax(target, axis=-1).astype(np.int32)
        accepted = tokens.valid & (candidates[:k] == tokens.clamped)
    elif rule == "stochastic":
        assert draft is not None
        accepted = accepts(target[:k], draft, tokens, u[:k, 0])
        rows = np.concatenate([replacement_rows(target[:k], draft, tokens), target[k:]])
        candidates = sample_from_distribution(rows, u[:, 1])
    else:
        candidates = sample_from_distribution(target, u[:, 1])
        accepted = tokens.valid & (candidates[:k] == tokens.clamped)
    num_accepted = int(np.cumprod(accepted.astype(np.int32)).sum())
    return num_accepted, int(candidates[num_accepted])


# --- block verification (spec/verify_blockwise.md) --------------------------------------


def prefix_weights(p_drafted: Array, q_drafted: Array) -> Array:
    """w_0 = 1, w_i = min(1, w_{i-1} p_i(X_i) / q_i(X_i)) through log-space prefix sums."""
    excluded = p_drafted <= 0
    unproposable = (q_drafted <= 0) & ~excluded
    finite = ~(excluded | unproposable)
    with np.errstate(divide="ignore"):
        log_ratio = np.where(finite, np.log(np.where(finite, p_drafted, F32(1)))
                             - np.log(np.where(finite, q_drafted, F32(1))), F32(0)).astype(F32)
    reset = np.abs(log_ratio).sum(dtype=F32) + F32(1)
    log_ratio = np.where(unproposable, reset, log_ratio).astype(F32)
    sums = np.concatenate([np.zeros(1, F32), np.cumsum(log_ratio, dtype=F32)])
    log_weights = sums - np.maximum.accumulate(sums)
    dead = np.concatenate([[False], np.cumsum(excluded.astype(np.int32)) > 0])
    return np.where(dead, F32(0), np.exp(log_weights)).astype(F32)


class BlockwiseVerdict(NamedTuple):
    num_accepted: int
    next_token: int
    accepted_length_law: Array


def verify_blockwise(target_probs: object, draft_probs: object, draft_tokens: object,
                          uniforms: object) -> BlockwiseVerdict:
    target = require_probabilities("target_probs", target_probs, (2,))
    draft = require_probabilities("draft_probs", draft_probs, (2,))
    tokens_in = require_array("draft_tokens", draft_tokens)
    if tokens_in.ndim != 1 or tokens_in.shape[0] < 1:
        raise ArgumentValueError("draft_tokens", "draft_tokens must be [k] with k >= 1")
    k, vocab_size = tokens_in.shape[0], target.shape[1]
    if target.shape[0] != k + 1:
        raise ArgumentValueError("target_probs", "target_probs must be [k+1, V]")
    if draft.shape != (k, vocab_size):
        raise ArgumentValueError("draft_probs", "draft_probs must be [k, V]")
    tokens = draft_ids("draft_tokens", tokens_in, vocab_size, (k,))
    u_in = require_array("uniforms", uniforms)
    if u_in.shape != (k + 1, 2):
        raise ArgumentValueError("uniforms", "uniforms must be [k+1, 2]")
    u = uniform("uniforms", u_in, (k + 1, 2))

    # Placeholders: the round of the m drafts before the first one (ratio 1 past it).
    real = np.cumprod(tokens.valid.astype(np.int32)) > 0
    m = int(real.sum())
    p_drafted = np.where(real, target[np.arange(k), tokens.clamped], F32(1)).astype(F32)
    q_drafted = np.where(real, draft[np.arange(k), tokens.clamped], F32(1)).astype(F32)
    weights = prefix_weights(p_drafted, q_drafted)
    excess = np.maximum(weights[:k, None] * target[:k] - draft, F32(0))
    mass = excess.sum(axis=-1, dtype=F32)
    z, w = mass[1:], weights[1:k]
    denominator = z + (F32(1) - w)
    safe = np.where(denominator > 0, denominator, F32(1))
    keep = np.concatenate([np.where(denominator > 0, z / safe, F32(1)), weights[k:]]).astype(F32)
    lengths = np.arange(1, k + 1)
    keep = np.where(lengths < m, keep, np.where(lengths == m, weights[1:], F32(0))).astype(F32)
    passes = (keep > 0) & (u[:k, 0] <= keep)
    num_accepted = int(np.where(passes, np.arange(1, k + 1), 0).max())
    safe_mass = np.where(mass > 0, mass, F32(1))[:, None]
    rows = np.concatenate([np.where(mass[:, None] > 0, excess / safe_mass, target[:k]),
                           target[k:]]).astype(F32)
    rows[m] = target[m]  # after the m real drafts: the truncated round's bonus row
    candidates = sample_from_distribution(rows, u[:, 1])
    rejects_after = np.cumprod((F32(1) - keep)[::-1], dtype=F32)[::-1]
    later = np.concatenate([rejects_after[1:], np.ones(1, F32)])
    law = np.concatenate([rejects_after[:1], keep * later]).astype(F32)
    return BlockwiseVerdict(num_accepted, int(candidates[num_accepted]), law)


# --- rewind_trim (spec/rewind_trim.md) -----------------------------------------------------


def rewind_trim(num_draft: object, num_accepted: object) -> tuple[int, int, bool]:
    n = integer("num_draft", num_draft)
    a = integer("num_accepted", num_accepted)
    if n < 1:
        raise ArgumentValueError("num_draft", "num_draft must be >= 1")
    if not 0 <= a <= n:
        raise ArgumentValueError("num_accepted", "num_accepted must lie in [0, num_draft]")
    if a == n:
        return 0, 0, True
    return n - a, n - a - 1, False


# --- closed forms (acceptance_closed_forms.md ... expected_speedup.md) -------------------


def acceptance_closed_forms(p: object, q: object) -> tuple[Array, Array, Array]:
    p, q = pair(p, q)
    return (np.minimum(p, q).sum(axis=-1, dtype=F32), (p * q).sum(axis=-1, dtype=F32),
            F32(0.5) * np.abs(p - q).sum(axis=-1, dtype=F32))


def acceptance_probability(rule: object, p: object, q: object) -> Array:
    rule = require_rule(rule)
    sum_min, sum_prod, _ = acceptance_closed_forms(p, q)
    if rule in ("stochastic", "block"):
        return sum_min
    if rule == "greedy-argmax":
        assert isinstance(p, np.ndarray) and isinstance(q, np.ndarray)
        return at(q, np.argmax(p, axis=-1))
    return sum_prod


def probability(name: str, value: object) -> float:
    number = real(name, value)
    if not 0.0 <= number <= 1.0:
        raise ArgumentValueError(name, f"{name} must lie in [0, 1]")
    return number


def expected_tokens_per_round(alphas: object) -> float:
    if isinstance(alphas, str | bytes) or not isinstance(alphas, Sequence):
        raise ArgumentTypeError("alphas", "alphas must be a sequence of probabilities")
    expected, survival = 1.0, 1.0
    for alpha in alphas:
        survival *= probability("alphas", alpha)
        expected += survival
    return expected


def expected_speedup(alpha: object, k: object, c: object, *, verify_cost: object = 1.0) -> float:
    a = probability("alpha", alpha)
    steps = integer("k", k)
    if steps < 1:
        raise ArgumentValueError("k", "k must be >= 1")
    cost = real("c", c)
    if cost < 0:
        raise ArgumentValueError("c", "c must be >= 0")
    verify = real("verify_cost", verify_cost)
    if verify <= 0:
        raise ArgumentValueError("verify_cost", "verify_cost must be > 0")
    return expected_tokens_per_round([a] * steps) / (steps * cost + verify)


# --- grid_draw_counts (spec/grid_draw_counts.md) -------------------------------------------

UNIFORM_GRID_SIZE = 1 << 24
BISECTION_STEPS = 25


def grid_draw_counts(probs: object) -> Array:
    probs = require_probabilities("probs", probs, (1,))
    vocab_size = probs.shape[-1]
    positive = probs > 0
    partial_sums = np.cumsum(probs, dtype=F32)
    total = partial_sums[-1]
    low = np.zeros(vocab_size, dtype=np.int64)
    high = np.full(vocab_size, UNIFORM_GRID_SIZE, dtype=np.int64)
    for _ in range(BISECTION_STEPS):
        middle = (low + high) // 2
        uniforms = middle.astype(F32) * F32(1.0 / UNIFORM_GRID_SIZE)
        below = (middle < UNIFORM_GRID_SIZE) & (uniforms * total < partial_sums)
        low = np.where(below, middle + 1, low)
        high = np.where(below, high, middle)
    below_count = low
    before = np.concatenate([[0], below_count[:-1]])
    counts = np.where(positive, below_count - before, 0)
    last_positive = vocab_size - 1 - int(np.argmax(positive[::-1]))
    counts[last_positive] += UNIFORM_GRID_SIZE - below_count[-1]
    return np.asarray(counts, dtype=np.int32)


# --- a seeded run's uniforms by position (spec/randomness.md, "Derivation") -----------------

MASK64 = (1 << 64) - 1
SLOTS = {"accept": 0, "sample": 1, "draft": 2}


def splitmix64(x: int) -> int:
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def position_uniform(seed: object, position: object, slot: object) -> float:
    seed_int = integer("seed", seed)
    position_int = integer("position", position)
    slot_int = integer("slot", slot)
    if not 0 <= seed_int <= MASK64:
        raise ArgumentValueError("seed", "seed must lie in [0, 2**64)")
    if position_int < 0:
        raise ArgumentValueError("position", "position must be >= 0")
    if not 0 <= slot_int < 4:
        raise ArgumentValueError("slot", "slot must lie in [0, 4)")
    word = splitmix64(splitmix64(seed_int) ^ ((4 * position_int + slot_int) & MASK64))
    return (word >> 40) / float(1 << 24)


# --- a round's uniforms and a whole seeded run (spec/randomness.md) ------------------------

ROUND_SLOTS = (SLOTS["accept"], SLOTS["draft"])
"""The slots keyed by (round start, offset); the target's draw ("sample") is keyed by position."""
POSITION_LIMIT = 2**62  # so that 4 * position + slot < 2**64


def position_argument(name: str, value: object) -> int:
    number = integer(name, value)
    if not 0 <= number < POSITION_LIMIT:
        raise ArgumentValueError(name, f"{name} must lie in [0, 2**62), got {number}")
    return number


def round_uniform(seed: object, round_position: object, offset: object, slot: object) -> float:
    seed_int = integer("seed", seed)
    if not 0 <= seed_int <= MASK64:
        raise ArgumentValueError("seed", "seed must lie in [0, 2**64)")
    start = position_argument("round_position", round_position)
    index = position_argument("offset", offset)
    slot_int = integer("slot", slot)
    if slot_int not in ROUND_SLOTS:
        raise ArgumentValueError("slot", f"slot must be accept or draft, got {slot_int}")
    word = splitmix64(splitmix64(splitmix64(seed_int) ^ (4 * start + slot_int)) ^ index)
    return (word >> 40) / float(1 << 24)


class RoundRandomness(NamedTuple):
    draft: list[float]
    """k uniforms: draft j is drawn with (draft, round start, offset j)."""
    verify: list[list[float]]
    """k + 1 rows [accept at (round start, offset i), sample at position round start + i]."""


def run_uniforms(seed: int, start: int, k: int) -> RoundRandomness:
    """Every uniform the round starting at output position `start` with k drafts may read."""
    return RoundRandomness(
        [round_uniform(seed, start, j, SLOTS["draft"]) for j in range(k)],
        [[round_uniform(seed, start, i, SLOTS["accept"]),
          position_uniform(seed, start + i, SLOTS["sample"])] for i in range(k + 1)],
    )


class RunRound(NamedTuple):
    position: int
    draft_tokens: list[int]
    num_accepted: int
    next_token: int


def seeded_run(target_law: Any, draft_law: Any, prompt: object, rule: object,
               num_draft_tokens: object, max_tokens: object, seed: object) -> list[RunRound]:
    """The rounds of a run; `target_law` and `draft_law` map a history to a [V] float32 law."""
    rule = require_rule(rule)
    k_max = integer("num_draft_tokens", num_draft_tokens)
    if k_max < 1:
        raise ArgumentValueError("num_draft_tokens", "num_draft_tokens must be >= 1")
    total = integer("max_tokens", max_tokens)
    if total < 0:
        raise ArgumentValueError("max_tokens", "max_tokens must be >= 0")
    if not isinstance(prompt, list) or not prompt:
        raise ArgumentValueError("prompt", "prompt must hold at least one token id")
    history = [integer("prompt", token) for token in prompt]
    seed_int = integer("seed", seed)
    if not 0 <= seed_int <= MASK64:
        raise ArgumentValueError("seed", "seed must lie in [0, 2**64)")

    rounds: list[RunRound] = []
    position = 0
    while position < total:
        k = min(k_max, total - position - 1)
        u = run_uniforms(seed_int, position, k)
        if k == 0:  # the last token: the target's alone
            p = target_law(history)
            token = (int(np.argmax(p)) if rule == "greedy-argmax"
                     else int(sample_from_distribution(p, u.verify[0][1])))
            played = RunRound(position, [], 0, token)
        else:
            drafts: list[int] = []
            q_rows = []
            for j in range(k):
                q = draft_law(history + drafts)
                drafts.append(int(sample_from_distribution(q, u.draft[j])))
                q_rows.append(q)
            target = np.stack([target_law(history + drafts[:i]) for i in range(k + 1)])
            draft = np.stack(q_rows)
            tokens = np.array(drafts, dtype=np.int32)
            uniforms = np.array(u.verify, dtype=F32)
            if rule in JOINT_RULES:
                verdict = verify_blockwise(target, draft, tokens, uniforms)
                num, nxt = verdict.num_accepted, verdict.next_token
            else:
                needs_q = rule == "stochastic"
                num, nxt = verify_tokenwise(rule, target, draft if needs_q else None, tokens,
                                        uniforms)
            played = RunRound(position, drafts, num, nxt)
        rounds.append(played)
        emitted = [*played.draft_tokens[: played.num_accepted], played.next_token]
        history += emitted
        position += len(emitted)
    return rounds
# --- tree verification (verify_tree.md) ------------------------------------------------------

TREE_SCHEMES = ("iid", "without-replacement", "deterministic")
MAX_TREE_NODES = 4096


class TreeVerdict(NamedTuple):
    num_accepted: int
    accepted_nodes: list[int]
    next_token: int


def tree_children(parents: object, draft_tokens: object, distinct_siblings: bool
                  ) -> tuple[list[list[int]], list[int]]:
    """Each row's children and each row's depth (row 0 the root, row i + 1 node i)."""
    if isinstance(parents, str | bytes) or not isinstance(parents, Sequence):
        raise ArgumentTypeError("parents", "parents must be a sequence of ints")
    if isinstance(draft_tokens, str | bytes) or not isinstance(draft_tokens, Sequence):
        raise ArgumentTypeError("draft_tokens", "draft_tokens must be a sequence of ints")
    size = len(parents)
    if size < 1:
        raise ArgumentValueError("parents", "parents must name at least one node")
    if len(draft_tokens) != size:
        raise ArgumentValueError("draft_tokens", "draft_tokens must hold one token per node")
    for parent in parents:
        if not is_int(parent):
            raise ArgumentTypeError("parents", "a parent must be an int")
        if not -1 <= parent < size:
            raise ArgumentValueError("parents", "a parent must be -1 or a node")
    for i in range(size):
        seen, node = {i}, parents[i]
        while node != -1:
            if node in seen:
                raise ArgumentValueError("parents", "parents has a cycle")
            seen.add(node)
            node = parents[node]
    for i, parent in enumerate(parents):
        if parent >= i:
            raise ArgumentValueError("parents", "a parent must come before its child")
    children: list[list[int]] = [[] for _ in range(size + 1)]
    depths = [0]
    for i, parent in enumerate(parents):
        children[parent + 1].append(i)
        depths.append(depths[parent + 1] + 1)
    for token in draft_tokens:
        if not is_int(token):
            raise ArgumentTypeError("draft_tokens", "a token must be an int")
        if token < 0:
            raise ArgumentValueError("draft_tokens", "a token must be >= 0")
    if distinct_siblings:
        for kids in children:
            tokens = [draft_tokens[c] for c in kids]
            if len(set(tokens)) != len(tokens):
                raise ArgumentValueError("draft_tokens", "siblings must carry distinct tokens")
    return children, depths


def tree_proposal(scheme: str, q: Array, tokens: Sequence[int], j: int) -> Array:
    if scheme == "deterministic":
        one_hot: Array = (np.arange(q.shape[-1]) == tokens[j]).astype(F32)
        return one_hot
    if scheme == "iid" or j == 0:
        return q
    kept = np.where(np.isin(np.arange(q.shape[-1]), list(tokens[:j])), F32(0), q).astype(F32)
    mass = kept.sum(dtype=F32)
    return kept / mass if mass > 0 else kept


def verify_tree(scheme: object, parents: object, target_probs: object, draft_probs: object,
                draft_tokens: object, accept_uniforms: object,
                sample_uniforms: object) -> TreeVerdict:
    if not isinstance(scheme, str) or scheme not in TREE_SCHEMES:
        raise ArgumentTypeError("scheme", f"scheme must be one of {TREE_SCHEMES}")
    # An id array: an id outside [0, V) is a placeholder, no draft (spec/validation.md).
    id_array = isinstance(draft_tokens, np.ndarray)
    if id_array:
        assert isinstance(draft_tokens, np.ndarray)
        if not np.issubdtype(draft_tokens.dtype, np.integer):
            raise ArgumentTypeError("draft_tokens", "draft_tokens must be an integer array")
        ids = [int(t) for t in draft_tokens.reshape(-1)]
        children, depths = tree_children(parents, [0] * len(ids), False)
        if draft_tokens.shape != (len(children) - 1,):
            raise ArgumentValueError("draft_tokens", "draft_tokens must have shape (N,)")
        draft_tokens = ids
    else:
        children, depths = tree_children(parents, draft_tokens, scheme != "iid")
    assert isinstance(draft_tokens, Sequence)
    size, depth = len(children) - 1, max(depths)
    target = require_probabilities("target_probs", target_probs, (2,))
    vocab_size = target.shape[1]
    if target.shape[0] != size + 1:
        raise ArgumentValueError("target_probs", "target_probs must be [N+1, V]")
    if not id_array and any(t >= vocab_size for t in draft_tokens):
        raise ArgumentValueError("draft_tokens", "tokens must lie in [0, V)")
    if scheme == "deterministic":
        if draft_probs is not None:
            raise ArgumentValueError("draft_probs", "draft_probs must be None here")
        draft = target
    else:
        if draft_probs is None:
            raise ArgumentValueError("draft_probs", "draft_probs is required")
        draft = require_probabilities("draft_probs", draft_probs, (2,))
        if draft.shape != target.shape:
            raise ArgumentValueError("draft_probs", "draft_probs must be [N+1, V]")
    accept = uniform("accept_uniforms", require_array("accept_uniforms", accept_uniforms),
                     (size,))
    sample = uniform("sample_uniforms", require_array("sample_uniforms", sample_uniforms),
                     (depth + 1,))
    row, path = 0, list[int]()
    while True:
        r = target[row]
        kids = [c for c in children[row] if 0 <= draft_tokens[c] < vocab_size]
        tokens = [draft_tokens[c] for c in kids]
        chosen = -1
        for j, child in enumerate(kids):
            q_j = tree_proposal(scheme, draft[row], tokens, j)
            x = tokens[j]
            if r[x] > 0 and accept[child] * q_j[x] <= r[x]:
                chosen = child
                break
            excess = np.maximum(r - q_j, F32(0))
            mass = excess.sum(dtype=F32)
            r = excess / mass if mass > 0 else r
        if chosen < 0:
            token = int(sample_from_distribution(r.astype(F32), sample[depths[row]]))
            return TreeVerdict(len(path), path + [-1] * (depth - len(path)), token)
        path.append(chosen)
        row = chosen + 1


# --- acceptance at a node, and the multi-draft ceiling (iid_siblings_acceptance.md, -------
# --- without_replacement_siblings_acceptance.md, candidate_siblings_acceptance.md, ----------
# --- multi_draft_ceiling.md) ------------------------------------------------------------------


def node_laws(p: object, q: object, num_drafts: object) -> tuple[Array, Array, int]:
    p = require_probabilities("p", p, (1,))
    q = require_probabilities("q", q, (1,))
    require_same_shape("q", p, q)
    if not is_int(num_drafts):
        raise ArgumentTypeError("num_drafts", "num_drafts must be an int")
    assert isinstance(num_drafts, int)
    if not 1 <= num_drafts <= MAX_TREE_NODES:
        raise ArgumentValueError("num_drafts", "num_drafts must lie in [1, MAX_TREE_NODES]")
    return p, q, num_drafts


def iid_siblings_acceptance(p: object, q: object, num_drafts: object) -> float:
    p, q, n = node_laws(p, q, num_drafts)
    r, miss = p, F32(1)
    for _ in range(n):
        miss = F32(miss * (F32(1) - np.minimum(r, q).sum(dtype=F32)))
        excess = np.maximum(r - q, F32(0))
        mass = excess.sum(dtype=F32)
        r = excess / mass if mass > 0 else r
    return float(F32(1) - miss)


MAX_DRAW_ORDER_ENTRIES = 2**26


def without_replacement_siblings_acceptance(p: object, q: object, num_drafts: object) -> float:
    p, q, n = node_laws(p, q, num_drafts)
    if p.shape[0] ** n > MAX_DRAW_ORDER_ENTRIES:
        raise ArgumentValueError("num_drafts", "num_drafts must keep V**num_drafts bounded")
    vocab = p.shape[0]
    r, proposal, reach = p[None], q[None], np.ones((1,), dtype=F32)
    accepted = F32(0)
    for j in range(n):
        accepted = F32(accepted + (reach * np.minimum(r, proposal).sum(axis=-1, dtype=F32))
                       .sum(dtype=F32))
        if j == n - 1:
            break
        rejected = np.maximum(proposal - r, F32(0))
        excess = np.maximum(r - proposal, F32(0))
        mass = excess.sum(axis=-1, keepdims=True, dtype=F32)
        r = np.where(mass > 0, excess / np.where(mass > 0, mass, F32(1)), r)
        removed = np.repeat(proposal, vocab, axis=0) * np.tile(
            F32(1) - np.eye(vocab, dtype=F32), (proposal.shape[0], 1))
        kept = removed.sum(axis=-1, keepdims=True, dtype=F32)
        proposal = np.where(kept > 0, removed / np.where(kept > 0, kept, F32(1)), removed)
        r = np.repeat(r, vocab, axis=0)
        reach = (reach[:, None] * rejected).reshape(-1).astype(F32)
    return float(accepted)


def candidate_siblings_acceptance(p: object, candidates: object) -> float:
    p = require_probabilities("p", p, (1,))
    if isinstance(candidates, np.ndarray) and np.issubdtype(candidates.dtype, np.integer):
        ids = [int(c) for c in candidates.reshape(-1)]
        return float(sum((p[c] for c in ids if 0 <= c < p.shape[0]), F32(0)))
    if not isinstance(candidates, list) or not all(is_int(c) for c in candidates):
        raise ArgumentTypeError("candidates", "candidates must be a list of ints")
    if not candidates:
        raise ArgumentValueError("candidates", "candidates must hold at least one token")
    if any(not 0 <= c < p.shape[0] for c in candidates):
        raise ArgumentValueError("candidates", "candidates must lie in [0, V)")
    if len(set(candidates)) != len(candidates):
        raise ArgumentValueError("candidates", "candidates must be distinct")
    return float(p[np.array(candidates)].sum(dtype=F32))


def multi_draft_ceiling(p: object, q: object, num_drafts: object) -> float:
    p, q, n = node_laws(p, q, num_drafts)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(q > 0, p / np.where(q > 0, q, F32(1)), np.inf)
    order = np.argsort(ratio, kind="stable")
    p_prefix = np.concatenate([[F32(0)], np.cumsum(p[order], dtype=F32)])
    q_prefix = np.concatenate([[F32(0)], np.cumsum(q[order], dtype=F32)])
    return float((p_prefix + F32(1) - q_prefix.astype(F32) ** n).astype(F32).min())
