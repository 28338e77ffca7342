"""A malformed trace is an error naming its line and field; a truncated one is checked."""

from __future__ import annotations

import base64
import gzip
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pybase64
import pytest

from specaccept import AcceptanceRule, SamplerConfig
from specaccept.cli import main
from specaccept.conformance import TraceError, check_trace, read_trace
from specaccept.conformance.trace import _row_block
from specaccept.shell.conformance import TraceWriter, encode_rows

VOCAB = 4
P = [[0.5, 0.25, 0.125, 0.125]] * 3
Q = [[0.25, 0.25, 0.25, 0.25]] * 2


def _valid_lines(rounds: int = 3) -> list[str]:
    stream = io.StringIO()
    writer = TraceWriter(stream, vocab_size=VOCAB, prompt=[0, 1])
    for _ in range(rounds):
        writer.write_round(rule=AcceptanceRule.STOCHASTIC, draft_tokens=[0, 2], emitted=[0, 0],
                           target=encode_rows(P), draft=encode_rows(Q))
    return stream.getvalue().splitlines()


def _write(tmp_path: Path, lines: list[str], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _edit(line: str, change: Any) -> str:
    record = json.loads(line)
    change(record)
    return json.dumps(record)


@pytest.mark.parametrize(
    ("line", "change", "field", "words"),
    [
        (2, lambda r: r.pop("emitted"), "emitted", "list of token ids"),
        (3, lambda r: r.pop("target"), "target", "missing"),
        (2, lambda r: r.update(draft_tokens=[0, 9]), "draft_tokens[1]", "outside [0, 4)"),
        # A trace holds the drafts an engine verified, never a placeholder (spec/validation.md).
        (3, lambda r: r.update(draft_tokens=[-1, 1]), "draft_tokens[0]", "id -1 outside [0, 4)"),
        (2, lambda r: r.update(draft_tokens=[0, 2**31 - 1]), "draft_tokens[1]",
         "id 2147483647 outside [0, 4)"),
        (2, lambda r: r.update(emitted=[0, -1]), "emitted[1]", "outside"),
        (3, lambda r: r["target"]["probs"][1].append(0.0), "target.probs[1]", "vocabulary"),
        (2, lambda r: r["draft"]["probs"].pop(), "draft", "rows"),
        (2, lambda r: r["target"]["probs"][0].__setitem__(0, 0.75), "target.probs[0]",
         "sums to"),
        (2, lambda r: r["target"]["probs"][0].__setitem__(0, float("nan")),
         "target.probs[0][0]", "finite"),
        (4, lambda r: r.update(position=7), "position", "emitted 4"),
        (2, lambda r: r.update(uniforms=[[0.5, 0.5]]), "uniforms", "[k+1, 2]"),
        (2, lambda r: r.update(emitted=[1, 2]), "emitted", "accepted drafts"),
        (1, lambda r: r.update(version=3), "version", "must be 1 or 2"),
        (1, lambda r: r.update(target_sampler={"temp": 1.0}), "target_sampler.temp",
         "not a SamplerConfig field"),
        (2, lambda r: r.update(cache={"target_before": "x"}), "cache.target_before", "int"),
        (3, lambda r: r.update(accepted=1), "accepted", "not a round field"),
        (2, lambda r: r.update(target={"probs_b64": "AAAA", "rows": 3, "dtype": "float16"}),
         "target.dtype", "must be float32"),
    ],
)
def test_a_malformed_record_names_its_line_and_field(
    tmp_path: Path, line: int, change: Any, field: str, words: str
) -> None:
    lines = _valid_lines()
    lines[line - 1] = _edit(lines[line - 1], change)
    with pytest.raises(TraceError) as raised:
        read_trace(_write(tmp_path, lines))
    assert raised.value.line == line and raised.value.field == field, str(raised.value)
    assert f"trace line {line}" in str(raised.value) and words in str(raised.value)


SCHEMA = json.loads(
    (Path(__file__).resolve().parents[1] / "spec" / "trace_format.schema.json").read_text()
)


def test_the_json_schema_accepts_what_the_writer_writes() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    rows = np.array(P, dtype=np.float32)
    lines = _valid_lines(2)
    lines.append(json.dumps({
        "round": 2, "position": 4, "rule": "stochastic", "draft_tokens": [0, 1],
        "emitted": [0, 0], "target": encode_rows(rows, kind="logits", encoding="b64",
                                                  dtype="bfloat16"),
        "draft": encode_rows(np.array(Q, dtype=np.float32), encoding="sparse"),
        "uniforms": [[0.0, 0.5]] * 3, "stopped": True,
        "cache": {"target_before": 5, "draft_before": 5, "draft_fed": 1},
    }))
    for line in lines:
        validator.validate(json.loads(line))


@pytest.mark.parametrize(
    "change",
    [lambda r: r.update(accepted=1), lambda r: r.pop("emitted"),
     lambda r: r.update(target={"probs_b64": "AAAA", "rows": 1, "dtype": "float16"}),
     lambda r: r.update(uniforms=[[0.5, 1.0]] * 3),
     lambda r: r.update(cache={"draft_before": 1})],
)
def test_the_json_schema_rejects_what_the_reader_rejects(change: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    line = _edit(_valid_lines(1)[1], change)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(line), SCHEMA)


def test_bad_json_in_the_middle_is_an_error_not_a_truncation(tmp_path: Path) -> None:
    lines = _valid_lines()
    lines[2] = lines[2][:40]
    with pytest.raises(TraceError, match=r"trace line 3, field 'record': is not valid JSON"):
        read_trace(_write(tmp_path, lines))


def test_a_truncated_trace_keeps_its_valid_prefix(tmp_path: Path) -> None:
    lines = _valid_lines(4)
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:55])
    trace = read_trace(path)
    assert len(trace.rounds) == 3
    assert trace.truncated is not None and "line 5" in trace.truncated
    report = check_trace(trace)
    assert report.truncated == trace.truncated and "TRUNCATED" in report.to_text()


def test_a_gzip_trace_cut_short_keeps_its_valid_prefix(tmp_path: Path) -> None:
    data = gzip.compress(("\n".join(_valid_lines(40)) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) * 3 // 4])
    trace = read_trace(path)
    assert 0 < len(trace.rounds) < 40 and trace.truncated is not None
    whole = tmp_path / "whole.jsonl.gz"
    whole.write_bytes(data)
    assert len(read_trace(whole).rounds) == 40 and read_trace(whole).truncated is None


def test_a_trace_with_no_round_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="trace line 2, field 'round'"):
        read_trace(_write(tmp_path, _valid_lines()[:1]))
    lines = _valid_lines(1)
    lines[1] = lines[1][:30]  # the only round, cut short
    with pytest.raises(TraceError, match="trace line 2"):
        read_trace(_write(tmp_path, lines))


def test_the_encodings_decode_to_the_same_rows(tmp_path: Path) -> None:
    rows = np.array(P, dtype=np.float32)
    for block in (encode_rows(rows), encode_rows(rows, encoding="b64"),
                  encode_rows(rows, encoding="sparse")):
        lines = _valid_lines(1)
        lines[1] = _edit(lines[1], lambda r, b=block: r.update(target=b))
        trace = read_trace(_write(tmp_path, lines))
        assert np.array_equal(trace.rounds[0].target_rows, rows), block
    logits = np.log(rows)
    for dtype, cast in (("float16", np.float16), ("bfloat16", None)):
        kind, decoded = _row_block(encode_rows(logits, kind="logits", encoding="b64",
                                               dtype=dtype), VOCAB, 2, "target")
        assert kind == "logits"
        if cast is not None:
            assert np.array_equal(decoded, logits.astype(cast).astype(np.float32))
        else:  # bfloat16 keeps float32's exponent and 8 bits of mantissa
            assert np.allclose(decoded, logits, rtol=2**-8) and not np.array_equal(decoded, 0)


def test_base64_rows_are_read_as_the_standard_library_reads_them() -> None:
    """Row text is decoded by a faster decoder than `base64.b64decode(validate=True)`, with
    the same outcome: padding after a whole quantum, which the faster one refuses and the
    standard library ignores, still reads; a character outside the alphabet is refused."""
    rows = np.array([[0.5, 0.25, 0.25]], dtype="<f4")  # 12 bytes: whole quanta, no padding
    text = base64.b64encode(rows.tobytes()).decode()
    with pytest.raises(ValueError):
        pybase64.b64decode(text + "=", validate=True)
    kind, decoded = _row_block({"probs_b64": text + "=", "rows": 1}, 3, 2, "target")
    assert kind == "probs" and np.array_equal(decoded, rows)
    with pytest.raises(TraceError, match="is not valid base64"):
        _row_block({"probs_b64": text[:-1] + "!", "rows": 1}, 3, 2, "target")


def test_logit_rows_are_rebuilt_with_the_spec_sampler(tmp_path: Path) -> None:
    stream = io.StringIO()
    config = SamplerConfig(temperature=0.5)
    writer = TraceWriter(stream, vocab_size=VOCAB, target_sampler=config, draft_sampler=config)
    logits = np.log(np.array(P, dtype=np.float32))
    writer.write_round(rule="stochastic", draft_tokens=[0, 1], emitted=[0, 0],
                       target=encode_rows(logits, kind="logits"),
                       draft=encode_rows(np.log(np.array(Q, dtype=np.float32)), kind="logits"))
    trace = read_trace(_write(tmp_path, stream.getvalue().splitlines()))
    expected = np.array(P) ** 2 / (np.array(P) ** 2).sum(axis=1, keepdims=True)
    assert np.allclose(trace.rounds[0].target_rows, expected, atol=1e-6)
    lines = stream.getvalue().splitlines()
    header = json.loads(lines[0])
    header.pop("target_sampler")
    lines[0] = json.dumps(header)
    with pytest.raises(TraceError, match="needs 'target_sampler'"):
        read_trace(_write(tmp_path, lines))


def test_the_cli_exits_2_with_the_message_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _valid_lines()
    lines[1] = _edit(lines[1], lambda r: r.update(draft_tokens=[0, 99]))
    path = _write(tmp_path, lines)
    with pytest.raises(SystemExit) as raised:
        main(["conform", str(path)])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "trace line 2, field 'draft_tokens[1]'" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as raised:
        main(["conform", str(tmp_path / "missing.jsonl")])
    assert raised.value.code == 2
    assert "cannot read the trace" in capsys.readouterr().err


def test_the_cli_exit_status_is_the_verdict(tmp_path: Path) -> None:
    good = _write(tmp_path, _valid_lines(), "good.jsonl")
    assert main(["conform", str(good)]) == 0
    lines = _valid_lines()
    # Emit a token the target gives p = 0: the support check must fail.
    lines[1] = _edit(lines[1], lambda r: r["target"]["probs"][1].__setitem__(
        slice(None), [0.0, 0.5, 0.5, 0.0]))
    assert main(["conform", str(_write(tmp_path, lines, "bad.jsonl"))]) == 1


@pytest.mark.parametrize("ending", ["", "\n", "\r\n", "\n\n"])
def test_a_cut_last_line_is_truncation_whether_or_not_a_newline_follows(
    tmp_path: Path, ending: str
) -> None:
    """A cut line that still ends in a newline (an editor or `echo` adds one) is the same
    truncation as one without: it was refused, naming a column on the line after it."""
    lines = _valid_lines(4)
    cut = lines[-1][:55]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines[:-1]) + "\n" + cut + ending, newline="")
    trace = read_trace(path)
    assert len(trace.rounds) == 3
    assert trace.truncated == (f"line 5 is an incomplete JSON record ({_json_defect(cut)}); "
                               "the 3 rounds before it were checked")


def _json_defect(text: str) -> str:
    """What the reader says of a line that is not JSON: the parser's reason, then the column
    on that line (1-based), with no newline to count."""
    with pytest.raises(json.JSONDecodeError) as raised:
        json.loads(text)
    reason = raised.value.msg.removesuffix(" at")
    assert "\n" not in text and raised.value.lineno == 1
    return f"{reason} at column {raised.value.pos + 1}"


def test_a_json_defect_before_the_last_line_stays_a_defect_with_its_column(
    tmp_path: Path,
) -> None:
    lines = _valid_lines(4)
    lines[3] = lines[3][:55]
    path = _write(tmp_path, lines)
    with pytest.raises(TraceError) as raised:
        read_trace(path)
    assert str(raised.value) == (f"trace line 4, field 'record': is not valid JSON: "
                                 f"{_json_defect(lines[3])}")
    # The newline ends the line; inside the cut string it was read as a control character.
    assert _json_defect(lines[3]) == "Unterminated string starting at column 45"


def test_conform_reports_a_cut_last_line_with_a_newline_as_truncated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _valid_lines(4)
    path = _write(tmp_path, [*lines[:-1], lines[-1][:55]])
    status = main(["conform", str(path)])
    out = capsys.readouterr()
    assert "TRUNCATED" in out.out and "line 5 is an incomplete JSON record" in out.out, out
    assert status in (0, 1)
