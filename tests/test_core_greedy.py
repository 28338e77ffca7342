"""Temperature 0: speculative decoding must emit exactly the target's greedy continuation."""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import numpy as np
import pytest

from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    acceptance_rule,
    effective_token_distribution,
    verify_tokenwise,
)

VOCAB = 6


def _target_logits() -> mx.array:
    """Row x: the logits after token x. The greedy successor is (x + 1) % 6, a 6-cycle."""
    rng = np.random.default_rng(0)
    table = rng.normal(size=(VOCAB, VOCAB)).astype(np.float32)
    for x in range(VOCAB):
        table[x, (x + 1) % VOCAB] = 5.0
    table[3, 5] = 5.0  # a tie after 3: the lowest id (4) must win
    return mx.array(table)


TABLE = _target_logits()


def successor(token: int) -> int:
    return (token + 1) % VOCAB


def greedy_rows(config: SamplerConfig, contexts: list[int]) -> mx.array:
    """The target's one-hot laws after each context token, `[len, V]`, from the sampler itself."""
    rows = effective_token_distribution(TABLE[mx.array(contexts)], config)
    return rows


GREEDY_CONFIGS = [SamplerConfig(temperature=0.0), SamplerConfig(temperature=0.7, top_k=1)]


def _config_id(config: SamplerConfig) -> str:
    return f"temperature={config.temperature},top_k={config.top_k}"


def _round(
    config: SamplerConfig, current: int, drafts: list[int], seed: int
) -> tuple[int, int]:
    rule = acceptance_rule(config, drafter_has_distribution=True, stochastic=True)
    assert rule is AcceptanceRule.GREEDY_ARGMAX
    k = len(drafts)
    target = greedy_rows(config, [current, *drafts])  # row i follows prefix + drafts[:i]
    uniforms = mx.random.uniform(shape=(k + 1, 2), key=mx.random.key(seed))  # must not matter
    verdict = verify_tokenwise(rule, target, None, mx.array(drafts), uniforms)
    return int(np.asarray(verdict.num_accepted)), int(np.asarray(verdict.next_token))


def test_the_greedy_rows_are_one_hot_successors() -> None:
    for config in GREEDY_CONFIGS:
        rows = np.array(greedy_rows(config, list(range(VOCAB))))
        np.testing.assert_array_equal(rows, np.eye(VOCAB, dtype=np.float32)[
            [successor(x) for x in range(VOCAB)]
        ])


@pytest.mark.parametrize("config", GREEDY_CONFIGS, ids=_config_id)
@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_a_round_accepts_the_agreeing_prefix_and_emits_the_greedy_token(
    config: SamplerConfig, k: int
) -> None:
    for current in range(VOCAB):
        greedy = [current]
        for _ in range(k + 1):
            greedy.append(successor(greedy[-1]))
        continuation = greedy[1:]
        for agree in range(k + 1):  # drafts agree on the first `agree` positions, then differ
            drafts = continuation[:k]
            if agree < k:
                drafts = [*drafts[:agree], (continuation[agree] + 2) % VOCAB, *drafts[agree + 1:]]
            num_accepted, next_token = _round(config, current, drafts, seed=agree)
            assert num_accepted == agree
            assert next_token == continuation[agree]  # the replacement, or the bonus at k


Drafter = Callable[[int], int]

DRAFTERS: dict[str, Drafter] = {
    "always-agrees": successor,
    "agrees-one-in-six": lambda x: successor(x) if x == 0 else (x + 3) % VOCAB,
    "never-agrees": lambda x: (x + 2) % VOCAB,
}


@pytest.mark.parametrize("config", GREEDY_CONFIGS, ids=_config_id)
@pytest.mark.parametrize("num_draft", [1, 2, 4])
@pytest.mark.parametrize("drafter", list(DRAFTERS), ids=str)
def test_speculative_stream_equals_the_greedy_target_only_stream(
    config: SamplerConfig, num_draft: int, drafter: str
) -> None:
    length, propose = 24, DRAFTERS[drafter]
    expected = [2]
    while len(expected) < length + 1:
        expected.append(successor(expected[-1]))
    emitted: list[int] = [2]  # the prompt's last token; the stream after it is compared
    rounds = 0
    while len(emitted) < length + 1:
        drafts = [propose(emitted[-1])]
        while len(drafts) < num_draft:
            drafts.append(propose(drafts[-1]))  # the drafter conditions on its own drafts
        num_accepted, next_token = _round(config, emitted[-1], drafts, seed=rounds)
        emitted += [*drafts[:num_accepted], next_token]
        rounds += 1
    assert emitted[: length + 1] == expected
    if drafter == "always-agrees":
        assert rounds == -(-length // (num_draft + 1))  # every round emits k + 1 tokens
