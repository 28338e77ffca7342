"""The generator's round observer sees every round's rows, drafts, uniforms and offsets."""

from __future__ import annotations

import os
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"

import mlx.core as mx
import pytest

from specaccept import (
    RoundObservation,
    SamplerConfig,
    SpeculativeGenerator,
    load_pair,
    verify_blockwise,
    verify_tokenwise,
)

pytest.importorskip("mlx_lm")


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_observations_replay_and_tile_the_stream(temperature: float) -> None:
    pair = load_pair()
    seen: list[RoundObservation] = []
    generator = SpeculativeGenerator(
        pair.target, pair.require_drafter(), SamplerConfig(temperature=temperature),
        num_draft_tokens=3,
    )
    prompt = pair.require_tokenizer().encode("ROMEO:")
    run = generator.generate(prompt, 40, seed=3, observer=seen.append)
    stream = [t for block in run for t in block]
    assert [t for o in seen for t in o.emitted] == stream
    assert seen[-1].stopped and not any(o.stopped for o in seen[:-1])
    for observation in seen:
        k = len(observation.draft_tokens)
        assert observation.target_offset_before == len(prompt) + observation.position - 1
        if not observation.stopped:
            after = observation.target_offset_before + len(observation.emitted)
            assert observation.target_offset_after == after
        if k == 0:
            continue
        assert observation.draft_probs is not None
        if observation.rule.verifies_jointly:  # block verification, the default at T > 0
            verdict: Any = verify_blockwise(
                mx.array(observation.target_probs), mx.array(observation.draft_probs),
                mx.array(observation.draft_tokens), mx.array(observation.uniforms),
            )
        else:
            verdict = verify_tokenwise(
                observation.rule, mx.array(observation.target_probs),
                mx.array(observation.draft_probs)
                if observation.rule.needs_proposal_distribution else None,
                mx.array(observation.draft_tokens), mx.array(observation.uniforms),
            )
        assert verdict.num_accepted.item() == observation.num_accepted
        expected = [*observation.draft_tokens[: observation.num_accepted],
                    verdict.next_token.item()]
        assert observation.emitted == expected[: len(observation.emitted)]
        assert observation.draft_offset_before is not None
        assert observation.draft_offset_before + observation.draft_fed == (
            observation.target_offset_before + 1
        )
