"""`specaccept vectors check`: the NumPy reference port passes every vector through it, and it
reports what a wrong, crashing, silent or missing port does.

The ports here are real processes speaking the line protocol of spec/vectors/schema.md: the
NumPy port of examples/numpy_port/, and small Python scripts that answer wrongly on purpose.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from specaccept.cli import main
from specaccept.cli.vectors import answer_mismatch, check_port

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "spec" / "vectors"
NUMPY_PORT = ROOT / "examples" / "numpy_port" / "serve.py"


def port_command(script: Path) -> str:
    return f"{sys.executable} {script}"


def committed_vector_count() -> int:
    return sum(len(json.loads(p.read_text("utf-8"))["vectors"])
               for p in VECTORS.glob("*.json") if p.name != "schema.json")


RECORDED = ROOT / "docs" / "results" / "vectors-check-numpy-port.md"
RECORDED_COMMAND = 'specaccept vectors check --port "python examples/numpy_port/serve.py"'


def recorded_text(out: str) -> str:
    return f"Produced by:\n\n```sh\n{RECORDED_COMMAND}\n```\n\n```text\n{out}```\n"


def test_the_numpy_port_passes_every_vector(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["vectors", "check", "--port", port_command(NUMPY_PORT),
                   "--vectors", str(VECTORS)])
    out = capsys.readouterr().out
    assert status == 0, out
    total = committed_vector_count()
    assert total > 400
    assert f"all {total} vectors passed" in out
    assert "effective_token_distribution.json" in out
    assert RECORDED.read_text("utf-8") == recorded_text(out), (
        f"{RECORDED.relative_to(ROOT)} is stale: rerun `{RECORDED_COMMAND}` from the "
        "repository root and record its output there"
    )


def test_the_numpy_port_imports_no_mlx() -> None:
    for path in (ROOT / "examples" / "numpy_port").glob("*.py"):
        text = path.read_text("utf-8")
        assert "import mlx" not in text and "from mlx" not in text, path
        assert "specaccept" not in text.replace("specaccept vectors check", ""), path


def write_port(tmp_path: Path, body: str) -> str:
    script = tmp_path / "port.py"
    script.write_text("import json, sys\n" + body, "utf-8")
    return port_command(script)


def test_a_wrong_port_is_reported_per_file_with_both_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Answers rewind_trim off by one and everything else with an empty output.
    command = write_port(tmp_path, """
for line in sys.stdin:
    request = json.loads(line)
    if request["family"] == "rewind_trim" and "error" not in request["name"]:
        n, a = request["input"]["num_draft"], request["input"]["num_accepted"]
        out = {"target_trim": n - a + 1, "draft_trim": max(n - a - 1, 0),
               "draft_backfill": a == n}
        if a == n:
            out["target_trim"] = 0
        print(json.dumps({"output": out}), flush=True)
    else:
        print(json.dumps({"output": {}}), flush=True)
""")
    status = main(["vectors", "check", "--port", command, "--vectors", str(VECTORS)])
    out = capsys.readouterr().out
    assert status == 1
    assert "first mismatch in rewind_trim.json: n1_a0: output.target_trim: port 2, expected 1" \
        in out
    rewind_row = next(line for line in out.splitlines() if line.startswith("rewind_trim.json"))
    assert rewind_row.split()[1:] == ["49", "8", "41"]  # the all-accepted rounds pass
    assert "vectors failed" in out


def test_an_error_vector_needs_the_error(tmp_path: Path) -> None:
    vector = {"name": "error_x", "input": {}, "atol": 0.0,
              "error": {"kind": "ValueError", "argument": "u"}}
    assert answer_mismatch(vector, {"error": {"kind": "ValueError", "argument": "u"}}) is None
    assert "argument" in str(answer_mismatch(vector,
                                             {"error": {"kind": "ValueError", "argument": "p"}}))
    assert "kind" in str(answer_mismatch(vector,
                                         {"error": {"kind": "TypeError", "argument": "u"}}))
    assert "expected the error" in str(answer_mismatch(vector, {"output": {"token": 0}}))


def test_reals_compare_within_atol_and_ids_exactly() -> None:
    vector = {"name": "x", "input": {}, "atol": 1e-6,
              "expected": {"probs": [0.5, 0.25], "token": 1, "accepted": True}}
    good = {"probs": [0.5000005, 0.25], "token": 1, "accepted": True}
    assert answer_mismatch(vector, {"output": good}) is None
    assert "probs[0]" in str(answer_mismatch(vector, {"output": {**good, "probs": [0.51, 0.25]}}))
    assert "token" in str(answer_mismatch(vector, {"output": {**good, "token": 1.0}}))
    assert "accepted" in str(answer_mismatch(vector, {"output": {**good, "accepted": 1}}))
    assert "probs[1]" in str(answer_mismatch(vector, {"output": {**good, "probs": [0.5, None]}}))


def test_a_port_that_exits_stops_the_check(tmp_path: Path) -> None:
    command = write_port(tmp_path, "sys.stdin.readline()\nsys.exit(3)\n")
    reports, stopped = check_port(command, VECTORS, timeout=30.0)
    assert "exited (status 3)" in stopped
    assert reports[0].cases == 0


def test_a_silent_port_times_out(tmp_path: Path) -> None:
    command = write_port(tmp_path, "import time\nsys.stdin.readline()\ntime.sleep(30)\n")
    _, stopped = check_port(command, VECTORS, timeout=0.5)
    assert "no answer within 0.5 s" in stopped


def test_a_port_that_does_not_start_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["vectors", "check", "--port", "/nonexistent/port --flag"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "does not start" in err and "Traceback" not in err


def test_a_missing_vectors_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["vectors", "check", "--port", "true", "--vectors", str(tmp_path / "none")])
    assert exit_info.value.code == 2
    assert "no such folder" in capsys.readouterr().err
