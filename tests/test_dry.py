"""The CI proof that DRY's fast path gives exactly DRY's definition, bit for bit.

`specaccept.core.dry.dry_penalty_by_definition` is DRY as the spec defines it: every
candidate compared with the suffix at every lag, an n x n table. The chain runs
`dry.dry_penalty`, the same function with its match lengths from `specaccept.core.dry_fast`:
the Z-array of the reversed window, by a direct comparison cut at the saturation length
(short windows, and settings whose penalty reaches its cap within `_LONGEST_DIRECT_MATCH`)
or by prefix doubling (long windows with a base too close to 1 to saturate). This file is
the proof CI runs that the substitution changes nothing:

- each piece of the fast path against a definition of its own: prefix doubling and the
  direct comparison against the textbook Z-algorithm;
- the fast match lengths against the definition's, cut at the saturation length, and the
  penalties against the definition's, on random histories over small alphabets (long repeats
  and breakers in and at the end of the suffix are common) and adversarial ones (periodic,
  constant, NO_TOKEN ids among them) under every kind of DRY setting (hypothesis);
- long histories on both sides of the direct limit, on both paths.

tests/test_core_dry_paths.py proves the saturation length exact (the cut changes no
penalty); the golden vectors replay the chain in test_golden_vectors.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept.core.dry import (
    DRY_PENALTY_CAP,
    dry_penalty,
    dry_penalty_by_definition,
    dry_window,
    match_lengths,
    sequence_breakers,
)
from specaccept.core.dry_fast import (
    _LONGEST_DIRECT_MATCH,
    _capped_prefix_match_lengths,
    _prefix_match_lengths,
    saturated_match_lengths,
    saturation_length,
)
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.validation import NO_TOKEN

VOCAB = 7


def _z_array(sequence: list[int]) -> list[int]:
    """The textbook Z-algorithm, in Python: the longest L with s[t:t+L] == s[:L]."""
    n = len(sequence)
    z = [0] * n
    left = right = 0
    for t in range(1, n):
        if t < right:
            z[t] = min(right - t, z[t - left])
        while t + z[t] < n and sequence[z[t]] == sequence[t + z[t]]:
            z[t] += 1
        if t + z[t] > right:
            left, right = t, t + z[t]
    return z


histories = st.integers(1, 3).flatmap(
    lambda alphabet: st.lists(st.integers(0, alphabet), min_size=0, max_size=90)
)


@settings(max_examples=300, deadline=None)
@given(histories)
def test_prefix_match_lengths_is_the_z_array(sequence: list[int]) -> None:
    if not sequence:
        return
    got = np.array(_prefix_match_lengths(mx.array(sequence, dtype=mx.int32))).tolist()
    assert got[1:] == _z_array(sequence)[1:]


@settings(max_examples=200, deadline=None)
@given(histories, st.integers(1, 100))
def test_the_direct_comparison_is_the_z_array_cut_at_its_cap(sequence: list[int], cap: int) -> None:
    if not sequence:
        return
    cap = min(cap, len(sequence))
    got = np.array(_capped_prefix_match_lengths(mx.array(sequence, dtype=mx.int32), cap)).tolist()
    assert got[1:] == [min(z, cap) for z in _z_array(sequence)[1:]]


# Multipliers from subnormal (no saturation) to float32's largest, bases from 1 (saturated
# at the allowed length) through just above 1 to float32's largest (pow overflows at once).
MULTIPLIERS = [2.0**-126, 1e-30, 0.5, 1.0, 3.0, 1e30, 3e38]
BASES = [1.0, 1.0001, 1.75, 2.0, 10.0, 1e10, 1e20, 3.4028234663852886e38]
configs = st.builds(
    SamplerConfig,
    dry_multiplier=st.sampled_from(MULTIPLIERS),
    dry_base=st.sampled_from(BASES),
    dry_allowed_length=st.integers(1, 4),
    dry_penalty_last_n=st.sampled_from([-1, 1, 2, 5, 40]),
    dry_sequence_breakers=st.lists(st.integers(0, VOCAB - 1), max_size=2).map(tuple),
)


# Adversarial histories: a period repeated (matches as long as the window), one id
# throughout, and any of these with NO_TOKEN ids (padding the validation maps to -1: a
# breaker) at chosen positions.
periodic_histories = st.tuples(
    st.lists(st.integers(0, 3), min_size=1, max_size=6), st.integers(1, 40),
    st.lists(st.integers(0, 3), max_size=4),
).map(lambda drawn: (drawn[0] * drawn[1] + drawn[2])[:150])
constant_histories = st.tuples(st.integers(0, VOCAB - 1), st.integers(0, 120)).map(
    lambda drawn: [drawn[0]] * drawn[1]
)
unpadded = st.one_of(histories, periodic_histories, constant_histories)
padded = st.tuples(unpadded, st.sets(st.integers(0, 150), max_size=3)).map(
    lambda drawn: [NO_TOKEN if i in drawn[1] else token for i, token in enumerate(drawn[0])]
)
adversarial_histories = st.one_of(unpadded, padded)


@settings(max_examples=300, deadline=None)
@given(adversarial_histories, configs)
def test_the_fast_match_lengths_are_the_definition_s_cut_at_saturation(
    history: list[int], config: SamplerConfig
) -> None:
    window = dry_window(mx.array(history, dtype=mx.int32), config)
    if window.shape[0] < 2:
        return
    is_breaker = sequence_breakers(window, config)
    by_definition = match_lengths(window, is_breaker)
    saturation = saturation_length(config, DRY_PENALTY_CAP)
    expected = by_definition if saturation is None else mx.minimum(by_definition, saturation)
    got = saturated_match_lengths(window, is_breaker, config, DRY_PENALTY_CAP)
    assert got.dtype == expected.dtype == mx.float32
    assert got.tolist() == expected.tolist()


@settings(max_examples=400, deadline=None)
@given(adversarial_histories, configs)
def test_the_fast_penalty_equals_the_definition(
    history: list[int], config: SamplerConfig
) -> None:
    window = mx.array(history, dtype=mx.int32)
    fast = dry_penalty(window, config, VOCAB)
    slow = dry_penalty_by_definition(window, config, VOCAB)
    assert fast.tolist() == slow.tolist()


def test_long_random_and_periodic_histories_agree() -> None:
    rng = np.random.default_rng(0)
    config = SamplerConfig(dry_multiplier=0.8, dry_base=1.75, dry_allowed_length=2,
                           dry_sequence_breakers=(5,))
    for history in (
        rng.integers(0, VOCAB, 700),
        np.tile(rng.integers(0, VOCAB, 13), 50),  # a long repeat: matches of hundreds
        np.concatenate([np.tile([1, 2, 3], 200), [5], np.tile([1, 2, 3], 30)]),
    ):
        window = mx.array(history.tolist(), dtype=mx.int32)
        assert (dry_penalty(window, config, VOCAB).tolist()
                == dry_penalty_by_definition(window, config, VOCAB).tolist())


# Long histories: a random lead-in past the direct limit, then a few repeated pieces, so
# that matches of hundreds occur. A base close to 1 leaves no saturation within the limit
# (prefix doubling); the other settings cut at their saturation length.
pieces = st.lists(st.integers(0, 3), min_size=1, max_size=12)
long_histories = st.tuples(
    st.integers(0, 2**32 - 1),
    st.lists(st.tuples(pieces, st.integers(1, 120)), min_size=1, max_size=4),
).map(lambda drawn: [
    *np.random.default_rng(drawn[0]).integers(0, 4, 520).tolist(),
    *(token for piece, times in drawn[1] for token in piece * times),
][-1100:])
long_configs = st.builds(
    SamplerConfig,
    dry_multiplier=st.sampled_from([1e-30, 0.8, 1.95e30]),
    dry_base=st.sampled_from([1.0001, 1.01, 1.0, 1.75, 10.0]),
    dry_allowed_length=st.sampled_from([1, 2, 30]),
    dry_penalty_last_n=st.sampled_from([-1, -1, 513, 514, 900]),
    dry_sequence_breakers=st.sampled_from([(), (3,), (0, 2)]),
)


@settings(max_examples=40, deadline=None)
@given(long_histories, long_configs)
def test_long_windows_agree_on_both_paths(history: list[int], config: SamplerConfig) -> None:
    window = mx.array(history, dtype=mx.int32)
    assert (dry_penalty(window, config, VOCAB).tolist()
            == dry_penalty_by_definition(window, config, VOCAB).tolist())


def test_both_sides_of_the_direct_limit_agree() -> None:
    # Whole-history windows of n - 1 = the limit (direct, uncut) and one more (doubling), on
    # a setting that never saturates, and saturation lengths at the limit and one past it.
    unsaturated = SamplerConfig(dry_multiplier=0.8, dry_base=1.0001, dry_allowed_length=2)
    at_limit = SamplerConfig(dry_multiplier=2.0, dry_base=1.0,
                             dry_allowed_length=_LONGEST_DIRECT_MATCH)
    past_limit = SamplerConfig(dry_multiplier=2.0, dry_base=1.0,
                               dry_allowed_length=_LONGEST_DIRECT_MATCH + 1)
    assert saturation_length(unsaturated, DRY_PENALTY_CAP) is None
    assert saturation_length(at_limit, DRY_PENALTY_CAP) == _LONGEST_DIRECT_MATCH
    assert saturation_length(past_limit, DRY_PENALTY_CAP) is None
    rng = np.random.default_rng(1)
    period = rng.integers(0, VOCAB, 9).tolist()
    for n in (_LONGEST_DIRECT_MATCH + 1, _LONGEST_DIRECT_MATCH + 2, 2 * _LONGEST_DIRECT_MATCH + 9):
        window = mx.array((period * n)[:n], dtype=mx.int32)
        for config in (unsaturated, at_limit, past_limit):
            assert (dry_penalty(window, config, VOCAB).tolist()
                    == dry_penalty_by_definition(window, config, VOCAB).tolist()), (n, config)
