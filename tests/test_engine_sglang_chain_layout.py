"""SGLang's chain-verifier layout (examples/engines/sglang/chain_layout.py), read as rounds.

No torch: the kernel's outputs below are worked by hand from its rule (standard: accept
draft i when ``coin_i * q(d_i) < p(d_i)``; block: the longest prefix whose keep test
passes), and the mapped rounds must come out of `verify_tokenwise` / `verify_blockwise`
with the same verdict, which a map that shifts the coins by one slot, or puts the final
coin anywhere but ``uniforms[a][1]``, does not. Outputs that are no chain verdict are
refused by name. The recorders' command lines refuse bad settings before loading anything.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

from engines.sglang.chain_layout import LayoutError, chain_arrays, chain_round  # noqa: E402

from specaccept import AcceptanceRule, verify_blockwise, verify_tokenwise  # noqa: E402

# Two drafts, V = 4: d_0 = 1 (p 0.25, q 0.5), d_1 = 0 (p 0.25, q 0.5).
TARGET = [[0.5, 0.25, 0.125, 0.125], [0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]]
DRAFT = [[0.25, 0.5, 0.125, 0.125], [0.5, 0.5, 0.0, 0.0]]
COINS = [0.25, 0.625, 0.875]  # the kernel reads coins[0..k-1]; coins[k] is never read
FINAL_COIN = 0.5


def _kernel_outputs(slot0: int) -> tuple[list[int], list[int], int]:
    """The request's outputs at batch slot 1 (global slots 3, 4, 5), by hand.

    Standard rule: 0.25 * 0.5 < 0.25 accepts d_0, 0.625 * 0.5 < 0.25 fails d_1; the
    residual max(p_1 - q_1, 0) = (0, 0, 0.25, 0.25) at 0.5 of its mass 0.5 draws id 3.
    Block: w = (0.5, 0.25); h_2 = 0.25 < 0.625 fails; Z_1 = sum max(0.5 p_1 - q_1, 0) =
    0.25, h_1 = 0.25 / 0.75 > 0.25 keeps d_0; the residual max(0.5 p_1 - q_1, 0) =
    (0, 0, 0.125, 0.125) at 0.5 of 0.25 draws id 3 too.
    """
    predicts = [0] * 9
    predicts[slot0], predicts[slot0 + 1] = 1, 3
    return predicts, [slot0, slot0 + 1, -1], 1


def test_the_batch_is_laid_out_as_chains() -> None:
    arrays = chain_arrays([7, 9], [[1, 0], [2, 2]])
    assert arrays.candidates == [[7, 1, 0], [9, 2, 2]]
    assert arrays.retrive_index == [[0, 1, 2], [3, 4, 5]]
    assert arrays.retrive_next_token == [[1, 2, -1], [1, 2, -1]]
    assert arrays.retrive_next_sibling == [[-1, -1, -1], [-1, -1, -1]]


@pytest.mark.parametrize("block", [False, True])
def test_a_mapped_round_replays_as_the_kernel_decided(block: bool) -> None:
    predicts, accept_index, a = _kernel_outputs(3)
    arrays = chain_arrays([7, 9], [[2, 2], [1, 0]])
    verdict = chain_round(arrays.candidates[1], arrays.retrive_index[1], accept_index, a,
                          predicts, COINS, FINAL_COIN, block=block)
    assert verdict.draft_tokens == [1, 0] and verdict.emitted == [1, 3]
    assert verdict.num_accepted == 1
    # a + 1 = k = 2: both rules read both coins here
    assert [row[0] for row in verdict.uniforms] == [0.25, 0.625, None]
    assert [row[1] for row in verdict.uniforms] == [None, FINAL_COIN, None]
    uniforms = mx.array([[0.0 if u is None else u for u in row] for row in verdict.uniforms])
    target, draft, tokens = mx.array(TARGET), mx.array(DRAFT), mx.array(verdict.draft_tokens)
    spec = (verify_blockwise(target, draft, tokens, uniforms) if block
            else verify_tokenwise(AcceptanceRule.STOCHASTIC, target, draft, tokens, uniforms))
    assert (spec.num_accepted.item(), spec.next_token.item()) == (1, 3)
    # The same outputs read with the coins one slot later (the slot-0 coin unread) decide
    # otherwise: the map's alignment is what the replay holds.
    shifted = mx.array([[COINS[1], 0.0], [COINS[2], FINAL_COIN], [0.0, 0.0]])
    wrong = (verify_blockwise(target, draft, tokens, shifted) if block
             else verify_tokenwise(AcceptanceRule.STOCHASTIC, target, draft, tokens, shifted))
    assert wrong.num_accepted.item() != 1


def test_the_standard_rule_reads_only_the_tested_coins() -> None:
    predicts = [5, 0, 0, 0]
    verdict = chain_round([7, 1, 0, 2], [0, 1, 2, 3], [0, -1, -1, -1], 0, predicts,
                          [0.5, 0.25, 0.125, 0.0625], 0.75, block=False)
    assert verdict.emitted == [5] and verdict.num_accepted == 0
    assert verdict.uniforms == [[0.5, 0.75], [None, None], [None, None], [None, None]]
    block = chain_round([7, 1, 0, 2], [0, 1, 2, 3], [0, -1, -1, -1], 0, predicts,
                        [0.5, 0.25, 0.125, 0.0625], 0.75, block=True)
    assert block.uniforms == [[0.5, 0.75], [0.25, None], [0.125, None], [None, None]]


@pytest.mark.parametrize(("accept_index", "a", "predicts", "message"), [
    ([3, 4, -1], 3, [0, 0, 0, 1, 3, 0], "accept_token_num must lie in [0, 2], got 3"),
    ([3, 5, -1], 1, [0, 0, 0, 1, 3, 0], "accept_index must be the chain's first 2 slots"),
    ([3, 4, 5], 1, [0, 0, 0, 1, 3, 0], "accept_index must be the chain's first 2 slots"),
    ([3, 4, -1], 1, [0, 0, 0, 2, 3, 0], "predicts at the accepted slots must be the "
                                        "accepted drafts [1], got [2]"),
])
def test_outputs_that_are_no_chain_verdict_are_refused(
    accept_index: list[int], a: int, predicts: list[int], message: str,
) -> None:
    with pytest.raises(LayoutError) as error:
        chain_round([9, 1, 0], [3, 4, 5], accept_index, a, predicts, COINS, FINAL_COIN,
                    block=False)
    assert message in str(error.value)


def test_a_ragged_batch_is_refused() -> None:
    with pytest.raises(LayoutError, match=r"same k >= 1 drafts, got counts \[1, 2\]"):
        chain_arrays([7, 9], [[1], [2, 2]])
    with pytest.raises(LayoutError, match="got 1 roots and 2 draft lists"):
        chain_arrays([7], [[1], [2]])


def _recorder() -> Any:
    import importlib.util

    path = ROOT / "examples" / "engines" / "sglang" / "record_chain.py"
    spec = importlib.util.spec_from_file_location("sglang_chain_recorder", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sglang_chain_recorder"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("argv", "message"), [
    (["--rounds", "0", "--out", "t"], "--rounds must be at least 1, got 0"),
    (["--rounds", "5", "--out", "t", "--vocab", "8"], "--vocab must be at least 16, got 8"),
    (["--rounds", "5", "--out", "t", "--thresholds", "0.9", "2"],
     "--thresholds must lie in [0, 1], got 2.0"),
    (["--rounds", "5", "--out", "t", "--mutant", "x"], "invalid choice: 'x'"),
    (["--rounds", "5"], "give --out TRACE, or --summary-only to write no trace"),
    (["--rounds", "5", "--out", "t", "--temperatures", "0.7,0"],
     "--temperatures 0 (greedy) needs --verifier greedy"),
    (["--rounds", "5", "--out", "t", "--temperatures", "0.01"],
     "--temperatures entries must be 0 or lie in [0.05, 100], got 0.01"),
    (["--rounds", "5", "--out", "t", "--verifier", "greedy", "--block"],
     "--verifier greedy takes neither --block nor --mutant"),
    (["--rounds", "5", "--out", "/nonexistent-dir/t.jsonl"],
     "--out /nonexistent-dir/t.jsonl: the directory /nonexistent-dir does not exist"),
])
def test_bad_recorder_settings_are_refused_by_name(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    recorder = _recorder()
    with pytest.raises(SystemExit) as exit_:
        recorder.parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err



@pytest.mark.parametrize(("argv", "message"), [
    (["--out", "t", "--sampled"], "--sampled needs --kernel greedy-triton"),
    (["--out", "t", "--kernel", "greedy-triton", "--fixed-cases"],
     "--fixed-cases are the sampling kernel's cases, not --kernel greedy-triton's"),
])
def test_bad_greedy_tree_settings_are_refused_by_name(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    path = ROOT / "examples" / "engines" / "sglang" / "record.py"
    spec = importlib.util.spec_from_file_location("sglang_tree_recorder", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve the module's string annotations through sys.modules
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit) as exit_:
        module.parse_args(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
