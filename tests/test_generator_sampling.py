"""Seeded runs: sampler-match replays target-only sampling exactly, and seeds reproduce.

Output position n's target draw reads ``position_uniform(seed, n, SAMPLE)`` in
both `target_only_generate` and a sampler-match round, and the emitted token at
every position is that draw, so with the same seed the two streams must be
identical token for token (the synthetic logits are exact table lookups, so a
batched forward gives the same numbers as a one-token forward).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from specaccept import SamplerConfig
from specaccept.shell.generator import RuleChoice, SpeculativeGenerator
from specaccept.shell.target_only import target_only_generate
from synthetic_models import (
    SyntheticLM,
    collect,
    constant_logits,
    markov2_logits,
    random_markov2_table,
)

VOCAB = 6
PROMPT = [1, 4, 2]
TOKENS = 48
TABLE = random_markov2_table(VOCAB, 21)
OTHER_TABLE = random_markov2_table(VOCAB, 22)

Pair = Callable[[], tuple[SyntheticLM, SyntheticLM]]

PAIRS: dict[str, Pair] = {
    "iid": lambda: (
        SyntheticLM(VOCAB, constant_logits([1.2, 0.4, 0.9, -0.5, 0.0, 0.6])),
        SyntheticLM(VOCAB, constant_logits([0.1, 1.0, 0.9, 0.3, -0.4, 0.2])),
    ),
    "markov2": lambda: (
        SyntheticLM(VOCAB, markov2_logits(TABLE)),
        SyntheticLM(VOCAB, markov2_logits(0.5 * TABLE + 0.5 * OTHER_TABLE)),
    ),
}

CONFIGS = {
    "t1.0": SamplerConfig(temperature=1.0),
    "t0.7-top_p0.9": SamplerConfig(temperature=0.7, top_p=0.9),
    # A history penalty: every verified row must see the drafts before it in its history.
    "t1.0-repetition": SamplerConfig(temperature=1.0, repetition_penalty=1.8),
}

SEEDS = [0, 1, 7, 2024]


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("config_name", sorted(CONFIGS))
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_sampler_match_replays_target_only_sampling(pair: str, config_name: str, k: int) -> None:
    config = CONFIGS[config_name]
    target, drafter = PAIRS[pair]()
    generator = SpeculativeGenerator(
        target, drafter, config, SamplerConfig(temperature=1.0), num_draft_tokens=k,
        rule="sampler-match", check_caches=True,
    )
    accepted = 0
    for seed in SEEDS:
        expected = list(target_only_generate(target, PROMPT, config, TOKENS, seed=seed))
        run = generator.generate(PROMPT, TOKENS, seed=seed)
        assert collect(run) == expected, seed
        assert run.stats.rule.value == "sampler-match"
        accepted += run.stats.accepted
    assert accepted > 0  # some of the stream came from accepted drafts


@pytest.mark.parametrize("config_name", sorted(CONFIGS))
@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_stochastic_runs_are_valid_runs(pair: str, config_name: str) -> None:
    # Stochastic acceptance keeps drafts the target would not have drawn with this seed,
    # so it need not replay target-only sampling; it must still be a well-formed run.
    config = CONFIGS[config_name]
    target, drafter = PAIRS[pair]()
    generator = SpeculativeGenerator(
        target, drafter, config, num_draft_tokens=4, rule="stochastic", check_caches=True
    )
    for seed in SEEDS[:2]:
        run = generator.generate(PROMPT, TOKENS, seed=seed)
        stream = collect(run)
        assert len(stream) == TOKENS
        assert all(0 <= token < VOCAB for token in stream)
        assert run.stats.rule.value == "stochastic"
        assert run.stats.generated == TOKENS


@pytest.mark.parametrize("rule", ["stochastic", "sampler-match"])
def test_a_seed_reproduces_its_stream_and_other_seeds_differ(rule: RuleChoice) -> None:
    streams: dict[int, list[int]] = {}
    for seed in (0, 1, 2):
        runs = []
        for _ in range(2):  # a fresh generator each time, and the same generator again
            target, drafter = PAIRS["markov2"]()
            generator = SpeculativeGenerator(
                target, drafter, CONFIGS["t1.0"], num_draft_tokens=3, rule=rule
            )
            runs.append(collect(generator.generate(PROMPT, 64, seed=seed)))
            runs.append(collect(generator.generate(PROMPT, 64, seed=seed)))
        assert all(run == runs[0] for run in runs), seed
        streams[seed] = runs[0]
    assert streams[0] != streams[1] != streams[2] != streams[0]


def test_the_rule_switch_follows_the_environment_only_under_auto(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target, drafter = PAIRS["iid"]()
    config = CONFIGS["t1.0"]
    assert SpeculativeGenerator(target, drafter, config).acceptance_rule.value == "block"
    monkeypatch.setenv("SPECACCEPT_BLOCK_VERIFY", "off")
    assert SpeculativeGenerator(target, drafter, config).acceptance_rule.value == "stochastic"
    assert SpeculativeGenerator(
        target, drafter, config, rule="block").acceptance_rule.value == "block"
    monkeypatch.setenv("SPECACCEPT_STOCHASTIC_ACCEPT", "off")
    assert SpeculativeGenerator(target, drafter, config).acceptance_rule.value == "sampler-match"
    forced = SpeculativeGenerator(target, drafter, config, rule="stochastic")
    assert forced.acceptance_rule.value == "stochastic"
    greedy_config = SamplerConfig(temperature=0.0)
    greedy = SpeculativeGenerator(target, drafter, greedy_config, rule="stochastic")
    assert greedy.acceptance_rule.value == "greedy-argmax"


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_bad_switch_value_is_an_error_under_auto_only(
    monkeypatch: pytest.MonkeyPatch, temperature: float
) -> None:
    # A typo in the switch must not pass unnoticed because this run happens to be greedy;
    # a rule forced in code does not read the environment at all.
    target, drafter = PAIRS["iid"]()
    config = SamplerConfig(temperature=temperature)
    monkeypatch.setenv("SPECACCEPT_STOCHASTIC_ACCEPT", "maybe")
    with pytest.raises(ValueError, match="SPECACCEPT_STOCHASTIC_ACCEPT must be one of"):
        SpeculativeGenerator(target, drafter, config)
    SpeculativeGenerator(target, drafter, config, rule="sampler-match")
