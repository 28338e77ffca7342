"""Trace this library's `TreeSpeculativeGenerator` through a run's round observer.

Tree rounds are a version 2 record (``tree-round``), so the trace is written by the
standard-library writer ``specaccept_trace``, which validates every record as the reader
will. A round with one token left in the budget, drawn by the target alone, is written
as a chain round with no drafts.
"""

from __future__ import annotations

from typing import IO

import numpy as np

import specaccept_trace
from specaccept.shell.conformance.writer import sampler_to_json
from specaccept.shell.tree_generator import TreeRoundObservation, TreeSpeculativeGenerator

__all__ = ["trace_tree_generator"]


def _block(rows: object) -> dict[str, object]:
    array = np.ascontiguousarray(np.asarray(rows, dtype="<f4"))
    return specaccept_trace.b64_block(array.tobytes(), rows=int(array.shape[0]))


def trace_tree_generator(
    generator: TreeSpeculativeGenerator, prompt: list[int], max_tokens: int, stream: IO[str], *,
    seed: int = 0,
) -> list[int]:
    """Run `generator` on `prompt`, writing one trace record per round to `stream`.

    Rows are the probabilities the generator decided with (base64 float32), with the
    uniforms `verify_tree` read and both caches' offsets, so every tree check runs.

    Returns:
        The generated tokens.
    """
    assert generator.draft_config is not None
    writer = specaccept_trace.TraceWriter(
        stream, vocab_size=generator.vocab_size, engine="specaccept TreeSpeculativeGenerator",
        extra={"tree": f"{generator.width}x{generator.depth}"})
    run = writer.start_run(
        f"seed-{seed}", prompt=prompt,
        target_sampler=sampler_to_json(generator.target_config),
        draft_sampler=sampler_to_json(generator.draft_config))

    def record(seen: TreeRoundObservation) -> None:
        cache = {"target_before": seen.target_offset_before,
                 "target_after": seen.target_offset_after}
        target = _block(np.array(seen.target_probs))
        if not seen.parents:
            run.write_round(rule="stochastic", draft_tokens=[], emitted=seen.emitted,
                            target=target, uniforms=[[None, seen.sample_uniforms[0]]],
                            cache=cache, stopped=seen.stopped)
            return
        assert seen.draft_probs is not None and seen.draft_offset_before is not None
        assert seen.draft_fed is not None and seen.draft_offset_after is not None
        cache.update(draft_before=seen.draft_offset_before, draft_fed=seen.draft_fed,
                     draft_after=seen.draft_offset_after)
        run.write_tree_round(
            scheme=seen.scheme, parents=seen.parents, node_tokens=seen.node_tokens,
            target=target, draft=_block(np.array(seen.draft_probs)), path=seen.path,
            emitted=seen.emitted,
            uniforms={"accept": seen.accept_uniforms, "sample": seen.sample_uniforms},
            cache=cache, stopped=seen.stopped)

    blocks = generator.generate(prompt, max_tokens, seed=seed, observer=record)
    return [t for block in blocks for t in block]
