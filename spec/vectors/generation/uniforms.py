"""The ``position_uniform`` and ``round_uniform`` vectors: the uniforms of a seeded run.
"""

from __future__ import annotations

from fractions import Fraction

from specaccept.core import randomness

from .common import ErrorCase, Vector, check_equal, vector

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
