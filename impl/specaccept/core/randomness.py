"""The uniforms of a seeded run: which uniform decides what, as pure functions of the seed.

Every random decision of a generation run reads one uniform, named by a key:

- slot 0, `ACCEPT`: the accept test of a draft (``u_accept``, block verification's
  ``η``), keyed by (the round's first output position, the draft's offset in the round);
- slot 1, `SAMPLE`: the target's draw (``u_sample``: sampler-match, residual, bonus,
  target-only), keyed by the absolute output position it decides;
- slot 2, `DRAFT`: the drafter's draw of a draft, keyed like `ACCEPT`.

The accept and draft uniforms are fresh in every round: a round starting at output
position n reads keys (n, 0 .. k), and no later round starts at n. Block verification
needs it, since its kept length reads the tests of every drafted position, rejected
ones included: keyed by absolute position, the next round would re-read uniforms the
last one conditioned on. The target's draw stays on the absolute position, so a
sampler-match run emits the stream target-only sampling emits with the same seed.
The hash is SplitMix64, a few lines of 64-bit integer arithmetic in any language; a
uniform keeps the top 24 bits of a word, so float32 holds it exactly.
"""

from __future__ import annotations

from typing import NamedTuple

from specaccept.core import validation

__all__ = [
    "ACCEPT",
    "DRAFT",
    "SAMPLE",
    "RoundKeys",
    "RoundUniforms",
    "UniformKey",
    "position_uniform",
    "round_keys",
    "round_uniform",
    "round_uniforms",
    "splitmix64",
    "uniform",
]

ACCEPT = 0
SAMPLE = 1
DRAFT = 2
SLOTS = 4
"""Slot 3 is reserved, so a new decision can get its own stream without moving any other."""
ROUND_SLOTS = (ACCEPT, DRAFT)
"""The slots keyed by (round, offset); `SAMPLE` alone is keyed by absolute position."""
UNIFORM_BITS = 24
"""A uniform is a multiple of 2**-24: exact in float32."""

MASK64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """One SplitMix64 output for the 64-bit state `x` (Steele, Lea and Flood, 2014).

    >>> hex(splitmix64(0))
    '0xe220a8397b1dcdaf'
    """
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def _word_to_uniform(word: int) -> float:
    return (word >> (64 - UNIFORM_BITS)) / float(1 << UNIFORM_BITS)


def _check_seed(seed: int) -> int:
    seed = validation.integer("seed", seed)
    if not 0 <= seed <= MASK64:
        raise ValueError(f"seed must lie in [0, 2**64), got {seed}")
    return seed


def _check_position(name: str, position: int) -> int:
    position = validation.integer(name, position)
    if not 0 <= position < 2**62:
        raise ValueError(f"{name} must lie in [0, 2**62), got {position}")
    return position


def _position_word(seed: int, position: int, slot: int) -> int:
    return splitmix64(splitmix64(seed) ^ (SLOTS * position + slot))


def position_uniform(seed: int, position: int, slot: int) -> float:
    """The uniform in [0, 1) keyed by (`position`, `slot`) in a run seeded `seed`.

    ``u = (splitmix64(splitmix64(seed) ^ (4 * position + slot)) >> 40) / 2**24``,
    a multiple of 2**-24, so float32 holds it exactly. A run reads it with slot
    `SAMPLE` for the target's draw at absolute output `position`; the round-keyed
    slots go through `round_uniform`.

    >>> position_uniform(1234, 0, SAMPLE) == position_uniform(1234, 0, SAMPLE)
    True
    >>> 0.0 <= position_uniform(0, 7, ACCEPT) < 1.0
    True
    """
    seed = _check_seed(seed)
    position = _check_position("position", position)
    slot = validation.integer("slot", slot)
    if not 0 <= slot < SLOTS:
        raise ValueError(f"slot must lie in [0, {SLOTS}), got {slot}")
    return _word_to_uniform(_position_word(seed, position, slot))


def round_uniform(seed: int, round_position: int, offset: int, slot: int) -> float:
    """The uniform of `slot` at `offset` in the round that starts at output `round_position`.

    ``u = (splitmix64(splitmix64(splitmix64(seed) ^ (4 * round_position + slot)) ^ offset)
    >> 40) / 2**24``: the position word of (round_position, slot), mixed once more with
    the offset. Rounds start at distinct positions, so no two rounds share a key.

    >>> round_uniform(1234, 5, 0, ACCEPT) == round_uniform(1234, 5, 0, ACCEPT)
    True
    >>> round_uniform(1234, 5, 1, ACCEPT) == round_uniform(1234, 6, 0, ACCEPT)
    False
    """
    seed = _check_seed(seed)
    round_position = _check_position("round_position", round_position)
    offset = _check_position("offset", offset)
    slot = validation.integer("slot", slot)
    if slot not in ROUND_SLOTS:
        raise ValueError(
            f"slot must be ACCEPT ({ACCEPT}) or DRAFT ({DRAFT}), the round-keyed slots, got "
            f"{slot}: the target's draw (SAMPLE) is keyed by absolute position"
        )
    return _word_to_uniform(splitmix64(_position_word(seed, round_position, slot) ^ offset))


class UniformKey(NamedTuple):
    """The name of one uniform: a slot, and the position (and offset) it is keyed by."""

    slot: int
    position: int
    """The absolute output position for `SAMPLE`; the round's first position otherwise."""
    offset: int | None
    """The offset in the round for the round-keyed slots; None for `SAMPLE`."""


def uniform(seed: int, key: UniformKey) -> float:
    """The value of the uniform named `key` in a run seeded `seed`.

    >>> uniform(7, UniformKey(SAMPLE, 3, None)) == position_uniform(7, 3, SAMPLE)
    True
    >>> uniform(7, UniformKey(DRAFT, 3, 1)) == round_uniform(7, 3, 1, DRAFT)
    True
    """
    if key.offset is None:
        return position_uniform(seed, key.position, key.slot)
    return round_uniform(seed, key.position, key.offset, key.slot)


class RoundKeys(NamedTuple):
    """The keys of every uniform one round of k drafts may read, in the verifiers' layout."""

    draft: list[UniformKey]
    """The k keys of the drafts; entry j draws draft j (`DRAFT`, offset j)."""
    verify: list[list[UniformKey]]
    """k + 1 rows ``[accept key, sample key]``: row i tests draft i (`ACCEPT`, offset i)
    and draws the target's token at output position round_position + i (`SAMPLE`)."""


def round_keys(round_position: int, num_drafts: int) -> RoundKeys:
    """The keys a round starting at output `round_position` with `num_drafts` drafts reads.

    >>> keys = round_keys(3, 1)
    >>> keys.draft
    [UniformKey(slot=2, position=3, offset=0)]
    >>> keys.verify[1]
    [UniformKey(slot=0, position=3, offset=1), UniformKey(slot=1, position=4, offset=None)]
    """
    round_position = _check_position("round_position", round_position)
    num_drafts = validation.integer("num_drafts", num_drafts)
    if num_drafts < 0:
        raise ValueError(f"num_drafts must be >= 0, got {num_drafts}")
    draft = [UniformKey(DRAFT, round_position, j) for j in range(num_drafts)]
    verify = [
        [UniformKey(ACCEPT, round_position, i), UniformKey(SAMPLE, round_position + i, None)]
        for i in range(num_drafts + 1)
    ]
    return RoundKeys(draft, verify)


class RoundUniforms(NamedTuple):
    """Every uniform one round of k drafts may read, in the layout the verifiers take."""

    draft: list[float]
    """The k values of the drafts; entry j draws draft j (`DRAFT`, offset j)."""
    verify: list[list[float]]
    """k + 1 rows ``[u_accept, u_sample]``: row i tests draft i (`ACCEPT`, offset i) and
    draws the target's token at output position round_position + i (`SAMPLE`)."""


def round_uniforms(seed: int, round_position: int, num_drafts: int) -> RoundUniforms:
    """The values of `round_keys(round_position, num_drafts)` in a run seeded `seed`.

    A round with no drafts (the last target step of a run) reads row 0 alone.

    >>> u = round_uniforms(1234, 3, 2)
    >>> len(u.draft), len(u.verify)
    (2, 3)
    >>> u.verify[1] == [round_uniform(1234, 3, 1, ACCEPT), position_uniform(1234, 4, SAMPLE)]
    True
    """
    seed = _check_seed(seed)
    keys = round_keys(round_position, num_drafts)
    return RoundUniforms(
        [uniform(seed, key) for key in keys.draft],
        [[uniform(seed, key) for key in row] for row in keys.verify],
    )
