"""The conformance trace: one JSON header line, then one JSON record per round.

`read_trace` parses and validates a trace into `Trace` (rows rebuilt as float32
probabilities), raising `TraceError` naming the line and field of the first defect;
`TraceWriter` writes one. The format is specified in ``spec/trace_format.md`` and
``spec/trace_format.schema.json``.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import mlx.core as mx
import numpy as np

from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.sampling import SamplerConfig, effective_token_distribution

__all__ = [
    "PROBABILITY_SUM_TOLERANCE",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "Round",
    "Trace",
    "TraceError",
    "TraceWriter",
    "encode_rows",
    "read_trace",
    "sampler_from_json",
    "sampler_to_json",
    "trace_size",
]

TRACE_FORMAT = "specaccept-trace"
TRACE_VERSION = 1
PROBABILITY_SUM_TOLERANCE = 1e-3
"""A probability row is accepted when its float64 sum lies within this of 1."""

_ROW_KEYS = ("probs", "logits", "probs_b64", "logits_b64", "sparse_probs")
_DTYPES = ("float32", "float16", "bfloat16")
_ROUND_KEYS = frozenset({
    "round", "position", "rule", "draft_tokens", "emitted", "target", "draft", "num_accepted",
    "uniforms", "cache", "stopped",
})
_CACHE_KEYS = ("target_before", "target_after", "draft_before", "draft_fed", "draft_after")


class TraceError(ValueError):
    """A malformed trace; the message names the line (1-based) and the field."""

    def __init__(self, line: int, field_name: str, message: str) -> None:
        super().__init__(f"trace line {line}, field {field_name!r}: {message}")
        self.line = line
        self.field = field_name


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
    """`[k+1, 2]` float32 in [0, 1), as `verify_block` reads them; None when not recorded."""
    cache: dict[str, int] | None
    """Cache offsets (`target_before`, ...); None when not recorded."""
    stopped: bool
    """True when the engine cut the round's emission (end of sequence, token budget)."""
    target_logits: np.ndarray | None = None
    """`[m, V]` float32 target logits when the trace stored logits, else None."""

    @property
    def k(self) -> int:
        """The number of drafts."""
        return len(self.draft_tokens)


@dataclass
class Trace:
    """A parsed trace: the header, the valid rounds, and whether the file was cut short."""

    header: dict[str, Any]
    vocab_size: int
    rounds: list[Round] = field(default_factory=list)
    target_sampler: SamplerConfig | None = None
    draft_sampler: SamplerConfig | None = None
    prompt: list[int] | None = None
    truncated: str | None = None
    """Why reading stopped before the end of the file; None when it read to the end."""

    @property
    def prompt_length(self) -> int | None:
        """Tokens in the prompt, from ``prompt`` or ``prompt_length``."""
        if self.prompt is not None:
            return len(self.prompt)
        value = self.header.get("prompt_length")
        return value if isinstance(value, int) else None


def sampler_to_json(config: SamplerConfig) -> dict[str, Any]:
    """A `SamplerConfig` as the trace's sampler object (fields by name)."""
    out = dataclasses.asdict(config)
    out["dry_sequence_breakers"] = list(config.dry_sequence_breakers)
    out["logit_bias"] = {str(k): v for k, v in config.logit_bias.items()}
    return out


def sampler_from_json(value: object, line: int, name: str) -> SamplerConfig:
    """Parse a sampler object, raising `TraceError` on unknown fields or bad values."""
    if not isinstance(value, dict):
        raise TraceError(line, name, f"must be an object of SamplerConfig fields, got {value!r}")
    known = {f.name for f in dataclasses.fields(SamplerConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise TraceError(line, f"{name}.{unknown[0]}", f"is not a SamplerConfig field ({known})")
    arguments = dict(value)
    if "dry_sequence_breakers" in arguments:
        arguments["dry_sequence_breakers"] = tuple(arguments["dry_sequence_breakers"])
    if "logit_bias" in arguments:
        bias = arguments["logit_bias"]
        if not isinstance(bias, dict):
            raise TraceError(line, f"{name}.logit_bias", f"must be an object, got {bias!r}")
        try:
            arguments["logit_bias"] = {int(k): v for k, v in bias.items()}
        except ValueError as error:
            raise TraceError(
                line, f"{name}.logit_bias", f"keys must be token ids: {error}"
            ) from None
    try:
        return SamplerConfig(**arguments)
    except (TypeError, ValueError) as error:
        raise TraceError(line, name, str(error)) from None


def encode_rows(
    rows: np.ndarray | Sequence[Sequence[float]], *, kind: str = "probs", encoding: str = "json",
    dtype: str = "float32",
) -> dict[str, Any]:
    """Encode `[m, V]` rows as a trace row block.

    Args:
        rows: the rows.
        kind: "probs" or "logits".
        encoding: "json" (a list of numbers per row), "b64" (little-endian `dtype`
            bytes, row-major, base64) or "sparse" (probabilities only: the nonzero
            entries of each row, exact only because every omitted entry is zero).
        dtype: the b64 element type, "float32", "float16" or "bfloat16".
    """
    array = np.asarray(rows, dtype=np.float32)
    if kind not in ("probs", "logits"):
        raise ValueError(f"kind must be 'probs' or 'logits', got {kind!r}")
    if encoding == "json":
        return {kind: array.tolist()}
    if encoding == "b64":
        if dtype == "float32":
            raw = array.astype("<f4").tobytes()
        elif dtype == "float16":
            raw = array.astype("<f2").tobytes()
        elif dtype == "bfloat16":
            bits = array.astype("<f4").view("<u4")
            # Round to nearest even, as a bfloat16 cast does.
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            raw = rounded.astype("<u2").tobytes()
        else:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {dtype!r}")
        block: dict[str, Any] = {f"{kind}_b64": base64.b64encode(raw).decode("ascii")}
        block["rows"] = int(array.shape[0])
        if dtype != "float32":
            block["dtype"] = dtype
        return block
    if encoding == "sparse":
        if kind != "probs":
            raise ValueError("the sparse encoding holds probabilities only")
        return {"sparse_probs": [
            {"ids": np.flatnonzero(row).tolist(), "values": row[row != 0].tolist()}
            for row in array
        ]}
    raise ValueError(f"encoding must be 'json', 'b64' or 'sparse', got {encoding!r}")


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
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise TraceError(line, name, "must hold numbers only") from None


def _sparse(value: object, vocab: int, line: int, name: str) -> np.ndarray:
    if not isinstance(value, list) or not value:
        raise TraceError(line, name, "must be a non-empty list of {ids, values} objects")
    out = np.zeros((len(value), vocab), dtype=np.float32)
    for i, row in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(row, dict) or set(row) != {"ids", "values"}:
            raise TraceError(line, where, "must be an object with exactly 'ids' and 'values'")
        ids, values = row["ids"], row["values"]
        if not isinstance(ids, list) or not isinstance(values, list) or len(ids) != len(values):
            raise TraceError(line, where, "ids and values must be lists of the same length")
        for token in ids:
            if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < vocab:
                raise TraceError(line, f"{where}.ids", f"token id {token!r} outside [0, {vocab})")
        if len(set(ids)) != len(ids):
            raise TraceError(line, f"{where}.ids", "repeats a token id")
        try:
            out[i, ids] = np.asarray(values, dtype=np.float32)
        except (TypeError, ValueError):
            raise TraceError(line, f"{where}.values", "must hold numbers only") from None
    return out


def _row_block(value: object, vocab: int, line: int, name: str) -> tuple[str, np.ndarray]:
    """Decode a row block: ("probs" or "logits", `[m, V]` float32)."""
    if not isinstance(value, dict):
        raise TraceError(line, name, f"must be an object with one of {_ROW_KEYS}")
    present = [key for key in _ROW_KEYS if key in value]
    if len(present) != 1:
        raise TraceError(line, name, f"must hold exactly one of {_ROW_KEYS}, got {sorted(value)}")
    key = present[0]
    where = f"{name}.{key}"
    if key in ("probs", "logits"):
        rows = _dense(value[key], vocab, line, where)
    elif key == "sparse_probs":
        rows = _sparse(value[key], vocab, line, where)
    else:
        dtype = value.get("dtype", "float32")
        if dtype not in _DTYPES:
            raise TraceError(line, f"{name}.dtype", f"must be one of {_DTYPES}, got {dtype!r}")
        count = value.get("rows")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise TraceError(line, f"{name}.rows", f"must be an int >= 1, got {count!r}")
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


def _int(record: Mapping[str, Any], key: str, line: int, *, low: int = 0) -> int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise TraceError(line, key, f"must be an int >= {low}, got {value!r}")
    return value


def _tokens(record: Mapping[str, Any], key: str, line: int, vocab: int) -> list[int]:
    value = record.get(key)
    if not isinstance(value, list):
        raise TraceError(line, key, f"must be a list of token ids, got {value!r}")
    for i, token in enumerate(value):
        if isinstance(token, bool) or not isinstance(token, int):
            raise TraceError(line, f"{key}[{i}]", f"must be an int token id, got {token!r}")
        if not 0 <= token < vocab:
            raise TraceError(line, f"{key}[{i}]", f"token id {token} outside [0, {vocab})")
    return list(value)


def _rule(value: object, line: int) -> AcceptanceRule | str:
    if not isinstance(value, str) or not value:
        raise TraceError(line, "rule", f"must be a rule id string, got {value!r}")
    try:
        return AcceptanceRule(value)
    except ValueError:
        return value


class _Reader:
    """Validates records in order, keeping the history the rows were computed after."""

    def __init__(self, header: dict[str, Any]) -> None:
        line = 1
        if header.get("format") != TRACE_FORMAT:
            raise TraceError(
                line, "format", f"must be {TRACE_FORMAT!r}, got {header.get('format')!r}"
            )
        if header.get("version") != TRACE_VERSION:
            raise TraceError(
                line, "version",
                f"must be {TRACE_VERSION} (this reader's), got {header.get('version')!r}",
            )
        self.vocab = _int(header, "vocab_size", line, low=1)
        self.trace = Trace(header=header, vocab_size=self.vocab)
        if "prompt" in header:
            self.trace.prompt = _tokens(header, "prompt", line, self.vocab)
        if "prompt_length" in header:
            length = _int(header, "prompt_length", line, low=1)
            if self.trace.prompt is not None and length != len(self.trace.prompt):
                raise TraceError(
                    line, "prompt_length",
                    f"is {length} but prompt has {len(self.trace.prompt)} tokens",
                )
        for role in ("target_sampler", "draft_sampler"):
            if role in header:
                setattr(self.trace, role, sampler_from_json(header[role], line, role))
        self.history: list[int] = list(self.trace.prompt or [])
        self.position = 0

    def _probabilities(
        self, kind: str, rows: np.ndarray, config: SamplerConfig | None, drafts: list[int],
        line: int, name: str,
    ) -> np.ndarray:
        if kind == "probs":
            return rows
        if config is None:
            raise TraceError(line, name, f"holds logits, so the header needs '{name}_sampler'")
        if config.uses_history and self.trace.prompt is None:
            raise TraceError(
                line, name, "holds logits for a sampler that reads the history: the header "
                "needs 'prompt'",
            )
        logits = mx.array(rows)
        if not config.uses_history:
            probs = effective_token_distribution(logits, config)
        else:
            probs = mx.stack([
                effective_token_distribution(
                    logits[i], config, mx.array([*self.history, *drafts[:i]], dtype=mx.int32)
                )
                for i in range(rows.shape[0])
            ])
        return np.array(probs, dtype=np.float32)

    def round(self, record: object, line: int) -> Round:
        if not isinstance(record, dict):
            raise TraceError(line, "record", f"must be a JSON object, got {type(record).__name__}")
        unknown = sorted(set(record) - _ROUND_KEYS)
        if unknown:
            raise TraceError(line, unknown[0], f"is not a round field ({sorted(_ROUND_KEYS)})")
        index = len(self.trace.rounds)
        if _int(record, "round", line) != index:
            raise TraceError(
                line, "round", f"must be {index} (rounds are numbered from 0 in order)"
            )
        position = _int(record, "position", line)
        if position != self.position:
            raise TraceError(
                line, "position",
                f"is {position}, but the previous rounds emitted {self.position} tokens",
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
        if "target" not in record:
            raise TraceError(line, "target", "is missing: every round needs the target's rows")
        kind, rows = _row_block(record["target"], self.vocab, line, "target")
        if not len(emitted) <= rows.shape[0] <= k + 1:
            raise TraceError(
                line, "target",
                f"has {rows.shape[0]} rows; a round with {k} drafts emitting {len(emitted)} "
                f"tokens needs {len(emitted)} to {k + 1}",
            )
        target_logits = rows if kind == "logits" else None
        target = self._probabilities(kind, rows, self.trace.target_sampler, drafts, line, "target")
        draft = None
        if record.get("draft") is not None:
            draft_kind, draft_rows = _row_block(record["draft"], self.vocab, line, "draft")
            needed = min(len(emitted), k)
            if not needed <= draft_rows.shape[0] <= k:
                raise TraceError(
                    line, "draft",
                    f"has {draft_rows.shape[0]} rows; {k} drafts with {len(emitted)} tokens "
                    f"emitted need {needed} to {k}",
                )
            draft = self._probabilities(
                draft_kind, draft_rows, self.trace.draft_sampler, drafts, line, "draft"
            )
        uniforms = None
        if record.get("uniforms") is not None:
            try:
                uniforms = np.asarray(record["uniforms"], dtype=np.float32)
            except (TypeError, ValueError):
                raise TraceError(line, "uniforms", "must be [k+1, 2] numbers") from None
            if uniforms.shape != (k + 1, 2):
                raise TraceError(
                    line, "uniforms", f"must be [k+1, 2] = [{k + 1}, 2], got {list(uniforms.shape)}"
                )
            if not ((uniforms >= 0) & (uniforms < 1)).all():
                raise TraceError(line, "uniforms", "must lie in [0, 1)")
        cache = None
        if record.get("cache") is not None:
            cache = self._cache(record["cache"], line)
        self.history += emitted
        self.position += len(emitted)
        return Round(
            index=index, line=line, position=position, rule=rule, draft_tokens=drafts,
            emitted=emitted, num_accepted=accepted, target_rows=target, draft_rows=draft,
            uniforms=uniforms, cache=cache, stopped=stopped, target_logits=target_logits,
        )

    def _cache(self, value: object, line: int) -> dict[str, int]:
        if not isinstance(value, dict):
            raise TraceError(line, "cache", "must be an object of offsets")
        unknown = sorted(set(value) - set(_CACHE_KEYS))
        if unknown:
            raise TraceError(line, f"cache.{unknown[0]}", f"is not one of {_CACHE_KEYS}")
        if "target_before" not in value:
            raise TraceError(line, "cache.target_before", "is missing")
        if self.trace.prompt_length is None:
            raise TraceError(line, "cache", "needs 'prompt' or 'prompt_length' in the header")
        if ("draft_before" in value) != ("draft_fed" in value):
            raise TraceError(line, "cache.draft_fed", "comes with draft_before, and only with it")
        out = {}
        for key, offset in value.items():
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise TraceError(line, f"cache.{key}", f"must be an int >= 0, got {offset!r}")
            out[key] = offset
        return out


def _lines(path: str | Path) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, complete) for each line; a gzip stream cut short ends the file."""
    opened: Any = gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")  # noqa: SIM115
    with opened, io.TextIOWrapper(opened, encoding="utf-8", newline="\n") as text:
        number = 0
        try:
            for raw in text:
                number += 1
                yield number, raw, raw.endswith("\n")
        except (EOFError, gzip.BadGzipFile, UnicodeDecodeError):
            yield number + 1, "", False


def read_trace(path: str | Path) -> Trace:
    """Read and validate a trace (``.jsonl``, or ``.jsonl.gz`` compressed).

    A last line that is not a complete JSON document (a writer stopped mid-line) is
    reported in `Trace.truncated` and the rounds before it are kept; any other defect
    raises.

    Raises:
        TraceError: the first malformed line, naming its number and field.
        OSError: the file cannot be read.
    """
    lines = list(_lines(path))
    while lines and lines[-1][1].strip() == "" and lines[-1][2]:
        lines.pop()
    if not lines:
        raise TraceError(1, "header", "the trace is empty")
    reader: _Reader | None = None
    for number, text, complete in lines:
        last = number == lines[-1][0]
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            if last and reader is not None and reader.trace.rounds and (
                not complete or not text.strip()
            ):
                reader.trace.truncated = (
                    f"line {number} is an incomplete JSON record ({error.msg}); "
                    f"the {len(reader.trace.rounds)} rounds before it were checked"
                )
                return reader.trace
            raise TraceError(
                number, "record", f"is not valid JSON: {error.msg} at column {error.colno}"
            ) from None
        if reader is None:
            if not isinstance(record, dict):
                raise TraceError(number, "header", "must be a JSON object")
            reader = _Reader(record)
            continue
        reader.trace.rounds.append(reader.round(record, number))
    assert reader is not None
    if not reader.trace.rounds:
        raise TraceError(2, "round", "the trace has a header and no round: nothing to check")
    return reader.trace


class TraceWriter:
    """Write a trace, one line per round, flushed so a crash leaves a valid prefix."""

    def __init__(
        self, stream: IO[str], *, vocab_size: int, engine: str = "",
        prompt: Sequence[int] | None = None,
        target_sampler: SamplerConfig | None = None, draft_sampler: SamplerConfig | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        header: dict[str, Any] = {"format": TRACE_FORMAT, "version": TRACE_VERSION,
                                  "vocab_size": vocab_size}
        if engine:
            header["engine"] = engine
        if prompt is not None:
            header["prompt"] = list(prompt)
        if target_sampler is not None:
            header["target_sampler"] = sampler_to_json(target_sampler)
        if draft_sampler is not None:
            header["draft_sampler"] = sampler_to_json(draft_sampler)
        header.update(extra or {})
        self.stream = stream
        self.rounds = 0
        self.position = 0
        self._write(header)

    def _write(self, record: Mapping[str, Any]) -> None:
        self.stream.write(json.dumps(record, separators=(",", ":")) + "\n")
        self.stream.flush()

    def write_round(
        self, *, rule: AcceptanceRule | str, draft_tokens: Iterable[int], emitted: Iterable[int],
        target: Mapping[str, Any], draft: Mapping[str, Any] | None = None,
        num_accepted: int | None = None, uniforms: Sequence[Sequence[float]] | None = None,
        cache: Mapping[str, int] | None = None, stopped: bool = False,
    ) -> None:
        """Write one round; `target` and `draft` are row blocks from `encode_rows`."""
        emitted = list(emitted)
        record: dict[str, Any] = {
            "round": self.rounds, "position": self.position,
            "rule": rule.value if isinstance(rule, AcceptanceRule) else rule,
            "draft_tokens": list(draft_tokens), "emitted": emitted, "target": dict(target),
        }
        if draft is not None:
            record["draft"] = dict(draft)
        if num_accepted is not None:
            record["num_accepted"] = num_accepted
        if uniforms is not None:
            record["uniforms"] = [[float(u) for u in row] for row in uniforms]
        if cache is not None:
            record["cache"] = dict(cache)
        if stopped:
            record["stopped"] = True
        self._write(record)
        self.rounds += 1
        self.position += len(emitted)


def trace_size(
    vocab_size: int, *, rounds: int = 1000, draft_tokens: int = 4, kind: str = "probs",
    encoding: str = "json", dtype: str = "float32", nonzero: int | None = None,
    rows_per_round: float | None = None,
) -> int:
    """Bytes of a trace of `rounds` rounds, by encoding one synthetic round and scaling.

    The synthetic rows are a softmax of seeded normal logits (scale 3), so JSON numbers
    have the length real probabilities have; `nonzero` keeps only that many tokens
    per row (a top-k sampler's p), which is what the sparse encoding relies on.
    `rows_per_round` overrides the default 2k + 1 rows (the k + 1 target rows and k
    draft rows), e.g. to count only the rows that decided a token.
    """
    rng = np.random.default_rng(0)
    logits = rng.normal(0.0, 3.0, size=vocab_size).astype(np.float32)
    if nonzero is not None:
        logits[np.argsort(logits)[:-nonzero]] = -np.inf
    probs = np.exp(logits - logits.max())
    probs = (probs / probs.sum()).astype(np.float32)
    row = logits if kind == "logits" else probs
    block = encode_rows(row[None], kind=kind, encoding=encoding, dtype=dtype)
    row_bytes = len(json.dumps(block, separators=(",", ":")))
    rows = 2 * draft_tokens + 1 if rows_per_round is None else rows_per_round
    framing = 200  # the record's other fields: ids, emitted, offsets
    return int(rounds * (rows * row_bytes + framing))
