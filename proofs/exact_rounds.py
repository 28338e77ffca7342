"""Exact laws of speculative rounds, computed from the library's own rules.

The exact machinery of the checks of lemmas 1, 2, 5, 6, 7 and part of 8 (see ``proofs/index.md``):
each lemma's checks are in ``proofs/test_<page>.py``, named after its page.

Method. Every random decision of a round is a library call on explicit uniforms, and as a
function of one uniform u it is piecewise constant with rational breakpoints: the accept
test ``u * q(t) <= p(t)`` switches at ``u = p(t) / q(t)``, and an inverse-CDF draw from a
distribution d switches at the partial sums ``(d(0) + ... + d(i)) / sum(d)``. Every table
here is dyadic (multiples of 1/16 or 1/32), so float32 holds it exactly. For each decision
we cut [0, 1) at those breakpoints, computed exactly with ``Fraction``, call the library
once at a float32 point strictly inside each piece, and weight what it returns by the
piece's exact length. That integrates the uniforms exactly, so the law of a round comes
out as a table of Fractions, and it is compared with the target's autoregressive law for
equality, not within a tolerance.
``proofs/test_single_position.py::test_library_decisions_switch_at_the_exact_breakpoints``
checks the premise: the library's float32 decisions change within 2**-20 of those
breakpoints and nowhere else.

Every rule that must be lossless is paired with a wrong variant that these same
functions must catch.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple, TypeAlias, TypeVar

import mlx.core as mx
import numpy as np

from specaccept import (
    AcceptanceRule,
    accept_draft_token,
    sample_from_distribution,
    verify_draft_token,
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


def read_ints(array: mx.array) -> list[int]:
    """The values of an int or bool array (evaluating it)."""
    return [int(x) for x in np.array(array).reshape(-1).tolist()]


def read_one(array: mx.array) -> int:
    (value,) = read_ints(array)
    return value


def draw_law(draw: Draw, d: Dist) -> dict[int, Fraction]:
    """The exact law of ``draw(d, u)`` over a uniform u, one call for all pieces."""
    cells = pieces(cut_points(d))
    tokens = draw(as_float32([d] * len(cells)),
                  mx.array([inside(lo, hi) for lo, hi in cells], dtype=mx.float32))
    law: defaultdict[int, Fraction] = defaultdict(Fraction)
    for (lo, hi), token in zip(cells, read_ints(tokens), strict=True):
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
            verdicts = zip(cells, read_ints(accepted), read_ints(emitted), strict=True)
            for (w, _, _), ok, x in verdicts:
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
# V = 3 tables (lemma 7's rounds; also used by lemma 10's and the float32 draw's checks).

V3_TARGETS = (dist(8, 4, 4), dist(0, 12, 4), dist(2, 2, 12), dist(16, 0, 0), dist(5, 6, 5),
              dist(1, 0, 15))
V3_NOISE = (dist(4, 4, 8), dist(0, 8, 8), dist(12, 4, 0), dist(16, 0, 0))
TARGET3 = table(V3_TARGETS, salt=6)
_NOISE3 = table(V3_NOISE, salt=7)


def mixed_drafter3(context: Tokens) -> Dist:
    """Half the target on the drafter's own context, half noise: good, not perfect."""
    return mean(TARGET3(context), _NOISE3(context))
