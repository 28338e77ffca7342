"""The uniforms of a seeded run, against the formula a port implements from the docstring.

A port replays a seeded run bit for bit only if it derives the same uniform for
every (seed, position, slot); the statistical tests cannot see a wrong slot
layout or a lost bit, so the formula is recomputed here independently.
"""

from __future__ import annotations

from specaccept.core.randomness import ACCEPT, DRAFT, SAMPLE, position_uniform, splitmix64

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
