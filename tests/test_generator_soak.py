"""Soak: 2,000 tokens under each rule on the demo pair, both caches checked after every round.

Long runs are where a cache that drifts by one entry per thousand rounds, or a counter that
overflows a window, would show. Each run asserts the cache invariant every round
(`check_caches=True` raises `CacheInvariantError` at the first round it fails), emits exactly
the tokens asked for, synchronises once per round, and, for the greedy target, reproduces
target-only decoding token for token over its first 100 tokens. The demo pair was trained on
256-token contexts, so the text past that is noise; the caches and the bookkeeping must
still be exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from specaccept import SamplerConfig, SpeculativeGenerator, load_pair, target_only_generate

pytestmark = pytest.mark.slow

TOKENS = 2_000
GREEDY_REFERENCE = 100


@pytest.fixture(scope="module")
def pair() -> Any:
    return load_pair()


@pytest.mark.parametrize(
    ("rule", "temperature", "expected_rule"),
    [("auto", 0.0, "greedy-argmax"), ("sampler-match", 0.8, "sampler-match"),
     ("stochastic", 0.8, "stochastic")],
)
def test_a_long_run_keeps_both_caches_exact(
    pair: Any, rule: Any, temperature: float, expected_rule: str
) -> None:
    prompt = pair.tokenizer.encode("ROMEO:\n")
    config = SamplerConfig(temperature=temperature)
    generator = SpeculativeGenerator(
        pair.target, pair.drafter, config, num_draft_tokens=4, rule=rule, check_caches=True
    )
    run = generator.generate(prompt, TOKENS, seed=7)
    stream = [token for block in run for token in block]
    stats = run.stats
    assert stats.rule.value == expected_rule
    assert len(stream) == stats.generated == TOKENS
    assert all(0 <= token < generator.vocab_size for token in stream)
    assert stats.host_syncs == stats.rounds
    assert stats.accepted > 0 and stats.positions_tested <= stats.proposed
    if temperature == 0.0:
        # Greedy speculation reproduces target-only decoding; a prefix keeps the soak cheap.
        prefix = list(target_only_generate(pair.target, prompt, config, GREEDY_REFERENCE))
        assert stream[:GREEDY_REFERENCE] == prefix
