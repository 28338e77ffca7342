"""Both KV caches hold exactly the right tokens after every round (mlxcel #994's fix).

Between rounds, with t tokens before the next current token, the target cache
must hold those t tokens and the drafter cache the same t, less the one
backfill it is owed after an all-accepted round. The synthetic models cache the
token ids themselves, so these tests read the caches' *contents* back, not only
their offsets, in the all-reject, mixed and all-accept regimes, and they show
that the generator's own `check_caches` catches a broken rewind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from mlx_lm.models import cache as mlx_lm_cache

import specaccept.shell.generator as generator_module
from specaccept import SamplerConfig
from specaccept.shell.generator import CacheInvariantError, RuleChoice, SpeculativeGenerator
from synthetic_models import (
    KVCache,
    SyntheticLM,
    agree_one_in_six,
    cached_tokens,
    collect,
    cycle_logits,
    markov2_logits,
    mlxcel_rewind,
    never_agree,
    no_backfill,
    random_markov2_table,
    shifted_cycle_logits,
)

VOCAB = 6
GREEDY = SamplerConfig(temperature=0.0)
PROMPT = [4, 1, 5]
RotatingKVCache: Any = mlx_lm_cache.RotatingKVCache

Regime = tuple[SyntheticLM, SyntheticLM, SamplerConfig]


def _regime(name: str) -> Regime:
    cycle = SyntheticLM(VOCAB, cycle_logits(VOCAB))
    if name == "all-reject":
        return cycle, SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, never_agree)), GREEDY
    if name == "mixed-greedy":
        return cycle, SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, agree_one_in_six)), GREEDY
    if name == "all-accept":
        return cycle, SyntheticLM(VOCAB, cycle_logits(VOCAB)), GREEDY
    if name == "mixed-stochastic":
        table = random_markov2_table(VOCAB, 3)
        other = random_markov2_table(VOCAB, 4)
        return (
            SyntheticLM(VOCAB, markov2_logits(table)),
            SyntheticLM(VOCAB, markov2_logits(0.5 * table + 0.5 * other)),
            SamplerConfig(temperature=1.0),
        )
    if name == "all-accept-stochastic":
        # p == q: u * q(t) <= p(t) for every u < 1, so every draft is kept.
        table = random_markov2_table(VOCAB, 5)
        return (
            SyntheticLM(VOCAB, markov2_logits(table)),
            SyntheticLM(VOCAB, markov2_logits(table)),
            SamplerConfig(temperature=1.0),
        )
    raise AssertionError(name)


REGIMES = ["all-reject", "mixed-greedy", "mixed-stochastic", "all-accept", "all-accept-stochastic"]


@pytest.mark.parametrize("k", [1, 3, 4])
@pytest.mark.parametrize("regime", REGIMES)
def test_cache_contents_are_exact_after_every_round(regime: str, k: int) -> None:
    _check_cache_contents(regime, k, "auto")


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("regime", ["mixed-stochastic", "all-accept-stochastic"])
def test_block_verification_rewinds_by_the_kept_length(regime: str, k: int) -> None:
    # Lemma 7 reads only the kept length: under block verification, which can keep drafts
    # behind a position token-by-token verification would reject, rewind_trim(k, tau)
    # leaves both caches on the emitted prefix all the same.
    _check_cache_contents(regime, k, "block")


def _check_cache_contents(regime: str, k: int, rule: RuleChoice) -> None:
    target, drafter, config = _regime(regime)
    generator = SpeculativeGenerator(
        target, drafter, config, num_draft_tokens=k, check_caches=True, rule=rule
    )
    max_tokens = 41
    emitted: list[int] = []
    previous_accepted = previous_proposed = 0
    rounds_checked = 0
    run = generator.generate(PROMPT, max_tokens, seed=11)
    for block in run:
        emitted += block
        stats = run.stats
        round_k = stats.proposed - previous_proposed
        all_accepted = round_k > 0 and stats.accepted - previous_accepted == round_k
        previous_accepted, previous_proposed = stats.accepted, stats.proposed
        if len(emitted) == max_tokens:
            break  # the run is over; nothing is rewound after the last round
        sequence = PROMPT + emitted
        before = len(sequence) - 1  # every token before the next current token
        assert target.last_cache is not None and drafter.last_cache is not None
        assert target.last_cache[0].offset == before
        assert cached_tokens(target.last_cache) == sequence[:before]
        owed = 1 if all_accepted else 0
        assert drafter.last_cache[0].offset == before - owed
        assert cached_tokens(drafter.last_cache) == sequence[: before - owed]
        rounds_checked += 1
    assert len(emitted) == max_tokens
    assert rounds_checked >= 5

    stats = run.stats
    assert rule != "block" or stats.rule.value == "block"
    if regime == "all-reject":
        assert stats.accepted == 0
    elif regime.startswith("all-accept"):
        assert stats.accepted == stats.proposed
    else:
        assert 0 < stats.accepted < stats.proposed


@pytest.mark.parametrize("regime", ["all-accept", "all-accept-stochastic"])
def test_all_accepted_rounds_backfill_the_last_draft(regime: str) -> None:
    # Every round keeps all k drafts and emits k + 1 tokens; the drafter never forwarded
    # the last draft, so the next round must forward [that draft, current] in one call.
    target, drafter, config = _regime(regime)
    k, rounds = 4, 7
    generator = SpeculativeGenerator(target, drafter, config, num_draft_tokens=k, check_caches=True)
    run = generator.generate(PROMPT, rounds * (k + 1), seed=2)
    emitted = collect(run)
    assert len(emitted) == rounds * (k + 1)
    stats = run.stats
    assert (stats.rounds, stats.proposed, stats.accepted) == (rounds, rounds * k, rounds * k)
    prefill = [len(PROMPT) - 1]
    first_round = [1] * k
    later_rounds = ([2] + [1] * (k - 1)) * (rounds - 1)
    assert drafter.forward_sizes == prefill + first_round + later_rounds
    assert target.forward_sizes == prefill + [k + 1] * rounds
    assert drafter.last_cache is not None
    # The drafter cache holds everything but the owed last draft and the final bonus.
    assert cached_tokens(drafter.last_cache) == (PROMPT + emitted)[:-2]


@pytest.mark.parametrize(
    "regime", ["all-reject", "mixed-greedy", "mixed-stochastic", "all-accept"]
)
def test_mlxcel_rewind_formula_trips_the_cache_check(
    regime: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mlxcel before #994 trimmed the drafter min(n - a + 1, n), two too many, and never
    # backfilled (one short after an all-accepted round). The check must catch either
    # after the first round, or it can never fail.
    monkeypatch.setattr(generator_module, "rewind_trim", mlxcel_rewind)
    target, drafter, config = _regime(regime)
    generator = SpeculativeGenerator(target, drafter, config, num_draft_tokens=4, check_caches=True)
    with pytest.raises(CacheInvariantError) as raised:
        collect(generator.generate(PROMPT, 60, seed=1))
    # The target's trim is right; the message pins the drafter as the cache that is off.
    message = re.fullmatch(
        r"after round \d+: (\d+) tokens precede the current token, but the target cache "
        r"holds (\d+) and the drafter cache (\d+) \(\+(\d) owed\)",
        str(raised.value),
    )
    assert message, str(raised.value)
    before, target_offset, draft_offset, owed = map(int, message.groups())
    assert target_offset == before
    assert draft_offset + owed < before  # trimmed too far: the #994 drift


def test_mlxcel_rewind_formula_freezes_the_drafter_at_the_prompt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # #994's symptom, reproduced: with every draft rejected the drafter cache never
    # advances past the prompt while the target's does (checks off, so the run completes).
    monkeypatch.setattr(generator_module, "rewind_trim", mlxcel_rewind)
    target, drafter, config = _regime("all-reject")
    generator = SpeculativeGenerator(target, drafter, config, num_draft_tokens=4)
    blocks = list(generator.generate(PROMPT, 24))
    assert [len(b) for b in blocks] == [1] * 24
    assert target.last_cache is not None and drafter.last_cache is not None
    assert target.last_cache[0].offset == len(PROMPT) + 24 - 1
    assert drafter.last_cache[0].offset == len(PROMPT) - 1


def test_the_generator_obeys_the_plans_backfill_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    # The backfill is the plan's decision, not recomputed beside it: a plan that never
    # backfills leaves the drafter one short after an all-accepted round, and the check
    # says so.
    monkeypatch.setattr(generator_module, "rewind_trim", no_backfill)
    target, drafter, config = _regime("all-accept")
    generator = SpeculativeGenerator(target, drafter, config, num_draft_tokens=4, check_caches=True)
    with pytest.raises(CacheInvariantError):
        collect(generator.generate(PROMPT, 30))


class _FrozenCache(KVCache):  # type: ignore[misc]
    """A KV cache that reports itself non-trimmable, like mlx-lm's ArraysCache."""

    def is_trimmable(self) -> bool:
        return False


def _frozen() -> list[Any]:
    return [_FrozenCache()]


def _rotating() -> list[Any]:
    return [RotatingKVCache(max_size=8)]


CacheFactory = Callable[[], list[Any]]


@pytest.mark.parametrize("which", ["target", "drafter"])
@pytest.mark.parametrize(
    "factory",
    [
        pytest.param(_frozen, id="is_trimmable-false"),
        # Trimmable only until it fills (is_trimmable() is offset < max_size), so an empty
        # one would pass a plain is_trimmable() check; Gemma 3's sliding layers use it.
        pytest.param(_rotating, id="rotating-kv-cache"),
    ],
)
def test_a_non_trimmable_cache_is_refused_at_construction(
    which: str, factory: CacheFactory
) -> None:
    normal = SyntheticLM(VOCAB, cycle_logits(VOCAB))
    odd = SyntheticLM(VOCAB, cycle_logits(VOCAB), cache_factory=factory)
    target, drafter = (odd, normal) if which == "target" else (normal, odd)
    with pytest.raises(ValueError, match="trimmable") as raised:
        SpeculativeGenerator(target, drafter, GREEDY)
    assert which in str(raised.value)
    assert target.forward_calls == drafter.forward_calls == 0  # refused before any work


class _ShortTrimCache(KVCache):  # type: ignore[misc]
    """Claims to be trimmable but trims at most one entry per call."""

    def trim(self, n: int) -> int:
        return int(super().trim(min(n, 1)))


def test_a_cache_that_trims_short_stops_the_run_even_without_checks() -> None:
    # A trim that removes fewer entries than the plan asks for leaves rejected drafts in
    # the context; the generator must refuse to go on, check_caches or not.
    target = SyntheticLM(VOCAB, cycle_logits(VOCAB), cache_factory=lambda: [_ShortTrimCache()])
    drafter = SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, never_agree))
    generator = SpeculativeGenerator(target, drafter, GREEDY, num_draft_tokens=4)
    with pytest.raises(CacheInvariantError, match=r"the target cache trimmed 1 of 4 entries"):
        collect(generator.generate(PROMPT, 20))
