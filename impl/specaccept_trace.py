"""Write specaccept conformance traces with nothing but Python's standard library.

An engine vendors this one file (it needs no third-party package: no MLX, no NumPy, no
specaccept; where NumPy can be imported it checks row values with it, faster, by the same
rules) and records its speculative rounds in the trace format of
``spec/trace_format.md``, version 2 (any number of runs) or version 1 (one run, the version
this release's ``specaccept conform`` reads)::

    import specaccept_trace as st

    with st.TraceWriter("trace.jsonl.gz", vocab_size=V, engine="my-engine 1.2") as trace:
        run = trace.start_run("seed-0", prompt=prompt_ids,
                              target_sampler={"temperature": 0.7})
        for r in my_engine.rounds():
            run.write_round(rule="stochastic", draft_tokens=r.drafts, emitted=r.emitted,
                            target=st.logits_block(r.target_logits.tolist()),
                            draft=st.probs_block(r.q_rows.tolist()))

Everything a record is given is validated before its line is written, against the rules
the reader enforces (types, token ids, row counts, row lengths, sums, the fields a version
allows), and a defect raises `TraceWriteError` naming the argument and the value; what the
checks themselves judge (whether the engine's rule, law and caches are right) is recorded
as given, for the checks to find. Each line is flushed when written, so a crash leaves a
valid prefix. A path ending in ``.gz`` is written through gzip.

A *compact* trace (``TraceWriter(..., compact=share)``, version 2, needs NumPy) holds, per
round, the statistics the checks read, computed here from the laws the engine hands
``write_round`` (``target_probs``, ``draft_probs``), and the rows themselves only for a
seeded share of rounds (and every ``block`` round): its size a round does not grow with
the vocabulary beyond that share. See spec/compact_traces.md.
"""

from __future__ import annotations

import array
import base64
import binascii
import enum
import errno
import gzip
import hashlib
import importlib
import io
import itertools
import json
import math
import numbers
import os
import re
import stat
import struct
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType, TracebackType
from typing import IO, Any, SupportsFloat


def _optional_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_fcntl = _optional_module("fcntl")  # POSIX: flock
_msvcrt = _optional_module("msvcrt")  # Windows: locking
"""The lock each platform offers a writer's path; with neither, a lock file (`_PathLock`)."""

__all__ = [
    "FORMAT",
    "MAX_BLOCK_ENTRIES",
    "MAX_TOKEN_ID",
    "MAX_TREE_NODES",
    "MAX_VOCAB_SIZE",
    "PROBABILITY_SUM_TOLERANCE",
    "RULE_IDS",
    "SAMPLER_DEFAULTS",
    "TREE_SCHEMES",
    "VERSIONS",
    "RunWriter",
    "TraceWriteError",
    "TraceWriter",
    "b64_block",
    "compact_stats",
    "keeps_rows",
    "logits_block",
    "probs_block",
    "sparse_block",
]

FORMAT = "specaccept-trace"
VERSIONS = (1, 2)
"""The versions this writer writes; 2 unless asked for 1."""
PROBABILITY_SUM_TOLERANCE = 1e-3
"""A probability row must sum to 1 within this, in float64 (as the reader requires)."""
MAX_TOKEN_ID = 2**31 - 1
"""Token ids, and every integer field, are int32 in the reader's arithmetic."""
MAX_VOCAB_SIZE = MAX_TOKEN_ID + 1
MAX_BLOCK_ENTRIES = 2**27
"""The most entries one row block may hold, its rows times vocab_size (the reader's bound)."""
MAX_TREE_NODES = 4096
"""The most nodes a tree round may have (the reader's bound, and `verify_tree`'s)."""
RULE_IDS = ("stochastic", "block", "sampler-match", "sampler-match-no-proposal-distribution",
            "greedy-argmax")
"""The rule ids of spec/acceptance_rule_enum.md; another non-empty id is written as given."""
SAMPLER_DEFAULTS: Mapping[str, object] = {
    "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0,
    "repetition_context_size": 20, "frequency_penalty": 0.0, "presence_penalty": 0.0,
    "dry_multiplier": 0.0, "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": -1,
    "dry_sequence_breakers": (), "xtc_probability": 0.0, "xtc_threshold": 0.1, "logit_bias": {},
}
"""The fields of spec/sampler_config.md's `SamplerConfig` and their defaults."""

_FLOAT32_MAX = 3.4028234663852886e38
_SMALLEST_TEMPERATURE = 2.0**-126
_ADJUSTMENT_LIMIT = 2.0**64
_REPETITION_PENALTY_LIMIT = 2.0**32
_ROW_KEYS = ("probs", "logits", "probs_b64", "logits_b64", "sparse_probs")
_B64_WIDTH = {"float32": 4, "float16": 2, "bfloat16": 2}
_RUN_ID = re.compile(r"[A-Za-z0-9._:/-]{1,128}")
_CACHE_V1 = ("target_before", "target_after", "draft_before", "draft_fed", "draft_after")
_CACHE_V2 = (*_CACHE_V1, "target_fed", "target_rewind", "draft_rewind")
_REWINDS = ("eager", "lazy")
TREE_SCHEMES = ("iid", "without-replacement", "deterministic")
"""The scheme ids of a tree round, which say how the siblings under a node were drafted."""
_TREE_CACHE = _CACHE_V1


class TraceWriteError(ValueError):
    """What a writer was given cannot be written; the message names the argument and value."""


def _brief(value: object) -> str:
    """`value` for an error message, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _fail(name: str, rule: str, value: object) -> TraceWriteError:
    return TraceWriteError(f"{name} must {rule}, got {_brief(value)}")


def _integer(name: str, value: object, low: int, high: int = MAX_TOKEN_ID) -> int:
    # bool is an int to Python, and `true` is not 1 to a trace reader.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(name, f"be an integer in [{low}, {high}]", value)
    number = int(value)
    if not low <= number <= high:
        raise _fail(name, f"be an integer in [{low}, {high}]", value)
    return number


def _real(name: str, value: object) -> float:
    """A finite real as a float; bools, strings, NaN and infinities are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(name, "be a finite number", value)
    try:
        number = float(value)
    except OverflowError:
        raise _fail(name, "be a finite number (in float64)", value) from None
    if not math.isfinite(number):
        raise _fail(name, "be a finite number", value)
    return number


def _tokens(name: str, values: object, vocab_size: int) -> list[int]:
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise _fail(name, "be a sequence of token ids", values)
    return [_integer(f"{name}[{i}]", token, 0, vocab_size - 1) for i, token in enumerate(values)]


def _json_object(name: str, value: object) -> dict[str, Any]:
    """A JSON object of engine diagnostics, checked to serialise as strict JSON."""
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise _fail(name, "be a mapping with string keys (a JSON object)", value)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise TraceWriteError(f"{name} must be plain JSON (no NaN, no infinity, only JSON "
                              f"types): {error}") from None
    except RecursionError:
        raise TraceWriteError(f"{name} nests objects or arrays deeper than JSON serialisation "
                              "(and a reader's parser) allows") from None
    return dict(value)


# --- row blocks ----------------------------------------------------------------------------


def _dense_rows(name: str, rows: Iterable[Iterable[SupportsFloat]]) -> list[list[float]]:
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
        raise _fail(name, "be a sequence of rows (sequences of numbers)", rows)
    out = []
    for i, row in enumerate(rows):
        if isinstance(row, str | bytes | Mapping) or not isinstance(row, Iterable):
            raise _fail(f"{name}[{i}]", "be a sequence of numbers", row)
        out.append([_real(f"{name}[{i}][{j}]", value) for j, value in enumerate(row)])
    if not out:
        raise TraceWriteError(f"{name} must hold at least one row, got none")
    return out


def probs_block(rows: Iterable[Iterable[SupportsFloat]]) -> dict[str, Any]:
    """Rows of probabilities as a ``probs`` block (JSON numbers).

    Pass the float32 values the engine decided with (``tensor.float().tolist()``): a Python
    float holding a float32 value is written with the digits that round-trip it.
    """
    return {"probs": _dense_rows("rows", rows)}


def logits_block(rows: Iterable[Iterable[SupportsFloat]]) -> dict[str, Any]:
    """Rows of logits as a ``logits`` block (JSON numbers, so every logit is finite).

    The reader rebuilds the probabilities with the run's sampler; a masked (-inf) logit
    needs the base64 encoding, `b64_block`.
    """
    return {"logits": _dense_rows("rows", rows)}


class _EncodedBlock(dict[str, Any]):
    """A block `b64_block` made: it keeps the bytes it encoded, so the writer checks them
    without decoding the text again (the text is a str, immutable, so while the block holds
    the very text it made, the bytes are that text's)."""

    __slots__ = ("raw", "text")

    def __init__(self, raw: bytes, text: str, fields: Mapping[str, Any]) -> None:
        super().__init__(fields)
        self.raw = raw
        self.text = text


def b64_block(
    data: bytes | bytearray | memoryview | Iterable[Iterable[SupportsFloat]], *, rows: int,
    kind: str = "probs", dtype: str = "float32",
) -> dict[str, Any]:
    """Rows as a ``probs_b64`` or ``logits_b64`` block: little-endian `dtype`, row-major.

    Args:
        data: the raw bytes (any buffer: ``tensor.cpu().numpy().tobytes()`` on a
            little-endian machine), or rows of numbers, packed here.
        rows: the number of rows the bytes hold.
        kind: "probs" (float32 only) or "logits".
        dtype: "float32", "float16" or "bfloat16" (rounded to nearest even when packed here).

    Raises:
        TraceWriteError: a bad `kind`, `dtype` or `rows`, or bytes that are not `rows`
            rows of whole `dtype` values. The values are checked when the round is written.
    """
    if kind not in ("probs", "logits"):
        raise _fail("kind", "be 'probs' or 'logits'", kind)
    if dtype not in _B64_WIDTH:
        raise _fail("dtype", f"be one of {tuple(_B64_WIDTH)}", dtype)
    if kind == "probs" and dtype != "float32":
        raise _fail("dtype", "be float32 for probabilities (a half-precision probability "
                    "below ~6e-8 reads as 0, and the support check has zero tolerance)", dtype)
    count = _integer("rows", rows, 1)
    if isinstance(data, bytes | bytearray | memoryview):
        # Copied unless immutable already: an engine may refill its buffer before writing.
        raw = data if type(data) is bytes else bytes(memoryview(data).cast("B"))
    else:
        values = [value for row in _dense_rows("data", data) for value in row]
        raw = _pack(values, dtype)
    row_bytes = count * _B64_WIDTH[dtype]
    if not raw or len(raw) % row_bytes:
        raise TraceWriteError(f"data must hold rows = {count} rows of whole {dtype} values "
                              f"({_B64_WIDTH[dtype]} bytes each), got {len(raw)} bytes")
    text = base64.b64encode(raw).decode("ascii")
    block: dict[str, Any] = {f"{kind}_b64": text, "rows": count}
    if dtype != "float32":
        block["dtype"] = dtype
    return _EncodedBlock(raw, text, block)


def _pack(values: list[float], dtype: str) -> bytes:
    if dtype == "float16":
        try:
            return struct.pack(f"<{len(values)}e", *values)
        except (OverflowError, struct.error) as error:
            raise TraceWriteError(f"data must fit float16 ({error})") from None
    try:
        single = struct.pack(f"<{len(values)}f", *values)
    except (OverflowError, struct.error) as error:
        raise TraceWriteError(f"data must fit float32 ({error})") from None
    if dtype == "float32":
        return single
    bits = struct.unpack(f"<{len(values)}I", single)
    # Round to nearest even, as a bfloat16 cast does.
    halves = [((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF for b in bits]
    for i, (b, half) in enumerate(zip(bits, halves, strict=True)):
        # A finite float32 beyond bfloat16's largest finite value rounds to an infinity.
        if half & 0x7FFF == 0x7F80 and b & 0x7F800000 != 0x7F800000:
            raise TraceWriteError(f"data value {i} ({values[i]!r}) is finite but rounds to "
                                  f"{'-' if half >> 15 else '+'}inf in bfloat16, whose largest "
                                  "finite value is about 3.3895e38")
    return struct.pack(f"<{len(halves)}H", *halves)


# --- value checks --------------------------------------------------------------------------
#
# The rules for the values of a base64 block, checked without a Python step per number: with
# NumPy when it can be imported, else with the standard library's bytes operations (a byte
# table per condition, `bytes.translate`, and Python's integers as bit vectors). Both find
# the same first defect and raise the same message; tests hold them to it on the same blocks.

try:
    _numpy: ModuleType | None = importlib.import_module("numpy")
except ImportError:
    _numpy = None

_SUM_MARGIN = 1e-6
"""A float64 sum of at most 2**27 numbers in [0, 1], in any order, is within 2**-26 of the
exact sum relatively; a row whose fast sum lies within this of the tolerance's edge is
summed again with `math.fsum`, so the rule is the exact sum's either way."""
_NEGATIVE_INFINITY = {"float32": b"\x00\x00\x80\xff", "float16": b"\x00\xfc",
                      "bfloat16": b"\x80\xff"}


def _byte_table(predicate: Callable[[int], bool]) -> bytes:
    """A `bytes.translate` table: byte b becomes 1 where `predicate(b)`, else 0."""
    return bytes(1 if predicate(b) else 0 for b in range(256))


_IS_NONZERO = _byte_table(lambda b: b != 0)
_IS_7F = _byte_table(lambda b: b == 0x7F)
_IS_FF = _byte_table(lambda b: b == 0xFF)
_IS_80 = _byte_table(lambda b: b == 0x80)
_IS_3F = _byte_table(lambda b: b == 0x3F)
_AT_LEAST_80 = _byte_table(lambda b: b >= 0x80)
_AT_LEAST_81 = _byte_table(lambda b: b >= 0x81)
# float16's sign and exponent fill its high byte's top 6 bits: all-ones exponent is NaN or
# infinite; 0xFC is -inf when the low byte is 0 (and NaN otherwise).
_HALF_NAN_OR_POSITIVE = _byte_table(lambda b: b & 0x7C == 0x7C and b != 0xFC)
_IS_FC = _byte_table(lambda b: b == 0xFC)
_FINITE_HIGH = {
    "float16": bytes(b for b in range(256) if b & 0x7C != 0x7C),
    "bfloat16": bytes(b for b in range(256) if b & 0x7F != 0x7F),
    "float32": bytes(b for b in range(256) if b & 0x7F != 0x7F),
}
"""The high bytes that no NaN or infinity has, deleted to find the candidates."""
# A float32 in [0, 1] (or -0.0) has a high byte below 0x3F, or 0x3F with an exponent below
# 0x7F, or is 1.0 (3F 80 00 00) or -0.0 (80 00 00 00) exactly.
_ABOVE_ONE_OR_NEGATIVE = _byte_table(lambda b: b >= 0x40 and b != 0x80)


def _bits(stream: bytes, table: bytes) -> int:
    """One byte per number of `stream`, 1 where `table` says so, as an integer's bytes."""
    return int.from_bytes(stream.translate(table), "little")


def _nan_or_positive_infinity(raw: bytes, dtype: str) -> Any:
    """Where `raw`'s little-endian `dtype` numbers are NaN or +inf: a NumPy bool array, or
    (standard library) an int whose byte i is 1 there and 0 elsewhere."""
    if _numpy is not None:
        unsigned, exponent, minus_inf = {
            "float16": ("<u2", 0x7C00, 0xFC00), "bfloat16": ("<u2", 0x7F80, 0xFF80),
            "float32": ("<u4", 0x7F800000, 0xFF800000)}[dtype]
        values = _numpy.frombuffer(raw, dtype=unsigned)
        return ((values & exponent) == exponent) & (values != minus_inf)
    width = _B64_WIDTH[dtype]  # bfloat16 is float32's high half
    high = raw[width - 1::width]
    if not high.translate(None, _FINITE_HIGH[dtype]):
        return 0  # no high byte of an all-ones exponent: every number is finite
    if dtype == "float16":
        low = raw[0::2]
        return _bits(high, _HALF_NAN_OR_POSITIVE) | (_bits(high, _IS_FC) & _bits(low, _IS_NONZERO))
    next_ = raw[width - 2::width]
    minus = _bits(high, _IS_FF)
    bad = (_bits(high, _IS_7F) & _bits(next_, _AT_LEAST_80)) | (minus & _bits(next_, _AT_LEAST_81))
    if width == 4:  # FF 80 with nonzero low bytes is a NaN, not -inf
        rest = _bits(raw[1::4], _IS_NONZERO) | _bits(raw[0::4], _IS_NONZERO)
        bad |= minus & _bits(next_, _IS_80) & rest
    return bad


def _outside_unit_interval(raw: bytes) -> Any:
    """Where `raw`'s little-endian float32 numbers lie outside [0, 1] (NaN included; -0.0
    is inside, as ``0.0 <= -0.0`` holds), as `_nan_or_positive_infinity` says where."""
    if _numpy is not None:
        values = _numpy.frombuffer(raw, dtype="<f4")
        return ~((values >= 0.0) & (values <= 1.0))  # NaN is outside
    high, next_ = raw[3::4], raw[2::4]
    rest = _bits(raw[1::4], _IS_NONZERO) | _bits(raw[0::4], _IS_NONZERO)
    one_high = _bits(high, _IS_3F)
    return (_bits(high, _ABOVE_ONE_OR_NEGATIVE)
            | (_bits(high, _IS_80) & (_bits(next_, _IS_NONZERO) | rest))
            | (one_high & _bits(next_, _AT_LEAST_81))
            | (one_high & _bits(next_, _IS_80) & rest))


def _first_marked(where: Any) -> int | None:
    """The first index that a mask of `_nan_or_positive_infinity`'s kinds marks, if any."""
    if isinstance(where, int):
        return None if where == 0 else ((where & -where).bit_length() - 1) // 8
    return int(where.argmax()) if where.any() else None


def _check_logit_bytes(where: str, raw: bytes, dtype: str, rows: int) -> None:
    """Each row finite or -inf, and not -inf everywhere; the first defective row is named."""
    first_bad = _first_marked(_nan_or_positive_infinity(raw, dtype))
    row_bytes = len(raw) // rows
    bad_row = rows if first_bad is None else first_bad * _B64_WIDTH[dtype] // row_bytes
    all_minus_inf = _NEGATIVE_INFINITY[dtype] * (row_bytes // _B64_WIDTH[dtype])
    for i in range(rows):
        if i == bad_row:
            raise TraceWriteError(f"{where} row {i} holds NaN or +inf logits")
        if raw[i * row_bytes:(i + 1) * row_bytes] == all_minus_inf:
            raise TraceWriteError(f"{where} row {i} is -inf for every token: no distribution")


def _float32_row(raw: bytes, i: int, vocab_size: int) -> array.array[float]:
    row = array.array("f", raw[4 * i * vocab_size:4 * (i + 1) * vocab_size])
    if sys.byteorder == "big":
        row.byteswap()
    return row


def _check_probability_bytes(where: str, raw: bytes, rows: int, vocab_size: int) -> None:
    """`_check_probabilities` on little-endian float32 rows, as fast as the machine allows."""
    first_bad = _first_marked(_outside_unit_interval(raw))
    sums = (_numpy.frombuffer(raw, dtype="<f4").reshape(rows, vocab_size).sum(
        axis=1, dtype=_numpy.float64).tolist() if _numpy is not None else [])
    bad_row = rows if first_bad is None else first_bad // vocab_size
    for i in range(rows):
        if i == bad_row:
            j = first_bad - i * vocab_size if first_bad is not None else 0
            value = struct.unpack_from("<f", raw, 4 * (first_bad or 0))[0]
            raise _not_a_probability(f"{where}[{i}][{j}]", value)
        total = sums[i] if sums else sum(_float32_row(raw, i, vocab_size))
        if abs(total - 1.0) > PROBABILITY_SUM_TOLERANCE - _SUM_MARGIN:
            total = math.fsum(_float32_row(raw, i, vocab_size))
            if abs(total - 1.0) > PROBABILITY_SUM_TOLERANCE:
                raise _bad_sum(f"{where}[{i}]", total)


def _not_a_probability(name: str, value: float) -> TraceWriteError:
    return _fail(name, "lie in [0, 1] (a probability)", value)


def _bad_sum(name: str, total: float) -> TraceWriteError:
    return TraceWriteError(f"{name} must sum to 1 within {PROBABILITY_SUM_TOLERANCE}, got a "
                           f"sum of {total:.6g}")


def sparse_block(
    rows: Iterable[Mapping[int, SupportsFloat] | tuple[Iterable[int], Iterable[SupportsFloat]]],
) -> dict[str, Any]:
    """Rows of probabilities with every omitted entry exactly 0, as a ``sparse_probs`` block.

    Each row is a mapping of token id to probability, or a pair (ids, values). Only a
    filtering sampler's rows (top-k, top-p, min-p) are exactly sparse: dropping a tail of
    positive mass turns an emitted tail token into a support failure.
    """
    if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Iterable):
        raise _fail("rows", "be a sequence of rows", rows)
    out = []
    for i, row in enumerate(rows):
        if isinstance(row, Mapping):
            ids, values = list(row.keys()), list(row.values())
        elif isinstance(row, tuple) and len(row) == 2:
            ids, values = list(row[0]), list(row[1])
        else:
            raise _fail(f"rows[{i}]", "be a mapping of token id to probability or a pair "
                        "(ids, values)", row)
        if len(ids) != len(values):
            raise TraceWriteError(f"rows[{i}] must pair each id with a value, got {len(ids)} "
                                  f"ids and {len(values)} values")
        out.append({
            "ids": [_integer(f"rows[{i}].ids[{j}]", t, 0) for j, t in enumerate(ids)],
            "values": [_real(f"rows[{i}].values[{j}]", v) for j, v in enumerate(values)],
        })
    if not out:
        raise TraceWriteError("rows must hold at least one row, got none")
    return {"sparse_probs": out}


def _check_probabilities(name: str, rows: Sequence[Sequence[float]]) -> None:
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            if not 0.0 <= value <= 1.0:  # NaN fails this too
                raise _not_a_probability(f"{name}[{i}][{j}]", value)
        total = math.fsum(row)
        if abs(total - 1.0) > PROBABILITY_SUM_TOLERANCE:
            raise _bad_sum(f"{name}[{i}]", total)


def _check_block(
    name: str, block: object, vocab_size: int, low: int, high: int, why: str, check_values: bool,
    keep: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """Validate a row block as the reader will.

    Returns its kind ("probs" or "logits") and the block to write, its numbers as Python
    floats (a hand-built block may hold NumPy scalars, which JSON cannot write), cut to its
    first `keep` rows when it holds more; the rows cut are neither checked nor written.
    """
    if not isinstance(block, Mapping):
        raise _fail(name, f"be a row block (a mapping with one of {_ROW_KEYS}; see "
                    "probs_block, logits_block, b64_block, sparse_block)", block)
    present = [key for key in _ROW_KEYS if key in block]
    if len(present) != 1:
        raise _fail(name, f"hold exactly one of {_ROW_KEYS}", sorted(block))
    key = present[0]
    allowed = {key, "rows", "dtype"} if key.endswith("_b64") else {key}
    if set(block) - allowed:
        raise _fail(name, f"hold only {sorted(allowed)}", sorted(block))
    kind = "logits" if key.startswith("logits") else "probs"
    where = f"{name}[{key!r}]"
    if key.endswith("_b64"):
        count = _integer(f"{name}['rows']", block.get("rows"), 1)
    else:
        entries = block[key]
        if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Iterable):
            raise _fail(where, "be a sequence of rows", entries)
        entries = list(entries)
        count = len(entries)
    if not low <= count <= high:
        raise TraceWriteError(f"{name} must hold {low} to {high} rows for {why}, got {count}")
    if count * vocab_size > MAX_BLOCK_ENTRIES:
        raise TraceWriteError(f"{name} holds {count} rows of vocab_size {vocab_size}, more than "
                              f"the reader's bound of {MAX_BLOCK_ENTRIES} entries a block")
    kept = count if keep is None else min(count, keep)
    if key in ("probs", "logits"):
        rows = _dense_rows(where, entries[:kept])
        for i, row in enumerate(rows):
            if len(row) != vocab_size:
                raise TraceWriteError(f"{where}[{i}] must hold vocab_size = {vocab_size} "
                                      f"entries, got {len(row)}")
            if kind == "logits":
                for j, value in enumerate(row):
                    if abs(value) > _FLOAT32_MAX:
                        raise _fail(f"{where}[{i}][{j}]", "fit float32", value)
        if kind == "probs" and check_values:
            _check_probabilities(where, rows)
        return kind, {key: rows}
    if key == "sparse_probs":
        dense, sparse_rows = [], []
        for i, row in enumerate(entries[:kept]):
            if not isinstance(row, Mapping) or set(row) != {"ids", "values"}:
                raise _fail(f"{where}[{i}]", "be a mapping of exactly 'ids' and 'values'", row)
            ids = _tokens(f"{where}[{i}]['ids']", row["ids"], vocab_size)
            given = row["values"]
            if isinstance(given, str | bytes | Mapping) or not isinstance(given, Iterable):
                raise _fail(f"{where}[{i}]['values']", "be a sequence of numbers", given)
            values = [_real(f"{where}[{i}]['values'][{j}]", v) for j, v in enumerate(given)]
            if len(ids) != len(values):
                raise TraceWriteError(f"{where}[{i}] must pair each id with a value, got "
                                      f"{len(ids)} ids and {len(values)} values")
            if len(set(ids)) != len(ids):
                raise _fail(f"{where}[{i}]['ids']", "not repeat a token id", ids)
            dense.append(values)
            sparse_rows.append({"ids": ids, "values": values})
        if check_values:
            _check_probabilities(where, dense)
        return kind, {key: sparse_rows}
    dtype = block.get("dtype", "float32")
    if not isinstance(dtype, str) or dtype not in _B64_WIDTH:
        raise _fail(f"{name}['dtype']", f"be one of {tuple(_B64_WIDTH)}", dtype)
    if kind == "probs" and dtype != "float32":
        raise _fail(f"{name}['dtype']", "be float32 for probabilities", dtype)
    text = block[key]
    if not isinstance(text, str):
        raise _fail(where, "be a base64 string", text)
    if isinstance(block, _EncodedBlock) and text is block.text:
        raw = block.raw  # the bytes b64_block encoded into this very text
    else:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise _fail(where, "be valid base64", text) from None
    need = count * vocab_size * _B64_WIDTH[dtype]
    if len(raw) != need:
        raise TraceWriteError(
            f"{where} must hold rows x vocab_size = {count} x {vocab_size} {dtype} "
            f"values = {need} bytes, got {len(raw)}")
    if kept < count:
        need = kept * vocab_size * _B64_WIDTH[dtype]
        raw = raw[:need]
        # Three bytes are four characters: a prefix of whole triples is a prefix of the text.
        text = text[:need // 3 * 4] if need % 3 == 0 else base64.b64encode(raw).decode("ascii")
    if check_values:
        if kind == "probs":
            _check_probability_bytes(where, raw, kept, vocab_size)
        else:
            _check_logit_bytes(where, raw, dtype, kept)
    written: dict[str, Any] = {key: text, "rows": kept}  # `rows` may have been a NumPy int
    if "dtype" in block:
        written["dtype"] = dtype
    return kind, written


# --- samplers ------------------------------------------------------------------------------


def _sampler(name: str, value: object) -> dict[str, Any]:
    """A sampler object: `SamplerConfig` fields by name, in the ranges it accepts."""
    if not isinstance(value, Mapping):
        raise _fail(name, "be a mapping of SamplerConfig fields", value)
    out: dict[str, Any] = {}
    for key, field_value in value.items():
        where = f"{name}[{key!r}]"
        if key not in SAMPLER_DEFAULTS:
            raise _fail(name, f"hold only SamplerConfig fields {sorted(SAMPLER_DEFAULTS)}", key)
        if key == "dry_sequence_breakers":
            out[key] = _tokens(where, field_value, MAX_TOKEN_ID + 1)
        elif key == "logit_bias":
            if not isinstance(field_value, Mapping):
                raise _fail(where, "be a mapping of token id to bias", field_value)
            bias = {}
            for token, bias_value in field_value.items():
                token_id = (int(token) if isinstance(token, str) and token.isdecimal()
                            and token.isascii() and len(token) <= 10 else token)
                token_id = _integer(f"{where} key", token_id, 0)
                number = _real(f"{where}[{token!r}]", bias_value)
                if abs(number) > _ADJUSTMENT_LIMIT:
                    raise _fail(f"{where}[{token!r}]", "lie in [-2**64, 2**64]", bias_value)
                bias[str(token_id)] = number
            out[key] = bias
        elif isinstance(SAMPLER_DEFAULTS[key], int):
            low = {"top_k": 0, "dry_penalty_last_n": -1}.get(key, 1)
            out[key] = _integer(where, field_value, low)
        else:
            out[key] = _real(where, field_value)
            _sampler_range(where, key, out[key], field_value)
    return out


def _sampler_range(where: str, key: str, number: float, given: object) -> None:
    if key in ("temperature", "dry_multiplier"):
        ok = number == 0.0 or _SMALLEST_TEMPERATURE <= number <= _FLOAT32_MAX
        bound = f"be 0 or lie in [2**-126, {_FLOAT32_MAX!r}]"
    elif key == "top_p":
        ok, bound = 0.0 < number <= 1.0, "lie in (0, 1]"
    elif key in ("min_p", "xtc_probability", "xtc_threshold"):
        ok, bound = 0.0 <= number <= 1.0, "lie in [0, 1]"
    elif key == "repetition_penalty":
        limit = _REPETITION_PENALTY_LIMIT
        ok, bound = 1.0 / limit <= number <= limit, "lie in [2**-32, 2**32]"
    elif key in ("frequency_penalty", "presence_penalty"):
        ok, bound = abs(number) <= _ADJUSTMENT_LIMIT, "lie in [-2**64, 2**64]"
    else:  # dry_base
        ok, bound = 1.0 <= number <= _FLOAT32_MAX, f"lie in [1, {_FLOAT32_MAX!r}]"
    if not ok:
        raise _fail(where, bound, given)


def _reads_history(sampler: Mapping[str, Any]) -> bool:
    """True when a penalty of the sampler reads the token history (`uses_history`)."""
    def get(key: str) -> Any:
        return sampler.get(key, SAMPLER_DEFAULTS[key])

    return bool(get("repetition_penalty") != 1.0 or get("frequency_penalty") != 0.0
                or get("presence_penalty") != 0.0
                or (get("dry_multiplier") > 0.0 and get("dry_penalty_last_n") != 0))


# --- compact traces ------------------------------------------------------------------------

_STAT_KEYS = {
    "emitted": ("p_token", "pit_p", "pit_qp"),
    "tested": ("p_draft", "p_below_draft"),
    "compared": ("q_token", "residual", "overlap", "dot", "q_at_argmax_p"),
    "drafts": ("q_draft", "pit_q"),
}


def _unit_hash(*key: object) -> float:
    """A number in [0, 1) fixed by `key`: BLAKE2b (8 bytes) of the parts joined by "/",
    big-endian, over 2**64 (the reader's `unit_hash`)."""
    text = "/".join(str(part) for part in key).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") / 2.0**64


def keeps_rows(rule: str, run_id: str, round_index: int, full_rows_share: float) -> bool:
    """Whether round `round_index` of run `run_id` keeps its rows in a compact trace: every
    ``block`` round (its kept-length law reads every row), and the others whose
    ``unit_hash("rows", run_id, round_index)`` lies below `full_rows_share`."""
    return rule == "block" or _unit_hash("rows", run_id, round_index) < full_rows_share


def _law_rows(name: str, value: object, low: int, high: int, vocab_size: int) -> Any:
    """A `[rows, vocab_size]` float32 array of probability rows, checked as the reader checks
    a probability block (finite, in [0, 1], each row summing to 1 within the tolerance)."""
    np = _numpy
    assert np is not None
    try:
        rows = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise _fail(name, "be an array of probability rows", value) from None
    if rows.ndim != 2 or rows.shape[1] != vocab_size or not low <= rows.shape[0] <= high:
        raise TraceWriteError(f"{name} must be {low} to {high} rows of vocab_size = "
                              f"{vocab_size} probabilities, got shape {tuple(rows.shape)}")
    bad = ~np.isfinite(rows) | (rows < 0) | (rows > 1)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise _not_a_probability(f"{name}[{i}][{j}]", float(rows[i, j]))
    sums = rows.sum(axis=1, dtype=np.float64)
    off = np.abs(sums - 1) > PROBABILITY_SUM_TOLERANCE
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise _bad_sum(f"{name}[{i}]", float(sums[i]))
    return rows


def _pit_lower(p: Any, key: Any, token: int) -> float:
    pivot = key[token]
    return float(p[key > pivot].sum()) + float(p[:token][key[:token] == pivot].sum())


def compact_stats(
    rule: str, draft_tokens: Sequence[int], emitted: Sequence[int], target_probs: Any,
    draft_probs: Any | None,
) -> dict[str, list[float]]:
    """A compact round's ``stats`` from its laws, as the reader computes them from rows.

    Args:
        rule: the rule id (the q/p ordering is used only under a token-by-token rule).
        draft_tokens, emitted: the round's tokens.
        target_probs: `[m, V]` float32 probabilities, m >= len(emitted): p at each position.
        draft_probs: `[m', V]` float32, row i the law draft i was drawn from; None when
            the drafter's law is not recorded.

    Per emitted token n: p(y_n) and the mass ordered before y_n by p descending and by
    q/p descending (ties by id); per tested position: p(d_n), the mass of p below d_n and,
    with q, q(y_n), the float32 sum of relu(p - q), sum min(p, q), sum p q, q at argmax p;
    per draft row: q(d_i) and the mass ordered before d_i by q descending.
    """
    np = _numpy
    if np is None:
        raise TraceWriteError("a compact trace's statistics need NumPy, which cannot be "
                              "imported here")
    target32 = np.asarray(target_probs, dtype=np.float32)
    target = target32.astype(np.float64)
    draft32 = None if draft_probs is None else np.asarray(draft_probs, dtype=np.float32)
    draft = None if draft32 is None else draft32.astype(np.float64)
    k = len(draft_tokens)
    decided = min(len(emitted), k)
    tested = decided if draft is not None else 0
    by_q = rule in _TOKENWISE_RULES
    out: dict[str, list[float]] = {key: [] for keys in _STAT_KEYS.values() for key in keys}
    for n, token in enumerate(emitted):
        p = target[n]
        out["p_token"].append(float(p[token]))
        out["pit_p"].append(_pit_lower(p, p, token))
        if by_q and n < tested and draft is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                key = np.where(p > 0, draft[n] / np.where(p > 0, p, 1), np.inf)
            out["pit_qp"].append(_pit_lower(p, key, token))
        else:
            out["pit_qp"].append(out["pit_p"][-1])
    for n in range(decided):
        p, d = target[n], draft_tokens[n]
        out["p_draft"].append(float(p[d]))
        out["p_below_draft"].append(float(p[:d].sum()))
    if draft is None or draft32 is None:
        for key in (*_STAT_KEYS["compared"], *_STAT_KEYS["drafts"]):
            del out[key]
        return out
    for n in range(tested):
        p, q = target[n], draft[n]
        out["q_token"].append(float(q[emitted[n]]))
        out["residual"].append(float(np.maximum(target32[n] - draft32[n],
                                                np.float32(0)).sum()))
        out["overlap"].append(float(np.minimum(p, q).sum()))
        # einsum, not np.dot: BLAS's dot splits a long row among threads, so its bits
        # would depend on the thread count; the reader sums the same way.
        out["dot"].append(float(np.einsum("i,i->", p, q)))
        out["q_at_argmax_p"].append(float(q[int(np.argmax(p))]))
    for i in range(min(draft.shape[0], k)):
        q, d = draft[i], draft_tokens[i]
        out["q_draft"].append(float(q[d]))
        out["pit_q"].append(_pit_lower(q, q, d))
    return out


# --- the writers ---------------------------------------------------------------------------

_TOKENWISE_RULES = frozenset(RULE_IDS) - {"block"}
"""The rules that decide position by position, reading no row past the first rejection."""


_SPLICED_TEXT = 1 << 16
"""The length of base64 text from which `_json_line` splices it in rather than dumping it."""


def _json_line(record: Mapping[str, Any]) -> list[str]:
    """The record as `json.dumps` writes it compactly, and a newline, in pieces to write one
    after the other (joined, a copy of megabytes more).

    A base64 block's text (megabytes a round at a large vocabulary) is put in as it is
    rather than scanned for characters to escape: it holds only base64's alphabet, made by
    `b64_block` or checked by the decoder before the record was built.
    """
    texts = {key: next((v for k, v in value.items() if k.endswith("_b64")), None)
             for key, value in record.items()
             if key in ("target", "draft") and isinstance(value, dict)}
    if not any(isinstance(text, str) and len(text) >= _SPLICED_TEXT for text in texts.values()):
        return [_compact(record) + "\n"]  # one call: faster below that size
    pieces, separator = ["{"], ""
    for key, value in record.items():
        text = texts.get(key)
        if isinstance(text, str):
            pieces.append(f'{separator}"{key}":{{')
            for i, (name, field) in enumerate(value.items()):
                pieces.append("," if i else "")
                if field is text:
                    pieces += [f'"{name}":"', text, '"']
                else:
                    pieces.append(f"{json.dumps(name)}:{_compact(field)}")
            pieces.append("}")
        else:
            pieces.append(f"{separator}{json.dumps(key)}:{_compact(value)}")
        separator = ","
    pieces.append("}\n")
    return pieces


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


class _PathLock:
    """A writer's hold on its path, taken before the file is truncated and released by
    `release` once its last byte is written (see `TraceWriter`: what each lock guarantees).

    POSIX ``flock`` where `fcntl` imports; ``msvcrt.locking`` of the file's first byte on
    Windows; elsewhere, or on a file system that refuses ``flock``, the exclusive creation
    of ``<path>.lock``, removed on release. A pipe or a device is not locked by a lock file
    (its name is no file of its own to guard).
    """

    def __init__(self, path: str, raw: IO[bytes]) -> None:
        self.path, self._raw = path, raw
        self.lock_file: str | None = None
        self._msvcrt = False
        if _fcntl is not None:
            try:
                _fcntl.flock(raw.fileno(), _fcntl.LOCK_EX | _fcntl.LOCK_NB)
                return
            except OSError as error:
                if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise self._held() from None
                # ENOLCK, EOPNOTSUPP: a file system without flock; the lock file below.
        elif _msvcrt is not None:
            raw.seek(0)
            try:
                _msvcrt.locking(raw.fileno(), _msvcrt.LK_NBLCK, 1)
            except OSError:
                raise self._held() from None
            self._msvcrt = True
            return
        if stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
            lock_file = path + ".lock"
            try:
                os.close(os.open(lock_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except FileExistsError:
                raise self._held(
                    f"; {lock_file!r} exists: if no writer is running, one stopped without "
                    "closing and left it, and removing it frees the path") from None
            self.lock_file = lock_file

    def _held(self, why: str = "") -> TraceWriteError:
        return TraceWriteError(
            f"destination {self.path!r} is held by another TraceWriter (in this process or "
            "another): two writers on one path would lose each other's lines; give each "
            f"writer its own path, or one writer several runs{why}")

    def release(self) -> None:
        """Let the next writer in; ``flock`` is released when the file closes."""
        if self._msvcrt and _msvcrt is not None:
            self._raw.seek(0)
            _msvcrt.locking(self._raw.fileno(), _msvcrt.LK_UNLCK, 1)
            self._msvcrt = False
        if self.lock_file is not None:
            os.unlink(self.lock_file)
            self.lock_file = None


def _open_exclusively(path: str) -> tuple[IO[bytes], _PathLock]:
    """Open `path` for writing from its start, holding it (`_PathLock`) until released.

    Two writers on one path would interleave or overwrite each other's lines and leave a
    file that reads as complete; the second one is refused instead. The file is truncated
    only once the lock is held, so a refused writer leaves the first one's lines as they
    are.
    """
    raw = open(path, "ab")  # noqa: SIM115 - appending does not truncate before the lock
    try:
        lock = _PathLock(path, raw)
    except BaseException:
        raw.close()
        raise
    if stat.S_ISREG(os.fstat(raw.fileno()).st_mode):  # a pipe or a device: nothing to cut
        raw.seek(0)
        raw.truncate()
    return raw, lock


class TraceWriter:
    """A trace file: its header, then the lines of the runs started on it.

    Args:
        destination: a path (``.gz``: written through gzip) or an open text stream. A
            path is locked while this writer holds it: a second writer on it (in any
            process) raises `TraceWriteError` and leaves its lines as they are. What the
            lock guarantees depends on the platform. POSIX (``fcntl.flock``): another
            TraceWriter on the same host is refused, and the lock goes when the file
            closes, even when the process dies; it is advisory, so a program that writes
            without taking it (a shell's ``>``, an editor) is not stopped, and on a network
            file system it holds only as far as that file system carries ``flock`` (where
            it refuses ``flock``, the lock file below is used). Windows
            (``msvcrt.locking`` of the file's first byte): another TraceWriter is refused,
            and another program cannot write that byte, but can write the rest. Neither
            module: ``<path>.lock`` is created exclusively and removed by `close`; another
            TraceWriter is refused, nothing else is, and a writer that dies before `close`
            leaves the lock file behind, so the next writer is refused (its error names the
            file) until it is removed. A pipe or a device is not locked that way. A stream
            is never locked: its opener owns it.
        vocab_size: V, for every run.
        version: 2 (any number of runs) or 1 (one run: the version the reader reads).
        engine: free text naming the engine and its version.
        extra: engine diagnostics for the header (version 2), ignored by readers.
        check_values: also check every row's values (sums, ranges); structure, ids and
            lengths are checked regardless. A base64 block costs a pass over its bytes in
            NumPy, or in the standard library's bytes operations where NumPy cannot be
            imported; JSON rows are checked number by number.
        omit_undecided_rows: write only the rows of a round's positions that were decided:
            under a token-by-token rule (every rule but ``block``) the first len(emitted)
            target rows and min(len(emitted), k) draft rows, the least the reader accepts;
            rows past the first rejection decide nothing. Block rounds keep every row, since
            block verification reads every position. Costs the draft-law check the drafts
            past the first rejection.
        compact: write a compact trace (version 2; NumPy must be importable) keeping the
            rows of this share of rounds, in [0, 1], chosen by `keeps_rows`, and of every
            block round; every round also holds the statistics the checks read, computed
            from the laws `write_round` is given as ``target_probs`` and ``draft_probs``.
            None (the default): every round holds its rows and no statistics.
    """

    def __init__(
        self, destination: str | os.PathLike[str] | IO[str], *, vocab_size: int,
        version: int = 2, engine: str | None = None, extra: Mapping[str, Any] | None = None,
        check_values: bool = True, omit_undecided_rows: bool = False,
        compact: float | None = None,
    ) -> None:
        if isinstance(version, bool) or not isinstance(version, int) or version not in VERSIONS:
            raise _fail("version", f"be one of {VERSIONS}", version)
        self.version = version
        self.vocab_size = _integer("vocab_size", vocab_size, 1, MAX_VOCAB_SIZE)
        if engine is not None and not isinstance(engine, str):
            raise _fail("engine", "be a string", engine)
        if extra is not None and version == 1:
            raise TraceWriteError(f"extra is a version 2 field; version 1 has none, got "
                                  f"{_brief(extra)}")
        self.check_values = check_values
        if not isinstance(omit_undecided_rows, bool):
            raise _fail("omit_undecided_rows", "be a bool", omit_undecided_rows)
        self.omit_undecided_rows = omit_undecided_rows
        self.full_rows_share: float | None = None
        if compact is not None:
            share = _real("compact", compact)
            if not 0 <= share <= 1:
                raise _fail("compact", "be a share of rounds in [0, 1]", compact)
            if version != 2:
                raise _fail("version", "be 2 for a compact trace", version)
            if _numpy is None:
                raise TraceWriteError("compact: a compact trace's statistics need NumPy, "
                                      "which cannot be imported here")
            self.full_rows_share = share
        self._header: dict[str, Any] = {"format": FORMAT, "version": version,
                                        "vocab_size": self.vocab_size}
        if self.full_rows_share is not None:
            self._header["compact"] = {"full_rows_share": self.full_rows_share}
        if engine is not None:
            self._header["engine"] = engine
        if extra is not None:
            self._header["extra"] = _json_object("extra", extra)
        self._runs: dict[str, RunWriter] = {}
        self._batch_slots: set[tuple[int, int]] = set()
        self._owned: IO[str] | None = None
        self._raw: IO[bytes] | None = None
        self._lock: _PathLock | None = None
        self._gzipped = False
        if isinstance(destination, str | os.PathLike):
            path = os.fspath(destination)
            raw, self._lock = _open_exclusively(path)
            # Held open across calls and closed by close(), so no `with`.
            if path.endswith(".gz"):
                gzipped = gzip.GzipFile(fileobj=raw, mode="wb")
                self._owned = io.TextIOWrapper(gzipped, encoding="utf-8", newline="\n")
                self._gzipped = True
            else:
                self._owned = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
            self._raw = raw
            self._stream: IO[str] = self._owned
        elif hasattr(destination, "write"):
            self._stream = destination
        else:
            raise _fail("destination", "be a path or a text stream", destination)
        self._header_written = False
        if version == 2:
            self._write_line(self._header)

    def _write_line(self, record: Mapping[str, Any]) -> None:
        self._stream.writelines(_json_line(record))
        self._stream.flush()
        self._header_written = True

    def start_run(
        self, run_id: str | None = None, *, prompt: Iterable[int] | None = None,
        prompt_length: int | None = None, target_sampler: Mapping[str, Any] | None = None,
        draft_sampler: Mapping[str, Any] | None = None, extra: Mapping[str, Any] | None = None,
    ) -> RunWriter:
        """Open a run and write its run record (version 1: the header); returns its writer.

        Args:
            run_id: the run's id, unique in the file (default: its number, "0", "1", ...);
                version 1 does not write it.
            prompt: the prompt's token ids; needed when rows are logits for a sampler with a
                penalty (the reader rebuilds p from the history).
            prompt_length: the prompt's length, when `prompt` is not given.
            target_sampler, draft_sampler: `SamplerConfig` fields by name, needed when that
                role's rows are logits. Leave `draft_sampler` out when no SamplerConfig
                describes the drafter's law, and record its rows as probabilities.
            extra: engine diagnostics for the run (version 2).
        """
        if self.version == 1 and self._runs:
            raise TraceWriteError(f"start_run: a version 1 trace holds one run, and run "
                                  f"{next(iter(self._runs))!r} was started; write version 2 for "
                                  "more")
        identifier = str(len(self._runs)) if run_id is None else run_id
        if not isinstance(identifier, str) or not _RUN_ID.fullmatch(identifier):
            raise _fail("run_id", "be 1 to 128 characters of A-Z a-z 0-9 . _ : / -", run_id)
        if identifier in self._runs:
            raise _fail("run_id", "be unique in the file", run_id)
        record: dict[str, Any] = {}
        if prompt is not None:
            tokens = _tokens("prompt", prompt, self.vocab_size)
            if not tokens:
                raise _fail("prompt", "hold at least one token", prompt)
            record["prompt"] = tokens
        if prompt_length is not None:
            length = _integer("prompt_length", prompt_length, 1)
            if prompt is not None and length != len(record["prompt"]):
                raise TraceWriteError(f"prompt_length is {length} but prompt holds "
                                      f"{len(record['prompt'])} tokens")
            record["prompt_length"] = length
        if target_sampler is not None:
            record["target_sampler"] = _sampler("target_sampler", target_sampler)
        if draft_sampler is not None:
            record["draft_sampler"] = _sampler("draft_sampler", draft_sampler)
        if extra is not None:
            if self.version == 1:
                raise TraceWriteError(f"extra is a version 2 field; version 1 has none, got "
                                      f"{_brief(extra)}")
            record["extra"] = _json_object("extra", extra)
        run = RunWriter(self, identifier, record)
        self._runs[identifier] = run
        if self.version == 1:
            self._write_line({**self._header, **record})
        else:
            self._write_line({"record": "run", "run": identifier, **record})
        return run

    def close(self) -> None:
        """Write the header if nothing was written yet, and close a file this writer opened."""
        if not self._header_written:
            self._write_line(self._header)
        try:
            if self._owned is not None:
                # Every byte out before the lock goes: through gzip, its trailer too (a
                # GzipFile leaves the file it wrote through open).
                if self._gzipped:
                    self._owned.close()
                else:
                    self._owned.flush()
            if self._raw is not None and not self._raw.closed:
                self._raw.flush()
        finally:
            lock, self._lock = self._lock, None
            try:
                if lock is not None:
                    lock.release()
            finally:
                if self._owned is not None:
                    self._owned.close()
                    self._owned = None
                if self._raw is not None:  # closing it releases a flock
                    self._raw.close()
                    self._raw = None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class RunWriter:
    """One run of a trace: writes its rounds, numbering them and tracking the position."""

    def __init__(self, trace: TraceWriter, run_id: str, record: Mapping[str, Any]) -> None:
        self.trace = trace
        self.run_id = run_id
        self.rounds = 0
        """Rounds written so far; the next round's number."""
        self.position = 0
        """Tokens the run emitted so far; the next round's position."""
        self._samplers = {role: record.get(f"{role}_sampler") for role in ("target", "draft")}
        self._has_prompt = "prompt" in record
        self._has_length = self._has_prompt or "prompt_length" in record
        self._batch_step: int | None = None
        self._pending_batch: tuple[int, int] | None = None

    def keeps_rows(self, rule: str | enum.Enum) -> bool:
        """Whether the next round, under `rule`, keeps its rows (always, unless the trace
        is compact): an engine may skip building the row blocks of a round that does not."""
        share = self.trace.full_rows_share
        rule_id = rule.value if isinstance(rule, enum.Enum) else rule
        return share is None or keeps_rows(str(rule_id), self.run_id, self.rounds, share)

    def write_round(
        self, *, rule: str | enum.Enum, draft_tokens: Iterable[int], emitted: Iterable[int],
        target: Mapping[str, Any] | None, draft: Mapping[str, Any] | None = None,
        num_accepted: int | None = None,
        uniforms: Iterable[Iterable[SupportsFloat | None]] | None = None,
        cache: Mapping[str, int | str] | None = None, stopped: bool = False,
        extra: Mapping[str, Any] | None = None, batch: tuple[int, int] | None = None,
        target_probs: Any | None = None, draft_probs: Any | None = None,
    ) -> None:
        """Validate one round and write it as a line.

        Args:
            rule: the rule the engine claims, by id (`RULE_IDS`), or an enum whose value is one.
            draft_tokens: the k drafts, before any padding placeholder.
            emitted: the 1 to k + 1 tokens the round emitted.
            target: the target's rows, a block from `probs_block`, `logits_block`,
                `b64_block` or `sparse_block`: at least len(emitted), at most k + 1 rows.
                In a compact trace, written only when `keeps_rows` says so (may be None
                otherwise).
            draft: the law each draft was drawn from, at least min(len(emitted), k) and at
                most k rows; None for a drafter with no distribution.
            target_probs, draft_probs: compact traces only, and there required (draft_probs
                exactly when the drafter's law is recorded): the laws the round was
                decided on, `[rows, V]` probabilities (a NumPy array or nested sequence,
                rounded to float32), the sampler's output whether the blocks hold
                probabilities or logits; the round's statistics are computed from them.
            num_accepted: the drafts accepted, when the round was stopped mid-emission.
            uniforms: k + 1 pairs [accept, draw] in [0, 1); a None entry (version 2) for one
                the engine did not draw as a uniform.
            cache: offsets (``target_before`` required); version 2 adds ``target_fed``,
                ``target_rewind`` and ``draft_rewind``.
            stopped: the engine cut the emission (end of sequence, token budget).
            extra: engine diagnostics for the round (version 2), ignored by readers.
            batch: (step, slot) of the batched verification forward that decided the round
                (version 2): the step's number, increasing along a run, and the round's row
                in that batch, one round per row.
        """
        trace, version, vocab = self.trace, self.trace.version, self.trace.vocab_size
        rule_id = rule.value if isinstance(rule, enum.Enum) else rule
        if not isinstance(rule_id, str) or not rule_id:
            raise _fail("rule", f"be a rule id such as {RULE_IDS}", rule)
        drafts = _tokens("draft_tokens", draft_tokens, vocab)
        tokens = _tokens("emitted", emitted, vocab)
        k = len(drafts)
        if not 1 <= len(tokens) <= k + 1:
            raise TraceWriteError(f"emitted must hold 1 to k + 1 = {k + 1} tokens, got "
                                  f"{len(tokens)}: {_brief(tokens)}")
        if not isinstance(stopped, bool):
            raise _fail("stopped", "be a bool", stopped)
        record: dict[str, Any] = {"round": self.rounds, "position": self.position,
                                  "rule": rule_id, "draft_tokens": drafts, "emitted": tokens}
        if version == 2:
            record = {"run": self.run_id, **record}
        if num_accepted is not None:
            record["num_accepted"] = _integer("num_accepted", num_accepted, 0)
        # The reader's count of accepted drafts, so that a record it would refuse is refused
        # here, while the engine can still say which round it was.
        if not stopped:
            accepted = len(tokens) - 1
            if num_accepted is not None and record["num_accepted"] != accepted:
                raise TraceWriteError(
                    f"num_accepted is {num_accepted}, but a round that was not stopped and "
                    f"emitted {len(tokens)} tokens accepted {accepted}")
        elif num_accepted is not None:
            accepted = min(record["num_accepted"], len(tokens), k)
        else:
            accepted = next((i for i, t in enumerate(tokens) if i >= k or t != drafts[i]),
                            len(tokens))
        if tokens[:accepted] != drafts[:accepted]:
            raise TraceWriteError(f"emitted must start with the {accepted} accepted drafts "
                                  f"{drafts[:accepted]}, got {tokens}")
        kinds = {}
        # The fewest rows the reader accepts are those of the decided positions.
        decided = trace.omit_undecided_rows and rule_id in _TOKENWISE_RULES
        share = trace.full_rows_share
        stats = None
        if share is None:
            if target_probs is not None or draft_probs is not None:
                raise TraceWriteError("target_probs and draft_probs are for a compact trace "
                                      "(TraceWriter(..., compact=share))")
            if target is None:
                raise _fail("target", "be a row block (every round of a full trace holds "
                            "its rows)", target)
        else:
            if target_probs is None:
                raise TraceWriteError("target_probs is required in a compact trace: the "
                                      "statistics are computed from it")
            if k and draft is not None and draft_probs is None:
                raise TraceWriteError("draft_probs is required in a compact trace when the "
                                      "drafter's law is recorded (draft is given)")
            if k == 0 and draft_probs is not None:
                raise _fail("draft_probs", "be None for a round with no drafts", draft_probs)
            target_law = _law_rows("target_probs", target_probs, len(tokens), k + 1, vocab)
            draft_law = None
            if draft_probs is not None:
                draft_law = _law_rows("draft_probs", draft_probs, min(len(tokens), k), k,
                                      vocab)
                if decided:
                    draft_law = draft_law[:min(len(tokens), k)]
            stats = compact_stats(rule_id, drafts, tokens, target_law, draft_law)
            if not keeps_rows(rule_id, self.run_id, self.rounds, share):
                target = draft = None
            elif target is None:
                raise _fail("target", "be the round's row block: this round of the compact "
                            "trace keeps its rows (see RunWriter.keeps_rows)", target)
            elif draft_law is not None and draft is None:
                raise _fail("draft", "be the drafter's row block: this round keeps its rows "
                            "and draft_probs is given", draft)
        if target is not None:
            kinds["target"], record["target"] = _check_block(
                "target", target, vocab, len(tokens), k + 1,
                f"a round of {k} drafts emitting {len(tokens)} tokens", trace.check_values,
                len(tokens) if decided else None)
        if draft is not None:
            if k == 0:
                raise _fail("draft", "be None for a round with no drafts", draft)
            kinds["draft"], record["draft"] = _check_block(
                "draft", draft, vocab, min(len(tokens), k), k,
                f"{k} drafts with {len(tokens)} tokens emitted", trace.check_values,
                min(len(tokens), k) if decided else None)
        for role, kind in kinds.items():
            sampler = self._samplers[role]
            if kind != "logits":
                continue
            if sampler is None:
                raise TraceWriteError(f"{role} holds logits, so start_run needs "
                                      f"{role}_sampler (the reader rebuilds p with it)")
            if _reads_history(sampler) and not self._has_prompt:
                raise TraceWriteError(f"{role} holds logits for a sampler with a penalty, so "
                                      "start_run needs prompt (the penalty reads the history)")
        if uniforms is not None:
            record["uniforms"] = self._uniforms(uniforms, k)
        if cache is not None:
            record["cache"] = self._cache(
                cache, _CACHE_V2 if self.trace.version == 2 else _CACHE_V1)
        if stopped:
            record["stopped"] = True
        if extra is not None:
            if version == 1:
                raise TraceWriteError(f"extra is a version 2 field; version 1 has none, got "
                                      f"{_brief(extra)}")
            record["extra"] = _json_object("extra", extra)
        if batch is not None:
            record["batch"] = self._batch(batch)
        if stats is not None:
            if "draft" in record:
                block = record["draft"]
                written = block.get("rows", len(next(iter(block.values()))))
                if len(stats["q_draft"]) != written:
                    raise TraceWriteError(f"draft_probs holds {len(stats['q_draft'])} rows "
                                          f"but draft writes {written}: they must be the "
                                          "same rows")
            record["stats"] = stats
        trace._write_line(record)
        self.rounds += 1
        self.position += len(tokens)
        if self._pending_batch is not None:
            trace._batch_slots.add(self._pending_batch)
            self._batch_step = self._pending_batch[0]
            self._pending_batch = None

    # --- tree rounds ---------------------------------------------------------------------

    def write_tree_round(
        self, *, scheme: str | enum.Enum, parents: Iterable[int], node_tokens: Iterable[int],
        target: Mapping[str, Any], path: Iterable[int], emitted: Iterable[int],
        draft: Mapping[str, Any] | None = None,
        uniforms: Mapping[str, Iterable[SupportsFloat]] | None = None,
        cache: Mapping[str, int] | None = None, stopped: bool = False,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Validate one tree round (version 2) and write it as a ``tree-round`` line.

        Rows are indexed as ``verify_tree`` indexes them: row 0 is the root (the round's
        context), row i + 1 is node i.

        Args:
            scheme: how siblings were drafted, one of `TREE_SCHEMES` (or an enum whose
                value is one).
            parents: node i's parent, -1 for the root; a parent comes before its children.
            node_tokens: node i's token; distinct among siblings unless the scheme is iid.
            target: the target's law at every row, N + 1 rows.
            path: the accepted nodes from the root down, each a child of the one before.
            emitted: the path's tokens and the token after it (a non-empty prefix of those
                when `stopped`).
            draft: the drafter's law at each row that has children, in row order: the
                law those children were drafted from. Required unless the scheme is
                deterministic.
            uniforms: ``{"accept": N numbers, "sample": D + 1 numbers}`` in [0, 1), in
                ``verify_tree``'s layout (D the tree's depth).
            cache: offsets ``target_before`` (required), ``target_after``,
                ``draft_before`` with ``draft_fed``, ``draft_after``.
            stopped: the engine cut the emission (end of sequence, token budget).
            extra: engine diagnostics for the round, ignored by readers.
        """
        trace, vocab = self.trace, self.trace.vocab_size
        if trace.version != 2:
            raise TraceWriteError("write_tree_round: tree rounds are a version 2 record; this "
                                  "trace is version 1")
        scheme_id = scheme.value if isinstance(scheme, enum.Enum) else scheme
        if scheme_id not in TREE_SCHEMES:
            raise _fail("scheme", f"be one of {TREE_SCHEMES}", scheme)
        if isinstance(parents, str | bytes | Mapping) or not isinstance(parents, Iterable):
            raise _fail("parents", "be a sequence of ints", parents)
        parent_list = list(itertools.islice(parents, MAX_TREE_NODES + 1))
        if not parent_list:
            raise _fail("parents", "name at least one node", parent_list)
        if len(parent_list) > MAX_TREE_NODES:
            raise TraceWriteError(f"parents must name at most {MAX_TREE_NODES} nodes "
                                  "(MAX_TREE_NODES, the reader's bound)")
        children: list[list[int]] = [[] for _ in range(len(parent_list) + 1)]
        depths = [0]
        for i, parent in enumerate(parent_list):
            number = _integer(f"parents[{i}]", parent, -1, max(i - 1, -1))
            parent_list[i] = number
            children[number + 1].append(i)
            depths.append(depths[number + 1] + 1)
        size = len(parent_list)
        tokens = _tokens("node_tokens", node_tokens, vocab)
        if len(tokens) != size:
            raise TraceWriteError(f"node_tokens must hold one token per node ({size}), got "
                                  f"{len(tokens)}")
        if scheme_id != "iid":
            for row, kids in enumerate(children):
                siblings = [tokens[c] for c in kids]
                if len(set(siblings)) != len(siblings):
                    raise TraceWriteError(f"node_tokens: the children {kids} of row {row} "
                                          f"repeat a token ({siblings}); the {scheme_id} "
                                          "scheme drafts distinct siblings")
        nodes = _tokens("path", path, size)
        row = 0
        for d, node in enumerate(nodes):
            if node not in children[row]:
                raise TraceWriteError(f"path[{d}] = {node} is not a child of row {row}")
            row = node + 1
        if not isinstance(stopped, bool):
            raise _fail("stopped", "be a bool", stopped)
        out = _tokens("emitted", emitted, vocab)
        full = [*(tokens[n] for n in nodes), None]
        if not (len(out) == len(full) or (stopped and 1 <= len(out) <= len(full))):
            raise TraceWriteError(f"emitted must hold the {len(nodes)} path tokens and the next "
                                  f"token, got {len(out)} tokens: {_brief(out)}")
        if out[: len(nodes)] != full[: min(len(out), len(nodes))]:
            raise TraceWriteError(f"emitted must start with the path's tokens "
                                  f"{full[:-1]}, got {out}")
        record: dict[str, Any] = {
            "record": "tree-round", "run": self.run_id, "round": self.rounds,
            "position": self.position, "scheme": scheme_id, "parents": parent_list,
            "node_tokens": tokens, "path": nodes, "emitted": out,
        }
        kinds = {}
        kinds["target"], record["target"] = _check_block(
            "target", target, vocab, size + 1, size + 1,
            f"a tree of {size} nodes (the root and one row per node)", trace.check_values)
        inner = sum(1 for kids in children if kids)
        if draft is not None:
            kinds["draft"], record["draft"] = _check_block(
                "draft", draft, vocab, inner, inner,
                f"a tree with {inner} rows that have children", trace.check_values)
        elif scheme_id != "deterministic":
            raise TraceWriteError(f"draft is required by the {scheme_id} scheme: the drafter's "
                                  "law at each row that has children")
        for role, kind in kinds.items():
            sampler = self._samplers[role]
            if kind == "logits" and (sampler is None or _reads_history(sampler)):
                raise TraceWriteError(f"{role} holds logits, so start_run needs {role}_sampler, "
                                      "one that reads no history (a tree node's history is "
                                      "its path)")
        if uniforms is not None:
            if not isinstance(uniforms, Mapping) or set(uniforms) != {"accept", "sample"}:
                raise _fail("uniforms", "be a mapping of 'accept' and 'sample' alone",
                            uniforms)
            record["uniforms"] = {}
            for key, length in (("accept", size), ("sample", max(depths) + 1)):
                given = uniforms[key]
                if isinstance(given, str | bytes | Mapping) or not isinstance(given, Iterable):
                    raise _fail(f"uniforms[{key!r}]", f"be {length} numbers", given)
                values = [_real(f"uniforms[{key!r}][{i}]", v) for i, v in enumerate(given)]
                if len(values) != length:
                    raise _fail(f"uniforms[{key!r}]", f"hold {length} numbers", values)
                for i, value in enumerate(values):
                    single = struct.unpack("<f", struct.pack("<f", value))[0]
                    if not 0.0 <= single < 1.0:
                        raise _fail(f"uniforms[{key!r}][{i}]", "lie in [0, 1) as float32",
                                    value)
                record["uniforms"][key] = values
        if cache is not None:
            record["cache"] = self._cache(cache, _TREE_CACHE)
        if stopped:
            record["stopped"] = True
        if extra is not None:
            record["extra"] = _json_object("extra", extra)
        trace._write_line(record)
        self.rounds += 1
        self.position += len(out)

    def _uniforms(
        self, uniforms: Iterable[Iterable[SupportsFloat | None]], k: int
    ) -> list[list[float | None]]:
        if isinstance(uniforms, str | bytes | Mapping) or not isinstance(uniforms, Iterable):
            raise _fail("uniforms", f"be [k + 1, 2] = [{k + 1}, 2] numbers", uniforms)
        pairs = [list(pair) if isinstance(pair, Iterable) else pair for pair in uniforms]
        if len(pairs) != k + 1 or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise _fail("uniforms", f"be [k + 1, 2] = [{k + 1}, 2] numbers", uniforms)
        out: list[list[float | None]] = []
        for i, pair in enumerate(pairs):
            row: list[float | None] = []
            for j, value in enumerate(pair):
                name = f"uniforms[{i}][{j}]"
                if value is None:
                    if self.trace.version == 1:
                        raise TraceWriteError(f"{name} is None: a uniform left unrecorded is a "
                                              "version 2 feature; in version 1 record all or "
                                              "pass uniforms=None")
                    row.append(None)
                    continue
                number = _real(name, value)
                # The reader compares in float32, where 0.99999999 rounds to 1.
                single = struct.unpack("<f", struct.pack("<f", number))[0]
                if not 0.0 <= single < 1.0:
                    raise _fail(name, "lie in [0, 1) as float32", value)
                row.append(number)
            out.append(row)
        return out

    # --- Batched verification (version 2's `batch`) ---

    def _batch(self, batch: object) -> dict[str, int]:
        """`{"step", "slot"}`, checked as the reader checks it: a run's steps increase, and
        one slot of a step holds one round."""
        if self.trace.version == 1:
            raise TraceWriteError(f"batch is a version 2 field; version 1 has none, got "
                                  f"{_brief(batch)}")
        if isinstance(batch, str | bytes | Mapping) or not isinstance(batch, Sequence) or len(
                batch) != 2:
            raise _fail("batch", "be a pair (step, slot)", batch)
        step = _integer("batch step", batch[0], 0)
        slot = _integer("batch slot", batch[1], 0)
        if self._batch_step is not None and step <= self._batch_step:
            raise TraceWriteError(f"batch step is {step}, but run {self.run_id!r}'s previous "
                                  f"round was verified in step {self._batch_step}: a run's "
                                  "steps increase")
        if (step, slot) in self.trace._batch_slots:
            raise TraceWriteError(f"batch slot {slot} of step {step} already holds a round: "
                                  "one row of a batch verifies one round")
        # Recorded once the round is written: a round refused later leaves no trace here.
        self._pending_batch = (step, slot)
        return {"step": step, "slot": slot}

    def _cache(
        self, cache: Mapping[str, int | str], known: tuple[str, ...]
    ) -> dict[str, int | str]:
        """The cache offsets of a round, each checked; `known` the fields its record takes."""
        if not isinstance(cache, Mapping):
            raise _fail("cache", "be a mapping of offsets", cache)
        for key in cache:
            if key not in known:
                later = (" (a version 2 field)" if key in _CACHE_V2 and self.trace.version == 1
                         else "")
                raise _fail("cache", f"hold only {known}{later}", key)
        if "target_before" not in cache:
            raise _fail("cache", "hold target_before", dict(cache))
        if ("draft_before" in cache) != ("draft_fed" in cache):
            raise _fail("cache", "hold draft_before and draft_fed together, or neither",
                        dict(cache))
        if not self._has_length:
            raise TraceWriteError("cache offsets need the prompt's length: pass prompt or "
                                  "prompt_length to start_run")
        out: dict[str, int | str] = {}
        for key, value in cache.items():
            if key.endswith("_rewind"):
                if value not in _REWINDS:
                    raise _fail(f"cache[{key!r}]", f"be one of {_REWINDS}", value)
                out[key] = value
            else:
                out[key] = _integer(f"cache[{key!r}]", value, 1 if key == "target_fed" else 0,
                                    2**63 - 1)
        return out
