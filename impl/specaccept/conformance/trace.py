"""The conformance trace: one JSON header line, then one JSON record per line.

`read_trace` parses and validates a trace of either version into `Trace` (rows rebuilt as
float32 probabilities), raising `TraceError` naming the line and field of the first defect.
Version 1 holds one run, its prompt and samplers in the header; version 2 any number of
independent runs, each opened by a run record. The format is specified in
``spec/trace_format.md`` and ``spec/trace_format.schema.json``; the shell's
`specaccept.shell.conformance.writer` and the standard-library ``specaccept_trace`` write it.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import json
import math
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import mlx.core as mx
import numpy as np

from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.sampler_config import MAX_TOKEN_ID, SamplerConfig
from specaccept.core.sampling import effective_token_distribution
from specaccept.core.tree import MAX_TREE_NODES

__all__ = [
    "MAX_BLOCK_ENTRIES",
    "MAX_VOCAB_SIZE",
    "PROBABILITY_SUM_TOLERANCE",
    "ROW_DTYPES",
    "STAT_KEYS",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "TRACE_VERSIONS",
    "Round",
    "RoundStats",
    "Run",
    "Trace",
    "TraceError",
    "TreeRound",
    "read_trace",
    "sampler_from_json",
    "unit_hash",
]

TRACE_FORMAT = "specaccept-trace"
TRACE_VERSION = 2
"""The newest version, the one to write."""
TRACE_VERSIONS = (1, 2)
"""The versions this reader reads."""
PROBABILITY_SUM_TOLERANCE = 1e-3
"""A probability row is accepted when its float64 sum lies within this of 1."""
MAX_VOCAB_SIZE = MAX_TOKEN_ID + 1
"""The largest `vocab_size`: token ids are int32."""
MAX_BLOCK_ENTRIES = 2**27
"""The most entries (rows x vocab_size) one row block may decode to: 512 MiB of float32,
checked before anything is allocated, so that a sparse or base64 block cannot ask for more."""

_ROW_KEYS = ("probs", "logits", "probs_b64", "logits_b64", "sparse_probs")
ROW_DTYPES = ("float32", "float16", "bfloat16")
"""The element types of a base64 row block (``dtype``)."""
_ROUND_KEYS = frozenset({
    "round", "position", "rule", "draft_tokens", "emitted", "target", "draft", "num_accepted",
    "uniforms", "cache", "stopped",
})
_ROUND_KEYS_V2 = _ROUND_KEYS | {"run", "extra"} | {"batch"} | {"stats"}
_HEADER_KEYS_V2 = frozenset({"format", "version", "vocab_size", "engine", "extra", "compact"})
STAT_KEYS = {
    "emitted": ("p_token", "pit_p", "pit_qp"),
    "tested": ("p_draft", "p_below_draft"),
    "compared": ("q_token", "residual", "overlap", "dot", "q_at_argmax_p"),
    "drafts": ("q_draft", "pit_q"),
}
"""A compact round's `stats`, by what they are given for: each emitted token; each tested
position (a draft the round decided); each tested position again where the drafter's law is
recorded; each recorded draft row."""
_STAT_RANGE_SLACK = 1e-3
"""A statistic that is a mass may exceed 1 by a row's tolerated sum error."""
_RUN_KEYS = frozenset({
    "record", "run", "prompt", "prompt_length", "target_sampler", "draft_sampler", "extra",
})
_RUN_ID = re.compile(r"[A-Za-z0-9._:/-]{1,128}")
_CACHE_KEYS = ("target_before", "target_after", "draft_before", "draft_fed", "draft_after")
_CACHE_KEYS_V2 = (*_CACHE_KEYS, "target_fed", "target_rewind", "draft_rewind")
REWIND_TIMINGS = ("eager", "lazy")
_SAMPLER_INTEGERS = frozenset({
    "top_k", "repetition_context_size", "dry_allowed_length", "dry_penalty_last_n",
})
_TOKEN_KEY = re.compile(r"[0-9]{1,10}")


def unit_hash(*key: object) -> float:
    """A number in [0, 1) fixed by `key` alone: the same in any piece, process or language
    (the first 8 bytes of BLAKE2b over the key's text, big-endian, over 2**64)."""
    text = "/".join(str(part) for part in key).encode("utf-8")
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def keeps_rows(rule: object, run_id: str, index: int, full_rows_share: float) -> bool:
    """Whether round `index` of run `run_id` of a compact trace holds its rows: every block
    round (its kept-length law reads every row), and the others whose
    ``unit_hash("rows", run_id, index)`` lies below the share."""
    return bool(rule == AcceptanceRule.BLOCK.value or rule is AcceptanceRule.BLOCK
                or unit_hash("rows", run_id, index) < full_rows_share)


class TraceError(ValueError):
    """A malformed trace; the message names the line (1-based) and the field."""

    def __init__(self, line: int, field_name: str, message: str) -> None:
        super().__init__(f"trace line {line}, field {field_name!r}: {message}")
        self.line = line
        self.field = field_name


@dataclass(frozen=True)
class Run:
    """One independent run: a version 2 run record, or the header of a version 1 trace."""

    id: str
    """The run's id (the empty string for the one run of a version 1 trace)."""
    line: int
    """The line that opened it (1, the header, in version 1)."""
    prompt: list[int] | None = None
    """The prompt's tokens, when recorded."""
    prompt_length: int | None = None
    """Tokens in the prompt, from ``prompt`` or ``prompt_length``; None when neither is given."""
    target_sampler: SamplerConfig | None = None
    draft_sampler: SamplerConfig | None = None


@dataclass(frozen=True)
class RoundStats:
    """A round's per-decision statistics (`STAT_KEYS`), float64: written by the engine in a
    compact trace, or computed from the rows (`specaccept.conformance.positions`).

    Per emitted token n: p(y_n) and the lower ends of its randomised-PIT intervals, tokens
    ordered by p descending (`pit_p`) and by q/p descending (`pit_qp`; p descending where
    the round's rule is not token by token or the position has no q), ties by id. Per tested
    position n: p(d_n) and the mass of p on ids below d_n; where q is recorded also q(y_n),
    the float32 sum of relu(p - q), sum min(p, q), sum p q and q at the (first) argmax of p.
    Per recorded draft row i: q(d_i) and the lower end of d_i's PIT interval under q
    descending, ties by id.
    """

    p_token: np.ndarray
    pit_p: np.ndarray
    pit_qp: np.ndarray
    p_draft: np.ndarray
    p_below_draft: np.ndarray
    q_token: np.ndarray
    residual: np.ndarray
    overlap: np.ndarray
    dot: np.ndarray
    q_at_argmax_p: np.ndarray
    q_draft: np.ndarray
    pit_q: np.ndarray

    @property
    def records_drafter(self) -> bool:
        """Whether the drafter's law was recorded (its rows, or their statistics)."""
        return self.q_draft.size > 0


@dataclass(frozen=True)
class Round:
    """One validated round; rows are float32 probabilities, however the trace stored them."""

    index: int
    """The round's number, from 0."""
    line: int
    """The trace line it came from (1-based; the header is line 1)."""
    position: int
    """Tokens generated before the round."""
    rule: AcceptanceRule | str
    """The claimed rule (a string when this library has no such rule)."""
    draft_tokens: list[int]
    """The k drafts."""
    emitted: list[int]
    """The tokens the round emitted."""
    num_accepted: int
    """The drafts accepted, so ``emitted[:num_accepted] == draft_tokens[:num_accepted]``."""
    target_rows: np.ndarray
    """`[m, V]` float32, m >= len(emitted): row i is p at position i."""
    draft_rows: np.ndarray | None
    """`[m', V]` float32, row i the law draft i was drawn from; None when not recorded."""
    uniforms: np.ndarray | None
    """`[k+1, 2]` float32 in [0, 1), as `verify_tokenwise` reads them; None when not recorded.
    An entry the engine did not record (version 2's ``null``) is NaN."""
    cache: dict[str, int] | None
    """Cache offsets (`target_before`, ..., and `target_fed`, k + 1 unless the trace says
    otherwise); None when not recorded."""
    stopped: bool
    """True when the engine cut the round's emission (end of sequence, token budget)."""
    target_logits: np.ndarray | None = None
    """`[m, V]` float32 target logits when the trace stored logits, else None."""
    run: Run = field(default_factory=lambda: Run("", 1))
    """The run the round belongs to, with its prompt and samplers."""
    target_rewind: str = "eager"
    """When the target drops rejected entries, "eager" (before the round ends) or "lazy"."""
    draft_rewind: str = "eager"
    """The same for the drafter."""
    batch: tuple[int, int] | None = None
    """The batched verification forward that decided the round, and the round's row in it,
    as a pair of step and slot (version 2's ``batch``); None when not recorded."""
    stats: RoundStats | None = None
    """The statistics the engine wrote (a compact trace's rounds); None in a full trace."""

    @property
    def k(self) -> int:
        """The number of drafts."""
        return len(self.draft_tokens)

    @property
    def has_rows(self) -> bool:
        """False for a compact trace's round that holds its statistics alone (its
        `target_rows` then has no row)."""
        return bool(self.target_rows.shape[0] > 0)


@dataclass
class Trace:
    """A parsed trace: the header, its runs, the valid rounds of every run in file order,
    and whether the file was cut short."""

    header: dict[str, Any]
    vocab_size: int
    version: int = 1
    runs: dict[str, Run] = field(default_factory=dict)
    """Every run by id, in the order they were opened (one, id "", in version 1)."""
    rounds: list[Round] = field(default_factory=list)
    truncated: str | None = None
    tree_rounds: list[TreeRound] = field(default_factory=list)
    """The tree rounds of every run in file order (version 2's ``tree-round`` records)."""

    @property
    def round_count(self) -> int:
        """Chain and tree rounds together."""
        return len(self.rounds) + len(self.tree_rounds)
    """Why reading stopped before the end of the file; None when it read to the end."""


def sampler_from_json(value: object, line: int, name: str) -> SamplerConfig:
    """Parse a sampler object, raising `TraceError` on unknown fields or bad values."""
    if not isinstance(value, dict):
        raise TraceError(line, name, f"must be an object of SamplerConfig fields, got {value!r}")
    known = {f.name for f in dataclasses.fields(SamplerConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise TraceError(line, f"{name}.{unknown[0]}", f"is not a SamplerConfig field ({known})")
    arguments: dict[str, Any] = {}
    for key, field_value in value.items():
        where = f"{name}.{key}"
        if key == "dry_sequence_breakers":
            if not isinstance(field_value, list):
                raise TraceError(line, where, f"must be a list of token ids, got "
                                 f"{_brief(field_value)}")
            for i, token in enumerate(field_value):
                if not _is_int(token) or not 0 <= token <= MAX_TOKEN_ID:
                    raise TraceError(line, f"{where}[{i}]", f"must be a token id in "
                                     f"[0, 2**31 - 1], got {_brief(token)}")
            arguments[key] = tuple(field_value)
        elif key == "logit_bias":
            if not isinstance(field_value, dict):
                raise TraceError(line, where, f"must be an object, got {_brief(field_value)}")
            bias = {}
            for token, bias_value in field_value.items():
                if not _TOKEN_KEY.fullmatch(token):
                    raise TraceError(line, where, f"keys must be token ids written in decimal "
                                     f"digits, got {_brief(token)}")
                if not _is_real(bias_value):
                    raise TraceError(line, f"{where}.{token}", f"must be a finite number, got "
                                     f"{_brief(bias_value)}")
                bias[int(token)] = bias_value
            arguments[key] = bias
        elif key in _SAMPLER_INTEGERS:
            if not _is_int(field_value):
                raise TraceError(line, where, f"must be an integer, got {_brief(field_value)}")
            arguments[key] = field_value
        else:
            if not _is_real(field_value):
                raise TraceError(line, where, f"must be a finite number, got "
                                 f"{_brief(field_value)}")
            arguments[key] = field_value
    try:
        return SamplerConfig(**arguments)
    except (TypeError, ValueError) as error:
        raise TraceError(line, name, str(error)) from None


def _brief(value: object) -> str:
    """`value` for an error message, cut to a readable length."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else (
        f"an integer of {len(str(abs(value)))} digits")
    return text if len(text) <= 60 else f"{text[:57]}..."


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    """A JSON number that is a finite float64 (an int beyond float64's range is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _reals(values: object, line: int, name: str, length: int | None = None) -> np.ndarray:
    """A flat list of finite JSON numbers as float64; every other value is an error."""
    if not isinstance(values, list):
        raise TraceError(line, name, f"must be a list of numbers, got {_brief(values)}")
    if length is not None and len(values) != length:
        raise TraceError(line, name, f"must hold {length} numbers, got {len(values)}")
    # One pass over the types in C: strings, bools, nulls and nested lists are refused here,
    # where numpy would convert a string or a bool without a word.
    if not set(map(type, values)) <= {float, int}:
        i = next(i for i, v in enumerate(values) if type(v) not in (float, int))
        raise TraceError(line, f"{name}[{i}]", f"must be a number, got {_brief(values[i])}")
    try:
        array = np.asarray(values, dtype=np.float64)
    except OverflowError:
        array = np.array([float(v) if _is_real(v) else math.inf for v in values])
    if not np.isfinite(array).all():
        i = int(np.flatnonzero(~np.isfinite(array))[0])
        raise TraceError(line, f"{name}[{i}]", f"must be a finite number, got "
                         f"{_brief(values[i])}")
    return array


def _decode_b64(
    text: object, dtype: str, rows: int, vocab: int, line: int, name: str
) -> np.ndarray:
    if not isinstance(text, str):
        raise TraceError(line, name, "must be a base64 string")
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise TraceError(line, name, "is not valid base64") from None
    width = 4 if dtype == "float32" else 2
    if len(raw) != rows * vocab * width:
        raise TraceError(
            line, name,
            f"holds {len(raw)} bytes, but {rows} rows of vocab_size {vocab} in {dtype} "
            f"need {rows * vocab * width}: the rows disagree with the vocabulary",
        )
    if dtype == "float32":
        values = np.frombuffer(raw, dtype="<f4")
    elif dtype == "float16":
        values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    else:
        values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return values.reshape(rows, vocab).astype(np.float32)


def _dense(value: object, vocab: int, line: int, name: str) -> np.ndarray:
    if not isinstance(value, list) or not value or not all(isinstance(r, list) for r in value):
        raise TraceError(line, name, "must be a non-empty list of rows (lists of numbers)")
    for i, row in enumerate(value):
        if len(row) != vocab:
            raise TraceError(
                line, f"{name}[{i}]",
                f"has {len(row)} entries, but vocab_size is {vocab}: vocabulary mismatch",
            )
    out = np.empty((len(value), vocab), dtype=np.float32)
    for i, row in enumerate(value):
        with np.errstate(over="ignore"):
            out[i] = _reals(row, line, f"{name}[{i}]")
    return out


def _sparse(value: object, vocab: int, line: int, name: str) -> np.ndarray:
    if not isinstance(value, list) or not value:
        raise TraceError(line, name, "must be a non-empty list of {ids, values} objects")
    rows: list[tuple[list[int], np.ndarray]] = []
    for i, row in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(row, dict) or set(row) != {"ids", "values"}:
            raise TraceError(line, where, "must be an object with exactly 'ids' and 'values'")
        ids, values = row["ids"], row["values"]
        if not isinstance(ids, list) or not isinstance(values, list) or len(ids) != len(values):
            raise TraceError(line, where, "ids and values must be lists of the same length")
        for j, token in enumerate(ids):
            if not _is_int(token) or not 0 <= token < vocab:
                raise TraceError(line, f"{where}.ids[{j}]",
                                 f"must be a token id in [0, {vocab}), got {_brief(token)}")
        if len(set(ids)) != len(ids):
            raise TraceError(line, f"{where}.ids", "repeats a token id")
        rows.append((ids, _reals(values, line, f"{where}.values")))
    out = np.zeros((len(value), vocab), dtype=np.float32)
    for i, (ids, values) in enumerate(rows):
        with np.errstate(over="ignore"):
            out[i, ids] = values
    return out


def _row_block(
    value: object, vocab: int, line: int, name: str, rows_allowed: tuple[int, int] | None = None,
    why: str = "",
) -> tuple[str, np.ndarray]:
    """Decode a row block: ("probs" or "logits", `[m, V]` float32).

    `rows_allowed` (low, high) bounds m, checked before the rows are decoded or allocated;
    `why` says where the bound comes from.
    """
    if not isinstance(value, dict):
        raise TraceError(line, name, f"must be an object with one of {_ROW_KEYS}")
    present = [key for key in _ROW_KEYS if key in value]
    if len(present) != 1:
        raise TraceError(line, name, f"must hold exactly one of {_ROW_KEYS}, got "
                         f"{sorted(value)[:8]}")
    key = present[0]
    allowed = {key, "rows", "dtype"} if key.endswith("_b64") else {key}
    extra = sorted(set(value) - allowed)
    if extra:
        raise TraceError(line, f"{name}.{extra[0]}", f"is not a field of a {key} block")
    where = f"{name}.{key}"
    count = value.get("rows") if key.endswith("_b64") else value[key]
    count = len(count) if isinstance(count, list) else count
    if _is_int(count) and rows_allowed is not None:
        low, high = rows_allowed
        if not low <= count <= high:
            raise TraceError(line, name, f"has {count} rows; {why} needs {low} to {high}")
    if _is_int(count) and count * vocab > MAX_BLOCK_ENTRIES:
        raise TraceError(line, name, f"has {count} rows of vocab_size {vocab} = {count * vocab} "
                         f"entries, more than this reader's bound {MAX_BLOCK_ENTRIES}")
    if key in ("probs", "logits"):
        rows = _dense(value[key], vocab, line, where)
    elif key == "sparse_probs":
        rows = _sparse(value[key], vocab, line, where)
    else:
        dtype = value.get("dtype", "float32")
        if not isinstance(dtype, str) or dtype not in ROW_DTYPES:
            raise TraceError(line, f"{name}.dtype", f"must be one of {ROW_DTYPES}, got {dtype!r}")
        if not _is_int(count) or count < 1:
            raise TraceError(line, f"{name}.rows", f"must be an int >= 1, got {_brief(count)}")
        if key == "probs_b64" and dtype != "float32":
            raise TraceError(
                line, f"{name}.dtype", f"probabilities must be float32, got {dtype}: a "
                "half-precision probability below ~6e-8 reads as 0, and the support check "
                "has zero tolerance (store half-precision logits instead)",
            )
        rows = _decode_b64(value[key], dtype, count, vocab, line, where)
    kind = "logits" if key.startswith("logits") else "probs"
    if kind == "probs":
        _check_probabilities(rows, line, where)
    else:
        if np.isnan(rows).any() or np.isposinf(rows).any():
            raise TraceError(line, where, "holds NaN or +inf logits")
        masked = np.isneginf(rows).all(axis=1)
        if masked.any():
            i = int(np.flatnonzero(masked)[0])
            raise TraceError(line, f"{where}[{i}]", "is -inf for every token: no distribution")
    return kind, rows


def _check_probabilities(rows: np.ndarray, line: int, name: str) -> None:
    bad = ~np.isfinite(rows) | (rows < 0) | (rows > 1)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise TraceError(line, f"{name}[{i}][{j}]", f"must lie in [0, 1], got {rows[i, j]!r}")
    sums = rows.astype(np.float64).sum(axis=1)
    off = np.abs(sums - 1.0) > PROBABILITY_SUM_TOLERANCE
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise TraceError(
            line, f"{name}[{i}]",
            f"sums to {sums[i]:.6g}, not 1 within {PROBABILITY_SUM_TOLERANCE}",
        )


def _int(
    record: Mapping[str, Any], key: str, line: int, *, low: int = 0, high: int = MAX_TOKEN_ID
) -> int:
    value = record.get(key)
    if not _is_int(value) or not low <= value <= high:
        raise TraceError(line, key, f"must be an int in [{low}, {high}], got {_brief(value)}")
    return value


def _tokens(record: Mapping[str, Any], key: str, line: int, vocab: int) -> list[int]:
    value = record.get(key)
    if not isinstance(value, list):
        raise TraceError(line, key, f"must be a list of token ids, got {_brief(value)}")
    for i, token in enumerate(value):
        if not _is_int(token):
            raise TraceError(line, f"{key}[{i}]", f"must be an int token id, got {_brief(token)}")
        if not 0 <= token < vocab:
            raise TraceError(line, f"{key}[{i}]", f"token id {token} outside [0, {vocab})")
    return list(value)


def _rule(value: object, line: int) -> AcceptanceRule | str:
    if not isinstance(value, str) or not value:
        raise TraceError(line, "rule", f"must be a rule id string, got {_brief(value)}")
    try:
        return AcceptanceRule(value)
    except ValueError:
        return value


class _RunState:
    """What the reader keeps per open run: the history its rows were computed after."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.history: list[int] = list(run.prompt or [])
        self.position = 0
        self.rounds = 0
        self.batch_step: int | None = None
        self.touched = False
        """True once a round of the run was read (in a piece: a round of the piece)."""
        self.resumed = False
        """True while a run opened before a piece awaits its first round in the piece."""

    @property
    def reads_history(self) -> bool:
        """Whether a sampler of the run reads the history, so its rows depend on it."""
        return any(config is not None and config.uses_history
                   for config in (self.run.target_sampler, self.run.draft_sampler))


def _extra(record: Mapping[str, Any], line: int) -> None:
    """`extra`, when present, is a JSON object; its content is the engine's own, but strict
    JSON: NaN, Infinity and -Infinity (which Python's parser reads) are refused in it too."""
    if "extra" not in record:
        return
    if not isinstance(record["extra"], dict):
        raise TraceError(line, "extra", f"must be a JSON object, got {_brief(record['extra'])}")
    pending: list[tuple[str, object]] = [("extra", record["extra"])]
    while pending:  # a walk with a stack: the parser already bounded the depth
        where, value = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise TraceError(line, where, f"is {value!r}, which is not JSON (NaN and the "
                             "infinities are Python's extensions)")
        if isinstance(value, dict):
            pending.extend((f"{where}.{key}", item) for key, item in value.items())
        elif isinstance(value, list):
            pending.extend((f"{where}[{i}]", item) for i, item in enumerate(value))


def _run_fields(record: Mapping[str, Any], run_id: str, line: int, vocab: int) -> Run:
    """A run's prompt and samplers, from a run record or a version 1 header."""
    prompt = _tokens(record, "prompt", line, vocab) if "prompt" in record else None
    length = None if prompt is None else len(prompt)
    if "prompt_length" in record:
        length = _int(record, "prompt_length", line, low=1)
        if prompt is not None and length != len(prompt):
            raise TraceError(line, "prompt_length",
                             f"is {length} but prompt has {len(prompt)} tokens")
    samplers = {role: sampler_from_json(record[role], line, role)
                for role in ("target_sampler", "draft_sampler") if role in record}
    return Run(run_id, line, prompt, length, samplers.get("target_sampler"),
               samplers.get("draft_sampler"))


def compact_share(header: Mapping[str, Any]) -> float | None:
    """The header's ``compact.full_rows_share`` (a real in [0, 1]); None when the trace is
    not compact. Raises `TraceError` on a malformed ``compact``."""
    if "compact" not in header:
        return None
    value = header["compact"]
    if not isinstance(value, dict) or set(value) != {"full_rows_share"}:
        raise TraceError(1, "compact", f"must be an object holding 'full_rows_share' alone, "
                         f"got {_brief(value)}")
    share = value["full_rows_share"]
    if not _is_real(share) or not 0 <= float(share) <= 1:
        raise TraceError(1, "compact.full_rows_share", f"must be a number in [0, 1], got "
                         f"{_brief(share)}")
    return float(share)


def _stats(value: object, line: int, emitted: list[int], drafts: list[int], accepted: int,
           draft_rows: int | None) -> RoundStats:
    """A compact round's `stats`: every list of `STAT_KEYS` at its length, finite, each in
    its range, and agreeing with itself where two name one value (an accepted draft is the
    token emitted). `draft_rows`: the drafter's rows the round holds (None when it holds no
    rows at all)."""
    if not isinstance(value, dict):
        raise TraceError(line, "stats", f"must be an object, got {_brief(value)}")
    drafter = "q_draft" in value
    wanted = [*STAT_KEYS["emitted"], *STAT_KEYS["tested"],
              *(STAT_KEYS["compared"] + STAT_KEYS["drafts"]) * drafter]
    unknown = sorted(set(value) - set(wanted))
    if unknown:
        raise TraceError(line, f"stats.{unknown[0]}", f"is not a statistic of this round "
                         f"({wanted}; the statistics that read q go together)")
    missing = [key for key in wanted if key not in value]
    if missing:
        raise TraceError(line, f"stats.{missing[0]}", "is missing")
    k, tested = len(drafts), min(len(emitted), len(drafts))
    q_rows = len(value["q_draft"]) if drafter and isinstance(value["q_draft"], list) else 0
    if draft_rows is not None and drafter != (draft_rows > 0):
        raise TraceError(line, "stats", "must give the statistics that read q exactly when "
                         "the round holds the drafter's rows")
    if drafter and not (tested <= q_rows <= k and (draft_rows is None or q_rows == draft_rows)):
        want = f"{draft_rows}, the draft rows it holds" if draft_rows is not None else (
            f"{tested} to {k}")
        raise TraceError(line, "stats.q_draft", f"must hold {want} numbers, got {q_rows}")
    arrays: dict[str, np.ndarray] = {}
    for group, keys in STAT_KEYS.items():
        length = {"emitted": len(emitted), "tested": tested, "compared": tested,
                  "drafts": q_rows}[group]
        for key in keys:
            if key not in value:
                arrays[key] = np.zeros(0)
                continue
            array = _reals(value[key], line, f"stats.{key}", length)
            if array.size and not (array.min() >= 0 and array.max() <= 1 + _STAT_RANGE_SLACK):
                i = int(np.flatnonzero((array < 0) | (array > 1 + _STAT_RANGE_SLACK))[0])
                raise TraceError(line, f"stats.{key}[{i}]", f"must lie in [0, 1], got "
                                 f"{value[key][i]!r}")
            arrays[key] = array
    stats = RoundStats(**arrays)
    for n in range(min(accepted, tested)):
        if stats.p_draft[n] != stats.p_token[n] or (
                drafter and stats.q_token[n] != stats.q_draft[n]):
            raise TraceError(line, f"stats.p_draft[{n}]", "an accepted draft is the token "
                             "emitted: p_draft and p_token, q_token and q_draft must agree")
    return stats


class _Reader:
    """Validates records in order, keeping each run's history the rows were computed after."""

    def __init__(self, header: dict[str, Any]) -> None:
        line = 1
        if header.get("format") != TRACE_FORMAT:
            raise TraceError(
                line, "format", f"must be {TRACE_FORMAT!r}, got {_brief(header.get('format'))}"
            )
        version = header.get("version")
        if not _is_int(version) or version not in TRACE_VERSIONS:  # `true == 1` in Python
            raise TraceError(
                line, "version",
                f"must be 1 or 2 (the integers this reader reads), got {_brief(version)}",
            )
        self.version = version
        self.vocab = _int(header, "vocab_size", line, low=1, high=MAX_VOCAB_SIZE)
        if "engine" in header and not isinstance(header["engine"], str):
            raise TraceError(line, "engine", f"must be a string, got {_brief(header['engine'])}")
        self.trace = Trace(header=header, vocab_size=self.vocab, version=version)
        self.open: dict[str, _RunState] = {}
        self.resumed: dict[str, tuple[int, int, int]] = {}
        self.batch_slots: dict[tuple[int, int], int] = {}
        if version == 1:
            self._open(_run_fields(header, "", line, self.vocab))
            return
        unknown = sorted(set(header) - _HEADER_KEYS_V2)
        if unknown:
            raise TraceError(line, unknown[0], "is not a version 2 header field (a run's prompt "
                             f"and samplers go in its run record): {sorted(_HEADER_KEYS_V2)}")
        _extra(header, line)
        self.full_rows_share = compact_share(header)

    full_rows_share: float | None = None
    """A compact trace's share of rounds that keep their rows; None for a full trace."""

    def _open(self, run: Run) -> None:
        self.open[run.id] = _RunState(run)
        self.trace.runs[run.id] = run

    def resume_all(self) -> None:
        """At the start of a piece: every open run enters at the round its next line says."""
        for state in self.open.values():
            state.resumed = True

    def enter(self, record: Mapping[str, Any], line: int, state: _RunState) -> None:
        """A resumed run's first round in the piece sets the run's counters from the record."""
        if not state.resumed:
            return
        state.resumed = False
        state.rounds = _int(record, "round", line)
        state.position = _int(record, "position", line)
        self.resumed[state.run.id] = (line, state.rounds, state.position)

    def record(self, record: object, line: int) -> Round | TreeRound | Run:
        """Validate one line after the header: a run record (returned as the `Run` it opens)
        or a round (returned, and counted in the run's state)."""
        if not isinstance(record, dict):
            raise TraceError(line, "record", f"must be a JSON object, got {type(record).__name__}")
        if self.version == 1:
            for key in ("record", "run", "extra"):
                if key in record:
                    raise TraceError(line, key, "is a version 2 field, in a version 1 trace")
            return self.round(record, line, self.open[""])
        if record.get("record") == TREE_ROUND_RECORD:
            return _tree_round(self, record, line)
        if "record" in record:
            if record["record"] != "run":
                raise TraceError(line, "record", f"must be 'run' (a run record), got "
                                 f"{_brief(record['record'])}")
            return self.run_record(record, line)
        run_id = record.get("run")
        if not isinstance(run_id, str):
            raise TraceError(line, "run", f"must name the round's run (a string), got "
                             f"{_brief(run_id)}")
        if run_id not in self.open:
            raise TraceError(line, "run", f"names run {run_id!r}, which no earlier line opened")
        _extra(record, line)
        return self.round(record, line, self.open[run_id])

    def run_record(self, record: Mapping[str, Any], line: int) -> Run:
        unknown = sorted(set(record) - _RUN_KEYS)
        if unknown:
            raise TraceError(line, unknown[0], f"is not a run record field ({sorted(_RUN_KEYS)})")
        run_id = record.get("run")
        if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
            raise TraceError(line, "run", "must be 1 to 128 characters of A-Z a-z 0-9 . _ : / -, "
                             f"got {_brief(run_id)}")
        if run_id in self.open:
            raise TraceError(line, "run", f"opens run {run_id!r} a second time (first opened on "
                             f"line {self.open[run_id].run.line})")
        _extra(record, line)
        run = _run_fields(record, run_id, line, self.vocab)
        self._open(run)
        return run

    def _probabilities(
        self, kind: str, rows: np.ndarray, state: _RunState, drafts: list[int],
        line: int, name: str,
    ) -> np.ndarray:
        if kind == "probs":
            return rows
        config = state.run.target_sampler if name == "target" else state.run.draft_sampler
        where = "the header" if self.version == 1 else f"run {state.run.id!r}'s record"
        if config is None:
            raise TraceError(line, name, f"holds logits, so {where} needs '{name}_sampler'")
        if config.uses_history and state.run.prompt is None:
            raise TraceError(
                line, name, f"holds logits for a sampler that reads the history: {where} "
                "needs 'prompt'",
            )
        logits = mx.array(rows)
        try:
            if not config.uses_history:
                probs = effective_token_distribution(logits, config)
            else:
                probs = mx.stack([
                    effective_token_distribution(
                        logits[i], config,
                        mx.array([*state.history, *drafts[:i]], dtype=mx.int32),
                    )
                    for i in range(rows.shape[0])
                ])
        except (TypeError, ValueError) as error:
            raise TraceError(line, name, f"its logits and '{name}_sampler' give no "
                             f"distribution: {error}") from None
        rebuilt = np.array(probs, dtype=np.float32)
        try:
            _check_probabilities(rebuilt, line, name)
        except TraceError as error:
            raise TraceError(
                line, name, f"the law rebuilt from its logits with '{name}_sampler' is not a "
                f"distribution ({str(error).split(': ', 1)[1]}): the logits or the sampler "
                "lie outside the float32 envelope of spec/sampler_config.md",
            ) from None
        return rebuilt

    def round(self, record: dict[str, Any], line: int, state: _RunState) -> Round:
        keys = _ROUND_KEYS if self.version == 1 else _ROUND_KEYS_V2
        unknown = sorted(set(record) - keys)
        if unknown:
            raise TraceError(line, unknown[0], f"is not a round field ({sorted(keys)})")
        self.enter(record, line, state)
        state.touched = True
        index = state.rounds
        of_run = "" if self.version == 1 else f" of run {state.run.id!r}"
        if _int(record, "round", line) != index:
            raise TraceError(
                line, "round", f"must be {index} (rounds{of_run} are numbered from 0 in order)"
            )
        position = _int(record, "position", line)
        if position != state.position:
            raise TraceError(
                line, "position",
                f"is {position}, but the previous rounds{of_run} emitted {state.position} tokens",
            )
        rule = _rule(record.get("rule"), line)
        drafts = _tokens(record, "draft_tokens", line, self.vocab)
        emitted = _tokens(record, "emitted", line, self.vocab)
        k = len(drafts)
        if not 1 <= len(emitted) <= k + 1:
            raise TraceError(
                line, "emitted", f"must hold 1 to k+1 = {k + 1} tokens, got {len(emitted)}"
            )
        stopped = record.get("stopped", False)
        if not isinstance(stopped, bool):
            raise TraceError(line, "stopped", f"must be a bool, got {stopped!r}")
        # A round that was not cut emits its accepted drafts and one more token; a cut
        # round shows only a prefix of that, so its count comes from the record if given.
        if not stopped:
            accepted = len(emitted) - 1
            if "num_accepted" in record and _int(record, "num_accepted", line) != accepted:
                raise TraceError(
                    line, "num_accepted",
                    f"is {record['num_accepted']}, but a round that was not stopped and emitted "
                    f"{len(emitted)} tokens accepted {accepted}",
                )
        elif "num_accepted" in record:
            accepted = min(_int(record, "num_accepted", line), len(emitted), k)
        else:
            accepted = next(
                (i for i, t in enumerate(emitted) if i >= k or t != drafts[i]), len(emitted)
            )
        if accepted > k:
            raise TraceError(line, "emitted", f"has {len(emitted)} tokens for {k} drafts")
        if emitted[:accepted] != drafts[:accepted]:
            raise TraceError(
                line, "emitted",
                f"must start with the {accepted} accepted drafts {drafts[:accepted]}, "
                f"got {emitted}",
            )
        share = self.full_rows_share
        if share is None and "stats" in record:
            raise TraceError(line, "stats", "is a compact trace's field; the header declares "
                             "no 'compact'")
        if share is not None:
            if "stats" not in record:
                raise TraceError(line, "stats", "is missing: every round of a compact trace "
                                 "holds its statistics")
            expected = keeps_rows(record.get("rule"), state.run.id, index, share)
            if expected != ("target" in record):
                which = (f"unit_hash('rows', {state.run.id!r}, {index}) < full_rows_share = "
                         f"{share!r}" if record.get("rule") != "block" else "a block round")
                raise TraceError(
                    line, "target", ("must hold the round's rows: " if expected else
                                     "must be left out: ") + f"in a compact trace a round keeps "
                    f"its rows exactly when it is {which}" + ("" if expected else
                                                              ", and this one is not"))
            if "target" not in record and record.get("draft") is not None:
                raise TraceError(line, "draft", "must be left out with 'target' in a compact "
                                 "round")
        if "target" not in record and share is None:
            raise TraceError(line, "target", "is missing: every round needs the target's rows")
        target_logits, draft = None, None
        if "target" in record:
            kind, rows = _row_block(
                record["target"], self.vocab, line, "target", (len(emitted), k + 1),
                f"a round with {k} drafts emitting {len(emitted)} tokens",
            )
            target_logits = rows if kind == "logits" else None
            target = self._probabilities(kind, rows, state, drafts, line, "target")
        else:
            target = np.zeros((0, self.vocab), dtype=np.float32)
        if record.get("draft") is not None:
            needed = min(len(emitted), k)
            draft_kind, draft_rows = _row_block(
                record["draft"], self.vocab, line, "draft", (needed, k),
                f"{k} drafts with {len(emitted)} tokens emitted",
            )
            draft = self._probabilities(draft_kind, draft_rows, state, drafts, line, "draft")
        stats = None
        if share is not None:
            stats = _stats(record["stats"], line, emitted, drafts, accepted,
                           None if "target" not in record else
                           0 if draft is None else draft.shape[0])
        uniforms = None
        if record.get("uniforms") is not None:
            value = record["uniforms"]
            if not isinstance(value, list) or len(value) != k + 1:
                raise TraceError(line, "uniforms", f"must be [k+1, 2] = [{k + 1}, 2] numbers, "
                                 f"got {_brief(value)}")
            uniforms = self._uniforms(value, line)
        cache, rewinds = None, {"target_rewind": "eager", "draft_rewind": "eager"}
        if record.get("cache") is not None:
            cache, rewinds = self._cache(record["cache"], line, state, k)
        batch = self._batch(record, line, state)
        state.history += emitted
        state.position += len(emitted)
        state.rounds += 1
        return Round(
            index=index, line=line, position=position, rule=rule, draft_tokens=drafts,
            emitted=emitted, num_accepted=accepted, target_rows=target, draft_rows=draft,
            uniforms=uniforms, cache=cache, stopped=stopped, target_logits=target_logits,
            run=state.run, **rewinds, batch=batch, stats=stats,
        )

    # --- Batched verification (version 2's `batch`) ---

    def _batch(
        self, record: Mapping[str, Any], line: int, state: _RunState
    ) -> tuple[int, int] | None:
        """The round's (step, slot); a run's steps increase, and a slot of a step is one
        round's."""
        if record.get("batch") is None:
            return None
        value = record["batch"]
        if not isinstance(value, dict) or set(value) != {"step", "slot"}:
            raise TraceError(line, "batch", f"must be an object with exactly 'step' and 'slot', "
                             f"got {_brief(value)}")
        for key in ("step", "slot"):
            if not _is_int(value[key]) or not 0 <= value[key] <= MAX_TOKEN_ID:
                raise TraceError(line, f"batch.{key}", f"must be an int in [0, {MAX_TOKEN_ID}], "
                                 f"got {_brief(value[key])}")
        step, slot = int(value["step"]), int(value["slot"])
        if state.batch_step is not None and step <= state.batch_step:
            raise TraceError(line, "batch.step", f"is {step}, but run {state.run.id!r}'s "
                             f"previous round was verified in step {state.batch_step}: a run's "
                             "rounds are verified in increasing steps")
        taken = self.batch_slots.get((step, slot))
        if taken is not None:
            raise TraceError(line, "batch.slot", f"slot {slot} of step {step} is already line "
                             f"{taken}'s: one row of a batch verifies one round")
        self.batch_slots[(step, slot)] = line
        state.batch_step = step
        return step, slot

    def _uniforms(self, value: list[Any], line: int) -> np.ndarray:
        """`[k+1, 2]` float32; version 2's null (a decision made without a recordable
        uniform) becomes NaN, which no check reads as a uniform."""
        pairs = []
        for i, pair in enumerate(value):
            if self.version == 2 and isinstance(pair, list) and None in pair:
                if len(pair) != 2:
                    raise TraceError(line, f"uniforms[{i}]", f"must hold 2 numbers, got "
                                     f"{len(pair)}")
                pairs.append([math.nan if v is None else
                              float(_reals([v], line, f"uniforms[{i}]", 1)[0]) for v in pair])
            else:
                pairs.append(list(_reals(pair, line, f"uniforms[{i}]", 2)))
        uniforms = np.array(pairs, dtype=np.float64).reshape(len(value), 2).astype(np.float32)
        # In float32 as verify_tokenwise reads them: 0.99999999 rounds to 1.
        recorded = uniforms[~np.isnan(uniforms)]
        if not ((recorded >= 0) & (recorded < 1)).all():
            raise TraceError(line, "uniforms", "must lie in [0, 1) (as float32)")
        return uniforms

    def _cache(
        self, value: object, line: int, state: _RunState, k: int
    ) -> tuple[dict[str, int], dict[str, str]]:
        """The offsets (with `target_fed`, k + 1 by default) and the two rewind timings."""
        if not isinstance(value, dict):
            raise TraceError(line, "cache", "must be an object of offsets")
        keys = _CACHE_KEYS if self.version == 1 else _CACHE_KEYS_V2
        unknown = sorted(set(value) - set(keys))
        if unknown:
            raise TraceError(line, f"cache.{unknown[0]}", f"is not one of {keys}")
        if "target_before" not in value:
            raise TraceError(line, "cache.target_before", "is missing")
        if state.run.prompt_length is None:
            where = "the header" if self.version == 1 else f"run {state.run.id!r}'s record"
            raise TraceError(line, "cache", f"needs 'prompt' or 'prompt_length' in {where}")
        if ("draft_before" in value) != ("draft_fed" in value):
            raise TraceError(line, "cache.draft_fed", "comes with draft_before, and only with it")
        offsets, rewinds = {"target_fed": k + 1}, {"target_rewind": "eager",
                                                   "draft_rewind": "eager"}
        for key, offset in value.items():
            if key in rewinds:
                if offset not in REWIND_TIMINGS:
                    raise TraceError(line, f"cache.{key}", f"must be 'eager' or 'lazy', got "
                                     f"{_brief(offset)}")
                rewinds[key] = offset
                continue
            low = 1 if key == "target_fed" else 0
            if not _is_int(offset) or offset < low:
                raise TraceError(line, f"cache.{key}", f"must be an int >= {low}, got "
                                 f"{_brief(offset)}")
            offsets[key] = offset
        return offsets, rewinds


def _lines(path: str | Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes, complete) for each line; a gzip stream cut short ends the file.

    Lines are split on bytes and decoded one by one by the reader, so that a byte that is
    not UTF-8 is blamed on its own line, not on the buffer that held it.
    """
    opened: Any = gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")  # noqa: SIM115
    with opened:
        number = 0
        try:
            for raw in opened:
                number += 1
                yield number, raw, raw.endswith(b"\n")
        except (EOFError, gzip.BadGzipFile, zlib.error) as error:
            if number == 0:
                raise TraceError(1, "record", f"is not a gzip stream, though the file name "
                                 f"ends in .gz ({error})") from None
            yield number + 1, b"", False


def _parse(text: str) -> object:
    """One line's JSON value; raises ValueError with a one-line reason.

    NaN and Infinity, which Python writes and reads, parse here, to be refused by the field
    that holds them (every number must be finite; `_extra` walks the one field no check
    reads).
    """
    # The line's terminator is not its content: parsed with it, a line cut inside a string
    # reads as holding a control character, and a column past the end as column 1 of a
    # line 2 that the file does not have.
    body = text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
    try:
        return json.loads(body)
    except json.JSONDecodeError as error:
        # No newline is left in `body`: its position is the column on the file's line.
        raise ValueError(f"{error.msg.removesuffix(' at')} at column {error.pos + 1}") from None
    except RecursionError:
        raise ValueError("nests arrays or objects deeper than the parser's limit") from None
    except ValueError as error:  # an integer beyond Python's digit limit
        raise ValueError(str(error).split("; ")[0]) from None


class TraceStream:
    """A trace read one record at a time: iterate it for its rounds, each validated as it
    is read and forgotten by the reader once yielded, so memory holds one round's rows.

    The header is read on construction (`header`, `vocab_size`, `version`); `runs` fills
    as run records are read; `truncated` is set when a cut last line ends the iteration.

    A *piece* of the trace (`first_line`, `last_line`: 1-based, inclusive) yields only the
    rounds on those lines. The lines before it are scanned for run records alone (and, for a
    run whose sampler reads the history, for the tokens its rounds emitted); a run already
    under way enters the piece at whatever round and position its first line there says,
    and `entries` keeps that (round, position) so that `merge` can check the pieces join.

    Raises:
        TraceError: on iteration, the first malformed line, naming its number and field.
        OSError: the file cannot be read.
    """

    def __init__(
        self, path: str | Path, first_line: int = 2, last_line: int | None = None,
    ) -> None:
        self.path = str(path)
        self.first_line = max(2, first_line)
        self.last_line = last_line
        self.truncated: str | None = None
        self.rounds_read = 0
        self.entries: dict[str, tuple[int, int, int]] = {}
        """The line, round and position of the first round of each run under way before the
        piece."""
        self._lines = _lookahead(_lines(path))
        header = self._header()
        self._reader = _Reader(header)
        self.header = header
        self.vocab_size = self._reader.vocab
        self.version = self._reader.version

    @property
    def runs(self) -> dict[str, Run]:
        """Every run opened so far, by id, in the order they were opened."""
        return self._reader.trace.runs

    def history_before(self, round_: Round | TreeRound) -> list[int]:
        """The run's prompt and emitted tokens before `round_`, the round just yielded."""
        history = self._reader.open[round_.run.id].history
        return history[: len(history) - len(round_.emitted)]

    def exits(self) -> dict[str, tuple[int, int, int | None]]:
        """Per run with a round in the piece: (next round, tokens emitted, last batch step)."""
        return {run_id: (state.rounds, state.position, state.batch_step)
                for run_id, state in self._reader.open.items() if state.touched}

    def _header(self) -> dict[str, Any]:
        for number, raw, _complete, _ in self._lines:
            try:
                record = _parse(_decode(raw, number))
            except ValueError as error:
                raise TraceError(number, "record", f"is not valid JSON: {error}") from None
            if not isinstance(record, dict):
                raise TraceError(number, "header", "must be a JSON object")
            return record
        raise TraceError(1, "header", "the trace is empty")

    def _skip(self, raw: bytes, number: int) -> None:
        """A line before the piece: open its run, or extend a history-reading run's history."""
        reader = self._reader
        history_runs = [state for state in reader.open.values() if state.reads_history]
        if b'"record"' not in raw and not history_runs:
            return
        try:
            record = _parse(_decode(raw, number))
        except ValueError as error:
            raise TraceError(number, "record", f"is not valid JSON: {error}") from None
        if not isinstance(record, dict):
            raise TraceError(number, "record", f"must be a JSON object, got "
                             f"{type(record).__name__}")
        if record.get("record") == "run":
            reader.run_record(record, number)
            return
        state = reader.open.get(record.get("run", "") if reader.version == 2 else "")
        if state is not None and state.reads_history:
            state.history += _tokens(record, "emitted", number, reader.vocab)

    def __iter__(self) -> Iterator[Round | TreeRound]:
        reader = self._reader
        for number, raw, _complete, last in self._lines:
            if number < self.first_line:
                self._skip(raw, number)
                continue
            if self.last_line is not None and number > self.last_line:
                return
            # The last line with content, after a round: a writer stopped mid-line there,
            # whether or not a newline was added after it (an editor, `echo >>`, a log
            # shipper); anywhere else, a line that is not JSON is a defect.
            cut = last and self.rounds_read > 0
            try:
                record = _parse(_decode(raw, number, cut))
            except ValueError as error:
                if cut:
                    self.truncated = (
                        f"line {number} is an incomplete JSON record ({error}); "
                        f"the {self.rounds_read} rounds before it were checked"
                    )
                    return
                if isinstance(error, TraceError):
                    raise
                raise TraceError(number, "record", f"is not valid JSON: {error}") from None
            if number == self.first_line and self.first_line > 2:
                reader.resume_all()
            item = reader.record(record, number)
            if isinstance(item, Run):
                continue
            if item.run.id in reader.resumed:
                self.entries[item.run.id] = reader.resumed.pop(item.run.id)
            self.rounds_read += 1
            yield item
        if self.rounds_read == 0 and self.first_line == 2 and self.last_line is None:
            raise TraceError(2, "round", "the trace has a header and no round: nothing to check")


def _decode(raw: bytes, number: int, cut: bool = False) -> str:
    """A line's text; a line cut inside a multi-byte character keeps what precedes it."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        if cut:  # a writer stopped inside a multi-byte character
            return raw[:error.start].decode("utf-8")
        raise TraceError(number, "record", f"is not UTF-8: byte 0x{raw[error.start]:02x} "
                         f"at column {error.start + 1}") from None


def _lookahead(
    lines: Iterator[tuple[int, bytes, bool]],
) -> Iterator[tuple[int, bytes, bool, bool]]:
    """(number, bytes, complete, last): `last` marks the final line with content, and the
    blank lines that end a file are dropped (a blank line before content is kept, to be
    refused)."""
    blanks: list[tuple[int, bytes, bool]] = []
    previous: tuple[int, bytes, bool] | None = None
    for line in lines:
        if line[1].strip() == b"" and line[2]:
            blanks.append(line)
            continue
        if previous is not None:
            yield (*previous, False)
        for blank in blanks:
            yield (*blank, False)
        blanks = []
        previous = line
    if previous is not None:
        yield (*previous, True)


def read_trace(path: str | Path) -> Trace:
    """Read and validate a whole trace (``.jsonl``, or ``.jsonl.gz`` compressed) into memory.

    For long traces, `TraceStream` reads one round at a time (what `conform` does).
    A last line that is not a complete JSON document (a writer stopped mid-line, with or
    without a newline after it) is reported in `Trace.truncated` and the rounds before it
    are kept; any other defect raises.

    Raises:
        TraceError: the first malformed line, naming its number and field.
        OSError: the file cannot be read.
    """
    stream = TraceStream(path)
    trace = Trace(header=stream.header, vocab_size=stream.vocab_size, version=stream.version)
    for item in stream:
        if isinstance(item, TreeRound):
            trace.tree_rounds.append(item)
        else:
            trace.rounds.append(item)
    trace.runs = dict(stream.runs)
    trace.truncated = stream.truncated
    return trace


# --- tree rounds (version 2) -----------------------------------------------------------------
# A tree speculation round: its drafts form a tree and `verify_tree` keeps one root path. Its
# own record kind, so that chain rounds, and everything read from them, are untouched.

TREE_ROUND_RECORD = "tree-round"
"""The ``record`` value of a tree round."""
TREE_SCHEMES = ("iid", "without-replacement", "deterministic")
"""The scheme ids of a tree round, `TreeScheme`'s values."""
_TREE_KEYS = frozenset({
    "record", "run", "round", "position", "scheme", "parents", "node_tokens", "target", "draft",
    "path", "emitted", "uniforms", "cache", "stopped", "extra",
})
_TREE_CACHE_KEYS = ("target_before", "target_after", "draft_before", "draft_fed", "draft_after")


@dataclass(frozen=True)
class TreeRound:
    """One validated tree round; rows are float32 probabilities.

    Rows are indexed as `verify_tree` indexes them: row 0 is the root (the round's context),
    row i + 1 is node i.
    """

    index: int
    """The round's number in its run, counted with the run's chain rounds, from 0."""
    line: int
    position: int
    """Tokens the run emitted before the round."""
    scheme: str
    """How siblings were drafted, one of `TREE_SCHEMES`."""
    parents: tuple[int, ...]
    """Node i's parent, -1 for the root; parents come before their children."""
    node_tokens: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    """Each row's children in index order."""
    depths: tuple[int, ...]
    """Each row's depth (0 the root)."""
    target_rows: np.ndarray
    """`[N+1, V]` float32: the target's law at each row."""
    draft_rows: np.ndarray | None
    """`[N+1, V]` float32: the law row v's children were drafted from (zero at a leaf);
    None when not recorded (allowed under the deterministic scheme only)."""
    path: tuple[int, ...]
    """The accepted nodes from the root down."""
    emitted: tuple[int, ...]
    """The path's tokens and the token after it, or a non-empty prefix of that when stopped."""
    accept_uniforms: np.ndarray | None
    """`[N]` float32, node i's accept test; None when not recorded."""
    sample_uniforms: np.ndarray | None
    """`[D+1]` float32, the draw after a path of length d; None when not recorded."""
    cache: dict[str, int] | None
    stopped: bool
    run: Run

    @property
    def depth(self) -> int:
        """D, the tree's depth."""
        return max(self.depths)

    @property
    def path_rows(self) -> tuple[int, ...]:
        """The root's row, then each accepted node's row (the rows that decided a token)."""
        return (0, *(node + 1 for node in self.path))

    @property
    def next_token(self) -> int | None:
        """The token after the path; None when the emission was cut before it."""
        return self.emitted[len(self.path)] if len(self.emitted) > len(self.path) else None


def _tree_parents(record: Mapping[str, Any], line: int) -> tuple[list[int], list[list[int]],
                                                                 list[int]]:
    """(parents, each row's children, each row's depth), validated as `tree_shape` does."""
    parents = record.get("parents")
    if not isinstance(parents, list) or not parents:
        raise TraceError(line, "parents", f"must be a non-empty list of ints, got "
                         f"{_brief(parents)}")
    if len(parents) > MAX_TREE_NODES:
        raise TraceError(line, "parents", f"must name at most {MAX_TREE_NODES} nodes "
                         f"(MAX_TREE_NODES), got {len(parents)}")
    children: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    depths = [0]
    for i, parent in enumerate(parents):
        if not _is_int(parent) or not -1 <= parent < i:
            raise TraceError(line, f"parents[{i}]", f"must be -1 (the root) or an earlier node "
                             f"in [0, {i}), got {_brief(parent)}")
        children[parent + 1].append(i)
        depths.append(depths[parent + 1] + 1)
    return list(parents), children, depths


def _tree_uniforms(value: object, line: int, size: int, depth: int) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    if not isinstance(value, dict) or set(value) != {"accept", "sample"}:
        raise TraceError(line, "uniforms", "must be an object of two fields, 'accept' ([N]) and "
                         f"'sample' ([D+1]), got {_brief(value)}")
    out = []
    for key, length in (("accept", size), ("sample", depth + 1)):
        values = _reals(value[key], line, f"uniforms.{key}", length).astype(np.float32)
        if not ((values >= 0) & (values < 1)).all():
            i = int(np.flatnonzero(~((values >= 0) & (values < 1)))[0])
            raise TraceError(line, f"uniforms.{key}[{i}]", f"must lie in [0, 1) (as float32), "
                             f"got {value[key][i]!r}")
        out.append(values)
    return out[0], out[1]


def _tree_round(reader: _Reader, record: dict[str, Any], line: int) -> TreeRound:
    """Validate a ``tree-round`` record (spec/trace_format.md, "Tree rounds")."""
    unknown = sorted(set(record) - _TREE_KEYS)
    if unknown:
        raise TraceError(line, unknown[0], f"is not a tree round field ({sorted(_TREE_KEYS)})")
    run_id = record.get("run")
    if not isinstance(run_id, str) or run_id not in reader.open:
        raise TraceError(line, "run", f"must name a run an earlier line opened, got "
                         f"{_brief(run_id)}")
    _extra(record, line)
    state, vocab = reader.open[run_id], reader.vocab
    reader.enter(record, line, state)
    state.touched = True
    if _int(record, "round", line) != state.rounds:
        raise TraceError(line, "round", f"must be {state.rounds} (rounds of run {run_id!r} are "
                         "numbered from 0 in order, chain and tree rounds together)")
    position = _int(record, "position", line)
    if position != state.position:
        raise TraceError(line, "position", f"is {position}, but the previous rounds of run "
                         f"{run_id!r} emitted {state.position} tokens")
    scheme = record.get("scheme")
    if scheme not in TREE_SCHEMES:
        raise TraceError(line, "scheme", f"must be one of {TREE_SCHEMES}, got {_brief(scheme)}")
    parents, children, depths = _tree_parents(record, line)
    size, depth = len(parents), max(depths)
    tokens = _tokens(record, "node_tokens", line, vocab)
    if len(tokens) != size:
        raise TraceError(line, "node_tokens", f"must hold one token per node ({size}), got "
                         f"{len(tokens)}")
    if scheme != "iid":
        for row, kids in enumerate(children):
            siblings = [tokens[c] for c in kids]
            if len(set(siblings)) != len(siblings):
                raise TraceError(line, "node_tokens", f"the children {kids} of row {row} repeat "
                                 f"a token ({siblings}); the {scheme} scheme drafts distinct "
                                 "siblings")
    path = record.get("path")
    if not isinstance(path, list):
        raise TraceError(line, "path", f"must be the accepted nodes from the root down (a list "
                         f"of node ids), got {_brief(path)}")
    row = 0
    for d, node in enumerate(path):
        if not _is_int(node) or not 0 <= node < size:
            raise TraceError(line, f"path[{d}]", f"must be a node id in [0, {size}), got "
                             f"{_brief(node)}")
        if node not in children[row]:
            raise TraceError(line, f"path[{d}]", f"node {node} is not a child of "
                             f"{'the root' if row == 0 else f'node {row - 1}'}")
        row = node + 1
    stopped = record.get("stopped", False)
    if not isinstance(stopped, bool):
        raise TraceError(line, "stopped", f"must be a bool, got {stopped!r}")
    emitted = _tokens(record, "emitted", line, vocab)
    path_tokens = [tokens[node] for node in path]
    full = len(path) + 1
    if not (len(emitted) == full or (stopped and 1 <= len(emitted) <= full)):
        raise TraceError(line, "emitted", f"must hold the {len(path)} path tokens and the next "
                         f"token ({full}){', or a prefix of them' if stopped else ''}, got "
                         f"{len(emitted)}")
    if emitted[: len(path)] != path_tokens[: len(emitted)]:
        raise TraceError(line, "emitted", f"must start with the path's tokens {path_tokens}, "
                         f"got {emitted}")
    if "target" not in record:
        raise TraceError(line, "target", "is missing: a tree round needs the target's rows")
    kind, rows = _row_block(record["target"], vocab, line, "target", (size + 1, size + 1),
                            f"a tree of {size} nodes (the root and one row per node)")
    target = _tree_probabilities(reader, kind, rows, state, line, "target")
    inner = [r for r, kids in enumerate(children) if kids]
    draft = None
    if record.get("draft") is not None:
        kind, rows = _row_block(record["draft"], vocab, line, "draft", (len(inner), len(inner)),
                                f"a tree with {len(inner)} rows that have children")
        draft = np.zeros((size + 1, vocab), dtype=np.float32)
        draft[inner] = _tree_probabilities(reader, kind, rows, state, line, "draft")
    elif scheme != "deterministic":
        raise TraceError(line, "draft", f"is missing: the {scheme} scheme's proposals are the "
                         "drafter's law at each row with children")
    accept_u = sample_u = None
    if record.get("uniforms") is not None:
        accept_u, sample_u = _tree_uniforms(record["uniforms"], line, size, depth)
    cache = None
    if record.get("cache") is not None:
        cache = _tree_cache(record["cache"], line, state)
    state.history += emitted
    state.position += len(emitted)
    state.rounds += 1
    return TreeRound(
        index=state.rounds - 1, line=line, position=position, scheme=scheme,
        parents=tuple(parents), node_tokens=tuple(tokens),
        children=tuple(tuple(kids) for kids in children), depths=tuple(depths),
        target_rows=target, draft_rows=draft, path=tuple(path), emitted=tuple(emitted),
        accept_uniforms=accept_u, sample_uniforms=sample_u, cache=cache, stopped=stopped,
        run=state.run,
    )


def _tree_probabilities(
    reader: _Reader, kind: str, rows: np.ndarray, state: _RunState, line: int, name: str,
) -> np.ndarray:
    """Probabilities as given, or rebuilt from logits with the run's sampler; a sampler that
    reads the history is refused, since a node's history is its path, not the run's."""
    config = state.run.target_sampler if name == "target" else state.run.draft_sampler
    if kind == "logits" and config is not None and config.uses_history:
        raise TraceError(line, name, "holds logits for a sampler that reads the history: a "
                         "tree round records its rows as probabilities then")
    return reader._probabilities(kind, rows, state, [], line, name)


def _tree_cache(value: object, line: int, state: _RunState) -> dict[str, int]:
    if not isinstance(value, dict):
        raise TraceError(line, "cache", "must be an object of offsets")
    unknown = sorted(set(value) - set(_TREE_CACHE_KEYS))
    if unknown:
        raise TraceError(line, f"cache.{unknown[0]}", f"is not one of {_TREE_CACHE_KEYS}")
    if "target_before" not in value:
        raise TraceError(line, "cache.target_before", "is missing")
    if state.run.prompt_length is None:
        raise TraceError(line, "cache", f"needs 'prompt' or 'prompt_length' in run "
                         f"{state.run.id!r}'s record")
    if ("draft_before" in value) != ("draft_fed" in value):
        raise TraceError(line, "cache.draft_fed", "comes with draft_before, and only with it")
    for key, offset in value.items():
        if not _is_int(offset) or offset < 0:
            raise TraceError(line, f"cache.{key}", f"must be an int >= 0, got {_brief(offset)}")
    return dict(value)
