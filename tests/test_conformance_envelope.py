"""Replay on rows rebuilt from logits: float32 rounding of a boundary is not a divergence.

An engine that records logits computes its own law from them, and its float32 softmax and
prefix sums need not round as the spec's do; at a real vocabulary a draw lands on a boundary
they place differently a few times in a hundred rounds. Replay counts such a decision apart
when it differs from the spec's only within `envelope` of the boundary, and only on rows
rebuilt from logits: probabilities recorded as the engine used them replay exactly.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest

import specaccept_trace as st
from specaccept.conformance import CheckResult, Verdict, check_trace, read_trace
from specaccept.conformance.replay import envelope

P = [0.5, 0.25, 0.125, 0.125]
JUST_PAST_HALF = float(np.nextafter(np.float32(0.5), np.float32(1)))


def _trace(tmp_path: Path, bonus: int, u: float, logits: bool) -> Path:
    """One round, k = 1: draft 0 (p = 1/2 >= q = 1/4, always kept), then the bonus drawn
    from p with uniform `u`; the engine emits `bonus`."""
    out = io.StringIO()
    with st.TraceWriter(out, vocab_size=4, engine="envelope") as trace:
        run = trace.start_run("r", target_sampler={"temperature": 1.0})
        rows = [P, P]
        target = (st.logits_block([[math.log(x) for x in row] for row in rows]) if logits
                  else st.probs_block(rows))
        run.write_round(rule="stochastic", draft_tokens=[0], emitted=[0, bonus], target=target,
                        draft=st.probs_block([[0.25] * 4]), uniforms=[[0.5, 0.0], [0.0, u]])
    path = tmp_path / "trace.jsonl"
    path.write_text(out.getvalue())
    return path


def _replay(path: Path) -> CheckResult:
    return next(c for c in check_trace(read_trace(path)).checks if c.name == "replay")


@pytest.mark.parametrize("logits", [True, False])
def test_a_draw_on_the_boundary_is_within_the_envelope_only_for_logits(
    tmp_path: Path, logits: bool
) -> None:
    # u * total is 2**-24 past the boundary at 1/2: the spec draws token 1, the engine 0.
    replay = _replay(_trace(tmp_path, 0, JUST_PAST_HALF, logits))
    assert replay.verdict is (Verdict.PASS if logits else Verdict.FAIL), replay.statistic
    if logits:
        assert "within float32 rounding" in replay.detail


def test_a_draw_past_the_envelope_still_diverges(tmp_path: Path) -> None:
    assert envelope(4) < 0.6 - 0.5
    replay = _replay(_trace(tmp_path, 0, 0.6, logits=True))
    assert replay.verdict is Verdict.FAIL, replay.statistic


def test_the_envelope_is_the_worst_case_of_float32_summation() -> None:
    # (V + 8) roundings of 2**-24: 0.76 % of the total at Llama 3's vocabulary.
    assert envelope(128_256) == pytest.approx(0.00764, abs=1e-5)
