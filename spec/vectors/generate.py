#!/usr/bin/env python3
"""Regenerate the golden vectors in ``spec/vectors/*.json`` from the reference implementation.

Usage::

    python spec/vectors/generate.py            # rewrite the JSON files next to this script
    python spec/vectors/generate.py --out DIR  # write them into DIR instead

The output is a pure function of this file and of the library: no clock, no PRNG state, no
environment variable, no platform-dependent formatting. Pseudo-random cases come from a
fixed 64-bit linear congruential generator written out below, so they are the same on every
machine and every NumPy / MLX version.

Every case is checked before it is written against an expectation computed independently of
the library: exact rational arithmetic (``fractions.Fraction``) for the acceptance rules,
the residual, the inverse-CDF draw, the closed forms and the rewind plan, and hand-written
values (or a float64 softmax of hand-written effective logits) for the sampler chain, the
formulas of spec/randomness.md in plain integers for the uniforms, and, for a seeded run,
the same run in exact arithmetic on uniforms keyed by hand. A library change that alters a
result therefore stops this script instead of silently rewriting a vector;
``tests/test_golden_vectors.py`` fails if a regenerated file differs from the committed one.
The schema is documented in ``spec/vectors/schema.md``.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from math import prod
from pathlib import Path
from typing import Any, TypeAlias

import mlx.core as mx
import numpy as np

from specaccept import (
    UNIFORM_GRID_SIZE,
    AcceptanceRule,
    SamplerConfig,
    accept_draft_token,
    acceptance_closed_forms,
    acceptance_probability,
    acceptance_rule,
    effective_token_distribution,
    expected_speedup,
    expected_tokens_per_round,
    grid_draw_counts,
    residual_distribution,
    residual_resample,
    rewind_trim,
    sample_from_distribution,
    sample_token_with_distribution,
    verify_blockwise,
    verify_draft_token,
    verify_tokenwise,
)
from specaccept.core import randomness
from specaccept.core.tree import (
    TreeScheme,
    iid_siblings_acceptance,
    multi_draft_ceiling,
    tree_shape,
    verify_tree,
)
from specaccept.shell.seeded_run import seeded_run

Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
Vector: TypeAlias = "dict[str, Json]"
Row: TypeAlias = "list[float]"

FORMAT_VERSION = 2
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
    rounded: dict[str, Any] = {}
    for name, value in fields.items():
        if name in _FLOAT_FIELDS and isinstance(value, int | float):
            rounded[name] = f32(float(value))
        elif name == "logit_bias" and isinstance(value, dict):
            rounded[name] = {token: f32(bias) for token, bias in value.items()}
        else:
            rounded[name] = value
    return SamplerConfig(**rounded)


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


def is_draft(token: int, vocab_size: int) -> bool:
    """spec/index.md, Validation: an id outside [0, V) in an array is a placeholder."""
    return 0 <= token < vocab_size


def oracle_accept(p: Rational, q: Rational, token: int, u: Fraction) -> bool:
    return is_draft(token, len(p)) and p[token] > 0 and u * q[token] <= p[token]


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
    """(accepted, emitted, robust) for one position; a placeholder emits the target's own."""
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        emitted = oracle_argmax(p)
        return emitted == token, emitted, True
    if not is_draft(token, len(p)):
        draw = oracle_sample(p, u_sample)
        return False, draw, draw_is_robust(p, u_sample)
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


TOP_P_CLAMP_LOGITS = [1.5139237642288208, 1.3458753824234009, 0.7813113927841187,
                      0.2644556164741516, -0.31392282247543335]
"""float32 logits whose softmax, sorted, has every float32 prefix sum below 1 - 2**-24."""


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
    oracle_atol: float | None = None
    history_dtype: str | None = None
    """When set, `history` is passed as an array of this dtype (ids outside [0, V) allowed:
    spec/index.md, Validation), not as a Python sequence."""
    """How far the float64 hand values may lie from the float32 result (default: the vector's
    atol). Set for the float32 operation-order cases, whose point is a float32 rounding."""


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
        c("temperature_before_top_p",
          "T = 0.5 sharpens to [0.73, 0.18, 0.05, 0.05] before top-p = 0.7 reads it: id 0 "
          "alone reaches 0.7 (top-p on the untempered law would keep ids 0 and 1)", d,
          config(temperature=0.5, top_p=0.7), [1.0, 0.0, 0.0, 0.0], True, oracle_atol=1e-6),
        c("temperature_before_min_p",
          "T = 0.5 before min-p = 0.2: the floor 0.2 * 0.73 drops ids 2 and 3 (on the "
          "untempered law the floor 0.1 would keep all four)", d,
          config(temperature=0.5, min_p=0.2), [0.8, 0.2, 0.0, 0.0], False),
        c("top_p_sorts_by_probability",
          "the most likely id is the last: top-p = 0.5 accumulates in descending probability, "
          "so id 3 alone reaches it (accumulated in id order, every id would be kept)",
          [d[3], d[2], d[1], d[0]], config(top_p=0.5), [0.0, 0.0, 0.0, 1.0], True),
        c("logit_bias_before_repetition_penalty",
          "the bias is added before the penalty: (1 + 1) / 2 = 1 for id 0, not 1 / 2 + 1",
          [1.0, 0.0], config(logit_bias={0: 1.0}, repetition_penalty=2.0),
          softmax64([1.0, 0.0]), False, (0,)),
        c("dry_window_counts_last_n_tokens",
          "dry_penalty_last_n = 3 reads [1, 1, 1]: id 1 matches with L = 2 = allowed length "
          "(a window one token shorter would give L = 1, no penalty)", [0.0] * 3,
          config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=2, dry_penalty_last_n=3),
          softmax64([0.0, -1.0, 0.0]), False, (0, 1, 1, 1)),
        c("dry_cap_keeps_a_fully_penalised_row_finite",
          "both ids match with L = 3: base 1e20 ** 2 overflows float32 to inf, the cap makes "
          "both lose exactly 1e30 and the row stays uniform (uncapped, both would be -inf and "
          "the row NaN)",
          [0.0, 0.0], config(dry_multiplier=1.0, dry_base=1e20, dry_allowed_length=1),
          [0.5, 0.5], True, (0, 0, 0, 0, 1, 0, 0, 0)),
        c("penalties_with_empty_history", "no history: no id is seen, nothing is penalised",
          [0.0] * 4, config(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.5),
          [0.25] * 4, True),
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
        c("dry_breaker_candidate_has_no_match",
          "id 3 is a breaker: after [1, 2] it would match length 2, but a candidate that is "
          "itself a breaker has L = 0, so nothing is penalised",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_sequence_breakers=(3,)),
          [0.25] * 4, True, (1, 2, 3, 1, 2)),
        c("temperature_shift_before_divide_overflow",
          "(logits - max) / T keeps the tied maxima at 0; logits / T first would overflow "
          "100 / 1e-37 to inf and give NaN",
          [100.0, 100.0, 50.0], config(temperature=1e-37), [0.5, 0.5, 0.0], True),
        c("order_temperature_shift_then_divide",
          "float32 order: (logits - max) / T; dividing first, logits / T - max / T, moves "
          "these probabilities by more than 1e-6",
          [2000.0, 1999.25, 1998.5, 1997.5], config(temperature=0.9),
          softmax64([x / f32(0.9) for x in [0.0, -0.75, -1.5, -2.5]]), False,
          oracle_atol=1e-4),
        c("order_repetition_penalty_divides",
          "float32 order: a positive seen logit is divided by the penalty, not multiplied by "
          "its reciprocal, which moves these probabilities by more than 1e-6",
          [700.0, 699.5, 699.0], config(repetition_penalty=1.1),
          softmax64([x / f32(1.1) for x in [700.0, 699.5, 699.0]]), False, (0, 1, 2),
          oracle_atol=1e-4),
        c("order_frequency_then_presence",
          "float32 order: logits - count * frequency - seen * presence, left to right; "
          "subtracting the summed penalty instead moves these probabilities by more than 1e-6",
          [1000.0, 1000.0, 999.0, 1000.0],
          config(frequency_penalty=1.1, presence_penalty=0.35),
          softmax64([1000.0 - 3 * f32(1.1) - f32(0.35), 1000.0 - f32(1.1) - f32(0.35), 999.0,
                     1000.0 - 2 * f32(1.1) - f32(0.35)]), False, (0, 0, 0, 1, 3, 3),
          oracle_atol=1e-4),
        c("order_xtc_mixture",
          "float32 order: (1 - xi) * uncut + xi * cut with xi = 0.35 (float32), bit for bit; "
          "uncut + xi * (cut - uncut) differs in the last bit of three entries",
          d, config(xtc_probability=0.35, xtc_threshold=0.25),
          [(1 - f32(0.35)) * a + f32(0.35) * b
           for a, b in zip([0.5, 0.25, 0.125, 0.125], [0.0, 0.5, 0.25, 0.25], strict=True)],
          True, oracle_atol=1e-7),
        c("xtc_softmax_shifts_by_max",
          "XTC's temperature-1 softmax is shifted by the max: exp(100) overflows float32, so "
          "an unshifted softmax gives NaN; here ids 0 and 1 reach 0.25 and id 0 is cut",
          [f32(100.0 + x) for x in d], config(xtc_probability=1.0, xtc_threshold=0.25),
          softmax64([NEG_INF] + [f32(100.0 + x) for x in d[1:]]), False),
        c("rows_share_history", "[R, V] logits: each row is filtered independently",
          [d, [0.0] * 4], config(), [dyadic, [0.25] * 4], True),
        c("single_token_vocabulary", "V = 1: the only id gets all the mass", [0.5], config(),
          [1.0], True),
        c("one_row_batch", "[1, V] logits: a batch of one row", [[0.0, 0.0]], config(),
          [[0.5, 0.5]], True),
        c("dry_two_token_history",
          "history [1, 1]: the candidate at position 1 matches the suffix [1], L = 1 = allowed "
          "length, so id 1 loses 1 * 2 ** 0", [0.0] * 3,
          config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1),
          softmax64([0.0, -1.0, 0.0]), False, (1, 1)),
        c("dry_multiplier_zero_is_off",
          "dry_multiplier = 0 skips DRY: computing it anyway would give 0 * base ** 2 = 0 * inf "
          "= NaN with base = float32's max", [0.0] * 4,
          config(dry_multiplier=0.0, dry_base=3.4028234663852886e38, dry_allowed_length=1),
          [0.25] * 4, True, (0, 0, 0, 0)),
        c("dry_last_n_zero_is_off", "dry_penalty_last_n = 0 turns DRY off, whatever the history",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_penalty_last_n=0), [0.25] * 4, True, (0, 0, 0, 0)),
        c("top_p_above_the_float32_total_keeps_all",
          "every float32 prefix sum of these probabilities stays below top_p = 1 - 2**-24, so "
          "the count of prefix sums below top_p is clamped to V - 1 and every id is kept",
          TOP_P_CLAMP_LOGITS, config(top_p=1.0 - 2.0**-24), softmax64(TOP_P_CLAMP_LOGITS),
          False),
        c("xtc_threshold_zero_masked_id_never_qualifies",
          "threshold 0: ids 0, 1 and 3 qualify, the masked id 2 (probability 0) does not, so the "
          "cut keeps ids 1 and 3, tied at the smallest qualifying 0.25",
          [d[0], d[1], NEG_INF, d[1]], config(xtc_probability=1.0, xtc_threshold=0.0),
          [0.0, 0.5, 0.0, 0.5], True),
        c("rows_greedy", "[R, V] logits under a greedy config", [[0.0, 1.0, 1.0], [2.0, 0.0, 2.0]],
          config(temperature=0.0), [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], True),
        # History arrays with ids outside [0, V): no token, counted by no penalty. Read
        # Python-style, -1 would count id 3 twice; narrowed to int32, int64 2**32 would be id 0.
        *(c(f"history_array_{label}_not_counted",
            f"ids {list(ids)} ({dtype}): only ids 0 and 3 are tokens, each counted once",
            [2.0, 1.0, 0.0, -1.0],
            config(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25),
            softmax64([0.25, 1.0, 0.0, -2.75]), False, ids, history_dtype=dtype)
          for label, ids, dtype in (
              ("placeholders", (0, -1, 3, 10**6, 2**31 - 1, -5), "int32"),
              ("int64_two_pow_32", (0, 2**32, 3), "int64"),
              ("uint32_max", (0, 2**32 - 1, 3), "uint32"))),
        c("dry_history_placeholder_breaks_match",
          "history [1, -1, 3, 1, -1] with breaker 2: an id outside the vocabulary breaks every "
          "match too, so the suffix ending at it matches nothing (read as a token, id 3 would "
          "match with L = 2)",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_sequence_breakers=(2,)),
          [0.25] * 4, True, (1, -1, 3, 1, -1), history_dtype="int32"),
    ]


def effective_token_distribution_vectors() -> list[Vector]:
    out: list[Vector] = []
    for case in distribution_cases():
        logits = mx.array(case.logits, dtype=mx.float32)
        history: list[int] | mx.array = (
            list(case.history) if case.history_dtype is None
            else mx.array(list(case.history), dtype=getattr(mx, case.history_dtype)))
        probs = effective_token_distribution(logits, case.cfg, history)
        atol = 0.0 if case.exact else INEXACT_ATOL
        oracle_atol = atol if case.oracle_atol is None else case.oracle_atol
        draw_uniforms: list[Json] = []
        draw_tokens: list[Json] = []
        if probs.ndim == 1:
            got = floats(probs)
            want = [float(x) for x in case.want if isinstance(x, int | float)]
            check_close(case.name, got, want, oracle_atol)
            for u in DRAW_UNIFORMS:
                weights = rational(got)
                if not draw_is_robust(weights, Fraction(u)):
                    continue
                token, law = sample_token_with_distribution(logits, case.cfg, history, u)
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
                check_close(f"{case.name}[{r}]", row, want_row, oracle_atol)
            expected_probs = encode_reals(rows)
        inputs: Vector = {
            "logits": encode_reals(case.logits),
            "config": encode_config(case.cfg),
            "history": (list(case.history) if case.history_dtype is None
                        else typed(list(case.history), case.history_dtype)),
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
        ("normalising_first_breaks_the_tie",
         "u * total = 0.5 * 14 = 7 = cumsum[2] exactly, so strict > moves on to id 3; a port "
         "that normalises first sums 2/14 + 4/14 + 1/14 to just above 0.5 and returns id 2",
         [2.0, 4.0, 1.0, 7.0], 0.5),
        ("normalising_first_breaks_the_tie_at_0_75",
         "u * total = 0.75 * 12 = 9 = cumsum[2]: id 3; normalising first returns id 2",
         [3.0, 4.0, 2.0, 3.0], 0.75),
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

    out.append(fallback_vector("fallback_no_eligible_id", [2.0**-149, 2.0**-149, 0.0]))
    out.append(fallback_vector("fallback_skips_two_trailing_zeros",
                               [2.0**-149, 2.0**-149, 0.0, 0.0]))

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


def fallback_vector(name: str, probs: list[float]) -> Vector:
    """The one draw that reaches the fallback within the preconditions: subnormal weights.

    With w = [2**-149, 2**-149, 0] (the smallest float32 subnormals) and u = 0.75,
    u * total = 1.5 * 2**-149 rounds to 2**-148 = cumsum[1] (ties to even), so no id passes
    the strict test and the last id of positive weight is returned. The exact draw is id 1
    too; a port without the fallback returns 0 (an argmax over no eligible id) or 2.
    """
    u = 0.75
    weights = np.array(probs, dtype=np.float32)
    target = np.float32(u) * np.cumsum(weights, dtype=np.float32)[-1]
    if ((np.cumsum(weights, dtype=np.float32) > target) & (weights > 0)).any():
        raise GenerationError(f"{name}: some id is eligible in float32")
    got = scalar_int(sample_from_distribution(arr(probs), u))
    check_equal(name, got, oracle_sample(rational(probs), Fraction(u)))
    return vector(name,
                  "subnormal weights: u * total rounds up to cumsum[1], no id is eligible, and "
                  "the last id of positive weight is returned (needs IEEE subnormals, no "
                  "flush to zero)", {"probs": encode_reals(probs), "u": u}, {"token": got}, 0.0)


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
        ("divided_accept_test_differs",
         "u = fl(p[0] / q[0]) exactly: u * q[0] > p[0] rejects (exactly and in float32), while "
         "a port testing u <= p[0] / q[0] accepts",
         [0.33957093954086304, 0.660429060459137], [0.627545177936554, 0.37245482206344604], 0,
         0.5411099791526794),
    ]
    out: list[Vector] = []
    for name, note, p, q, token, u in hand:
        p, q = [f32(x) for x in p], [f32(x) for x in q]
        if abs(sum(p) - 1) > INEXACT_ATOL or abs(sum(q) - 1) > INEXACT_ATOL:
            raise GenerationError(f"{name}: p and q must be distributions (up to rounding)")
        got = scalar_bool(accept_draft_token(arr(p), arr(q), token, u))
        check_equal(name, got, oracle_accept(rational(p), rational(q), token, Fraction(u)))
        if name == "divided_accept_test_differs":
            divided = np.float32(u) <= np.float32(p[token]) / np.float32(q[token])
            check_equal(f"{name}: a dividing port", bool(divided), not got)
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

    # A placeholder next to a real draft that is kept: id 0, where the placeholder is
    # gathered, would be kept too, and -4 read Python-style would be id 0.
    p_rows, q_rows = [PLACEHOLDER_P] * 2, [PLACEHOLDER_Q] * 2
    for label, value, dtype in PLACEHOLDER_IDS:
        tokens = [0, value]
        got_rows = bools(accept_draft_token(arr(p_rows), arr(q_rows), id_array(tokens, dtype),
                                            mx.array([0.0, 0.0])))
        want_rows = [oracle_accept(rational(a), rational(b), t, Fraction(0))
                     for a, b, t in zip(p_rows, q_rows, tokens, strict=True)]
        check_equal(f"placeholder_{label}", got_rows, want_rows)
        check_equal(f"placeholder_{label} is rejected", want_rows, [True, False])
        out.append(vector(f"placeholder_{label}",
                          f"id {value} ({dtype or 'int32'}) is no draft: rejected, never read",
                          {"p": encode_reals(p_rows), "q": encode_reals(q_rows),
                           "token": encode_ids(tokens, dtype), "u": [0.0, 0.0]},
                          {"accepted": list(got_rows)}, 0.0))
    return out


# --- placeholders: draft ids outside [0, V) (spec/index.md, Validation) -------------------

# Each is a placeholder in the dtype given (None: a plain JSON array, int32). The int64 2**32
# and the uint32 2**32 - 1 would be ids 0 and -1 if a port narrowed them to int32 first.
PLACEHOLDER_IDS: tuple[tuple[str, int, str | None], ...] = (
    ("minus_one", -1, None),
    ("minus_v", -4, None),
    ("minus_v_minus_one", -5, None),
    ("v", 4, None),
    ("million", 10**6, None),
    ("int32_max", 2**31 - 1, None),
    ("int64_two_pow_32", 2**32, "int64"),
    ("uint32_max", 2**32 - 1, "uint32"),
)
PLACEHOLDER_P = [0.5, 0.25, 0.25, 0.0]  # V = 4: id 0 is the argmax, kept by every rule
PLACEHOLDER_Q = [0.25, 0.25, 0.25, 0.25]


def encode_ids(values: list[int], dtype: str | None) -> Json:
    return list(values) if dtype is None else typed(list(values), dtype)


def id_array(values: list[int], dtype: str | None) -> mx.array:
    return mx.array(values, dtype=mx.int32 if dtype is None else getattr(mx, dtype))


# --- residual_distribution + residual_resample --------------------------------------------


def residual_vector(name: str, note: str, p: Row, q: Row, uniforms: Sequence[float],
                    bit_exact: bool = False) -> Vector:
    """`bit_exact`: the quotients are correctly rounded float32 divisions of exact values, so
    the vector pins them at atol 0 (checked here against the float32 division)."""
    residual = floats(residual_distribution(arr(p), arr(q)))
    want = oracle_residual(rational(p), rational(q))
    atol = exact_atol(want)
    check_close(name, residual, [float(x) for x in want], atol)
    if bit_exact:
        excess = np.maximum(np.array(p, np.float32) - np.array(q, np.float32), np.float32(0))
        divided = excess / excess.sum(dtype=np.float32)
        check_equal(f"{name} float32 division", residual, [float(x) for x in divided])
        atol = 0.0
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
        residual_vector("no_mass_falls_back_to_p_not_q",
                        "p <= q everywhere yet p != q: p is a float32 distribution one rounding "
                        "short of 1, and the fallback returns p itself, not q",
                        [0.5, f32(0.49999997)], [0.5, 0.5], us),
        residual_vector("order_residual_divides_by_mass",
                        "float32 order: relu(p - q) / mass, one correctly rounded division per "
                        "id, bit for bit: multiplying by 1 / mass gives 5/6 one ulp too high",
                        [0.0, 0.0625, 0.9375], [0.375, 0.0, 0.625], us, bit_exact=True),
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
        verify_vector("greedy_is_argmax_not_a_draw",
                      "greedy-argmax accepts the argmax; a draw from p with u_sample = 0 would "
                      "give id 0 and reject", g, [0.25, 0.75], None, 1, 0.0, 0.0),
        verify_vector("greedy_rejects_what_a_draw_accepts",
                      "greedy-argmax rejects id 0 and emits the argmax 1, where a draw with "
                      "u_sample = 0 would accept id 0", g, [0.25, 0.75], None, 0, 0.0, 0.0),
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

    # A placeholder under every rule: rejected, and the target's own token emitted. Under
    # stochastic the draw is from p (id 2 with u_sample = 0.875), not from the residual,
    # which is all on id 0.
    for rule in RULES:
        q_rows = [PLACEHOLDER_Q] * 2 if rule.needs_proposal_distribution else None
        for label, value, dtype in PLACEHOLDER_IDS[::3] if rule is not s else PLACEHOLDER_IDS:
            tokens, u_sample = [0, value], [0.25, 0.875]
            verdict = verify_draft_token(rule, arr([PLACEHOLDER_P] * 2),
                                         None if q_rows is None else arr(q_rows),
                                         id_array(tokens, dtype), mx.array([0.0, 0.0]),
                                         mx.array(u_sample))
            got = list(zip(bools(verdict.accepted), ints(verdict.token), strict=True))
            want = []
            for t, us in zip(tokens, u_sample, strict=True):
                accepted, emitted, robust = oracle_verify(
                    rule, rational(PLACEHOLDER_P),
                    None if q_rows is None else rational(PLACEHOLDER_Q), t, Fraction(0),
                    Fraction(us))
                if not robust:
                    raise GenerationError(f"placeholder_{label}: not robust")
                want.append((accepted, emitted))
            name = f"{slug(rule)}_placeholder_{label}"
            check_equal(name, got, want)
            out.append(vector(name, f"id {value} ({dtype or 'int32'}) is no draft: rejected, "
                              "the target's own token emitted", {
                "rule": rule.value, "p": encode_reals([PLACEHOLDER_P] * 2),
                "q": None if q_rows is None else encode_reals(q_rows),
                "token": encode_ids(tokens, dtype), "u_accept": [0.0, 0.0],
                "u_sample": encode_reals(u_sample),
            }, {"accepted": [a for a, _ in got], "token": [t for _, t in got]}, 0.0))

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


# --- verify_tokenwise -----------------------------------------------------------------------------


def block_vector(
    name: str, note: str, rule: AcceptanceRule, target: list[Row], draft: list[Row] | None,
    tokens: list[int], uniforms: list[list[float]], dtype: str | None = None,
) -> Vector | None:
    num, nxt, robust = oracle_block(
        rule, [rational(r) for r in target],
        None if draft is None else [rational(r) for r in draft],
        tokens, [[Fraction(u) for u in row] for row in uniforms],
    )
    if not robust:
        return None
    verdict = verify_tokenwise(rule, arr(target), None if draft is None else arr(draft),
                           id_array(tokens, dtype), arr(uniforms))
    check_equal(name, (scalar_int(verdict.num_accepted), scalar_int(verdict.next_token)),
                (num, nxt))
    return vector(name, note, {
        "rule": rule.value, "target_probs": encode_reals(target),
        "draft_probs": None if draft is None else encode_reals(draft),
        "draft_tokens": encode_ids(tokens, dtype), "uniforms": encode_reals(uniforms),
    }, {"num_accepted": num, "next_token": nxt}, 0.0)


def verify_tokenwise_vectors() -> list[Vector]:
    s, g = AcceptanceRule.STOCHASTIC, AcceptanceRule.GREEDY_ARGMAX
    m = AcceptanceRule.SAMPLER_MATCH
    hand = [
        block_vector("stochastic_reject_second", "first accepted; second: p[0] = 0 rejects, "
                     "residual id 1", s, [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]],
                     [[0.5, 0.5], [1.0, 0.0]], [1, 0], [[0.5, 0.0], [0.5, 0.5], [0.0, 0.0]]),
        block_vector("greedy_bonus_lowest_id", "all accepted; the bonus argmax ties to id 0", g,
                     [[0.0, 1.0], [0.5, 0.5]], None, [1], [[0.0, 0.0], [0.0, 0.0]]),
        block_vector("greedy_bonus_is_argmax_not_a_draw",
                     "all accepted; the bonus is argmax p_k = 1, where a draw of row k with "
                     "uniforms[k][1] = 0 would give 0", g, [[0.0, 1.0], [0.25, 0.75]], None, [1],
                     [[0.0, 0.0], [0.0, 0.0]]),
        block_vector("sampler_match_bonus_reads_u_k_1",
                     "all accepted; the bonus is the draw of row k with uniforms[k][1]", m,
                     [[0.0, 1.0], [0.25, 0.75]], None, [1], [[0.96875, 0.0], [0.0, 0.5]]),
    ]
    # Placeholders: every real draft (id 0) is kept, so the round ends at the placeholder
    # and emits the target's own token there (stochastic: the draw of p, id 2, where the
    # residual would give 0). The oracle reads a placeholder position by position.
    k = 3
    target, draft = [PLACEHOLDER_P] * (k + 1), [PLACEHOLDER_Q] * k
    for rule in RULES:
        for at in range(k):
            for label, value, dtype in PLACEHOLDER_IDS[at::3]:
                tokens = [0] * k
                tokens[at] = value
                hand.append(block_vector(
                    f"{slug(rule)}_placeholder_{label}_at_{at}",
                    f"id {value} ({dtype or 'int32'}) at draft {at} is no draft: the round of "
                    f"the first {at} drafts", rule, target,
                    draft if rule.needs_proposal_distribution else None, tokens,
                    [[0.0, 0.25 if rule is not s else 0.875]] * (k + 1), dtype))
    hand.append(block_vector(
        "stochastic_drafts_after_a_placeholder_unread",
        "the id after the placeholder (3, with p = 0) is never read: the round ends at -1",
        s, target, draft, [0, -1, 3], [[0.0, 0.875]] * (k + 1)))
    out = [v for v in hand if v is not None]
    if len(out) != len(hand):
        raise GenerationError("a hand-written verify_tokenwise case is not robust")
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


# --- verify_blockwise (block verification) -------------------------------------------


class JointOracle:
    """Block verification in exact arithmetic: the prefix weights, the keep probabilities,
    the law of the kept length and the residual rows, all as Fractions."""

    def __init__(self, target: list[Rational], draft: list[Rational], tokens: Sequence[int]):
        k = len(tokens)
        zero, one = Fraction(0), Fraction(1)
        weights = [one]
        for i, x in enumerate(tokens):
            p_x, q_x, w = target[i][x], draft[i][x], weights[-1]
            if p_x == 0 or w == 0:
                weights.append(zero)  # a prefix the target excludes stays excluded
            elif q_x == 0:
                weights.append(one)  # ratio +inf
            else:
                weights.append(min(one, w * p_x / q_x))
        self.weights = weights
        self.excess = [[max(weights[i] * a - b, zero) for a, b in zip(target[i], draft[i],
                                                                       strict=True)]
                       for i in range(k)]
        masses = [sum(row, zero) for row in self.excess]
        keep = []
        for i in range(1, k):
            denominator = masses[i] + 1 - weights[i]
            keep.append(masses[i] / denominator if denominator > 0 else one)
        keep.append(weights[k])
        self.keep = keep  # h_1 .. h_k
        self.rows = [[e / masses[i] for e in self.excess[i]] if masses[i] > 0 else target[i]
                     for i in range(k)] + [target[k]]
        law = []
        for i in range(k + 1):
            later = prod((1 - h for h in keep[i:]), start=one)
            law.append(later if i == 0 else keep[i - 1] * later)
        self.law = law

    def decide(self, uniforms: Sequence[Sequence[Fraction]]) -> tuple[int, int, bool]:
        """(num_accepted, next_token, robust) for one round's uniforms."""
        kept = [i + 1 for i, h in enumerate(self.keep) if h > 0 and uniforms[i][0] <= h]
        # Block verification reads its keep test through exp and log: only a uniform at
        # least ROBUST_MARGIN from every keep probability gives a reproducible answer.
        robust = all(abs(uniforms[i][0] - h) >= ROBUST_MARGIN for i, h in enumerate(self.keep))
        num = max(kept, default=0)
        u = uniforms[num][1]
        row = self.rows[num]
        return num, oracle_sample(row, u), robust and draw_is_robust(row, u)


def first_failure_length(target: list[Rational], draft: list[Rational], tokens: Sequence[int],
                         uniforms: Sequence[Sequence[Fraction]]) -> int:
    """What token-by-token verification (stochastic) keeps from the same uniforms."""
    for i, x in enumerate(tokens):
        if not oracle_accept(target[i], draft[i], x, uniforms[i][0]):
            return i
    return len(tokens)


def joint_vector(name: str, note: str, target: list[Row], draft: list[Row], tokens: list[int],
                 uniforms: list[list[float]], *, keep_tie: bool = False,
                 dtype: str | None = None) -> Vector | None:
    """`keep_tie`: the case puts eta_i exactly on h_i on purpose, where h_i is exact in float32
    (0 from an excluded prefix, or exp(log(1/4) - log(1/2)) = 1/2, the log-dyadic assumption
    of spec/vectors/schema.md); only the draw must then be robust."""
    exact_target, exact_draft = [rational(r) for r in target], [rational(r) for r in draft]
    exact_uniforms = [[Fraction(u) for u in row] for row in uniforms]
    # spec/verify_blockwise.md, Placeholders: the round of the drafts before the first.
    real = next((i for i, t in enumerate(tokens) if not is_draft(t, len(target[0]))),
                len(tokens))
    padding = [Fraction(0)] * (len(tokens) - real)
    if real == 0:  # the target's own step
        num, nxt = 0, oracle_sample(exact_target[0], exact_uniforms[0][1])
        robust = draw_is_robust(exact_target[0], exact_uniforms[0][1])
        law = [Fraction(1), *padding]
    else:
        oracle = JointOracle(exact_target[: real + 1], exact_draft[:real], tokens[:real])
        num, nxt, robust = oracle.decide(exact_uniforms[: real + 1])
        if keep_tie:
            robust = draw_is_robust(oracle.rows[num], exact_uniforms[num][1])
        law = [*oracle.law, *padding]
    if not robust:
        return None
    verdict = verify_blockwise(arr(target), arr(draft), id_array(tokens, dtype),
                                    arr(uniforms))
    check_equal(name, (scalar_int(verdict.num_accepted), scalar_int(verdict.next_token)),
                (num, nxt))
    check_close(name, floats(verdict.accepted_length_law), [float(x) for x in law],
                INEXACT_ATOL)
    stochastic = first_failure_length(exact_target, exact_draft, tokens, exact_uniforms)
    return vector(name, f"{note}; stochastic keeps {stochastic}", {
        "target_probs": encode_reals(target), "draft_probs": encode_reals(draft),
        "draft_tokens": encode_ids(tokens, dtype), "uniforms": encode_reals(uniforms),
    }, {"num_accepted": num, "next_token": nxt,
        "accepted_length_law": [f32(float(x)) for x in law]}, INEXACT_ATOL)


def verify_blockwise_vectors() -> list[Vector]:
    half, skew, flip = [0.5, 0.5], [0.25, 0.75], [0.75, 0.25]
    hand = [
        joint_vector("keeps_past_the_first_rejection",
                     "w = 1/2 then 3/4: eta_1 = 0.75 > h_1 = 0 but eta_2 = 0.5 <= h_2 = 3/4, "
                     "so both drafts are kept", [skew, skew, [1.0, 0.0]], [half, half], [0, 1],
                     [[0.75, 0.0], [0.5, 0.0], [0.0, 0.0]]),
        joint_vector("three_kept_after_a_failing_second",
                     "h = (0, 1/5, 1): the second test fails, the third passes, and the longest "
                     "passing prefix is kept", [skew, flip, skew, half], [half, half, half],
                     [0, 0, 1], [[0.75, 0.0], [0.96875, 0.0], [0.0, 0.0], [0.0, 0.5]]),
        joint_vector("k1_like_stochastic_accept", "k = 1: h_1 = min(1, p/q) = 1/2",
                     [skew, [1.0, 0.0]], [half], [0], [[0.25, 0.0], [0.0, 0.0]]),
        joint_vector("k1_like_stochastic_reject",
                     "k = 1: rejected, the residual relu(p - q) emits id 1",
                     [skew, [1.0, 0.0]], [half], [0], [[0.75, 0.5], [0.0, 0.0]]),
        joint_vector("q_zero_resets_weight",
                     "q_2(X_2) = 0 < p_2(X_2): the ratio is +inf and w_2 = 1",
                     [skew, half, [1.0, 0.0]], [half, [1.0, 0.0]], [0, 1],
                     [[0.96875, 0.0], [0.96875, 0.0], [0.0, 0.0]]),
        joint_vector("p_zero_excludes_prefix",
                     "p_2(X_2) = 0: w_2 = 0, so the prefix of two is never kept",
                     [half, [1.0, 0.0], half], [half, half], [0, 1],
                     [[0.0, 0.0], [0.5, 0.0], [0.0, 0.0]]),
        joint_vector("zero_residual_mass_bonus",
                     "p = q everywhere: w = 1, Z = 0 (h = 1 by convention), every draft kept",
                     [half, half, skew], [half, half], [1, 0],
                     [[0.96875, 0.96875], [0.96875, 0.96875], [0.0, 0.5]]),
        joint_vector("weighted_residual",
                     "tau = 1 with w_1 = 1/2: the draw is from relu(p_2 / 2 - q_2) = (1/4, 0, 0), "
                     "where relu(p_2 - q_2) would give id 1",
                     [[0.25, 0.75, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]],
                     [[0.5, 0.5, 0.0], [0.0, 0.25, 0.75]], [0, 2],
                     [[0.25, 0.0], [0.5, 0.75], [0.0, 0.0]]),
    ]
    hand += [
        joint_vector("keep_test_inclusive_at_a_tie",
                     "eta_1 = h_1 = 1/2 exactly: the keep test is <=, so the draft is kept and "
                     "the bonus comes from p_2 (with <, the residual would give id 1)",
                     [skew, [1.0, 0.0]], [half], [0], [[0.5, 0.0], [0.0, 0.0]], keep_tie=True),
        joint_vector("excluded_prefix_not_kept_at_eta_zero",
                     "p_1(X_1) = 0 gives h_1 = 0: eta_1 = 0 <= 0, yet the h_1 > 0 guard keeps "
                     "nothing and the residual emits id 1", [[0.0, 1.0], [1.0, 0.0]], [half],
                     [0], [[0.0, 0.0], [0.0, 0.0]], keep_tie=True),
    ]
    # Placeholders: the round of the drafts before the first one. With the 3/4 row the
    # truncated round's last test is h_m = w_m; a placeholder read as p = 0 would test
    # Z_m / (Z_m + 1 - w_m) against the placeholder's q and draw from its residual.
    quarter = [0.75, 0.25]
    for at in range(3):
        for label, value, dtype in PLACEHOLDER_IDS[at::3]:
            tokens = [0, 1, 0]
            tokens[at] = value
            hand.append(joint_vector(
                f"placeholder_{label}_at_{at}",
                f"id {value} ({dtype or 'int32'}) at draft {at} is no draft: the round of the "
                f"first {at} drafts", [skew, quarter, skew, half], [half, half, quarter],
                tokens, [[0.375, 0.875], [0.375, 0.875], [0.375, 0.875], [0.0, 0.875]],
                dtype=dtype))
    hand_kept = [v for v in hand if v is not None]
    if len(hand_kept) != len(hand):
        raise GenerationError("a hand-written verify_blockwise case is not robust")
    out = hand_kept
    for k in range(1, 5):
        for want in range(k + 1):
            out.append(searched_joint(k, want, longer=False))
        # Keeping i < k needs eta_i <= h_i <= w_i, which token-by-token verification passes
        # too; so a longer prefix than the first rejection ends at k, or at 2 <= i < k.
        for want in range(2, k + 1):
            out.append(searched_joint(k, want, longer=True))
    return out


def searched_joint(k: int, want: int, *, longer: bool) -> Vector:
    """The first pseudo-random round that keeps exactly `want`; with `longer`, one where
    token-by-token verification would keep fewer from the same uniforms."""
    rng = Lcg(seed_of(7, k, want, int(longer)))
    for _ in range(50000):
        size = 2 + rng.below(3)
        target = [rng.dyadic_distribution(size) for _ in range(k + 1)]
        draft = [rng.dyadic_distribution(size) for _ in range(k)]
        tokens = [draw_from(q, rng) for q in draft]
        uniforms = [[rng.uniform(), rng.uniform()] for _ in range(k + 1)]
        exact_target, exact_draft = [rational(r) for r in target], [rational(r) for r in draft]
        exact_uniforms = [[Fraction(u) for u in row] for row in uniforms]
        num, _, robust = JointOracle(exact_target, exact_draft, tokens).decide(exact_uniforms)
        if num != want or not robust:
            continue
        if longer and first_failure_length(exact_target, exact_draft, tokens,
                                           exact_uniforms) >= num:
            continue
        label = "_longer_than_first_rejection" if longer else ""
        made = joint_vector(f"k{k}_keep{want}{label}",
                            f"pseudo-random dyadic round: k = {k}, {want} kept", target, draft,
                            tokens, uniforms)
        if made is not None:
            return made
    raise GenerationError(f"no joint case found for k={k} kept={want} longer={longer}")


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
        AcceptanceRule.BLOCK: sum_min,
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
                            "PR 902: q(argmax p) = 0.95 exceeds the lossless ceiling 0.35",
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


# --- grid_draw_counts -----------------------------------------------------------------------


def searched_grid_counts(probs: Sequence[float]) -> list[int]:
    """The grid counts by bisection on the draw's own float32 arithmetic (NumPy).

    ``u * total`` (float32) never decreases as the grid index i grows, so the number c_j of
    grid points with ``u * total < S_j`` is found by bisection for each id, exactly; the
    counts follow as in the draw: ids of zero weight get none, the points where no id is
    eligible go to the last id of positive weight. Independent of the library's code: one
    scalar bisection per id in NumPy, where the library bisects every id at once in MLX.
    """
    weights = np.array(probs, dtype=np.float32)
    partial = np.cumsum(weights, dtype=np.float32)
    step = np.float32(1.0 / UNIFORM_GRID_SIZE)

    def below(i: int, bound: np.float32) -> bool:
        return bool(np.float32(np.float32(i) * step) * partial[-1] < bound)

    counts_below = []
    for bound in partial:
        low, high = 0, UNIFORM_GRID_SIZE  # below(i) holds for i < answer, fails from there on
        while low < high:
            middle = (low + high) // 2
            if below(middle, bound):
                low = middle + 1
            else:
                high = middle
        counts_below.append(low)
    counts, before = [], 0
    for j, c in enumerate(counts_below):
        counts.append(c - before if weights[j] > 0 else 0)
        before = c if weights[j] > 0 else before
    last_positive = max(j for j in range(len(probs)) if weights[j] > 0)
    counts[last_positive] += UNIFORM_GRID_SIZE - counts_below[-1]
    return counts


def grid_draw_counts_vectors() -> list[Vector]:
    dyadic: list[tuple[str, str, list[float]]] = [
        ("dyadic_law_exact", "prefix sums and u * total exact: counts = 2**24 * w",
         [0.5, 0.0, 0.25, 0.25]),
        ("one_hot", "a one-hot law gets every grid point", [0.0, 1.0, 0.0]),
        ("breakpoint_at_the_first_grid_point",
         "w = [2**-24, 1 - 2**-24]: only u = 0 draws id 0, the grid point at index 0",
         [2.0**-24, 1.0 - 2.0**-24]),
        ("unnormalized_dyadic", "weights need not sum to 1: total 4", [2.0, 1.0, 0.0, 1.0]),
    ]
    brute: list[tuple[str, str, list[float]]] = [
        ("tiny_weight_absorbed",
         "2**-30 is absorbed by the prefix sum 1 + 2**-30 = 1 in float32: id 1 gets no point",
         [1.0, 2.0**-30, 1.0]),
        ("thirds", "total 3: the breakpoints round, and the counts are not 2**24 / 3",
         [1.0, 1.0, 1.0]),
        ("decimal_weights", "a float32 law of decimals", [f32(0.1), f32(0.2), f32(0.3), f32(0.4)]),
        ("subnormal_total",
         "total 2**-148: u * total takes few values, so the breakpoint lies far from "
         "2**24 * S_j / total (an estimate-and-window search misses it by millions)",
         [2.0**-149, 2.0**-149, 0.0]),
    ]
    out = []
    for name, note, probs in dyadic + brute:
        got = ints(grid_draw_counts(arr(probs)))
        if (name, note, probs) in dyadic:
            total = sum(rational(probs))
            want = [int(Fraction(w) / total * UNIFORM_GRID_SIZE) for w in probs]
        else:
            want = searched_grid_counts(probs)
        check_equal(name, got, want)
        if sum(got) != UNIFORM_GRID_SIZE:
            raise GenerationError(f"{name}: the counts do not sum to 2**24")
        out.append(vector(name, note, {"probs": encode_reals(probs)}, {"counts": got}, 0.0))
    return out


# --- position_uniform: a seeded run's uniforms (not part of the acceptance contract) ------

SLOT_NAMES = {"accept": randomness.ACCEPT, "sample": randomness.SAMPLE, "draft": randomness.DRAFT}
"""Slots by name: the name fixes the role, the library's constant its number."""


def oracle_splitmix64(x: int) -> int:
    """SplitMix64 as spec/randomness.md writes it, in plain integers."""
    mask = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def position_uniform_vectors() -> list[Vector]:
    hand_slots = {"accept": 0, "sample": 1, "draft": 2}  # spec/randomness.md's table, by hand
    cases = [(1234, n, s) for n in (0, 1) for s in ("accept", "sample", "draft")]
    cases += [(0, 0, "sample"), ((1 << 64) - 1, 7, "draft"), (42, 1_000_000, "accept"),
              (2**63, 3, "sample")]
    out = []
    for seed, position, slot in cases:
        got = randomness.position_uniform(seed, position, SLOT_NAMES[slot])
        word = oracle_splitmix64(oracle_splitmix64(seed) ^ ((4 * position + hand_slots[slot])
                                                            & ((1 << 64) - 1)))
        check_equal(f"position_uniform({seed}, {position}, {slot})", got, (word >> 40) / 2**24)
        out.append(vector(f"seed_{seed}_position_{position}_{slot}",
                          "the uniform of a seeded run: top 24 bits of SplitMix64 twice",
                          {"seed": seed, "position": position, "slot": slot}, {"u": got}, 0.0))
    return out


# --- round_uniform: the accept and draft uniforms of a round -------------------------------

ROUND_SLOT_NAMES = {"accept": randomness.ACCEPT, "draft": randomness.DRAFT}
"""The round-keyed slots by name; "sample" appears only in an error vector."""


def oracle_round_uniform(seed: int, round_position: int, offset: int, slot: int) -> Fraction:
    """spec/randomness.md's round formula, in plain integers (`slot` already a number)."""
    mask = (1 << 64) - 1
    word = oracle_splitmix64(oracle_splitmix64(oracle_splitmix64(seed)
                                               ^ ((4 * round_position + slot) & mask)) ^ offset)
    return Fraction(word >> 40, 1 << 24)


def oracle_position_uniform(seed: int, position: int, slot: int) -> Fraction:
    word = oracle_splitmix64(oracle_splitmix64(seed) ^ ((4 * position + slot) & ((1 << 64) - 1)))
    return Fraction(word >> 40, 1 << 24)


def round_uniform_vectors() -> list[Vector]:
    hand_slots = {"accept": 0, "draft": 2}  # spec/randomness.md's table, by hand
    cases = [(1234, n, i, s) for n in (0, 3) for i in (0, 1, 2) for s in ("accept", "draft")]
    cases += [(0, 0, 0, "accept"), ((1 << 64) - 1, 7, 3, "draft"), (42, 1_000_000, 5, "accept"),
              (2**63, 2**62 - 1, 2**62 - 1, "draft"), (1234, 5, 1, "accept"),
              (1234, 6, 0, "accept")]
    out = []
    for seed, round_position, offset, slot in cases:
        got = randomness.round_uniform(seed, round_position, offset, ROUND_SLOT_NAMES[slot])
        want = oracle_round_uniform(seed, round_position, offset, hand_slots[slot])
        check_equal(f"round_uniform({seed}, {round_position}, {offset}, {slot})", got,
                    float(want))
        out.append(vector(f"seed_{seed}_round_{round_position}_offset_{offset}_{slot}",
                          "a round-keyed uniform: the position word of (round start, slot), "
                          "mixed once more with the offset",
                          {"seed": seed, "round_position": round_position, "offset": offset,
                           "slot": slot}, {"u": got}, 0.0))
    return out


def round_uniform_error_cases() -> list[ErrorCase]:
    t, v = "TypeError", "ValueError"
    return [
        ("slot_sample", "the target's draw is keyed by absolute position, never by round",
         {"slot": "sample"}, v, "slot"),
        ("slot_reserved", "slot 3 is reserved, and not a round-keyed slot", {"slot": 3}, v,
         "slot"),
        ("offset_negative", "offsets are >= 0", {"offset": -1}, v, "offset"),
        ("offset_beyond_2_pow_62", "offsets lie in [0, 2**62)", {"offset": 2**62}, v, "offset"),
        ("offset_bool", "a bool is not an offset", {"offset": True}, t, "offset"),
        ("round_position_negative", "round positions are >= 0", {"round_position": -1}, v,
         "round_position"),
        ("round_position_beyond_2_pow_62", "round positions lie in [0, 2**62)",
         {"round_position": 2**62}, v, "round_position"),
        ("seed_beyond_64_bits", "seeds lie in [0, 2**64)", {"seed": 2**64}, v, "seed"),
        ("seed_float", "an integer argument", {"seed": 1.0}, t, "seed"),
    ]


# --- seeded_run: whole runs, pinned by their token streams and per-round verdicts ---------
#
# A run's laws are tables over the last `context_length` tokens of the history (prompt, then
# every emitted token and the round's drafts). Their rows are eighths whose float32 log maps
# back to themselves through softmax, so a model emitting those logits has exactly these
# laws, and tests/test_seeded_run.py can run the real generator on them. Every vector is
# checked against an exact-rational run keyed by hand, and must change under both wrong
# keyings below that can change it, so a port that keys by either fails it.

EIGHTHS = Fraction(1, 8)
RUN_RULES = (AcceptanceRule.GREEDY_ARGMAX, AcceptanceRule.SAMPLER_MATCH,
             AcceptanceRule.STOCHASTIC, AcceptanceRule.BLOCK)
RunRecord: TypeAlias = "tuple[int, list[int], int, int]"
"""(position, draft_tokens, num_accepted, next_token): one round, as the vectors write it."""
Keying: TypeAlias = "Callable[[int, int, int], tuple[list[Fraction], list[list[Fraction]]]]"
"""(seed, round position n, k) -> (the k draft uniforms, the k + 1 rows [accept, sample])."""


def spec_keying(seed: int, n: int, k: int) -> tuple[list[Fraction], list[list[Fraction]]]:
    """spec/randomness.md: accept and draft by (n, offset), the target's draw by n + i."""
    draft = [oracle_round_uniform(seed, n, j, 2) for j in range(k)]
    verify = [[oracle_round_uniform(seed, n, i, 0), oracle_position_uniform(seed, n + i, 1)]
              for i in range(k + 1)]
    return draft, verify


def absolute_keying(seed: int, n: int, k: int) -> tuple[list[Fraction], list[list[Fraction]]]:
    """The old, lossy keying: accept and draft by the absolute position n + offset."""
    draft = [oracle_position_uniform(seed, n + j, 2) for j in range(k)]
    verify = [[oracle_position_uniform(seed, n + i, 0), oracle_position_uniform(seed, n + i, 1)]
              for i in range(k + 1)]
    return draft, verify


def sample_by_round_keying(seed: int, n: int,
                           k: int) -> tuple[list[Fraction], list[list[Fraction]]]:
    """A wrong keying: the target's draw by (n, offset) too, like the accept uniforms."""
    draft, verify = spec_keying(seed, n, k)
    return draft, [[row[0], oracle_round_uniform(seed, n, i, 1)] for i, row in enumerate(verify)]


@dataclasses.dataclass(frozen=True)
class TableLaw:
    """A law of the next token given the last `context_length` tokens of the history."""

    context_length: int
    rows: list[Row]
    """V ** context_length rows; row index: the last tokens as base-V digits, oldest first."""

    @property
    def vocab_size(self) -> int:
        return len(self.rows[0])

    def row(self, history: Sequence[int]) -> Row:
        index = 0
        for token in history[len(history) - self.context_length:]:
            index = index * self.vocab_size + token
        return self.rows[index]

    def encode(self) -> Json:
        return {"context_length": self.context_length, "rows": encode_reals(self.rows)}


def round_tripping_rows(vocab_size: int) -> list[Row]:
    """Every law of eighths over `vocab_size` ids that softmax(float32 log) reproduces."""
    rows = []
    for counts in sorted(_eighths(vocab_size, 8), reverse=True):
        row = [c / 8 for c in counts]
        logits = mx.log(mx.array(row, dtype=mx.float32))
        if floats(effective_token_distribution(logits, SamplerConfig())) == row:
            rows.append(row)
    return rows


def _eighths(size: int, left: int) -> list[tuple[int, ...]]:
    if size == 1:
        return [(left,)]
    return [(c, *rest) for c in range(left + 1) for rest in _eighths(size - 1, left - c)]


def random_law(rng: Lcg, palette: list[Row], context_length: int) -> TableLaw:
    vocab_size = len(palette[0])
    return TableLaw(context_length, [palette[rng.below(len(palette))]
                                     for _ in range(vocab_size ** context_length)])


def oracle_run(rule: AcceptanceRule, target: TableLaw, draft: TableLaw, prompt: Sequence[int],
               k_max: int, max_tokens: int, seed: int,
               keying: Keying) -> tuple[list[RunRecord], bool]:
    """The run in exact arithmetic, and whether float32 reproduces every decision of it."""
    history, position, robust = list(prompt), 0, True
    rounds: list[RunRecord] = []
    while position < max_tokens:
        k = min(k_max, max_tokens - position - 1)
        draft_u, verify_u = keying(seed, position, k)
        if k == 0:
            p = rational(target.row(history))
            if rule is AcceptanceRule.GREEDY_ARGMAX:
                token = oracle_argmax(p)
            else:
                token = oracle_sample(p, verify_u[0][1])
                robust = robust and draw_is_robust(p, verify_u[0][1])
            record: RunRecord = (position, [], 0, token)
        else:
            drafts: list[int] = []
            qs: list[Rational] = []
            for j in range(k):
                q = rational(draft.row(history + drafts))
                drafts.append(oracle_sample(q, draft_u[j]))
                robust = robust and draw_is_robust(q, draft_u[j])
                qs.append(q)
            ps = [rational(target.row(history + drafts[:i])) for i in range(k + 1)]
            if rule is AcceptanceRule.BLOCK:
                num, nxt, decided = JointOracle(ps, qs, drafts).decide(verify_u)
            else:
                num, nxt, decided = oracle_token_round(rule, ps, qs, drafts, verify_u)
            robust = robust and decided
            record = (position, drafts, num, nxt)
        rounds.append(record)
        emitted = [*record[1][: record[2]], record[3]]
        history += emitted
        position += len(emitted)
    return rounds, robust


def oracle_token_round(rule: AcceptanceRule, ps: list[Rational], qs: list[Rational],
                       drafts: Sequence[int],
                       uniforms: Sequence[Sequence[Fraction]]) -> tuple[int, int, bool]:
    """A token-by-token round: (num_accepted, next_token, robust), where robust also covers
    every accept test (``u * q <= p`` rounds ``u * q`` in float32) and every draw it read."""
    robust = True
    for i, token in enumerate(drafts):
        u_accept, u_sample = uniforms[i]
        if rule is AcceptanceRule.STOCHASTIC:
            product = u_accept * qs[i][token]
            robust = robust and (is_f32(product) or abs(product - ps[i][token]) >= ROBUST_MARGIN)
        accepted, emitted, drawn = oracle_verify(rule, ps[i], qs[i], token, u_accept, u_sample)
        if rule is AcceptanceRule.SAMPLER_MATCH:
            robust = robust and draw_is_robust(ps[i], u_sample)
        robust = robust and drawn
        if not accepted:
            return i, emitted, robust
    k = len(drafts)
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        return k, oracle_argmax(ps[k]), robust
    return k, oracle_sample(ps[k], uniforms[k][1]), robust and draw_is_robust(ps[k],
                                                                              uniforms[k][1])


def run_tokens(rounds: Sequence[RunRecord]) -> list[int]:
    return [t for _, drafts, num, nxt in rounds for t in [*drafts[:num], nxt]]


def encode_rounds(rounds: Sequence[RunRecord]) -> Json:
    return [{"position": n, "draft_tokens": list(drafts), "num_accepted": num, "next_token": nxt}
            for n, drafts, num, nxt in rounds]


def library_run(rule: AcceptanceRule, target: TableLaw, draft: TableLaw, prompt: Sequence[int],
                k_max: int, max_tokens: int, seed: int) -> list[RunRecord]:
    """The run as `seeded_run` plays it, from the core functions."""
    def law(table: TableLaw) -> Callable[[list[int]], mx.array]:
        return lambda history: mx.array(table.row(history), dtype=mx.float32)

    rounds = seeded_run(law(target), law(draft), prompt, rule=rule, num_draft_tokens=k_max,
                        max_tokens=max_tokens, seed=seed)
    return [(r.position, r.draft_tokens, r.num_accepted, r.next_token) for r in rounds]


def first_difference(a: Sequence[object], b: Sequence[object]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def wrong_keyings_caught(rule: AcceptanceRule, right: list[RunRecord], target: TableLaw,
                         draft: TableLaw, prompt: Sequence[int], k: int, n: int,
                         seed: int) -> str | None:
    """How each wrong keying shows in the vector, or None when one that can change it doesn't.

    Accept and draft by absolute position change the drafts, hence the rounds, under every
    rule, and the stream under stochastic and block; greedy and sampler-match emit the same
    stream whatever the drafts (checked here). The target's draw by round changes the stream
    of every rule that draws (all but greedy).
    """
    absolute, _ = oracle_run(rule, target, draft, prompt, k, n, seed, absolute_keying)
    by_round, _ = oracle_run(rule, target, draft, prompt, k, n, seed, sample_by_round_keying)
    tokens, drafts_only = run_tokens(right), rule in (AcceptanceRule.GREEDY_ARGMAX,
                                                      AcceptanceRule.SAMPLER_MATCH)
    if drafts_only and run_tokens(absolute) != tokens:
        raise GenerationError(f"{rule.value}: the drafts' keying moved the emitted stream")
    if absolute == right or (not drafts_only and run_tokens(absolute) == tokens):
        return None
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        if run_tokens(by_round) != tokens:
            raise GenerationError("greedy-argmax read a SAMPLE uniform")
        return (f"accept and draft keyed by absolute position change round "
                f"{first_difference(absolute, right)}")
    if run_tokens(by_round) == tokens:
        return None
    where = (f"round {first_difference(absolute, right)}" if drafts_only
             else f"token {first_difference(run_tokens(absolute), tokens)}")
    return (f"accept and draft keyed by absolute position change {where}; the target's draw "
            f"keyed by round changes token {first_difference(run_tokens(by_round), tokens)}")


SEEDED_RUN_CASES = (
    # (k, context_length, vocab_size, max_tokens)
    (2, 1, 3, 10),
    (3, 2, 4, 12),
    (1, 1, 4, 8),
)


def seeded_run_vectors() -> list[Vector]:
    palettes = {size: round_tripping_rows(size) for size in (3, 4)}
    out = []
    for r_index, rule in enumerate(RUN_RULES):
        for c_index, (k, context_length, size, n) in enumerate(SEEDED_RUN_CASES):
            out.append(searched_run(rule, r_index, c_index, k, context_length, palettes[size], n))
    out += edge_runs()
    return out


def searched_run(rule: AcceptanceRule, r_index: int, c_index: int, k: int,
                 context_length: int, palette: list[Row], n: int) -> Vector:
    """The first pseudo-random run (laws and seed) that float32 decides robustly and that
    both wrong keyings that can change it do change."""
    rng = Lcg(seed_of(11, r_index, c_index))
    for _ in range(500):
        target = random_law(rng, palette, context_length)
        # A drafter that often agrees with the target, so that rounds accept drafts.
        draft = TableLaw(context_length, [row if rng.below(2) == 0
                                          else palette[rng.below(len(palette))]
                                          for row in target.rows])
        prompt = [rng.below(len(palette[0])) for _ in range(context_length + 1)]
        seed = rng.below(1 << 31) * (1 << 32) + rng.below(1 << 31)
        right, robust = oracle_run(rule, target, draft, prompt, k, n, seed, spec_keying)
        if not robust:
            continue
        caught = wrong_keyings_caught(rule, right, target, draft, prompt, k, n, seed)
        if caught is None:
            continue
        name = f"{slug(rule)}_k{k}_v{len(palette[0])}_context{context_length}"
        context = "the last token" if context_length == 1 else "the last two tokens"
        note = f"{len(right)} rounds; laws of {context}; {caught}"
        return run_vector(name, note, rule, target, draft, prompt, k, n, seed)
    raise GenerationError(f"no seeded run found for {rule.value}, case {c_index}")


def run_vector(name: str, note: str, rule: AcceptanceRule, target: TableLaw, draft: TableLaw,
               prompt: list[int], k: int, n: int, seed: int) -> Vector:
    for law in (target, draft):
        for row in law.rows:
            logits = mx.log(mx.array(row, dtype=mx.float32))
            if floats(effective_token_distribution(logits, SamplerConfig())) != row:
                raise GenerationError(f"seeded_run/{name}: softmax(log {row}) is not {row}")
    right, robust = oracle_run(rule, target, draft, prompt, k, n, seed, spec_keying)
    if not robust:
        raise GenerationError(f"seeded_run/{name}: float32 may not reproduce the run")
    check_equal(f"seeded_run/{name}", library_run(rule, target, draft, prompt, k, n, seed), right)
    return vector(name, note, {
        "rule": rule.value, "target_law": target.encode(), "draft_law": draft.encode(),
        "prompt": id_list(prompt), "num_draft_tokens": k, "max_tokens": n, "seed": seed,
    }, {"tokens": id_list(run_tokens(right)), "rounds": encode_rounds(right)}, 0.0)


def id_list(ids: Sequence[int]) -> Json:
    out: list[Json] = []
    out.extend(ids)
    return out


def edge_runs() -> list[Vector]:
    """Hand-written runs: a single token, and the greedy last step."""
    flat = TableLaw(1, [[0.5, 0.25, 0.25]] * 3)
    tied = TableLaw(1, [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])
    s, g = AcceptanceRule.STOCHASTIC, AcceptanceRule.GREEDY_ARGMAX
    # A seed whose last step would draw the tie's higher id: only the argmax emits the lower.
    seed = next(seed for seed in range(1000)
                if last_draw_is_not_the_argmax(tied, flat, [0], 2, 4, seed))
    return [
        run_vector("one_token_is_a_target_draw",
                   "max_tokens = 1: no drafts; the target draws position 0 with the SAMPLE "
                   "uniform of position 0", s, tied, flat, [0], 2, 1, 1234),
        run_vector("greedy_last_step_is_the_argmax",
                   "the run's last step (k = 0) under greedy-argmax emits the argmax of p, the "
                   "lowest id of the tie; a draw with its SAMPLE uniform would emit the other",
                   g, tied, flat, [0], 2, 4, seed),
    ]


def last_draw_is_not_the_argmax(target: TableLaw, draft: TableLaw, prompt: list[int], k: int,
                                n: int, seed: int) -> bool:
    rounds, _ = oracle_run(AcceptanceRule.GREEDY_ARGMAX, target, draft, prompt, k, n, seed,
                           spec_keying)
    last = rounds[-1]
    if last[1]:
        return False  # the run must end on a k = 0 step
    history = [*prompt, *run_tokens(rounds[:-1])]
    p = rational(target.row(history))
    return oracle_sample(p, oracle_position_uniform(seed, last[0], 1)) != oracle_argmax(p)


def seeded_run_error_cases() -> list[ErrorCase]:
    t, v = "TypeError", "ValueError"
    return [
        ("num_draft_tokens_zero", "a round drafts k >= 1 tokens", {"num_draft_tokens": 0}, v,
         "num_draft_tokens"),
        ("num_draft_tokens_bool", "a bool is not a count", {"num_draft_tokens": True}, t,
         "num_draft_tokens"),
        ("max_tokens_negative", "max_tokens >= 0", {"max_tokens": -1}, v, "max_tokens"),
        ("seed_beyond_64_bits", "seeds lie in [0, 2**64)", {"seed": 2**64}, v, "seed"),
        ("prompt_empty", "a run continues a prompt of at least one token", {"prompt": []}, v,
         "prompt"),
    ]


def decode_law(value: Json) -> Any:
    """A table law from JSON, as a function of the history (for the error replays)."""
    if not isinstance(value, dict):
        raise GenerationError(f"a law is an object, got {value!r}")
    context_length, rows = value["context_length"], value["rows"]
    assert isinstance(context_length, int) and isinstance(rows, list)
    table = TableLaw(context_length, [[float(x) for x in row if isinstance(x, int | float)]
                                      for row in rows if isinstance(row, list)])
    return lambda history: mx.array(table.row(history), dtype=mx.float32)


# --- error vectors ------------------------------------------------------------------------
#
# An error vector gives inputs that the reference rejects from their types, shapes, dtypes,
# Python scalars or SamplerConfig fields alone (spec/index.md, "Validation"), and expects the
# error kind and the argument it names. The expectation is written by hand; the generator
# decodes the JSON input as a replayer would, runs the family's calls, and stops unless the
# library raises exactly that kind with a message naming that argument.

ERROR_KINDS: dict[str, type[Exception]] = {"TypeError": TypeError, "ValueError": ValueError}
NON_FINITE = {"-inf": NEG_INF, "inf": float("inf"), "nan": float("nan")}


def typed(values: Json, dtype: str, shape: list[int] | None = None) -> Json:
    """An array argument of an explicit dtype (plain JSON arrays take the slot's dtype), and
    of an explicit shape when the values alone cannot say it (an empty batch)."""
    if shape is None:
        return {"array": values, "dtype": dtype}
    return {"array": values, "dtype": dtype, "shape": list(shape)}


def decode_value(value: Json) -> Any:
    """A non-array argument: "-inf", "inf" and "nan" are floats, anything else passes as is."""
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    return value


def decode_array(value: Json, dtype: mx.Dtype) -> Any:
    """A JSON array becomes an array of the slot's dtype, {"array", "dtype"} one of that dtype;
    any other value is passed through unchanged, for the library to reject."""
    if isinstance(value, dict) and {"array", "dtype"} <= set(value) <= {"array", "dtype", "shape"}:
        name = value["dtype"]
        assert isinstance(name, str)
        array = mx.array(decode_nested(value["array"]), dtype=getattr(mx, name))
        shape = value.get("shape")
        return array if shape is None else array.reshape(shape)
    if isinstance(value, list):
        return mx.array(decode_nested(value), dtype=dtype)
    return decode_value(value)


def decode_nested(value: Json) -> Any:
    if isinstance(value, list):
        return [decode_nested(v) for v in value]
    return decode_value(value)


def decode_sequence(value: Json) -> Any:
    """A Python sequence argument (history, alphas): its items pass through unchanged."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return decode_array(value, mx.int32) if isinstance(value, dict) else decode_value(value)


def decode_rule(value: Json) -> Any:
    if isinstance(value, str):
        return AcceptanceRule(value)
    return value


def decode_config(value: Json) -> Any:
    """A SamplerConfig from its JSON fields (absent fields take their defaults)."""
    if not isinstance(value, dict):
        return decode_value(value)
    fields: dict[str, Any] = {}
    for name, raw in value.items():
        if name == "logit_bias" and isinstance(raw, list):
            fields[name] = {
                pair[0]: decode_value(pair[1]) for pair in raw if isinstance(pair, list)
            }
        elif name == "dry_sequence_breakers" and isinstance(raw, list):
            fields[name] = tuple(decode_value(v) for v in raw)
        else:
            fields[name] = decode_value(raw)
    return SamplerConfig(**fields)


def run_family(family: str, inputs: dict[str, Json]) -> None:
    """Replay `inputs` through the family's calls, in the order spec/vectors/schema.md gives."""
    f32_, i32 = mx.float32, mx.int32
    if family == "sampler_config":
        decode_config(inputs["config"])
    elif family == "effective_token_distribution":
        logits = decode_array(inputs["logits"], f32_)
        cfg = decode_config(inputs["config"])
        history = decode_sequence(inputs["history"])
        effective_token_distribution(logits, cfg, history)
        draws = inputs["draw_uniforms"]
        assert isinstance(draws, list)
        for u in draws:
            sample_token_with_distribution(logits, cfg, history, decode_value(u))
    elif family == "sample_from_distribution":
        sample_from_distribution(decode_array(inputs["probs"], f32_),
                                 decode_array(inputs["u"], f32_))
    elif family == "accept_draft_token":
        accept_draft_token(decode_array(inputs["p"], f32_), decode_array(inputs["q"], f32_),
                           decode_array(inputs["token"], i32), decode_array(inputs["u"], f32_))
    elif family == "residual_distribution":
        p, q = decode_array(inputs["p"], f32_), decode_array(inputs["q"], f32_)
        residual_distribution(p, q)
        draws = inputs["u"]
        assert isinstance(draws, list)
        for u in draws:
            residual_resample(p, q, decode_value(u))
    elif family == "verify_draft_token":
        verify_draft_token(
            decode_rule(inputs["rule"]), decode_array(inputs["p"], f32_),
            decode_array(inputs["q"], f32_) if inputs["q"] is not None else None,
            decode_array(inputs["token"], i32), decode_array(inputs["u_accept"], f32_),
            decode_array(inputs["u_sample"], f32_),
        )
    elif family == "verify_tokenwise":
        verify_tokenwise(
            decode_rule(inputs["rule"]), decode_array(inputs["target_probs"], f32_),
            decode_array(inputs["draft_probs"], f32_) if inputs["draft_probs"] is not None
            else None,
            decode_array(inputs["draft_tokens"], i32), decode_array(inputs["uniforms"], f32_),
        )
    elif family == "verify_blockwise":
        verify_blockwise(
            decode_array(inputs["target_probs"], f32_),
            decode_array(inputs["draft_probs"], f32_) if inputs["draft_probs"] is not None
            else None,
            decode_array(inputs["draft_tokens"], i32), decode_array(inputs["uniforms"], f32_),
        )
    elif family == "rewind_trim":
        rewind_trim(decode_value(inputs["num_draft"]), decode_value(inputs["num_accepted"]))
    elif family == "acceptance_closed_forms":
        p, q = decode_array(inputs["p"], f32_), decode_array(inputs["q"], f32_)
        if "rule" in inputs:
            acceptance_probability(decode_rule(inputs["rule"]), p, q)
            return
        acceptance_closed_forms(p, q)
        for rule in RULES:
            acceptance_probability(rule, p, q)
    elif family == "acceptance_rule":
        acceptance_rule(decode_config(inputs["target_config"]),
                        drafter_has_distribution=decode_value(inputs["drafter_has_distribution"]),
                        stochastic=decode_value(inputs["stochastic"]),
                        block=decode_value(inputs.get("block")))
    elif family == "grid_draw_counts":
        grid_draw_counts(decode_array(inputs["probs"], f32_))
    elif family == "position_uniform":
        slot = inputs["slot"]
        randomness.position_uniform(decode_value(inputs["seed"]), decode_value(inputs["position"]),
                                    SLOT_NAMES.get(slot, slot) if isinstance(slot, str) else slot)
    elif family == "round_uniform":
        named = inputs["slot"]
        slot = SLOT_NAMES[named] if isinstance(named, str) else decode_value(named)
        randomness.round_uniform(decode_value(inputs["seed"]),
                                 decode_value(inputs["round_position"]),
                                 decode_value(inputs["offset"]), slot)
    elif family == "seeded_run":
        seeded_run(decode_law(inputs["target_law"]), decode_law(inputs["draft_law"]),
                   decode_sequence(inputs["prompt"]), rule=decode_rule(inputs["rule"]),
                   num_draft_tokens=decode_value(inputs["num_draft_tokens"]),
                   max_tokens=decode_value(inputs["max_tokens"]),
                   seed=decode_value(inputs["seed"]))
    elif family == "expected_tokens_per_round":
        expected_tokens_per_round(decode_sequence(inputs["alphas"]))
    elif family == "expected_speedup":
        expected_speedup(decode_value(inputs["alpha"]), decode_value(inputs["k"]),
                         decode_value(inputs["c"]),
                         verify_cost=decode_value(inputs["verify_cost"]))  # errors give it
    elif family == "verify_tree":
        scheme = inputs["scheme"]
        verify_tree(
            TreeScheme(scheme) if isinstance(scheme, str) else scheme,
            decode_sequence(inputs["parents"]), decode_array(inputs["target_probs"], f32_),
            decode_array(inputs["draft_probs"], f32_) if inputs["draft_probs"] is not None
            else None,
            decode_sequence(inputs["draft_tokens"]), decode_array(inputs["accept_uniforms"], f32_),
            decode_array(inputs["sample_uniforms"], f32_),
        )
    elif family == "tree_acceptance":
        p, q = decode_array(inputs["p"], f32_), decode_array(inputs["q"], f32_)
        iid_siblings_acceptance(p, q, decode_value(inputs["num_drafts"]))
        multi_draft_ceiling(p, q, decode_value(inputs["num_drafts"]))
    else:
        raise GenerationError(f"no replay for family {family}")


def error_vector(family: str, name: str, note: str, inputs: dict[str, Json], kind: str,
                 argument: str) -> Vector:
    """A vector whose replay must raise `kind` naming `argument`; checked against the library."""
    try:
        run_family(family, inputs)
    except (TypeError, ValueError) as error:
        if type(error) is not ERROR_KINDS[kind]:
            raise GenerationError(
                f"{family}/{name}: library raises {type(error).__name__}({error}), "
                f"expected {kind}") from error
        if not re.search(rf"(?<![\w.]){re.escape(argument)}(?![\w])", str(error)):
            raise GenerationError(
                f"{family}/{name}: the message {str(error)!r} does not name {argument!r}"
            ) from error
    else:
        raise GenerationError(f"{family}/{name}: library raises nothing, expected {kind}")
    return {"name": name, "note": note, "input": inputs,
            "error": {"kind": kind, "argument": argument}, "atol": 0.0}


def base_inputs(family: str) -> dict[str, Json]:
    """A valid input of each family, which an error case alters in one argument."""
    stochastic = AcceptanceRule.STOCHASTIC.value
    bases: dict[str, dict[str, Json]] = {
        "sampler_config": {"config": encode_config(SamplerConfig())},
        "effective_token_distribution": {"logits": [0.0, 0.0, 0.0, 0.0],
                                         "config": encode_config(SamplerConfig()),
                                         "history": [], "draw_uniforms": []},
        "sample_from_distribution": {"probs": [0.5, 0.5], "u": 0.5},
        "accept_draft_token": {"p": [0.25, 0.75], "q": [0.5, 0.5], "token": 0, "u": 0.5},
        "residual_distribution": {"p": [0.5, 0.5], "q": [0.25, 0.75], "u": []},
        "verify_draft_token": {"rule": stochastic, "p": [0.25, 0.75], "q": [0.5, 0.5],
                               "token": 0, "u_accept": 0.5, "u_sample": 0.5},
        "verify_tokenwise": {"rule": stochastic, "target_probs": [[0.5, 0.5], [0.5, 0.5]],
                         "draft_probs": [[0.5, 0.5]], "draft_tokens": [0],
                         "uniforms": [[0.5, 0.5], [0.5, 0.5]]},
        "verify_blockwise": {"target_probs": [[0.5, 0.5], [0.5, 0.5]],
                                  "draft_probs": [[0.5, 0.5]], "draft_tokens": [0],
                                  "uniforms": [[0.5, 0.5], [0.5, 0.5]]},
        "rewind_trim": {"num_draft": 2, "num_accepted": 1},
        "acceptance_closed_forms": {"p": [0.5, 0.5], "q": [0.25, 0.75]},
        "acceptance_rule": {"target_config": encode_config(SamplerConfig()),
                            "drafter_has_distribution": True, "stochastic": True},
        "expected_tokens_per_round": {"alphas": [0.5]},
        "expected_speedup": {"alpha": 0.5, "k": 2, "c": 0.25, "verify_cost": 1.0},
        "grid_draw_counts": {"probs": [0.5, 0.5]},
        "position_uniform": {"seed": 1234, "position": 0, "slot": "sample"},
        "round_uniform": {"seed": 1234, "round_position": 3, "offset": 1, "slot": "accept"},
        "seeded_run": {"rule": AcceptanceRule.STOCHASTIC.value,
                       "target_law": TableLaw(1, [[0.5, 0.5]] * 2).encode(),
                       "draft_law": TableLaw(1, [[0.5, 0.5]] * 2).encode(),
                       "prompt": [0], "num_draft_tokens": 2, "max_tokens": 4, "seed": 1234},
        "verify_tree": {"scheme": "iid", "parents": [-1, -1],
                        "target_probs": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
                        "draft_probs": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
                        "draft_tokens": [0, 1], "accept_uniforms": [0.5, 0.5],
                        "sample_uniforms": [0.5, 0.5]},
        "tree_acceptance": {"p": [0.5, 0.5], "q": [0.25, 0.75], "num_drafts": 2},
    }
    return copy.deepcopy(bases[family])


ErrorCase: TypeAlias = "tuple[str, str, dict[str, Json], str, str]"
"""(name, note, the arguments that differ from the family's base input, kind, argument)."""


def config_with(**fields: Any) -> Json:
    cfg = encode_config(SamplerConfig())
    assert isinstance(cfg, dict)
    cfg.update(fields)
    return cfg


def error_cases() -> dict[str, list[ErrorCase]]:
    t, v = "TypeError", "ValueError"
    f16 = typed([0.5, 0.5], "float16")
    return {
        "sampler_config": [
            (f"{field}_{label}", f"{field} = {value!r}: {why}",
             {"config": config_with(**{field: value})}, kind, field)
            for field, label, value, kind, why in [
                ("temperature", "negative", -1.0, v, "must be >= 0"),
                ("temperature", "nan", "nan", v, "must be finite"),
                ("temperature", "bool", True, t, "a bool is not a number"),
                ("temperature", "string", "hot", t, "a string is not a number"),
                ("temperature", "below_float32_normal", 1e-39, v,
                 "a positive temperature below 2**-126 rounds towards 0 in float32"),
                ("temperature", "above_float32_max", 3.5e38, v, "beyond float32's range"),
                ("repetition_penalty", "below_2_pow_minus_32", 2.0**-33, v,
                 "must lie in [2**-32, 2**32]"),
                ("repetition_penalty", "above_2_pow_32", 2.0**33, v,
                 "must lie in [2**-32, 2**32]"),
                ("frequency_penalty", "above_2_pow_64", 2.0**65, v,
                 "must lie in [-2**64, 2**64]"),
                ("presence_penalty", "below_minus_2_pow_64", -(2.0**65), v,
                 "must lie in [-2**64, 2**64]"),
                ("dry_multiplier", "above_float32_max", 3.5e38, v, "beyond float32's range"),
                ("dry_multiplier", "below_float32_normal", 1e-50, v,
                 "a positive multiplier below 2**-126 rounds to 0 and meets an overflowed power"),
                ("top_k", "beyond_int32", 2**31, v, "MLX indexes in int32"),
                ("repetition_context_size", "beyond_int32", 2**31, v, "MLX slices in int32"),
                ("dry_penalty_last_n", "beyond_int32", 2**31, v, "MLX slices in int32"),
                ("dry_base", "above_float32_max", 3.5e38, v, "beyond float32's range"),
                ("dry_sequence_breakers", "beyond_int32", [2**31], v, "ids are int32"),
                ("logit_bias", "id_beyond_int32", [[2**31, 1.0]], v, "ids are int32"),
                ("logit_bias", "bias_above_2_pow_64", [[0, 2.0**65]], v,
                 "biases lie in [-2**64, 2**64]"),
                ("top_k", "negative", -1, v, "must be >= 0"),
                ("top_k", "float", 2.5, t, "an integer field"),
                ("top_p", "zero", 0.0, v, "must lie in (0, 1]"),
                ("top_p", "above_one", 1.5, v, "must lie in (0, 1]"),
                ("min_p", "negative", -0.25, v, "must lie in [0, 1]"),
                ("min_p", "above_one", 1.5, v, "must lie in [0, 1]"),
                ("repetition_penalty", "zero", 0.0, v, "must be > 0"),
                ("repetition_context_size", "zero", 0, v, "must be >= 1"),
                ("repetition_context_size", "float", 20.0, t, "an integer field"),
                ("frequency_penalty", "inf", "inf", v, "must be finite"),
                ("presence_penalty", "bool", False, t, "a bool is not a number"),
                ("dry_multiplier", "negative", -1.0, v, "must be >= 0"),
                ("dry_base", "below_one", 0.5, v, "must be >= 1"),
                ("dry_allowed_length", "zero", 0, v, "must be >= 1"),
                ("dry_penalty_last_n", "below_minus_one", -2, v, "must be >= -1"),
                ("dry_sequence_breakers", "negative_id", [-1], v, "ids are non-negative"),
                ("dry_sequence_breakers", "float_id", [1.5], t, "ids are integers"),
                ("xtc_probability", "above_one", 1.5, v, "must lie in [0, 1]"),
                ("xtc_threshold", "negative", -0.25, v, "must lie in [0, 1]"),
                ("xtc_threshold", "above_one", 1.5, v, "must lie in [0, 1]"),
                ("xtc_probability", "negative", -0.25, v, "must lie in [0, 1]"),
                ("logit_bias", "bias_below_minus_2_pow_64", [[0, -(2.0**65)]], v,
                 "biases lie in [-2**64, 2**64]"),
                ("logit_bias", "negative_id", [[-1, 1.0]], v, "ids are non-negative"),
                ("logit_bias", "nan_bias", [[0, "nan"]], v, "biases must be finite"),
                ("logit_bias", "string_bias", [[0, "x"]], t, "biases are numbers"),
            ]
        ],
        "effective_token_distribution": [
            ("logits_not_an_array", "a number is not logits", {"logits": 0.5}, t, "logits"),
            ("logits_integer_dtype", "logits must be floating",
             {"logits": typed([0, 0, 0, 0], "int32")}, t, "logits"),
            ("logits_three_dimensional", "logits are [V] or [R, V]",
             {"logits": [[[0.0, 0.0]]]}, v, "logits"),
            ("logits_empty_vocabulary", "V >= 1", {"logits": []}, v, "logits"),
            ("logits_empty_batch", "[R, V] logits need R >= 1",
             {"logits": typed([], "float32", [0, 4])}, v, "logits"),
            ("config_not_a_config", "config must be a SamplerConfig", {"config": None}, t,
             "config"),
            ("history_not_a_sequence", "a string is not a token history", {"history": "abc"}, t,
             "history"),
            ("history_id_out_of_range", "a Python history id >= V", {"history": [0, 4]}, v,
             "history"),
            ("history_id_negative", "a Python history id < 0", {"history": [-1]}, v, "history"),
            ("history_id_bool", "a bool is not a token id", {"history": [True]}, t, "history"),
            ("history_id_float", "a float is not a token id", {"history": [1.5]}, t, "history"),
            ("history_array_float_dtype", "a history array must be integer",
             {"history": typed([1.0], "float32")}, t, "history"),
            ("history_array_two_dimensional", "a history array is 1-d",
             {"history": typed([[1]], "int32")}, v, "history"),
            ("logit_bias_id_outside_vocabulary", "a logit_bias id >= V",
             {"config": config_with(logit_bias=[[4, 1.0]])}, v, "logit_bias"),
            ("draw_from_rows", "one draw needs [V] logits", {"logits": [[0.0, 0.0]],
                                                             "draw_uniforms": [0.5]}, v, "logits"),
            ("draw_uniform_one", "a Python uniform must lie in [0, 1)",
             {"draw_uniforms": [1.0]}, v, "u"),
            ("draw_uniform_negative", "a Python uniform must lie in [0, 1)",
             {"draw_uniforms": [-0.5]}, v, "u"),
        ],
        "sample_from_distribution": [
            ("probs_not_an_array", "a number is not probs", {"probs": 0.5}, t, "probs"),
            ("probs_float16", "probabilities must be float32", {"probs": f16}, t, "probs"),
            ("probs_bfloat16", "probabilities must be float32",
             {"probs": typed([0.5, 0.5], "bfloat16")}, t, "probs"),
            ("probs_int32", "probabilities must be float32",
             {"probs": typed([1, 1], "int32")}, t, "probs"),
            ("probs_three_dimensional", "probs are [V] or [R, V]", {"probs": [[[1.0]]]}, v,
             "probs"),
            ("probs_empty_vocabulary", "V >= 1", {"probs": []}, v, "probs"),
            ("probs_empty_batch", "[R, V] rows need R >= 1",
             {"probs": typed([], "float32", [0, 2]), "u": typed([], "float32", [0])}, v,
             "probs"),
            ("u_one", "a Python uniform must lie in [0, 1)", {"u": 1.0}, v, "u"),
            ("u_negative", "a Python uniform must lie in [0, 1)", {"u": -0.25}, v, "u"),
            ("u_nan", "a Python uniform must be finite", {"u": "nan"}, v, "u"),
            ("u_bool", "a bool is not a uniform", {"u": True}, t, "u"),
            ("u_string", "a string is not a uniform", {"u": "half"}, t, "u"),
            ("u_integer_array", "a uniform array must be floating",
             {"probs": [[0.5, 0.5]], "u": typed([0], "int32")}, t, "u"),
            ("u_rows_mismatch", "[R, V] probs take [R] uniforms",
             {"probs": [[0.5, 0.5]], "u": [0.5, 0.5]}, v, "u"),
            ("u_array_for_one_row", "[V] probs take a number or a 0-d array",
             {"u": [0.5]}, v, "u"),
        ],
        "accept_draft_token": [
            ("p_not_an_array", "a number is not p", {"p": 0.5}, t, "p"),
            ("p_float16", "probabilities must be float32", {"p": f16}, t, "p"),
            ("q_float16", "probabilities must be float32", {"q": f16}, t, "q"),
            ("q_other_vocabulary", "p and q must have the same shape", {"q": [0.5, 0.25, 0.25]},
             v, "q"),
            ("p_three_dimensional", "p is [V] or [k, V]", {"p": [[[1.0]]], "q": [[[1.0]]]}, v,
             "p"),
            ("token_out_of_range", "a Python token id >= V", {"token": 2}, v, "token"),
            ("token_negative", "a Python token id < 0", {"token": -1}, v, "token"),
            ("token_bool", "a bool is not a token id", {"token": False}, t, "token"),
            ("token_float", "a float is not a token id", {"token": 1.0}, t, "token"),
            ("token_float_array", "a token array must be integer",
             {"p": [[0.25, 0.75]], "q": [[0.5, 0.5]], "token": typed([0.0], "float32"),
              "u": [0.5]}, t, "token"),
            ("token_rows_mismatch", "[k, V] rows take [k] tokens",
             {"p": [[0.25, 0.75]], "q": [[0.5, 0.5]], "token": [0, 1], "u": [0.5]}, v, "token"),
            ("u_one", "a Python uniform must lie in [0, 1)", {"u": 1.0}, v, "u"),
            ("u_string", "a string is not a uniform", {"u": "half"}, t, "u"),
        ],
        "residual_distribution": [
            ("p_not_an_array", "a number is not p", {"p": 0.5}, t, "p"),
            ("q_float16", "probabilities must be float32", {"q": f16}, t, "q"),
            ("q_other_vocabulary", "p and q must have the same shape", {"q": [1.0]}, v, "q"),
            ("resample_u_one", "a Python uniform must lie in [0, 1)", {"u": [1.0]}, v, "u"),
        ],
        "verify_draft_token": [
            ("rule_not_a_rule", "the rule must be an AcceptanceRule", {"rule": 2}, t, "rule"),
            ("stochastic_without_q", "stochastic reads q", {"q": None}, v, "q"),
            ("p_float16", "probabilities must be float32", {"p": f16}, t, "p"),
            ("q_other_vocabulary", "q is checked against p even where the rule ignores it",
             {"rule": "sampler-match", "q": [1.0]}, v, "q"),
            ("p_only_three_dimensional", "p is [V] or [k, V]",
             {"rule": "greedy-argmax", "p": [[[1.0]]], "q": None}, v, "p"),
            ("token_out_of_range", "a Python token id >= V", {"token": 2}, v, "token"),
            ("token_string", "a string is not a token id", {"token": "0"}, t, "token"),
            ("u_accept_one", "a Python uniform must lie in [0, 1)", {"u_accept": 1.0}, v,
             "u_accept"),
            ("u_sample_negative", "a Python uniform must lie in [0, 1)", {"u_sample": -0.5}, v,
             "u_sample"),
            ("u_sample_rows_mismatch", "[k, V] rows take [k] uniforms",
             {"p": [[0.25, 0.75]], "q": [[0.5, 0.5]], "token": [0], "u_accept": [0.5],
              "u_sample": [0.5, 0.5]}, v, "u_sample"),
            ("rule_block_has_no_single_position_form",
             "rule block verifies a round jointly: verify_blockwise", {"rule": "block"}, v,
             "rule"),
        ],
        "verify_tokenwise": [
            ("rule_not_a_rule", "the rule must be an AcceptanceRule", {"rule": 2},
             t, "rule"),
            ("target_probs_one_dimensional", "target_probs is [k+1, V]",
             {"target_probs": [0.5, 0.5]}, v, "target_probs"),
            ("target_probs_float16", "probabilities must be float32",
             {"target_probs": typed([[0.5, 0.5], [0.5, 0.5]], "float16")}, t, "target_probs"),
            ("target_probs_rows_not_k_plus_one", "k drafts need k + 1 target rows",
             {"target_probs": [[0.5, 0.5]]}, v, "target_probs"),
            ("draft_tokens_not_an_array", "draft_tokens is a [k] array", {"draft_tokens": 0}, t,
             "draft_tokens"),
            ("draft_tokens_empty", "k >= 1", {"draft_tokens": [], "target_probs": [[0.5, 0.5]],
                                              "draft_probs": None, "rule": "sampler-match",
                                              "uniforms": [[0.5, 0.5]]}, v, "draft_tokens"),
            ("draft_tokens_float_dtype", "draft ids must be integer",
             {"draft_tokens": typed([0.0], "float32")}, t, "draft_tokens"),
            ("uniforms_wrong_shape", "uniforms is [k+1, 2]", {"uniforms": [[0.5, 0.5]]}, v,
             "uniforms"),
            ("uniforms_integer_dtype", "uniforms must be floating",
             {"uniforms": typed([[0, 0], [0, 0]], "int32")}, t, "uniforms"),
            ("stochastic_without_draft_probs", "stochastic reads draft_probs",
             {"draft_probs": None}, v, "draft_probs"),
            ("draft_probs_wrong_shape", "draft_probs is [k, V]",
             {"draft_probs": [[0.5, 0.5], [0.5, 0.5]]}, v, "draft_probs"),
            ("draft_probs_float16", "probabilities must be float32",
             {"draft_probs": typed([[0.5, 0.5]], "float16")}, t, "draft_probs"),
            ("rule_block_is_verified_jointly",
             "verify_tokenwise verifies token by token; rule block is verify_blockwise",
             {"rule": "block"}, v, "rule"),
        ],
        "verify_blockwise": [
            ("target_probs_one_dimensional", "target_probs is [k+1, V]",
             {"target_probs": [0.5, 0.5]}, v, "target_probs"),
            ("target_probs_float16", "probabilities must be float32",
             {"target_probs": typed([[0.5, 0.5], [0.5, 0.5]], "float16")}, t, "target_probs"),
            ("target_probs_rows_not_k_plus_one", "k drafts need k + 1 target rows",
             {"target_probs": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]}, v, "target_probs"),
            ("draft_probs_missing", "block verification reads draft_probs",
             {"draft_probs": None}, t, "draft_probs"),
            ("draft_probs_wrong_shape", "draft_probs is [k, V]",
             {"draft_probs": [[0.5, 0.5], [0.5, 0.5]]}, v, "draft_probs"),
            ("draft_probs_float16", "probabilities must be float32",
             {"draft_probs": typed([[0.5, 0.5]], "float16")}, t, "draft_probs"),
            ("draft_tokens_not_an_array", "draft_tokens is a [k] array", {"draft_tokens": 0}, t,
             "draft_tokens"),
            ("draft_tokens_empty", "k >= 1", {"draft_tokens": [], "target_probs": [[0.5, 0.5]],
                                              "draft_probs": [[0.5, 0.5]],
                                              "uniforms": [[0.5, 0.5]]}, v, "draft_tokens"),
            ("draft_tokens_float_dtype", "draft ids must be integer",
             {"draft_tokens": typed([0.0], "float32")}, t, "draft_tokens"),
            ("uniforms_wrong_shape", "uniforms is [k+1, 2]", {"uniforms": [[0.5, 0.5]]}, v,
             "uniforms"),
            ("uniforms_integer_dtype", "uniforms must be floating",
             {"uniforms": typed([[0, 0], [0, 0]], "int32")}, t, "uniforms"),
        ],
        "rewind_trim": [
            ("num_draft_zero", "num_draft >= 1", {"num_draft": 0, "num_accepted": 0}, v,
             "num_draft"),
            ("num_accepted_above_num_draft", "num_accepted <= num_draft", {"num_accepted": 3},
             v, "num_accepted"),
            ("num_accepted_negative", "num_accepted >= 0", {"num_accepted": -1}, v,
             "num_accepted"),
            ("num_draft_float", "an integer argument", {"num_draft": 2.0}, t, "num_draft"),
            ("num_accepted_bool", "a bool is not an integer", {"num_accepted": True}, t,
             "num_accepted"),
        ],
        "acceptance_closed_forms": [
            ("p_not_an_array", "a number is not p", {"p": 0.5}, t, "p"),
            ("p_float16", "probabilities must be float32", {"p": f16}, t, "p"),
            ("q_other_vocabulary", "p and q must have the same shape", {"q": [1.0]}, v, "q"),
            ("p_three_dimensional", "p is [V] or [k, V]", {"p": [[[1.0]]], "q": [[[1.0]]]}, v,
             "p"),
            ("probability_rule_not_a_rule", "acceptance_probability's rule must be a rule",
             {"rule": 3}, t, "rule"),
        ],
        "acceptance_rule": [
            ("target_config_not_a_config", "target_config must be a SamplerConfig",
             {"target_config": None}, t, "target_config"),
            ("drafter_has_distribution_int", "a bool argument", {"drafter_has_distribution": 1},
             t, "drafter_has_distribution"),
            ("stochastic_string", "a bool (or None) argument", {"stochastic": "yes"}, t,
             "stochastic"),
            ("block_string", "a bool (or None) argument", {"block": "yes"}, t, "block"),
        ],
        "expected_tokens_per_round": [
            ("alphas_not_a_sequence", "a number is not a sequence", {"alphas": 0.5}, t, "alphas"),
            ("alphas_string", "a string is not a sequence of probabilities", {"alphas": "0.5"},
             t, "alphas"),
            ("alpha_above_one", "each alpha lies in [0, 1]", {"alphas": [0.5, 1.5]}, v,
             "alphas"),
            ("alpha_nan", "each alpha is finite", {"alphas": ["nan"]}, v, "alphas"),
            ("alpha_bool", "a bool is not a probability", {"alphas": [True]}, t, "alphas"),
        ],
        "position_uniform": [
            ("seed_negative", "seeds lie in [0, 2**64)", {"seed": -1}, v, "seed"),
            ("seed_beyond_64_bits", "seeds lie in [0, 2**64)", {"seed": 2**64}, v, "seed"),
            ("seed_float", "an integer argument", {"seed": 1.0}, t, "seed"),
            ("position_negative", "positions are >= 0", {"position": -1}, v, "position"),
            ("position_bool", "a bool is not a position", {"position": True}, t, "position"),
            ("slot_out_of_range", "slots lie in [0, 4)", {"slot": 4}, v, "slot"),
        ],
        "grid_draw_counts": [
            ("probs_not_an_array", "a number is not probs", {"probs": 0.5}, t, "probs"),
            ("probs_rows", "one [V] law at a time", {"probs": [[0.5, 0.5]]}, v, "probs"),
            ("probs_float16", "probabilities must be float32", {"probs": f16}, t, "probs"),
            ("probs_empty_vocabulary", "V >= 1", {"probs": []}, v, "probs"),
        ],
        "expected_speedup": [
            ("alpha_above_one", "alpha lies in [0, 1]", {"alpha": 1.5}, v, "alpha"),
            ("alpha_string", "a string is not a probability", {"alpha": "0.5"}, t, "alpha"),
            ("k_zero", "k >= 1", {"k": 0}, v, "k"),
            ("k_float", "an integer argument", {"k": 2.0}, t, "k"),
            ("c_negative", "c >= 0", {"c": -0.25}, v, "c"),
            ("c_inf", "c is finite", {"c": "inf"}, v, "c"),
            ("verify_cost_zero", "verify_cost > 0", {"verify_cost": 0.0}, v, "verify_cost"),
        ],
        "verify_tree": [
            ("scheme_not_a_scheme", "scheme must be a TreeScheme", {"scheme": 3}, t, "scheme"),
            ("parents_not_a_sequence", "parents is a sequence of ints", {"parents": 0}, t,
             "parents"),
            ("parents_empty", "a tree has at least one node",
             {"parents": [], "draft_tokens": [], "target_probs": [[0.5, 0.5]],
              "draft_probs": [[0.5, 0.5]], "accept_uniforms": typed([], "float32", [0]),
              "sample_uniforms": [0.5]}, v, "parents"),
            ("parent_float", "a parent is an int", {"parents": [-1, 0.0]}, t, "parents"),
            ("parent_out_of_range", "a parent is -1 or a node", {"parents": [-1, 5]}, v,
             "parents"),
            ("parent_after_child", "parents come before their children",
             {"parents": [1, -1]}, v, "parents"),
            ("parents_cycle", "a cycle never reaches the root", {"parents": [1, 0]}, v,
             "parents"),
            ("parent_is_itself", "a node cannot be its own parent", {"parents": [-1, 1]}, v,
             "parents"),
            ("draft_tokens_not_a_sequence", "draft_tokens is a sequence of ints",
             {"draft_tokens": 0}, t, "draft_tokens"),
            ("draft_tokens_width_mismatch", "one token per node", {"draft_tokens": [0]}, v,
             "draft_tokens"),
            ("draft_token_float", "a token is an int", {"draft_tokens": [0, 1.0]}, t,
             "draft_tokens"),
            ("draft_token_outside_vocabulary", "tokens lie in [0, V)",
             {"draft_tokens": [0, 2]}, v, "draft_tokens"),
            ("draft_token_negative", "tokens lie in [0, V)", {"draft_tokens": [0, -1]}, v,
             "draft_tokens"),
            ("duplicate_candidates", "deterministic candidates are distinct",
             {"scheme": "deterministic", "draft_probs": None, "draft_tokens": [1, 1]}, v,
             "draft_tokens"),
            ("duplicate_siblings_without_replacement",
             "drafts without replacement are distinct", {"scheme": "without-replacement",
                                                         "draft_tokens": [0, 0]}, v,
             "draft_tokens"),
            ("target_probs_rows_not_nodes_plus_one", "N nodes need N + 1 target rows",
             {"target_probs": [[0.5, 0.5], [0.5, 0.5]]}, v, "target_probs"),
            ("target_probs_float16", "probabilities must be float32",
             {"target_probs": typed([[0.5, 0.5]] * 3, "float16")}, t, "target_probs"),
            ("draft_probs_missing", "the iid scheme reads q", {"draft_probs": None}, v,
             "draft_probs"),
            ("draft_probs_under_deterministic", "a candidate's proposal is its one-hot",
             {"scheme": "deterministic"}, v, "draft_probs"),
            ("draft_probs_wrong_shape", "draft_probs is [N+1, V]",
             {"draft_probs": [[0.5, 0.5], [0.5, 0.5]]}, v, "draft_probs"),
            ("draft_probs_float16", "probabilities must be float32",
             {"draft_probs": typed([[0.5, 0.5]] * 3, "float16")}, t, "draft_probs"),
            ("accept_uniforms_wrong_width", "one accept uniform per node",
             {"accept_uniforms": [0.5]}, v, "accept_uniforms"),
            ("accept_uniforms_python_float", "accept_uniforms is an array",
             {"accept_uniforms": 0.5}, t, "accept_uniforms"),
            ("sample_uniforms_wrong_width", "one sample uniform per depth 0..D",
             {"sample_uniforms": [0.5]}, v, "sample_uniforms"),
            ("sample_uniforms_integer_dtype", "uniforms must be floating",
             {"sample_uniforms": typed([0, 0], "int32")}, t, "sample_uniforms"),
        ],
        "tree_acceptance": [
            ("p_not_an_array", "a number is not p", {"p": 0.5}, t, "p"),
            ("p_rows", "one [V] law at a time", {"p": [[0.5, 0.5]]}, v, "p"),
            ("q_float16", "probabilities must be float32",
             {"q": typed([0.25, 0.75], "float16")}, t, "q"),
            ("q_other_vocabulary", "p and q share a vocabulary", {"q": [1.0]}, v, "q"),
            ("num_drafts_zero", "n >= 1", {"num_drafts": 0}, v, "num_drafts"),
            ("num_drafts_float", "an integer argument", {"num_drafts": 2.0}, t, "num_drafts"),
            ("num_drafts_bool", "a bool is not a count", {"num_drafts": True}, t, "num_drafts"),
        ],
    }


def error_vectors(family: str) -> list[Vector]:
    cases = {**error_cases(), "round_uniform": round_uniform_error_cases(),
             "seeded_run": seeded_run_error_cases()}
    out = []
    for name, note, changes, kind, argument in cases.get(family, []):
        inputs = base_inputs(family)
        inputs.update(copy.deepcopy(changes))
        out.append(error_vector(family, f"error_{name}", note, inputs, kind, argument))
    return out



# --- choices a port could get wrong without failing an earlier vector ------------------------
# Each vector below pins one observable choice that a port written from spec/ once got wrong
# while passing every other vector: the input on which the wrong choice and the normative one
# part. They are appended to their families (after the families' own vectors, before the
# error vectors) so that no earlier vector moves.


def draw_rounding_vector(name: str, note: str, probs: list[float], grid_index: int) -> Vector:
    """A draw whose answer hangs on float32 rounding of ``u * total``: checked against the
    normative float32 expression (spec/sample_from_distribution.md) evaluated in NumPy, not
    against the exact oracle, since rounding is the point. ``u = grid_index / 2**24``."""
    u = grid_index / 2.0**24
    weights = np.array(probs, dtype=np.float32)
    partial = np.cumsum(weights, dtype=np.float32)
    normative = partial > np.float32(u) * partial[-1]
    divided = partial / partial[-1] > np.float32(u)
    want = int(np.argmax(normative))
    if want == int(np.argmax(divided)):
        raise GenerationError(f"{name}: S_i / S > u does not differ here")
    got = scalar_int(sample_from_distribution(arr(probs), u))
    check_equal(name, got, want)
    return vector(name, note, {"probs": encode_reals(probs), "u": u}, {"token": got}, 0.0)


def pinned_draw_vectors() -> list[Vector]:
    return [
        draw_rounding_vector(
            "compares_partial_sums_with_u_times_total",
            "u = 9868950 / 2**24 on the uniform grid, total = fl(1.7): cumsum[0] = 1 > "
            "fl(u * total), so id 0; S_i / S > u instead rounds 1 / fl(1.7) below u and "
            "returns id 1", [1.0, 0.7], 9868950),
        draw_rounding_vector(
            "compares_partial_sums_with_u_times_total_upwards",
            "u = 14680063 / 2**24, total = fl(0.8): cumsum[0] = fl(0.7) <= fl(u * total), "
            "so id 1; S_i / S > u instead returns id 0", [0.7, 0.1], 14680063),
    ]


def pinned_joint_vectors() -> list[Vector]:
    made = [
        joint_vector(
            "zero_residual_keep_convention_is_one",
            "Z_1 = 0 with w_1 = 1 (p_2 = q_2) gives h_1 = 1 by convention, and the second "
            "draft is one neither model can produce (w_2 = h_2 = 0), so h_1 decides: "
            "tau = 1 (h_1 = 0 would give tau = 0 and a draw from p_1)",
            [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]],
            [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], [0, 2],
            [[0.96875, 0.25], [0.5, 0.75], [0.0, 0.0]]),
        joint_vector(
            "q_zero_reset_outweighs_a_deep_deficit",
            "w_1 = 1/8 (a log deficit of 2.08), then q_2(X_2) = 0 < p_2(X_2): w_2 = 1, so "
            "eta_2 = 1/2 keeps both drafts; a reset of log ratio 1 instead of "
            "sum |log r| + 1 leaves w_2 = e**-1.08 < 1/2",
            [[0.0625, 0.9375], [0.5, 0.5], [1.0, 0.0]], [[0.5, 0.5], [1.0, 0.0]], [0, 1],
            [[0.96875, 0.0], [0.5, 0.0], [0.0, 0.0]]),
        joint_vector(
            "log_ratio_of_a_subnormal_q",
            "q_1(X_1) = 2**-140, subnormal: log p - log q = 96.3 and w_1 = 1, so the draft "
            "is kept; log(p / q) overflows p / q to inf and turns w_1 into NaN",
            [[0.5, 0.5], [1.0, 0.0]], [[2.0**-140, 1.0]], [0], [[0.5, 0.0], [0.0, 0.0]]),
    ]
    kept = [v for v in made if v is not None]
    if len(kept) != len(made):
        raise GenerationError("a pinned verify_blockwise case is not robust")
    return kept


def float64_error_vectors(family: str) -> list[Vector]:
    """float64 probabilities are refused like float16 ones: every rule is specified in
    float32, and a float64 array would run the same formulas at another precision."""
    f64 = typed([0.5, 0.5], "float64")
    cases = {
        "sample_from_distribution": ("probs", {"probs": f64}),
        "accept_draft_token": ("q", {"q": f64}),
        "verify_blockwise": ("draft_probs", {"draft_probs": typed([[0.5, 0.5]], "float64")}),
    }
    if family not in cases:
        return []
    argument, changes = cases[family]
    inputs = base_inputs(family)
    inputs.update(changes)
    return [error_vector(family, f"error_{argument}_float64",
                         "float64 probabilities are refused: every rule is specified in float32",
                         inputs, "TypeError", argument)]


PINNED_CHOICES: dict[str, Callable[[], list[Vector]]] = {
    "sample_from_distribution": pinned_draw_vectors,
    "verify_blockwise": pinned_joint_vectors,
}


def pinned_choice_vectors(family: str) -> list[Vector]:
    """The family's pinned-choice vectors, then its float64 error vector (if any)."""
    make = PINNED_CHOICES.get(family)
    return (make() if make is not None else []) + float64_error_vectors(family)


# --- sampler_config, acceptance_rule, expected_tokens_per_round, expected_speedup ---------


def sampler_config_vectors() -> list[Vector]:
    cases: list[tuple[str, str, SamplerConfig, bool, bool]] = [
        ("defaults", "every field at its default: not greedy, no history read", config(),
         False, False),
        ("temperature_zero_greedy", "temperature 0 is greedy", config(temperature=0.0), True,
         False),
        ("top_k_one_greedy", "top_k = 1 is greedy at any temperature",
         config(temperature=0.7, top_k=1), True, False),
        ("top_k_two_not_greedy", "top_k = 2 is not greedy", config(top_k=2), False, False),
        ("tiny_temperature_not_greedy", "only temperature 0 itself is greedy",
         config(temperature=2.0**-20), False, False),
        ("presence_reads_history", "a presence penalty reads the history",
         config(presence_penalty=0.5), False, True),
        ("repetition_reads_history", "a repetition penalty != 1 reads the history",
         config(repetition_penalty=1.5), False, True),
        ("dry_reads_history", "DRY with a positive multiplier reads the history",
         config(dry_multiplier=0.5), False, True),
        ("dry_last_n_zero_is_off", "dry_penalty_last_n = 0 turns DRY off",
         config(dry_multiplier=0.5, dry_penalty_last_n=0), False, False),
        ("bounds_accepted", "every field at an inclusive bound of its range",
         config(top_p=1.0, min_p=1.0, repetition_penalty=2.0**-10, repetition_context_size=1,
                dry_base=1.0, dry_allowed_length=1, dry_penalty_last_n=-1,
                xtc_probability=1.0, xtc_threshold=0.0, dry_sequence_breakers=(0,),
                logit_bias={0: -1.0}), False, True),
        ("extreme_bounds_accepted", "every real at the far end of its float32 envelope",
         config(temperature=2.0**-126, repetition_penalty=2.0**32, frequency_penalty=2.0**64,
                presence_penalty=-(2.0**64), dry_multiplier=3.4028234663852886e38,
                dry_base=3.4028234663852886e38, dry_sequence_breakers=(2**31 - 1,),
                logit_bias={2**31 - 1: 2.0**64}), False, True),
        ("other_ends_accepted", "the other end of each range that has two",
         config(temperature=3.4028234663852886e38, repetition_penalty=2.0**-32,
                frequency_penalty=-(2.0**64), presence_penalty=2.0**64, xtc_threshold=1.0,
                logit_bias={0: -(2.0**64)}), False, True),
    ]
    out = []
    for name, note, cfg, greedy, history in cases:
        check_equal(name, (cfg.is_greedy, cfg.uses_history), (greedy, history))
        out.append(vector(name, note, {"config": encode_config(cfg)},
                          {"is_greedy": greedy, "uses_history": history,
                           "config": encode_config(cfg)}, 0.0))
    # Fields left out take their defaults: the only vectors that pin the defaults.
    partial: list[tuple[str, str, dict[str, Json]]] = [
        ("defaults_from_nothing", "no field given: every default, as float32", {}),
        ("defaults_beside_one_field", "one field given, the other fifteen at their defaults",
         {"temperature": 0.5, "dry_sequence_breakers": [3]}),
    ]
    for name, note, fields in partial:
        cfg = decode_config(fields)
        out.append(vector(name, note, {"config": fields},
                          {"is_greedy": cfg.is_greedy, "uses_history": cfg.uses_history,
                           "config": encode_config(cfg)}, 0.0))
    check_equal("the default config", out[-2]["expected"], {  # written out by hand
        "is_greedy": False, "uses_history": False, "config": {
            "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
            "repetition_penalty": 1.0, "repetition_context_size": 20,
            "frequency_penalty": 0.0, "presence_penalty": 0.0, "dry_multiplier": 0.0,
            "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": -1,
            "dry_sequence_breakers": [], "xtc_probability": 0.0,
            "xtc_threshold": f32(0.1), "logit_bias": []}})
    return out


def acceptance_rule_vectors() -> list[Vector]:
    greedy, tempered = config(temperature=0.0), config(temperature=0.7)
    cases = [
        ("greedy_target", "a greedy target gets greedy-argmax, whatever the drafter", greedy,
         True, True, AcceptanceRule.GREEDY_ARGMAX),
        ("greedy_target_switch_off", "greedy-argmax also when stochastic is off", greedy, False,
         False, AcceptanceRule.GREEDY_ARGMAX),
        ("greedy_by_top_k", "top_k = 1 is greedy", config(top_k=1), True, True,
         AcceptanceRule.GREEDY_ARGMAX),
        ("stochastic", "a sampling target and a drafter with q", tempered, True, True,
         AcceptanceRule.STOCHASTIC),
        ("no_proposal_distribution", "stochastic enabled, no q: sampler-match under its own id",
         tempered, False, True, AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION),
        ("switch_off", "stochastic disabled: sampler-match", tempered, True, False,
         AcceptanceRule.SAMPLER_MATCH),
        ("switch_off_without_q", "stochastic disabled and no q: sampler-match", tempered, False,
         False, AcceptanceRule.SAMPLER_MATCH),
    ]
    cases.append(("switch_default_is_enabled",
                  "stochastic = null: the switches' defaults, both enabled, so block "
                  "verification", tempered, True, None, AcceptanceRule.BLOCK))
    out = []
    for name, note, cfg, has_q, stochastic, want in cases:
        out.append(acceptance_rule_vector(name, note, cfg, has_q, stochastic, want))
    block_cases = [
        ("block", "stochastic and block on, a drafter with q: block verification", tempered,
         True, True, True, AcceptanceRule.BLOCK),
        ("block_off", "block off: the stochastic rule", tempered, True, True, False,
         AcceptanceRule.STOCHASTIC),
        ("block_without_q", "block on but no q: sampler-match under its own id", tempered,
         False, True, True, AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION),
        ("block_switch_off", "stochastic disabled: sampler-match, block or not", tempered,
         True, False, True, AcceptanceRule.SAMPLER_MATCH),
        ("block_greedy", "a greedy target gets greedy-argmax, block or not", greedy, True,
         True, True, AcceptanceRule.GREEDY_ARGMAX),
    ]
    for name, note, cfg, has_q, stochastic, block, want in block_cases:
        out.append(acceptance_rule_vector(name, note, cfg, has_q, stochastic, want, block))
    return out


def acceptance_rule_vector(name: str, note: str, cfg: SamplerConfig, has_q: bool,
                           stochastic: bool | None, want: AcceptanceRule,
                           block: bool | None = None) -> Vector:
    got = acceptance_rule(cfg, drafter_has_distribution=has_q, stochastic=stochastic,
                          block=block)
    check_equal(name, got, want)
    inputs: dict[str, Json] = {"target_config": encode_config(cfg),
                               "drafter_has_distribution": has_q, "stochastic": stochastic}
    if block is not None:
        inputs["block"] = block
    return vector(name, note, inputs, {"rule": got.value}, 0.0)


DOUBLE_ATOL = 1e-12
"""The tolerance of a float64 closed form whose value is not exact in binary."""


def expected_tokens_per_round_vectors() -> list[Vector]:
    cases = [
        ("no_drafts", "k = 0: the round emits one token", []),
        ("two_halves", "1 + 1/2 + 1/4", [0.5, 0.5]),
        ("all_accepted", "alpha = 1 everywhere: k + 1 tokens", [1.0, 1.0, 1.0]),
        ("zero_stops", "a zero ends the products", [0.75, 0.0, 1.0]),
        ("dyadic_mixed", "1 + 3/4 + 3/8 + 3/32", [0.75, 0.5, 0.25]),
        ("decimal_alphas", "not exact in binary: compared within 1e-12", [0.9, 0.8, 0.7, 0.6]),
    ]
    out = []
    for name, note, alphas in cases:
        want, survival = Fraction(1), Fraction(1)
        for alpha in alphas:
            survival *= Fraction(alpha)
            want += survival
        got = expected_tokens_per_round(alphas)
        atol = 0.0 if Fraction(got) == want else DOUBLE_ATOL
        check_close(name, [got], [float(want)], atol)
        out.append(vector(name, note, {"alphas": list(alphas)}, {"tokens": got}, atol))
    return out


def expected_speedup_vectors() -> list[Vector]:
    cases = [
        ("free_drafter", "c = 0: the speedup is the tokens per round", 0.5, 2, 0.0, 1.0),
        ("docstring_example", "alpha = 1, k = 3, c = 1/4: 4 / 1.75", 1.0, 3, 0.25, 1.0),
        ("no_acceptance", "alpha = 0: one token per round costs k c + 1", 0.0, 4, 0.125, 1.0),
        ("verify_cost", "a (k+1)-token verify costing 1.5 forwards", 0.75, 2, 0.25, 1.5),
        ("decimal_inputs", "not exact in binary: compared within 1e-12", 0.8, 5, 0.05, 1.2),
        ("one_draft", "k = 1 is allowed: (1 + alpha) / (c + 1)", 0.5, 1, 0.25, 1.0),
        ("verify_cost_default", "verify_cost left out: it defaults to 1", 0.5, 2, 0.5, None),
    ]
    out = []
    for name, note, alpha, k, c, given_cost in cases:
        cost = 1.0 if given_cost is None else given_cost
        tokens, survival = Fraction(1), Fraction(1)
        for _ in range(k):
            survival *= Fraction(alpha)
            tokens += survival
        want = tokens / (k * Fraction(c) + Fraction(cost))
        got = (expected_speedup(alpha, k, c) if given_cost is None
               else expected_speedup(alpha, k, c, verify_cost=given_cost))
        atol = 0.0 if Fraction(got) == want else DOUBLE_ATOL
        check_close(name, [got], [float(want)], atol)
        inputs: Vector = {"alpha": alpha, "k": k, "c": c}
        if given_cost is not None:
            inputs["verify_cost"] = given_cost
        out.append(vector(name, note, inputs, {"speedup": got}, atol))
    return out


# --- verify_tree (tree verification) ---------------------------------------------------------

TREE_SHAPES = {"width2": (-1, -1), "width3": (-1, -1, -1), "chain2": (-1, 0),
               "two_then_two": (-1, -1, 0, 0)}


def tree_proposal(scheme: TreeScheme, q: Rational, tokens: Sequence[int], j: int) -> Rational:
    """The law child j was drafted from, given siblings 0..j-1: q, q without them, one-hot."""
    if scheme is TreeScheme.DETERMINISTIC:
        return [Fraction(int(x == tokens[j])) for x in range(len(q))]
    if scheme is TreeScheme.IID or j == 0:
        return list(q)
    kept = [Fraction(0) if x in tokens[:j] else w for x, w in enumerate(q)]
    mass = sum(kept)
    return kept if mass == 0 else [w / mass for w in kept]


def tree_oracle(scheme: TreeScheme, parents: Sequence[int], target: list[Rational],
                draft: list[Rational], tokens: Sequence[int], accept: Sequence[Fraction],
                sample: Sequence[Fraction]) -> tuple[list[int], int, bool]:
    """(accepted nodes, next token, robust): the rule walked in exact arithmetic."""
    shape = tree_shape(parents, tokens, distinct_siblings=False)
    row, path, robust = 0, [], True
    while True:
        r, kids = target[row], shape.children[row]
        siblings = [tokens[c] for c in kids]
        chosen = None
        for j, child in enumerate(kids):
            q_j = tree_proposal(scheme, draft[row], siblings, j)
            x = siblings[j]
            if q_j[x] > 0 and r[x] > 0:
                robust = robust and abs(accept[child] - r[x] / q_j[x]) >= ROBUST_MARGIN
            if r[x] > 0 and accept[child] * q_j[x] <= r[x]:
                chosen = child
                break
            excess = [max(a - b, Fraction(0)) for a, b in zip(r, q_j, strict=True)]
            mass = sum(excess)
            r = r if mass == 0 else [e / mass for e in excess]
        if chosen is None:
            u = sample[shape.depths[row]]
            return path, oracle_sample(r, u), robust and draw_is_robust(r, u)
        path.append(chosen)
        row = chosen + 1


def tree_vector(name: str, note: str, scheme: TreeScheme, parents: Sequence[int],
                target: list[Row], draft: list[Row] | None, tokens: Sequence[int],
                accept: list[float], sample: list[float], *, exact_tie: bool = False
                ) -> Vector | None:
    """`exact_tie`: a case placed on a test's threshold on purpose, where the threshold is
    exact in float32 (0, or a dyadic ratio of dyadic laws); only the draw must be robust."""
    exact_target = [rational(r) for r in target]
    exact_draft = [rational(r) for r in draft] if draft is not None else exact_target
    path, nxt, robust = tree_oracle(scheme, parents, exact_target, exact_draft, tokens,
                                    [Fraction(u) for u in accept], [Fraction(u) for u in sample])
    if not robust and not exact_tie:
        return None
    verdict = verify_tree(scheme, tuple(parents), arr(target),
                          arr(draft) if draft is not None else None, tuple(tokens),
                          mx.array(accept), mx.array(sample))
    depth = max(tree_shape(parents, tokens, distinct_siblings=False).depths)
    nodes = path + [-1] * (depth - len(path))
    check_equal(name, (scalar_int(verdict.num_accepted), ints(verdict.accepted_nodes),
                       scalar_int(verdict.next_token)), (len(path), nodes, nxt))
    return vector(name, note, {
        "scheme": scheme.value, "parents": list(parents), "target_probs": encode_reals(target),
        "draft_probs": encode_reals(draft) if draft is not None else None,
        "draft_tokens": list(tokens), "accept_uniforms": encode_reals(accept),
        "sample_uniforms": encode_reals(sample),
    }, {"num_accepted": len(path), "accepted_nodes": nodes, "next_token": nxt}, 0.0)


def tree_drafts(scheme: TreeScheme, parents: Sequence[int], draft: list[Row],
                rng: Lcg) -> list[int] | None:
    """Node tokens drafted as the scheme assumes: i.i.d., without replacement, or top-n."""
    tokens: list[int] = []
    for i, parent in enumerate(parents):
        q = draft[parent + 1]
        earlier = [tokens[s] for s in range(i) if parents[s] == parent]
        if scheme is TreeScheme.DETERMINISTIC:
            order = sorted(range(len(q)), key=lambda x: (-q[x], x))
            tokens.append(order[len(earlier)])
            continue
        weights = [0.0 if (scheme is TreeScheme.WITHOUT_REPLACEMENT and x in earlier) else w
                   for x, w in enumerate(q)]
        if sum(weights) == 0:
            return None
        tokens.append(draw_from(weights, rng))
    return tokens


def searched_tree(scheme: TreeScheme, tree: str, stop_row: int | None) -> Vector:
    """The first pseudo-random round of `tree` under `scheme` that stops at `stop_row`; with
    None, one whose first root child passes while a later root sibling would pass too."""
    parents = TREE_SHAPES[tree]
    size = len(parents)
    row_key = size + 1 if stop_row is None else stop_row
    rng = Lcg(seed_of(11, list(TreeScheme).index(scheme), size, row_key, len(tree)))
    depth = max(tree_shape(parents, [0] * size, distinct_siblings=False).depths)
    for _ in range(50000):
        vocab = 3 + rng.below(2)
        target = [rng.dyadic_distribution(vocab) for _ in range(size + 1)]
        draft = [rng.dyadic_distribution(vocab) for _ in range(size + 1)]
        tokens = tree_drafts(scheme, parents, draft, rng)
        if tokens is None:
            continue
        accept = [rng.uniform() for _ in range(size)]
        sample = [rng.uniform() for _ in range(depth + 1)]
        path, _, robust = tree_oracle(scheme, parents, [rational(r) for r in target],
                                      [rational(r) for r in draft], tokens,
                                      [Fraction(u) for u in accept],
                                      [Fraction(u) for u in sample])
        if not robust:
            continue
        if stop_row is None:
            if not (path and path[0] == 0 and later_sibling_passes(
                    scheme, parents, target, draft, tokens, accept, path)):
                continue
            label, what = "_first_of_two_passing", "the first of two passing root children wins"
        else:
            if (path[-1] + 1 if path else 0) != stop_row:
                continue
            label, what = f"_stop_row{stop_row}", f"the walk stops at row {stop_row}"
        made = tree_vector(
            f"{scheme.value.replace('-', '_')}_{tree}{label}",
            f"pseudo-random dyadic {tree} tree under {scheme.value}: {what}", scheme, parents,
            target, None if scheme is TreeScheme.DETERMINISTIC else draft, tokens, accept, sample)
        if made is not None:
            return made
    raise GenerationError(f"no tree case for {scheme.value} {tree} row {stop_row}")


def later_sibling_passes(scheme: TreeScheme, parents: Sequence[int], target: list[Row],
                         draft: list[Row], tokens: Sequence[int], accept: Sequence[float],
                         path: Sequence[int]) -> bool:
    """Whether, at the first row of the path, a later sibling would pass with r = p."""
    if not path:
        return False
    shape = tree_shape(parents, tokens, distinct_siblings=False)
    kids = shape.children[0]
    p = rational(target[0])
    later = kids[kids.index(path[0]) + 1:]
    for child in later:
        q_j = tree_proposal(scheme, rational(draft[0]), [tokens[c] for c in kids],
                            kids.index(child))
        x = tokens[child]
        if p[x] > 0 and Fraction(accept[child]) * q_j[x] <= p[x]:
            return True
    return False


def verify_tree_vectors() -> list[Vector]:
    half3, p3 = [0.5, 0.25, 0.25], [0.25, 0.5, 0.25]
    hand = [
        tree_vector("zero_mass_draft_rejected_at_coin_zero",
                    "p(1) = 0 and the coin is 0: 0 * q(1) <= 0, yet the r(x) > 0 guard "
                    "rejects the draft and the draw skips id 1", TreeScheme.IID, (-1,),
                    [[0.5, 0.0, 0.5], half3], [[0.25, 0.5, 0.25], half3], [1], [0.0],
                    [0.5, 0.0], exact_tie=True),
        tree_vector("final_draw_reads_the_sample_uniform",
                    "draft 0 rejected (coin 0.75 > 1/2); the residual (0, 1/2, 1/2) drawn with "
                    "the sample uniform 0.25 gives id 1, the rejected coin would give id 2",
                    TreeScheme.IID, (-1,), [half3, half3], [[1.0, 0.0, 0.0], half3], [0],
                    [0.75], [0.25, 0.0]),
        tree_vector("without_replacement_renormalises_q",
                    "sibling 0 (p = 0) rejected, r = (0, 1/5, 4/5); sibling 1 is tested against "
                    "q without id 0, (0, 1/3, 2/3): threshold 3/5 < 0.8125 rejects it (against "
                    "the unrenormalised q(1) = 1/8 it would pass), and the draw gives id 2",
                    TreeScheme.WITHOUT_REPLACEMENT, (-1, -1),
                    [[0.0, 0.25, 0.75], half3, half3], [[0.625, 0.125, 0.25], half3, half3],
                    [0, 1], [0.5, 0.8125], [0.5, 0.0]),
        tree_vector("candidates_are_one_hot",
                    "deterministic candidates 0 and 1 with p = (1/4, 1/2, 1/4): candidate 0 "
                    "fails (0.5 > 1/4), then r = (0, 2/3, 1/3) and 0.5 <= 2/3 keeps candidate 1",
                    TreeScheme.DETERMINISTIC, (-1, -1), [p3, half3, half3], None, [0, 1],
                    [0.5, 0.5], [0.0, 0.0]),
    ]
    if any(v is None for v in hand):
        raise GenerationError("a hand-written verify_tree case is not robust")
    out = [v for v in hand if v is not None]
    for scheme in TreeScheme:
        for tree, parents in TREE_SHAPES.items():
            for stop_row in range(len(parents) + 1):
                out.append(searched_tree(scheme, tree, stop_row))
            if tree != "chain2":
                out.append(searched_tree(scheme, tree, None))
    return out


def oracle_iid_siblings(p: Rational, q: Rational, n: int) -> Fraction:
    r, miss = list(p), Fraction(1)
    for _ in range(n):
        miss *= 1 - sum(min(a, b) for a, b in zip(r, q, strict=True))
        excess = [max(a - b, Fraction(0)) for a, b in zip(r, q, strict=True)]
        mass = sum(excess)
        r = r if mass == 0 else [e / mass for e in excess]
    return 1 - miss


def oracle_ceiling(p: Rational, q: Rational, n: int) -> Fraction:
    """min over every token set H of p(H) + 1 - q(H)^n, by enumeration."""
    best = Fraction(1)
    for mask in range(1 << len(p)):
        inside = [x for x in range(len(p)) if mask >> x & 1]
        best = min(best, sum((p[x] for x in inside), Fraction(0)) + 1
                   - sum((q[x] for x in inside), Fraction(0)) ** n)
    return best


def tree_acceptance_vector(name: str, note: str, p: Row, q: Row, n: int) -> Vector:
    exact_p, exact_q = rational(p), rational(q)
    want_iid = oracle_iid_siblings(exact_p, exact_q, n)
    want_ceiling = oracle_ceiling(exact_p, exact_q, n)
    got_iid = scalar_float(iid_siblings_acceptance(arr(p), arr(q), n))
    got_ceiling = scalar_float(multi_draft_ceiling(arr(p), arr(q), n))
    check_close(name, [got_iid, got_ceiling], [float(want_iid), float(want_ceiling)],
                INEXACT_ATOL)
    if want_iid > want_ceiling:
        raise GenerationError(f"{name}: RRS accepts more than the ceiling")
    return vector(name, note, {"p": encode_reals(p), "q": encode_reals(q), "num_drafts": n},
                  {"iid_siblings_acceptance": f32(float(want_iid)),
                   "multi_draft_ceiling": f32(float(want_ceiling))}, INEXACT_ATOL)


def tree_acceptance_vectors() -> list[Vector]:
    out = [
        tree_acceptance_vector("one_draft_is_sum_min", "n = 1: both are sum min(p, q) = 1/2",
                               [0.5, 0.5], [1.0, 0.0], 1),
        tree_acceptance_vector("one_hot_q_gains_nothing",
                               "q one-hot: every draft is id 0, both stay at p(0) = 1/2",
                               [0.5, 0.5], [1.0, 0.0], 3),
        tree_acceptance_vector("equal_laws_accept_always", "p = q: 1 for any n",
                               [0.25, 0.75], [0.25, 0.75], 2),
        tree_acceptance_vector("rrs_below_the_ceiling",
                               "p = (1/2, 1/4, 1/4), q = (1/4, 1/4, 1/2), n = 2: RRS 13/16 "
                               "against the ceiling 15/16", [0.5, 0.25, 0.25],
                               [0.25, 0.25, 0.5], 2),
        tree_acceptance_vector("disjoint_supports", "p and q disjoint: 0 for any n",
                               [1.0, 0.0, 0.0], [0.0, 0.5, 0.5], 3),
    ]
    rng = Lcg(seed_of(13))
    for index in range(12):
        size = 2 + index % 4
        p, q = rng.dyadic_distribution(size), rng.dyadic_distribution(size)
        n = 1 + index % 3
        out.append(tree_acceptance_vector(f"pseudo_random_{index}",
                                          f"pseudo-random dyadic pair, V = {size}, n = {n}",
                                          p, q, n))
    return out



# --- the files ------------------------------------------------------------------------------

FAMILIES: dict[str, tuple[list[str], str, Callable[[], list[Vector]]]] = {
    "sampler_config": (
        ["SamplerConfig"], "config -> is_greedy, uses_history; or the error of a bad field",
        sampler_config_vectors,
    ),
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
    "verify_tokenwise": (
        ["verify_tokenwise"],
        "rule, target_probs, draft_probs, draft_tokens, uniforms -> num_accepted, next_token",
        verify_tokenwise_vectors,
    ),
    "verify_blockwise": (
        ["verify_blockwise"],
        "target_probs, draft_probs, draft_tokens, uniforms -> num_accepted, next_token, "
        "accepted_length_law (block verification)",
        verify_blockwise_vectors,
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
    "acceptance_rule": (
        ["acceptance_rule"], "target_config, drafter_has_distribution, stochastic -> rule id",
        acceptance_rule_vectors,
    ),
    "expected_tokens_per_round": (
        ["expected_tokens_per_round"], "alphas -> tokens (float64)",
        expected_tokens_per_round_vectors,
    ),
    "expected_speedup": (
        ["expected_speedup"], "alpha, k, c, verify_cost -> speedup (float64)",
        expected_speedup_vectors,
    ),
    "position_uniform": (
        ["core.randomness.position_uniform"],
        "seed, position, slot name -> the run's uniform (not part of the acceptance contract)",
        position_uniform_vectors,
    ),
    "grid_draw_counts": (
        ["grid_draw_counts"], "probs -> counts of the 2**24 grid uniforms drawing each id",
        grid_draw_counts_vectors,
    ),
    "round_uniform": (
        ["core.randomness.round_uniform"],
        "seed, round position, offset, slot name -> the round-keyed uniform",
        round_uniform_vectors,
    ),
    "seeded_run": (
        ["shell.seeded_run.seeded_run"],
        "laws as tables of the history, prompt, rule, k, max_tokens, seed -> the emitted "
        "tokens and every round's position, drafts, num_accepted and next_token",
        seeded_run_vectors,
    ),
    "verify_tree": (
        ["verify_tree"],
        "scheme, parents, target_probs, draft_probs, draft_tokens, accept_uniforms, "
        "sample_uniforms -> num_accepted, accepted_nodes, next_token (tree verification)",
        verify_tree_vectors,
    ),
    "tree_acceptance": (
        ["iid_siblings_acceptance", "multi_draft_ceiling"],
        "p, q, num_drafts -> iid_siblings_acceptance (RRS at one node), multi_draft_ceiling "
        "(alpha*)",
        tree_acceptance_vectors,
    ),
}


def build(family: str) -> str:
    functions, description, make = FAMILIES[family]
    vectors = make() + pinned_choice_vectors(family) + error_vectors(family)
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
