"""The conformance kit's tracers: write the trace an engine's speculative decoding leaves.

`TraceWriter` writes a trace (``spec/trace_format.md``) with row blocks from
`encode_rows`; `trace_generator` traces this library's generator, `trace_tree_generator`
its tree generator (version 2 tree rounds, through ``specaccept_trace``), and
`specaccept.shell.conformance.mlx_lm_adapter` traces mlx-lm's. The kit that reads and
checks a trace is `specaccept.conformance`.
"""

from specaccept.shell.conformance.record import trace_generator
from specaccept.shell.conformance.tree_record import trace_tree_generator
from specaccept.shell.conformance.writer import TraceWriter, encode_rows

__all__ = ["TraceWriter", "encode_rows", "trace_generator", "trace_tree_generator"]
