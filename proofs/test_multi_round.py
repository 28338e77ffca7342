"""Whole runs, exactly: the checks of lemma 10 (``proofs/multi_round.md``).

The law of the first n tokens of whole runs is `proofs.exact_runs.run_law`'s: every uniform
an interval under its key, conditioned by the decisions that read it (the method is that
module's). These checks run it on history-dependent tables, for every rule, under the
library's `round_keys` and under keys by absolute position, as the reference read them
before; `test_the_enumerated_round_is_the_library_round` pins its round to the library's.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import mlx.core as mx
import pytest

from proofs.exact_block import BLOCK, LAST_KEEP_ONE, UNWEIGHTED_RESIDUAL, Variant
from proofs.exact_rounds import (
    DRAFTER,
    TARGET,
    TARGET3,
    as_float32,
    dist,
    inside,
    mixed_drafter3,
    one_hot,
    table,
    target_law,
)
from proofs.exact_runs import (
    FULL,
    Keying,
    State,
    Table,
    Tokens,
    accept_keys_by_absolute_position,
    draft_keys_by_absolute_position,
    draw,
    position_keyed,
    round_branches,
    run_law,
    total_variation,
)
from proofs.test_block_verification import random_table
from specaccept import AcceptanceRule, sample_from_distribution, verify_blockwise, verify_tokenwise
from specaccept.core.randomness import DRAFT, UniformKey, round_keys

ZERO = Fraction(0)

RULES = (AcceptanceRule.GREEDY_ARGMAX, AcceptanceRule.SAMPLER_MATCH, AcceptanceRule.STOCHASTIC,
         AcceptanceRule.BLOCK)
TOKEN_BY_TOKEN = RULES[:3]


# --------------------------------------------------------------------------------------
# Tables: history-dependent, dyadic (float32 holds them exactly), V = 2 and 3.


@dataclass(frozen=True)
class Pair:
    name: str
    target: Table
    drafter: Table
    one_hot_target: Table
    """A greedy target on the same vocabulary, for greedy-argmax (lossless only there)."""
    vocab: int
    prompt: Tokens = ()


V2_TARGETS = (dist(8, 8), dist(4, 12), dist(14, 2), dist(16, 0), dist(11, 5))
V2_DRAFTERS = (dist(12, 4), dist(2, 14), dist(8, 8), dist(0, 16))


def pairs() -> list[Pair]:
    """Two pools hashed on the whole context, lemma 7's V = 3 pair (a drafter half target,
    half noise), and two random history-dependent pairs of lemma 9's check."""
    rng = random.Random(10)
    rng_tables = [Pair(f"random V={vocab}", random_table(vocab, rng), random_table(vocab, rng),
                       table([one_hot(x, vocab) for x in (1, 0, vocab - 1)], salt=5), vocab)
                  for vocab in (2, 3)]
    return [
        Pair("V=2 pools", table(V2_TARGETS, salt=8), table(V2_DRAFTERS, salt=9),
             table([one_hot(x, 2) for x in (0, 1, 1)], salt=10), 2, (1,)),
        Pair("V=3 lemma 7 pair", TARGET3, mixed_drafter3,
             table([one_hot(x, 3) for x in (2, 0, 1, 1)], salt=11), 3),
        *rng_tables,
    ]


PAIRS = pairs()


# --------------------------------------------------------------------------------------
# The enumerator pinned to the code.


def as_int(array: mx.array) -> int:
    value = array.item()
    assert isinstance(value, int), value
    return value


def library_round(rule: AcceptanceRule, target: Table, drafter: Table, context: Tokens,
                  draft_uniforms: Sequence[float],
                  verify_uniforms: Sequence[Sequence[float]]) -> tuple[Tokens, Tokens]:
    """What the generator's round does with these uniforms: each draft drawn with
    `sample_from_distribution` from the drafter's row, then `verify_tokenwise` (token-by-token
    rules) or `verify_blockwise` (block); returns (drafts, emitted block)."""
    drafts: Tokens = ()
    for u in draft_uniforms:
        row = as_float32([drafter(context + drafts)])[0]
        drafts = (*drafts, as_int(sample_from_distribution(row, u)))
    k = len(drafts)
    target_probs = as_float32([target(context + drafts[:i]) for i in range(k + 1)])
    draft_probs = as_float32([drafter(context + drafts[:i]) for i in range(k)])
    tokens = mx.array(list(drafts), dtype=mx.int32)
    uniforms = mx.array([list(row) for row in verify_uniforms], dtype=mx.float32)
    if rule.verifies_jointly:
        joint = verify_blockwise(target_probs, draft_probs, tokens, uniforms)
        accepted, nxt = joint.num_accepted, joint.next_token
    else:
        accepted, nxt = verify_tokenwise(rule, target_probs, draft_probs, tokens, uniforms)
    a = as_int(accepted)
    return drafts, (*drafts[:a], as_int(nxt))


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.value)
def test_the_enumerated_round_is_the_library_round(rule: AcceptanceRule) -> None:
    """Every branch of the enumerated round, on every pair at k = 2 (and k = 3 on one), is
    what the library's draw and verifier return at a float32 point inside the intervals the
    branch conditions its keys to (keys it does not read at 1/2): the enumerator restates the
    code, decision for decision. The branches' weights sum to 1."""
    for pair, k in [*((pair, 2) for pair in PAIRS), (PAIRS[1], 3)]:
        target = pair.one_hot_target if rule is AcceptanceRule.GREEDY_ARGMAX else pair.target
        keys = round_keys(1, k)
        branches = list(round_branches(rule, target, pair.drafter, pair.prompt, keys, {}))
        assert sum((b.weight for b in branches), ZERO) == 1
        for branch in branches:

            def value(key: UniformKey, state: State = branch.state) -> float:
                return inside(*state.get(key, FULL))

            got = library_round(rule, target, pair.drafter, pair.prompt,
                                [value(key) for key in keys.draft],
                                [[value(key) for key in row] for row in keys.verify])
            assert got == (branch.drafts, branch.emitted), (pair.name, k, branch)


# --------------------------------------------------------------------------------------
# Lemma 10.

LENGTHS_AND_DRAFTS = [(3, 2), (3, 3), (4, 2), (4, 3)]
"""(n, k_max): the first n tokens of runs of rounds of up to k_max drafts (n = 3 with
k_max = 3 drafts 2 in its first round, as the generator's schedule does)."""


def lossless_distance(rule: AcceptanceRule, pair: Pair, length: int, k_max: int,
                      keying: Keying) -> Fraction:
    """TV between a run's first `length` tokens and the target's own law of them."""
    target = pair.one_hot_target if rule is AcceptanceRule.GREEDY_ARGMAX else pair.target
    law = run_law(rule, target, pair.drafter, pair.prompt, k_max, length, keying)
    return total_variation(law, target_law(target, pair.prompt, length))


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.value)
def test_every_rule_is_lossless_over_whole_runs_under_round_keys(rule: AcceptanceRule) -> None:
    """Lemma 10: under the library's `round_keys`, the first n tokens of a run have exactly
    the target's law, for every rule, on four history-dependent pairs (V = 2, 3), n = 3, 4
    and k_max = 2, 3 (greedy-argmax on greedy targets)."""
    for pair in PAIRS:
        for length, k_max in LENGTHS_AND_DRAFTS:
            assert lossless_distance(rule, pair, length, k_max, round_keys) == 0, (
                pair.name, length, k_max)


CONSTANT_TARGET = (Fraction(1, 2), Fraction(1, 2))
"""softmax of logits (0, 0)."""
CONSTANT_DRAFTER = (Fraction(3, 4), Fraction(1, 4))
"""softmax of logits (ln 3, 0)."""


def test_block_verification_under_absolute_position_keys_is_biased() -> None:
    """The smallest counterexample: p = (1/2, 1/2) and q = (3/4, 1/4) at every position,
    k = 2, the first 3 tokens. Keyed by absolute position, each sequence starting 10 has
    probability 9/80 = 0.1125 and each starting 11 has 11/80 = 0.1375 (the target: 1/8 each),
    a total variation of 1/40; under `round_keys` the law is the target's."""
    pair = Pair("constant", lambda c: CONSTANT_TARGET, lambda c: CONSTANT_DRAFTER,
                lambda c: one_hot(0, 2), 2)
    law = run_law(AcceptanceRule.BLOCK, pair.target, pair.drafter, (), 2, 3,
                  position_keyed)
    expected = {s: Fraction(1, 8) for s in itertools.product((0, 1), repeat=3)}
    expected.update({(1, 0, 0): Fraction(9, 80), (1, 0, 1): Fraction(9, 80),
                     (1, 1, 0): Fraction(11, 80), (1, 1, 1): Fraction(11, 80)})
    assert law == expected
    assert lossless_distance(AcceptanceRule.BLOCK, pair, 3, 2, position_keyed) == (
        Fraction(1, 40))
    assert lossless_distance(AcceptanceRule.BLOCK, pair, 3, 2, round_keys) == 0
    # Either slot alone keyed by position biases the stream: both must be fresh.
    assert lossless_distance(AcceptanceRule.BLOCK, pair, 3, 2,
                             accept_keys_by_absolute_position) == Fraction(1, 20)
    assert lossless_distance(AcceptanceRule.BLOCK, pair, 3, 2,
                             draft_keys_by_absolute_position) == Fraction(1, 24)


def test_block_verification_under_absolute_position_keys_is_biased_on_history_dependent_pairs(
) -> None:
    """The bias is not an accident of constant models: under absolute-position keys block
    verification's runs leave the target's law on every history-dependent pair, for n = 4,
    k_max = 3, and on most (n, k_max)."""
    biased = [(pair.name, length, k_max) for pair in PAIRS for length, k_max in LENGTHS_AND_DRAFTS
              if lossless_distance(AcceptanceRule.BLOCK, pair, length, k_max,
                                   position_keyed) > 0]
    assert {name for name, length, k_max in biased if (length, k_max) == (4, 3)} == {
        pair.name for pair in PAIRS}
    assert len(biased) >= 3 * len(PAIRS)


@pytest.mark.parametrize("rule", TOKEN_BY_TOKEN, ids=lambda r: r.value)
def test_token_by_token_rules_stay_lossless_under_absolute_position_keys(
        rule: AcceptanceRule) -> None:
    """Whole-round requirement 4 (lemma 6), as a fact: a token-by-token round's output and
    its stopping point read the uniforms of positions up to that point only (a stopping
    time), so the re-read keys were never conditioned, and position keying is lossless for
    these rules, on every pair and (n, k_max) of the lemma-10 check and the constant pair."""
    constant = Pair("constant", lambda c: CONSTANT_TARGET, lambda c: CONSTANT_DRAFTER,
                    lambda c: one_hot(0, 2), 2)
    for pair in (*PAIRS, constant):
        for length, k_max in LENGTHS_AND_DRAFTS:
            for keying in (position_keyed, accept_keys_by_absolute_position,
                           draft_keys_by_absolute_position):
                assert lossless_distance(rule, pair, length, k_max, keying) == 0, (
                    pair.name, length, k_max, keying.__name__)


def test_a_key_read_twice_keeps_its_interval() -> None:
    """The enumerator's premise: a second read of one key sees the value the first read
    conditioned (two draws from one distribution with one key agree), and a fresh key does
    not (the two draws are independent)."""
    d = (Fraction(1, 4), Fraction(3, 4))
    key, other = UniformKey(DRAFT, 0, 0), UniformKey(DRAFT, 1, 0)
    for second_key, expected in [
        (key, {(0, 0): Fraction(1, 4), (1, 1): Fraction(3, 4)}),
        (other, {(x, y): d[x] * d[y] for x in (0, 1) for y in (0, 1)}),
    ]:
        law: defaultdict[tuple[int, int], Fraction] = defaultdict(Fraction)
        for x, w, state in draw({}, key, d):
            for y, w2, _ in draw(state, second_key, d):
                law[(x, y)] += w * w2
        assert dict(law) == expected


def test_the_whole_run_check_rejects_wrong_rules() -> None:
    """The lemma-10 check has power against the rules, not only against the keying: under
    `round_keys`, lemma 9's wrong block variants and greedy-argmax on a tempered target leave
    the target's law: h_k = 1 on every pair; the residual without w_tau on lemma 6's V = 4
    pair after the prompt (3, 0) (TV 1/208: with V <= 3 and these tables the two residuals
    normalise alike); greedy-argmax on some pair."""

    def distance(pair: Pair, length: int, k_max: int, variant: Variant) -> Fraction:
        law = run_law(AcceptanceRule.BLOCK, pair.target, pair.drafter, pair.prompt, k_max,
                      length, round_keys, variant)
        return total_variation(law, target_law(pair.target, pair.prompt, length))

    assert all(distance(pair, 3, 2, LAST_KEEP_ONE) > 0 for pair in PAIRS)
    lemma6 = Pair("lemma 6 V=4", TARGET, DRAFTER, TARGET, 4, (3, 0))
    assert distance(lemma6, 3, 2, UNWEIGHTED_RESIDUAL) == Fraction(1, 208)
    assert distance(lemma6, 3, 2, BLOCK) == 0
    tempered = [Pair(p.name, p.target, p.drafter, p.target, p.vocab, p.prompt) for p in PAIRS]
    assert any(lossless_distance(AcceptanceRule.GREEDY_ARGMAX, pair, 3, 2, round_keys) > 0
               for pair in tempered)
