"""DRY's Z-array implementation gives exactly what the quadratic definition gives.

The oracle (`dry_oracle.quadratic_dry_penalty`) is the n x n comparison specaccept
shipped before; hypothesis draws histories from small alphabets (so that long repeats,
breakers inside and at the end of the suffix, and periodic runs are common) and every
DRY setting, and the two penalties must agree bit for bit. The golden vectors replay the
same function in test_golden_vectors.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dry_oracle import quadratic_dry_penalty
from specaccept.core.sampling import SamplerConfig, _dry_penalty, _prefix_match_lengths

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


configs = st.builds(
    SamplerConfig,
    dry_multiplier=st.sampled_from([0.5, 1.0, 3.0]),
    dry_base=st.sampled_from([1.0, 1.75, 2.0, 1e10]),
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
