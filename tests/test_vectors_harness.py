"""`specaccept vectors check --port` as a harness: whatever the port does, the check ends.

Each port here misbehaves on purpose (stops reading, closes its output and keeps running,
writes bytes that are not UTF-8 or JSON nested 100k deep); each vectors folder is malformed in
one way; and the CLI is signalled mid-check. Every case ends within its deadline, in a
report or one line on stderr, and leaves no process of the port's group behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specaccept.cli import main
from specaccept.cli.vectors import answer_mismatch, check_port, load_files, parse_answer

ROOT = Path(__file__).resolve().parents[1]


def _port(tmp_path: Path, body: str) -> str:
    script = tmp_path / "port.py"
    script.write_text("import json, os, sys, time\n" + body, "utf-8")
    return f"{sys.executable} {script}"


def _vectors(tmp_path: Path, vectors: object, name: str = "family.json") -> Path:
    folder = tmp_path / "vectors"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(json.dumps({"family": "f", "vectors": vectors}))
    return folder


ONE = [{"name": "v", "input": {"x": 1}, "expected": {"y": 2}, "atol": 0.0}]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_port_that_closes_its_output_and_keeps_running_meets_the_deadline(
    tmp_path: Path
) -> None:
    # It waited on the process's exit, forever.
    command = _port(tmp_path, "sys.stdin.readline()\nos.close(1)\ntime.sleep(60)\n")
    start = time.monotonic()
    _, stopped = check_port(command, _vectors(tmp_path, ONE), timeout=1.0)
    assert time.monotonic() - start < 10
    assert "closed its output without answering and is still running" in stopped


def test_a_port_that_never_reads_a_large_request_meets_the_deadline(tmp_path: Path) -> None:
    # 8 MB cannot fit a pipe's buffer: the write itself blocks on a port that does not read.
    big = [{"name": "big", "input": {"x": [0.5] * 2_000_000}, "expected": {}, "atol": 0.0}]
    command = _port(tmp_path, "time.sleep(60)\n")
    folder = _vectors(tmp_path, big)
    start = time.monotonic()
    _, stopped = check_port(command, folder, timeout=1.0)
    assert time.monotonic() - start < 20  # reading the 8 MB file is most of it
    assert "read no request within 1 s" in stopped


@pytest.mark.parametrize(("answer", "words"), [
    (b"\\xff\\xfe\\n", "not UTF-8: byte 0xff at column 1"),
    (b"[" * 100_000 + b"]" * 100_000 + b"\\n", "nested deeper than the parser's limit"),
    (b"{not json\\n", "{not json"),
])
def test_an_undecodable_answer_is_a_mismatch_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answer: bytes, words: str
) -> None:
    command = _port(tmp_path, f"sys.stdin.readline()\nsys.stdout.buffer.write(b'{answer.decode()}')"
                              "\nsys.stdout.flush()\n")
    status = main(["vectors", "check", "--port", command,
                   "--vectors", str(_vectors(tmp_path, ONE)), "--timeout", "10"])
    out = capsys.readouterr().out
    assert status == 1 and "first mismatch in family.json: v:" in out and words in out, out


def test_an_overlong_answer_stops_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specaccept.cli import vectors

    monkeypatch.setattr(vectors, "MAX_ANSWER_BYTES", 1000)
    command = _port(tmp_path, "sys.stdin.readline()\nprint('x' * 5000, flush=True)\n"
                              "time.sleep(60)\n")
    _, stopped = check_port(command, _vectors(tmp_path, ONE), timeout=5.0)
    assert "longer than 1000 bytes" in stopped


@pytest.mark.parametrize("timeout", ["inf", "1e12", "nan", "0", "-1"])
def test_an_unbounded_timeout_is_one_line(
    capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["vectors", "check", "--port", "true", "--timeout", timeout])
    err = capsys.readouterr().err
    assert raised.value.code == 2 and err.count("\n") == 1
    assert "--timeout must lie in (0, 86400] seconds" in err


@pytest.mark.parametrize(("document", "words"), [
    ('"a string"', "must be an object with a string 'family'"),
    ("5", "must be an object with a string 'family'"),
    ('{"family": "f", "vectors": 5}', "must be an object with a string 'family'"),
    ('{"family": "f", "vectors": ["v"]}', "vector 0 is not an object"),
    ('{"family": "f", "vectors": [{"input": {}, "expected": {}, "atol": 0}]}',
     "vector 0 has no 'name' string"),
    ('{"family": "f", "vectors": [{"name": "v", "expected": {}, "atol": 0}]}',
     "vector 0 ('v') has no 'input' object"),
    ('{"family": "f", "vectors": [{"name": "v", "input": {}, "atol": 0}]}',
     "neither 'expected' nor 'error'"),
    ('{"family": "f", "vectors": [{"name": "v", "input": {}, "expected": {}, "atol": "x"}]}',
     "'atol' must be a finite number"),
    ("[" * 100_000, "nests too deeply"),
])
def test_a_malformed_vectors_file_is_refused_naming_file_and_vector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str, words: str
) -> None:
    folder = tmp_path / "vectors"
    folder.mkdir()
    (folder / "bad.json").write_text(document)
    with pytest.raises(SystemExit) as raised:
        main(["vectors", "check", "--port", "true", "--vectors", str(folder)])
    err = capsys.readouterr().err
    assert raised.value.code == 2 and err.count("\n") == 1, err
    assert "bad.json" in err and words in err, err


HANGING_PORT = """
child = os.fork()
if child == 0:  # a grandchild holding the inherited stderr open
    time.sleep(120)
    os._exit(0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()} {child}")
sys.stdin.readline()
time.sleep(120)
"""


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_the_port_and_its_children(
    tmp_path: Path, signum: int, status: int
) -> None:
    # SIGTERM left the port running, reparented, and a reader of the CLI's stderr waited on it.
    pids = tmp_path / "pids"
    command = _port(tmp_path, HANGING_PORT) + f" {pids}"
    cli = subprocess.Popen(
        [sys.executable, "-c", "import sys; from specaccept.cli import main; "
         "sys.exit(main(sys.argv[1:]))", "vectors", "check", "--port", command,
         "--vectors", str(_vectors(tmp_path, ONE)), "--timeout", "100"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT / "impl")},
    )
    deadline = time.monotonic() + 30
    while not (pids.exists() and pids.read_text().count(" ") == 1):
        assert time.monotonic() < deadline and cli.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)
    port, child = (int(x) for x in pids.read_text().split())
    cli.send_signal(signum)
    # communicate() returns only when every holder of the CLI's stderr has closed it.
    _, err = cli.communicate(timeout=20)
    assert cli.returncode == status, err
    assert b"Traceback" not in err and err.count(b"\n") == 1, err
    assert _gone(port) and _gone(child)


# --- fuzz: whatever bytes a port writes, the comparison ends in a match or a mismatch -----

_VECTORS = [vector for _, vectors in load_files(ROOT / "spec" / "vectors") for vector in vectors]
_SAMPLE = [v for v in _VECTORS if "error" in v][:3] + [v for v in _VECTORS if "error" not in v][:6]

json_answers = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["output", "error", "kind", "argument", "token", "probs", "x"]), inner,
        max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.one_of(st.binary(max_size=64),
                 json_answers.map(lambda a: json.dumps(a).encode() + b"\n")),
       st.sampled_from(_SAMPLE))
def test_fuzz_any_answer_bytes_end_in_a_verdict(line: bytes, vector: dict[str, object]) -> None:
    found = answer_mismatch(vector, parse_answer(line))
    assert found is None or (isinstance(found, str) and found)


# --- the tree reliability probe's port findings ---------------------------------------------

SESSION_LEAVING_PORT = """
pids = sys.argv[1]
if os.fork() == 0:
    os.setsid()  # out of the port's process group and session
    if os.fork() == 0:
        with open(pids, "w") as out:
            out.write(str(os.getpid()))
        time.sleep(120)  # holds the port's stdout
        os._exit(0)
    os._exit(0)
os.wait()
sys.exit(0)  # exits at once, without answering
"""


def test_a_child_that_leaves_the_ports_session_neither_holds_the_check_nor_outlives_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Closing the output pipe waited for the child's 120 s sleep, and the child lived on.
    pids = tmp_path / "pids"
    started = time.monotonic()
    status = main(["vectors", "check", "--port", _port(tmp_path, SESSION_LEAVING_PORT)
                   + f" {pids}", "--vectors", str(_vectors(tmp_path, ONE)), "--timeout", "2"])
    assert status == 1 and time.monotonic() - started < 30
    assert "no answer within 2 s" in capsys.readouterr().out
    if sys.platform == "linux":  # found through /proc
        assert _gone(int(pids.read_text()))


def test_an_unclosed_quotation_in_port_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["vectors", "check", "--port", "python 'oops"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == ("specaccept: error: --port \"python 'oops\" is not a command line: "
                           "No closing quotation"), err


def test_an_integer_past_float64_where_a_real_is_expected_is_a_mismatch() -> None:
    vector = {"name": "v", "input": {}, "expected": {"y": 0.5}, "atol": 0.0}
    found = answer_mismatch(vector, {"output": {"y": 10**400}})
    assert found is not None and found.startswith("output.y: port 1000"), found
