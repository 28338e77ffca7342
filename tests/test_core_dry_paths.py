"""DRY's two ways to the match lengths: cut at the saturation length, and prefix doubling.

`dry_fast.saturation_length` returns allowed + e, with e the smallest exponent for which the
exact multiplier * base ** e, on the float32 values of both, reaches twice the cap; DRY then
compares match lengths only up to there. Three checks: e is that smallest exponent (an
exhaustive search in integers); the penalty MLX computes is exactly the cap for every
length from there on, enumerated past the point where float32 pow overflows; and histories
whose longest match lands at L_sat - 1, L_sat and L_sat + 1 get the penalty of the n x n
definition. The MLX behaviours the direct comparison relies on (a strided view, the first
of equal maxima from argmax) are pinned down first. Windows too long for the direct
comparison that never saturate take prefix doubling, whose Z-array is checked against
the definition here too (tests/test_dry.py does both at length, with hypothesis).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mlx.core as mx
import numpy as np
import pytest

from specaccept.core.dry import (
    DRY_PENALTY_CAP,
    dry_penalty,
    dry_penalty_by_definition,
    penalty_of_match_length,
)
from specaccept.core.dry_fast import (
    _LONGEST_DIRECT_MATCH,
    _capped_prefix_match_lengths,
    _prefix_match_lengths,
    saturation_length,
)
from specaccept.core.sampler_config import SamplerConfig

CAP = Fraction(float(np.float32(1e30)))
FLOAT32_MAX = Fraction(float(np.finfo(np.float32).max))
BASES = (1.0, 1.0 + 2.0**-24, 1.0 + 2.0**-23, 1.0001, 1.01, 1.1, 1.5, 1.75, 2.0, 3.0, 10.0,
         1e10, 1e20, 3.4028234663852886e38)
MULTIPLIERS = (2.0**-126, 1e-30, 1e-10, 0.5, 0.8, 1.0, 3.0, 1e10, 1e30, 1.95e30, 3e38,
               3.4028234663852886e38)
ALLOWED = (1, 3)
CONFIGS = [
    SamplerConfig(dry_multiplier=m, dry_base=b, dry_allowed_length=a)
    for b in BASES for m in MULTIPLIERS for a in ALLOWED
]


def _name(config: SamplerConfig) -> str:
    return f"{config.dry_multiplier}*{config.dry_base}^e, allowed {config.dry_allowed_length}"


def _exact(value: float) -> Fraction:
    return Fraction(float(np.float32(value)))


def test_argmax_takes_the_first_maximum_and_as_strided_reads_overlapping_rows() -> None:
    rows = mx.array([[0, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]], dtype=mx.bool_)
    assert mx.argmax(rows, axis=1).tolist() == [1, 0, 3, 0]
    # A lazy, reversed (non-contiguous) source, as DRY passes it.
    source = mx.arange(10, dtype=mx.int32)[::-1]
    padded = mx.concatenate([source, mx.zeros((3,), dtype=mx.int32)])
    view = mx.as_strided(padded, shape=(10, 3), strides=(1, 1))
    expected = [[(9 - t - s) if t + s < 10 else 0 for s in range(3)] for t in range(10)]
    assert view.tolist() == expected


def test_the_direct_comparison_stops_at_the_end_whatever_the_padding_holds() -> None:
    # Zero padding matches a sequence of zeros; the match must still end at the last entry.
    zeros = mx.zeros((6,), dtype=mx.int32)
    assert _capped_prefix_match_lengths(zeros, 5)[1:].tolist() == [5, 4, 3, 2, 1]
    threes = mx.full((6,), 3, dtype=mx.int32)
    assert _capped_prefix_match_lengths(threes, 2)[1:].tolist() == [2, 2, 2, 2, 1]


def _smallest_capping_exponent(config: SamplerConfig) -> int | None:
    """Exhaustive, in integers: the smallest e <= the direct limit with m * b**e >= 2 * cap."""
    multiplier, base = _exact(config.dry_multiplier), _exact(config.dry_base)
    if multiplier < Fraction(2) ** -126:
        return None
    if base == 1:
        return 0
    left = multiplier.numerator * (2 * CAP).denominator  # m * b**e, scaled
    right = (2 * CAP).numerator * multiplier.denominator  # 2 * cap, scaled alike
    for exponent in range(_LONGEST_DIRECT_MATCH + 1):
        if left >= right:
            return exponent
        left *= base.numerator
        right *= base.denominator
    return None


@pytest.mark.parametrize("config", CONFIGS, ids=_name)
def test_the_saturation_length_is_allowed_plus_the_smallest_capping_exponent(
    config: SamplerConfig,
) -> None:
    exponent = _smallest_capping_exponent(config)
    expected = None
    if exponent is not None and config.dry_allowed_length + exponent <= _LONGEST_DIRECT_MATCH:
        expected = config.dry_allowed_length + exponent
    assert saturation_length(config, DRY_PENALTY_CAP) == expected


def _past_overflow(base: float) -> int:
    """An exponent a few steps past the one where base ** e exceeds float32's largest value."""
    return math.ceil(math.log(float(FLOAT32_MAX)) / math.log(base)) + 3


def test_every_match_from_the_saturation_length_on_gets_exactly_the_cap() -> None:
    checked = 0
    for config in CONFIGS:
        saturation = saturation_length(config, DRY_PENALTY_CAP)
        if saturation is None:
            continue
        base = _exact(config.dry_base)
        last = saturation + 2**20
        if base != 1:
            last = min(last, config.dry_allowed_length + _past_overflow(float(base)))
        # Every length up to past the overflow (float32 holds these integers exactly), then
        # powers of two up to histories no one keeps.
        lengths = mx.concatenate([
            mx.arange(saturation, last + 1, dtype=mx.float32),
            mx.array([2.0**k for k in range(21, 31)]),
        ])
        got = penalty_of_match_length(lengths, config)
        at_saturation = got[0].item()
        if base != 1:
            assert at_saturation == float(CAP), config
        assert (got == at_saturation).all().item(), config
        checked += 1
    assert checked > 100


# Configs whose penalty one step before the saturation length is still below the cap, so
# that a saturation length one short would show in the penalty; and some where it is not.
BOUNDARY_CONFIGS = [
    SamplerConfig(dry_multiplier=0.5, dry_base=10.0, dry_allowed_length=2),
    SamplerConfig(dry_multiplier=0.25, dry_base=3.0, dry_allowed_length=1,
                  dry_sequence_breakers=(9,)),
    SamplerConfig(dry_multiplier=0.8, dry_base=1.75, dry_allowed_length=2),
    SamplerConfig(dry_multiplier=1e-30, dry_base=2.0, dry_allowed_length=4),
    SamplerConfig(dry_multiplier=1.95e30, dry_base=1.0001, dry_allowed_length=1),
    SamplerConfig(dry_multiplier=3.0, dry_base=1.0, dry_allowed_length=3),
    SamplerConfig(dry_multiplier=3e38, dry_base=1e20, dry_allowed_length=2,
                  dry_penalty_last_n=40),
]


def _history_with_longest_match(length: int, rng: np.random.Generator) -> list[int]:
    """A history whose suffix occurred once before, `length` ids long exactly, followed by 6.

    The earlier copy is preceded by 0 and the suffix by 7, so no match is longer: 7 occurs
    only there. Ids 1 to 5 fill the copy and 30 ids of lead-in (cut by a window of 40), and
    9, a breaker in one config, precedes the 0.
    """
    copy = rng.integers(1, 6, length).tolist()
    return [*rng.integers(1, 6, 30).tolist(), 9, 0, *copy, 6, 7, *copy]


@pytest.mark.parametrize("config", BOUNDARY_CONFIGS, ids=_name)
def test_matches_around_the_saturation_length_get_the_definition_s_penalty(
    config: SamplerConfig,
) -> None:
    saturation = saturation_length(config, DRY_PENALTY_CAP)
    assert saturation is not None
    rng = np.random.default_rng(saturation)
    for length in (saturation - 1, saturation, saturation + 1):
        window = mx.array(_history_with_longest_match(length, rng), dtype=mx.int32)
        expected = dry_penalty_by_definition(window, config, 10)
        assert dry_penalty(window, config, 10).tolist() == expected.tolist(), length


def test_a_saturation_length_one_short_would_change_a_penalty() -> None:
    # The boundary test above can fail: one length before saturation, the penalty is not the cap.
    config = BOUNDARY_CONFIGS[0]
    saturation = saturation_length(config, DRY_PENALTY_CAP)
    assert saturation is not None
    below = penalty_of_match_length(mx.array([saturation - 1.0]), config)
    assert (below < float(CAP)).item()


def _z_by_definition(sequence: list[int]) -> list[int]:
    """Z[t], t >= 1: the longest L with sequence[t:t+L] == sequence[:L], by trying every L."""
    n = len(sequence)
    return [
        max(length for length in range(n - t + 1) if sequence[t : t + length] == sequence[:length])
        for t in range(1, n)
    ]


def test_prefix_doubling_gives_the_z_array() -> None:
    rng = np.random.default_rng(2)
    for sequence in (
        [0] * 9,  # every match runs to the last entry
        [1, 2] * 20 + [1],
        rng.integers(0, 2, 70).tolist(),
        rng.integers(0, 3, 33).tolist(),
    ):
        got = _prefix_match_lengths(mx.array(sequence, dtype=mx.int32))[1:].tolist()
        assert got == _z_by_definition(sequence), sequence
