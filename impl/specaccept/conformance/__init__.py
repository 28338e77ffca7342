"""The conformance kit: read an engine's speculative-decoding trace, check it against the spec.

`read_trace` parses a trace (``spec/trace_format.md``) and `check_trace` runs the chain
checks (replay, fresh, support, acceptance, law, rewind, draft-law, history, batch, and on a
compact trace stats), each in its own module, and on a trace's tree rounds the six tree checks of
`specaccept.conformance.tree_checks`. For traces of any length, `TraceStream` reads one
round at a time and `TraceChecker` keeps every check as a mergeable state: `check_paths`
checks the pieces of a trace in parallel processes, and `save_state`, `load_state` and
`merge_states` carry pieces' states between machines. The kit reads only the core; the
shell's `specaccept.shell.conformance` writes traces, of this library's generator and of
mlx-lm's.
"""

from specaccept.conformance.batch import PieceConflict
from specaccept.conformance.bugs import BUG_CLASSES, BugClass, Outcome
from specaccept.conformance.checks import DEFAULT_ALPHA, TraceChecker, check_trace
from specaccept.conformance.pieces import check_paths, load_state, merge_states, save_state
from specaccept.conformance.report import CheckResult, ConformanceReport, Power, Verdict
from specaccept.conformance.trace import (
    PROBABILITY_SUM_TOLERANCE,
    TRACE_FORMAT,
    TRACE_VERSION,
    TRACE_VERSIONS,
    Round,
    RoundStats,
    Run,
    Trace,
    TraceError,
    TraceStream,
    TreeRound,
    read_trace,
)

__all__ = [
    "BUG_CLASSES",
    "DEFAULT_ALPHA",
    "PROBABILITY_SUM_TOLERANCE",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "TRACE_VERSIONS",
    "BugClass",
    "CheckResult",
    "ConformanceReport",
    "Outcome",
    "PieceConflict",
    "Power",
    "Round",
    "RoundStats",
    "Run",
    "Trace",
    "TraceChecker",
    "TraceError",
    "TraceStream",
    "TreeRound",
    "Verdict",
    "check_paths",
    "check_trace",
    "load_state",
    "merge_states",
    "read_trace",
    "save_state",
]
