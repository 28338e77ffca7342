"""`specaccept vectors check`: replay the golden vectors through a port in any language.

The port is a command that speaks the line protocol of spec/vectors/schema.md ("Replaying a
port"): for every vector it reads one request line on stdin,
``{"family": ..., "name": ..., "input": {...}}``, and writes one answer line on stdout,
``{"output": {...}}`` or ``{"error": {"kind": ..., "argument": ...}}``. This module sends the
requests one at a time, compares each answer with the vector (ids and booleans exactly, reals
within the vector's ``atol``, an error by kind and argument), and prints per file how many
cases passed and the first mismatch with both values. It needs no MLX.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from specaccept.shell.rule_choice import BLOCK_VERIFY_ENV, STOCHASTIC_ACCEPT_ENV

__all__ = [
    "FileReport", "add_parser", "answer_mismatch", "check_port", "default_vectors_dir",
    "numpy_port_command",
]


@dataclass
class FileReport:
    """What replaying one vectors file through a port found."""

    file: str
    cases: int = 0
    passed: int = 0
    first_mismatch: str | None = None
    mismatches: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.cases - self.passed


def add_parser(commands: Any) -> None:
    """Register `vectors` (with its `check` action) on the subparsers action `commands`."""
    vectors: argparse.ArgumentParser = commands.add_parser(
        "vectors", help="replay the golden vectors through a port"
    )
    actions = vectors.add_subparsers(dest="action", required=True)
    check = actions.add_parser(
        "check", help="stream every vector to a port's stdin and compare its answers",
        description="Stream every golden vector as one JSON line to the port's stdin, read one "
        "JSON line back per vector, and report per file the cases, passed and failed, and the "
        "first mismatch with both values. Exit status 0 when every vector passes, 1 otherwise.",
    )
    port = check.add_mutually_exclusive_group(required=True)
    port.add_argument("--port", metavar="CMD",
                      help="the port's command line, split like a shell does (no shell runs)")
    port.add_argument("--numpy-port", action="store_true",
                      help="replay through the NumPy port that ships with specaccept "
                      "(examples/numpy_port of the repository)")
    check.add_argument("--vectors", type=Path, default=None, metavar="DIR",
                       help="the vectors folder (default: the golden vectors installed with "
                       "specaccept, else spec/vectors of the checkout or the current folder)")
    check.add_argument("--timeout", type=float, default=60.0, metavar="S",
                       help="seconds to wait for each answer (default: 60)")
    check.add_argument("--all-mismatches", action="store_true",
                       help="print every mismatch, not only the first of each file")
    check.set_defaults(handler=run_check)


PACKAGE_DIR = Path(__file__).resolve().parents[1]
"""The installed `specaccept` package; in a checkout, impl/specaccept."""


def default_vectors_dir() -> Path:
    """The golden vectors the wheel installs, else spec/vectors of the checkout this package
    lives in, else of the current directory."""
    for candidate in (PACKAGE_DIR / "golden_vectors",
                      PACKAGE_DIR.parents[1] / "spec" / "vectors",
                      Path.cwd() / "spec" / "vectors"):
        if candidate.is_dir():
            return candidate
    raise ValueError("no golden vectors installed with specaccept, and no spec/vectors folder "
                     "in this checkout or here: pass --vectors DIR")


def numpy_port_command() -> str:
    """The command line of the NumPy port: the copy the wheel installs, else the checkout's."""
    for candidate in (PACKAGE_DIR / "numpy_port" / "serve.py",
                      PACKAGE_DIR.parents[1] / "examples" / "numpy_port" / "serve.py"):
        if candidate.is_file():
            return shlex.join([sys.executable, str(candidate)])
    raise ValueError("--numpy-port: the NumPy port is neither installed with specaccept nor in "
                     "this checkout (examples/numpy_port/serve.py); pass --port CMD")


def load_files(directory: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """Every vectors file of `directory`, each vector checked for the fields a request needs."""
    files = sorted(p for p in directory.glob("*.json") if p.name != "schema.json")
    if not files:
        raise ValueError(f"--vectors {directory}: no vectors files (*.json) there")
    loaded = []
    for path in files:
        try:
            document = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError, RecursionError) as error:
            reason = "nests too deeply" if isinstance(error, RecursionError) else str(error)
            raise ValueError(f"{path}: not a vectors file ({reason})") from None
        if not isinstance(document, dict) or not isinstance(document.get("family"), str) \
                or not isinstance(document.get("vectors"), list):
            raise ValueError(f"{path}: not a vectors file (it must be an object with a string "
                             "'family' and a list 'vectors')")
        vectors = [_checked_vector(path, i, v) for i, v in enumerate(document["vectors"])]
        loaded.append((path.name, [{"family": document["family"], **v} for v in vectors]))
    return loaded


def _checked_vector(path: Path, index: int, vector: object) -> dict[str, Any]:
    """`vector` when it has what a request and its comparison read; else a ValueError."""
    where = f"{path}: vector {index}"
    if not isinstance(vector, dict):
        raise ValueError(f"{where} is not an object: {show(vector)[:60]}")
    name = vector.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} has no 'name' string")
    where = f"{path}: vector {index} ({name!r})"
    if not isinstance(vector.get("input"), dict):
        raise ValueError(f"{where} has no 'input' object")
    if "error" in vector:
        if not isinstance(vector["error"], dict):
            raise ValueError(f"{where}: 'error' must be an object")
    else:
        if "expected" not in vector:
            raise ValueError(f"{where} has neither 'expected' nor 'error'")
        atol = vector.get("atol")
        if isinstance(atol, bool) or not isinstance(atol, int | float) \
                or not math.isfinite(atol) or atol < 0:
            raise ValueError(f"{where}: 'atol' must be a finite number >= 0, got {atol!r}")
    return vector


def show(value: object) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=True)


def _finite_float(value: int | float) -> bool:
    """Whether `value` is a finite float64: an integer past its range (10**400) is not."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def value_mismatch(where: str, got: object, want: object, atol: float) -> str | None:
    """Where `got` differs from `want`: ids, booleans and strings exactly, reals within atol."""
    if isinstance(want, bool):
        ok = isinstance(got, bool) and got == want
    elif isinstance(want, int):
        ok = isinstance(got, int) and not isinstance(got, bool) and got == want
    elif isinstance(want, float):
        ok = (isinstance(got, int | float) and not isinstance(got, bool)
              and _finite_float(got) and abs(float(got) - want) <= atol)
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: port {show(got)}, expected {show(want)}"
        for index, (g, w) in enumerate(zip(got, want, strict=True)):
            found = value_mismatch(f"{where}[{index}]", g, w, atol)
            if found is not None:
                return found
        return None
    elif isinstance(want, dict):
        if not isinstance(got, dict) or sorted(got) != sorted(want):
            return f"{where}: port {show(got)}, expected {show(want)}"
        for key in sorted(want):
            found = value_mismatch(f"{where}.{key}", got[key], want[key], atol)
            if found is not None:
                return found
        return None
    else:
        ok = got == want
    if ok:
        return None
    tolerance = f" (atol {atol})" if isinstance(want, float) else ""
    return f"{where}: port {show(got)}, expected {show(want)}{tolerance}"


def answer_mismatch(vector: dict[str, Any], answer: object) -> str | None:
    """Why `answer` does not match `vector`, or None when it does."""
    if not isinstance(answer, dict):
        return f"the answer is not a JSON object: {show(answer)}"
    if "error" in vector:
        if "error" not in answer:
            return (f"the port returned {show(answer.get('output'))}, expected the error "
                    f"{show(vector['error'])}")
        return value_mismatch("error", answer["error"], vector["error"], 0.0)
    if "output" not in answer:
        return f"the port answered {show(answer)}, expected an output"
    return value_mismatch("output", answer["output"], vector["expected"], float(vector["atol"]))


def port_environment() -> dict[str, str]:
    """This environment without this library's rule switches, so none can leak into a port."""
    switches = (STOCHASTIC_ACCEPT_ENV, BLOCK_VERIFY_ENV)
    return {name: value for name, value in os.environ.items() if name not in switches}


MAX_TIMEOUT = 86400.0
"""The longest `--timeout`, one day: a bound the clock and the queue can wait on."""
MAX_ANSWER_BYTES = 64 * 2**20
"""The longest answer line read; a port that writes more without a newline is stopped."""


_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then let a pending one through.

    Starting and ending the port are done with the signals held, so that an interrupt can
    never land between the port's start and the code that owns ending it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _release_signals() -> None:
    """In the port's process, before it runs: no signal held (a mask survives exec)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)


class Port:
    """The port's process: one request line out, one answer line back, within a deadline.

    The port runs in its own process group, ended by `close` on every exit path, so that
    neither it nor a child it started outlives the check. Writing and reading run in threads,
    so a port that stops reading its input, or closes its output and keeps running, meets the
    same deadline as a silent one.
    """

    def __init__(self, command: str, timeout: float) -> None:
        try:
            argv = shlex.split(command)
        except ValueError as error:  # an unclosed quotation, a trailing escape
            raise ValueError(f"--port {command!r} is not a command line: {error}") from None
        if not argv:
            raise ValueError("--port is empty")
        try:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=port_environment(),
                start_new_session=True, preexec_fn=_release_signals,
            )
        except OSError as error:
            raise ValueError(f"--port {command!r} does not start: {error}") from error
        self.timeout = timeout
        # An answer line, None at the end of the output, or the length of an overlong line.
        self.lines: queue.Queue[bytes | int | None] = queue.Queue()
        self.written: queue.Queue[BaseException | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            while True:
                line = self.process.stdout.readline(MAX_ANSWER_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_ANSWER_BYTES:
                    self.lines.put(len(line))
                    return
                self.lines.put(line)
        except (OSError, ValueError):  # the pipe was closed under us by `close`
            pass
        self.lines.put(None)

    def _write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except (OSError, ValueError) as error:
            self.written.put(error)
            return
        self.written.put(None)

    def ask(self, request: dict[str, Any]) -> object:
        """Send one request; return the parsed answer line, or raise `PortGone`."""
        deadline = time.monotonic() + self.timeout
        data = (json.dumps(request, allow_nan=False) + "\n").encode("utf-8")
        threading.Thread(target=self._write, args=(data,), daemon=True).start()
        try:
            failed = self.written.get(timeout=self.timeout)
        except queue.Empty:
            raise PortGone(f"the port read no request within {self.timeout:g} s") from None
        if failed is not None:
            raise PortGone(f"the port stopped reading its input ({failed})")
        try:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            raise PortGone(f"no answer within {self.timeout:g} s") from None
        if line is None:
            try:
                status = self.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                raise PortGone("the port closed its output without answering and is still "
                               "running") from None
            raise PortGone(f"the port exited (status {status}) without answering")
        if isinstance(line, int):
            raise PortGone(f"the port wrote an answer longer than {MAX_ANSWER_BYTES} bytes")
        return parse_answer(line)

    def close(self, *, force: bool = False) -> None:
        """End the port: close its input and let it exit (or kill it at once if `force`),
        then kill whatever is left of its process group."""
        with _signals_held():
            self._close(force=force)

    def _close(self, *, force: bool) -> None:
        if force:
            self._kill_group()
        if self.process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):  # a dead port closed the pipe
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill_group()
            self.process.wait()
        self._kill_group()  # children the port started and left behind
        self.reader.join(timeout=0.5)
        if self.reader.is_alive():
            # Someone outside the group (a child that left the port's session) still holds
            # the output pipe: end it, as the port's, where the system lists open files.
            self._kill_pipe_holders()
            self.reader.join(timeout=0.5)
        if self.process.stdout is not None and not self.reader.is_alive():
            # Closing a pipe a blocked reader holds would wait for that reader: left open
            # (the daemon thread ends with this process) when a holder could not be ended.
            with contextlib.suppress(OSError, ValueError):
                self.process.stdout.close()

    def _kill_pipe_holders(self) -> None:
        """SIGKILL every other process holding the port's output pipe (Linux's /proc)."""
        assert self.process.stdout is not None
        try:
            pipe = f"pipe:[{os.fstat(self.process.stdout.fileno()).st_ino}]"
            pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        except (OSError, ValueError):
            return
        for pid in pids:
            if pid == os.getpid():
                continue
            with contextlib.suppress(OSError):
                fds = os.listdir(f"/proc/{pid}/fd")
                if any(_readlink(f"/proc/{pid}/fd/{fd}") == pipe for fd in fds):
                    os.kill(pid, signal.SIGKILL)

    def _kill_group(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def parse_answer(line: bytes) -> object:
    """One answer line as JSON; what is not UTF-8 or not JSON becomes a mismatch to report."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        return {"unparsable": f"not UTF-8: byte 0x{line[error.start]:02x} at column "
                              f"{error.start + 1}"}
    try:
        answer: object = json.loads(text)
    except RecursionError:
        return {"unparsable": "JSON nested deeper than the parser's limit"}
    except ValueError:
        return {"unparsable": text.rstrip("\n")[:200]}
    return answer


class PortGone(RuntimeError):
    """The port exited, closed its input, or did not answer in time."""


def check_port(command: str, directory: Path, timeout: float) -> tuple[list[FileReport], str]:
    """Replay every vector of `directory` through `command`.

    Returns one report per file and, when the port stopped answering, why ('' otherwise).
    """
    files = load_files(directory)
    reports: list[FileReport] = []
    stopped = ""
    finished = False
    port: Port | None = None
    try:
        # Inside the try: a signal held while the port started is raised once it is owned.
        with _signals_held():
            port = Port(command, timeout)
        for name, vectors in files:
            report = FileReport(name)
            reports.append(report)
            for vector in vectors:
                request = {"family": vector["family"], "name": vector["name"],
                           "input": vector["input"]}
                try:
                    answer = port.ask(request)
                except PortGone as gone:
                    stopped = f"{name}: {vector['name']}: {gone}"
                    return reports, stopped
                report.cases += 1
                found = answer_mismatch(vector, answer)
                if found is None:
                    report.passed += 1
                    continue
                line = f"{vector['name']}: {found}"
                report.mismatches.append(line)
                if report.first_mismatch is None:
                    report.first_mismatch = line
        finished = True
    finally:
        # An interrupt, a termination or an error here ends the port's group at once.
        if port is not None:
            port.close(force=bool(stopped) or not finished)
    return reports, ""


def print_reports(reports: Sequence[FileReport], stopped: str, every: bool, out: TextIO) -> int:
    width = max([len(r.file) for r in reports] + [4])
    print(f"{'file':<{width}}  {'cases':>6}  {'passed':>6}  {'failed':>6}", file=out)
    for r in reports:
        print(f"{r.file:<{width}}  {r.cases:>6}  {r.passed:>6}  {r.failed:>6}", file=out)
    for r in reports:
        for line in (r.mismatches if every else r.mismatches[:1]):
            label = "mismatch" if every else "first mismatch"
            print(f"{label} in {r.file}: {line}", file=out)
    cases = sum(r.cases for r in reports)
    failed = sum(r.failed for r in reports)
    if stopped:
        print(f"stopped: {stopped}", file=out)
        return 1
    if failed:
        print(f"{failed} of {cases} vectors failed", file=out)
        return 1
    print(f"all {cases} vectors passed", file=out)
    return 0


EXIT_TERMINATED = 128 + signal.SIGTERM
"""The status after SIGTERM, as a shell reports a command the signal ended."""


def _terminate(signum: int, frame: object) -> None:
    sys.stderr.write("specaccept: terminated\n")
    # SystemExit unwinds through `check_port`'s finally, which ends the port's group.
    raise SystemExit(EXIT_TERMINATED)


def run_check(args: argparse.Namespace) -> int:
    if not 0 < args.timeout <= MAX_TIMEOUT:  # NaN fails too
        raise ValueError(f"--timeout must lie in (0, {MAX_TIMEOUT:g}] seconds, got "
                         f"{args.timeout!r}")
    directory = args.vectors if args.vectors is not None else default_vectors_dir()
    if not directory.is_dir():
        raise ValueError(f"--vectors {directory}: no such folder")
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        port = numpy_port_command() if args.numpy_port else args.port
        reports, stopped = check_port(port, directory, args.timeout)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return print_reports(reports, stopped, args.all_mismatches, sys.stdout)
