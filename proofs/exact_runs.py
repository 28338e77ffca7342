"""Whole speculative runs, exactly: the one enumerator of their law under any keying.

A run of n tokens is a sequence of rounds; the round that starts at output position m drafts
k = min(k_max, n - m - 1) tokens (the generator's schedule; k = 0 is the last target step),
reads the uniforms the keying names for (m, k), emits its block, and the next round starts
after it. `run_law` enumerates, in ``Fraction`` arithmetic, the law of the n tokens of such
runs, for every rule, on any history-dependent tables, under the library's `round_keys` or
any wrong keying (those below are the ones the checks use). Lemma 10's checks
(``proofs/test_multi_round.py``) prove with it that round keys make every rule lossless and
that position keys bias block verification; the generator's chi-square tests
(``tests/test_generator_keying_chisquare.py``) compute their power against each wrong
keying from it, and check that the generator keyed wrongly emits the law it predicts.

Method. Every uniform is a continuous U[0, 1) variable named by its key. Every decision of
every rule is a threshold test on one uniform (the stochastic accept test, block
verification's keep test) or an inverse-CDF draw from one uniform (drafts, residuals, the
target's draws), so the set of uniforms that leads to one path of decisions is a product of
intervals: the enumerator carries, for each key read so far, the interval of values that
path has conditioned it to, and branches on every decision by intersecting that interval
with the decision's cells. Each branch's probability is its interval's share, exactly. A key
read again keeps its interval, which is where position keying's bias comes from; a key never
read starts at [0, 1). States that differ only in keys no later round can read are merged,
which is what keeps the enumeration to a few seconds.

The per-round step is pinned to the code:
``proofs/test_multi_round.py::test_the_enumerated_round_is_the_library_round`` runs the
library's draw and verifiers at a float32 point inside every enumerated branch's intervals
and requires the branch's outcome.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import NamedTuple, TypeAlias

from proofs.exact_block import BLOCK, Variant, exact_round
from proofs.exact_rounds import Dist, Law, Table, Tokens, residual, target_law
from specaccept import AcceptanceRule
from specaccept.core.randomness import (
    ACCEPT,
    DRAFT,
    SAMPLE,
    RoundKeys,
    UniformKey,
    round_keys,
)

__all__ = [
    "FULL",
    "Dist",
    "Keying",
    "Law",
    "RoundBranch",
    "State",
    "Table",
    "Tokens",
    "accept_keyed_by_offset",
    "accept_keys_by_absolute_position",
    "draft_keys_by_absolute_position",
    "draw",
    "position_keyed",
    "round_branches",
    "run_law",
    "sample_keyed_by_offset",
    "schedule",
    "target_law",
    "total_variation",
]

Interval: TypeAlias = tuple[Fraction, Fraction]
State: TypeAlias = Mapping[UniformKey, Interval]
"""The interval each key read so far is conditioned to; a key not in it is on [0, 1)."""
Keying: TypeAlias = Callable[[int, int], RoundKeys]
"""(round position, number of drafts) -> the keys that round reads."""

ZERO, ONE = Fraction(0), Fraction(1)
FULL: Interval = (ZERO, ONE)


# --------------------------------------------------------------------------------------
# Wrong keyings: each lets a later round re-read a uniform an earlier round's outcome was
# conditioned on. Only the identity of the keys matters to the law, not their values.


def position_keyed(round_position: int, num_drafts: int) -> RoundKeys:
    """The keying before round keys: every slot keyed by absolute output position.

    Row i of a round starting at n reads (ACCEPT, n + i) and (SAMPLE, n + i), draft j
    reads (DRAFT, n + j): a round that keeps tau < k drafts leaves the uniforms of
    offsets > tau, which its tau was conditioned on, to the next round. (The mutant
    `round-keys-by-absolute-position` of ``.ci/mutants.py`` makes `round_keys` this keying
    with offset 0 for None: other values, the same keys shared between rounds, the same law.)
    """
    draft = [UniformKey(DRAFT, round_position + j, None) for j in range(num_drafts)]
    verify = [[UniformKey(ACCEPT, round_position + i, None),
               UniformKey(SAMPLE, round_position + i, None)] for i in range(num_drafts + 1)]
    return RoundKeys(draft, verify)


def accept_keys_by_absolute_position(round_position: int, num_drafts: int) -> RoundKeys:
    """Round keys, except the accept tests: keyed by absolute position, as `position_keyed`."""
    keys, by_position = round_keys(round_position, num_drafts), position_keyed(
        round_position, num_drafts)
    verify = [[accept, sample] for (_, sample), (accept, _) in
              zip(keys.verify, by_position.verify, strict=True)]
    return RoundKeys(keys.draft, verify)


def draft_keys_by_absolute_position(round_position: int, num_drafts: int) -> RoundKeys:
    """Round keys, except the drafts: keyed by absolute position, as `position_keyed`."""
    return RoundKeys(position_keyed(round_position, num_drafts).draft,
                     round_keys(round_position, num_drafts).verify)


def accept_keyed_by_offset(round_position: int, num_drafts: int) -> RoundKeys:
    """The library's keys, except that the accept tests forget the round: (ACCEPT, 0, i).

    Every round re-reads the accept uniforms of the first, which its own past
    accept decisions conditioned: a bug position keying does not have, and one that
    breaks the token-by-token rules too.
    """
    keys = round_keys(round_position, num_drafts)
    verify = [[UniformKey(ACCEPT, 0, i), row[1]] for i, row in enumerate(keys.verify)]
    return RoundKeys(keys.draft, verify)


def sample_keyed_by_offset(round_position: int, num_drafts: int) -> RoundKeys:
    """The library's keys, except that the target's draws forget the round: (SAMPLE, i).

    Every round re-reads the target-draw uniforms of the first round's offsets: the
    one bug of keying sampler-match can have, since its emitted tokens read nothing else.
    """
    keys = round_keys(round_position, num_drafts)
    verify = [[row[0], UniformKey(SAMPLE, i, None)] for i, row in enumerate(keys.verify)]
    return RoundKeys(keys.draft, verify)


# --------------------------------------------------------------------------------------
# Decisions on one uniform, as branches over its conditioned interval.


class Branch(NamedTuple):
    """One outcome of a decision: its conditional probability and the state after it."""

    outcome: int
    weight: Fraction
    state: State


def split(state: State, key: UniformKey,
          cells: Sequence[tuple[int, Fraction, Fraction]]) -> list[Branch]:
    """Branch on the uniform `key`: cell (outcome, lo, hi) is the outcome for u in [lo, hi).
    The cells partition [0, 1); each branch's weight is the share of the key's current
    interval that falls in its cell, and the key is conditioned to that intersection."""
    lo0, hi0 = state.get(key, FULL)
    out = []
    for outcome, lo, hi in cells:
        a, b = max(lo, lo0), min(hi, hi0)
        if a < b:
            out.append(Branch(outcome, (b - a) / (hi0 - lo0), {**state, key: (a, b)}))
    return out


def draw(state: State, key: UniformKey, weights: Dist) -> list[Branch]:
    """`sample_from_distribution(weights, u)`: id x for u in [S_{x-1} / S, S_x / S), S the
    partial sums; ids of zero weight have empty cells."""
    total = sum(weights, ZERO)
    cells, below = [], ZERO
    for x, w in enumerate(weights):
        if w:
            cells.append((x, below / total, (below + w) / total))
            below += w
    return split(state, key, cells)


def passes_below(state: State, key: UniformKey, threshold: Fraction) -> list[Branch]:
    """A test that passes (outcome 1) for u <= threshold: cell [0, threshold), the rest fails;
    the boundary has probability zero."""
    t = min(max(threshold, ZERO), ONE)
    return split(state, key, [(1, ZERO, t), (0, t, ONE)])


def argmax(p: Dist) -> int:
    """The lowest id of largest probability, as `mx.argmax`."""
    return max(range(len(p)), key=lambda x: (p[x], -x))


# --------------------------------------------------------------------------------------
# One round, rule by rule: the core's rules restated on exact rationals.


class RoundBranch(NamedTuple):
    weight: Fraction
    state: State
    drafts: Tokens
    emitted: Tokens


def verify_token_by_token(rule: AcceptanceRule, state: State, ps: Sequence[Dist],
                          qs: Sequence[Dist], drafts: Tokens,
                          keys: Sequence[Sequence[UniformKey]],
                          ) -> Iterator[tuple[Fraction, State, Tokens]]:
    """`verify_tokenwise` for greedy-argmax, sampler-match and stochastic: verify position i with
    keys[i] = (accept key, sample key), stop at the first rejection, bonus from row k."""
    k = len(drafts)

    def at(i: int, weight: Fraction, st: State) -> Iterator[tuple[Fraction, State, Tokens]]:
        if i == k:  # every draft kept: the bonus, from p_k
            if rule is AcceptanceRule.GREEDY_ARGMAX:
                yield weight, st, (*drafts, argmax(ps[k]))
            else:
                for y, w, st2 in draw(st, keys[k][1], ps[k]):
                    yield weight * w, st2, (*drafts, y)
            return
        p, x = ps[i], drafts[i]
        if rule is AcceptanceRule.GREEDY_ARGMAX:
            y = argmax(p)
            if y == x:
                yield from at(i + 1, weight, st)
            else:
                yield weight, st, (*drafts[:i], y)
        elif rule is AcceptanceRule.SAMPLER_MATCH:
            for y, w, st2 in draw(st, keys[i][1], p):
                if y == x:
                    yield from at(i + 1, weight * w, st2)
                else:
                    yield weight * w, st2, (*drafts[:i], y)
        else:  # stochastic: keep iff p(x) > 0 and u_a q(x) <= p(x); else the residual
            q = qs[i]
            threshold = ZERO if p[x] == 0 else ONE if q[x] == 0 else p[x] / q[x]
            for kept, w, st2 in passes_below(st, keys[i][0], threshold):
                if kept:
                    yield from at(i + 1, weight * w, st2)
                else:
                    for y, wy, st3 in draw(st2, keys[i][1], residual(p, q)):
                        yield weight * w * wy, st3, (*drafts[:i], y)

    yield from at(0, ONE, state)


def verify_jointly(state: State, ps: Sequence[Dist], qs: Sequence[Dist], drafts: Tokens,
                   keys: Sequence[Sequence[UniformKey]], variant: Variant = BLOCK,
                   ) -> Iterator[tuple[Fraction, State, Tokens]]:
    """`verify_blockwise`: position i keeps X_1..X_i iff h_i > 0 and eta_i <= h_i, with
    eta_i the accept key of row i - 1; tau is the largest such i; the next token is drawn from
    row tau of the exact rule (`exact_round` of lemma 9's check) with row tau's sample key.

    The tests are read from i = k down: tau = i as soon as test i passes, so the tests below
    it are not read (the outcome does not depend on them); every test above it was read, and
    failed, and the state keeps that. `variant` swaps in one of lemma 9's wrong variants
    (those that keep the longest passing prefix)."""
    assert variant.longest_prefix
    k = len(drafts)
    exact = exact_round(ps, qs, drafts, variant)

    def from_top(i: int, weight: Fraction, st: State) -> Iterator[tuple[Fraction, State, Tokens]]:
        if i == 0:
            yield from finish(0, weight, st)
            return
        h = exact.keep[i - 1]
        for passed, w, st2 in passes_below(st, keys[i - 1][0], h if h > 0 else ZERO):
            if passed:
                yield from finish(i, weight * w, st2)
            else:
                yield from from_top(i - 1, weight * w, st2)

    def finish(tau: int, weight: Fraction, st: State) -> Iterator[tuple[Fraction, State, Tokens]]:
        for y, w, st2 in draw(st, keys[tau][1], exact.rows[tau]):
            yield weight * w, st2, (*drafts[:tau], y)

    yield from from_top(k, ONE, state)


def round_branches(rule: AcceptanceRule, target: Table, drafter: Table, context: Tokens,
                   keys: RoundKeys, state: State, variant: Variant = BLOCK,
                   ) -> Iterator[RoundBranch]:
    """Every outcome of one round: k drafts drawn from the drafter by inverse CDF with the
    draft keys, the target's k + 1 rows on the drafted prefixes, then the rule's verdict."""
    k = len(keys.draft)

    def drafted(j: int, weight: Fraction, st: State,
                drafts: Tokens) -> Iterator[tuple[Fraction, State, Tokens]]:
        if j == k:
            yield weight, st, drafts
            return
        for x, w, st2 in draw(st, keys.draft[j], drafter(context + drafts)):
            yield from drafted(j + 1, weight * w, st2, (*drafts, x))

    for weight, st, drafts in drafted(0, ONE, state, ()):
        ps = [target(context + drafts[:i]) for i in range(k + 1)]
        qs = [drafter(context + drafts[:i]) for i in range(k)]
        verdicts = (verify_jointly(st, ps, qs, drafts, keys.verify, variant)
                    if rule.verifies_jointly
                    else verify_token_by_token(rule, st, ps, qs, drafts, keys.verify))
        for w, st2, emitted in verdicts:
            yield RoundBranch(weight * w, st2, drafts, emitted)


# --------------------------------------------------------------------------------------
# Whole runs.


def schedule(k_max: int, length: int, position: int) -> int:
    """The generator's number of drafts for the round at `position` of a `length`-token run."""
    return min(k_max, length - position - 1)


def run_law(rule: AcceptanceRule, target: Table, drafter: Table, prompt: Sequence[int],
            k_max: int, length: int, keying: Keying = round_keys, variant: Variant = BLOCK,
            ) -> Law:
    """The exact law of the first `length` tokens of a run after `prompt`, rounds keyed by
    `keying` (default: the library's); `variant` swaps in one of lemma 9's wrong block
    verifications."""
    start = tuple(prompt)
    # The keys a round at position m >= g can read: a state entry outside them is dead.
    readable = [frozenset(key for m in range(g, length)
                          for keys in [keying(m, schedule(k_max, length, m))]
                          for key in (*keys.draft, *itertools.chain(*keys.verify)))
                for g in range(length + 1)]
    memo: dict[tuple[Tokens, frozenset[tuple[UniformKey, Interval]]], Law] = {}

    def rest(emitted: Tokens, state: State) -> Law:
        g = len(emitted)
        if g == length:
            return {(): ONE}
        live = {key: interval for key, interval in state.items() if key in readable[g]}
        memo_key = (emitted, frozenset(live.items()))
        if memo_key in memo:
            return memo[memo_key]
        k = schedule(k_max, length, g)
        keys = keying(g, k)
        context = start + emitted
        law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
        if k == 0:  # one token left: a plain target step with the round's sample key
            blocks = [RoundBranch(w, st, (), (y,))
                      for y, w, st in draw(live, keys.verify[0][1], target(context))]
        else:
            blocks = list(round_branches(rule, target, drafter, context, keys, live, variant))
        for branch in blocks:
            for tail, w in rest(emitted + branch.emitted, branch.state).items():
                law[branch.emitted + tail] += branch.weight * w
        memo[memo_key] = dict(law)
        return memo[memo_key]

    law = rest((), {})
    assert sum(law.values(), ZERO) == 1
    return law


def total_variation(a: Mapping[Tokens, Fraction], b: Mapping[Tokens, Fraction]) -> Fraction:
    return sum((abs(a.get(s, ZERO) - b.get(s, ZERO)) for s in set(a) | set(b)), ZERO) / 2
