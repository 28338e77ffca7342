"""DRY's fast match lengths give exactly what the quadratic definition gives.

The oracle (`dry_oracle.quadratic_dry_penalty`) is the n x n comparison specaccept
shipped before; hypothesis draws histories from small alphabets (so that long repeats,
breakers inside and at the end of the suffix, and periodic runs are common) and every
DRY setting, and the two penalties must agree bit for bit. Both ways of computing the
match lengths are held to it: the direct comparison cut at the saturation length (short
windows, and settings whose penalty reaches its cap within `_LONGEST_DIRECT_MATCH`) and
prefix doubling (long windows with a base too close to 1 to saturate). The golden vectors
replay the same function in test_golden_vectors; test_core_dry_paths checks the cut.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dry_oracle import quadratic_dry_penalty
from specaccept.core.sampling import (
    _LONGEST_DIRECT_MATCH,
    SamplerConfig,
    _capped_prefix_match_lengths,
    _dry_penalty,
    _dry_saturation_length,
    _prefix_match_lengths,
)

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


@settings(max_examples=400, deadline=None)
@given(histories, configs)
def test_the_z_array_penalty_equals_the_quadratic_definition(
    history: list[int], config: SamplerConfig
) -> None:
    window = mx.array(history, dtype=mx.int32)
    fast = _dry_penalty(window, config, VOCAB)
    slow = quadratic_dry_penalty(window, config, VOCAB)
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
        assert (_dry_penalty(window, config, VOCAB).tolist()
                == quadratic_dry_penalty(window, config, VOCAB).tolist())


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
    assert (_dry_penalty(window, config, VOCAB).tolist()
            == quadratic_dry_penalty(window, config, VOCAB).tolist())


def test_both_sides_of_the_direct_limit_agree() -> None:
    # Whole-history windows of n - 1 = the limit (direct, uncut) and one more (doubling), on
    # a setting that never saturates, and saturation lengths at the limit and one past it.
    unsaturated = SamplerConfig(dry_multiplier=0.8, dry_base=1.0001, dry_allowed_length=2)
    at_limit = SamplerConfig(dry_multiplier=2.0, dry_base=1.0,
                             dry_allowed_length=_LONGEST_DIRECT_MATCH)
    past_limit = SamplerConfig(dry_multiplier=2.0, dry_base=1.0,
                               dry_allowed_length=_LONGEST_DIRECT_MATCH + 1)
    assert _dry_saturation_length(unsaturated) is None
    assert _dry_saturation_length(at_limit) == _LONGEST_DIRECT_MATCH
    assert _dry_saturation_length(past_limit) is None
    rng = np.random.default_rng(1)
    period = rng.integers(0, VOCAB, 9).tolist()
    for n in (_LONGEST_DIRECT_MATCH + 1, _LONGEST_DIRECT_MATCH + 2, 2 * _LONGEST_DIRECT_MATCH + 9):
        window = mx.array((period * n)[:n], dtype=mx.int32)
        for config in (unsaturated, at_limit, past_limit):
            assert (_dry_penalty(window, config, VOCAB).tolist()
                    == quadratic_dry_penalty(window, config, VOCAB).tolist()), (n, config)
