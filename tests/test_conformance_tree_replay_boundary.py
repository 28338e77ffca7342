"""Tree replay stays exact on the probabilities an engine records, but tells apart a round
whose only divergence is a draw that float32 summation in another order puts across a
boundary (SGLang's CUDA kernel sums a row in blocks of 4,096 and diverged so in about one
round in ten at V = 128,256) from one that draws from another law."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

import specaccept_trace as st
from specaccept.conformance import CheckResult, Verdict, check_trace, read_trace

P = [0.5, 0.25, 0.125, 0.125]
JUST_PAST_HALF = float(np.nextafter(np.float32(0.5), np.float32(1)))


def _replay(tmp_path: Path, emitted_after: int, u: float) -> CheckResult:
    """One tree round: node 0 (token 0, p = 1 at the root) is kept, then the token after
    it is drawn from P with uniform `u`; the engine emits `emitted_after`."""
    out = io.StringIO()
    with st.TraceWriter(out, vocab_size=4, engine="tree boundary") as trace:
        run = trace.start_run("r", target_sampler={"temperature": 1.0})
        run.write_tree_round(scheme="deterministic", parents=[-1], node_tokens=[0],
                             target=st.probs_block([[1.0, 0.0, 0.0, 0.0], P]), path=[0],
                             emitted=[0, emitted_after],
                             uniforms={"accept": [0.5], "sample": [0.0, u]})
    path = tmp_path / "trace.jsonl"
    path.write_text(out.getvalue())
    return next(c for c in check_trace(read_trace(path)).checks if c.name == "tree-replay")


def test_a_draw_across_a_boundary_by_rounding_fails_and_is_named(tmp_path: Path) -> None:
    # u * total is 2**-24 past the boundary at 1/2: the spec draws token 1, the engine 0.
    replay = _replay(tmp_path, 0, JUST_PAST_HALF)
    assert replay.verdict is Verdict.FAIL
    assert "1 of the 1 divergent rounds keep the spec's path" in replay.detail


def test_a_draw_far_from_the_boundary_is_not_called_rounding(tmp_path: Path) -> None:
    replay = _replay(tmp_path, 0, 0.6)
    assert replay.verdict is Verdict.FAIL
    assert "float32 summation" not in replay.detail


def test_the_same_draw_passes(tmp_path: Path) -> None:
    assert _replay(tmp_path, 1, JUST_PAST_HALF).verdict is Verdict.PASS
