"""The uniforms of a seeded run, against the formula a port implements from the docstring.

A port replays a seeded run bit for bit only if it derives the same uniform for
every (seed, position, slot); the statistical tests cannot see a wrong slot
layout or a lost bit, so the formula is recomputed here independently.
"""

from __future__ import annotations

import pytest

from specaccept.core.randomness import (
    ACCEPT,
    DRAFT,
    SAMPLE,
    position_uniform,
    round_uniform,
    round_uniforms,
    splitmix64,
)

MASK64 = (1 << 64) - 1


def reference_splitmix64(state: int) -> int:
    """SplitMix64 (Steele, Lea and Flood, 2014), from its published constants."""
    z = (state + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def reference_uniform(seed: int, position: int, slot: int) -> float:
    word = reference_splitmix64(reference_splitmix64(seed) ^ (4 * position + slot))
    return (word >> 40) / 2**24


def reference_round_uniform(seed: int, round_position: int, offset: int, slot: int) -> float:
    inner = reference_splitmix64(reference_splitmix64(seed) ^ (4 * round_position + slot))
    return (reference_splitmix64(inner ^ offset) >> 40) / 2**24


def test_the_slots_are_the_documented_ones() -> None:
    assert (ACCEPT, SAMPLE, DRAFT) == (0, 1, 2)


def test_splitmix64_matches_the_published_sequence() -> None:
    assert splitmix64(0) == 0xE220A8397B1DCDAF  # the first output for state 0
    for state in (1, 12345, 2**63, MASK64):
        assert splitmix64(state) == reference_splitmix64(state)


def test_position_uniform_is_the_documented_formula() -> None:
    for seed in (0, 1, 1234, MASK64):
        for position in range(64):
            for slot in (ACCEPT, SAMPLE, DRAFT, 3):
                assert position_uniform(seed, position, slot) == reference_uniform(
                    seed, position, slot
                )


def test_uniforms_are_distinct_24_bit_values_over_the_whole_interval() -> None:
    values = [position_uniform(7, position, slot)
              for position in range(256) for slot in (ACCEPT, SAMPLE, DRAFT)]
    assert len(set(values)) == len(values)  # no two decisions share a uniform
    assert all(0.0 <= v < 1.0 and (v * 2**24).is_integer() for v in values)
    assert min(values) < 0.01 and max(values) > 0.99


def test_round_uniform_is_the_documented_formula() -> None:
    for seed in (0, 1234, MASK64):
        for start in range(16):
            for offset in range(9):
                for slot in (ACCEPT, DRAFT):
                    assert round_uniform(seed, start, offset, slot) == reference_round_uniform(
                        seed, start, offset, slot
                    )


def test_no_two_rounds_share_a_test_or_draft_uniform() -> None:
    # The keys (round start, offset) of rounds that start at different positions differ, so
    # the values do: unlike absolute keying, where start n + 1 at offset 0 re-reads n's offset 1.
    values = {(n, i, slot): round_uniform(99, n, i, slot)
              for n in range(64) for i in range(8) for slot in (ACCEPT, DRAFT)}
    assert len(set(values.values())) == len(values)
    samples = {position_uniform(99, m, SAMPLE) for m in range(64 + 8)}
    assert not samples & set(values.values())


def test_round_uniforms_lays_out_the_verifiers_argument() -> None:
    u = round_uniforms(5, 10, 3)
    assert u.draft == [round_uniform(5, 10, j, DRAFT) for j in range(3)]
    assert u.verify == [[round_uniform(5, 10, i, ACCEPT), position_uniform(5, 10 + i, SAMPLE)]
                        for i in range(4)]
    assert round_uniforms(5, 10, 0) == ([], [u.verify[0]])


@pytest.mark.parametrize(
    ("call", "message"),
    [(lambda: round_uniform(0, 0, 0, SAMPLE), "slot must be ACCEPT"),
     (lambda: round_uniform(0, -1, 0, ACCEPT), "round_position must lie in"),
     (lambda: round_uniform(0, 0, 2**62, DRAFT), "offset must lie in"),
     (lambda: round_uniform(2**64, 0, 0, DRAFT), "seed must lie in"),
     (lambda: round_uniforms(0, 0, -1), "num_drafts must be >= 0"),
     (lambda: position_uniform(0, 2**62, SAMPLE), "position must lie in")],
)
def test_bad_keys_are_refused_naming_the_argument(call: object, message: str) -> None:
    assert callable(call)
    with pytest.raises(ValueError, match=message):
        call()
