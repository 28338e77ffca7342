"""Each rule the spec states is pinned by a vector: a port with the gap fails that vector.

The NumPy reference port of examples/numpy_port/ passes every vector (tests/test_vectors_cli.py).
Each case below gives it one gap, a plausible mistake an engine port makes, by replacing one of
its functions, replays the vectors in process through the same protocol and comparison as
`specaccept vectors check`, and asserts that the vector the spec names for that rule fails
(and that the port without the gap passes it). A rule whose breakage no vector could detect
would show up here as a gap that fails nothing.

The last test backs a "cannot" of spec/sample_from_distribution.md: within the preconditions,
dropping the draw's ``w_i > 0`` conjunct changes no draw, so no vector can pin it.
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specaccept.cli.vectors import answer_mismatch

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "spec" / "vectors"
sys.path.insert(0, str(ROOT / "examples" / "numpy_port"))
port: Any = importlib.import_module("specport")
serve: Any = importlib.import_module("serve")
F32 = np.float32


def vectors(family: str) -> list[dict[str, Any]]:
    document = json.loads((VECTORS / f"{family}.json").read_text("utf-8"))
    return [{"family": family, **v} for v in document["vectors"]]


def failing(family: str) -> set[str]:
    """The names of the family's vectors that the port, as patched now, fails."""
    failed = set()
    for vector in vectors(family):
        request = {"family": family, "name": vector["name"], "input": vector["input"]}
        answer = serve.answer(request)
        assert "failure" not in answer, f"the gap crashed the port: {answer}"
        if answer_mismatch(vector, answer) is not None:
            failed.add(vector["name"])
    return failed


# --- the gaps ------------------------------------------------------------------------------


def greedy_as_a_draw(rule: Any, p: Any, q: Any, token: Any, u_accept: Any,
                     u_sample: Any) -> Any:
    """greedy-argmax implemented as sampler-match: a draw with u_sample."""
    rule = "sampler-match" if rule == "greedy-argmax" else rule
    return ORIGINAL["verify"](rule, p, q, token, u_accept, u_sample)


def greedy_bonus_as_a_draw(rule: Any, target_probs: Any, draft_probs: Any, draft_tokens: Any,
                           uniforms: Any) -> tuple[int, int]:
    num, nxt = ORIGINAL["verify_tokenwise"](rule, target_probs, draft_probs, draft_tokens, uniforms)
    if rule == "greedy-argmax" and num == len(draft_tokens):
        nxt = int(port.sample_from_distribution(target_probs[-1], float(uniforms[-1][1])))
    return num, nxt


def dry_breaker_candidate_counted(history: Any, cfg: Any, vocab_size: int) -> Any:
    """DRY without the 'a candidate that is itself a breaker has L = 0' rule."""
    window = history if cfg.dry_penalty_last_n == -1 else history[-cfg.dry_penalty_last_n:]
    n, breakers = len(window), set(cfg.dry_sequence_breakers)
    longest = np.zeros(vocab_size, dtype=F32)
    for i in range(1, n):
        length = 0
        while (i - 1 - length >= 0 and int(window[n - 1 - length]) not in breakers
               and window[i - 1 - length] == window[n - 1 - length]):
            length += 1
        longest[int(window[i])] = max(longest[int(window[i])], F32(length))
    penalty = F32(cfg.dry_multiplier) * np.power(F32(cfg.dry_base),
                                                 longest - F32(cfg.dry_allowed_length))
    return np.where(longest >= cfg.dry_allowed_length, penalty, F32(0)).astype(F32)


def draw_without_fallback(probs: Any, u: Any) -> Any:
    probs = port.require_probabilities("probs", probs, (1, 2))
    uniforms = port.uniform("u", u, probs.shape[:-1])
    partial = np.cumsum(probs, axis=-1, dtype=F32)
    eligible = (partial > uniforms[..., None] * partial[..., -1:]) & (probs > 0)
    return np.argmax(eligible, axis=-1).astype(np.int32)


def draw_normalising_first(probs: Any, u: Any) -> Any:
    probs = port.require_probabilities("probs", probs, (1, 2))
    uniforms = port.uniform("u", u, probs.shape[:-1])
    normalised = (probs / probs.sum(axis=-1, keepdims=True, dtype=F32)).astype(F32)
    eligible = (np.cumsum(normalised, axis=-1, dtype=F32) > uniforms[..., None]) & (probs > 0)
    last = probs.shape[-1] - 1 - np.argmax((probs > 0)[..., ::-1], axis=-1)
    return np.where(eligible.any(axis=-1), np.argmax(eligible, axis=-1), last).astype(np.int32)


def accept_by_division(p: Any, q: Any, token: Any, u: Any) -> Any:
    p, q = port.pair(p, q)
    ids = port.draft_ids("token", token, p.shape[-1], p.shape[:-1])
    uniforms = port.uniform("u", u, p.shape[:-1])
    p_t, q_t = port.at(p, ids.clamped), port.at(q, ids.clamped)
    with np.errstate(divide="ignore", invalid="ignore"):
        return ids.valid & (p_t > 0) & (uniforms <= p_t / q_t)


def filtered_dividing_first(logits: Any, cfg: Any) -> Any:
    """Temperature as logits / T - max / T: divide, then shift."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = (logits / F32(cfg.temperature)).astype(F32)
        shifted = (z - (logits.max(axis=-1, keepdims=True) / F32(cfg.temperature))).astype(F32)
    return ORIGINAL["filtered_distribution"](shifted, replace_temperature(cfg, 1.0))


def filtered_without_shift(logits: Any, cfg: Any) -> Any:
    """Temperature as logits / T with no shift by the max first."""
    with np.errstate(over="ignore", invalid="ignore"):
        z = (logits / F32(cfg.temperature)).astype(F32)
    return ORIGINAL["filtered_distribution"](z, replace_temperature(cfg, 1.0))


def replace_temperature(cfg: Any, temperature: float) -> Any:
    fields = {name: getattr(cfg, name) for name in cfg.__dataclass_fields__}
    return port.SamplerConfig(**{**fields, "temperature": temperature})


def repetition_by_reciprocal(logits: Any, history: Any, cfg: Any) -> Any:
    counts = np.zeros(logits.shape[-1], dtype=F32)
    np.add.at(counts, history[-cfg.repetition_context_size:], F32(1))
    seen = counts > 0
    rho = F32(cfg.repetition_penalty)
    if cfg.repetition_penalty != 1.0:
        penalised = np.where(logits > 0, logits * (F32(1) / rho), logits * rho)
        logits = np.where(seen, penalised, logits).astype(F32)
    return (logits - counts * F32(cfg.frequency_penalty)
            - seen.astype(F32) * F32(cfg.presence_penalty)).astype(F32)


def penalties_summed_first(logits: Any, history: Any, cfg: Any) -> Any:
    counts = np.zeros(logits.shape[-1], dtype=F32)
    np.add.at(counts, history[-cfg.repetition_context_size:], F32(1))
    seen = counts > 0
    if cfg.repetition_penalty != 1.0:
        rho = F32(cfg.repetition_penalty)
        logits = np.where(seen, np.where(logits > 0, logits / rho, logits * rho), logits)
    total = (counts * F32(cfg.frequency_penalty)
             + seen.astype(F32) * F32(cfg.presence_penalty)).astype(F32)
    return (logits - total).astype(F32)


def xtc_mixture_as_interpolation(logits: Any, config: Any, history: Any = ()) -> Any:
    if (not isinstance(config, port.SamplerConfig) or config.is_greedy
            or not 0.0 < config.xtc_probability < 1.0):
        return ORIGINAL["effective_token_distribution"](logits, config, history)
    uncut = ORIGINAL["effective_token_distribution"](logits, replace_xtc(config, 0.0), history)
    cut = ORIGINAL["effective_token_distribution"](logits, replace_xtc(config, 1.0), history)
    return (uncut + F32(config.xtc_probability) * (cut - uncut)).astype(F32)


def replace_xtc(cfg: Any, probability: float) -> Any:
    fields = {name: getattr(cfg, name) for name in cfg.__dataclass_fields__}
    return port.SamplerConfig(**{**fields, "xtc_probability": probability})


def xtc_without_shift(logits: Any, threshold: float) -> Any:
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(logits).astype(F32)
        probs = (e / e.sum(axis=-1, keepdims=True, dtype=F32)).astype(F32)
    above = (probs >= F32(threshold)) & (probs > 0)
    smallest = np.where(above, probs, F32(2)).min(axis=-1, keepdims=True)
    cut = above & (probs > smallest) & (above.sum(axis=-1, keepdims=True) >= 2)
    return np.where(cut, port.NEG_INF, logits).astype(F32)


def residual_by_reciprocal(p: Any, q: Any) -> Any:
    p, q = port.pair(p, q)
    excess = np.maximum(p - q, F32(0))
    mass = excess.sum(axis=-1, keepdims=True, dtype=F32)
    has_mass = mass > 0
    return np.where(has_mass, excess * (F32(1) / np.where(has_mass, mass, F32(1))), p)


NUMPY_ARGMAX = np.argmax


def argmax_highest_id(values: Any, axis: int = -1) -> Any:
    flipped = np.flip(values, axis=axis)
    return values.shape[axis] - 1 - NUMPY_ARGMAX(flipped, axis=axis)


def no_dtype_check(name: str, value: object, ndims: tuple[int, ...]) -> Any:
    array = port.require_array(name, value)
    if array.ndim not in ndims or array.shape[-1] < 1:
        raise port.ArgumentValueError(name, f"{name}: bad shape")
    return array.astype(F32)


def unchecked_python_uniform(name: str, value: object, batch_shape: tuple[int, ...]) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return np.full(batch_shape, value, dtype=F32)
    return ORIGINAL["uniform"](name, value, batch_shape)


def placeholders_counted_from_the_end(name: str, value: object, vocab_size: int,
                                      batch_shape: tuple[int, ...]) -> Any:
    """Array ids read as NumPy reads an index: -1 is id V - 1; only ids beyond [-V, V) are
    placeholders."""
    ids = ORIGINAL["draft_ids"](name, value, vocab_size, batch_shape)
    if not isinstance(value, np.ndarray):
        return ids
    wide = value.astype(np.int64)
    valid = (wide >= -vocab_size) & (wide < vocab_size)
    return port.DraftIds(np.where(valid, wide % vocab_size, 0).astype(np.int32), valid)


def history_counted_from_the_end(name: str, value: object, vocab_size: int) -> Any:
    """History array ids read as NumPy reads an index: -1 is id V - 1."""
    if not isinstance(value, np.ndarray) or not value.size:
        return ORIGINAL["token_history"](name, value, vocab_size)
    wide = value.astype(np.int64)
    keep = (wide >= -vocab_size) & (wide < vocab_size)
    return np.where(keep, wide % vocab_size, -1).astype(np.int32)


def dry_matching_across_no_token(history: Any, cfg: Any, vocab_size: int) -> Any:
    """DRY with an id outside the vocabulary compared as a token, not a breaker."""
    window = history if cfg.dry_penalty_last_n == -1 else history[-cfg.dry_penalty_last_n:]
    n, breakers = len(window), set(cfg.dry_sequence_breakers)
    longest = np.zeros(vocab_size, dtype=F32)
    for i in range(1, n):
        candidate, length = int(window[i]), 0
        if candidate < 0 or candidate in breakers:
            continue
        while (i - 1 - length >= 0 and int(window[n - 1 - length]) not in breakers
               and window[i - 1 - length] == window[n - 1 - length]):
            length += 1
        longest[candidate] = max(longest[candidate], F32(length))
    penalty = F32(cfg.dry_multiplier) * np.power(F32(cfg.dry_base),
                                                 longest - F32(cfg.dry_allowed_length))
    return np.where(longest >= cfg.dry_allowed_length, penalty, F32(0)).astype(F32)


def narrowed_before_the_range_test(ids: Any, vocab_size: int) -> Any:
    narrow = ids.astype(np.int32)
    return (narrow >= 0) & (narrow < vocab_size)


def placeholder_replaced_from_the_residual(p: Any, q: Any, ids: Any) -> Any:
    return port.residual_distribution(p, q)


def joint_with(*, longest_prefix: bool = True, weighted_residual: bool = True,
               last_keep_is_weight: bool = True,
               placeholder_excluded: bool = False,
               zero_residual_keep: float = 1.0) -> Callable[..., Any]:
    """The port's block verification with one of its load-bearing details changed; with
    `placeholder_excluded`, a placeholder read as a draft of p = 0 instead of ending the round."""

    original = port.verify_blockwise

    def verify(target_probs: Any, draft_probs: Any, draft_tokens: Any, uniforms: Any) -> Any:
        verdict = original(target_probs, draft_probs, draft_tokens, uniforms)  # its checks
        target, draft = np.asarray(target_probs, F32), np.asarray(draft_probs, F32)
        tokens, u = np.asarray(draft_tokens), np.asarray(uniforms, F32)
        valid = port.in_vocabulary(tokens, target.shape[-1])
        if not valid.all() and not placeholder_excluded:
            return verdict  # the other gaps are about real drafts
        k, tokens = tokens.shape[0], np.where(valid, tokens, 0).astype(np.int32)
        p_drafted = np.where(valid, target[np.arange(k), tokens], F32(0)).astype(F32)
        weights = port.prefix_weights(p_drafted, draft[np.arange(k), tokens])
        excess = np.maximum(weights[:k, None] * target[:k] - draft, F32(0))
        mass = excess.sum(axis=-1, dtype=F32)
        denominator = mass[1:] + (F32(1) - weights[1:k])
        inner = np.where(denominator > 0, mass[1:] / np.where(denominator > 0, denominator, 1),
                         F32(zero_residual_keep))
        last = weights[k:] if last_keep_is_weight else np.ones(1, F32)
        keep = np.concatenate([inner, last]).astype(F32)
        passes = (keep > 0) & (u[:k, 0] <= keep)
        if longest_prefix:
            num = int(np.where(passes, np.arange(1, k + 1), 0).max())
        else:
            num = int(np.cumprod(passes.astype(np.int32)).sum())
        if not weighted_residual:
            excess = np.maximum(target[:k] - draft, F32(0))
            mass = excess.sum(axis=-1, dtype=F32)
        safe = np.where(mass > 0, mass, F32(1))[:, None]
        rows = np.concatenate([np.where(mass[:, None] > 0, excess / safe, target[:k]),
                               target[k:]]).astype(F32)
        rejects_after = np.cumprod((F32(1) - keep)[::-1], dtype=F32)[::-1]
        later = np.concatenate([rejects_after[1:], np.ones(1, F32)])
        law = np.concatenate([rejects_after[:1], keep * later]).astype(F32)
        token = int(port.sample_from_distribution(rows, u[:, 1])[num])
        return port.JointVerdict(num, token, law)

    return verify


def draw_dividing_by_total(probs: Any, u: Any) -> Any:
    """The draw written S_i / S > u instead of S_i > u * S."""
    probs = port.require_probabilities("probs", probs, (1, 2))
    uniforms = port.uniform("u", u, probs.shape[:-1])
    partial = np.cumsum(probs, axis=-1, dtype=F32)
    eligible = ((partial / partial[..., -1:]).astype(F32) > uniforms[..., None]) & (probs > 0)
    last = probs.shape[-1] - 1 - np.argmax((probs > 0)[..., ::-1], axis=-1)
    return np.where(eligible.any(axis=-1), np.argmax(eligible, axis=-1), last).astype(np.int32)


def draw_accumulating_with(prefix_sums: Callable[[Any], Any]) -> Callable[..., Any]:
    """The port's draw with its float32 left-to-right prefix sum replaced by another sum."""

    def draw(probs: Any, u: Any) -> Any:
        probs = port.require_probabilities("probs", probs, (1, 2))
        uniforms = port.uniform("u", u, probs.shape[:-1])
        partial = prefix_sums(probs)
        eligible = (partial > uniforms[..., None] * partial[..., -1:]) & (probs > 0)
        last = probs.shape[-1] - 1 - np.argmax((probs > 0)[..., ::-1], axis=-1)
        return np.where(eligible.any(axis=-1), np.argmax(eligible, axis=-1), last).astype(np.int32)

    return draw


def float64_prefix_sums(probs: Any) -> Any:
    return np.cumsum(probs.astype(np.float64), axis=-1)


def double_accumulated_float32_prefix_sums(probs: Any) -> Any:
    """A CPU cumsum that accumulates in double and returns float32 (torch.cumsum on the CPU)."""
    return np.cumsum(probs.astype(np.float64), axis=-1).astype(F32)


def parallel_scan_prefix_sums(probs: Any) -> Any:
    """A float32 Hillis-Steele scan: the association of a parallel GPU scan."""
    scan, step = probs.astype(F32), 1
    while step < scan.shape[-1]:
        shifted = np.concatenate([np.zeros((*scan.shape[:-1], step), F32), scan[..., :-step]],
                                 axis=-1)
        scan, step = (scan + shifted).astype(F32), step * 2
    return scan


def grammar_draft_force_rejected(p: Any, q: Any, ids: Any) -> Any:
    """A draft the masked target excludes replaced by a draw from p, not the residual."""
    excluded = port.at(p, ids.clamped) <= 0
    keep_residual = ids.valid & ~excluded
    return np.where(keep_residual[..., None], port.residual_distribution(p, q), p).astype(F32)


def float64_let_through(name: str, value: object, ndims: tuple[int, ...]) -> Any:
    """The dtype check written as "float32 or float64"."""
    array = port.require_array(name, value)
    if array.dtype == np.float64:
        return array
    return ORIGINAL["require_probabilities"](name, value, ndims)


def prefix_weights_with(*, reset_is_one: bool = False,
                        log_of_ratio: bool = False) -> Callable[..., Any]:
    """The port's prefix weights with the q = 0 reset or the log ratio written otherwise."""

    def weights(p_drafted: Any, q_drafted: Any) -> Any:
        excluded = p_drafted <= 0
        unproposable = (q_drafted <= 0) & ~excluded
        finite = ~(excluded | unproposable)
        p_safe, q_safe = np.where(finite, p_drafted, F32(1)), np.where(finite, q_drafted, F32(1))
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            if log_of_ratio:
                log_ratio = np.log((p_safe / q_safe).astype(F32))
            else:
                log_ratio = np.log(p_safe) - np.log(q_safe)
            log_ratio = np.where(finite, log_ratio, F32(0)).astype(F32)
            reset = F32(1) if reset_is_one else np.abs(log_ratio).sum(dtype=F32) + F32(1)
            log_ratio = np.where(unproposable, reset, log_ratio).astype(F32)
            sums = np.concatenate([np.zeros(1, F32), np.cumsum(log_ratio, dtype=F32)])
            log_weights = sums - np.maximum.accumulate(sums)
        dead = np.concatenate([[False], np.cumsum(excluded.astype(np.int32)) > 0])
        return np.where(dead, F32(0), np.exp(log_weights)).astype(F32)

    return weights


def accept_and_draft_by_absolute_position(seed: int, start: int, k: int) -> Any:
    """The keying of the accept and draft uniforms before they were keyed by round."""
    return port.RoundRandomness(
        [port.position_uniform(seed, start + j, port.SLOTS["draft"]) for j in range(k)],
        [[port.position_uniform(seed, start + i, port.SLOTS["accept"]),
          port.position_uniform(seed, start + i, port.SLOTS["sample"])] for i in range(k + 1)],
    )


def target_draw_by_round(seed: int, start: int, k: int) -> Any:
    """The target's draw keyed by (round start, offset), like the accept uniforms."""
    right = ORIGINAL["run_uniforms"](seed, start, k)
    base = port.splitmix64(seed) ^ (4 * start + port.SLOTS["sample"])
    sample = [(port.splitmix64(port.splitmix64(base) ^ i) >> 40) / 2**24 for i in range(k + 1)]
    return port.RoundRandomness(right.draft, [[row[0], u] for row, u in zip(right.verify, sample,
                                                                          strict=True)])


KEYED_RUNS = {rule: {f"{rule}_k{k}_v{v}_context{c}" for k, c, v in ((2, 1, 3), (3, 2, 4),
                                                                   (1, 1, 4))}
              for rule in ("greedy_argmax", "sampler_match", "stochastic", "block")}
"""The seeded runs searched so that both wrong keyings that can change them do."""

ORIGINAL: dict[str, Callable[..., Any]] = {
    name: getattr(port, name) for name in (
        "verify", "verify_tokenwise", "filtered_distribution", "effective_token_distribution",
        "uniform", "require_probabilities", "run_uniforms", "draft_ids", "token_history",
    )
}

def tree_proposal_as_drawn(scheme: str, q: Any, tokens: Any, j: int) -> Any:
    """Every sibling tested against the drafter's q itself: RSD's drafts as if i.i.d., and
    deterministic candidates against a law instead of their one-hot."""
    return ORIGINAL_TREE_PROPOSAL("iid", q, tokens, j)


ORIGINAL_TREE_PROPOSAL: Callable[..., Any] = port.tree_proposal
ACCUMULATION = {"accumulation_float32_sequential", "accumulation_float32_sequential_long_tail"}
"""The draws at a float32 prefix-sum breakpoint (spec/sample_from_distribution.md)."""


GAPS: list[tuple[str, str, Callable[..., Any], str, set[str]]] = [
    ("greedy-argmax emits a draw", "verify", greedy_as_a_draw, "verify_draft_token",
     {"greedy_is_argmax_not_a_draw", "greedy_rejects_what_a_draw_accepts"}),
    ("the greedy bonus is a draw", "verify_tokenwise", greedy_bonus_as_a_draw, "verify_tokenwise",
     {"greedy_bonus_is_argmax_not_a_draw"}),
    ("a DRY breaker candidate keeps its match", "dry_penalty", dry_breaker_candidate_counted,
     "effective_token_distribution", {"dry_breaker_candidate_has_no_match"}),
    ("no fallback when no id is eligible", "sample_from_distribution", draw_without_fallback,
     "sample_from_distribution", {"fallback_no_eligible_id"}),
    ("the draw normalises first", "sample_from_distribution", draw_normalising_first,
     "sample_from_distribution",
     {"normalising_first_breaks_the_tie", "normalising_first_breaks_the_tie_at_0_75"}),
    ("the accept test divides", "accept_draft_token", accept_by_division, "accept_draft_token",
     {"divided_accept_test_differs"}),
    ("no shift before the temperature", "filtered_distribution", filtered_without_shift,
     "effective_token_distribution", {"temperature_shift_before_divide_overflow"}),
    ("divide by the temperature, then shift", "filtered_distribution", filtered_dividing_first,
     "effective_token_distribution", {"order_temperature_shift_then_divide"}),
    ("the repetition penalty multiplies by 1 / rho", "apply_repetition_penalties",
     repetition_by_reciprocal, "effective_token_distribution",
     {"order_repetition_penalty_divides"}),
    ("frequency and presence summed first", "apply_repetition_penalties",
     penalties_summed_first, "effective_token_distribution", {"order_frequency_then_presence"}),
    ("the XTC mixture as an interpolation", "effective_token_distribution",
     xtc_mixture_as_interpolation, "effective_token_distribution", {"order_xtc_mixture"}),
    ("XTC's softmax without the shift", "xtc_cut", xtc_without_shift,
     "effective_token_distribution", {"xtc_softmax_shifts_by_max"}),
    ("the residual multiplies by 1 / mass", "residual_distribution", residual_by_reciprocal,
     "residual_distribution", {"order_residual_divides_by_mass"}),
    ("float16 probabilities accepted", "require_probabilities", no_dtype_check,
     "sample_from_distribution", {"error_probs_float16", "error_probs_int32"}),
    ("Python uniforms unchecked", "uniform", unchecked_python_uniform,
     "sample_from_distribution", {"error_u_one", "error_u_negative"}),
    ("block verification stops at the first failure", "verify_blockwise",
     joint_with(longest_prefix=False), "verify_blockwise",
     {"keeps_past_the_first_rejection", "three_kept_after_a_failing_second"}),
    ("block verification's residual without the weight", "verify_blockwise",
     joint_with(weighted_residual=False), "verify_blockwise", {"weighted_residual"}),
    ("block verification with h_k = 1", "verify_blockwise",
     joint_with(last_keep_is_weight=False), "verify_blockwise", {"p_zero_excludes_prefix"}),
    ("block verification with h_i = 0 where Z_i = 0 and w_i = 1", "verify_blockwise",
     joint_with(zero_residual_keep=0.0), "verify_blockwise",
     {"zero_residual_keep_convention_is_one"}),
    ("block verification's q = 0 reset is 1", "prefix_weights",
     prefix_weights_with(reset_is_one=True), "verify_blockwise",
     {"q_zero_reset_outweighs_a_deep_deficit"}),
    ("block verification takes log(p / q)", "prefix_weights",
     prefix_weights_with(log_of_ratio=True), "verify_blockwise",
     {"log_ratio_of_a_subnormal_q"}),
    ("the draw divides by the total", "sample_from_distribution", draw_dividing_by_total,
     "sample_from_distribution", {"compares_partial_sums_with_u_times_total",
                                  "compares_partial_sums_with_u_times_total_upwards"}),
    ("the draw's prefix sums in float64", "sample_from_distribution",
     draw_accumulating_with(float64_prefix_sums), "sample_from_distribution", ACCUMULATION),
    ("the draw's prefix sums accumulated in double, stored as float32",
     "sample_from_distribution", draw_accumulating_with(double_accumulated_float32_prefix_sums),
     "sample_from_distribution", ACCUMULATION),
    ("the draw's prefix sums as a parallel scan", "sample_from_distribution",
     draw_accumulating_with(parallel_scan_prefix_sums), "sample_from_distribution",
     ACCUMULATION),
    ("a draft outside the grammar replaced from the masked target", "replacement_rows",
     grammar_draft_force_rejected, "verify_tokenwise",
     {"grammar_draft_outside_replaced_from_the_residual",
      "grammar_second_draft_outside_after_one_kept"}),
    ("one-hot verification redraws from p", "replacement_rows",
     lambda p, q, ids: p.astype(F32), "verify_tokenwise",
     {"one_hot_q_rejection_never_redraws_the_draft"}),
    ("float64 probabilities accepted", "require_probabilities", float64_let_through,
     "sample_from_distribution", {"error_probs_float64"}),
    ("accept and draft keyed by absolute position", "run_uniforms",
     accept_and_draft_by_absolute_position, "seeded_run", set().union(*KEYED_RUNS.values())),
    ("the target's draw keyed by round", "run_uniforms", target_draw_by_round, "seeded_run",
     KEYED_RUNS["sampler_match"] | KEYED_RUNS["stochastic"] | KEYED_RUNS["block"]),
    ("a negative draft id counts from the end", "draft_ids", placeholders_counted_from_the_end,
     "accept_draft_token", {"placeholder_minus_v"}),
    ("draft ids narrowed to int32 first", "in_vocabulary", narrowed_before_the_range_test,
     "accept_draft_token", {"placeholder_int64_two_pow_32"}),
    ("a placeholder replaced from the residual", "replacement_rows",
     placeholder_replaced_from_the_residual, "verify_draft_token",
     {"stochastic_placeholder_minus_one", "stochastic_placeholder_uint32_max"}),
    ("a placeholder replaced from the residual, in a round", "replacement_rows",
     placeholder_replaced_from_the_residual, "verify_tokenwise",
     {"stochastic_placeholder_minus_one_at_0", "stochastic_placeholder_minus_v_at_1",
      "stochastic_placeholder_minus_v_minus_one_at_2"}),
    ("a history id counts from the end", "token_history", history_counted_from_the_end,
     "effective_token_distribution", {"history_array_placeholders_not_counted"}),
    ("DRY matches across an id outside the vocabulary", "dry_penalty",
     dry_matching_across_no_token, "effective_token_distribution",
     {"dry_history_placeholder_breaks_match"}),
    ("block verification reads a placeholder as p = 0", "verify_blockwise",
     joint_with(placeholder_excluded=True), "verify_blockwise",
     {"placeholder_minus_v_at_1", "placeholder_million_at_1", "placeholder_uint32_max_at_1"}),
    ("tree siblings tested against q as drawn", "tree_proposal", tree_proposal_as_drawn,
     "verify_tree", {"without_replacement_renormalises_q", "candidates_are_one_hot"}),
]


@pytest.mark.parametrize(("label", "target", "gap", "family", "pinned"), GAPS,
                         ids=[g[0] for g in GAPS])
def test_a_port_with_the_gap_fails_the_vector_that_pins_it(
    monkeypatch: pytest.MonkeyPatch, label: str, target: str, gap: Callable[..., Any],
    family: str, pinned: set[str],
) -> None:
    names = {v["name"] for v in vectors(family)}
    assert pinned <= names, f"vectors {pinned - names} are missing from {family}.json"
    assert failing(family) == set(), "the port without the gap must pass"
    monkeypatch.setattr(port, target, gap)
    failed = failing(family)
    assert pinned <= failed, f"{label}: {sorted(pinned - failed)} still pass with the gap"


@pytest.mark.parametrize("prefix_sums", [double_accumulated_float32_prefix_sums,
                                         parallel_scan_prefix_sums])
def test_only_the_accumulation_vectors_catch_a_reassociated_prefix_sum(
    monkeypatch: pytest.MonkeyPatch, prefix_sums: Callable[[Any], Any],
) -> None:
    """Backs spec/sample_from_distribution.md: without the accumulation vectors, a draw
    accumulated in double (stored as float32) or scanned in parallel passed every vector."""
    monkeypatch.setattr(port, "sample_from_distribution", draw_accumulating_with(prefix_sums))
    assert failing("sample_from_distribution") == ACCUMULATION


def test_ties_towards_the_highest_id_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every argmax of the port (greedy, the draw's first eligible id) now prefers the last.
    monkeypatch.setattr(port.np, "argmax", argmax_highest_id)
    try:
        failed = failing("verify_draft_token") | failing("effective_token_distribution")
    finally:
        monkeypatch.undo()
    assert {"greedy_tie_lowest_id", "greedy_temperature_zero_lowest_id"} <= failed


def small_grids() -> Iterator[tuple[list[float], float]]:
    for size in (1, 2, 3, 4):
        for counts in itertools.product(range(5), repeat=size):
            if sum(counts) == 0:
                continue
            for scale in (1.0, 0.1, 2.0**-140):
                weights = [float(F32(c * scale)) for c in counts]
                for k in range(16):
                    yield weights, k / 16
                yield weights, 1.0 - 2.0**-24


def test_dropping_the_positive_weight_conjunct_changes_no_draw() -> None:
    checked = 0
    for weights, u in small_grids():
        w = np.array(weights, dtype=F32)
        partial = np.cumsum(w, dtype=F32)
        target = F32(u) * partial[-1]
        with_conjunct = (partial > target) & (w > 0)
        without = partial > target
        first_with = int(np.argmax(with_conjunct)) if with_conjunct.any() else None
        first_without = int(np.argmax(without)) if without.any() else None
        assert first_with == first_without, (weights, u)
        checked += 1
    assert checked > 10_000
