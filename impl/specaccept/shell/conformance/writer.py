"""Write a conformance trace: the header, then one record per round, row blocks encoded.

The format, and its reader `specaccept.conformance.read_trace`, are specified in
``spec/trace_format.md``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

import numpy as np

from specaccept.conformance.trace import ROW_DTYPES, TRACE_FORMAT
from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.sampler_config import SamplerConfig

__all__ = ["TraceWriter", "encode_rows", "sampler_to_json", "trace_size"]


def sampler_to_json(config: SamplerConfig) -> dict[str, Any]:
    """A `SamplerConfig` as the trace's sampler object (fields by name)."""
    out = dataclasses.asdict(config)
    out["dry_sequence_breakers"] = list(config.dry_sequence_breakers)
    out["logit_bias"] = {str(k): v for k, v in config.logit_bias.items()}
    return out



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
            raise ValueError(f"dtype must be one of {ROW_DTYPES}, got {dtype!r}")
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



class TraceWriter:
    """Write a one-run trace (format version 1), one line per round, flushed so a crash
    leaves a valid prefix. Many runs in one file: the standard-library ``specaccept_trace``
    writes version 2."""

    def __init__(
        self, stream: IO[str], *, vocab_size: int, engine: str = "",
        prompt: Sequence[int] | None = None,
        target_sampler: SamplerConfig | None = None, draft_sampler: SamplerConfig | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        header: dict[str, Any] = {"format": TRACE_FORMAT, "version": 1,
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
