"""The writer's value checks on base64 blocks, its JSON lines, and its undecided-row omission.

The writer checks a base64 block's numbers with NumPy when it can import it and with the
standard library's bytes operations otherwise. Both must apply one rule, the per-number rule
the reader applies, and raise one message: each case here runs on both paths and against
`_reference`, that rule written number by number.
"""

from __future__ import annotations

import io
import json
import math
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import specaccept_trace as st
from specaccept.conformance import read_trace

PATHS = ("numpy", "stdlib")


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with the NumPy checks, then with the standard library's."""
    if request.param == "stdlib":
        monkeypatch.setattr(st, "_numpy", None)
    else:
        assert st._numpy is not None
    yield str(request.param)


def _reference(kind: str, raw: bytes, dtype: str, rows: int) -> str | None:
    """The message the per-number rule raises for these rows, or None when they pass."""
    code = {"float32": "f", "float16": "e"}.get(dtype)
    if code is None:  # bfloat16: the high half of a float32
        halves = struct.unpack(f"<{len(raw) // 2}H", raw)
        values = struct.unpack(f"<{len(halves)}f", struct.pack(f"<{len(halves)}I",
                                                                  *(h << 16 for h in halves)))
    else:
        values = struct.unpack(f"<{len(raw) // struct.calcsize(code)}{code}", raw)
    vocab = len(values) // rows
    table = [values[i * vocab:(i + 1) * vocab] for i in range(rows)]
    where = f"target['{kind}_b64']"
    for i, row in enumerate(table):
        if kind == "probs":
            for j, value in enumerate(row):
                if not 0.0 <= value <= 1.0:
                    return f"{where}[{i}][{j}] must lie in [0, 1] (a probability), got {value!r}"
            total = math.fsum(row)
            if abs(total - 1.0) > st.PROBABILITY_SUM_TOLERANCE:
                return (f"{where}[{i}] must sum to 1 within {st.PROBABILITY_SUM_TOLERANCE}, "
                        f"got a sum of {total:.6g}")
        else:
            if any(math.isnan(v) or v == math.inf for v in row):
                return f"{where} row {i} holds NaN or +inf logits"
            if all(v == -math.inf for v in row):
                return f"{where} row {i} is -inf for every token: no distribution"
    return None


def _written(kind: str, raw: bytes, dtype: str, rows: int) -> str | None:
    """The writer's message for a round whose target block is these rows, or None."""
    vocab = len(raw) // rows // st._B64_WIDTH[dtype]
    run = st.TraceWriter(io.StringIO(), vocab_size=vocab).start_run(
        prompt=[0], target_sampler={"temperature": 1.0})
    try:
        run.write_round(rule="stochastic", draft_tokens=[0] * (rows - 1), emitted=[0] * rows,
                        target=st.b64_block(raw, rows=rows, kind=kind, dtype=dtype),
                        draft=st.probs_block([[1.0] + [0.0] * (vocab - 1)] * (rows - 1))
                        if rows > 1 else None)
    except st.TraceWriteError as error:
        return str(error)
    return None


def _halves(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}H", *values)


def _singles(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}I", *values)


FINITE_ROW = [0x3C00, 0x0001, 0x8000, 0xBC00]  # 1, the least subnormal, -0, -1
LOGIT_CASES = [
    ("float16", _halves(FINITE_ROW * 2), 2),
    ("float16", _halves([*FINITE_ROW, 0x3C00, 0xFC00, 0xFC00, 0x7BFF]), 2),  # -inf allowed
    ("float16", _halves([*FINITE_ROW, 0x3C00, 0x7E00, 0x0000, 0x0000]), 2),  # NaN in row 1
    ("float16", _halves([0x7C00, *FINITE_ROW[1:], *FINITE_ROW]), 2),  # +inf at 0
    ("float16", _halves([*FINITE_ROW, 0xFC00, 0xFC00, 0xFC01, 0xFC00]), 2),  # -NaN payload 1
    ("float16", _halves([*FINITE_ROW, 0xFC00] * 1 + [0xFC00] * 3), 2),  # all -inf, row 1
    ("float16", _halves([0xFC00] * 4 + [0x7C00, 0, 0, 0]), 2),  # all -inf before a NaN row
    ("float16", _halves([0x0000, 0x7E00, 0x0000, 0x0000] + [0xFC00] * 4), 2),
    ("bfloat16", _halves([0x3F80, 0xFF80, 0x0001, 0x8000] * 2), 2),
    ("bfloat16", _halves([0x3F80, 0xFF81, 0x0001, 0x8000] * 2), 2),  # -NaN
    ("bfloat16", _halves([0x3F80, 0x0000, 0x7F80, 0x8000] * 2), 2),  # +inf
    ("bfloat16", _halves([0x7F7F, 0x0000, 0x0000, 0x0000] + [0xFF80] * 4), 2),  # all -inf
    ("float32", _singles([0x3F800000, 0xFF800000, 0x7F7FFFFF, 0x80000000] * 2), 2),
    ("float32", _singles([0x3F800000, 0xFF800001, 0x0, 0x0] * 2), 2),  # NaN, not -inf
    ("float32", _singles([0x3F800000, 0x0, 0x0, 0x0, 0x7F800000, 0x0, 0x0, 0x0]), 2),
    ("float32", _singles([0x3F800000, 0x0, 0x0, 0x0, 0xFFC00000, 0x0, 0x0, 0x0]), 2),
    ("float32", _singles([0x0, 0x0, 0x0, 0x7FC00000]), 1),
    ("float32", _singles([0xFF800000] * 3), 1),
]


@pytest.mark.parametrize(("dtype", "raw", "rows"), LOGIT_CASES)
def test_logit_rows_get_the_per_number_rules_verdict(
    path: str, dtype: str, raw: bytes, rows: int
) -> None:
    assert _written("logits", raw, dtype, rows) == _reference("logits", raw, dtype, rows)


def _probabilities(values: list[float]) -> bytes:
    return np.array(values, dtype="<f4").tobytes()


def _near_edge(above: bool) -> list[float]:
    """A float32 row whose exact sum is just past 1.001 (or the float32 step before it)."""
    x = np.float32(0.5009)
    while math.fsum([0.5, float(x)]) <= 1.001:
        x = np.nextafter(x, np.float32(1), dtype=np.float32)
    if not above:
        x = np.nextafter(x, np.float32(0), dtype=np.float32)
    return [0.5, float(x), 0.0, 0.0]


PROBABILITY_CASES = [
    ([0.5, 0.25, 0.125, 0.125], 1),
    ([0.5, 0.25, 0.125, 0.125, 1.0, 0.0, -0.0, 0.0], 2),  # 1.0 and -0.0 are probabilities
    ([0.5, 0.25, 0.125, 0.125, 1.0000001, 0.0, 0.0, 0.0], 2),
    ([0.5, 0.25, 0.125, 0.125, 0.5, -1e-45, 0.25, 0.25], 2),
    ([0.5, 0.25, math.nan, 0.125], 1),
    ([0.5, 0.25, -math.nan, 0.125], 1),
    ([0.5, math.inf, 0.0, 0.0], 1),
    ([0.5, 0.25, 0.125, 0.0, 2.0, 0.0, 0.0, 0.0], 2),  # the sum of row 0 is named first
    ([0.5, 0.25, 0.125, 0.1245], 1),  # 0.9995: inside the tolerance
    ([0.5, 0.25, 0.125, 0.1], 1),
    (_near_edge(above=True), 1),
    (_near_edge(above=False), 1),
    ([1.0, 0.0, 0.0, 0.0, 0.6, 0.0, 0.4, -2.5], 2),
]


@pytest.mark.parametrize(("values", "rows"), PROBABILITY_CASES)
def test_probability_rows_get_the_per_number_rules_verdict(
    path: str, values: list[float], rows: int
) -> None:
    raw = _probabilities(values)
    assert _written("probs", raw, "float32", rows) == _reference("probs", raw, "float32", rows)


def test_the_edge_cases_fall_on_both_sides() -> None:
    """The cases at the tolerance's edge are on the sides they claim (so they test it)."""
    above = _reference("probs", _probabilities(_near_edge(above=True)), "float32", 1)
    assert above is not None and "sum to 1" in above
    assert _reference("probs", _probabilities(_near_edge(above=False)), "float32", 1) is None


def _marked(where: Any, count: int) -> list[bool]:
    """A mask of either path as a list of bools."""
    if isinstance(where, int):
        return [bool(b) for b in where.to_bytes(count, "little")]
    return [bool(b) for b in where.tolist()]


def test_every_half_precision_pattern_is_classified_as_the_per_number_rule_does(
    path: str,
) -> None:
    patterns = list(range(1 << 16))
    raw = _halves(patterns)
    for dtype in ("float16", "bfloat16"):
        if dtype == "float16":
            values = struct.unpack(f"<{len(patterns)}e", raw)
        else:
            values = struct.unpack(f"<{len(patterns)}f", _singles([h << 16 for h in patterns]))
        expected = [math.isnan(v) or v == math.inf for v in values]
        assert _marked(st._nan_or_positive_infinity(raw, dtype), len(patterns)) == expected


def test_float32_patterns_are_classified_as_the_per_number_rule_does(path: str) -> None:
    """Every sign and exponent, with the low mantissa bits that tell -inf from a NaN and
    1.0 from the next float32."""
    patterns = [high << 16 | low for high in range(1 << 16) for low in (0x0000, 0x0001, 0x8000)]
    raw = _singles(patterns)
    values = struct.unpack(f"<{len(patterns)}f", raw)
    assert _marked(st._nan_or_positive_infinity(raw, "float32"), len(patterns)) == [
        math.isnan(v) or v == math.inf for v in values]
    assert _marked(st._outside_unit_interval(raw), len(patterns)) == [
        not 0.0 <= v <= 1.0 for v in values]


def test_the_first_defect_of_a_long_block_is_found_on_both_paths(path: str) -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        values = rng.random(3 * 1024, dtype=np.float32)
        where = sorted(rng.choice(values.size, size=3, replace=False).tolist())
        values[where] = [np.nan, 2.0, -1.0]
        assert st._first_marked(st._outside_unit_interval(values.tobytes())) == where[0]
        halves = rng.standard_normal(3 * 1024).astype(np.float16)
        halves[where] = [np.inf, -np.inf, np.nan]
        assert st._first_marked(
            st._nan_or_positive_infinity(halves.tobytes(), "float16")) == where[0]
    assert st._first_marked(st._outside_unit_interval(_probabilities([0.5] * 9))) is None


def test_the_check_reads_the_bytes_given_not_a_buffer_refilled_later(path: str) -> None:
    buffer = bytearray(_halves([0x3C00, 0x0000]))
    block = st.b64_block(buffer, rows=1, kind="logits", dtype="float16")
    buffer[:] = _halves([0x7E00, 0x0000])  # the engine reuses its buffer
    stream = io.StringIO()
    run = st.TraceWriter(stream, vocab_size=2).start_run(target_sampler={})
    run.write_round(rule="stochastic", draft_tokens=[], emitted=[0], target=block)
    assert json.loads(stream.getvalue().splitlines()[-1])["target"]["logits_b64"] == "ADwAAA=="


def test_a_block_whose_text_was_replaced_is_decoded_and_checked(path: str) -> None:
    block = st.b64_block(_halves([0x3C00, 0x0000]), rows=1, kind="logits", dtype="float16")
    block["logits_b64"] = st.b64_block(_halves([0x7E00, 0x0000]), rows=1, kind="logits",
                                       dtype="float16")["logits_b64"]
    run = st.TraceWriter(io.StringIO(), vocab_size=2).start_run(target_sampler={})
    with pytest.raises(st.TraceWriteError, match="row 0 holds NaN or \\+inf logits"):
        run.write_round(rule="stochastic", draft_tokens=[], emitted=[0], target=block)


@pytest.mark.parametrize(("data", "rows", "dtype"), [
    (b"\x00" * 6, 4, "float16"), (b"\x00" * 3, 1, "float16"), (b"\x00" * 6, 1, "float32"),
    (b"", 1, "float32"),
])
def test_bytes_that_are_not_whole_rows_are_refused_by_b64_block(
    data: bytes, rows: int, dtype: str
) -> None:
    with pytest.raises(st.TraceWriteError) as raised:
        st.b64_block(data, rows=rows, kind="logits", dtype=dtype)
    message = str(raised.value)
    assert message.startswith(f"data must hold rows = {rows} rows of whole {dtype}")
    assert f"got {len(data)} bytes" in message


RECORDS: list[dict[str, Any]] = [
    {"format": "specaccept-trace", "version": 2, "vocab_size": 4, "engine": "é \"q\" \n"},
    {"run": "a", "round": 0, "target": {"logits_b64": "AAA=", "rows": 1, "dtype": "float16"},
     "draft": {"probs": [[0.5, 0.5]]}, "uniforms": [[0.25, None]], "extra": {"k": "\u2028"}},
    {"run": "a", "target": {"rows": 1, "probs_b64": "AAAAPw=="}, "stopped": True},
    {"target": {"sparse_probs": [{"ids": [0], "values": [1.0]}]}},
]


@pytest.mark.parametrize("record", RECORDS)
@pytest.mark.parametrize("spliced", [False, True])
def test_a_line_is_what_json_dumps_writes(
    record: dict[str, Any], spliced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if spliced:  # every base64 text spliced in, as a large vocabulary's are
        monkeypatch.setattr(st, "_SPLICED_TEXT", 0)
    expected = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
    pieces = st._json_line(record)
    assert "".join(pieces) == expected
    assert (len(pieces) > 1) == (spliced and any(
        key.endswith("_b64") for block in record.values() if isinstance(block, dict)
        for key in block))


# --- omitting the rows of undecided positions ---------------------------------------------


def _rows(vocab: int, count: int, seed: int) -> np.ndarray:
    logits = np.random.default_rng(seed).standard_normal((count, vocab))
    p: np.ndarray = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(
        np.float32)
    return p


@pytest.mark.parametrize("vocab", [6, 7])  # a row of 24 bytes splits base64 evenly; 28 not
@pytest.mark.parametrize("encoding", ["b64", "json", "sparse"])
def test_undecided_rows_are_omitted_from_token_by_token_rounds_only(
    tmp_path: Path, path: str, vocab: int, encoding: str
) -> None:
    target, draft = _rows(vocab, 5, 1), _rows(vocab, 4, 2)

    def block(rows: np.ndarray) -> dict[str, Any]:
        if encoding == "b64":
            return st.b64_block(rows.tobytes(), rows=len(rows))
        if encoding == "json":
            return st.probs_block(rows.tolist())
        return st.sparse_block([dict(enumerate(row.tolist())) for row in rows])

    file = tmp_path / "trace.jsonl"
    with st.TraceWriter(file, vocab_size=vocab, omit_undecided_rows=True) as trace:
        run = trace.start_run("r", prompt=[0])
        drafts = [1, 2, 3, 4]
        # Rejected at position 1: two decided positions.
        run.write_round(rule="stochastic", draft_tokens=drafts, emitted=[1, 5],
                        target=block(target), draft=block(draft))
        run.write_round(rule="block", draft_tokens=drafts, emitted=[1, 5],
                        target=block(target), draft=block(draft))
        run.write_round(rule="stochastic", draft_tokens=drafts, emitted=[1, 2, 3, 4, 0],
                        target=block(target), draft=block(draft))
        run.write_round(rule="sampler-match", draft_tokens=drafts, emitted=[0],
                        target=block(target), draft=block(draft))
    rounds = read_trace(file).rounds
    shapes = [(r.target_rows.shape[0], None if r.draft_rows is None else r.draft_rows.shape[0])
              for r in rounds]
    assert shapes == [(2, 2), (5, 4), (5, 4), (1, 1)]
    for r in rounds:
        assert r.draft_rows is not None
        np.testing.assert_array_equal(r.target_rows, target[: len(r.target_rows)])
        np.testing.assert_array_equal(r.draft_rows, draft[: len(r.draft_rows)])


def test_by_default_every_row_given_is_written() -> None:
    stream = io.StringIO()
    run = st.TraceWriter(stream, vocab_size=2).start_run()
    run.write_round(rule="stochastic", draft_tokens=[0, 1], emitted=[1],
                    target=st.probs_block([[0.5, 0.5]] * 3), draft=st.probs_block([[1, 0]] * 2))
    line = json.loads(stream.getvalue().splitlines()[-1])
    assert len(line["target"]["probs"]) == 3 and len(line["draft"]["probs"]) == 2


def test_omission_is_a_bool() -> None:
    with pytest.raises(st.TraceWriteError, match="omit_undecided_rows must be a bool, got 'yes'"):
        st.TraceWriter(io.StringIO(), vocab_size=2, omit_undecided_rows="yes")  # type: ignore[arg-type]


def test_too_few_rows_are_still_refused_when_omitting() -> None:
    run = st.TraceWriter(io.StringIO(), vocab_size=2, omit_undecided_rows=True).start_run()
    with pytest.raises(st.TraceWriteError, match="target must hold 2 to 3 rows"):
        run.write_round(rule="stochastic", draft_tokens=[0, 1], emitted=[0, 1],
                        target=st.probs_block([[0.5, 0.5]]), draft=st.probs_block([[1, 0]] * 2))
