"""Checking a trace in pieces: split it, check the pieces anywhere, merge their states.

A piece is a range of a trace file's lines (or a whole file of a multi-file trace, one
per replica, say). `check_piece` reads one piece with `TraceStream` and returns the
checkers' state; `merge_states` folds the states in file order into one, refusing pieces
that cannot belong together (other headers, a run split inconsistently, a slot of a batch
step claimed twice); the merged state's report equals that of one pass over the whole
trace. `check_paths` does all of it in parallel processes; `save_state` and `load_state`
carry a state between machines as versioned JSON.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import multiprocessing
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specaccept.conformance import (
    acceptance,
    batch,
    draftlaw,
    exact,
    fresh,
    history,
    law,
    replay,
    rewind,
    support,
    tree_checks,
    written_stats,
)
from specaccept.conformance.checks import RunSpan, TraceChecker
from specaccept.conformance.trace import TraceStream

__all__ = [
    "PIECE_BYTES",
    "STATE_FORMAT",
    "STATE_VERSION",
    "Piece",
    "check_on_cpu",
    "check_paths",
    "check_piece",
    "load_state",
    "merge_states",
    "save_state",
    "split_trace",
    "state_schema",
]

STATE_FORMAT = "specaccept-conform-state"
STATE_VERSION = 3
"""The version of the saved state's JSON; a state of another version is refused. A change
to `state_schema` must bump it: a state whose fields no longer match its classes would be
refused only as malformed, or worse, read with another meaning (a test holds each version
to its schema's digest)."""
PIECE_BYTES = 8 * 2**20
"""A trace file is cut into pieces of at least this many bytes: smaller pieces cost more
in process start-up than they save."""

Piece = tuple[str, int, int | None]
"""(path, first line, last line or None for the end), lines 1-based and inclusive."""


def check_piece(piece: Piece) -> TraceChecker:
    """Every check's state over one piece of a trace.

    Raises:
        TraceError: a malformed line of the piece.
        OSError: the file cannot be read.
    """
    path, first, last = piece
    stream = TraceStream(path, first, last)
    header = {key: stream.header.get(key) for key in ("format", "version", "vocab_size",
                                                      "engine", "compact")}
    checker = TraceChecker(vocab_size=stream.vocab_size, header=header, source=path)
    opened: dict[str, int] = {}
    for round_ in stream:
        run = round_.run
        if run.id not in opened:
            opened[run.id] = round_.line
        reads = any(c is not None and c.uses_history for c in (run.target_sampler,
                                                                run.draft_sampler))
        checker.update(round_, stream.history_before(round_) if reads else None)
    checker.truncated = stream.truncated
    for run_id, (step_round, position, _) in stream.exits().items():
        entry = stream.entries.get(run_id)
        line = entry[0] if entry is not None else stream.runs[run_id].line
        checker.runs[run_id] = RunSpan(path, line, entry[1:] if entry is not None else None,
                                       (step_round, position))
    return checker


def split_trace(path: str, pieces: int, smallest: int = PIECE_BYTES) -> list[Piece]:
    """Cut a trace file into at most `pieces` ranges of lines of about equal bytes, none
    below `smallest` bytes (and none empty); a compressed file is one piece."""
    size = os.path.getsize(path)
    pieces = max(1, min(pieces, size // max(1, smallest)))
    if pieces == 1 or path.endswith(".gz"):
        return [(path, 2, None)]
    cuts, out = [size * i // pieces for i in range(1, pieces)], []
    starts = [2]
    with open(path, "rb") as stream:
        offset, cut = 0, 0
        for number, raw in enumerate(stream, start=1):
            offset += len(raw)
            if cut < len(cuts) and offset >= cuts[cut] and number >= starts[-1]:
                starts.append(number + 1)
                while cut < len(cuts) and offset >= cuts[cut]:
                    cut += 1
    starts = sorted(set(starts))
    for i, start in enumerate(starts):
        out.append((path, start, starts[i + 1] - 1 if i + 1 < len(starts) else None))
    return out


def merge_states(states: Sequence[TraceChecker]) -> TraceChecker:
    """The states of consecutive pieces, in file order, as one.

    Raises:
        PieceConflict: the pieces cannot belong to one trace (see `TraceChecker.merge`).
    """
    if not states:
        raise ValueError("merge_states needs at least one state")
    merged = states[0]
    for state in states[1:]:
        merged.merge(state)
    return merged


def check_on_cpu() -> None:
    """Make MLX's CPU the device of this process's checks.

    The checks' arithmetic is then the same on every machine, whatever device MLX would
    pick (a CUDA or Metal build picks the GPU), and each of the processes checking pieces
    compiles no GPU kernels of its own.
    """
    import mlx.core as mx

    mx.set_default_device(mx.cpu)


def _check(piece: Piece) -> TraceChecker:
    check_on_cpu()
    return check_piece(piece)


def check_paths(paths: Sequence[str], jobs: int) -> TraceChecker:
    """Every check over the trace files `paths` (one engine's: pieces of one trace, or one
    trace per replica), each file cut into pieces, checked by `jobs` processes, merged."""
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    per_file = max(1, -(-jobs // len(paths)))
    pieces = [piece for path in paths for piece in split_trace(path, per_file)]
    if jobs == 1 or len(pieces) == 1:
        return merge_states([check_piece(piece) for piece in pieces])
    # Fresh interpreters: a forked child would inherit the parent's MLX and BLAS threads.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(jobs, len(pieces)),
                                                mp_context=context) as pool:
        states = list(pool.map(_check, pieces))
    return merge_states(states)


_STATES: dict[str, Any] = {
    cls.__name__: cls for module in (acceptance, batch, draftlaw, exact, fresh, history, law,
                                     replay, rewind, support, tree_checks, written_stats)
    for cls in vars(module).values()
    if isinstance(cls, type) and hasattr(cls, "from_json") and cls.__module__ == module.__name__
}
_STATES["TraceChecker"] = TraceChecker
_STATES["RunSpan"] = RunSpan


def state_schema() -> dict[str, list[str]]:
    """Per class a saved state can hold, its fields as ``name: annotation``: what a saved
    state's JSON must agree with to be read."""
    import dataclasses

    return {name: ([f"{field.name}: {field.type}" for field in dataclasses.fields(cls)]
                   if dataclasses.is_dataclass(cls) else list(getattr(cls, "__slots__", ())))
            for name, cls in sorted(_STATES.items())}


def save_state(state: TraceChecker, path: str | Path) -> None:
    """Write a checker's state as versioned JSON (gzip-compressed when `path` ends in .gz)."""
    document = {"format": STATE_FORMAT, "version": STATE_VERSION, "state": state.to_json()}
    text = json.dumps(document, allow_nan=False)
    opener: Any = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as stream:
        stream.write(text)


def load_state(path: str | Path) -> TraceChecker:
    """A state `save_state` wrote.

    Raises:
        ValueError: not a state file, or a state of another format version (both named).
        OSError: the file cannot be read.
    """
    opener: Any = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as stream:
            document = json.load(stream)
    except (json.JSONDecodeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as error:
        raise ValueError(f"{path}: not a saved conform state ({error})") from None
    if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
        raise ValueError(f"{path}: not a saved conform state (format "
                         f"{document.get('format') if isinstance(document, dict) else None!r}"
                         f", expected {STATE_FORMAT!r})")
    if document.get("version") != STATE_VERSION:
        raise ValueError(f"{path}: a state of format version {document.get('version')!r}; "
                         f"this specaccept reads version {STATE_VERSION}")
    try:
        checker = TraceChecker.from_json(document["state"], _STATES)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: a malformed conform state ({error})") from None
    assert isinstance(checker, TraceChecker)
    return checker


