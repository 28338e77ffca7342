"""Every way the command line can be misused ends in one clear line and an exit code.

Each case runs `specaccept` as a real subprocess, the way a user meets it: malformed model
directories, flags out of range, a model whose logits are NaN, a reader that closes the pipe,
a full disk, Ctrl-C. The
assertions are the contract: the exit code, the error on one line naming the problem, and
never a Python traceback. The subprocesses start together (a module fixture) so the suite
waits for the slowest, not for their sum.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import mlx.core as mx
import pytest

from specaccept import demo
from specaccept.cli import EXIT_NO_DISTRIBUTION

IMPL = Path(__file__).resolve().parent.parent / "impl"
ENTRY = "from specaccept.cli import main; raise SystemExit(main())"
WARNING = "specaccept: warning:"


@dataclass(frozen=True)
class Case:
    argv: list[str]
    exit_code: int
    message: str
    """A fragment the one error line must contain ('' when the run must print no error)."""


BROKEN_MODELS = [
    "garbage-config", "empty-config", "list-config", "no-weights", "truncated-weights",
    "tiny-weights", "no-tokenizer", "unknown-architecture",
]
NAN_MODEL = "nan-logits"
"""The demo target with a final norm of NaN: it loads, and every row of logits it computes
is NaN."""


def _make_broken_models(root: Path) -> None:
    """Copies of the demo target under `root`, one fault each, named as in BROKEN_MODELS."""
    target = demo.target_path()
    config = (target / "config.json").read_text(encoding="utf-8")
    weights = (target / "model.safetensors").read_bytes()
    tokenizer_files = [
        p for p in target.iterdir() if p.name not in ("model.safetensors", "config.json")
    ]
    faults: dict[str, tuple[str | None, bytes | None, bool]] = {
        "garbage-config": ("not json{", weights, True),
        "empty-config": ("{}", weights, True),
        "list-config": ("[1, 2]", weights, True),
        "no-weights": (config, None, True),
        "truncated-weights": (config, weights[: len(weights) // 3], True),
        "tiny-weights": (config, b"\x01\x02", True),
        "no-tokenizer": (config, weights, False),
        "unknown-architecture": (config.replace('"llama"', '"no-such-model"'), weights, True),
    }
    assert sorted(faults) == sorted(BROKEN_MODELS)
    for name, (config_text, weight_bytes, tokenizer) in faults.items():
        directory = root / name
        directory.mkdir()
        if config_text is not None:
            (directory / "config.json").write_text(config_text, encoding="utf-8")
        if weight_bytes is not None:
            (directory / "model.safetensors").write_bytes(weight_bytes)
        if tokenizer:
            for file in tokenizer_files:
                shutil.copy(file, directory / file.name)
    nan_model = root / NAN_MODEL
    shutil.copytree(target, nan_model)
    tensors = mx.load(str(target / "model.safetensors"))
    assert isinstance(tensors, dict)
    norm = tensors["model.norm.weight"]
    tensors["model.norm.weight"] = mx.full(norm.shape, float("nan"), dtype=norm.dtype)
    mx.save_safetensors(str(nan_model / "model.safetensors"), tensors)


def _cases(root: Path) -> dict[str, Case]:
    """The misuses, by name; the broken models are expected under `root`."""
    drafter = str(demo.drafter_path())
    cases = {
        f"model-{name}": Case(
            ["generate", "-n", "4", "-m", str(root / name), "--draft-model", drafter], 2,
            f"target model directory {str(root / name)!r}",
        )
        for name in BROKEN_MODELS
    }
    cases["drafter-no-weights"] = Case(
        ["generate", "-n", "4", "-m", str(demo.target_path()), "--draft-model",
         str(root / "no-weights")], 2, "drafter model directory",
    )
    cases["model-missing"] = Case(
        ["generate", "-m", str(root / "absent"), "--draft-model", drafter], 2,
        "is not a directory",
    )
    cases["model-nan-logits"] = Case(
        ["generate", "-n", "4", "-m", str(root / NAN_MODEL), "--draft-model", drafter],
        EXIT_NO_DISTRIBUTION, "produced NaN or +inf logits at output position 0",
    )
    flags = {
        "bench-zero-tokens": (["bench", "-n", "0"], "must be >= 1"),
        "table-zero-tokens": (["table", "-n", "0"], "must be >= 1"),
        "table-json-unwritable": (["table", "--json", "/nonexistent/x.json"], "not a directory"),
        "bench-json-directory": (["bench", "--json", str(root)], "is a directory"),
        "tiny-temperature": (["generate", "--temp", "1e-50"], "temperature must be 0"),
        "subnormal-temperature": (["generate", "--temp", "1e-46"], "temperature must be 0"),
        "huge-frequency-penalty": (["generate", "--frequency-penalty", "1e39"],
                                   "frequency_penalty must lie in"),
        "huge-presence-penalty": (["generate", "--presence-penalty", "1e39"],
                                  "presence_penalty must lie in"),
        "tiny-repetition-penalty": (["generate", "--repetition-penalty", "1e-50"],
                                    "repetition_penalty must lie in"),
        "zero-top-p": (["generate", "--top-p", "0"], "top_p must lie in"),
        "negative-tokens": (["generate", "-n", "-1"], "must be >= 0"),
        "text-temperature": (["generate", "--temp", "warm"], "--temp"),
        "zero-draft-tokens": (["generate", "--num-draft-tokens", "0"], "must be >= 1"),
        # Unbounded, bench sized a list by it: MemoryError traceback.
        "huge-draft-tokens": (["bench", "--num-draft-tokens", "100000000000"],
                              "--num-draft-tokens: must be at most 4096, got 100000000000"),
    }
    for name, (argv, message) in flags.items():
        cases[name] = Case(argv, 2, message)
    return cases


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def _start(
    argv: list[str], stdout: int | IO[bytes], preexec_fn: Callable[[], object] | None = None
) -> subprocess.Popen[bytes]:
    paths = [str(IMPL), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
    return subprocess.Popen(
        [sys.executable, "-c", ENTRY, *argv], env=env, stdout=stdout, stderr=subprocess.PIPE,
        preexec_fn=preexec_fn,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Outcome]]:
    root = tmp_path_factory.mktemp("cli-failures")
    _make_broken_models(root)
    running = {name: _start(case.argv, stdout=subprocess.PIPE)
               for name, case in _cases(root).items()}
    results = {}
    for name, process in running.items():
        out, err = process.communicate(timeout=300)
        results[name] = Outcome(process.returncode, out.decode(), err.decode())
    return root, results


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(WARNING)]


@pytest.mark.parametrize("name", sorted(_cases(Path("root"))))
def test_a_failure_ends_in_one_line_and_its_exit_code(
    name: str, outcomes: tuple[Path, dict[str, Outcome]]
) -> None:
    root, results = outcomes
    case, outcome = _cases(root)[name], results[name]
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert outcome.returncode == case.exit_code, outcome.stderr
    lines = _error_lines(outcome.stderr)
    if lines and lines[0].startswith("usage:"):
        # argparse prints its usage first; the error is still the one last line.
        lines = lines[-1:]
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("specaccept") and "error:" in lines[0], lines[0]
    assert case.message in lines[0], lines[0]


def test_a_closed_pipe_ends_the_run_quietly() -> None:
    # `specaccept generate | head -1`: the reader leaves after one line.
    process = _start(["generate", "-n", "200"], stdout=subprocess.PIPE)
    assert process.stdout is not None
    process.stdout.readline()
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    assert process.returncode == 141  # 128 + SIGPIPE, as a Unix tool reports it
    assert _error_lines(err.decode()) == [], err.decode()


def test_a_full_disk_is_one_line_and_exit_1() -> None:
    if not Path("/dev/full").exists():
        pytest.skip("this system has no /dev/full")
    with open("/dev/full", "wb") as full:
        process = _start(["generate", "-n", "20"], stdout=full)
        _, err = process.communicate(timeout=300)
    lines = _error_lines(err.decode())
    assert process.returncode == 1, err.decode()
    assert len(lines) == 1 and "No space left on device" in lines[0], err.decode()


def test_ctrl_c_prints_the_partial_summary_and_exits_130() -> None:
    # SIGINT must reach Python's handler even when this test runs with SIGINT ignored.
    process = _start(
        ["generate", "-n", "100000"], stdout=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdout is not None
    process.stdout.read(64)  # generation has started
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    stdout = out.decode()
    assert process.returncode == 130, err.decode()
    assert "Traceback" not in err.decode()
    assert "[Speculative acceptance] rule=block" in stdout
    assert stdout.rstrip().splitlines()[-1].endswith("interrupted=true"), stdout[-300:]
    # The run reached past the demo pair's 256-token context: the warning said so.
    assert "max_position_embeddings (256)" in err.decode()
