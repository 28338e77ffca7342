"""Lemma 7, the rewind, with list-backed caches, over several rounds: the checks of
``proofs/rewind.md``."""

from __future__ import annotations

import importlib
import types
from collections import defaultdict
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import NamedTuple, TypeAlias

import pytest

from proofs.exact_rounds import (
    ONE,
    SAMPLER_MATCH,
    STOCHASTIC,
    TARGET3,
    ZERO,
    Dist,
    Law,
    Outcome,
    Rule,
    Table,
    Tokens,
    acceptance,
    as_float32,
    assert_lossless,
    cut_points,
    dist,
    draws,
    inside,
    is_lossless,
    mixed_drafter3,
    one_hot,
    pieces,
    position_law,
    read_one,
    round_outcomes,
    sum_prod,
    support,
    total_mass,
)
from specaccept import (
    RewindPlan,
    rewind_trim,
    sample_from_distribution,
)

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
        discarded = read_one(sample_from_distribution(as_float32([AHEAD_FIRST_Q])[0], v))
        q_next = AHEAD_NEXT_Q[discarded]
        redraft = read_one(sample_from_distribution(as_float32([q_next])[0], v))
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
