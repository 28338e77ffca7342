"""The vLLM recorder's command line refuses bad settings by name, before loading anything.

The recorder itself (vLLM's kernels under Triton) runs in the engines' CI stage,
`examples/engines/ci.sh`, in an environment of its own: CI's main environment has neither
torch nor triton, and parsing needs neither.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

RECORDER = Path(__file__).resolve().parent.parent / "examples" / "engines" / "vllm" / "record.py"


def _recorder() -> Any:
    spec = importlib.util.spec_from_file_location("vllm_recorder", RECORDER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["vllm_recorder"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("argv", "message"), [
    (["--rounds", "0", "--out", "t"], "--rounds must be at least 1, got 0"),
    (["--rounds", "x", "--out", "t"], "--rounds must be an integer, got 'x'"),
    (["--rounds", "5", "--out", "t", "--vocab", "1"], "--vocab must be at least 2, got 1"),
    (["--rounds", "5", "--out", "t", "--mutant", "pre-fix-keying"], "add --block"),
    (["--rounds", "5", "--out", "t", "--requests", "2", "--seeds", "1"],
     "--seeds must give one value per request (--requests 2), got 1"),
    (["--rounds", "5", "--out", "t", "--requests", "1", "--seeds", "1.5"],
     "--seeds must be a comma-separated list of ints, got '1.5'"),
    (["--rounds", "5", "--out", "t", "--requests", "1", "--temperatures", "-1"],
     "--temperatures entries must lie in [0.0, 100.0], got -1.0"),
    (["--rounds", "5", "--out", "t", "--requests", "1", "--temperatures", "1e-45"],
     "--temperatures entries must be 0 (greedy) or at least 2**-126"),
    (["--rounds", "5", "--out", "t", "--placeholder-rate", "2"],
     "--placeholder-rate must lie in [0, 1], got 2.0"),
    (["--rounds", "5", "--out", "/nonexistent-dir/t.jsonl"],
     "--out /nonexistent-dir/t.jsonl: the directory /nonexistent-dir does not exist"),
    (["--rounds", "5"], "give --out TRACE, or --summary-only to write no trace"),
    (["--rounds", "5", "--out", "t", "--summary-only"],
     "give --out TRACE, or --summary-only to write no trace"),
])
def test_bad_settings_are_refused_by_name(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    recorder = _recorder()
    with pytest.raises(SystemExit) as exit_:
        recorder.parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_defaults_pick_the_pair_by_vocabulary() -> None:
    recorder = _recorder()
    small = recorder.parse_args(["--rounds", "5", "--out", "t"])
    large = recorder.parse_args(["--rounds", "5", "--out", "t", "--vocab", "128256"])
    assert (small.pair, small.vocab_size, small.requests, small.drafts) == ("history", 64, 4, 4)
    assert large.pair == "random"


def test_a_missing_wheel_is_named_without_downloading(tmp_path: Path) -> None:
    recorder = _recorder()
    with pytest.raises(recorder.RecorderError, match="is not there; run `pip download"):
        recorder.wheel_path(tmp_path, download=False)


def test_the_mutant_changes_exactly_the_block_key() -> None:
    recorder = _recorder()
    before, after = recorder.MUTANTS["pre-fix-keying"]
    assert "spec_step_seed(seed, i)" in before and "USE_BLOCK_VERIFICATION" in before
    assert after == "step_seed = seed"
