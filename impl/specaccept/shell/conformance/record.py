"""Trace this library's own `SpeculativeGenerator` through a run's round observer."""

from __future__ import annotations

from typing import IO

from specaccept.shell.conformance.writer import TraceWriter, encode_rows
from specaccept.shell.generator import RoundObservation, SpeculativeGenerator

__all__ = ["trace_generator"]


def trace_generator(
    generator: SpeculativeGenerator, prompt: list[int], max_tokens: int, stream: IO[str], *,
    seed: int = 0, encoding: str = "json",
) -> list[int]:
    """Run `generator` on `prompt`, writing one trace record per round to `stream`.

    Rows are the probabilities the generator decided with, so the trace holds
    everything every check reads, uniforms and cache offsets included.

    Args:
        encoding: how rows are stored, as `encode_rows` takes it ("json", "b64", "sparse").

    Returns:
        The generated tokens.
    """
    writer = TraceWriter(
        stream, vocab_size=generator.vocab_size, engine="specaccept SpeculativeGenerator",
        prompt=prompt, target_sampler=generator.target_config,
        draft_sampler=generator.draft_config,
    )

    def record(observation: RoundObservation) -> None:
        cache = {"target_before": observation.target_offset_before,
                 "target_after": observation.target_offset_after}
        if observation.draft_offset_before is not None:
            cache["draft_before"] = observation.draft_offset_before
            cache["draft_fed"] = observation.draft_fed
        if observation.draft_offset_after is not None:
            cache["draft_after"] = observation.draft_offset_after
        has_drafts = bool(observation.draft_tokens)
        writer.write_round(
            rule=observation.rule, draft_tokens=observation.draft_tokens,
            emitted=observation.emitted, num_accepted=observation.num_accepted,
            target=encode_rows(observation.target_probs, encoding=encoding),
            draft=(encode_rows(observation.draft_probs, encoding=encoding)
                   if has_drafts and observation.draft_probs is not None else None),
            uniforms=observation.uniforms, cache=cache, stopped=observation.stopped,
        )

    blocks = generator.generate(prompt, max_tokens, seed=seed, observer=record)
    return [t for block in blocks for t in block]
