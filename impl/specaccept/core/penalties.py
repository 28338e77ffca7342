"""The history penalties that count occurrences: repetition, frequency and presence.

They read the last `repetition_context_size` ids of the history, count each id there, and
move the logit of every id seen towards less likely. DRY, which reads repeated sequences
rather than counts, is `specaccept.core.dry`.
"""

from __future__ import annotations

import mlx.core as mx

from specaccept.core.sampler_config import SamplerConfig

__all__ = ["apply_repetition_penalties"]


def apply_repetition_penalties(
    logits: mx.array, history: mx.array, config: SamplerConfig
) -> mx.array:
    """Apply the repetition, frequency and presence penalties of `config` to `logits`.

    `history` is the int32 history the chain validated; `logits` are `[..., V]` float32.
    """
    vocab_size = logits.shape[-1]
    recent = history[-config.repetition_context_size :]
    # An id outside the vocabulary (NO_TOKEN, from token_history) adds 0, at id 0.
    is_token = (recent >= 0).astype(mx.float32)
    counts = mx.zeros((vocab_size,), dtype=mx.float32).at[mx.maximum(recent, 0)].add(is_token)
    seen = counts > 0
    if config.repetition_penalty != 1.0:
        # CTRL's penalty: shrink positive logits, grow negative ones, towards less likely.
        penalised = mx.where(
            logits > 0, logits / config.repetition_penalty, logits * config.repetition_penalty
        )
        logits = mx.where(seen, penalised, logits)
    return (
        logits
        - counts * config.frequency_penalty
        - seen.astype(mx.float32) * config.presence_penalty
    )
