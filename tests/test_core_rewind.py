"""The cache rewind plan, replayed against list-backed caches (issue #994 of the engine).

A cache is modelled as the list of tokens whose entries it holds. Invariant after
every round: both caches hold the prompt plus every emitted token before the
next round's current token, so the next forward of `current` is conditioned on
exactly the emitted history.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from specaccept import RewindPlan, rewind_trim

Planner = Callable[[int, int], RewindPlan]


def old_engine_plan(num_draft: int, num_accepted: int) -> RewindPlan:
    """The engine's pre-#994 arithmetic: target trim n - a, draft trim min(n - a + 1, n)."""
    rejected = num_draft - num_accepted
    if rejected == 0:
        return RewindPlan(target_trim=0, draft_trim=0, draft_backfill=False)
    return RewindPlan(rejected, min(rejected + 1, num_draft), draft_backfill=False)


def _trim(cache: list[int], count: int) -> None:
    assert 0 <= count <= len(cache)
    del cache[len(cache) - count :]


class Replay:
    """A generation run with list caches, a rewind planner and a chooser of num_accepted."""

    def __init__(self, planner: Planner, prompt: list[int]) -> None:
        self.planner = planner
        self.prompt = list(prompt)
        self.target = list(prompt)  # prefill: the prompt's entries are in both caches
        self.draft = list(prompt)
        self.emitted = [1000]  # the first token sampled after prefill is the first current
        self.fresh = 1001  # every drafted or emitted token is distinct, so a slip shows

    def _token(self) -> int:
        self.fresh += 1
        return self.fresh

    def round(self, num_draft: int, num_accepted: int) -> None:
        current = self.emitted[-1]
        drafts = [self._token() for _ in range(num_draft)]
        self.draft += [current, *drafts[:-1]]  # the drafter forwards n tokens
        self.target += [current, *drafts]  # the target verifies n + 1
        replacement = self._token()
        self.emitted += [*drafts[:num_accepted], replacement]
        plan = self.planner(num_draft, num_accepted)
        _trim(self.target, plan.target_trim)
        _trim(self.draft, plan.draft_trim)
        if plan.draft_backfill:
            self.draft.append(drafts[-1])

    def expected(self) -> list[int]:
        return self.prompt + self.emitted[:-1]

    def consistent(self) -> bool:
        return self.target == self.expected() and self.draft == self.expected()


def _regime(name: str, rng: random.Random, n: int) -> int:
    if name == "all-reject":
        return 0
    if name == "all-accept":
        return n
    return rng.randint(0, n)


REGIMES = ["all-reject", "mixed", "all-accept"]


@pytest.mark.parametrize("regime", REGIMES)
def test_rewind_plan_keeps_both_caches_on_the_emitted_history(regime: str) -> None:
    rng = random.Random(regime)
    for _ in range(40):
        replay = Replay(rewind_trim, prompt=[rng.randint(0, 99) for _ in range(rng.randint(1, 5))])
        for _ in range(30):
            n = rng.randint(1, 8)
            replay.round(n, _regime(regime, rng, n))
            assert replay.target == replay.expected()
            assert replay.draft == replay.expected()


@pytest.mark.parametrize("regime", REGIMES)
def test_the_old_engine_formula_fails_the_same_replay(regime: str) -> None:
    rng = random.Random(regime)
    failed = 0
    for _ in range(40):
        prompt = [rng.randint(0, 99) for _ in range(rng.randint(1, 5))]
        replay = Replay(old_engine_plan, prompt=prompt)
        for _ in range(30):
            n = rng.randint(1, 8)
            replay.round(n, _regime(regime, rng, n))
            if not replay.consistent():
                failed += 1
                break
    assert failed == 40  # every run drifts


def test_old_formula_freezes_the_drafter_at_the_prompt_when_everything_is_rejected() -> None:
    # The evidence: a drafter that never agrees, 24 emitted tokens, one-token prompt.
    for n in range(1, 9):
        replay = Replay(old_engine_plan, prompt=[7])
        while len(replay.emitted) < 24:
            replay.round(n, 0)
        assert len(replay.target) == len(replay.emitted)  # the target cache is right
        assert replay.target == replay.expected()
        assert replay.draft == [7]  # the drafter never advances past the prompt
        fixed = Replay(rewind_trim, prompt=[7])
        while len(fixed.emitted) < 24:
            fixed.round(n, 0)
        assert fixed.draft == fixed.expected()
        assert len(fixed.draft) == 24


@pytest.mark.parametrize("n", range(1, 9))
def test_rewind_trim_closed_form(n: int) -> None:
    for a in range(n + 1):
        plan = rewind_trim(n, a)
        assert isinstance(plan, RewindPlan)
        if a == n:
            assert plan == RewindPlan(0, 0, True)
        else:
            assert plan == RewindPlan(n - a, n - a - 1, False)


@pytest.mark.parametrize(
    ("num_draft", "num_accepted", "error", "match"),
    [
        (0, 0, ValueError, "num_draft"),
        (-1, 0, ValueError, "num_draft"),
        (4, -1, ValueError, "num_accepted"),
        (4, 5, ValueError, "num_accepted"),
        (1, 2, ValueError, "num_accepted"),
        (4.0, 1, TypeError, "num_draft"),
        (True, 0, TypeError, "num_draft"),
        (4, 1.0, TypeError, "num_accepted"),
        (4, False, TypeError, "num_accepted"),
        ("4", 1, TypeError, "num_draft"),
        (4, None, TypeError, "num_accepted"),
    ],
)
def test_rewind_trim_rejects_bad_counts(
    num_draft: object, num_accepted: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        rewind_trim(num_draft, num_accepted)  # type: ignore[arg-type]
