"""The rewind check: the cache offsets every round against Lemma 7's invariant."""

from __future__ import annotations

from dataclasses import dataclass

from specaccept.conformance.bugs import DRAFT_CACHE_OVER_TRIM
from specaccept.conformance.exact import State
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Round

__all__ = ["RewindState"]


def _round_problems(round_: Round, prompt_length: int) -> list[str]:
    """How the round's offsets break the rewind lemma's four rules (spec/trace_format.md)."""
    cache = round_.cache
    assert cache is not None
    start = prompt_length + round_.position - 1  # L: tokens before the round's current token
    end = start + len(round_.emitted)  # L'
    problems = []
    before, fed = cache["target_before"], cache["target_fed"]
    if fed == round_.k + 1 and before != start:  # fed the current token and the drafts
        problems.append(f"target cache holds {before} entries at the start, {start} tokens "
                        "precede the current token")
    elif before > start or before + fed != start + 1 + round_.k:
        problems.append(f"target cache holds {before} entries at the start and is fed {fed}; "
                        f"{start} tokens precede the current token and {round_.k} drafts "
                        f"follow it, so it must be fed {start + 1 + round_.k - before}")
    if "draft_before" in cache and (cache["draft_before"] > start
                                    or cache["draft_before"] + cache["draft_fed"] != start + 1):
        problems.append(
            f"drafter cache holds {cache['draft_before']} entries and is fed "
            f"{cache['draft_fed']}: it ends "
            f"{cache['draft_before'] + cache['draft_fed'] - start - 1:+d} entries off the "
            "current token")
    if not round_.stopped:
        lazy_target, lazy_draft = round_.target_rewind == "lazy", round_.draft_rewind == "lazy"
        after = cache.get("target_after")
        if after is not None and lazy_target and after < end:
            problems.append(f"target cache holds {after} entries when the round ends; a lazy "
                            f"rewind leaves at least the {end} tokens before the next current "
                            "token")
        elif after is not None and not lazy_target and after != end:
            problems.append(f"target cache holds {after} entries after the rewind, {end} tokens "
                            "precede the next current token")
        after = cache.get("draft_after")
        if after is not None and lazy_draft and after < end - 1:
            problems.append(f"drafter cache holds {after} entries when the round ends; a lazy "
                            f"rewind leaves at least {end - 1}")
        elif after is not None and not lazy_draft and not end - 1 <= after <= end:
            problems.append(f"drafter cache holds {after} entries after the rewind; it must "
                            f"hold {end} (or {end - 1}, owing the last draft)")
    return problems


@dataclass
class RewindState(State):
    """The rewind check's state: rounds with offsets, rounds off the invariant, the first."""

    rounds: int = 0
    bad: int = 0
    first: str = ""
    drafter_shown: bool = False
    """Whether a round after the first one with offsets records the drafter's cache."""

    def update(self, round_: Round) -> None:
        if round_.cache is None or round_.run.prompt_length is None:
            return
        shows = "draft_before" in round_.cache or "draft_after" in round_.cache
        if self.rounds:
            self.drafter_shown = self.drafter_shown or shows
        else:
            self.first_shows_drafter = shows
        self.rounds += 1
        problems = _round_problems(round_, round_.run.prompt_length)
        if problems:
            run = f"run {round_.run.id!r} " if round_.run.id else ""
            self.bad += 1
            self.first = self.first or (f"{run}round {round_.index} (line {round_.line}): "
                                        + "; ".join(problems))

    def merge(self, other: RewindState) -> None:
        # The other piece's first round is a later round once this piece has one.
        self.drafter_shown = self.drafter_shown or other.drafter_shown or (
            self.rounds > 0 and other.first_shows_drafter)
        if not self.rounds:
            self.first_shows_drafter = other.first_shows_drafter
        self.rounds += other.rounds
        self.bad += other.bad
        self.first = self.first or other.first

    first_shows_drafter: bool = False
    """Whether the piece's first round with offsets records the drafter's cache."""

    def result(self) -> CheckResult:
        """The rewind lemma's cache invariant every round with offsets; zero tolerance."""
        name, threshold = "rewind", "0 rounds off the invariant"
        if not self.rounds:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "the trace records no cache offsets")
        powers = [Power(DRAFT_CACHE_OVER_TRIM.id, 1.0 if self.drafter_shown else None,
                        "deterministic: every round after the first shows it")]
        return CheckResult(
            name, Verdict.FAIL if self.bad else Verdict.PASS,
            f"rounds off = {self.bad} of {self.rounds}", threshold, self.first, powers,
        )
