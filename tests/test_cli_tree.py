"""`specaccept generate --tree WIDTHxDEPTH`: a tree run on the demo pair, and every bad value
refused in one line that names the option and the value, before any model loads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specaccept.cli import main

TREE_SUMMARY = re.compile(
    r"^\[Tree speculation\] scheme=(iid|without-replacement|deterministic) tree=\d+x\d+ "
    r"rounds=\d+ drafted=\d+ nodes_tested=\d+ accepted=\d+ per_node_acceptance=\d\.\d{4} "
    r"mean_accepted_len=\d+\.\d{4} tokens_per_round=\d+\.\d{4}"
    r"( closed_form_per_node=\d\.\d{4} acceptance_z=-?\d+\.\d{2})?$",
    re.MULTILINE,
)


def test_generate_with_a_tree_prints_text_and_the_tree_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["generate", "--tree", "2x2", "-n", "16", "--diag", "--check-caches"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ROMEO:\n")
    match = TREE_SUMMARY.search(out)
    assert match is not None, out
    assert "scheme=iid tree=2x2 " in match.group(0) and "acceptance_z=" in match.group(0)
    assert re.search(r"^generated=16 seconds=", out, re.M)


def test_a_greedy_tree_prints_the_greedy_text(capsys: pytest.CaptureFixture[str]) -> None:
    main(["generate", "--temp", "0", "-n", "16", "--no-draft"])
    alone = capsys.readouterr().out.split("\n[")[0]
    main(["generate", "--temp", "0", "-n", "16", "--tree", "3x2", "--tree-scheme",
          "deterministic"])
    out = capsys.readouterr().out
    assert out.split("\n[")[0] == alone
    assert "scheme=deterministic tree=3x2 " in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--tree", "3"], "argument --tree: must be WIDTHxDEPTH, two integers >= 1 such as 2x3, "
     "got '3'"),
    (["--tree", "0x2"], "argument --tree: must be WIDTHxDEPTH, two integers >= 1 such as 2x3, "
     "got '0x2'"),
    (["--tree", "2x-1"], "got '2x-1'"),
    (["--tree", "twoxthree"], "got 'twoxthree'"),
    (["--tree", "2x11"], "argument --tree: '2x11': a tree of width 2 and depth 11 has 2**11 = 2048 "
     "root-to-leaf paths"),
    (["--tree", "2x2", "--tree-scheme", "bogus"], "argument --tree-scheme: invalid choice: "
     "'bogus'"),
    (["--tree-scheme", "iid"], "--tree-scheme iid needs --tree WIDTHxDEPTH"),
    (["--tree", "2x2", "--rule", "block"], "--tree 2x2 does not combine with --rule block"),
    (["--tree", "2x2", "--no-draft"], "--tree 2x2 does not combine with --no-draft"),
    (["--tree", "2x2", "--repetition-penalty", "1.2"],
     "--tree 2x2 does not combine with --repetition-penalty 1.2"),
    (["--tree", "2x2", "--tree-scheme", "without-replacement", "--temp", "0"],
     "scheme without-replacement needs a drafter law with at least width (2) tokens"),
])
def test_bad_tree_options_are_one_line_naming_the_option_and_value(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["generate", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.strip().splitlines()[-1:]) == 1 and "Traceback" not in err


@pytest.mark.parametrize("scheme", ["iid", "without-replacement", "deterministic"])
def test_table_with_a_tree_prints_the_tree_rows_against_the_closed_form(
    scheme: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record = tmp_path / "rows.json"
    assert main(["table", "--tree", "2x2", "--tree-scheme", scheme, "-n", "12",
                 "--temperatures", "0.7", "--rules", "block", "--prompts", "ROMEO:\n",
                 "--json", str(record)]) == 0
    out = capsys.readouterr().out
    row = re.search(rf"^\| 0\.7 \| 2x2 \| {scheme} \| (\d\.\d{{4}}) \| (\d\.\d{{4}}) "
                    r"\| \d\.\d{4} \| ([-+]\d+\.\d{2}) \|", out, re.M)
    assert row is not None, out
    assert abs(float(row.group(3))) < 4
    trees = [r for r in json.loads(record.read_text("utf-8")) if r.get("kind") == "tree"]
    assert [(r["tree"], r["scheme"]) for r in trees] == [("2x2", scheme)]


def test_bench_with_a_tree_compares_it_with_chains_of_as_many_drafts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record = tmp_path / "bench.json"
    assert main(["bench", "--tree", "2x1", "-n", "8", "--repeats", "1", "--json",
                 str(record)]) == 0
    out = capsys.readouterr().out
    for arm in ("target-only", "tree-2x1-iid", "chain-stochastic-k2", "chain-block-k2",
                "chain-stochastic-k1", "chain-block-k1"):
        assert re.search(rf"^\| {arm} \| \d+\.\d\d \|", out, re.M), (arm, out)
    comparison = json.loads(record.read_text("utf-8"))["tree_comparison"]
    assert comparison["settings"]["drafted_per_round"] == 2
    assert 1.0 <= comparison["tokens_per_round"]["tree-2x1-iid"] <= 2.0
