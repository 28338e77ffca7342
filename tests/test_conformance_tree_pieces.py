"""Checking a trace of tree rounds in pieces: the merged state's report equals one pass.

The tree checks stream as the chain checks do (`specaccept.conformance.tree_checks.TreeState`):
each trace here, correct or broken so that every tree check's diagnosis and the fresh
check's re-reads come into play, is cut at several lines, each piece checked alone (its
state saved and read back as JSON for one cut), and the merged report compared with the
report of one pass, field for field. The fresh check's merge is tested on its own against
one pass over random reads with repeats, cut everywhere; the law check's jitter is shown
to be fixed by the token's identity, not by where the trace is cut.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from broken_tree_engines import TREE_BUGS, run_tree_and_chain_engine, run_tree_engine
from specaccept.conformance import Verdict, check_trace, read_trace
from specaccept.conformance.pieces import (
    check_paths,
    check_piece,
    load_state,
    merge_states,
    save_state,
)
from specaccept.conformance.trace import TreeRound
from specaccept.conformance.tree_checks import TreeFreshState, TreeLawState, tree_law_jitter

ENTRY = "from specaccept.cli import main; raise SystemExit(main())"


def _case(bug: str) -> Any:
    return next(c for c in TREE_BUGS if c.bug == bug)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tree-pieces")
    texts = {
        "correct": run_tree_engine(None, 120, seed=1),
        "keyed": run_tree_engine(_case("rounds-keyed-as-first"), 30),
        "coin-reused": run_tree_engine(_case("accept-coin-reused-for-draw"), 30),
        "replay-and-support": run_tree_engine(_case("zero-mass-accepted-at-coin-0"), 90,
                                              seed=1),
        "without-replacement": run_tree_engine(_case("without-replacement-verified-as-iid"),
                                               40),
        "tree-and-chain": run_tree_and_chain_engine(40, reuse=True),
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = root / f"{name}.jsonl"
        paths[name].write_text(text)
    return paths


def _report(checker: Any) -> str:
    return json.dumps(checker.report().to_json(), sort_keys=True)


def _assert_pieces_match(path: str, tmp_path: Path) -> dict[str, Any]:
    lines = len(Path(path).read_bytes().splitlines())
    whole_state = check_piece((path, 2, None))
    whole = _report(whole_state)
    assert whole == json.dumps(check_trace(read_trace(path)).to_json(), sort_keys=True)
    for cuts in ([3], [lines // 2], [lines - 1], [5, lines // 3, 2 * lines // 3],
                 list(range(4, lines, 7))):
        bounds = [2, *cuts, lines + 1]
        states = [check_piece((path, first, last - 1))
                  for first, last in itertools.pairwise(bounds)]
        if cuts == [lines // 2] or len(cuts) > 3:  # carried between machines as JSON
            for i, state in enumerate(states):
                save_state(state, tmp_path / f"{i}.json.gz")
            states = [load_state(tmp_path / f"{i}.json.gz") for i in range(len(states))]
        assert _report(merge_states(states)) == whole, (path, cuts)
    report: dict[str, Any] = json.loads(whole)
    return report


@pytest.mark.parametrize("name", ["correct", "keyed", "coin-reused", "replay-and-support",
                                  "without-replacement", "tree-and-chain"])
def test_tree_pieces_merged_report_what_one_pass_reports(
    name: str, traces: dict[str, Path], tmp_path: Path
) -> None:
    report = _assert_pieces_match(str(traces[name]), tmp_path)
    verdicts = {c["name"]: c["verdict"] for c in report["checks"]}
    # The traces reach every check's diagnosis: each broken one fails where it should.
    failing = {"correct": set(), "keyed": {"tree-fresh"}, "coin-reused": {"tree-fresh"},
               "replay-and-support": {"tree-replay", "tree-support"},
               "without-replacement": {"tree-replay"}, "tree-and-chain": {"fresh"}}[name]
    assert failing <= {n for n, v in verdicts.items() if v == Verdict.FAIL.value}, verdicts
    if name == "correct":
        assert all(v == Verdict.PASS.value for n, v in verdicts.items()
                   if n != "tree-rewind"), verdicts


def test_tree_generator_trace_in_pieces(tmp_path: Path) -> None:
    """The library's tree generator records cache offsets too: the rewind check's state
    merges as the others do."""
    pytest.importorskip("mlx_lm")
    from specaccept import SamplerConfig, load_pair
    from specaccept.shell.conformance.tree_record import trace_tree_generator
    from specaccept.shell.tree_generator import TreeSpeculativeGenerator

    pair: Any = load_pair()
    generator = TreeSpeculativeGenerator(pair.target, pair.drafter,
                                         SamplerConfig(temperature=0.7), width=2, depth=2)
    stream = io.StringIO()
    trace_tree_generator(generator, [int(t) for t in pair.tokenizer.encode("ROMEO:\n")], 40,
                         stream, seed=3)
    path = tmp_path / "generator.jsonl"
    path.write_text(stream.getvalue())
    report = _assert_pieces_match(str(path), tmp_path)
    assert {c["name"]: c["verdict"] for c in report["checks"]}["tree-rewind"] == "pass"


def test_tree_replicas_checked_in_parallel(traces: dict[str, Path], tmp_path: Path) -> None:
    """Two files of one engine (runs "0" and "1", the second replaying the first's
    uniforms), checked by two processes, report what one process reports."""
    paths = []
    for i, name in enumerate(("correct", "correct")):
        text = traces[name].read_text().replace('"run":"0"', f'"run":"{i}"')
        paths.append(str(tmp_path / f"replica-{i}.jsonl"))
        Path(paths[-1]).write_text(text)
    assert '"run":"1"' in Path(paths[1]).read_text()
    one = _report(merge_states([check_piece((p, 2, None)) for p in paths]))
    assert _report(check_paths(paths, jobs=2)) == one
    fresh = next(c for c in json.loads(one)["checks"] if c["name"] == "tree-fresh")
    assert fresh["verdict"] == "fail", fresh  # the re-reads are seen across the files


def test_tree_state_saved_and_merged_by_the_command(traces: dict[str, Path],
                                                    tmp_path: Path) -> None:
    path = str(traces["keyed"])
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for i in (1, 2):
        subprocess.run([sys.executable, "-c", ENTRY, "conform", path, "--piece", f"{i}/2",
                        "--save-state", str(tmp_path / f"{i}.json")], check=True, env=env,
                       capture_output=True)
    merged = subprocess.run([sys.executable, "-c", ENTRY, "conform", "--merge",
                             str(tmp_path / "1.json"), str(tmp_path / "2.json"), "--json"],
                            env=env, capture_output=True, text=True)
    assert merged.returncode == 1, merged.stderr  # the keyed engine fails tree-fresh
    report = json.loads(merged.stdout)
    report.pop("times_s", None)
    assert report == check_trace(read_trace(path)).to_json()


def _fresh_one_pass(reads: list[list[float]]) -> tuple[int, int, int, tuple[Any, ...] | None]:
    """Today's definition, read off the flat sequence: D, the reads, the sum over reads of
    the distinct values read before each, and the first re-read (read, value, round, round
    that read it first)."""
    earlier: dict[float, int] = {}
    rereads = count = total = 0
    first = None
    for ordinal, values in enumerate(reads):
        for value in values:
            total += len(earlier)
            if value in earlier:
                rereads += 1
                first = first or (count, value, ordinal, earlier[value])
            earlier.setdefault(value, ordinal)
            count += 1
    return rereads, count, total, first


def test_tree_fresh_merge_equals_one_pass_at_every_cut() -> None:
    rng = random.Random(0)
    for _ in range(40):
        reads = [[rng.choice([0.25, 0.5, 0.75, 0.125, 0.375]) for _ in range(rng.randint(0, 3))]
                 for _ in range(rng.randint(1, 8))]
        expected = _fresh_one_pass(reads)
        states = []
        for ordinal, values in enumerate(reads):
            state = TreeFreshState()
            state.read(values, ordinal, ordinal + 2, "0")
            states.append(state)
        for cut in range(1, len(states)):
            left, right = TreeFreshState(), TreeFreshState()
            for state in states[:cut]:
                left.merge(json_round_trip(state))
            for state in states[cut:]:
                right.merge(json_round_trip(state))
            left.merge(right)
            got = (left.rereads, left.reads, left.earlier_count, left.first)
            assert got == expected, (reads, cut, got, expected)


def json_round_trip(state: TreeFreshState) -> TreeFreshState:
    from specaccept.conformance.pieces import _STATES

    copy = TreeFreshState.from_json(json.loads(json.dumps(state.to_json())), _STATES)
    assert isinstance(copy, TreeFreshState)
    return copy


def test_tree_law_jitter_is_fixed_by_the_token(traces: dict[str, Path]) -> None:
    """The jitter of a token depends on its run, round and depth alone: the law state of
    a piece is the same whatever came before it, and differs when the identity does."""
    rounds = [r for r in read_trace(traces["correct"]).tree_rounds]
    assert all(isinstance(r, TreeRound) for r in rounds)
    alone, after = TreeLawState(), TreeLawState()
    for round_ in rounds[60:]:
        alone.update(round_)
    for round_ in rounds:
        after.update(round_)
    before = TreeLawState()
    for round_ in rounds[:60]:
        before.update(round_)
    before.merge(alone)
    assert before.strata == after.strata
    assert tree_law_jitter(rounds[5], 0) != tree_law_jitter(rounds[6], 0)
    assert tree_law_jitter(rounds[5], 0) != tree_law_jitter(rounds[5], 1)
