"""The console command's entry: interrupts at any moment, undecodable argv, quoted commands.

`specaccept` runs `specaccept_command.main`, which imports the library inside its own guard,
with SIGINT held: an interrupt while MLX loads (the first 0.2 s) exits 130 in one line like
one later on. The interpreter's own start-up, before that module runs, is not covered, so the
tests interrupt inside named imports (deterministically) and after them, never at a guessed
early moment. An
argument that is not UTF-8 is refused by name before any tokenizer sees it, and the MLX
variables a result records in its command are shell-quoted.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specaccept.cli import main, options

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = "import specaccept_command; raise SystemExit(specaccept_command.main())"


def test_the_console_script_is_the_guarded_entry() -> None:
    project = (ROOT / "pyproject.toml").read_text("utf-8")
    assert '\n[project.scripts]\nspecaccept = "specaccept_command:main"\n' in project
    assert ('\nonly-include = ["impl/specaccept", "impl/specaccept_command.py", '
            '"impl/specaccept_trace.py"]\n' in project)


def _interrupted(code: str, delay: float = 0.0) -> tuple[int, bytes]:
    process = subprocess.Popen(
        [sys.executable, "-c", code, "vectors", "check", "--port", "sleep 100",
         "--vectors", str(ROOT / "spec" / "vectors"), "--timeout", "100"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT / "impl")},
        # SIGINT must reach Python's handler even when this test runs with SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    if delay:
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    return process.returncode, err


# The interrupt is raised exactly while the named module loads: the imports of the first
# 0.2 s, which used to end in a traceback, hit deterministically rather than by timing.
SIGNAL_DURING_IMPORT = """
import builtins, os, signal
real_import = builtins.__import__
def importing(name, *args, **kwargs):
    if name == {module!r}:
        builtins.__import__ = real_import
        os.kill(os.getpid(), signal.SIGINT)
    return real_import(name, *args, **kwargs)
builtins.__import__ = importing
""" + LAUNCH


@pytest.mark.parametrize("module", ["specaccept.cli", "mlx.core", "specaccept.core.sampling",
                                    "argparse"])
def test_sigint_while_the_library_loads_exits_130_in_one_line(module: str) -> None:
    status, err = _interrupted(SIGNAL_DURING_IMPORT.format(module=module))
    assert (status, err) == (130, b"specaccept: interrupted\n"), err


@pytest.mark.parametrize("delay", [0.5, 1.5])
def test_sigint_later_exits_130_in_one_line(delay: float) -> None:
    status, err = _interrupted(LAUNCH, delay)
    assert (status, err) == (130, b"specaccept: interrupted\n"), err


def test_an_argument_that_is_not_utf8_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str]
) -> None:
    # The prompt reached the tokenizer as a lone surrogate: a TypeError from inside it.
    with pytest.raises(SystemExit) as raised:
        main(["generate", "-p", "caf\udcff", "--max-tokens", "1"])
    err = capsys.readouterr().err
    assert raised.value.code == 2
    assert err == ("specaccept: error: argument 3 is not valid UTF-8 (byte 0xff): pass text "
                   "in UTF-8\n")


def test_real_undecodable_argv_bytes_are_refused() -> None:
    run = subprocess.run(
        [os.fsencode(sys.executable), b"-c", LAUNCH.encode(), b"generate", b"-p", b"\xc3\x28"],
        capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT / "impl")}, timeout=60,
    )
    assert run.returncode == 2
    assert run.stderr == b"specaccept: error: argument 3 is not valid UTF-8 (byte 0xc3): " \
                         b"pass text in UTF-8\n"


def test_a_recorded_mlx_variable_is_shell_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    # It was printed bare: pasting the recorded command ran `echo pwned`.
    value = "1 2; echo pwned"
    monkeypatch.setenv("MLX_MAX_OPS_PER_BUFFER", value)
    (assignment,) = options.tuning_assignments()
    assert shlex.split(assignment) == [f"MLX_MAX_OPS_PER_BUFFER={value}"]
    shell = subprocess.run(["sh", "-c", f"{assignment} env"], capture_output=True, text=True,
                           timeout=30)
    assert "pwned\n" not in shell.stdout.replace(value, "")
    assert f"MLX_MAX_OPS_PER_BUFFER={value}\n" in shell.stdout
