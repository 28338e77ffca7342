"""Lemma 12, grammar-constrained verification: the checks of ``proofs/grammar_constrained.md``.

The masked target ``p_masked`` is the target's law with the ids the grammar forbids
removed and the rest renormalised; the drafter may or may not know the grammar, so its
drafts may lie outside it. The library's stochastic rule, handed ``p_masked``, must emit
``p_masked`` exactly; the force-reject variant (an out-of-grammar draft replaced by a draw
from ``p_masked`` instead of the residual) must not, and its distance is computed exactly.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from fractions import Fraction

import mlx.core as mx
import pytest

from proofs.exact_rounds import (
    DRAFTER,
    DRAFTERS,
    PROMPTS,
    STOCHASTIC,
    TARGET,
    TARGETS,
    ZERO,
    Dist,
    Rule,
    Table,
    Tokens,
    acceptance,
    as_law,
    assert_lossless,
    context_index,
    emitted_token_law,
    is_lossless,
    position_law,
    round_law,
    sum_min,
)
from specaccept import accept_draft_token, residual_resample, sample_from_distribution

Mask = tuple[bool, ...]


def is_dyadic(x: Fraction) -> bool:
    """True when the denominator is a power of two (float32 holds the small ones exactly)."""
    return x.denominator & (x.denominator - 1) == 0


def masked(p: Dist, mask: Mask) -> Dist | None:
    """p restricted to the ids the mask allows, renormalised; None when the grammar leaves the
    target no mass or the renormalised law is not dyadic (the exact method needs float32 to
    hold every entry)."""
    mass = sum((x for x, allowed in zip(p, mask, strict=True) if allowed), ZERO)
    if mass == 0:
        return None
    out = tuple(x / mass if allowed else ZERO for x, allowed in zip(p, mask, strict=True))
    return out if all(is_dyadic(x) for x in out) else None


MASKS: tuple[Mask, ...] = tuple(m for m in itertools.product((False, True), repeat=4) if any(m))

MASKED_PAIRS: tuple[tuple[Dist, Dist], ...] = tuple(
    (p_masked, q)
    for p in TARGETS for mask in MASKS if (p_masked := masked(p, mask)) is not None
    for q in DRAFTERS
)
"""Every (p_masked, q) of the pools: q often puts mass on ids the grammar forbids."""


def outside_grammar_mass(p_masked: Dist, q: Dist) -> Fraction:
    return sum((b for a, b in zip(p_masked, q, strict=True) if a == 0), ZERO)


def _force_reject_to_masked_target(
    p: mx.array, q: mx.array, token: mx.array, u_accept: mx.array, u_sample: mx.array
) -> tuple[mx.array, mx.array]:
    """The wrong variant: a draft the grammar forbids (p_masked(t) = 0) is force-rejected and
    replaced by a draw from p_masked; other rejections draw from the residual."""
    accepted = accept_draft_token(p, q, token, u_accept)
    forbidden = mx.take_along_axis(p, token[..., None], axis=-1)[..., 0] == 0
    replacement = mx.where(forbidden, sample_from_distribution(p, u_sample),
                           residual_resample(p, q, u_sample))
    return accepted, mx.where(accepted, token, replacement)


FORCE_REJECT_TO_MASKED_TARGET = Rule(
    "force-reject-to-masked-target", _force_reject_to_masked_target, sample_from_distribution
)


def rational_emitted_law(
    p: Sequence[Fraction], q: Sequence[Fraction], *, replacement: Callable[[int], list[Fraction]]
) -> list[Fraction]:
    """The exact law of the emitted token when t ~ q, t is accepted with probability
    min(1, p(t) / q(t)) (never when p(t) = 0), and a rejected t is replaced by a draw from
    ``replacement(t)``: arithmetic on the rule's formulas, with no float in it."""
    law = [ZERO] * len(p)
    for t, q_t in enumerate(q):
        if q_t == 0:
            continue
        keep = min(Fraction(1), p[t] / q_t) if p[t] > 0 else ZERO
        law[t] += q_t * keep
        for y, r_y in enumerate(replacement(t)):
            law[y] += q_t * (1 - keep) * r_y
    return law


def rational_residual(p: Sequence[Fraction], q: Sequence[Fraction]) -> list[Fraction]:
    excess = [max(a - b, ZERO) for a, b in zip(p, q, strict=True)]
    mass = sum(excess, ZERO)
    return list(p) if mass == 0 else [e / mass for e in excess]


def total_variation(a: Sequence[Fraction], b: Sequence[Fraction]) -> Fraction:
    return sum((abs(x - y) for x, y in zip(a, b, strict=True)), ZERO) / 2


def test_the_pools_put_draft_mass_outside_the_grammar() -> None:
    """The premise of the checks below: many pairs draft ids the masked target forbids, some
    of them with most of the drafter's mass."""
    outside = [outside_grammar_mass(p, q) for p, q in MASKED_PAIRS]
    assert len(MASKED_PAIRS) >= 100
    assert sum(1 for m in outside if m > 0) >= 50
    assert max(outside) == 1


@pytest.mark.parametrize("pair", MASKED_PAIRS, ids=lambda pq: f"{pq[0]}|{pq[1]}")
def test_the_library_emits_the_masked_target_whatever_the_drafter(pair: tuple[Dist, Dist]) -> None:
    """Lemma 12: rejection sampling against p_masked emits p_masked exactly and accepts
    sum min(p_masked, q), drafts outside the grammar included (the library, integrated over
    its uniforms)."""
    p_masked, q = pair
    law = position_law(STOCHASTIC, p_masked, q)
    assert emitted_token_law(law) == as_law(p_masked)
    assert acceptance(law) == sum_min(p_masked, q)
    assert not any(ok and p_masked[t] == 0 for (ok, t) in law if law[(ok, t)]), (
        "a draft the grammar forbids was accepted")


def test_force_reject_to_masked_target_is_caught_on_the_library() -> None:
    """The wrong variant, run as float32 code over the same pairs: it emits p_masked exactly
    when q puts no mass outside the grammar (then it never fires) and misses it on every pair
    where it does put mass there and the residual differs from p_masked."""
    caught = 0
    for p_masked, q in MASKED_PAIRS:
        law = emitted_token_law(position_law(FORCE_REJECT_TO_MASKED_TARGET, p_masked, q))
        differs = tuple(rational_residual(p_masked, q)) != p_masked
        if outside_grammar_mass(p_masked, q) == 0 or not differs:
            assert law == as_law(p_masked)
        else:
            assert law != as_law(p_masked)
            caught += 1
    assert caught >= 30


def test_the_force_reject_variant_has_total_variation_one_tenth() -> None:
    """The issue's example, exactly: p_masked = (1/2, 1/2, 0), q = (1/10, 3/10, 6/10). The
    force-reject variant emits (2/5, 3/5, 0), at total variation 1/10 from p_masked; the
    residual rule emits p_masked."""
    p = [Fraction(1, 2), Fraction(1, 2), ZERO]
    q = [Fraction(1, 10), Fraction(3, 10), Fraction(6, 10)]
    right = rational_emitted_law(p, q, replacement=lambda t: rational_residual(p, q))
    wrong = rational_emitted_law(
        p, q, replacement=lambda t: list(p) if p[t] == 0 else rational_residual(p, q))
    assert right == p
    assert wrong == [Fraction(2, 5), Fraction(3, 5), ZERO]
    assert total_variation(wrong, p) == Fraction(1, 10)


def test_the_force_reject_variants_distance_is_the_formula_on_every_pair() -> None:
    """Closed form of the variant's bias: it replaces a forbidden draft's mass m (the
    drafter's mass outside the grammar) by p_masked where the residual would go, so its law
    is p_masked + m (p_masked - r), at total variation m * TV(p_masked, r). Checked against
    the library's own float32 variant, integrated exactly."""
    for p_masked, q in MASKED_PAIRS:
        m = outside_grammar_mass(p_masked, q)
        r = rational_residual(p_masked, q)
        law = emitted_token_law(position_law(FORCE_REJECT_TO_MASKED_TARGET, p_masked, q))
        got = [law.get((x,), ZERO) for x in range(len(p_masked))]
        assert got == [a + m * (a - b) for a, b in zip(p_masked, r, strict=True)]
        assert total_variation(got, p_masked) == m * total_variation(p_masked, r)


def _masked_table(base: Table, salt: int) -> Table:
    """A grammar that depends on the whole context: each context masks `base` with one of
    MASKS, from a context-dependent start: the first whose masked law is dyadic, removes some
    of the target's mass and keeps two ids or more (a one-hot masked law would leave nothing
    for a wrong variant to get wrong), else the first that is dyadic."""

    def lookup(context: Tokens) -> Dist:
        p = base(context)
        start = context_index(context, salt) % len(MASKS)
        candidates = [m for mask in MASKS[start:] + MASKS[:start]
                      if (m := masked(p, mask)) is not None]
        support = sum(1 for x in p if x)
        wide = [m for m in candidates if 2 <= sum(1 for x in m if x) < support]
        return (wide or candidates)[0]

    return lookup


MASKED_TARGET = _masked_table(TARGET, salt=11)
GRAMMAR_PROMPTS: tuple[Tokens, ...] = (*PROMPTS, (0,), (2,), (3,))
GRAMMAR_PROMPTS_THAT_CATCH: tuple[Tokens, ...] = ((3, 0), (0,))
"""Prompts whose first masked row keeps two ids or more and differs from the drafter's, so
the force-reject variant has something to get wrong (after (), (1,) and (3,) the grammar
leaves one id)."""


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_grammar_constrained_round_emits_the_masked_target_law(k: int) -> None:
    """Lemma 12 over whole rounds: a grammar that changes with the context, a drafter that
    ignores it, and the stream is the masked target's autoregressive law exactly; the
    force-reject variant is not."""
    for prefix in GRAMMAR_PROMPTS:
        law = round_law(STOCHASTIC, MASKED_TARGET, DRAFTER, prefix, k)
        assert_lossless(law, MASKED_TARGET, prefix, k + 1)
    for prefix in GRAMMAR_PROMPTS_THAT_CATCH:
        wrong = round_law(FORCE_REJECT_TO_MASKED_TARGET, MASKED_TARGET, DRAFTER, prefix, k)
        assert not is_lossless(wrong, MASKED_TARGET, prefix, k + 1), prefix


def test_the_drafter_mass_outside_the_grammar_costs_acceptance_only() -> None:
    """What a drafter that ignores the grammar loses: acceptance falls by at most its mass
    outside the grammar, never the law (the drafts there are always rejected)."""
    for p_masked, q in MASKED_PAIRS:
        inside_q: defaultdict[int, Fraction] = defaultdict(Fraction)
        m = outside_grammar_mass(p_masked, q)
        for x, w in enumerate(q):
            if p_masked[x] > 0:
                inside_q[x] = w
        assert sum_min(p_masked, q) <= 1 - m
        assert sum_min(p_masked, q) == sum(
            (min(p_masked[x], w) for x, w in inside_q.items()), ZERO)
