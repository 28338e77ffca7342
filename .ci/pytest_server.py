#!/usr/bin/env python3
"""A pytest fork server: import pytest and the heavy libraries once, fork one child per run.

The mutation gate runs pytest once per mutant; most of a short run is Python
starting and importing pytest and MLX. This server imports them
(never hypothesis, a pytest plugin that pytest must import itself to rewrite its
asserts, nor the library under test nor any test module, which every child imports
afresh from disk, mutant included) and then, for each JSON list of pytest
arguments read from stdin, forks a child that runs ``pytest.main(args)`` with
its output in a file, and answers one JSON line ``{"code": int, "output": str}``.
Nothing imported here starts a thread, so forking is safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time

# Imported once here, so that no child pays for them.
import _pytest.doctest
import _pytest.python  # noqa: F401
import mlx.core  # noqa: F401
import pytest

TIMEOUT_CODE = -1
OUTPUT_TAIL = 20_000


running: list[int] = []  # the child in flight, if any


def stop(signum: int, frame: object) -> None:
    """SIGTERM from the gate: end the run in flight with everything it started, then exit."""
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    os._exit(128 + signum)


def run(args: list[str], timeout_s: float, parent: int) -> dict[str, object]:
    if "specaccept" in sys.modules:
        raise RuntimeError("the server imported the library under test; children would share it")
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as output:
        pid = os.fork()
        if pid == 0:  # the child: its own process group, so a timeout ends its subprocesses too
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.setpgid(0, 0)
            os.dup2(output.fileno(), 1)
            os.dup2(output.fileno(), 2)
            code = 70
            try:
                code = int(pytest.main(args))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        running[:] = [pid]
        deadline = time.monotonic() + timeout_s
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            orphaned = os.getppid() != parent
            if orphaned or time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                if orphaned:  # the gate is gone: nobody reads the answer
                    sys.exit(1)
                code = TIMEOUT_CODE
                break
            time.sleep(0.02)
        running.clear()
        output.seek(0)
        return {"code": code, "output": output.read()[-OUTPUT_TAIL:]}


def main() -> None:
    signal.signal(signal.SIGTERM, stop)
    timeout_s, parent = float(sys.argv[1]), os.getppid()
    for line in sys.stdin:
        print(json.dumps(run(json.loads(line), timeout_s, parent)), flush=True)


if __name__ == "__main__":
    main()
