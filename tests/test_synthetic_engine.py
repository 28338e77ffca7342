"""benchmarks/synthetic_engine.py: its decisions are the spec's, and `conform` judges it so.

The engine is the benchmark's stand-in for a NumPy engine at a real vocabulary; its
numbers mean something only if it is a correct engine when no bug is planted and each
planted bug is the one the kit names. Its float32 functions are compared here with the
spec's MLX functions decision by decision, and its traces are checked by ``conform``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

from specaccept.cli import main as specaccept
from specaccept.core.acceptance import AcceptanceRule, verify_tokenwise
from specaccept.core.joint import verify_blockwise
from specaccept.core.sampling import sample_from_distribution

ROOT = Path(__file__).resolve().parents[1]
# A script, not a package: loaded from its file.
_SPEC = importlib.util.spec_from_file_location("synthetic_engine",
                                               ROOT / "benchmarks" / "synthetic_engine.py")
assert _SPEC is not None and _SPEC.loader is not None
engine = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = engine  # its dataclass looks itself up there
_SPEC.loader.exec_module(engine)


def _laws(rng: np.random.Generator, rows: int, vocab: int) -> np.ndarray:
    logits = rng.standard_normal((rows, vocab)).astype(np.float16)
    laws: np.ndarray = engine.distribution(logits, 0.7)
    # Exact zeros too, so the support conditions are exercised.
    laws[:, rng.integers(vocab)] = 0.0
    return laws


def test_the_draw_is_sample_from_distribution() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        weights = _laws(rng, 1, 7)[0]
        u = np.float32(rng.random(dtype=np.float32))
        assert engine.draw(weights, u) == sample_from_distribution(mx.array(weights),
                                                                   float(u)).item()


@pytest.mark.parametrize("rule", ["stochastic", "block"])
def test_a_round_emits_what_the_spec_emits(rule: str) -> None:
    rng = np.random.default_rng(1)
    k, vocab = 4, 5
    for _ in range(300):
        p, q = _laws(rng, k + 1, vocab), _laws(rng, k, vocab)
        # Drafts the drafter can draw, and some it cannot (q = 0).
        drafts = [int(rng.integers(vocab)) for _ in range(k)]
        u = rng.random((k + 1, 2), dtype=np.float32)
        arrays = mx.array(p), mx.array(q), mx.array(drafts), mx.array(u)
        if rule == "block":
            ours = engine.verify_block(p, q, drafts, u)
            joint = verify_blockwise(*arrays)
            kept, token = joint.num_accepted.item(), joint.next_token.item()
        else:
            ours = engine.verify_stochastic(p, q, drafts, u, None)
            tokenwise = verify_tokenwise(AcceptanceRule.STOCHASTIC, *arrays)
            kept, token = tokenwise.num_accepted.item(), tokenwise.next_token.item()
        assert isinstance(kept, int)
        assert ours == [*drafts[:kept], token]


def test_the_resample_bug_draws_from_p() -> None:
    p = np.array([[0.5, 0.5, 0.0]] * 2, dtype=np.float32)
    q = np.array([[0.0, 1.0, 0.0]], dtype=np.float32)
    u = np.array([[0.9, 0.75], [0.0, 0.0]], dtype=np.float32)  # rejects draft 1
    assert engine.verify_stochastic(p, q, [1], u, None) == [0]  # the residual is token 0
    assert engine.verify_stochastic(p, q, [1], u, "resample-from-p") == [1]


def _conform(tmp_path: Path, *arguments: str) -> str:
    trace = tmp_path / "trace.jsonl"
    with contextlib.redirect_stdout(io.StringIO()):
        assert engine.main(["--vocab", "67", "--k", "4", "--seed", "2", "--out", str(trace),
                            *arguments]) == 0
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        specaccept(["conform", str(trace)])
    return report.getvalue()


def _verdicts(report: str) -> dict[str, str]:
    names = ("replay", "fresh", "support", "acceptance", "law", "draft-law", "batch")
    return {line.split()[0]: line.split()[1] for line in report.splitlines()
            if line.split()[:1] and line.split()[0] in names}


@pytest.mark.parametrize("rule", ["stochastic", "block"])
def test_the_correct_engine_conforms_with_every_decision_replayed(
    tmp_path: Path, rule: str
) -> None:
    report = _conform(tmp_path, "--rounds", "40", "--runs", "3", "--rule", rule)
    assert set(_verdicts(report).values()) == {"PASS"}, report
    assert "divergent rounds = 0 of 120" in report and "verdict: CONFORMS" in report


@pytest.mark.parametrize(("bug", "rule", "check"), [
    ("resample-from-p", "stochastic", "replay"),
    ("position-keyed-uniforms", "block", "fresh"),
    ("shared-batch-coin", "stochastic", "batch"),
])
def test_each_planted_bug_fails_the_check_that_names_it(
    tmp_path: Path, bug: str, rule: str, check: str
) -> None:
    report = _conform(tmp_path, "--rounds", "40", "--runs", "3", "--rule", rule, "--bug", bug)
    assert _verdicts(report)[check] == "FAIL", report


def _sections(report: str) -> dict[str, list[str]]:
    """A report's lines by the check they belong to (a check's line and the lines under it)."""
    sections: dict[str, list[str]] = {}
    name = "header"
    for line in report.splitlines():
        if line[:1].strip():
            name = line.split()[0]
        sections.setdefault(name, []).append(line)
    return sections


def test_omitting_undecided_rows_changes_only_the_draft_law_checks_sample(
    tmp_path: Path,
) -> None:
    """What spec/trace_format.md says of rows past the first rejection: every check but
    the draft-law check reads the same numbers without them (and it reads fewer drafts)."""
    arguments = ("--rounds", "60", "--runs", "2", "--temperature", "0.7")
    full = _sections(_conform(tmp_path, *arguments))
    decided = _sections(_conform(tmp_path, *arguments, "--omit-undecided-rows"))
    assert full.keys() == decided.keys()
    assert [name for name in full if full[name] != decided[name]] == ["draft-law"]
    drafts = [int(report["draft-law"][0].split(" drafts;")[0].rsplit(" ", 1)[1])
              for report in (full, decided)]
    assert drafts[1] < drafts[0] == 4 * 120


def test_unrecorded_draws_are_null_and_the_accept_tests_still_replay(tmp_path: Path) -> None:
    report = _conform(tmp_path, "--rounds", "30", "--runs", "2", "--unrecorded-draws")
    rounds = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()
              if '"round"' in line]
    assert all(u[1] is None and (u[0] is None) == (i == 4)
               for r in rounds for i, u in enumerate(r["uniforms"]))
    assert "divergent rounds = 0 of 60" in report and "verdict: CONFORMS" in report
