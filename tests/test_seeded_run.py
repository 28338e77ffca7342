"""`seeded_run`, the whole-run reference of the seeded_run vectors, against the generator, and
the power of those vectors against the wrong keyings.

- The generator, on models whose effective laws are a vector's tables, emits the vector's
  tokens and decides every round as the vector says, on its fast path and off it: the run the
  vectors pin is the run `SpeculativeGenerator` performs. The tables are eighths that softmax
  maps back from their float32 logs exactly, so the agreement is exact, not approximate.
- With the uniforms keyed the old way (accept and draft by absolute position) or with the
  target's draw keyed by round, `seeded_run` fails vectors of every rule whose output that
  keying can change, and the emitted streams of greedy-argmax and sampler-match stay put
  under the first (their drafts only decide how many tokens a round emits).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

from specaccept import AcceptanceRule, SamplerConfig, SpeculativeGenerator
from specaccept.core import randomness
from specaccept.core.randomness import ACCEPT, DRAFT, SAMPLE, RoundUniforms, position_uniform
from specaccept.shell import seeded_run as seeded_run_module
from specaccept.shell.generator import RoundObservation, RuleChoice
from specaccept.shell.seeded_run import RunRound, seeded_run
from synthetic_models import LogitsFn, SyntheticLM

VECTORS = Path(__file__).resolve().parents[1] / "spec" / "vectors" / "seeded_run.json"
RUNS = [v for v in json.loads(VECTORS.read_text("utf-8"))["vectors"] if "expected" in v]
GENERATOR_RULES: dict[str, RuleChoice] = {"greedy-argmax": "auto", "sampler-match": "sampler-match",
                   "stochastic": "stochastic", "block": "block"}


def table_logits(law: dict[str, Any]) -> LogitsFn:
    """Logits log(row) of the law's row for the last `context_length` tokens at each position."""
    rows = np.array(law["rows"], dtype=np.float64)
    vocab_size, context_length = rows.shape[1], int(law["context_length"])
    with np.errstate(divide="ignore"):
        log_rows = mx.array(np.log(rows).astype(np.float32))

    def logits(context: mx.array, count: int) -> mx.array:
        padded = mx.concatenate([mx.zeros((context_length,), dtype=mx.int32), context])
        end = padded.shape[0]
        index = mx.zeros((count,), dtype=mx.int32)
        for back in range(context_length - 1, -1, -1):
            index = index * vocab_size + padded[end - count - back : end - back]
        return log_rows[index]

    return logits


def table_law(law: dict[str, Any]) -> Callable[[list[int]], mx.array]:
    rows, context_length = law["rows"], int(law["context_length"])

    def next_token_law(history: list[int]) -> mx.array:
        index = 0
        for token in history[len(history) - context_length :]:
            index = index * len(rows[0]) + token
        return mx.array(rows[index], dtype=mx.float32)

    return next_token_law


def as_rounds(rounds: list[RunRound]) -> list[dict[str, Any]]:
    return [{"position": r.position, "draft_tokens": r.draft_tokens,
             "num_accepted": r.num_accepted, "next_token": r.next_token} for r in rounds]


def play(vector: dict[str, Any]) -> tuple[list[int], list[dict[str, Any]]]:
    given = vector["input"]
    rounds = seeded_run(table_law(given["target_law"]), table_law(given["draft_law"]),
                        given["prompt"], rule=AcceptanceRule(given["rule"]),
                        num_draft_tokens=given["num_draft_tokens"],
                        max_tokens=given["max_tokens"], seed=given["seed"])
    return [t for r in rounds for t in r.emitted], as_rounds(rounds)


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "core-functions"])
@pytest.mark.parametrize("vector", RUNS, ids=[v["name"] for v in RUNS])
def test_the_generator_runs_the_vector(vector: dict[str, Any], fast_path: bool) -> None:
    given = vector["input"]
    vocab_size = len(given["target_law"]["rows"][0])
    greedy = given["rule"] == "greedy-argmax"
    target = SyntheticLM(vocab_size, table_logits(given["target_law"]))
    drafter = SyntheticLM(vocab_size, table_logits(given["draft_law"]))
    observed: list[RoundObservation] = []
    generator = SpeculativeGenerator(
        target, drafter, SamplerConfig(temperature=0.0 if greedy else 1.0),
        draft_config=SamplerConfig(temperature=1.0), num_draft_tokens=given["num_draft_tokens"],
        rule=GENERATOR_RULES[given["rule"]], fast_path=fast_path, check_caches=True,
    )
    assert generator.acceptance_rule.value == given["rule"]
    run = generator.generate(given["prompt"], given["max_tokens"], seed=given["seed"],
                             observer=observed.append)
    tokens = [t for block in run for t in block]
    if not greedy:  # the models' laws are the tables, bit for bit (a greedy target's is one-hot)
        first_law = table_law(given["target_law"])(given["prompt"])
        assert observed[0].target_probs[0] == first_law.tolist()
    rounds = [{"position": o.position, "draft_tokens": o.draft_tokens,
               "num_accepted": o.num_accepted, "next_token": o.emitted[-1]} for o in observed]
    assert tokens == vector["expected"]["tokens"]
    assert rounds == vector["expected"]["rounds"]


def absolute_position_keys(seed: int, round_position: int, num_drafts: int) -> RoundUniforms:
    """The keying this library had before: accept and draft by absolute position."""
    n = round_position
    return RoundUniforms(
        [position_uniform(seed, n + j, DRAFT) for j in range(num_drafts)],
        [[position_uniform(seed, n + i, ACCEPT), position_uniform(seed, n + i, SAMPLE)]
         for i in range(num_drafts + 1)],
    )


def sample_by_round_keys(seed: int, round_position: int, num_drafts: int) -> RoundUniforms:
    """A wrong keying: the target's draw keyed by (round start, offset), like the tests."""
    right = randomness.round_uniforms(seed, round_position, num_drafts)
    mix, base = randomness.splitmix64, randomness.splitmix64(seed) ^ (4 * round_position + SAMPLE)
    sample = [(mix(mix(base) ^ i) >> 40) / 2**24 for i in range(num_drafts + 1)]
    return RoundUniforms(right.draft, [[row[0], u] for row, u in zip(right.verify, sample,
                                                                          strict=True)])


def test_the_right_keying_passes_every_run() -> None:
    for vector in RUNS:
        assert play(vector) == (vector["expected"]["tokens"], vector["expected"]["rounds"])


@pytest.mark.parametrize("rule", sorted(GENERATOR_RULES))
def test_accept_and_draft_keyed_by_absolute_position_fail(
    monkeypatch: pytest.MonkeyPatch, rule: str
) -> None:
    monkeypatch.setattr(seeded_run_module, "round_uniforms", absolute_position_keys)
    runs = [v for v in RUNS if v["input"]["rule"] == rule]
    results = [(play(v), v["expected"]) for v in runs]
    failed = [(tokens, want) for (tokens, rounds), want in results
              if (tokens, rounds) != (want["tokens"], want["rounds"])]
    assert len(failed) >= 3, f"{rule}: only {len(failed)} runs notice the keying"
    stream_moves = [tokens != want["tokens"] for tokens, want in failed]
    if rule in ("greedy-argmax", "sampler-match"):
        assert not any(stream_moves), "the drafts moved a stream they cannot move"
    else:
        assert all(stream_moves)


@pytest.mark.parametrize("rule", ["sampler-match", "stochastic", "block"])
def test_the_target_draw_keyed_by_round_fails(monkeypatch: pytest.MonkeyPatch, rule: str) -> None:
    monkeypatch.setattr(seeded_run_module, "round_uniforms", sample_by_round_keys)
    runs = [v for v in RUNS if v["input"]["rule"] == rule]
    moved = [play(v)[0] != v["expected"]["tokens"] for v in runs]
    assert sum(moved) >= 3, f"{rule}: only {sum(moved)} streams notice the keying"


def test_bad_arguments_are_refused() -> None:
    def law(history: list[int]) -> mx.array:
        return mx.array([0.5, 0.5])

    run = seeded_run
    with pytest.raises(TypeError, match="rule must be an AcceptanceRule"):
        run(law, law, [0], rule="stochastic", num_draft_tokens=1,  # type: ignore[arg-type]
            max_tokens=1, seed=0)
    with pytest.raises(ValueError, match="num_draft_tokens must be >= 1, got 0"):
        run(law, law, [0], rule=AcceptanceRule.STOCHASTIC, num_draft_tokens=0, max_tokens=1,
            seed=0)
    with pytest.raises(ValueError, match="prompt must be a non-empty"):
        run(law, law, [], rule=AcceptanceRule.STOCHASTIC, num_draft_tokens=1, max_tokens=1,
            seed=0)
    with pytest.raises(ValueError, match="seed must lie in"):
        run(law, law, [0], rule=AcceptanceRule.STOCHASTIC, num_draft_tokens=1, max_tokens=1,
            seed=-1)
