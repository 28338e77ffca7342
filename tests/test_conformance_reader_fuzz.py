"""The trace reader on hostile input: every case ends in a verdict on valid data or a TraceError.

Each named case below was once judged (a verdict on a malformed trace) or crashed the reader
(a traceback at `specaccept conform`); the Hypothesis fuzz then mutates valid traces at
random JSON paths and holds the reader to the same rule, and to being at least as strict as
spec/trace_format.schema.json.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specaccept import AcceptanceRule, SamplerConfig
from specaccept.cli import main
from specaccept.conformance import TraceError, Verdict, check_trace, read_trace
from specaccept.conformance import trace as trace_module
from specaccept.shell.conformance import TraceWriter, encode_rows

VOCAB = 4
P = [[0.5, 0.25, 0.125, 0.125]] * 3
Q = [[0.25, 0.25, 0.25, 0.25]] * 2
SCHEMA = json.loads(
    (Path(__file__).resolve().parents[1] / "spec" / "trace_format.schema.json").read_text()
)


def _valid(rounds: int = 3, **header: Any) -> list[dict[str, Any]]:
    stream = io.StringIO()
    writer = TraceWriter(stream, vocab_size=VOCAB, prompt=[0, 1], **header)
    for _ in range(rounds):
        writer.write_round(rule=AcceptanceRule.STOCHASTIC, draft_tokens=[0, 2], emitted=[0, 0],
                           target=encode_rows(P), draft=encode_rows(Q))
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _write(tmp_path: Path, records: list[Any], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _logit_header() -> dict[str, Any]:
    return {"format": "specaccept-trace", "version": 1, "vocab_size": VOCAB, "prompt": [0, 1],
            "target_sampler": {"dry_multiplier": 1e-50, "dry_allowed_length": 1}}


# (name, edit of the records, the line and field the error must name, words it must hold)
CASES: list[tuple[str, Any, int, str, str]] = [
    ("probabilities as strings",
     lambda r: r[1]["target"].update(probs=[[str(x) for x in row] for row in P]),
     2, "target.probs[0][0]", "must be a number"),
    ("a bool among the probabilities",
     lambda r: r[1]["target"]["probs"][0].__setitem__(0, True), 2, "target.probs[0][0]",
     "must be a number"),
    ("version true", lambda r: r[0].update(version=True), 1, "version", "must be 1"),
    ("sparse values as strings",
     lambda r: r[1].update(target={"sparse_probs": [
         {"ids": [0, 1, 2, 3], "values": ["0.5", "0.25", "0.125", "0.125"]}] * 3}),
     2, "target.sparse_probs[0].values[0]", "must be a number"),
    ("DRY multiplier 0 in float32",
     lambda r: (r[0].update(_logit_header()),
                r[1].update(target=encode_rows(np.log(np.array(P, np.float32)), kind="logits"))),
     1, "target_sampler", "dry_multiplier"),
    ("dry_sequence_breakers 5", lambda r: r[0].update(target_sampler={"dry_sequence_breakers": 5}),
     1, "target_sampler.dry_sequence_breakers", "list of token ids"),
    ("dry_sequence_breakers null",
     lambda r: r[0].update(target_sampler={"dry_sequence_breakers": None}),
     1, "target_sampler.dry_sequence_breakers", "list of token ids"),
    ("temperature as a string", lambda r: r[0].update(target_sampler={"temperature": "1"}),
     1, "target_sampler.temperature", "finite number"),
    ("logit_bias key not an id", lambda r: r[0].update(target_sampler={"logit_bias": {"x": 1}}),
     1, "target_sampler.logit_bias", "token ids"),
    ("rows nested one level deeper",
     lambda r: r[1]["target"].update(probs=[[[x] for x in row] for row in P]),
     2, "target.probs[0][0]", "must be a number"),
    ("sparse ids nested", lambda r: r[1].update(target={"sparse_probs": [
        {"ids": [[0]], "values": [1.0]}] * 3}), 2, "target.sparse_probs[0].ids[0]", "token id"),
    ("an integer 10**400 among the probabilities",
     lambda r: r[1]["target"]["probs"][0].__setitem__(0, 10**400), 2, "target.probs[0][0]",
     "finite number"),
    ("an integer 10**400 as a uniform",
     lambda r: r[1].update(uniforms=[[0.5, 10**400]] * 3), 2, "uniforms[0][1]", "finite"),
    ("an integer 10**400 as a position", lambda r: r[1].update(position=10**400), 2,
     "position", "401 digits"),
    ("an integer 10**400 as a temperature",
     lambda r: r[0].update(target_sampler={"temperature": 10**400}), 1,
     "target_sampler.temperature", "finite"),
    ("uniforms nested one level deeper",
     lambda r: r[1].update(uniforms=[[[0.5], [0.5]]] * 3), 2, "uniforms[0][0]", "number"),
    ("vocab_size 10**12", lambda r: r[0].update(vocab_size=10**12), 1, "vocab_size",
     "[1, 2147483648]"),
    ("vocab_size 2**31 - 1 with sparse rows (3 x 8 GiB)",
     lambda r: (r[0].update(vocab_size=2**31 - 1), r[1].update(target={"sparse_probs": [
         {"ids": [0], "values": [1.0]}] * 3}, draft=None)),
     2, "target", "more than this reader's bound"),
    ("base64 rows beyond the bound",
     lambda r: (r[0].update(vocab_size=2**31 - 1),
                r[1].update(target={"probs_b64": "", "rows": 3}, draft=None)),
     2, "target", "more than this reader's bound"),
    ("uniform that is 1 in float32", lambda r: r[1].update(uniforms=[[0.99999999, 0.5]] * 3),
     2, "uniforms", "as float32"),
    ("engine not a string", lambda r: r[0].update(engine=5), 1, "engine", "string"),
    ("a key beside a dense block", lambda r: r[1]["target"].update(rows=3), 2, "target.rows",
     "not a field"),
]


@pytest.mark.parametrize(("name", "edit", "line", "field", "words"), CASES,
                         ids=[c[0] for c in CASES])
def test_a_malformed_trace_is_refused_naming_line_and_field(
    tmp_path: Path, name: str, edit: Any, line: int, field: str, words: str
) -> None:
    records = _valid()
    edit(records)
    with pytest.raises(TraceError) as raised:
        read_trace(_write(tmp_path, records))
    assert (raised.value.line, raised.value.field) == (line, field), str(raised.value)
    assert words in str(raised.value), str(raised.value)


def _raw_trace(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "raw.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def _valid_bytes(rounds: int) -> list[bytes]:
    return [(json.dumps(r) + "\n").encode() for r in _valid(rounds)]


def test_an_invalid_utf8_byte_is_an_error_on_its_own_line(tmp_path: Path) -> None:
    # It read as a truncation "at line 10" and judged the 8 rounds before it.
    lines = _valid_bytes(24)
    lines[10] = lines[10][:20] + b"\xff" + lines[10][20:]
    with pytest.raises(TraceError, match=r"trace line 11, field 'record': is not UTF-8: "
                                         r"byte 0xff at column 21"):
        read_trace(_raw_trace(tmp_path, lines))


def test_garbage_after_valid_lines_is_blamed_on_its_own_line(tmp_path: Path) -> None:
    # It was blamed on line 1: the text decoder failed on the buffer holding lines 1 to 6.
    lines = [*_valid_bytes(4), bytes(range(256)) * 4 + b"\n", _valid_bytes(5)[-1]]
    with pytest.raises(TraceError, match=r"trace line 6, field 'record'"):
        read_trace(_raw_trace(tmp_path, lines))


def test_a_last_line_cut_inside_a_character_is_a_truncation(tmp_path: Path) -> None:
    lines = _valid_bytes(3)
    lines[-1] = lines[-1][:30] + "é".encode()[:1]
    trace = read_trace(_raw_trace(tmp_path, lines))
    assert len(trace.rounds) == 2 and trace.truncated is not None


def test_a_gz_name_on_a_file_that_is_not_gzip_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl.gz"
    path.write_bytes(b"".join(_valid_bytes(3)))
    with pytest.raises(TraceError, match=r"trace line 1, field 'record': is not a gzip stream"):
        read_trace(path)


@pytest.mark.parametrize("depth", [100_000, 3_000])
def test_deep_nesting_is_an_error(tmp_path: Path, depth: int) -> None:
    lines = _valid_bytes(3)
    text = json.loads(lines[1])
    text["uniforms"] = "@"
    lines[1] = json.dumps(text).replace('"@"', _deep(depth)).encode() + b"\n"
    with pytest.raises(TraceError, match=r"trace line 2, field '(record|uniforms)'"):
        read_trace(_raw_trace(tmp_path, lines))


def test_an_integer_beyond_pythons_digit_limit_is_an_error(tmp_path: Path) -> None:
    lines = _valid_bytes(3)
    lines[1] = lines[1].replace(b'"position": 0', b'"position": 1' + b"0" * 5000)
    with pytest.raises(TraceError, match=r"trace line 2, field 'record': is not valid JSON"):
        read_trace(_raw_trace(tmp_path, lines))


def test_a_rebuilt_law_that_is_not_a_law_is_a_trace_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A guard behind the sampler's envelope: whatever makes the rebuilt p NaN, no verdict.
    config = SamplerConfig(temperature=0.5)
    stream = io.StringIO()
    writer = TraceWriter(stream, vocab_size=VOCAB, target_sampler=config)
    writer.write_round(rule="stochastic", draft_tokens=[0, 1], emitted=[0, 0],
                       target=encode_rows(np.log(np.array(P, np.float32)), kind="logits"))
    path = tmp_path / "logits.jsonl"
    path.write_text(stream.getvalue())
    assert len(read_trace(path).rounds) == 1
    import mlx.core as mx

    monkeypatch.setattr(trace_module, "effective_token_distribution",
                        lambda logits, config, history=None: mx.full(logits.shape, float("nan")))
    with pytest.raises(TraceError, match=r"trace line 2, field 'target': the law rebuilt from "
                                         r"its logits with 'target_sampler' is not a distr"):
        read_trace(path)


def _certain_rejections(rejected: int, rounds: int = 300) -> list[dict[str, Any]]:
    """A correct k = 1 engine (q uniform, p = [.5, .25, .125, .125]) whose first `rejected`
    drafts of token 0, where p(0) = 0.5 >= q(0) = 0.25 keeps them for certain, are rejected."""
    p, q = np.array([0.5, 0.25, 0.125, 0.125]), np.full(VOCAB, 0.25)
    rng = np.random.default_rng(7)
    stream = io.StringIO()
    writer = TraceWriter(stream, vocab_size=VOCAB, prompt=[0])
    flipped = 0
    for _ in range(rounds):
        draft = int(rng.choice(VOCAB, p=q))
        if rng.random() * q[draft] <= p[draft]:
            emitted = [draft, int(rng.choice(VOCAB, p=p))]
            if draft == 0 and flipped < rejected:
                # Rejected: the replacement from max(p - q, 0) = [.25, 0, 0, 0] is token 0.
                emitted, flipped = [0], flipped + 1
        else:
            emitted = [0]
        writer.write_round(rule=AcceptanceRule.STOCHASTIC, draft_tokens=[draft], emitted=emitted,
                           target=encode_rows(np.stack([p, p])), draft=encode_rows(q[None]))
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_rejecting_a_draft_whose_acceptance_probability_is_1_fails_support(
    tmp_path: Path
) -> None:
    # 3 such rejections in 200 rounds read CONFORMS: the replacement lies in the residual's
    # support and 3 of 200 moves no z-score past its threshold.
    report = check_trace(read_trace(_write(tmp_path, _certain_rejections(3))))
    support = next(c for c in report.checks if c.name == "support")
    assert not report.passed and support.verdict is Verdict.FAIL, report.to_text()
    assert "acceptance probability is 1" in support.detail
    # Support alone catches it: every statistical check passes this trace.
    assert all(c.verdict is not Verdict.FAIL for c in report.checks if c.name != "support"), \
        report.to_text()
    control = check_trace(read_trace(_write(tmp_path, _certain_rejections(0), "ok.jsonl")))
    assert control.passed, control.to_text()


@pytest.mark.parametrize(("name", "edit", "line", "field", "words"), CASES[:8],
                         ids=[c[0] for c in CASES[:8]])
def test_the_cli_refuses_each_case_in_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, edit: Any, line: int,
    field: str, words: str,
) -> None:
    records = _valid()
    edit(records)
    with pytest.raises(SystemExit) as raised:
        main(["conform", str(_write(tmp_path, records))])
    captured = capsys.readouterr()
    assert raised.value.code == 2 and captured.out == ""
    assert captured.err.count("\n") == 1 and f"trace line {line}" in captured.err, captured.err
    assert "verdict" not in captured.err and "CONFORMS" not in captured.err


# --- fuzz -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=5)
    | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0, 1, 0.5, 10**400]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


def _replace(document: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    document[path[0]] = _replace(document[path[0]], path[1:], new)
    return document


@st.composite
def mutated_traces(draw: st.DrawFn) -> tuple[list[Any], int]:
    """A valid trace with one JSON value somewhere replaced by an arbitrary one."""
    records: list[Any] = _valid(2, target_sampler=SamplerConfig(temperature=0.5))
    line = draw(st.integers(0, len(records) - 1))
    paths = _paths(records[line])
    path = draw(st.sampled_from(paths))
    if path and draw(st.booleans()) and isinstance(path[-1], str):
        parent = records[line]
        for key in path[:-1]:
            parent = parent[key]
        parent.pop(path[-1])  # a missing field
    else:
        records[line] = _replace(records[line], path, draw(json_values))
    return records, line


FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(mutated_traces())
def test_fuzz_the_reader_ends_in_a_verdict_or_a_trace_error(
    tmp_path: Path, case: tuple[list[Any], int]
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    records, line = case
    path = tmp_path / "fuzz.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    validator = jsonschema.Draft202012Validator(SCHEMA)
    schema_valid = all(validator.is_valid(r) for r in records)
    try:
        trace = read_trace(path)
    except TraceError as error:
        assert "\n" not in str(error) and len(str(error)) < 400
        return
    # Read: it must satisfy the schema, and the checks must reach a verdict.
    assert schema_valid, f"the reader took a line the schema refuses: {records[line]}"
    check_trace(trace).to_text()


@FUZZ
@given(st.binary(max_size=200), st.integers(0, 3))
def test_fuzz_the_reader_on_raw_bytes(tmp_path: Path, garbage: bytes, where: int) -> None:
    lines = _valid_bytes(3)
    lines.insert(where, garbage)
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b"".join(lines))
    try:
        check_trace(read_trace(path))
    except TraceError as error:
        assert "\n" not in str(error)
