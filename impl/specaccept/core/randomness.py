"""The uniforms of a seeded run, as a pure function of (seed, position, slot).

Every random decision of a generation run reads one uniform named by the
absolute output position it decides and a slot:

| slot | name | consumed by |
| ---- | ---- | ----------- |
| 0 | `ACCEPT` | the accept test (`u_accept`) of the position's draft |
| 1 | `SAMPLE` | the target's draw (`u_sample`): sampler-match, residual, bonus |
| 2 | `DRAFT` | the drafter's draw of the position's draft token |

Target-only sampling reads slot 1 at each position too, so under
sampler-match a speculative run emits the very stream target-only sampling
emits with the same seed. The hash is SplitMix64, chosen because it is a few
lines of 64-bit integer arithmetic in any language; the uniform keeps the top
24 bits so that it is exact in float32.
"""

from __future__ import annotations

from specaccept.core import validation

__all__ = ["ACCEPT", "DRAFT", "SAMPLE", "position_uniform", "splitmix64"]

ACCEPT = 0
SAMPLE = 1
DRAFT = 2
_SLOTS = 4  # room for one more slot without changing any existing stream

_MASK64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """One SplitMix64 output for the 64-bit state `x` (Steele, Lea and Flood, 2014).

    >>> hex(splitmix64(0))
    '0xe220a8397b1dcdaf'
    """
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def position_uniform(seed: int, position: int, slot: int) -> float:
    """The uniform in [0, 1) that decides `slot` at output `position` of a run seeded `seed`.

    ``u = (splitmix64(splitmix64(seed) ^ (4 * position + slot)) >> 40) / 2**24``,
    a multiple of 2**-24, so float32 holds it exactly.

    >>> position_uniform(1234, 0, SAMPLE) == position_uniform(1234, 0, SAMPLE)
    True
    >>> 0.0 <= position_uniform(0, 7, ACCEPT) < 1.0
    True
    """
    seed = validation.integer("seed", seed)
    position = validation.integer("position", position)
    slot = validation.integer("slot", slot)
    if not 0 <= seed <= _MASK64:
        raise ValueError(f"seed must lie in [0, 2**64), got {seed}")
    if position < 0:
        raise ValueError(f"position must be >= 0, got {position}")
    if not 0 <= slot < _SLOTS:
        raise ValueError(f"slot must lie in [0, {_SLOTS}), got {slot}")
    word = splitmix64(splitmix64(seed) ^ ((_SLOTS * position + slot) & _MASK64))
    return (word >> 40) / float(1 << 24)
