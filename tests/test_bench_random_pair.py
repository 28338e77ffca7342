"""`specaccept bench --random-pair`: a pair of real shapes built in memory, benchmarked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from specaccept.cli import main
from specaccept.core.theory import expected_tokens_per_round
from specaccept.shell.random_pairs import RANDOM_PAIRS, random_pair


def test_the_small_random_pair_runs_every_arm_and_the_breakdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    status = main(["bench", "--random-pair", "small", "-n", "6", "--repeats", "1",
                   "--core-arms", "--json", str(out)])
    assert status == 0
    text = capsys.readouterr().out
    assert "random-weight pair `small`" in text
    assert "acceptance is not a trained pair's" in text
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["settings"]["vocab_size"] == 8192
    assert set(result["tokens_per_second"]) >= {
        "target-only", "target-only-core", "speculative-stochastic",
        "speculative-stochastic-core", "mlx-lm-speculative", "mlx-lm-target-only"}
    for rule, phases in result["round_breakdown"].items():
        assert all(seconds >= 0 for seconds in phases.values()), rule
        assert phases["drafter forward"] > 0 and phases["target forward"] > 0
    assert result["host_syncs_per_round"]["stochastic"] == 1.0
    # One repeat: its prediction is lemma 8 on that repeat's acceptance and pieces.
    k = result["settings"]["num_draft_tokens"]
    pieces = result["piece_seconds"]
    c = pieces["drafter_1"] / pieces["target_1"]
    r = pieces[f"target_{k + 1}"] / pieces["target_1"]
    alpha = result["per_position_acceptance"]["stochastic"]
    assert result["speedup_predicted"]["stochastic"] == pytest.approx(
        expected_tokens_per_round([alpha] * k) / (k * c + r))
    assert result["speedup_measured_over_predicted"]["stochastic"] == pytest.approx(
        result["speedup_measured"]["stochastic"] / result["speedup_predicted"]["stochastic"])
    # ... and the product of its three factors: luck, the baseline's overlap, the round.
    spread = result["ratio_spread"]
    luck = result["tokens_per_round"]["stochastic"] / expected_tokens_per_round([alpha] * k)
    assert result["speedup_measured_over_predicted"]["stochastic"] == pytest.approx(
        luck * spread["target-only token / 1-token forward alone"][0]
        * spread["forwards alone / round, stochastic"][0])
    # Inside rounds, by the round clock: the same repeat's pipelined round columns.
    inside = spread["round cost inside rounds, stochastic / sampler-match"][0]
    pipelined = result["pipelined_round"]
    assert inside == pytest.approx(
        pipelined["stochastic"]["round"] / pipelined["sampler-match"]["round"])
    median, low, high = result["python_loop_seconds"]
    assert 0 < low <= median <= high
    assert "Host drift: a fixed pure-Python loop" in text
    # Fewer kernels on the fused path than on the core path, for every rule.
    for counts in result["kernel_counts"].values():
        assert counts["fused draft step"] < counts["core draft step"]
        assert counts["fused verification"] < counts["core verification"]


def test_random_pair_refuses_models_on_disk_and_unknown_presets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--random-pair", "small", "-m", "somewhere"])
    assert exit_info.value.code == 2
    assert "--random-pair builds its own models" in capsys.readouterr().err
    with pytest.raises(ValueError, match="random pair preset must be one of"):
        random_pair("llama-9000")


def test_the_real_shape_preset_has_llama_3_shapes() -> None:
    preset = RANDOM_PAIRS["llama-3-8b-1b"]
    assert preset.target["vocab_size"] == preset.drafter["vocab_size"] == 128_256
    assert (preset.target["num_hidden_layers"], preset.target["hidden_size"]) == (32, 4096)
    assert (preset.drafter["num_hidden_layers"], preset.drafter["hidden_size"]) == (16, 2048)
    assert preset.dtype == "bfloat16"


def test_bench_at_temperature_zero_runs_greedy_arms_for_every_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At 0 every arm runs greedy-argmax; the bench once failed looking up a stochastic piece."""
    out = tmp_path / "bench.json"
    status = main(["bench", "--random-pair", "small-self", "--temp", "0", "-n", "6",
                   "--repeats", "1", "--json", str(out)])
    assert status == 0
    text = capsys.readouterr().out
    assert "every speculative arm runs greedy-argmax" in text
    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(result["verify_cost_over_forward"]) == {"stochastic", "sampler-match", "block"}
    assert set(result["kernel_counts"]) == {"greedy-argmax"}
    # Greedy arms of one pair accept alike: the same drafts, the same argmax test.
    acceptance = result["per_position_acceptance"]
    assert acceptance["stochastic"] == acceptance["sampler-match"] == acceptance["block"]
    # The built-in agreement is stated: at 0, how often the two argmaxes agree.
    assert 0 < result["agreement"]["sum_min"] <= 1
    assert result["agreement"]["target_entropy"] == 0
    assert "Agreement along 6 of the target's own samples" in text


def test_bench_refuses_a_run_with_no_drafting_round(capsys: pytest.CaptureFixture[str]) -> None:
    """-n 1 is one plain target step: no round to time (it once failed with KeyError 'round')."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--random-pair", "small", "-n", "1", "--repeats", "1"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "-n/--max-tokens >= 2, got 1" in error
    assert len(error.strip().splitlines()) == 1


def test_a_self_speculative_pair_agrees_and_shares_its_weights() -> None:
    """The drafter is the target's first layers: its modules are the target's own."""
    from specaccept.core.sampler_config import SamplerConfig
    from specaccept.shell.random_pairs import agreement

    pair = random_pair("small-self")
    preset = RANDOM_PAIRS["small-self"]
    target, drafter = cast(Any, pair.target), cast(Any, pair.require_drafter())  # mlx-lm Llamas
    assert len(drafter.layers) == preset.drafter["num_hidden_layers"] == 1
    assert drafter.layers[0] is target.layers[0]
    assert drafter.lm_head is target.lm_head
    assert drafter.model.embed_tokens is target.model.embed_tokens
    prompt = list(b"ROMEO:")
    built = agreement(pair, prompt, SamplerConfig(temperature=1.0), 16)
    # Two independent random models have near-uniform laws (entropy near ln 8192 = 9.0),
    # whose Σ min(p, q) is high by overlap alone: hence the entropy beside it. The built
    # pair's laws are peaked and still overlap; the independent pair's products vanish.
    independent = agreement(random_pair("small"), prompt, SamplerConfig(temperature=1.0), 16)
    assert built.sum_min > 0.7 and built.positions == 16
    assert 0.5 < built.target_entropy < independent.target_entropy - 4
    assert built.sum_prod > 100 * independent.sum_prod


def test_the_two_layer_self_drafters_are_the_first_two_layers_of_their_targets() -> None:
    """The cheap self-drafter presets: the 8B-shaped one (only its shapes: 16 GB to build)
    and its CPU counterpart, built, whose drafter's two layers are the target's own."""
    eight_b = RANDOM_PAIRS["llama-3-8b-self-2l"]
    assert eight_b.self_speculative and eight_b.drafter["num_hidden_layers"] == 2
    assert {**eight_b.drafter, "num_hidden_layers": 32} == eight_b.target
    pair = random_pair("small-deep-self-2l")
    assert pair.drafter is not None
    target, drafter = cast(Any, pair.target), cast(Any, pair.drafter)
    assert len(target.layers) == 16 and len(drafter.layers) == 2
    assert all(d is t for d, t in zip(drafter.layers, target.layers[:2], strict=True))
