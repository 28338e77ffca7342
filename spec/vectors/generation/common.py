"""What every family shares: float32 values and their JSON encoding, conversion to and
from the library, the exact rational oracle of one position and of a token-by-token round,
the reproducible pseudo-random cases, and the placeholder draft ids.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypeAlias

import mlx.core as mx
import numpy as np

from specaccept import AcceptanceRule, SamplerConfig

Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
Vector: TypeAlias = "dict[str, Json]"
Row: TypeAlias = "list[float]"

FORMAT_VERSION = 2
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


def id_list(ids: Sequence[int]) -> Json:
    out: list[Json] = []
    out.extend(ids)
    return out


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
    """spec/validation.md: an id outside [0, V) in an array is a placeholder."""
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


# --- placeholders: draft ids outside [0, V) (spec/validation.md) -------------------

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


def typed(values: Json, dtype: str, shape: list[int] | None = None) -> Json:
    """An array argument of an explicit dtype (plain JSON arrays take the slot's dtype), and
    of an explicit shape when the values alone cannot say it (an empty batch)."""
    if shape is None:
        return {"array": values, "dtype": dtype}
    return {"array": values, "dtype": dtype, "shape": list(shape)}


ErrorCase: TypeAlias = "tuple[str, str, dict[str, Json], str, str]"
"""(name, note, the arguments that differ from the family's base input, kind, argument)."""
