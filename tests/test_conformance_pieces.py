"""Checking a trace in pieces: the merged state's report equals one pass over the whole trace.

Every trace here has a known verdict (correct runs of the small engine loop, a batched
trace, block rounds over several runs); each is cut at several lines, each piece checked
alone (its state saved and read back as JSON for one cut), and the merged report compared
with the report of one pass, field for field. Then the refusals: pieces that cannot be one
trace, a truncated piece before the last, a state of another format version.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest

pytest.importorskip("mlx_lm")

from broken_engines import run_engine
from specaccept import load_pair
from specaccept.conformance import Verdict, check_trace, read_trace
from specaccept.conformance.batch import PieceConflict
from specaccept.conformance.pieces import (
    STATE_VERSION,
    check_piece,
    load_state,
    merge_states,
    save_state,
)
from specaccept.core.acceptance import AcceptanceRule
from test_conformance_drafter_history_batch import _batched_trace
from test_conformance_multi_run import CONFIGS, merged

ENTRY = "from specaccept.cli import main; raise SystemExit(main())"


@pytest.fixture(scope="module")
def pair() -> Any:
    return load_pair()


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def traces(pair: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pieces")
    runs = [(f"seed-{seed}", run_engine(None, 10, seed=seed, config=config, pair=pair,
                                        record_uniforms=True))
            for seed, config in enumerate(CONFIGS)]
    blocks = [(f"block-{seed}", run_engine(None, 10, seed=seed, pair=pair, record_uniforms=True,
                                           rule=AcceptanceRule.BLOCK)) for seed in range(3)]
    batched = root / "batched.jsonl"
    batched.write_text(_batched_trace(40, shared=False, record_uniforms=True, seed=3))
    return {"penalties": _write(root / "runs.jsonl", merged(*runs)),
            "blocks": _write(root / "blocks.jsonl", merged(*blocks)), "batched": batched}


def _report(checker: Any) -> str:
    return json.dumps(checker.report().to_json(), sort_keys=True)


@pytest.mark.parametrize("name", ["penalties", "blocks", "batched"])
def test_pieces_merged_report_what_one_pass_reports(
    name: str, traces: dict[str, Path], tmp_path: Path
) -> None:
    path = str(traces[name])
    lines = len(Path(path).read_bytes().splitlines())
    whole = _report(check_piece((path, 2, None)))
    assert whole == json.dumps(check_trace(read_trace(path)).to_json(), sort_keys=True)
    for cuts in ([3], [lines // 2], [lines - 1], [5, lines // 3, 2 * lines // 3]):
        bounds = [2, *cuts, lines + 1]
        states = [check_piece((path, first, last - 1))
                  for first, last in itertools.pairwise(bounds)]
        if cuts == [lines // 2]:  # carried between machines as JSON
            for i, state in enumerate(states):
                save_state(state, tmp_path / f"{i}.json.gz")
            states = [load_state(tmp_path / f"{i}.json.gz") for i in range(len(states))]
        assert _report(merge_states(states)) == whole, (name, cuts)


def test_block_rounds_of_every_run_are_scored(traces: dict[str, Path]) -> None:
    # Three runs of ten block rounds: keyed by round index alone, as before, 10 were scored.
    acceptance = next(c for c in check_trace(read_trace(traces["blocks"])).checks
                      if c.name == "acceptance")
    assert "30 block-verification rounds" in acceptance.detail, acceptance.detail


def test_a_reread_across_two_pieces_is_counted(pair: Any, tmp_path: Path) -> None:
    # One run recorded twice under two ids reuses its randomness; cut between the two.
    text = run_engine(None, 10, seed=0, pair=pair, record_uniforms=True)
    lines = merged(("first", text), ("again", text))
    rounds = [line for line in lines if "record" not in line and "format" not in line]
    ordered = [lines[0], lines[1], lines[2], *[r for r in rounds if r["run"] == "first"],
               *[r for r in rounds if r["run"] == "again"]]
    path = str(_write(tmp_path / "twice.jsonl", ordered))
    cut = 4 + len([r for r in rounds if r["run"] == "first"])
    merged_state = merge_states([check_piece((path, 2, cut - 1)), check_piece((path, cut, None))])
    fresh = next(c for c in merged_state.report().checks if c.name == "fresh")
    assert fresh.verdict is Verdict.FAIL, fresh.statistic
    alone = next(c for c in check_piece((path, cut, None)).report().checks if c.name == "fresh")
    assert alone.verdict is Verdict.PASS, alone.statistic


def test_pieces_that_cannot_be_one_trace_are_refused(traces: dict[str, Path]) -> None:
    path = str(traces["penalties"])
    first, middle, last = (check_piece((path, 2, 12)), check_piece((path, 13, 20)),
                           check_piece((path, 21, None)))
    with pytest.raises(PieceConflict, match="pieces out of order"):
        merge_states([middle, first])
    with pytest.raises(PieceConflict, match="no earlier piece holds its earlier rounds"):
        merge_states([check_piece((path, 2, 4)), last])
    with pytest.raises(PieceConflict, match="but the pieces before it end at round"):
        merge_states([first, last])
    with pytest.raises(PieceConflict, match="already opened"):
        merge_states([check_piece((path, 2, None)), check_piece((path, 2, None))])
    other = str(traces["batched"])
    with pytest.raises(PieceConflict, match="vocab_size"):
        merge_states([check_piece((path, 2, None)), check_piece((other, 2, None))])


def test_a_truncated_piece_before_the_last_is_refused(traces: dict[str, Path],
                                                      tmp_path: Path) -> None:
    text = traces["penalties"].read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(text[: len(text) - 40])
    state = check_piece((str(cut), 2, None))
    assert state.truncated is not None
    renamed = [json.loads(line) for line in traces["penalties"].read_text().splitlines()]
    for line in renamed[1:]:
        line["run"] = "x" + line["run"]
    other = _write(tmp_path / "other.jsonl", renamed)
    with pytest.raises(PieceConflict, match="truncated"):
        merge_states([state, check_piece((str(other), 2, None))])


def test_a_state_of_another_version_is_refused_naming_both(traces: dict[str, Path],
                                                           tmp_path: Path) -> None:
    save_state(check_piece((str(traces["batched"]), 2, None)), tmp_path / "s.json")
    document = json.loads((tmp_path / "s.json").read_text())
    document["version"] = STATE_VERSION + 1
    (tmp_path / "s.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match=f"version {STATE_VERSION + 1}.*version {STATE_VERSION}"):
        load_state(tmp_path / "s.json")


def test_the_command_checks_pieces_in_processes_and_merges_saved_states(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    path = str(traces["batched"])

    def conform(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", ENTRY, "conform", *args],
                              capture_output=True, text=True, check=False)

    one = conform(path, "--jobs", "1", "--json")
    assert one.returncode == 0, one.stderr
    for i in (1, 2):
        saved = conform(path, "--piece", f"{i}/2", "--save-state", str(tmp_path / f"{i}.json"))
        assert saved.returncode == 0, saved.stderr
    both = conform("--merge", str(tmp_path / "1.json"), str(tmp_path / "2.json"), "--json")
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout)["checks"] == json.loads(one.stdout)["checks"]
    wrong = conform("--merge", str(tmp_path / "2.json"), str(tmp_path / "1.json"))
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1, wrong.stderr
    assert "do not make one trace" in wrong.stderr


def test_an_exact_sum_does_not_depend_on_the_order_or_the_cut_of_its_terms() -> None:
    import random

    from specaccept.conformance.exact import ExactSum

    rng = random.Random(5)
    terms = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-18, 18) for _ in range(400)]
    whole = ExactSum(terms).value
    assert whole == math.fsum(terms)
    for cut in (1, 37, 200, 399):
        left, right = ExactSum(terms[:cut]), ExactSum(reversed(terms[cut:]))
        left.merge(right)
        assert left.value == whole
