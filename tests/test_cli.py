"""The `specaccept` command and the embedded demo pair end to end."""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest

from specaccept import SamplerConfig, demo
from specaccept.cli import build_parser, main
from specaccept.shell.generator import RuleChoice, SpeculativeGenerator
from specaccept.shell.loading import ModelPair, load_pair
from specaccept.shell.target_only import target_only_generate

SUMMARY = re.compile(
    r"^\[Speculative acceptance\] rule=(greedy-argmax|sampler-match|stochastic|block) rounds=\d+ "
    r"proposed=\d+ positions_tested=\d+ accepted=\d+ per_position_acceptance=\d\.\d{4} "
    r"acceptance_rate=\d\.\d{4} mean_accepted_len=\d+\.\d{4}"
    r"( closed_form_sum_min=\d\.\d{4} closed_form_sum_prod=\d\.\d{4}"
    r" closed_form_accepted_len=\d+\.\d{4} closed_form_block=\d+\.\d{4})?$",
    re.MULTILINE,
)


@pytest.fixture(scope="module")
def pair() -> ModelPair:
    return load_pair()


def _prompt(pair: ModelPair, text: str = "ROMEO:\n") -> list[int]:
    return [int(t) for t in pair.require_tokenizer().encode(text)]


def test_generate_on_the_demo_pair_prints_text_and_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["generate", "-n", "40", "--seed", "3", "--diag", "--check-caches"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ROMEO:\n")
    match = SUMMARY.search(out)
    assert match is not None, out
    assert "rule=block" in match.group(0)  # the default at temperature > 0
    assert "closed_form_sum_min=" in match.group(0)
    assert re.search(r"^generated=40 seconds=[\d.]+ tokens_per_second=[\d.]+$", out, re.M)
    rounds = re.search(r" rounds=(\d+) ", match.group(0))
    assert rounds is not None
    assert (f"\n[Cache check] passed: both cache offsets matched after each of the "
            f"{rounds.group(1)} rounds\n") in out


@pytest.mark.parametrize("flag", ["--diag", "--check-caches"])
def test_no_draft_refuses_what_reports_on_drafts(
    flag: str, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["generate", "-n", "4", "--no-draft", flag])
    assert exit_.value.code == 2
    assert f"--no-draft does not combine with {flag}" in capsys.readouterr().err


def test_generate_rule_flag_and_greedy(capsys: pytest.CaptureFixture[str]) -> None:
    main(["generate", "-n", "12", "--rule", "sampler-match"])
    assert "rule=sampler-match " in capsys.readouterr().out
    main(["generate", "-n", "12", "--temp", "0"])
    assert "rule=greedy-argmax " in capsys.readouterr().out
    main(["generate", "-n", "12", "--rule", "block", "--diag", "--check-caches"])
    out = capsys.readouterr().out
    match = SUMMARY.search(out)
    assert match is not None and "rule=block " in match.group(0), out
    # Under block verification the rule's per-round closed form is the block form.
    assert re.search(r"closed_form_accepted_len=(\S+) closed_form_block=\1$", match.group(0))
    main(["generate", "-n", "12", "--rule", "block", "--temp", "0"])
    assert "rule=greedy-argmax " in capsys.readouterr().out


def test_no_draft_streams_the_same_text_as_sampler_match(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Same seed, same uniforms: sampler-match emits the target-only stream.
    main(["generate", "-n", "30", "--seed", "11", "--no-draft"])
    target_only = capsys.readouterr().out.split("[Target only]")[0]
    main(["generate", "-n", "30", "--seed", "11", "--rule", "sampler-match"])
    speculative = capsys.readouterr().out.split("[Speculative acceptance]")[0]
    assert target_only == speculative


def test_greedy_demo_pair_matches_target_only_and_mlx_lm(pair: ModelPair) -> None:
    from mlx_lm.generate import speculative_generate_step

    prompt = _prompt(pair, "KING RICHARD III:\n")
    greedy = SamplerConfig(temperature=0.0)
    reference = list(target_only_generate(pair.target, prompt, greedy, 120))
    for k in (1, 2, 4, 8):
        generator = SpeculativeGenerator(
            pair.target, pair.require_drafter(), greedy, num_draft_tokens=k, check_caches=True
        )
        ours = [t for block in generator.generate(prompt, 120) for t in block]
        assert ours == reference, f"k={k}"
        theirs = [
            int(t) for t, _, _ in speculative_generate_step(
                mx.array(prompt, dtype=mx.uint32), pair.target, pair.drafter,
                num_draft_tokens=k, max_tokens=120,
            )
        ]
        assert theirs == reference, f"mlx-lm k={k}"


PROMPTS = ("ROMEO:\n", "First Citizen:\n", "JULIET:\nO, ", "KING HENRY VI:\n", "GLOUCESTER:\n")


def _measured_and_closed_form(pair: ModelPair, rule: RuleChoice) -> tuple[float, float, float]:
    """Pooled per-position acceptance, Σ min(p, q) and its standard error at temperature 1.

    200 tokens per prompt keep the context inside the demo pair's 256 trained positions.
    """
    generator = SpeculativeGenerator(
        pair.target, pair.require_drafter(), SamplerConfig(temperature=1.0), rule=rule,
        diagnostics=True, check_caches=True,
    )
    accepted = tested = 0
    sum_min = 0.0
    for seed, text in enumerate(PROMPTS):
        run = generator.generate(_prompt(pair, text), 200, seed=seed)
        for _ in run:
            pass
        accepted += run.stats.accepted
        tested += run.stats.positions_tested
        sum_min += run.stats.sum_min_total
    measured, predicted = accepted / tested, sum_min / tested
    standard_error = (predicted * (1 - predicted) / tested) ** 0.5
    print(f"{rule}: measured={measured:.4f} sum_min={predicted:.4f} se={standard_error:.4f} "
          f"n={tested}")
    return measured, predicted, standard_error


def test_demo_pair_accepts_at_the_closed_form(pair: ModelPair) -> None:
    """At temperature 1 the measured rate sits within 4 standard errors of Σ min(p, q)."""
    measured, predicted, standard_error = _measured_and_closed_form(pair, "stochastic")
    assert abs(measured - predicted) <= 4 * standard_error


def test_the_closed_form_check_rejects_the_wrong_rule(pair: ModelPair) -> None:
    """The same check fails sampler-match, which accepts Σ p·q < Σ min(p, q)."""
    measured, predicted, standard_error = _measured_and_closed_form(pair, "sampler-match")
    assert abs(measured - predicted) > 4 * standard_error


def test_missing_model_path_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(SystemExit) as exit_info:
        main(["generate", "-m", str(missing), "--draft-model", str(demo.drafter_path())])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "target path" in err and str(missing) in err and "not a directory" in err


def test_draft_model_without_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["generate", "--draft-model", str(demo.drafter_path())])
    assert "--draft-model needs --model" in capsys.readouterr().err


def test_directory_without_config_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["generate", "-m", str(tmp_path), "--draft-model", str(tmp_path)])
    assert "has no config.json" in capsys.readouterr().err


def test_vocabulary_mismatch_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlx.utils import tree_flatten
    from mlx_lm.models.llama import Model, ModelArgs

    drafter = tmp_path / "drafter"
    drafter.mkdir()
    for item in demo.drafter_path().iterdir():
        if item.name != "model.safetensors":
            (drafter / item.name).write_bytes(item.read_bytes())
    config = json.loads((drafter / "config.json").read_text())
    config["vocab_size"] += 5
    (drafter / "config.json").write_text(json.dumps(config))
    model = Model(ModelArgs.from_dict(config))  # type: ignore[no-untyped-call]
    mx.save_safetensors(str(drafter / "model.safetensors"), dict(tree_flatten(model.parameters())))
    with pytest.raises(SystemExit):
        main(["generate", "-m", str(demo.target_path()), "--draft-model", str(drafter)])
    err = capsys.readouterr().err
    assert "drafter vocabulary" in err and "differs" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["generate", "--num-draft-tokens", "0"], "must be >= 1"),
        (["generate", "-n", "-3"], "must be >= 0"),
        (["generate", "--rule", "argmax"], "invalid choice"),
        (["generate", "--seed", "x"], "invalid"),
    ],
)
def test_bad_flags_are_rejected_by_the_parser(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "field"),
    [(["generate", "--top-p", "1.5"], "top_p"), (["generate", "--temp", "-1"], "temperature")],
)
def test_bad_sampler_values_name_the_field(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert field in capsys.readouterr().err


def test_table_writes_markdown_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    out_json = tmp_path / "table.json"
    from specaccept.shell.generator import SpeculativeGenerator

    runs: list[str] = []
    generate = SpeculativeGenerator.generate

    def counted(self: SpeculativeGenerator, *args: Any, **kwargs: Any) -> Any:
        runs.append(self.acceptance_rule.value)
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(SpeculativeGenerator, "generate", counted)
    assert main([
        "table", "-n", "24", "--temperatures", "0", "1.0", "--prompts", "ROMEO:\n",
        "--json", str(out_json),
    ]) == 0
    captured = capsys.readouterr()
    assert "| temperature | rule | closed_form_sum_min |" in captured.out
    # One greedy run at temperature 0, not one per requested rule, shown once and said so.
    assert runs == ["greedy-argmax", "stochastic", "sampler-match", "block"]
    assert captured.out.count("| 0 | greedy-argmax |") == 2  # once in each table
    assert "At temperature 0 every requested rule ran as the same rule" in captured.out
    assert "it/s" not in captured.out + captured.err  # no bar: not a TTY, and --json
    rows = json.loads(out_json.read_text())
    assert [(r["temperature"], r["requested_rule"]) for r in rows] == [
        (t, rule) for t in (0.0, 1.0) for rule in ("stochastic", "sampler-match", "block")
    ]
    assert {r["rule"] for r in rows[:3]} == {"greedy-argmax"}
    assert [r["rule"] for r in rows[3:]] == ["stochastic", "sampler-match", "block"]
    for row in rows:
        assert row["closed_form_sum_min"] >= row["closed_form_sum_prod"] - 1e-6


def test_table_names_its_command_and_scores_each_rule_against_its_closed_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "table.json"
    argv = ["table", "-n", "24", "--temperatures", "1.0", "--prompts", "ROMEO:",
            "--repeats", "2", "--json", str(out_json)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("Produced by:\n\n```sh\nspecaccept table -n 24 ")
    assert "1 prompts x 2 runs" in out
    rows = {r["requested_rule"]: r for r in json.loads(out_json.read_text())}
    for requested, form in (("stochastic", "closed_form_sum_min"),
                            ("sampler-match", "closed_form_sum_prod")):
        row = rows[requested]
        assert row["closed_form_of_rule"] == row[form]
        a, n = row["closed_form_of_rule"], row["positions_tested"]
        assert row["standard_error"] == pytest.approx((a * (1 - a) / n) ** 0.5)
        assert row["z_score"] == pytest.approx(
            (row["per_position_acceptance"] - a) / row["standard_error"]
        )
        # Two runs of 24 tokens: more positions than one run can test.
        assert row["generated"] == 48
    # Block verification is scored per round: kept drafts against E[kept | drafts].
    block = rows["block"]
    assert block["rule"] == "block" and not block["per_position"]
    assert block["closed_form_of_rule"] == block["closed_form_accepted_len"]
    assert block["closed_form_accepted_len"] == pytest.approx(block["closed_form_block"])
    assert block["z_score"] == block["accepted_len_z"]
    assert block["accepted_len_z"] == pytest.approx(
        (block["mean_accepted_len"] - block["closed_form_accepted_len"])
        / block["accepted_len_standard_error"]
    )
    assert abs(block["accepted_len_z"]) < 4


def test_a_degenerate_closed_form_admits_no_difference() -> None:
    from specaccept.cli.table import _standard_error, _z_score

    assert _standard_error(1.0, 50) == 0.0
    assert _z_score(0.0, 0.0) == 0.0
    assert _z_score(-0.02, 0.0) == float("-inf")
    assert _z_score(0.1, 0.05) == pytest.approx(2.0)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_draws_on_a_terminal_stderr_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from specaccept.cli.options import progress_bar

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with progress_bar(3, "bench") as bar:
        bar.update(3)
    assert "bench" in terminal.getvalue()
    with progress_bar(3, "quiet", quiet=True) as bar:  # --json
        bar.update(3)
    assert "quiet" not in terminal.getvalue()
    pipe = io.StringIO()  # a pipe or a file
    monkeypatch.setattr(sys, "stderr", pipe)
    with progress_bar(3, "piped") as bar:
        bar.update(3)
    assert "piped" not in pipe.getvalue() and capsys.readouterr().out == ""


def test_cli_turns_cudnn_attention_off_unless_the_caller_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A speculative round's multi-token forwards meet a new key/value length every round,
    # and MLX's CUDA backend builds a cuDNN graph per new length (forward_shapes.py).
    from specaccept.cli.options import CUDNN_ATTENTION_ENV, prefer_shape_free_attention

    monkeypatch.delenv(CUDNN_ATTENTION_ENV, raising=False)
    prefer_shape_free_attention()
    assert os.environ[CUDNN_ATTENTION_ENV] == "0"
    monkeypatch.setenv(CUDNN_ATTENTION_ENV, "1")
    prefer_shape_free_attention()
    assert os.environ[CUDNN_ATTENTION_ENV] == "1"


def test_a_result_names_the_mlx_tuning_variables_the_caller_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MLX_MAX_OPS_PER_BUFFER", "20")
    assert main(["table", "-n", "4", "--temperatures", "0"]) == 0
    assert capsys.readouterr().out.startswith(
        "Produced by:\n\n```sh\nMLX_MAX_OPS_PER_BUFFER=20 specaccept table -n 4 "
    )
