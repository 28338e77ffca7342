"""`specaccept bench --random-pair`: a pair of real shapes built in memory, benchmarked."""

from __future__ import annotations

import json
from pathlib import Path

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
