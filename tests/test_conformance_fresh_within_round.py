"""`fresh` counts a uniform a round reads twice, not only one a later round reads again.

Found on SGLang's released chain verifier driven with one coin for every draft of a block
round: fresh counted only re-reads across rounds, and 1,000 such rounds conformed."""

from __future__ import annotations

import numpy as np

from specaccept.conformance.fresh import FreshState


def _rounds(seed: int, count: int, shared: bool) -> list[list[float]]:
    """Each round's four accept coins and one draw: independent, or one coin for the four."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        coins = rng.random(5, dtype=np.float32).astype(float).tolist()
        if shared:
            coins[1:4] = [coins[0]] * 3
        out.append(coins)
    return out


def _state(rounds: list[list[float]]) -> FreshState:
    state = FreshState()
    for index, values in enumerate(rounds):
        state.read(values, index, index + 2, "run")
    return state


def test_a_round_that_reads_one_coin_for_its_four_tests_fails_fresh() -> None:
    state = _state(_rounds(1, 20, shared=True))
    assert state.rereads == 60
    result = state.result(1e-4)
    assert result.verdict.value == "fail"
    assert "twice" in result.detail


def test_independent_coins_pass() -> None:
    result = _state(_rounds(2, 2000, shared=False)).result(1e-4)
    assert result.verdict.value == "pass", result.detail


def test_the_within_round_count_merges_as_one_pass() -> None:
    # A coin an earlier piece read, read twice by the first round of the next: one pass
    # counts both reads; the pieces must too.
    rounds = _rounds(3, 12, shared=True)
    rounds[7][2:4] = [rounds[2][0]] * 2
    whole = _state(rounds)
    for cut in (1, 5, 7, 8, 11):
        head, tail = FreshState(), FreshState()
        for index, values in enumerate(rounds[:cut]):
            head.read(values, index, index + 2, "run")
        for index, values in enumerate(rounds[cut:], start=cut):
            tail.read(values, index, index + 2, "run")
        head.merge(tail)
        assert (head.rereads, head.earlier_count, head.first) == (
            whole.rereads, whole.earlier_count, whole.first), cut
