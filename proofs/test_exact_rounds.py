"""Exact laws of speculative rounds, computed from the library's own rules.

The checks of lemmas 1, 2, 5, 6, 7 and part of 8 (see ``proofs/index.md``).

Method. Every random decision of a round is a library call on explicit uniforms, and as a
function of one uniform u it is piecewise constant with rational breakpoints: the accept
test ``u * q(t) <= p(t)`` switches at ``u = p(t) / q(t)``, and an inverse-CDF draw from a
distribution d switches at the partial sums ``(d(0) + ... + d(i)) / sum(d)``. Every table
here is dyadic (multiples of 1/16 or 1/32), so float32 holds it exactly. For each decision
we cut [0, 1) at those breakpoints, computed exactly with ``Fraction``, call the library
once at a float32 point strictly inside each piece, and weight what it returns by the
piece's exact length. That integrates the uniforms exactly, so the law of a round comes
out as a table of Fractions, and it is compared with the target's autoregressive law for
equality, not within a tolerance. ``test_library_decisions_switch_at_the_exact_breakpoints``
checks the premise: the library's float32 decisions change within 2**-20 of those
breakpoints and nowhere else.

Every rule that must be lossless is paired with a wrong variant that these same
functions must catch.
"""

from __future__ import annotations

import importlib
import itertools
import types
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from math import prod
from typing import NamedTuple, TypeAlias, TypeVar

import mlx.core as mx
import numpy as np
import pytest

from specaccept import (
    AcceptanceRule,
    RewindPlan,
    accept_draft_token,
    acceptance_probability,
    expected_tokens_per_round,
    residual_resample,
    rewind_trim,
    sample_from_distribution,
    verify_draft_token,
    verify_tokenwise,
)

Dist: TypeAlias = tuple[Fraction, ...]
Tokens: TypeAlias = tuple[int, ...]
Table: TypeAlias = Callable[[Tokens], Dist]
"""A conditional law: the distribution of the next token given a context."""
Law: TypeAlias = dict[Tokens, Fraction]
"""A law over token sequences."""
K = TypeVar("K")

ZERO = Fraction(0)
ONE = Fraction(1)


# --------------------------------------------------------------------------------------
# Exact arithmetic: distributions, breakpoints, pieces.


def dist(*weights: int, denominator: int = 16) -> Dist:
    """A distribution with entries ``weights[i] / denominator`` (they must sum to it)."""
    assert sum(weights) == denominator, weights
    return tuple(Fraction(w, denominator) for w in weights)


def one_hot(token: int, vocab_size: int) -> Dist:
    return tuple(ONE if x == token else ZERO for x in range(vocab_size))


def mean(a: Dist, b: Dist) -> Dist:
    return tuple((x + y) / 2 for x, y in zip(a, b, strict=True))


def as_float32(rows: Sequence[Dist]) -> mx.array:
    """`[R, V]` float32 rows; every entry must be exactly representable."""
    values = np.array([[float(x) for x in row] for row in rows], dtype=np.float32)
    for row, stored in zip(rows, values.tolist(), strict=True):
        assert all(Fraction(s) == x for s, x in zip(stored, row, strict=True)), row
    return mx.array(values)


def cut_points(weights: Dist) -> list[Fraction]:
    """Where an inverse-CDF draw from `weights` changes its answer: the partial sums / total."""
    total = sum(weights, ZERO)
    return [sum(weights[: i + 1], ZERO) / total for i in range(len(weights))]


def pieces(breakpoints: Sequence[Fraction]) -> list[tuple[Fraction, Fraction]]:
    """The intervals [0, 1) is cut into by the breakpoints that fall strictly inside it."""
    points = sorted({ZERO, ONE, *(b for b in breakpoints if ZERO < b < ONE)})
    return list(itertools.pairwise(points))


def inside(lo: Fraction, hi: Fraction) -> float:
    """A float32 value strictly inside (lo, hi): the midpoint, rounded to float32."""
    u = float(np.float32(float((lo + hi) / 2)))
    assert lo < Fraction(u) < hi, (lo, hi, u)
    return u


def residual(p: Dist, q: Dist) -> Dist:
    """relu(p - q) / sum, exactly; p itself when the excess has no mass (as the library)."""
    excess = tuple(max(a - b, ZERO) for a, b in zip(p, q, strict=True))
    mass = sum(excess, ZERO)
    return p if mass == 0 else tuple(e / mass for e in excess)


def accept_breaks(p: Dist, q: Dist, token: int) -> list[Fraction]:
    """Where the accept test of `token` can change its answer as u_accept moves."""
    return [p[token] / q[token]] if q[token] > 0 else []


def sample_breaks(p: Dist, q: Dist) -> list[Fraction]:
    """Where any draw of a verifier (from p or from the residual) can change as u_sample moves."""
    return cut_points(p) + cut_points(residual(p, q))


def total_mass(law: Mapping[K, Fraction]) -> Fraction:
    return sum(law.values(), ZERO)


def support(law: Mapping[K, Fraction]) -> dict[K, Fraction]:
    """The law without its zero entries."""
    return {seq: w for seq, w in law.items() if w}


def target_law(target: Table, prefix: Tokens, length: int) -> Law:
    """The target's own autoregressive law of the next `length` tokens after `prefix`."""
    law: Law = {(): ONE}
    for _ in range(length):
        law = {
            (*seq, x): w * px
            for seq, w in law.items()
            for x, px in enumerate(target(prefix + seq))
            if px
        }
    return law


def extend(law: Mapping[Tokens, Fraction], target: Table, prefix: Tokens, length: int) -> Law:
    """The law of the first `length` tokens when every sequence of `law` (all at most
    `length` long) is continued by sampling the target alone.

    A speculative stream is lossless exactly when this equals `target_law`: the tokens a
    round emits, followed by anything that samples the target, read as target sampling.
    """
    assert all(len(seq) <= length for seq in law)
    mass: defaultdict[Tokens, Fraction] = defaultdict(Fraction, law)
    for size in range(length):
        for seq in [s for s in mass if len(s) == size]:
            w = mass.pop(seq)
            for x, px in enumerate(target(prefix + seq)):
                if px:
                    mass[(*seq, x)] += w * px
    return support(mass)


# --------------------------------------------------------------------------------------
# The library's decisions, integrated exactly over their uniforms.

Verify: TypeAlias = Callable[
    [mx.array, mx.array, mx.array, mx.array, mx.array], tuple[mx.array, mx.array]
]
"""(p `[R, V]`, q `[R, V]`, draft `[R]`, u_accept `[R]`, u_sample `[R]`) -> (accepted, token)."""
Draw: TypeAlias = Callable[[mx.array, mx.array], mx.array]
"""(p `[R, V]`, u `[R]`) -> token: how a rule draws the bonus token."""


def _read(array: mx.array) -> list[int]:
    """The values of an int or bool array (evaluating it)."""
    return [int(x) for x in np.array(array).reshape(-1).tolist()]


def _one(array: mx.array) -> int:
    (value,) = _read(array)
    return value


def draw_law(draw: Draw, d: Dist) -> dict[int, Fraction]:
    """The exact law of ``draw(d, u)`` over a uniform u, one call for all pieces."""
    cells = pieces(cut_points(d))
    tokens = draw(as_float32([d] * len(cells)),
                  mx.array([inside(lo, hi) for lo, hi in cells], dtype=mx.float32))
    law: defaultdict[int, Fraction] = defaultdict(Fraction)
    for (lo, hi), token in zip(cells, _read(tokens), strict=True):
        law[token] += hi - lo
    return dict(law)


_DRAWS: dict[Dist, dict[int, Fraction]] = {}


def draws(d: Dist) -> dict[int, Fraction]:
    """The exact law of the library's ``sample_from_distribution(d, u)``: how drafts are drawn."""
    if d not in _DRAWS:
        _DRAWS[d] = draw_law(sample_from_distribution, d)
    return _DRAWS[d]


@dataclass(frozen=True)
class Rule:
    """A verifier: the library's rule, or a wrong variant written here to be caught."""

    name: str
    verify: Verify
    bonus: Draw
    _verdicts: dict[tuple[Dist, Dist, int], dict[tuple[bool, int], Fraction]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _bonus: dict[Dist, dict[int, Fraction]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def verdicts(self, p: Dist, q: Dist, token: int) -> dict[tuple[bool, int], Fraction]:
        """The exact law of (accepted, emitted) at one position, over (u_accept, u_sample)."""
        key = (p, q, token)
        if key not in self._verdicts:
            cells = [
                ((a_hi - a_lo) * (s_hi - s_lo), inside(a_lo, a_hi), inside(s_lo, s_hi))
                for a_lo, a_hi in pieces(accept_breaks(p, q, token))
                for s_lo, s_hi in pieces(sample_breaks(p, q))
            ]
            rows = len(cells)
            accepted, emitted = self.verify(
                as_float32([p] * rows),
                as_float32([q] * rows),
                mx.array([token] * rows, dtype=mx.int32),
                mx.array([c[1] for c in cells], dtype=mx.float32),
                mx.array([c[2] for c in cells], dtype=mx.float32),
            )
            law: defaultdict[tuple[bool, int], Fraction] = defaultdict(Fraction)
            for (w, _, _), ok, x in zip(cells, _read(accepted), _read(emitted), strict=True):
                assert not ok or x == token, f"{self.name}: an accepted draft must be emitted"
                law[(bool(ok), x)] += w
            self._verdicts[key] = dict(law)
        return self._verdicts[key]

    def bonus_law(self, p: Dist) -> dict[int, Fraction]:
        """The exact law of the bonus token drawn from p."""
        if p not in self._bonus:
            self._bonus[p] = draw_law(self.bonus, p)
        return self._bonus[p]


def _argmax(p: mx.array, u: mx.array) -> mx.array:
    return mx.argmax(p, axis=-1).astype(mx.int32)


def library_rule(rule: AcceptanceRule, *, with_q: bool = True) -> Rule:
    """`verify_draft_token(rule, ...)`; the bonus as `verify_tokenwise` draws it."""

    def verify(
        p: mx.array, q: mx.array, token: mx.array, u_accept: mx.array, u_sample: mx.array
    ) -> tuple[mx.array, mx.array]:
        verdict = verify_draft_token(rule, p, q if with_q else None, token, u_accept, u_sample)
        return verdict.accepted, verdict.token

    bonus = _argmax if rule is AcceptanceRule.GREEDY_ARGMAX else sample_from_distribution
    return Rule(rule.value + ("" if with_q else " (q=None)"), verify, bonus)


def _argmax_against_argmax(
    p: mx.array, q: mx.array, token: mx.array, u_accept: mx.array, u_sample: mx.array
) -> tuple[mx.array, mx.array]:
    """Accept iff the draft is argmax p; emit argmax p. Biased whenever p is not one-hot."""
    winner = mx.argmax(p, axis=-1).astype(mx.int32)
    return winner == token, winner


def _resample_from_p(
    p: mx.array, q: mx.array, token: mx.array, u_accept: mx.array, u_sample: mx.array
) -> tuple[mx.array, mx.array]:
    """The library's accept test, but a rejection redraws from p, not from the residual."""
    accepted = accept_draft_token(p, q, token, u_accept)
    return accepted, mx.where(accepted, token, sample_from_distribution(p, u_sample))


STOCHASTIC = library_rule(AcceptanceRule.STOCHASTIC)
SAMPLER_MATCH = library_rule(AcceptanceRule.SAMPLER_MATCH)
NO_Q = library_rule(AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION, with_q=False)
GREEDY = library_rule(AcceptanceRule.GREEDY_ARGMAX)
LOSSLESS = (STOCHASTIC, SAMPLER_MATCH, NO_Q)
ARGMAX_AGAINST_ARGMAX = Rule("argmax-against-argmax", _argmax_against_argmax, _argmax)
RESAMPLE_FROM_P = Rule("resample-from-p", _resample_from_p, sample_from_distribution)


# --------------------------------------------------------------------------------------
# Tables: dyadic, history-dependent, with zeros on both sides and one-hot rows.

TARGETS = (
    dist(8, 4, 2, 2),
    dist(0, 8, 8, 0),
    dist(1, 3, 5, 7),
    dist(16, 0, 0, 0),
    dist(4, 4, 4, 4),
    dist(2, 0, 13, 1),
)
DRAFTERS = (
    dist(4, 4, 4, 4),
    dist(0, 0, 8, 8),
    dist(12, 2, 1, 1),
    dist(0, 16, 0, 0),
    dist(1, 1, 1, 13),
    dist(6, 6, 0, 4),
)
PAIRS = tuple(itertools.product(TARGETS, DRAFTERS))
"""Every (p, q) of the two pools: q(x) = 0 < p(x), p(x) = 0 < q(x), p = q, one-hot p or q."""


def context_index(context: Tokens, salt: int) -> int:
    """A deterministic hash of the whole context (not only its last token)."""
    h = salt
    for x in context:
        h = (h * 7 + x + 3) % 1009
    return h


def table(pool: Sequence[Dist], salt: int) -> Table:
    def lookup(context: Tokens) -> Dist:
        return pool[context_index(context, salt) % len(pool)]

    return lookup


TARGET = table(TARGETS, salt=1)
DRAFTER = table(DRAFTERS, salt=2)
ONE_HOT_TARGET = table([one_hot(x, 4) for x in range(4)], salt=3)
GREEDY_DRAFTER = table([one_hot(x, 4) for x in (2, 0, 3, 1, 1)], salt=4)
PROMPTS: tuple[Tokens, ...] = ((), (1,), (3, 0))


# --------------------------------------------------------------------------------------
# One position, and one round, position by position.


def position_law(rule: Rule, p: Dist, q: Dist) -> dict[tuple[bool, int], Fraction]:
    """The exact joint law of (accepted, emitted) at one position, the draft drawn from q."""
    law: defaultdict[tuple[bool, int], Fraction] = defaultdict(Fraction)
    for token, wq in draws(q).items():
        for outcome, w in rule.verdicts(p, q, token).items():
            law[outcome] += wq * w
    return dict(law)


def emitted_token_law(law: Mapping[tuple[bool, int], Fraction]) -> Law:
    out: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for (_, token), w in law.items():
        out[(token,)] += w
    return support(out)


def acceptance(law: Mapping[tuple[bool, int], Fraction]) -> Fraction:
    return sum((w for (ok, _), w in law.items() if ok), ZERO)


def as_law(d: Dist) -> Law:
    return support({(x,): w for x, w in enumerate(d)})


def sum_min(p: Dist, q: Dist) -> Fraction:
    return sum((min(a, b) for a, b in zip(p, q, strict=True)), ZERO)


def sum_prod(p: Dist, q: Dist) -> Fraction:
    return sum((a * b for a, b in zip(p, q, strict=True)), ZERO)


class Outcome(NamedTuple):
    """One way a round can end."""

    drafts: Tokens
    """All k drafts, kept or not (a cache holds some of the discarded ones until rewound)."""
    accepted: int
    """The length a of the accepted prefix."""
    next_token: int
    """The replacement at the first rejection, or the bonus token when a == k."""

    @property
    def emitted(self) -> Tokens:
        return (*self.drafts[:self.accepted], self.next_token)


def draft_phase(drafter: Table, base: Tokens, k: int) -> Iterator[tuple[Tokens, Fraction]]:
    """Every draft sequence, d_i drawn by the library from ``drafter(base + d_<i)``."""
    frontier: list[tuple[Tokens, Fraction]] = [((), ONE)]
    for _ in range(k):
        frontier = [
            ((*drafts, token), weight * w)
            for drafts, weight in frontier
            for token, w in draws(drafter(base + drafts)).items()
        ]
    yield from frontier


def round_outcomes(
    rule: Rule,
    target: Table,
    drafter: Table,
    target_base: Tokens,
    drafter_base: Tokens,
    k: int,
    *,
    verifier_base: Tokens | None = None,
) -> dict[Outcome, Fraction]:
    """The exact law of a round's outcome.

    All k drafts are drawn first (d_i from ``drafter(drafter_base + d_<i)``), then the
    target's rows ``p_i = target(target_base + d_<i)`` are verified in order until the
    first rejection; row k gives the bonus. The verifier is handed
    ``drafter(verifier_base + d_<i)`` as q, which is the law the draft was drawn from
    unless `verifier_base` says otherwise.
    """
    seen = drafter_base if verifier_base is None else verifier_base
    law: defaultdict[Outcome, Fraction] = defaultdict(Fraction)
    for drafts, weight in draft_phase(drafter, drafter_base, k):
        reach = weight  # the probability of these drafts with positions < i all accepted
        for i in range(k):
            p, q = target(target_base + drafts[:i]), drafter(seen + drafts[:i])
            kept = ZERO
            for (ok, token), w in rule.verdicts(p, q, drafts[i]).items():
                if ok:
                    kept += w
                else:
                    law[Outcome(drafts, i, token)] += reach * w
            reach *= kept
            if not reach:
                break
        if reach:
            for token, w in rule.bonus_law(target(target_base + drafts)).items():
                law[Outcome(drafts, k, token)] += reach * w
    return dict(law)


def round_law(rule: Rule, target: Table, drafter: Table, prefix: Tokens, k: int) -> Law:
    """The exact law of the tokens one round emits after `prefix` (1 to k + 1 of them)."""
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for outcome, w in round_outcomes(rule, target, drafter, prefix, prefix, k).items():
        law[outcome.emitted] += w
    return support(law)


def assert_lossless(law: Law, target: Table, prefix: Tokens, length: int) -> None:
    assert total_mass(law) == 1
    extended, expected = extend(law, target, prefix, length), target_law(target, prefix, length)
    differing = sorted(s for s in extended.keys() | expected.keys()
                       if extended.get(s, ZERO) != expected.get(s, ZERO))
    assert not differing, (
        f"{len(differing)} sequences differ, e.g. {differing[0]}: "
        f"{extended.get(differing[0], ZERO)} != {expected.get(differing[0], ZERO)}"
    )


def is_lossless(law: Law, target: Table, prefix: Tokens, length: int) -> bool:
    return extend(law, target, prefix, length) == target_law(target, prefix, length)


# --------------------------------------------------------------------------------------
# Lemma 1: modified rejection sampling emits exactly p, for any q.


def test_library_decisions_switch_at_the_exact_breakpoints() -> None:
    """The premise of the method. Each float32 decision is monotone in its uniform (float
    rounding of u * q and of u * total is monotone), so it is a step function; here every
    step is shown to sit within 2**-20 of its exact breakpoint, for the accept test, the
    draw from p and the residual draw, on every pair."""
    delta = Fraction(1, 2**20)

    def near(b: Fraction) -> list[float]:
        """float32 uniforms just below and just above b (those inside (0, 1))."""
        return [inside(u - delta / 4, u + delta / 4) for u in (b - delta, b + delta)
                if ZERO < u < ONE]

    def first_above(points: list[Fraction], u: float) -> int:
        return min(i for i, s in enumerate(points) if s > Fraction(u))

    accept_cases: list[tuple[Dist, Dist, int, float]] = [
        (p, q, t, u) for p, q in PAIRS for t in range(len(p))
        for b in accept_breaks(p, q, t) for u in near(b)
    ]
    p_rows, q_rows, tokens, us = zip(*accept_cases, strict=True)
    accepted = accept_draft_token(as_float32(p_rows), as_float32(q_rows),
                                  mx.array(tokens, dtype=mx.int32), mx.array(us))
    assert [bool(a) for a in _read(accepted)] == [
        p[t] > 0 and Fraction(u) * q[t] <= p[t] for p, q, t, u in accept_cases]

    for draw_from_residual in (False, True):
        cases = [
            (p, q, u) for p, q in PAIRS
            for b in cut_points(residual(p, q) if draw_from_residual else p) for u in near(b)
        ]
        p_rows, q_rows, us = zip(*cases, strict=True)
        u_array = mx.array(us, dtype=mx.float32)
        drawn = (residual_resample(as_float32(p_rows), as_float32(q_rows), u_array)
                 if draw_from_residual else sample_from_distribution(as_float32(p_rows), u_array))
        assert _read(drawn) == [
            first_above(cut_points(residual(p, q) if draw_from_residual else p), u)
            for p, q, u in cases]

    # On a breakpoint itself (dyadic here, so float32 computes u * q and the partial sums
    # exactly) the library follows its docstrings: the accept test is closed, u = p/q
    # accepts; a draw is right-continuous, u = S_i gives the next token of positive mass.
    # Continuous uniforms hit these points with probability zero, 24-bit ones with 2**-24.
    on_break = [(p, q, t, p[t] / q[t]) for p, q in PAIRS for t in range(len(p))
                if q[t] > 0 and ZERO < p[t] / q[t] < ONE
                and Fraction(float(np.float32(float(p[t] / q[t])))) == p[t] / q[t]]
    assert len(on_break) > 10
    p_rows, q_rows, tokens, bs = zip(*on_break, strict=True)
    accepted = accept_draft_token(as_float32(p_rows), as_float32(q_rows),
                                  mx.array(tokens, dtype=mx.int32),
                                  mx.array([float(b) for b in bs], dtype=mx.float32))
    assert all(bool(a) for a in _read(accepted))
    at_sums = [(p, b) for p in TARGETS for b in cut_points(p) if ZERO < b < ONE]
    drawn = sample_from_distribution(as_float32([p for p, _ in at_sums]),
                                     mx.array([float(b) for _, b in at_sums], dtype=mx.float32))
    assert _read(drawn) == [first_above(cut_points(p), float(b)) for p, b in at_sums]


@pytest.mark.parametrize("p,q", PAIRS)
def test_rejection_sampling_emits_exactly_p(p: Dist, q: Dist) -> None:
    """Lemma 1: the emitted token's law is p and the acceptance is sum min(p, q), exactly."""
    law = position_law(STOCHASTIC, p, q)
    assert emitted_token_law(law) == as_law(p)
    assert acceptance(law) == sum_min(p, q)


def rejection_coupling(p: Dist, q: Dist) -> dict[tuple[int, int], Fraction]:
    """pi(x, x) = min(p, q)(x); pi(x, y) = (q - p)+(x) (p - q)+(y) / sum (p - q)+ off it."""
    over = [max(b - a, ZERO) for a, b in zip(p, q, strict=True)]
    under = [max(a - b, ZERO) for a, b in zip(p, q, strict=True)]
    mass = sum(under, ZERO)
    pi = {(x, y): (min(p[x], q[x]) if x == y else over[x] * under[y] / mass if mass else ZERO)
          for x in range(len(p)) for y in range(len(p))}
    return support(pi)


@pytest.mark.parametrize("p,q", PAIRS)
def test_rejection_sampling_realises_the_maximal_coupling(p: Dist, q: Dist) -> None:
    """Lemma 3: the library's joint law of (draft, emitted) is exactly the coupling whose
    diagonal is min(p, q), so it attains the ceiling (test_ceiling_lp.py checks that
    coupling against the linear program)."""
    joint: defaultdict[tuple[int, int], Fraction] = defaultdict(Fraction)
    for token, wq in draws(q).items():
        for (_, emitted), w in STOCHASTIC.verdicts(p, q, token).items():
            joint[(token, emitted)] += wq * w
    assert support(joint) == rejection_coupling(p, q)


def test_resampling_from_p_instead_of_the_residual_is_caught() -> None:
    """The naive replacement fails the same equality on most pairs (and never on p = q,
    where nothing is rejected)."""
    failing = [(p, q) for p, q in PAIRS
               if emitted_token_law(position_law(RESAMPLE_FROM_P, p, q)) != as_law(p)]
    assert len(failing) >= len(PAIRS) // 2
    assert (dist(8, 4, 2, 2), dist(4, 4, 4, 4)) in failing


def test_accept_test_never_admits_a_token_outside_the_target_support() -> None:
    """Lemma 1, in practice: with p(t) = 0 the library rejects, even where u * q(t) <= p(t)
    reads 0 <= 0: at u = 0 (a possible float uniform) or with q(t) underflowed to 0."""
    p = mx.array([0.0, 1.0])
    underflowed = mx.array([1e-46, 1.0 - 1e-46], dtype=mx.float32)  # 1e-46 is below float32
    assert np.array(underflowed)[0] == 0.0
    cases = [(mx.array([0.5, 0.5]), 0.0), (underflowed, 0.0), (underflowed, 0.75)]
    for q, u in cases:
        assert accept_draft_token(p, q, 0, u).item() is False
        without_conjunct = (u * q[0] <= p[0]).item()
        assert without_conjunct is True  # what the first conjunct is there to stop


def test_float32_carries_the_small_ratios_that_float16_flushes() -> None:
    """Lemma 1, in practice: float16 has no value below 2**-24 (about 6e-8), flushes what
    lies under 2**-25 to zero and rounds what lies just above to multiples of 2**-24, so
    acceptance ratios between such probabilities are lost; the library refuses float16
    and keeps them in float32."""
    small_p, small_q = 2.0**-27, 2.0**-26
    assert mx.array(2.0**-24, dtype=mx.float16).item() == 2.0**-24
    assert mx.array(small_q, dtype=mx.float16).item() == 0.0
    p = mx.array([small_p, 1.0 - small_p], dtype=mx.float32)
    q = mx.array([small_q, 1.0 - small_q], dtype=mx.float32)
    assert [accept_draft_token(p, q, 0, u).item() for u in (0.25, 0.75)] == [True, False]
    p16, q16 = p.astype(mx.float16), q.astype(mx.float16)
    assert np.array(p16)[0] == 0.0 and np.array(q16)[0] == 0.0
    with pytest.raises(TypeError, match="float32"):
        accept_draft_token(p16, q16, 0, 0.25)
    # Through float16 the ratio is gone: the product test accepts at every u, the
    # conjunct rejects at every u; neither is the true 1/2.
    p_back, q_back = p16.astype(mx.float32), q16.astype(mx.float32)
    assert [(u * q_back[0] <= p_back[0]).item() for u in (0.25, 0.75)] == [True, True]
    assert [accept_draft_token(p_back, q_back, 0, u).item() for u in (0.25, 0.75)] == [
        False, False,
    ]
    # Just above the flush, float16 rounds to multiples of 2**-24: a 5/7 ratio between
    # 5 * 2**-27 and 7 * 2**-27 reads 1, a certain accept even with the conjunct.
    p = mx.array([5 * 2.0**-27, 1.0 - 5 * 2.0**-27], dtype=mx.float32)
    q = mx.array([7 * 2.0**-27, 1.0 - 7 * 2.0**-27], dtype=mx.float32)
    assert [accept_draft_token(p, q, 0, u).item() for u in (0.5, 0.75)] == [True, False]
    p_back, q_back = (d.astype(mx.float16).astype(mx.float32) for d in (p, q))
    assert np.array(p_back)[0] == np.array(q_back)[0] == 2.0**-24
    assert [accept_draft_token(p_back, q_back, 0, u).item() for u in (0.5, 0.75)] == [
        True, True,
    ]


# --------------------------------------------------------------------------------------
# Lemma 2: sampler-match; lemma 5: greedy drafters and drafters without a distribution.


@pytest.mark.parametrize("p,q", PAIRS)
def test_sampler_match_emits_exactly_p(p: Dist, q: Dist) -> None:
    """Lemma 2: sampler-match emits p exactly and accepts with probability sum p*q, with
    or without q; the library's closed form agrees to float32 precision."""
    for rule in (SAMPLER_MATCH, NO_Q):
        law = position_law(rule, p, q)
        assert emitted_token_law(law) == as_law(p)
        assert acceptance(law) == sum_prod(p, q)
    closed = acceptance_probability(AcceptanceRule.SAMPLER_MATCH, *as_float32([p, q]))
    assert abs(closed.item() - float(sum_prod(p, q))) < 1e-6
    closed = acceptance_probability(AcceptanceRule.STOCHASTIC, *as_float32([p, q]))
    assert abs(closed.item() - float(sum_min(p, q))) < 1e-6


@pytest.mark.parametrize("q", DRAFTERS)
def test_greedy_argmax_is_exact_on_a_one_hot_target(q: Dist) -> None:
    """Lemma 2: with a greedy (one-hot) target, greedy-argmax emits p and accepts
    q(argmax p); all three rules then coincide in acceptance."""
    for winner in range(len(q)):
        p = one_hot(winner, len(q))
        law = position_law(GREEDY, p, q)
        assert emitted_token_law(law) == as_law(p)
        assert acceptance(law) == q[winner] == sum_min(p, q) == sum_prod(p, q)


def test_sampler_match_emits_the_target_only_stream_whatever_the_drafts() -> None:
    """Lemma 2, pathwise: under `verify_tokenwise` with sampler-match, the tokens a round
    emits are the target-only draws made with the same u_sample column, for drafts that
    are any function of the uniforms (here: adversarial ones)."""
    rng = np.random.default_rng(902)
    k = 3
    for trial in range(60):
        prefix: Tokens = (trial % 4,)
        uniforms = np.floor(rng.random((k + 1, 2)) * 2**24) / 2**24
        alone: list[int] = []
        for i in range(k + 1):
            p = TARGET(prefix + tuple(alone))
            alone.append(_one(sample_from_distribution(as_float32([p])[0], float(uniforms[i, 1]))))
        # Drafts that agree with the target-only stream up to a random point, then not.
        agree = trial % (k + 1)
        drafts = tuple(alone[:agree]) + tuple((x + 1) % 4 for x in alone[agree:k])
        rows = [TARGET(prefix + drafts[:i]) for i in range(k + 1)]
        verdict = verify_tokenwise(
            AcceptanceRule.SAMPLER_MATCH, as_float32(rows), None,
            mx.array(drafts, dtype=mx.int32), mx.array(uniforms, dtype=mx.float32),
        )
        a = _one(verdict.num_accepted)
        emitted = [*drafts[:a], _one(verdict.next_token)]
        assert emitted == alone[: a + 1]
        assert a == agree


@pytest.mark.parametrize("p", TARGETS)
def test_greedy_drafter_sampler_match_attains_the_ceiling(p: Dist) -> None:
    """Lemma 5: with a one-hot q, sampler-match and rejection sampling have the same joint
    law of (accepted, emitted), so sampler-match already accepts sum min(p, q) = p(g)."""
    for g in range(len(p)):
        q = one_hot(g, len(p))
        match = position_law(SAMPLER_MATCH, p, q)
        assert match == position_law(STOCHASTIC, p, q)
        assert acceptance(match) == sum_min(p, q) == p[g]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_greedy_drafter_rounds_are_the_same_under_both_rules(k: int) -> None:
    """Lemma 5 over a round: with a greedy drafter the two lossless rules give the same
    exact law of (emitted tokens, accepted count)."""
    def by_emitted(rule: Rule, prefix: Tokens) -> dict[tuple[Tokens, int], Fraction]:
        law: defaultdict[tuple[Tokens, int], Fraction] = defaultdict(Fraction)
        for o, w in round_outcomes(rule, TARGET, GREEDY_DRAFTER, prefix, prefix, k).items():
            law[(o.emitted, o.accepted)] += w
        return support(law)

    for prefix in PROMPTS:
        assert by_emitted(SAMPLER_MATCH, prefix) == by_emitted(STOCHASTIC, prefix)


def test_a_drafter_that_exposes_no_distribution_is_lossless_under_sampler_match() -> None:
    """Lemma 5: a block drafter proposes k tokens at once and reports no q; sampler-match
    (the no-proposal-distribution id, called with q=None) is still exactly lossless."""
    def block_drafter(context: Tokens) -> Dist:  # deterministic in its context
        return one_hot((context_index(context, 5) + len(context)) % 4, 4)

    for prefix in PROMPTS:
        for k in (1, 3):
            assert_lossless(round_law(NO_Q, TARGET, block_drafter, prefix, k), TARGET, prefix,
                            k + 1)


# --------------------------------------------------------------------------------------
# Lemma 6: a whole round emits the target's autoregressive law.


@pytest.mark.parametrize("rule", LOSSLESS, ids=lambda r: r.name)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_round_emits_the_target_law(rule: Rule, k: int) -> None:
    """Lemma 6: history-dependent target and drafter, V = 4, bonus token included."""
    for prefix in PROMPTS:
        assert_lossless(round_law(rule, TARGET, DRAFTER, prefix, k), TARGET, prefix, k + 1)


@pytest.mark.parametrize("k", [1, 3])
def test_a_greedy_argmax_round_emits_a_one_hot_target_law(k: int) -> None:
    for prefix in PROMPTS:
        law = round_law(GREEDY, ONE_HOT_TARGET, DRAFTER, prefix, k)
        assert_lossless(law, ONE_HOT_TARGET, prefix, k + 1)


@pytest.mark.parametrize("k", [1, 3])
def test_biased_rules_fail_the_round_law(k: int) -> None:
    """The check has power: argmax-against-argmax (at temperature > 0, i.e. non-one-hot p),
    the library's own greedy-argmax applied to such a p (the same rule), and resampling
    from p all give a law that differs from the target's."""
    for rule in (ARGMAX_AGAINST_ARGMAX, GREEDY, RESAMPLE_FROM_P):
        for prefix in PROMPTS:
            law = round_law(rule, TARGET, DRAFTER, prefix, k)
            assert total_mass(law) == 1
            assert not is_lossless(law, TARGET, prefix, k + 1), (rule.name, prefix)


def block_law(rule: AcceptanceRule, target: Table, drafter: Table, prefix: Tokens,
              k: int) -> Law:
    """The exact law of what `verify_tokenwise` emits, its 2(k+1) uniforms integrated jointly:
    every cell of the product of all positions' pieces is evaluated, none is assumed
    irrelevant (the library is mapped over the cells with `mx.vmap`)."""
    weights: list[Fraction] = []
    draft_ids: list[Tokens] = []
    target_rows, draft_rows, uniforms = [], [], []
    for drafts, weight in draft_phase(drafter, prefix, k):
        ps = [target(prefix + drafts[:i]) for i in range(k + 1)]
        qs = [drafter(prefix + drafts[:i]) for i in range(k)]
        # Row i's (u_accept, u_sample) pieces; row k has no draft, so its u_accept has no
        # breakpoint (one piece) and its u_sample those of the bonus draw from p_k.
        breaks = [(accept_breaks(ps[i], qs[i], drafts[i]), sample_breaks(ps[i], qs[i]))
                  for i in range(k)] + [([], cut_points(ps[k]))]
        axes = [
            [((a_hi - a_lo) * (s_hi - s_lo), (inside(a_lo, a_hi), inside(s_lo, s_hi)))
             for a_lo, a_hi in pieces(accept) for s_lo, s_hi in pieces(sample)]
            for accept, sample in breaks
        ]
        tp, dp = np.array(as_float32(ps)), np.array(as_float32(qs))
        for cells in itertools.product(*axes):
            weights.append(weight * prod((c[0] for c in cells), start=ONE))
            uniforms.append([c[1] for c in cells])
            target_rows.append(tp)
            draft_rows.append(dp)
            draft_ids.append(drafts)

    def one_round(tp: mx.array, dp: mx.array, ids: mx.array, u: mx.array
                  ) -> tuple[mx.array, mx.array]:
        verdict = verify_tokenwise(rule, tp, dp, ids, u)
        return verdict.num_accepted, verdict.next_token

    args = (mx.array(np.stack(target_rows)), mx.array(np.stack(draft_rows)),
            mx.array(np.array(draft_ids, dtype=np.int32)),
            mx.array(np.array(uniforms, dtype=np.float32)))
    num_accepted, next_token = mx.vmap(one_round)(*args)
    accepted_list, next_list = _read(num_accepted), _read(next_token)
    for row in range(0, len(weights), max(1, len(weights) // 16)):  # mx.vmap == a direct call
        direct = one_round(args[0][row], args[1][row], args[2][row], args[3][row])
        assert (_one(direct[0]), _one(direct[1])) == (accepted_list[row], next_list[row])
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for w, drafts, a, nxt in zip(weights, draft_ids, accepted_list, next_list, strict=True):
        law[(*drafts[:a], nxt)] += w
    return support(law)


@pytest.mark.parametrize(
    "rule",
    [AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH, AcceptanceRule.GREEDY_ARGMAX],
    ids=lambda rule: rule.value,
)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_verify_tokenwise_emits_the_target_law(rule: AcceptanceRule, k: int) -> None:
    """Lemma 6 for the library's whole-round function: `verify_tokenwise` over all its
    uniforms at once emits the target's law (a one-hot one for greedy-argmax), and the
    same law as the position-by-position composition of `verify_draft_token`."""
    target = ONE_HOT_TARGET if rule is AcceptanceRule.GREEDY_ARGMAX else TARGET
    for prefix in PROMPTS:
        law = block_law(rule, target, DRAFTER, prefix, k)
        assert_lossless(law, target, prefix, k + 1)
        assert law == round_law(library_rule(rule), target, DRAFTER, prefix, k)


def test_verify_tokenwise_with_a_biased_rule_is_caught() -> None:
    """greedy-argmax's `verify_tokenwise` on a temperature > 0 target is argmax-against-argmax."""
    k = 3
    for prefix in PROMPTS:
        law = block_law(AcceptanceRule.GREEDY_ARGMAX, TARGET, DRAFTER, prefix, k)
        assert total_mass(law) == 1
        assert not is_lossless(law, TARGET, prefix, k + 1)


def shared_uniform_law(p: Dist, q: Dist, share: str) -> Law:
    """The exact law of the emitted token when two of (draft, u_accept, u_sample) read one
    uniform u and the third reads an independent v.

    share: "draft=u_accept" or "u_accept=u_sample" (rejection sampling), or
    "draft=u_sample" (sampler-match).
    """
    every_accept_break = [b for t in range(len(q)) for b in accept_breaks(p, q, t)]
    breaks = {"draft": cut_points(q), "u_accept": every_accept_break,
              "u_sample": sample_breaks(p, q)}
    shared = share.split("=")
    (alone,) = set(breaks) - set(shared)
    rule = SAMPLER_MATCH if share == "draft=u_sample" else STOCHASTIC
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for lo, hi in pieces([b for name in shared for b in breaks[name]]):
        for v_lo, v_hi in pieces(breaks[alone]):
            u = {name: inside(lo, hi) for name in shared} | {alone: inside(v_lo, v_hi)}
            token = _one(sample_from_distribution(as_float32([q])[0], u["draft"]))
            _, emitted = rule.verify(
                as_float32([p]), as_float32([q]), mx.array([token], dtype=mx.int32),
                mx.array([u["u_accept"]], dtype=mx.float32),
                mx.array([u["u_sample"]], dtype=mx.float32),
            )
            law[(_one(emitted),)] += (hi - lo) * (v_hi - v_lo)
    return support(law)


def test_uniforms_must_be_independent_for_rejection_sampling() -> None:
    """Lemma 6's independence note. Drawing the draft with the accept test's own uniform,
    or the replacement with it, breaks rejection sampling; sampler-match survives the
    draft reading its u_sample (lemma 2: the emitted token is the target's own draw)."""
    half = Fraction(1, 2)
    # The two counterexamples of whole_round.md.
    assert shared_uniform_law(dist(4, 12), dist(8, 8), "draft=u_accept") == {
        (0,): half, (1,): half}
    assert shared_uniform_law(dist(8, 4, 4), dist(16, 0, 0), "u_accept=u_sample") == {
        (0,): half, (2,): half}
    broken = {share: [(p, q) for p, q in PAIRS if shared_uniform_law(p, q, share) != as_law(p)]
              for share in ("draft=u_accept", "u_accept=u_sample", "draft=u_sample")}
    assert broken["draft=u_accept"] and broken["u_accept=u_sample"]
    assert broken["draft=u_sample"] == []


# --------------------------------------------------------------------------------------
# Lemma 7: the rewind, with list-backed caches, over several rounds.

V3_TARGETS = (dist(8, 4, 4), dist(0, 12, 4), dist(2, 2, 12), dist(16, 0, 0), dist(5, 6, 5),
              dist(1, 0, 15))
V3_NOISE = (dist(4, 4, 8), dist(0, 8, 8), dist(12, 4, 0), dist(16, 0, 0))
TARGET3 = table(V3_TARGETS, salt=6)
_NOISE3 = table(V3_NOISE, salt=7)


def mixed_drafter3(context: Tokens) -> Dist:
    """Half the target on the drafter's own context, half noise: good, not perfect."""
    return mean(TARGET3(context), _NOISE3(context))


Plan: TypeAlias = Callable[[int, int], RewindPlan]


def mlxcel_rewind(num_draft: int, num_accepted: int) -> RewindPlan:
    """The rewind of mlxcel issue #994: draft trim min(rejected + 1, n), no backfill."""
    rejected = num_draft - num_accepted
    if rejected == 0:
        return RewindPlan(target_trim=0, draft_trim=0, draft_backfill=False)
    return RewindPlan(target_trim=rejected, draft_trim=min(rejected + 1, num_draft),
                      draft_backfill=False)


class State(NamedTuple):
    """Everything a generator carries between rounds, as token lists."""

    emitted: Tokens
    """The prompt and every emitted token; the last one is the next round's current token."""
    target_cache: Tokens
    draft_cache: Tokens
    accepted: Tokens
    """The accepted count of each round so far."""


def start(prompt: Tokens) -> State:
    """Both caches prefilled with the prompt but its last token, which is `current`."""
    return State(prompt, prompt[:-1], prompt[:-1], ())


def after_round(state: State, outcome: Outcome, plan: Plan) -> State:
    """Forward, then rewind, both list caches exactly as a generator does."""
    current, drafts, n = state.emitted[-1], outcome.drafts, len(outcome.drafts)
    target_cache = (*state.target_cache, current, *drafts)  # n + 1 forwards
    draft_cache = (*state.draft_cache, current, *drafts[:-1])  # n forwards
    rewind = plan(n, outcome.accepted)
    target_cache = target_cache[: len(target_cache) - rewind.target_trim]
    draft_cache = draft_cache[: len(draft_cache) - rewind.draft_trim]
    if rewind.draft_backfill:
        draft_cache += (drafts[-1],)
    return State(state.emitted + outcome.emitted, target_cache, draft_cache,
                 (*state.accepted, outcome.accepted))


def run_rounds(rule: Rule, target: Table, drafter: Table, prompt: Tokens, n: int, rounds: int,
               plan: Plan, *, reconstructed_q: bool = False) -> dict[State, Fraction]:
    """The exact law of the generator's state after `rounds` rounds.

    The target reads its rows from its cache, the drafter draws from
    ``drafter(draft cache contents)``. With `reconstructed_q` the verifier is handed q
    recomputed on the emitted prefix instead of the law the draft was drawn from.
    """
    states = {start(prompt): ONE}
    for _ in range(rounds):
        following: defaultdict[State, Fraction] = defaultdict(Fraction)
        for state, weight in states.items():
            current = state.emitted[-1]
            outcomes = round_outcomes(
                rule, target, drafter, (*state.target_cache, current),
                (*state.draft_cache, current), n,
                verifier_base=state.emitted if reconstructed_q else None,
            )
            for outcome, w in outcomes.items():
                following[after_round(state, outcome, plan)] += weight * w
        states = dict(following)
    return states


def stream_law(states: Mapping[State, Fraction], prompt: Tokens) -> Law:
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for state, w in states.items():
        law[state.emitted[len(prompt):]] += w
    return support(law)


def expected_accepted(states: Mapping[State, Fraction]) -> Fraction:
    return sum((w * sum(s.accepted) for s, w in states.items()), ZERO)


PROMPT3: Tokens = (0, 2)
N3 = 3


class _RecordingCache:
    """A trimmable cache that records the trims it is asked for (mlx-lm's cache protocol)."""

    def __init__(self) -> None:
        self.trims: list[int] = []

    def is_trimmable(self) -> bool:
        return True

    def trim(self, num_tokens: int) -> int:
        self.trims.append(num_tokens)
        return num_tokens


def mlx_lm_rewind_cache(num_draft: int, num_accepted: int) -> tuple[int, int]:
    """(target trim, draft trim) as mlx-lm's own ``_rewind_cache`` performs them.

    ``_rewind_cache`` is a closure inside ``mlx_lm.generate.speculative_generate_step``
    over its two caches. Its code object is taken from the installed mlx-lm and run with
    recording caches in place of the closed-over ones, so this is mlx-lm's code, not a
    retyped formula, and an mlx-lm release that changes it changes the answer."""
    # `mlx_lm.generate` the attribute is the function `generate`; the module is in sys.modules.
    mlx_lm_generate = importlib.import_module("mlx_lm.generate")
    outer = mlx_lm_generate.speculative_generate_step.__code__
    (code,) = [c for c in outer.co_consts
               if isinstance(c, types.CodeType) and c.co_name == "_rewind_cache"]
    caches = {"model_cache": [_RecordingCache()], "draft_cache": [_RecordingCache()]}
    closure = tuple(types.CellType(caches[name]) for name in code.co_freevars)
    rewind = types.FunctionType(code, mlx_lm_generate.__dict__, "_rewind_cache", None, closure)
    rewind(num_draft, num_accepted)
    (target_trim,), (draft_trim,) = caches["model_cache"][0].trims, caches["draft_cache"][0].trims
    return target_trim, draft_trim


def test_rewind_trim_is_the_mlx_lm_rewind() -> None:
    """rewind_trim(n, a) trims what mlx-lm's own _rewind_cache trims, called here, for
    every n <= 8 and a <= n, and backfills exactly on an all-accepted round (mlx-lm's
    inline ``if n == num_draft`` feed of the last draft, which is not a function to call;
    tests/test_generator_caches.py checks the generator's backfill)."""
    for n in range(1, 9):
        for a in range(n + 1):
            plan = rewind_trim(n, a)
            assert (plan.target_trim, plan.draft_trim) == mlx_lm_rewind_cache(n, a)
            assert plan.draft_backfill == (a == n)


def test_the_mlx_lm_rewind_check_catches_a_wrong_trim() -> None:
    """The comparison has power: the mlxcel rewind disagrees with mlx-lm's at some (n, a)."""
    assert any(
        (mlxcel_rewind(n, a).target_trim, mlxcel_rewind(n, a).draft_trim)
        != mlx_lm_rewind_cache(n, a)
        for n in range(1, 9) for a in range(n + 1)
    )


@pytest.mark.parametrize("rule", [STOCHASTIC, SAMPLER_MATCH], ids=lambda r: r.name)
def test_rewind_trim_keeps_both_caches_on_the_emitted_prefix(rule: Rule) -> None:
    """Lemma 7: after every round, on every path, both caches hold exactly the emitted
    prefix before the current token, and two rounds emit the target's law."""
    for drafter in (mixed_drafter3, TARGET3):
        states = run_rounds(rule, TARGET3, drafter, PROMPT3, N3, 2, rewind_trim)
        for state in states:
            assert state.target_cache == state.draft_cache == state.emitted[:-1]
        assert_lossless(stream_law(states, PROMPT3), TARGET3, PROMPT3, 2 * (N3 + 1))


def lag_increase(num_draft: int, num_accepted: int) -> int:
    """How far the mlxcel rewind puts the draft cache behind, per round (rewind.md)."""
    return 1 if num_accepted in (0, num_draft) else 2


def test_mlxcel_rewind_falls_behind_by_the_derived_lag() -> None:
    """Lemma 7: the lag per round is 1 at a = 0 (the cache does not advance at all),
    2 at 0 < a < n, and 1 at a = n; rewind_trim's is 0. Exhaustive over n <= 8."""
    for n in range(1, 9):
        for a in range(n + 1):
            state = start((0, 1))  # entries are labels here, not a law
            outcome = Outcome(tuple(range(10, 10 + n)), a, 99)
            for plan, lag in ((mlxcel_rewind, lag_increase(n, a)), (rewind_trim, 0)):
                after = after_round(state, outcome, plan)
                assert after.target_cache == after.emitted[:-1]
                assert len(after.emitted) - 1 - len(after.draft_cache) == lag
                assert after.draft_cache == after.emitted[: len(after.draft_cache)]
            if a == 0:
                assert after_round(state, outcome, mlxcel_rewind).draft_cache == state.draft_cache


def test_mlxcel_rewind_keeps_the_law_but_not_the_drafter_context() -> None:
    """Lemma 7: under the mlxcel rewind the draft cache departs from the emitted prefix
    (shorter by the derived lag, and on some paths not a prefix of it at all), yet the
    stream stays exactly the target's: the target cache is right, and q is the law each
    draft was drawn from. What changes is acceptance."""
    for rule in (STOCHASTIC, SAMPLER_MATCH):
        for drafter in (mixed_drafter3, TARGET3):
            good = run_rounds(rule, TARGET3, drafter, PROMPT3, N3, 2, rewind_trim)
            bad = run_rounds(rule, TARGET3, drafter, PROMPT3, N3, 2, mlxcel_rewind)
            assert_lossless(stream_law(bad, PROMPT3), TARGET3, PROMPT3, 2 * (N3 + 1))
            for state in bad:
                assert state.target_cache == state.emitted[:-1]
                lag = sum(lag_increase(N3, a) for a in state.accepted)
                assert len(state.emitted) - 1 - len(state.draft_cache) == lag
            assert any(s.draft_cache != s.emitted[: len(s.draft_cache)] for s in bad)
            assert expected_accepted(bad) < expected_accepted(good)
    # A drafter that is the target itself, on its own cache: every draft is accepted with
    # the right rewind, and the mlxcel rewind alone costs acceptance in round two.
    perfect = run_rounds(STOCHASTIC, TARGET3, TARGET3, PROMPT3, N3, 2, rewind_trim)
    assert expected_accepted(perfect) == 2 * N3
    stale = run_rounds(STOCHASTIC, TARGET3, TARGET3, PROMPT3, N3, 2, mlxcel_rewind)
    assert expected_accepted(stale) < 2 * N3
    # The figures rewind.md quotes (expected accepted drafts over the two rounds).
    quoted = [(TARGET3, rewind_trim, "6.00"), (TARGET3, mlxcel_rewind, "4.34"),
              (mixed_drafter3, rewind_trim, "3.03"), (mixed_drafter3, mlxcel_rewind, "2.33")]
    for drafter, plan, figure in quoted:
        states = run_rounds(STOCHASTIC, TARGET3, drafter, PROMPT3, N3, 2, plan)
        assert f"{float(expected_accepted(states)):.2f}" == figure


def test_verifying_against_a_reconstructed_q_is_caught() -> None:
    """What correctness does need: q must be the law the draft was drawn from. Drafts drawn
    from the stale cache but verified against q recomputed on the emitted prefix (under the
    mlxcel rewind, where the two differ) give a biased stream."""
    for drafter in (mixed_drafter3, TARGET3):
        states = run_rounds(STOCHASTIC, TARGET3, drafter, PROMPT3, N3, 2, mlxcel_rewind,
                            reconstructed_q=True)
        law = stream_law(states, PROMPT3)
        assert total_mass(law) == 1
        assert not is_lossless(law, TARGET3, PROMPT3, 2 * (N3 + 1))


HALF = dist(8, 8)
AHEAD_FIRST_Q = dist(8, 8)
AHEAD_NEXT_Q = {0: dist(8, 8), 1: dist(4, 12)}
"""The counterexample of rewind.md: the drafter's next q depends on the discarded draft."""


def redraft_on_a_cache_ahead_law() -> dict[int, Fraction]:
    """The exact law of the token emitted at position L+1 when the drafter's cache still
    holds the draft D it drew there in the previous round (a cache running ahead), and
    position-keyed uniforms make the redraft read the same uniform v that drew D.

    D = draw(q1, v); the drafter, conditioned on D, proposes q' = AHEAD_NEXT_Q[D] and
    draws d' = draw(q', v) with the same v; the library's rejection sampling then
    verifies d' against (p, q'), with its own u_a and u_s. v is integrated exactly at the
    breakpoints of every draw that reads it."""
    breaks = cut_points(AHEAD_FIRST_Q) + [b for q in AHEAD_NEXT_Q.values() for b in cut_points(q)]
    law: defaultdict[int, Fraction] = defaultdict(Fraction)
    for lo, hi in pieces(breaks):
        v = inside(lo, hi)
        discarded = _one(sample_from_distribution(as_float32([AHEAD_FIRST_Q])[0], v))
        q_next = AHEAD_NEXT_Q[discarded]
        redraft = _one(sample_from_distribution(as_float32([q_next])[0], v))
        for (_, token), w in STOCHASTIC.verdicts(HALF, q_next, redraft).items():
            law[token] += (hi - lo) * w
    return dict(law)


def test_a_drafter_cache_ahead_under_position_keyed_uniforms_is_biased() -> None:
    """Lemma 7 / hypothesis H3: p = (1/2, 1/2) everywhere, and a drafter whose cache runs
    ahead (holds the discarded draft D). Under position-keyed uniforms the redraft reads
    D's uniform again, so d' = D and q' is a function of it; the emitted token has
    P(Y = 0) = 2/3, not 1/2. With a fresh uniform for the redraft the same drafter is
    exact, which is what H3 allows."""
    law = redraft_on_a_cache_ahead_law()
    assert law == {0: Fraction(2, 3), 1: Fraction(1, 3)}
    assert law != dict(enumerate(HALF))
    fresh: defaultdict[int, Fraction] = defaultdict(Fraction)
    for discarded, w_discarded in draws(AHEAD_FIRST_Q).items():
        q_next = AHEAD_NEXT_Q[discarded]
        for outcome, w in position_law(STOCHASTIC, HALF, q_next).items():
            fresh[outcome[1]] += w_discarded * w
    assert dict(fresh) == dict(enumerate(HALF))


def cache_ahead_rewind(num_draft: int, num_accepted: int) -> RewindPlan:
    """A wrong rewind that trims the draft cache one entry short: after a round with
    a <= n - 2 it still holds the rejected draft d_a, ahead of the emitted prefix."""
    plan = rewind_trim(num_draft, num_accepted)
    return RewindPlan(plan.target_trim, max(plan.draft_trim - 1, 0), plan.draft_backfill)


def test_a_drafter_cache_ahead_with_fresh_uniforms_stays_lossless() -> None:
    """Lemma 7 / H3, the other side: with a fresh uniform for every draw (this module's
    rounds), a draft cache that runs ahead, holding a discarded draft, still gives the
    target's exact law: the drafter's state depends on the discarded draft, but that
    draft's randomness is never read again. The cache is really ahead on some path."""
    for rule in (STOCHASTIC, SAMPLER_MATCH):
        states = run_rounds(rule, TARGET3, mixed_drafter3, PROMPT3, N3, 2, cache_ahead_rewind)
        assert_lossless(stream_law(states, PROMPT3), TARGET3, PROMPT3, 2 * (N3 + 1))
        ahead = [s for s in states if len(s.draft_cache) >= len(s.emitted)]
        assert any(s.draft_cache != s.emitted[: len(s.draft_cache)] for s in ahead)


def test_a_stale_one_hot_q_can_raise_sampler_match_acceptance() -> None:
    """Lemma 7 part 3 holds for rejection sampling only. Under sampler-match, a drafter
    equal to the target (q = p = (5/8, 3/8)) accepts sum p**2 = 17/32, and a stale one-hot
    q = (1, 0) accepts p(0) = 5/8, more; the issue's (0.6, 0.4) gives 0.52 against 0.6.
    Under rejection sampling q = p accepts 1, the most any q can."""
    p, stale = dist(10, 6), dist(16, 0)
    assert acceptance(position_law(SAMPLER_MATCH, p, p)) == Fraction(17, 32)
    assert acceptance(position_law(SAMPLER_MATCH, p, stale)) == Fraction(5, 8)
    assert acceptance(position_law(STOCHASTIC, p, p)) == 1
    assert acceptance(position_law(STOCHASTIC, p, stale)) == Fraction(5, 8)
    issue_p = (Fraction(3, 5), Fraction(2, 5))
    assert sum_prod(issue_p, issue_p) == Fraction(13, 25) < Fraction(3, 5) == sum_prod(
        issue_p, (ONE, ZERO))


def test_mlxcel_rewind_freezes_the_draft_cache_when_nothing_is_accepted() -> None:
    """Lemma 7: a drafter that never agrees (q one-hot on a token the target excludes) has
    a = 0 every round; the mlxcel draft cache then never leaves its prefill, while the
    target cache gains one entry per emitted token."""
    def target(context: Tokens) -> Dist:
        return one_hot(2 * (len(context) % 2), 3)  # 0, 2, 0, 2, ...: one path, 24 rounds

    def drafter(context: Tokens) -> Dist:
        return one_hot(1, 3)

    prompt, rounds = (0,), 24
    for plan, draft_entries in ((mlxcel_rewind, 0), (rewind_trim, rounds)):
        states = run_rounds(STOCHASTIC, target, drafter, prompt, N3, rounds, plan)
        assert total_mass(states) == 1
        for state in states:
            assert state.accepted == (0,) * rounds
            assert len(state.target_cache) == rounds
            assert len(state.draft_cache) == draft_entries


# --------------------------------------------------------------------------------------
# Lemma 8: expected tokens per round, from the exact round law.


Pointwise: TypeAlias = Callable[[Fraction, Fraction], Fraction]
"""P(draft x drawn and accepted) from (p(x), q(x)): lemma 1's or lemma 2's closed form."""


def _min(p_x: Fraction, q_x: Fraction) -> Fraction:
    return min(p_x, q_x)


def _product(p_x: Fraction, q_x: Fraction) -> Fraction:
    return p_x * q_x


CLOSED_FORM: dict[str, Pointwise] = {STOCHASTIC.name: _min, SAMPLER_MATCH.name: _product}


def closed_form_alphas(target: Table, drafter: Table, prefix: Tokens, k: int,
                       pointwise: Pointwise) -> list[Fraction]:
    """alpha_1..alpha_k from the tables and the per-position closed form alone (no
    library call): P(a >= j) sums, over draft prefixes d_<j, the product of
    P(d_i drawn and accepted) = pointwise(p_i(d_i), q_i(d_i)), and alpha_j is the ratio
    P(a >= j) / P(a >= j - 1)."""
    reach = [ONE]
    frontier: list[tuple[Tokens, Fraction]] = [((), ONE)]
    for _ in range(k):
        frontier = [
            ((*drafts, x), weight * pointwise(p_x, q_x))
            for drafts, weight in frontier
            for x, (p_x, q_x) in enumerate(zip(target(prefix + drafts),
                                                drafter(prefix + drafts), strict=True))
            if weight * pointwise(p_x, q_x)
        ]
        reach.append(sum((w for _, w in frontier), ZERO))
    return [reach[j] / reach[j - 1] for j in range(1, k + 1) if reach[j - 1]]


def round_tokens(rule: Rule, prefix: Tokens, k: int) -> Fraction:
    """E[tokens per round] from the exact law of a round run with `rule`."""
    outcomes = round_outcomes(rule, TARGET, DRAFTER, prefix, prefix, k)
    return sum((w * len(o.emitted) for o, w in outcomes.items()), ZERO)


def survival_sum(alphas: Sequence[Fraction]) -> Fraction:
    return sum((prod(alphas[:j], start=ONE) for j in range(len(alphas) + 1)), ZERO)


@pytest.mark.parametrize("rule", [STOCHASTIC, SAMPLER_MATCH], ids=lambda r: r.name)
def test_expected_tokens_is_the_sum_of_survival_products(rule: Rule) -> None:
    """Lemma 8 part 1 on the library: the expected tokens of the exact round law (the
    library's verifier, integrated over its uniforms) equal sum_j prod_{i<=j} alpha_i,
    with the alpha_i computed independently from the tables and lemma 1's or 2's
    per-position closed form; the library's expected_tokens_per_round agrees. Two sides
    computed two ways, so a wrong verifier or a wrong formula fails (next test)."""
    k = 3
    for prefix in PROMPTS:
        alphas = closed_form_alphas(TARGET, DRAFTER, prefix, k, CLOSED_FORM[rule.name])
        assert len(alphas) == k and all(0 < a < 1 for a in alphas)
        tokens = round_tokens(rule, prefix, k)
        assert tokens == survival_sum(alphas)
        assert abs(expected_tokens_per_round([float(a) for a in alphas]) - float(tokens)) < 1e-12


def test_the_survival_product_check_catches_wrong_verifiers_and_formulas() -> None:
    """The check of lemma 8 part 1 has power: a verifier that accepts differently
    (argmax-against-argmax), the other rule's closed form, a formula without the round's
    extra token, and the pooled i.i.d. substitution each break the equality."""
    k, prefix = 3, (1,)
    alphas = closed_form_alphas(TARGET, DRAFTER, prefix, k, _min)
    assert round_tokens(ARGMAX_AGAINST_ARGMAX, prefix, k) != survival_sum(alphas)
    assert round_tokens(STOCHASTIC, prefix, k) != survival_sum(
        closed_form_alphas(TARGET, DRAFTER, prefix, k, _product))
    tokens = round_tokens(STOCHASTIC, prefix, k)
    assert sum((prod(alphas[:j], start=ONE) for j in range(1, k + 1)), ZERO) != tokens
    outcomes = round_outcomes(STOCHASTIC, TARGET, DRAFTER, prefix, prefix, k)
    tested = sum((w * min(o.accepted + 1, k) for o, w in outcomes.items()), ZERO)
    pooled = (tokens - 1) / tested
    assert survival_sum([pooled] * k) != tokens


@pytest.mark.parametrize("p,q", [(dist(8, 4, 2, 2), dist(4, 4, 4, 4)),
                                 (dist(1, 3, 5, 7), dist(12, 2, 1, 1)),
                                 (dist(0, 8, 8, 0), dist(6, 6, 0, 4))])
def test_a_history_free_pair_gives_the_iid_closed_form(p: Dist, q: Dist) -> None:
    """Lemma 8's i.i.d. case from the library's rules: one (p, q) at every position makes
    acceptance i.i.d. with alpha = sum min(p, q) (stochastic) or sum p*q (sampler-match),
    and E[tokens] = (1 - alpha**(k+1)) / (1 - alpha) exactly."""
    k = 3
    for rule, alpha in ((STOCHASTIC, sum_min(p, q)), (SAMPLER_MATCH, sum_prod(p, q))):
        outcomes = round_outcomes(rule, lambda c: p, lambda c: q, (), (), k)
        tokens = sum((w * len(o.emitted) for o, w in outcomes.items()), ZERO)
        assert tokens == (1 - alpha ** (k + 1)) / (1 - alpha)
