"""The sampler's settings: `SamplerConfig` and the bounds its validation enforces.

A config is checked once, on construction, against ranges chosen so that every step of
`effective_token_distribution` stays finite in float32 for any logits within
+-`LOGIT_LIMIT`: the chain itself never rechecks a setting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from specaccept.core import validation

__all__ = [
    "ADJUSTMENT_LIMIT",
    "FLOAT32_MAX",
    "LOGIT_LIMIT",
    "MAX_TOKEN_ID",
    "REPETITION_PENALTY_LIMIT",
    "SMALLEST_TEMPERATURE",
    "SamplerConfig",
]

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: a config real beyond it would become inf in the arithmetic."""
SMALLEST_TEMPERATURE = 2.0**-126
"""The smallest usable temperature, float32's smallest normal (subnormals may flush to 0)."""
LOGIT_LIMIT = 2.0**64
"""Finite logits of magnitude up to this bound keep every step of the chain finite."""
ADJUSTMENT_LIMIT = 2.0**64
"""The bound on a logit bias, a frequency penalty and a presence penalty."""
REPETITION_PENALTY_LIMIT = 2.0**32
"""The repetition penalty lies in [1 / this, this]: it divides and multiplies logits."""
MAX_TOKEN_ID = 2**31 - 1
"""Token ids are int32 in the arithmetic."""


@dataclass(frozen=True)
class SamplerConfig:
    """The settings of one sampler, validated on construction.

    Every field defaults to "off", except `temperature`, which defaults to 1.
    The repetition, frequency and presence penalties all read the last
    `repetition_context_size` tokens; DRY reads the last `dry_penalty_last_n`
    (-1: the whole history, 0: DRY off).
    `dry_sequence_breakers` are token ids (the shell maps strings to ids).
    `logit_bias` maps token ids to additive biases and is copied on construction.

    Every real must be one the float32 arithmetic can use: each range below
    keeps every step of `effective_token_distribution` finite for logits within
    +-`LOGIT_LIMIT`, so a valid config can never turn a valid row into NaN.

    Raises:
        TypeError: a field has the wrong type.
        ValueError: a field is out of range; the message names the field and the range.

    >>> SamplerConfig(temperature=0.0).is_greedy
    True
    >>> SamplerConfig(temperature=0.7, top_k=1).is_greedy
    True
    >>> SamplerConfig(top_p=0.0)
    Traceback (most recent call last):
    ...
    ValueError: top_p must lie in (0, 1], got 0.0
    """

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
        def check(name: str, ok: bool, bound: str) -> None:
            if not ok:
                raise ValueError(f"{name} must {bound}, got {getattr(self, name)!r}")

        for name in (
            "temperature", "top_p", "min_p", "repetition_penalty", "frequency_penalty",
            "presence_penalty", "dry_multiplier", "dry_base", "xtc_probability", "xtc_threshold",
        ):
            # Stored as float: an int such as 2**63 would reach MLX as an int64 scalar.
            object.__setattr__(self, name, validation.real(name, getattr(self, name)))
        for name in (
            "top_k", "repetition_context_size", "dry_allowed_length", "dry_penalty_last_n",
        ):
            check(
                name, validation.integer(name, getattr(self, name)) <= MAX_TOKEN_ID,
                "be <= 2**31 - 1 (MLX indexes and slices with int32)",
            )
        temperature = self.temperature
        check(
            "temperature",
            temperature == 0.0 or SMALLEST_TEMPERATURE <= temperature <= FLOAT32_MAX,
            f"be 0 (greedy) or lie in [{SMALLEST_TEMPERATURE!r}, {FLOAT32_MAX!r}] "
            "(float32's normal range: a smaller one rounds towards 0)",
        )
        check("top_k", self.top_k >= 0, "be >= 0 (0 is off)")
        check("top_p", 0.0 < self.top_p <= 1.0, "lie in (0, 1]")
        check("min_p", 0.0 <= self.min_p <= 1.0, "lie in [0, 1]")
        check(
            "repetition_penalty",
            1.0 / REPETITION_PENALTY_LIMIT <= self.repetition_penalty <= REPETITION_PENALTY_LIMIT,
            f"lie in [2**-32, 2**32] = [{1.0 / REPETITION_PENALTY_LIMIT!r}, "
            f"{REPETITION_PENALTY_LIMIT!r}] (1 is off) so that penalised logits stay finite",
        )
        for name in ("frequency_penalty", "presence_penalty"):
            check(
                name, abs(getattr(self, name)) <= ADJUSTMENT_LIMIT,
                f"lie in [-2**64, 2**64] = [{-ADJUSTMENT_LIMIT!r}, {ADJUSTMENT_LIMIT!r}] "
                "(0 is off) so that penalised logits stay finite",
            )
        check("repetition_context_size", self.repetition_context_size >= 1, "be >= 1")
        check(
            "dry_multiplier",
            self.dry_multiplier == 0.0
            or SMALLEST_TEMPERATURE <= self.dry_multiplier <= FLOAT32_MAX,
            f"be 0 (off) or lie in [{SMALLEST_TEMPERATURE!r}, {FLOAT32_MAX!r}] (float32's "
            "normal range: a smaller one rounds to 0 and multiplies an overflowed power to NaN)",
        )
        check(
            "dry_base", 1.0 <= self.dry_base <= FLOAT32_MAX,
            f"lie in [1, {FLOAT32_MAX!r}] (float32's finite range)",
        )
        check("dry_allowed_length", self.dry_allowed_length >= 1, "be >= 1")
        check("dry_penalty_last_n", self.dry_penalty_last_n >= -1, "be >= -1 (-1: whole history)")
        check("xtc_probability", 0.0 <= self.xtc_probability <= 1.0, "lie in [0, 1]")
        check("xtc_threshold", 0.0 <= self.xtc_threshold <= 1.0, "lie in [0, 1]")
        if not isinstance(self.dry_sequence_breakers, tuple):
            raise TypeError(
                "dry_sequence_breakers must be a tuple of token ids, "
                f"got {type(self.dry_sequence_breakers).__name__}"
            )
        for breaker in self.dry_sequence_breakers:
            breaker_id = validation.integer("dry_sequence_breakers", breaker)
            check(
                "dry_sequence_breakers", 0 <= breaker_id <= MAX_TOKEN_ID,
                f"hold token ids in [0, 2**31 - 1] (int32), found {breaker_id}",
            )
        if not isinstance(self.logit_bias, Mapping):
            raise TypeError(
                f"logit_bias must be a mapping of token id to bias, got "
                f"{type(self.logit_bias).__name__}"
            )
        bias = {}
        for token, value in self.logit_bias.items():
            token = validation.integer("logit_bias key", token)
            if not 0 <= token <= MAX_TOKEN_ID:
                raise ValueError(
                    f"logit_bias keys must be token ids in [0, 2**31 - 1] (int32), got {token}"
                )
            bias[token] = validation.real(f"logit_bias[{token}]", value)
            if abs(bias[token]) > ADJUSTMENT_LIMIT:
                raise ValueError(
                    f"logit_bias[{token}] must lie in [-2**64, 2**64] = "
                    f"[{-ADJUSTMENT_LIMIT!r}, {ADJUSTMENT_LIMIT!r}] so that biased logits "
                    f"stay finite, got {value!r}"
                )
        object.__setattr__(self, "logit_bias", bias)

    def __hash__(self) -> int:
        # logit_bias is a dict (for a natural constructor); hash its items instead.
        values = tuple(
            tuple(sorted(v.items())) if isinstance(v, Mapping) else v
            for v in (getattr(self, f) for f in self.__dataclass_fields__)
        )
        return hash(values)

    @property
    def is_greedy(self) -> bool:
        """True when the sampler is an argmax (temperature 0 or top-k 1)."""
        return self.temperature == 0.0 or self.top_k == 1

    @property
    def uses_history(self) -> bool:
        """True when some penalty reads the token history."""
        return (
            self.repetition_penalty != 1.0
            or self.frequency_penalty != 0.0
            or self.presence_penalty != 0.0
            or (self.dry_multiplier > 0.0 and self.dry_penalty_last_n != 0)
        )
