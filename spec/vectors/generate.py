#!/usr/bin/env python3
"""Regenerate the golden vectors in ``spec/vectors/*.json`` from the reference implementation.

Usage::

    python spec/vectors/generate.py            # rewrite the JSON files next to this script
    python spec/vectors/generate.py --out DIR  # write them into DIR instead

The output is a pure function of this file and of the library: no clock, no PRNG state, no
environment variable, no platform-dependent formatting. Pseudo-random cases come from a
fixed 64-bit linear congruential generator written out below, so they are the same on every
machine and every NumPy / MLX version.

Every case is checked before it is written against an expectation computed independently
of the library: exact rational arithmetic (``fractions.Fraction``) for the acceptance
rules, the residual, the inverse-CDF draw, the closed forms and the rewind plan, and
hand-written values (or a float64 softmax of hand-written effective logits) for the
sampler chain. A library change that alters a result therefore stops this script instead
of silently rewriting a vector; ``tests/test_golden_vectors.py`` fails if a regenerated
file differs from the committed one. The schema is documented in ``spec/vectors/schema.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TypeAlias

import mlx.core as mx
import numpy as np

from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    accept_draft_token,
    acceptance_closed_forms,
    acceptance_probability,
    effective_token_distribution,
    residual_distribution,
    residual_resample,
    rewind_trim,
    sample_from_distribution,
    sample_token_with_distribution,
    verify_block,
    verify_draft_token,
)

Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
Vector: TypeAlias = "dict[str, Json]"
Row: TypeAlias = "list[float]"

FORMAT_VERSION = 1
HERE = Path(__file__).resolve().parent
NEG_INF = float("-inf")
INEXACT_ATOL = 1e-6
"""The tolerance of a vector whose float outputs are not exact in float32 arithmetic."""
ROBUST_MARGIN = Fraction(1, 1 << 16)
"""A draw is kept only if every comparison is exact in float32 or clears this margin."""
RULES = (
    AcceptanceRule.GREEDY_ARGMAX,
    AcceptanceRule.SAMPLER_MATCH,
    AcceptanceRule.STOCHASTIC,
    AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION,
)


class GenerationError(AssertionError):
    """The library disagrees with the independent expectation of a case."""


# --- float32 values and JSON ------------------------------------------------------------


def f32(x: float) -> float:
    """`x` rounded to float32, as a Python float (exact, so JSON round-trips it)."""
    return float(np.float32(x))


def is_f32(x: Fraction) -> bool:
    """True when float32 holds the rational `x` exactly."""
    return Fraction(f32(float(x))) == x


def encode_real(x: float) -> Json:
    """A float32 value for JSON; -inf, which JSON cannot spell, becomes the string "-inf"."""
    if x == NEG_INF:
        return "-inf"
    if not math.isfinite(x):
        raise GenerationError(f"cannot encode {x!r}")
    return f32(x)


def encode_reals(values: Sequence[float] | Sequence[Sequence[float]]) -> Json:
    out: list[Json] = []
    for value in values:
        if isinstance(value, int | float):
            out.append(encode_real(float(value)))
        else:
            out.append([encode_real(float(v)) for v in value])
    return out


def _inline(value: Json) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=False, ensure_ascii=True)


def _holds_dict(value: Json) -> bool:
    if isinstance(value, dict):
        return True
    return isinstance(value, list) and any(_holds_dict(item) for item in value)


def render(value: Json, depth: int = 0, column: int = 0) -> str:
    """Deterministic JSON: sorted keys, two-space indent, lists without objects on one line
    when that line fits in 100 columns (`column` is where the value starts)."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = []
        for key in sorted(value):
            head = f"{inner}{_inline(key)}: "
            items.append(head + render(value[key], depth + 1, len(head)))
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        flat = _inline(value)
        if not _holds_dict(value) and column + len(flat) + 1 <= 100:
            return flat
        items = [f"{inner}{render(item, depth + 1, len(inner))}" for item in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return _inline(value)


# --- conversion to and from the library ---------------------------------------------------


def arr(values: Sequence[float] | Sequence[Sequence[float]]) -> mx.array:
    return mx.array([list(v) if not isinstance(v, int | float) else v for v in values],
                    dtype=mx.float32)


def floats(a: mx.array) -> list[float]:
    out = a.tolist()
    if not isinstance(out, list):
        raise GenerationError(f"expected a 1-d array, got {out!r}")
    return [float(x) for x in out if isinstance(x, int | float)]


def matrix(a: mx.array) -> list[list[float]]:
    out = a.tolist()
    if not isinstance(out, list):
        raise GenerationError(f"expected a 2-d array, got {out!r}")
    rows: list[list[float]] = []
    for row in out:
        if not isinstance(row, list):
            raise GenerationError(f"expected a 2-d array, got {out!r}")
        rows.append([float(x) for x in row if isinstance(x, int | float)])
    return rows


def scalar_int(a: mx.array) -> int:
    value = a.item()
    if not isinstance(value, int) or isinstance(value, bool):
        raise GenerationError(f"expected an integer, got {value!r}")
    return value


def scalar_float(a: mx.array) -> float:
    value = a.item()
    if not isinstance(value, float):
        raise GenerationError(f"expected a float, got {value!r}")
    return value


def scalar_bool(a: mx.array) -> bool:
    value = a.item()
    if not isinstance(value, bool):
        raise GenerationError(f"expected a bool, got {value!r}")
    return value


def ints(a: mx.array) -> list[int]:
    out = a.tolist()
    if not isinstance(out, list):
        raise GenerationError(f"expected a 1-d array, got {out!r}")
    return [int(x) for x in out if isinstance(x, int)]


def bools(a: mx.array) -> list[bool]:
    out = a.tolist()
    if not isinstance(out, list):
        raise GenerationError(f"expected a 1-d array, got {out!r}")
    return [bool(x) for x in out]


_FLOAT_FIELDS = frozenset(
    f.name for f in dataclasses.fields(SamplerConfig) if f.type in ("float", float)
)


def config(**fields: float | int | tuple[int, ...] | dict[int, float]) -> SamplerConfig:
    """A SamplerConfig whose real fields are already float32 values (what JSON will hold)."""
    rounded: dict[str, object] = {}
    for name, value in fields.items():
        if name in _FLOAT_FIELDS and isinstance(value, int | float):
            rounded[name] = f32(float(value))
        elif name == "logit_bias" and isinstance(value, dict):
            rounded[name] = {token: f32(bias) for token, bias in value.items()}
        else:
            rounded[name] = value
    return SamplerConfig(**rounded)  # type: ignore[arg-type]


def encode_config(cfg: SamplerConfig) -> Json:
    out: dict[str, Json] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name == "logit_bias":
            out[f.name] = [[int(t), f32(b)] for t, b in sorted(value.items())]
        elif f.name == "dry_sequence_breakers":
            out[f.name] = [int(t) for t in value]
        elif f.name in _FLOAT_FIELDS:
            out[f.name] = f32(float(value))
        else:
            out[f.name] = int(value)
    return out


def vector(name: str, note: str, inputs: Vector, expected: Vector, atol: float) -> Vector:
    return {"name": name, "note": note, "input": inputs, "expected": expected, "atol": atol}


def check_close(name: str, got: Sequence[float], want: Sequence[float], atol: float) -> None:
    if len(got) != len(want) or any(abs(g - w) > atol for g, w in zip(got, want, strict=True)):
        raise GenerationError(f"{name}: library gives {list(got)}, expected {list(want)}")


def check_equal(name: str, got: object, want: object) -> None:
    if got != want:
        raise GenerationError(f"{name}: library gives {got!r}, expected {want!r}")


# --- the independent oracle: exact rational arithmetic -------------------------------------

Rational: TypeAlias = "list[Fraction]"


def rational(row: Sequence[float]) -> Rational:
    return [Fraction(x) for x in row]


def oracle_sample(weights: Rational, u: Fraction) -> int:
    """The smallest id i with weights[i] > 0 and cumsum(weights)[i] > u * sum(weights)."""
    target, partial = u * sum(weights), Fraction(0)
    for i, w in enumerate(weights):
        partial += w
        if w > 0 and partial > target:
            return i
    raise GenerationError(f"no eligible id for {weights} and u={u}")


def draw_is_robust(weights: Rational, u: Fraction) -> bool:
    """True when float32 reproduces `oracle_sample` whatever the rounding of a correct port.

    Either every weight, partial sum and the target ``u * total`` is exact in float32 (then
    ties are deliberate and reproducible), or no partial sum at an id of positive weight
    (the only ids a draw can return) lies within ROBUST_MARGIN of the target.
    """
    total = sum(weights)
    partials, partial = [], Fraction(0)
    for w in weights:
        partial += w
        partials.append(partial)
    exact = all(is_f32(w) for w in weights) and all(is_f32(s) for s in partials)
    if exact and is_f32(u * total):
        return True
    return all(
        abs(s - u * total) >= ROBUST_MARGIN for s, w in zip(partials, weights, strict=True) if w > 0
    )


def oracle_accept(p: Rational, q: Rational, token: int, u: Fraction) -> bool:
    return p[token] > 0 and u * q[token] <= p[token]


def oracle_residual(p: Rational, q: Rational) -> Rational:
    excess = [max(a - b, Fraction(0)) for a, b in zip(p, q, strict=True)]
    mass = sum(excess)
    return [e / mass for e in excess] if mass > 0 else list(p)


def oracle_argmax(p: Rational) -> int:
    return p.index(max(p))  # the lowest id on ties


def oracle_verify(
    rule: AcceptanceRule, p: Rational, q: Rational | None, token: int,
    u_accept: Fraction, u_sample: Fraction,
) -> tuple[bool, int, bool]:
    """(accepted, emitted, robust) for one position."""
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        emitted = oracle_argmax(p)
        return emitted == token, emitted, True
    if rule is AcceptanceRule.STOCHASTIC:
        assert q is not None
        if oracle_accept(p, q, token, u_accept):
            return True, token, True
        residual = oracle_residual(p, q)
        return False, oracle_sample(residual, u_sample), draw_is_robust(residual, u_sample)
    draw = oracle_sample(p, u_sample)
    return draw == token, draw, draw_is_robust(p, u_sample)


def oracle_block(
    rule: AcceptanceRule, target: list[Rational], draft: list[Rational] | None,
    tokens: Sequence[int], uniforms: Sequence[Sequence[Fraction]],
) -> tuple[int, int, bool]:
    """(num_accepted, next_token, robust) for a round."""
    k = len(tokens)
    for i in range(k):
        q = None if draft is None else draft[i]
        accepted, emitted, robust = oracle_verify(
            rule, target[i], q, tokens[i], uniforms[i][0], uniforms[i][1]
        )
        if not accepted:
            return i, emitted, robust
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        return k, oracle_argmax(target[k]), True
    return k, oracle_sample(target[k], uniforms[k][1]), draw_is_robust(target[k], uniforms[k][1])


def exact_atol(values: Sequence[Fraction]) -> float:
    """0 when float32 holds every expected value exactly, else INEXACT_ATOL."""
    return 0.0 if all(is_f32(v) for v in values) else INEXACT_ATOL


# --- reproducible pseudo-random cases ----------------------------------------------------


class Lcg:
    """Knuth's MMIX 64-bit LCG; the high bits drive every pseudo-random case."""

    def __init__(self, seed: int) -> None:
        self.state = seed & ((1 << 64) - 1)

    def below(self, n: int) -> int:
        self.state = (6364136223846793005 * self.state + 1442695040888963407) % (1 << 64)
        return (self.state >> 33) % n

    def dyadic_distribution(self, size: int, units: int = 16) -> list[float]:
        """`units` quanta of mass 1/units dropped on `size` ids: exact in float32."""
        counts = [0] * size
        for _ in range(units):
            counts[self.below(size)] += 1
        return [c / units for c in counts]

    def uniform(self, bits: int = 5) -> float:
        """A multiple of 2**-bits in [0, 1)."""
        return self.below(1 << bits) / (1 << bits)


def slug(rule: AcceptanceRule) -> str:
    return rule.value.replace("-", "_")


def seed_of(*parts: int) -> int:
    seed = 0x5EC0ACCE
    for part in parts:
        seed = (seed * 1_000_003 + part) % (1 << 64)
    return seed


def draw_from(weights: Sequence[float], rng: Lcg) -> int:
    """A token drawn from `weights` by the oracle (used to make realistic draft tokens)."""
    return oracle_sample(rational(weights), Fraction(rng.uniform(8)))


# --- effective_token_distribution (+ sample_token_with_distribution) ----------------------

LOG_DYADIC = floats(mx.log(mx.array([0.5, 0.25, 0.125, 0.125])))
"""float32 log([1/2, 1/4, 1/8, 1/8]): softmax maps these back to the exact dyadics."""
DRAW_UNIFORMS = (0.0, 0.25, 0.5, 0.75, 0.96875)


def softmax64(logits: Sequence[float]) -> list[float]:
    top = max(logits)
    weights = [0.0 if x == NEG_INF else math.exp(x - top) for x in logits]
    total = sum(weights)
    return [w / total for w in weights]


@dataclasses.dataclass(frozen=True)
class DistributionCase:
    name: str
    note: str
    logits: list[float] | list[list[float]]
    cfg: SamplerConfig
    want: list[float] | list[list[float]]
    """The expected probabilities, from hand-written values (float64)."""
    exact: bool
    history: tuple[int, ...] = ()


def distribution_cases() -> list[DistributionCase]:
    d = LOG_DYADIC
    dyadic = [0.5, 0.25, 0.125, 0.125]
    two_thirds = [2 / 3, 1 / 3, 0.0, 0.0]
    c = DistributionCase
    return [
        c("plain_softmax_dyadic", "no filter: softmax of log-dyadic logits", d, config(),
          dyadic, True),
        c("uniform_logits", "equal logits: exp(0) = 1 for every id", [0.0] * 4, config(),
          [0.25] * 4, True),
        c("masked_logits_minus_inf", "-inf logits get exact zeros", [0.0, NEG_INF, 0.0, NEG_INF],
          config(), [0.5, 0.0, 0.5, 0.0], True),
        c("temperature_two", "temperature divides the max-shifted logits", d,
          config(temperature=2.0), softmax64([x / 2.0 for x in d]), False),
        c("temperature_half", "temperature below 1 sharpens", d, config(temperature=0.5),
          softmax64([x * 2.0 for x in d]), False),
        c("temperature_tiny_stays_finite",
          "logits are shifted by their max before dividing, so a tiny temperature keeps "
          "the tied maxima at 0 and sends the rest to -inf, never NaN",
          [1.0, 1.0, 0.5], config(temperature=1e-30), [0.5, 0.5, 0.0], True),
        c("greedy_temperature_zero_lowest_id", "temperature 0 is greedy; ties go to the lowest id",
          [1.0, 3.0, 3.0, 2.0], config(temperature=0.0), [0.0, 1.0, 0.0, 0.0], True),
        c("greedy_top_k_one_lowest_id",
          "top_k = 1 is greedy (one-hot, lowest id on ties), unlike top_k = 2 which keeps ties",
          [1.0, 3.0, 3.0, 2.0], config(temperature=0.7, top_k=1), [0.0, 1.0, 0.0, 0.0], True),
        c("greedy_after_logit_bias", "greedy takes the argmax after the logit bias",
          [1.0, 3.0, 3.0, 2.0], config(temperature=0.0, logit_bias={0: 2.5}),
          [1.0, 0.0, 0.0, 0.0], True),
        c("greedy_ignores_xtc", "XTC does not apply to a greedy sampler", d,
          config(temperature=0.0, xtc_probability=1.0, xtc_threshold=0.125),
          [1.0, 0.0, 0.0, 0.0], True),
        c("top_k_ties_at_kth_kept", "every id tied with the k-th largest logit is kept",
          [0.0, 0.0, 0.0, 0.0, -1.0], config(top_k=2), [0.25, 0.25, 0.25, 0.25, 0.0], True),
        c("top_k_cut", "top-k keeps the k largest and renormalizes", d, config(top_k=2),
          two_thirds, False),
        c("top_k_at_vocab_size_is_off", "top_k >= V is off", d, config(top_k=4), dyadic, True),
        c("top_p_first_token_reaches", "cumsum 0.5 is not < 0.5: the first id alone reaches top_p",
          d, config(top_p=0.5), [1.0, 0.0, 0.0, 0.0], True),
        c("top_p_exact_reach_stops", "cumsum reaches 0.75 exactly at id 1: ids 0 and 1 are kept",
          d, config(top_p=0.75), two_thirds, False),
        c("top_p_crossing_token_kept", "the id whose cumsum crosses top_p = 0.625 is kept", d,
          config(top_p=0.625), two_thirds, False),
        c("top_p_ties_with_crossing_token_kept",
          "id 2 crosses top_p = 0.8125; id 3 ties with it and is kept too", d,
          config(top_p=0.8125), dyadic, True),
        c("top_p_uniform_ties", "all ids tie with the crossing id", [0.0] * 4,
          config(top_p=0.3), [0.25] * 4, True),
        c("top_p_robust_tie", "ids 0 and 1 tie; id 0 crosses top_p = 0.25 and id 1 is kept",
          [0.0, 0.0, -1.0], config(top_p=0.25), [0.5, 0.5, 0.0], True),
        c("top_p_after_top_k",
          "top-p runs on the top-k renormalized [2/3, 1/3]: id 0 alone reaches 0.625 "
          "(without top-k, ids 0 and 1 would be kept)", d, config(top_k=2, top_p=0.625),
          [1.0, 0.0, 0.0, 0.0], True),
        c("top_k_tie_keeps_all", "top_k = 3: id 3 ties with the third largest, all four kept", d,
          config(top_k=3), dyadic, True),
        c("min_p_inclusive_at_floor", "floor = 0.25 * max = 0.125; ids equal to the floor are kept",
          d, config(min_p=0.25), dyadic, True),
        c("min_p_excludes_below_floor", "floor = 0.5 * 0.5 = 0.25 drops the two 0.125 ids", d,
          config(min_p=0.5), two_thirds, False),
        c("min_p_after_top_p",
          "top-p keeps ids 0 and 1, then min-p (floor 0.375 * 2/3 = 0.25) keeps both; the "
          "reverse order would leave id 0 alone", d, config(top_p=0.625, min_p=0.375),
          two_thirds, False),
        c("xtc_mixture_half", "0.5 * no cut + 0.5 * cut: the mixture, no randomness", d,
          config(xtc_probability=0.5, xtc_threshold=0.25), [0.25, 0.375, 0.1875, 0.1875], True),
        c("xtc_always_cut", "ids 0 and 1 reach 0.25; all but the least likely (id 1) are cut", d,
          config(xtc_probability=1.0, xtc_threshold=0.25), [0.0, 0.5, 0.25, 0.25], True),
        c("xtc_needs_two_above_threshold", "only id 0 reaches 0.5: no cut", d,
          config(xtc_probability=1.0, xtc_threshold=0.5), dyadic, True),
        c("xtc_ties_at_smallest_survive", "every id tied at the smallest qualifying mass survives",
          d, config(xtc_probability=1.0, xtc_threshold=0.125), [0.0, 0.0, 0.5, 0.5], True),
        c("xtc_before_temperature",
          "XTC reads softmax(logits) at temperature 1, before the temperature: at T = 0.5 only "
          "id 0 would reach 0.2, at T = 1 ids 0 and 1 do, so id 0 is cut",
          d, config(temperature=0.5, xtc_probability=1.0, xtc_threshold=0.2),
          softmax64([NEG_INF] + [x * 2.0 for x in d[1:]]), False),
        c("logit_bias_added_first", "the bias is added to the raw logits", [0.0] * 4,
          config(logit_bias={0: 1.0, 2: -1.0}), softmax64([1.0, 0.0, -1.0, 0.0]), False),
        c("repetition_penalty_sign_aware",
          "seen ids: positive logits divided by the penalty, negative ones multiplied",
          [2.0, 1.0, 0.0, -1.0], config(repetition_penalty=2.0),
          softmax64([1.0, 1.0, 0.0, -2.0]), False, (0, 3)),
        c("repetition_context_window", "only the last repetition_context_size ids count",
          [2.0, 1.0, 0.0, -1.0], config(repetition_penalty=2.0, repetition_context_size=1),
          softmax64([2.0, 0.5, 0.0, -1.0]), False, (0, 3, 1)),
        c("frequency_and_presence", "subtract count * frequency + seen * presence", [0.0] * 4,
          config(frequency_penalty=0.5, presence_penalty=0.25),
          softmax64([0.0, -1.25, -0.75, 0.0]), False, (1, 1, 2)),
        c("dry_continuation_penalised",
          "suffix [1, 2] occurred before, followed by 3: match length 2 = allowed length, "
          "penalty 1 * 2 ** 0 on id 3",
          [0.0] * 5, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=2),
          softmax64([0.0, 0.0, 0.0, -1.0, 0.0]), False, (1, 2, 3, 1, 2)),
        c("dry_repeat_run", "history 0 0 0 0: id 0 has match length 3, penalty 2 ** (3 - 1)",
          [0.0] * 5, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1),
          softmax64([-4.0, 0.0, 0.0, 0.0, 0.0]), False, (0, 0, 0, 0)),
        c("dry_breaker_stops_match", "a sequence breaker at the end of the suffix stops the match",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_sequence_breakers=(2,)),
          [0.25] * 4, True, (1, 2, 3, 1, 2)),
        c("dry_penalty_last_n_window", "DRY reads only the last dry_penalty_last_n ids",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_penalty_last_n=3),
          [0.25] * 4, True, (1, 2, 3, 1, 2)),
        c("rows_share_history", "[R, V] logits: each row is filtered independently",
          [d, [0.0] * 4], config(), [dyadic, [0.25] * 4], True),
        c("rows_greedy", "[R, V] logits under a greedy config", [[0.0, 1.0, 1.0], [2.0, 0.0, 2.0]],
          config(temperature=0.0), [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], True),
    ]


def effective_token_distribution_vectors() -> list[Vector]:
    out: list[Vector] = []
    for case in distribution_cases():
        logits = mx.array(case.logits, dtype=mx.float32)
        probs = effective_token_distribution(logits, case.cfg, list(case.history))
        atol = 0.0 if case.exact else INEXACT_ATOL
        draw_uniforms: list[Json] = []
        draw_tokens: list[Json] = []
        if probs.ndim == 1:
            got = floats(probs)
            want = [float(x) for x in case.want if isinstance(x, int | float)]
            check_close(case.name, got, want, atol)
            for u in DRAW_UNIFORMS:
                weights = rational(got)
                if not draw_is_robust(weights, Fraction(u)):
                    continue
                token, law = sample_token_with_distribution(logits, case.cfg, list(case.history), u)
                check_equal(f"{case.name} draw u={u}", scalar_int(token), oracle_sample(weights,
                                                                                        Fraction(u)))
                check_equal(f"{case.name} draw law", floats(law), got)
                draw_uniforms.append(u)
                draw_tokens.append(scalar_int(token))
            expected_probs: Json = encode_reals(got)
        else:
            rows = matrix(probs)
            for r, (row, want_row) in enumerate(zip(rows, case.want, strict=True)):
                assert isinstance(want_row, list)
                check_close(f"{case.name}[{r}]", row, want_row, atol)
            expected_probs = encode_reals(rows)
        inputs: Vector = {
            "logits": encode_reals(case.logits),
            "config": encode_config(case.cfg),
            "history": list(case.history),
            "draw_uniforms": draw_uniforms,
        }
        expected: Vector = {"probs": expected_probs, "draw_tokens": draw_tokens}
        out.append(vector(case.name, case.note, inputs, expected, atol))
    return out


# --- sample_from_distribution -----------------------------------------------------------


def sample_from_distribution_vectors() -> list[Vector]:
    below_one = 1.0 - 2.0**-24
    hand: list[tuple[str, str, list[float], float]] = [
        ("zero_id_skipped_at_0", "u = 0: the first id of positive mass", [0.5, 0.0, 0.25, 0.25],
         0.0),
        ("inside_first", "u * total = 0.25 < cumsum[0] = 0.5", [0.5, 0.0, 0.25, 0.25], 0.25),
        ("strict_tie_moves_on", "u * total = 0.5 = cumsum[0]: strict >, and id 1 has no mass",
         [0.5, 0.0, 0.25, 0.25], 0.5),
        ("strict_tie_at_0_75", "u * total = 0.75 = cumsum[2]: the next id", [0.5, 0.0, 0.25, 0.25],
         0.75),
        ("last_id", "u close to 1 lands on the last id", [0.5, 0.0, 0.25, 0.25], 0.96875),
        ("largest_uniform_below_one", "u = 1 - 2**-24, the largest float32 below 1",
         [0.5, 0.5, 0.0], below_one),
        ("leading_zeros", "u = 0 with leading zero mass skips them", [0.0, 0.0, 1.0], 0.0),
        ("unnormalized_weights", "the draw compares against u * sum: 0.5 * 4 = 2 = cumsum[0]",
         [2.0, 1.0, 1.0], 0.5),
        ("unnormalized_inside", "u * sum = 1 < cumsum[0] = 2", [2.0, 1.0, 1.0], 0.25),
        ("one_hot", "a one-hot law returns its id for every u", [0.0, 0.0, 1.0, 0.0], 0.5),
    ]
    out: list[Vector] = []
    for name, note, probs, u in hand:
        u = f32(u)
        got = scalar_int(sample_from_distribution(arr(probs), u))
        want = oracle_sample(rational(probs), Fraction(u))
        if not draw_is_robust(rational(probs), Fraction(u)):
            raise GenerationError(f"{name} is not robust")
        check_equal(name, got, want)
        out.append(vector(name, note, {"probs": encode_reals(probs), "u": u}, {"token": got}, 0.0))

    rows = [[0.5, 0.0, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25], [0.0, 0.0, 0.0, 1.0]]
    per_row = [0.5, 0.5, 0.0]
    shared = 0.75
    cases: list[tuple[str, str, float | mx.array, list[float], Json]] = [
        ("rows_one_uniform_each", "[R, V] probs with an [R] uniform per row",
         mx.array(per_row, dtype=mx.float32), per_row, list(per_row)),
        ("rows_shared_uniform", "[R, V] probs with one number for all rows", shared,
         [shared] * len(rows), shared),
    ]
    for name, note, u_arg, u_list, u_json in cases:
        got_ids = ints(sample_from_distribution(arr(rows), u_arg))
        want_ids = [oracle_sample(rational(r), Fraction(x))
                    for r, x in zip(rows, u_list, strict=True)]
        check_equal(name, got_ids, want_ids)
        out.append(vector(name, note, {"probs": encode_reals(rows), "u": u_json},
                          {"token": list(got_ids)}, 0.0))

    rng = Lcg(seed_of(1))
    for i in range(16):
        size = 3 + rng.below(6)
        probs = rng.dyadic_distribution(size)
        u = rng.uniform()
        got = scalar_int(sample_from_distribution(arr(probs), u))
        check_equal(f"random_{i}", got, oracle_sample(rational(probs), Fraction(u)))
        out.append(vector(f"random_{i:02d}", "pseudo-random dyadic case", {
            "probs": encode_reals(probs), "u": u}, {"token": got}, 0.0))
    return out


# --- accept_draft_token -------------------------------------------------------------------


def accept_draft_token_vectors() -> list[Vector]:
    tiny = 2.0**-30
    hand: list[tuple[str, str, list[float], list[float], int, float]] = [
        ("ratio_half_u_quarter", "u * q = 0.125 <= p = 0.25", [0.25, 0.75], [0.5, 0.5], 0, 0.25),
        ("ratio_half_boundary_inclusive", "u * q = 0.25 = p: accepted (<=)", [0.25, 0.75],
         [0.5, 0.5], 0, 0.5),
        ("ratio_half_u_three_quarters", "u * q = 0.375 > p = 0.25", [0.25, 0.75], [0.5, 0.5], 0,
         0.75),
        ("p_above_q_always", "p[t] >= q[t]: accepted for every u", [0.75, 0.25], [0.5, 0.5], 0,
         0.96875),
        ("underflowed_q_and_p_zero",
         "q[t] = 0 (underflowed) and p[t] = 0: u * q <= p reads 0 <= 0, the p[t] > 0 conjunct "
         "rejects", [0.0, 1.0], [0.0, 1.0], 0, 0.0),
        ("p_zero_u_zero", "p[t] = 0 rejects even with u = 0", [0.0, 1.0], [0.5, 0.5], 0, 0.0),
        ("q_zero_p_positive", "q[t] = 0 < p[t]: accepted without a division", [0.5, 0.5],
         [0.0, 1.0], 0, 0.96875),
        ("tiny_p_u_zero", "p[t] = 2**-30: u = 0 accepts", [tiny, 1.0 - tiny], [0.5, 0.5], 0, 0.0),
        ("tiny_p_boundary", "u * q = 2**-29 * 0.5 = 2**-30 = p[t]: accepted", [tiny, 1.0 - tiny],
         [0.5, 0.5], 0, 2.0**-29),
        ("tiny_p_rejects", "u * q = 2**-25 > p[t] = 2**-30", [tiny, 1.0 - tiny], [0.5, 0.5], 0,
         2.0**-24),
    ]
    out: list[Vector] = []
    for name, note, p, q, token, u in hand:
        p, q = [f32(x) for x in p], [f32(x) for x in q]
        got = scalar_bool(accept_draft_token(arr(p), arr(q), token, u))
        check_equal(name, got, oracle_accept(rational(p), rational(q), token, Fraction(u)))
        out.append(vector(name, note, {"p": encode_reals(p), "q": encode_reals(q),
                                       "token": token, "u": u}, {"accepted": got}, 0.0))

    p_rows = [[0.25, 0.75], [0.0, 1.0], [0.5, 0.5]]
    q_rows = [[0.5, 0.5], [0.5, 0.5], [0.0, 1.0]]
    tokens, us = [0, 0, 0], [0.5, 0.0, 0.75]
    got_rows = bools(accept_draft_token(arr(p_rows), arr(q_rows), mx.array(tokens),
                                        mx.array(us)))
    want_rows = [oracle_accept(rational(a), rational(b), t, Fraction(u))
                 for a, b, t, u in zip(p_rows, q_rows, tokens, us, strict=True)]
    check_equal("rows", got_rows, want_rows)
    out.append(vector("rows", "[k, V] rows with [k] tokens and uniforms",
                      {"p": encode_reals(p_rows), "q": encode_reals(q_rows), "token": list(tokens),
                       "u": list(us)}, {"accepted": list(got_rows)}, 0.0))

    rng = Lcg(seed_of(2))
    for i in range(16):
        size = 2 + rng.below(5)
        p = rng.dyadic_distribution(size)
        q = rng.dyadic_distribution(size)
        token = draw_from(q, rng)
        u = rng.uniform()
        got = scalar_bool(accept_draft_token(arr(p), arr(q), token, u))
        check_equal(f"random_{i}", got, oracle_accept(rational(p), rational(q), token, Fraction(u)))
        out.append(vector(f"random_{i:02d}", "pseudo-random dyadic case; token drawn from q",
                          {"p": encode_reals(p), "q": encode_reals(q), "token": token, "u": u},
                          {"accepted": got}, 0.0))
    return out


# --- residual_distribution + residual_resample --------------------------------------------


def residual_vector(name: str, note: str, p: Row, q: Row, uniforms: Sequence[float]) -> Vector:
    residual = floats(residual_distribution(arr(p), arr(q)))
    want = oracle_residual(rational(p), rational(q))
    atol = exact_atol(want)
    check_close(name, residual, [float(x) for x in want], atol)
    kept_u: list[Json] = []
    tokens: list[Json] = []
    for u in uniforms:
        if not draw_is_robust(want, Fraction(u)):
            continue
        token = scalar_int(residual_resample(arr(p), arr(q), u))
        check_equal(f"{name} u={u}", token, oracle_sample(want, Fraction(u)))
        kept_u.append(u)
        tokens.append(token)
    return vector(name, note, {"p": encode_reals(p), "q": encode_reals(q), "u": kept_u},
                  {"residual": encode_reals(residual), "tokens": tokens}, atol)


def residual_distribution_vectors() -> list[Vector]:
    us = (0.0, 0.25, 0.5, 0.75, 0.96875)
    out = [
        residual_vector("excess_on_one_id", "relu(p - q) has mass only at id 0",
                        [0.5, 0.25, 0.25], [0.25, 0.5, 0.25], us),
        residual_vector("p_equals_q_falls_back_to_p",
                        "no residual mass: the fallback returns p itself", [0.5, 0.5], [0.5, 0.5],
                        us),
        residual_vector("fallback_keeps_p_unnormalized",
                        "p <= q everywhere (weights, not distributions): p is returned as is",
                        [0.25, 0.25], [0.5, 0.5], us),
        residual_vector("residual_inside_target_support",
                        "ids with p = 0 never get residual mass", [0.0, 0.5, 0.5, 0.0],
                        [0.25, 0.25, 0.25, 0.25], us),
        residual_vector("inexact_thirds", "mass 0.75: the residual is [2/3, 1/3, 0]",
                        [0.5, 0.5, 0.0], [0.0, 0.25, 0.75], us),
        residual_vector("greedy_drafter_one_hot_q", "a one-hot q removes the draft's id",
                        [0.25, 0.5, 0.25], [1.0, 0.0, 0.0], us),
    ]
    rng = Lcg(seed_of(3))
    for i in range(12):
        size = 2 + rng.below(6)
        p = rng.dyadic_distribution(size)
        q = rng.dyadic_distribution(size)
        out.append(residual_vector(f"random_{i:02d}", "pseudo-random dyadic case", p, q,
                                   [rng.uniform() for _ in range(3)]))
    return out


# --- verify_draft_token ----------------------------------------------------------------------


def verify_vector(
    name: str, note: str, rule: AcceptanceRule, p: Row, q: Row | None, token: int,
    u_accept: float, u_sample: float,
) -> Vector | None:
    accepted, emitted, robust = oracle_verify(
        rule, rational(p), None if q is None else rational(q), token,
        Fraction(u_accept), Fraction(u_sample),
    )
    if not robust:
        return None
    verdict = verify_draft_token(rule, arr(p), None if q is None else arr(q), token,
                                 u_accept, u_sample)
    check_equal(name, (scalar_bool(verdict.accepted), scalar_int(verdict.token)),
                (accepted, emitted))
    return vector(name, note, {
        "rule": rule.value, "p": encode_reals(p),
        "q": None if q is None else encode_reals(q),
        "token": token, "u_accept": u_accept, "u_sample": u_sample,
    }, {"accepted": accepted, "token": emitted}, 0.0)


def verify_draft_token_vectors() -> list[Vector]:
    g, m, s = (AcceptanceRule.GREEDY_ARGMAX, AcceptanceRule.SAMPLER_MATCH,
               AcceptanceRule.STOCHASTIC)
    n = AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION
    p, q = [0.25, 0.75], [0.5, 0.5]
    hand = [
        verify_vector("greedy_accepts_argmax", "the draft is argmax p", g, [0.25, 0.75], None, 1,
                      0.0, 0.0),
        verify_vector("greedy_tie_lowest_id", "argmax ties go to the lowest id: id 1 loses to 0",
                      g, [0.5, 0.5], None, 1, 0.0, 0.0),
        verify_vector("greedy_ignores_uniforms", "no uniform is read", g, [0.0, 0.0, 1.0], None, 2,
                      0.96875, 0.96875),
        verify_vector("stochastic_reject_residual", "u * q = 0.375 > 0.25; residual is id 1",
                      s, p, q, 0, 0.75, 0.0),
        verify_vector("stochastic_accept", "u * q = 0.125 <= 0.25", s, p, q, 0, 0.25, 0.5),
        verify_vector("stochastic_underflowed_q",
                      "p[t] = q[t] = 0: rejected by the p[t] > 0 conjunct, residual emitted",
                      s, [0.0, 0.5, 0.5], [0.0, 1.0, 0.0], 0, 0.0, 0.25),
        verify_vector("stochastic_q_zero_accepts", "q[t] = 0 < p[t]: accepted", s, [0.5, 0.5],
                      [0.0, 1.0], 0, 0.96875, 0.0),
        verify_vector("sampler_match_hit", "the draw with u_sample = 0.5 is id 1", m, p, None, 1,
                      0.96875, 0.5),
        verify_vector("sampler_match_miss", "the draw is id 1, the draft 0: emit the draw", m, p,
                      None, 0, 0.0, 0.5),
        verify_vector("sampler_match_ignores_q", "q is passed and unused", m, p, q, 0, 0.0, 0.0),
        verify_vector("no_proposal_distribution_like_sampler_match",
                      "same arithmetic as sampler-match", n, p, None, 0, 0.0, 0.5),
    ]
    out = [v for v in hand if v is not None]
    if len(out) != len(hand):
        raise GenerationError("a hand-written verify_draft_token case is not robust")

    pr, qr = [[0.25, 0.75], [0.0, 1.0]], [[0.5, 0.5], [0.5, 0.5]]
    verdict = verify_draft_token(s, arr(pr), arr(qr), mx.array([0, 0]), mx.array([0.25, 0.0]),
                                 mx.array([0.0, 0.0]))
    got_acc, got_tok = bools(verdict.accepted), ints(verdict.token)
    want = [oracle_verify(s, rational(a), rational(b), 0, Fraction(ua), Fraction(0))[:2]
            for a, b, ua in zip(pr, qr, (0.25, 0.0), strict=True)]
    check_equal("rows", list(zip(got_acc, got_tok, strict=True)), want)
    out.append(vector("stochastic_rows", "[k, V] rows", {
        "rule": s.value, "p": encode_reals(pr), "q": encode_reals(qr), "token": [0, 0],
        "u_accept": [0.25, 0.0], "u_sample": [0.0, 0.0],
    }, {"accepted": list(got_acc), "token": list(got_tok)}, 0.0))

    for r_index, rule in enumerate(RULES):
        rng = Lcg(seed_of(4, r_index))
        made = 0
        while made < 6:
            size = 2 + rng.below(5)
            p = rng.dyadic_distribution(size)
            q = p if rng.below(3) == 0 else rng.dyadic_distribution(size)
            token = draw_from(q, rng)
            q_arg = q if rule.needs_proposal_distribution else None
            made_vector = verify_vector(f"{slug(rule)}_random_{made:02d}",
                                        "pseudo-random dyadic case; token drawn from q", rule, p,
                                        q_arg, token, rng.uniform(), rng.uniform())
            if made_vector is not None:
                out.append(made_vector)
                made += 1
    return out


# --- verify_block -----------------------------------------------------------------------------


def block_vector(
    name: str, note: str, rule: AcceptanceRule, target: list[Row], draft: list[Row] | None,
    tokens: list[int], uniforms: list[list[float]],
) -> Vector | None:
    num, nxt, robust = oracle_block(
        rule, [rational(r) for r in target],
        None if draft is None else [rational(r) for r in draft],
        tokens, [[Fraction(u) for u in row] for row in uniforms],
    )
    if not robust:
        return None
    verdict = verify_block(rule, arr(target), None if draft is None else arr(draft),
                           mx.array(tokens), arr(uniforms))
    check_equal(name, (scalar_int(verdict.num_accepted), scalar_int(verdict.next_token)),
                (num, nxt))
    return vector(name, note, {
        "rule": rule.value, "target_probs": encode_reals(target),
        "draft_probs": None if draft is None else encode_reals(draft),
        "draft_tokens": list(tokens), "uniforms": encode_reals(uniforms),
    }, {"num_accepted": num, "next_token": nxt}, 0.0)


def verify_block_vectors() -> list[Vector]:
    s, g = AcceptanceRule.STOCHASTIC, AcceptanceRule.GREEDY_ARGMAX
    m = AcceptanceRule.SAMPLER_MATCH
    hand = [
        block_vector("stochastic_reject_second", "first accepted; second: p[0] = 0 rejects, "
                     "residual id 1", s, [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]],
                     [[0.5, 0.5], [1.0, 0.0]], [1, 0], [[0.5, 0.0], [0.5, 0.5], [0.0, 0.0]]),
        block_vector("greedy_bonus_lowest_id", "all accepted; the bonus argmax ties to id 0", g,
                     [[0.0, 1.0], [0.5, 0.5]], None, [1], [[0.0, 0.0], [0.0, 0.0]]),
        block_vector("sampler_match_bonus_reads_u_k_1",
                     "all accepted; the bonus is the draw of row k with uniforms[k][1]", m,
                     [[0.0, 1.0], [0.25, 0.75]], None, [1], [[0.96875, 0.0], [0.0, 0.5]]),
    ]
    out = [v for v in hand if v is not None]
    if len(out) != len(hand):
        raise GenerationError("a hand-written verify_block case is not robust")
    for r_index, rule in enumerate(RULES):
        for k in range(1, 5):
            for want in range(k + 1):
                out.append(searched_block(r_index, rule, k, want))
    return out


def searched_block(r_index: int, rule: AcceptanceRule, k: int, want: int) -> Vector:
    """The first pseudo-random round (from a seed of its own) that accepts exactly `want`."""
    rng = Lcg(seed_of(5, r_index, k, want))
    for _ in range(20000):
        size = 2 + rng.below(4)
        target = [rng.dyadic_distribution(size) for _ in range(k + 1)]
        draft = [t if rng.below(2) == 0 else rng.dyadic_distribution(size) for t in target[:k]]
        if rule is AcceptanceRule.GREEDY_ARGMAX:
            tokens = [oracle_argmax(rational(t)) if rng.below(2) == 0 else rng.below(size)
                      for t in target[:k]]
        else:
            tokens = [draw_from(q, rng) for q in draft]
        uniforms = [[rng.uniform(), rng.uniform()] for _ in range(k + 1)]
        draft_arg = draft if rule.needs_proposal_distribution else None
        num, _, robust = oracle_block(
            rule, [rational(r) for r in target],
            None if draft_arg is None else [rational(r) for r in draft_arg], tokens,
            [[Fraction(u) for u in row] for row in uniforms],
        )
        if num != want or not robust:
            continue
        made = block_vector(f"{slug(rule)}_k{k}_accept{want}",
                            f"pseudo-random dyadic round: k = {k}, {want} accepted", rule, target,
                            draft_arg, tokens, uniforms)
        if made is not None:
            return made
    raise GenerationError(f"no case found for {rule.value} k={k} accepted={want}")


# --- rewind_trim -------------------------------------------------------------------------------


def rewind_trim_vectors() -> list[Vector]:
    out: list[Vector] = []
    for n in range(1, 9):
        for a in range(n + 1):
            plan = rewind_trim(n, a)
            # Both caches must end holding current, d0 .. d(a-1): a + 1 of the round's entries.
            target_entries, draft_entries = n + 1, n
            want_backfill = a == n
            want_draft = 0 if want_backfill else draft_entries - (a + 1)
            check_equal(f"rewind n={n} a={a}", tuple(plan),
                        (target_entries - (a + 1), want_draft, want_backfill))
            out.append(vector(f"n{n}_a{a}", f"{n} drafts, {a} accepted",
                              {"num_draft": n, "num_accepted": a},
                              {"target_trim": plan.target_trim, "draft_trim": plan.draft_trim,
                               "draft_backfill": plan.draft_backfill}, 0.0))
    return out


# --- acceptance_closed_forms + acceptance_probability -------------------------------------


def closed_forms_vector(name: str, note: str, p: Row, q: Row) -> Vector:
    pr, qr = rational(p), rational(q)
    zero = Fraction(0)
    sum_min = sum((min(a, b) for a, b in zip(pr, qr, strict=True)), zero)
    sum_prod = sum((a * b for a, b in zip(pr, qr, strict=True)), zero)
    tv = sum((abs(a - b) for a, b in zip(pr, qr, strict=True)), zero) / 2
    per_rule = {
        AcceptanceRule.GREEDY_ARGMAX: qr[oracle_argmax(pr)],
        AcceptanceRule.SAMPLER_MATCH: sum_prod,
        AcceptanceRule.STOCHASTIC: sum_min,
        AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION: sum_prod,
    }
    want = [sum_min, sum_prod, tv, *per_rule.values()]
    atol = exact_atol(want)
    forms = acceptance_closed_forms(arr(p), arr(q))
    got = [scalar_float(forms.sum_min), scalar_float(forms.sum_prod),
           scalar_float(forms.total_variation)]
    check_close(name, got, [float(x) for x in want[:3]], atol)
    probabilities: dict[str, Json] = {}
    for rule, value in per_rule.items():
        prob = scalar_float(acceptance_probability(rule, arr(p), arr(q)))
        check_close(f"{name} {rule.value}", [prob], [float(value)], atol)
        probabilities[rule.value] = f32(prob)
    return vector(name, note, {"p": encode_reals(p), "q": encode_reals(q)}, {
        "sum_min": f32(got[0]), "sum_prod": f32(got[1]), "total_variation": f32(got[2]),
        "acceptance_probability": probabilities,
    }, atol)


def acceptance_closed_forms_vectors() -> list[Vector]:
    out = [
        closed_forms_vector("half_overlap", "the docstring example", [0.5, 0.5, 0.0],
                            [0.25, 0.25, 0.5]),
        closed_forms_vector("identical", "p = q: sum_min = 1, TV = 0", [0.5, 0.25, 0.25],
                            [0.5, 0.25, 0.25]),
        closed_forms_vector("disjoint", "disjoint supports: nothing is accepted", [1.0, 0.0],
                            [0.0, 1.0]),
        closed_forms_vector("argmax_rule_above_ceiling",
                            "PR 902: q(argmax p) = 0.95 exceeds the lossless ceiling ~0.3",
                            [f32(0.3), f32(0.25), f32(0.25), f32(0.2)],
                            [f32(0.95), f32(0.05), 0.0, 0.0]),
        closed_forms_vector("greedy_tie_lowest_id", "argmax p ties: q is read at the lowest id",
                            [0.5, 0.5], [0.25, 0.75]),
    ]
    rng = Lcg(seed_of(6))
    for i in range(8):
        size = 2 + rng.below(6)
        out.append(closed_forms_vector(f"random_{i:02d}", "pseudo-random dyadic case",
                                       rng.dyadic_distribution(size),
                                       rng.dyadic_distribution(size)))
    return out


# --- the files ------------------------------------------------------------------------------

FAMILIES: dict[str, tuple[list[str], str, Callable[[], list[Vector]]]] = {
    "effective_token_distribution": (
        ["effective_token_distribution", "sample_token_with_distribution"],
        "logits, config and history -> probs; each draw_uniforms[j] -> draw_tokens[j] "
        "through sample_token_with_distribution (1-d logits only)",
        effective_token_distribution_vectors,
    ),
    "sample_from_distribution": (
        ["sample_from_distribution"], "probs, u -> token (inverse CDF, strict >)",
        sample_from_distribution_vectors,
    ),
    "accept_draft_token": (
        ["accept_draft_token"], "p, q, token, u -> accepted", accept_draft_token_vectors,
    ),
    "residual_distribution": (
        ["residual_distribution", "residual_resample"],
        "p, q -> residual; each u[j] -> tokens[j] through residual_resample",
        residual_distribution_vectors,
    ),
    "verify_draft_token": (
        ["verify_draft_token"], "rule, p, q, token, u_accept, u_sample -> accepted, token",
        verify_draft_token_vectors,
    ),
    "verify_block": (
        ["verify_block"],
        "rule, target_probs, draft_probs, draft_tokens, uniforms -> num_accepted, next_token",
        verify_block_vectors,
    ),
    "rewind_trim": (
        ["rewind_trim"], "num_draft, num_accepted -> target_trim, draft_trim, draft_backfill",
        rewind_trim_vectors,
    ),
    "acceptance_closed_forms": (
        ["acceptance_closed_forms", "acceptance_probability"],
        "p, q -> sum_min, sum_prod, total_variation, acceptance_probability per rule id",
        acceptance_closed_forms_vectors,
    ),
}


def build(family: str) -> str:
    functions, description, make = FAMILIES[family]
    vectors = make()
    names = [v["name"] for v in vectors]
    if len(set(map(str, names))) != len(names):
        raise GenerationError(f"{family}: duplicate vector names")
    document: Json = {
        "family": family,
        "format_version": FORMAT_VERSION,
        "functions": [f"specaccept.{name}" for name in functions],
        "description": description,
        "generated_by": "spec/vectors/generate.py",
        "vectors": list(vectors),
    }
    text = render(document) + "\n"
    if json.loads(text) != document:
        raise GenerationError(f"{family}: the rendered JSON does not round-trip")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=HERE,
                        help="directory to write the JSON files into (default: next to this file)")
    args = parser.parse_args(argv)
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    for family in FAMILIES:
        text = build(family)
        (out_dir / f"{family}.json").write_bytes(text.encode("ascii"))
        count = len(json.loads(text)["vectors"])
        print(f"{family}.json: {count} vectors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
