"""The conformance kit: trace an engine's speculative decoding, check it against the spec.

`read_trace` parses a trace (``spec/trace_format.md``), `check_trace` runs the five
checks (replay, support, acceptance, law, rewind), `trace_generator` traces this
library's generator and `specaccept.shell.conformance.mlx_lm_adapter` traces mlx-lm's.
"""

from specaccept.shell.conformance.bugs import BUG_CLASSES, BugClass
from specaccept.shell.conformance.checks import (
    DEFAULT_ALPHA,
    CheckResult,
    ConformanceReport,
    Power,
    check_trace,
)
from specaccept.shell.conformance.record import trace_generator
from specaccept.shell.conformance.trace import (
    PROBABILITY_SUM_TOLERANCE,
    TRACE_FORMAT,
    TRACE_VERSION,
    Round,
    Trace,
    TraceError,
    TraceWriter,
    encode_rows,
    read_trace,
)

__all__ = [
    "BUG_CLASSES",
    "DEFAULT_ALPHA",
    "PROBABILITY_SUM_TOLERANCE",
    "TRACE_FORMAT",
    "TRACE_VERSION",
    "BugClass",
    "CheckResult",
    "ConformanceReport",
    "Power",
    "Round",
    "Trace",
    "TraceError",
    "TraceWriter",
    "check_trace",
    "encode_rows",
    "read_trace",
    "trace_generator",
]
