"""The accept coins of vLLM's `rejection_sample`, recomputed by vLLM's own `tl_rand32`.

`rejection_sample` draws the coin that tests draft i of a request as
``tl_rand32(key, pos, includes_zero=False)``, one scalar per draft, with
``key = spec_step_seed(seed, i)`` under block verification and ``key = seed`` otherwise,
and keeps it to itself. This kernel draws the same scalar for every logit row, calling the
two functions imported from the wheel's ``gumbel.py``; it is loaded beside the extracted
files as a top-level module.
"""

from __future__ import annotations

from typing import Any

from vllm.triton_utils import tl, triton
from vllm.v1.worker.gpu.sample.gumbel import spec_step_seed, tl_rand32

__all__ = ["accept_coins"]


@triton.jit  # type: ignore[untyped-decorator]
def _accept_coins_kernel(out_ptr, seed_ptr, pos_ptr, expanded_idx_mapping_ptr,  # type: ignore[no-untyped-def]
                         expanded_local_pos_ptr, num_logits, STEP_KEYED: tl.constexpr,
                         BLOCK_SIZE: tl.constexpr):
    # Elementwise over a block of rows: the same scalars the kernel draws one at a time.
    logit_idx = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = logit_idx < num_logits
    req_state_idx = tl.load(expanded_idx_mapping_ptr + logit_idx, mask=mask, other=0)
    seed = tl.load(seed_ptr + req_state_idx.to(tl.int64), mask=mask, other=0)
    pos = tl.load(pos_ptr + logit_idx, mask=mask, other=0)
    if STEP_KEYED:
        seed = spec_step_seed(seed, tl.load(expanded_local_pos_ptr + logit_idx, mask=mask,
                                            other=0))
    tl.store(out_ptr + logit_idx, tl_rand32(seed, pos, includes_zero=False), mask=mask)


def accept_coins(seed: Any, pos: Any, expanded_idx_mapping: Any, expanded_local_pos: Any,
                 step_keyed: bool) -> Any:
    """``[num_logits]`` float32: the coin of each logit row, keyed as the kernel keys it.

    Args:
        seed: ``[max_num_reqs]`` int64, each request's seed.
        pos: ``[num_logits]`` int64, each row's position (as `rejection_sample` gets it).
        expanded_idx_mapping: ``[num_logits]`` int32, each row's request-state index.
        expanded_local_pos: ``[num_logits]`` int32, each row's draft step i.
        step_keyed: mix the draft step into the seed (block verification).
    """
    import torch

    num_logits = pos.shape[0]
    out = torch.empty(num_logits, dtype=torch.float32, device=pos.device)
    block_size = 1024
    _accept_coins_kernel[(triton.cdiv(num_logits, block_size),)](
        out, seed, pos, expanded_idx_mapping, expanded_local_pos, num_logits,
        STEP_KEYED=step_keyed, BLOCK_SIZE=block_size)
    return out
