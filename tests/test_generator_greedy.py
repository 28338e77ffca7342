"""Temperature 0: the speculative stream is the target's own greedy stream, token for token.

A greedy target makes the output a deterministic function of the target alone,
so any drafter, any k and any acceptance pattern must reproduce
`target_only_generate` exactly; one differing token fails. The synthetic
6-cycle target makes the expected stream known in closed form, and real
random-weight mlx-lm Llama models check the same against mlx-lm's own
`speculative_generate_step`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten, tree_unflatten

from specaccept import SamplerConfig
from specaccept.shell.generator import SpeculativeGenerator
from specaccept.shell.target_only import target_only_generate
from synthetic_models import (
    SyntheticLM,
    agree_one_in_six,
    collect,
    constant_logits,
    cycle_logits,
    never_agree,
    shifted_cycle_logits,
)

VOCAB = 6
GREEDY = SamplerConfig(temperature=0.0)
PROMPT = [2, 3]


def _cycle_target() -> SyntheticLM:
    return SyntheticLM(VOCAB, cycle_logits(VOCAB))


DRAFTERS: dict[str, Callable[[], SyntheticLM]] = {
    "agrees-one-in-six": lambda: SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, agree_one_in_six)),
    "never-agrees": lambda: SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, never_agree)),
    "identical": _cycle_target,
}


def _expected_cycle(start: int, count: int) -> list[int]:
    return [(start + 1 + i) % VOCAB for i in range(count)]


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("drafter_name", sorted(DRAFTERS))
def test_greedy_stream_equals_target_only_on_the_6_cycle(k: int, drafter_name: str) -> None:
    target, drafter = _cycle_target(), DRAFTERS[drafter_name]()
    count = 40
    expected = list(target_only_generate(target, PROMPT, GREEDY, count))
    assert expected == _expected_cycle(PROMPT[-1], count)

    generator = SpeculativeGenerator(
        target, drafter, GREEDY, num_draft_tokens=k, check_caches=True
    )
    run = generator.generate(PROMPT, count)
    assert collect(run) == expected

    stats = run.stats
    assert stats.rule.value == "greedy-argmax"
    if drafter_name == "never-agrees":
        assert stats.accepted == 0
    elif drafter_name == "identical":
        assert stats.accepted == stats.proposed > 0
    else:
        # Only the draft after a 0 is right: each round tests one or two drafts.
        assert 0 < stats.accepted < stats.positions_tested


@pytest.mark.parametrize("k", [1, 4])
def test_greedy_target_with_a_sampling_drafter_still_emits_the_greedy_stream(k: int) -> None:
    # The drafter samples at temperature 1 from its own random-ish law; greedy-argmax
    # keeps a draft only when it is the target's argmax, so the output cannot move.
    target = _cycle_target()
    drafter = SyntheticLM(VOCAB, constant_logits([0.3, 0.1, -0.2, 0.5, 0.0, 0.2]))
    generator = SpeculativeGenerator(
        target, drafter, GREEDY, SamplerConfig(temperature=1.0), num_draft_tokens=k,
        check_caches=True,
    )
    accepted = 0
    for seed in range(3):
        run = generator.generate(PROMPT, 30, seed=seed)
        assert collect(run) == _expected_cycle(3, 30)
        accepted += run.stats.accepted
    assert accepted > 0


# Real mlx-lm models: random-weight Llamas of the same architecture.

LLAMA_PROMPT = [3, 17, 5, 9, 1]
LLAMA_TOKENS = 24
WEIGHT_STD = 0.5
"""Weights drawn N(0, 0.5^2): the default init with tied embeddings just repeats the
last token, which would make every drafter agree and test nothing."""


def _llama(seed: int, *, base: Any = None, noise: float = 0.0) -> Any:
    """A 2-layer Llama, vocab 32; `base` given: its weights plus `noise` times fresh ones."""
    from mlx_lm.models.llama import Model, ModelArgs

    model = Model(
        ModelArgs(
            model_type="llama", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
            num_attention_heads=4, rms_norm_eps=1e-5, vocab_size=32, num_key_value_heads=4,
            tie_word_embeddings=True,
        )
    )
    flat = cast(list[tuple[str, mx.array]], tree_flatten(model.parameters()))
    base_weights = (
        dict(cast(list[tuple[str, mx.array]], tree_flatten(base.parameters()))) if base else {}
    )
    keys = mx.random.split(mx.random.key(seed), len(flat))
    weights = []
    for i, (name, value) in enumerate(flat):
        if "norm" in name:
            weights.append((name, value))
            continue
        fresh = mx.random.normal(value.shape, key=keys[i]) * WEIGHT_STD
        weights.append((name, base_weights[name] + noise * fresh if base else fresh))
    model.update(tree_unflatten(weights))
    mx.eval(model.parameters())
    return model


@pytest.fixture(scope="module")
def llamas() -> dict[str, Any]:
    target = _llama(1)
    return {
        "target": target,
        "identical": _llama(1),  # same weights: the all-accept regime
        "perturbed": _llama(7, base=target, noise=0.08),  # agrees often: mixed
        "unrelated": _llama(2),  # agrees by chance: mostly all-reject
    }


def test_the_llama_target_stream_is_not_degenerate(llamas: dict[str, Any]) -> None:
    # Guards the parity tests below: a varied stream whose argmax margins dwarf the
    # float noise of a batched forward (so parity is exact, not lucky).
    target = llamas["target"]
    stream = list(target_only_generate(target, LLAMA_PROMPT, GREEDY, LLAMA_TOKENS))
    assert len(set(stream)) >= 10
    logits = target(mx.array([LLAMA_PROMPT + stream[:-1]]))[0, len(LLAMA_PROMPT) - 1 :]
    top2 = mx.sort(logits, axis=-1)[:, -2:]
    margin = (top2[:, 1] - top2[:, 0]).min().item()
    assert isinstance(margin, float) and margin > 1e-3


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("drafter_name", ["identical", "perturbed", "unrelated"])
def test_greedy_stream_equals_mlx_lm_speculative_generate_step(
    llamas: dict[str, Any], drafter_name: str, k: int
) -> None:
    from mlx_lm.generate import speculative_generate_step

    target, drafter = llamas["target"], llamas[drafter_name]
    reference = [
        int(token)
        for token, _, _ in speculative_generate_step(
            mx.array(LLAMA_PROMPT, dtype=mx.uint32), target, drafter,
            num_draft_tokens=k, max_tokens=LLAMA_TOKENS,
        )
    ]
    generator = SpeculativeGenerator(
        target, drafter, GREEDY, num_draft_tokens=k, check_caches=True
    )
    run = generator.generate(LLAMA_PROMPT, LLAMA_TOKENS)
    ours = collect(run)
    assert ours == reference
    assert ours == list(target_only_generate(target, LLAMA_PROMPT, GREEDY, LLAMA_TOKENS))
    stats = run.stats
    if drafter_name == "identical":
        assert stats.accepted == stats.proposed
    print(f"\n{drafter_name} k={k}: {stats.summary_line()}")
