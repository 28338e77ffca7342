"""The project's stand-in for ``vllm.v1.worker.gpu.spec_decode.draft_logits``.

vLLM's module also shards the cache across tensor-parallel ranks, which imports its
distributed runtime. The recorder verifies on one device with a replicated cache, where a
request's row in the cache is its request-state index; this module is that case alone: the
cache's tensor (`values`, pre-temperature draft logits ``[max_num_reqs, num_steps, V]``) and
no row mapping.
"""

from __future__ import annotations

from typing import Any

from vllm.triton_utils import tl, triton

__all__ = ["DraftLogitsCache", "draft_logits_row"]


# No annotations: compiled Triton reads a parameter's annotation as its type (the
# interpreter does not), and `Any` is none of Triton's.
@triton.jit
def draft_logits_row(req_state_idx, row_mapping_ptr):  # type: ignore[no-untyped-def]
    # A replicated cache: the row is the request's state index (row_mapping_ptr is None).
    return req_state_idx.to(tl.int64)


class DraftLogitsCache:
    """Draft logits as a draft step cached them, read back by verification."""

    def __init__(self, values: Any) -> None:
        self.values = values
        self.row_mapping: Any = None
