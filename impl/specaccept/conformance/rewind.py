"""The rewind check: the cache offsets every round against Lemma 7's invariant."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    """The rewind check's state: rounds with offsets, rounds off the invariant, the first,
    and per run what the power model reads."""

    rounds: int = 0
    bad: int = 0
    first: str = ""
    drafter_shown: bool = False
    """Whether some run has a round after its first one with offsets that records the
    drafter's cache as the round starts (``draft_before``)."""
    run_first_shows: dict[str, bool] = field(default_factory=dict)
    """Whether the first round with offsets of each run in the piece records
    ``draft_before`` (a later piece's first round of a run is a later round of that run)."""

    def update(self, round_: Round) -> None:
        if round_.cache is None or round_.run.prompt_length is None:
            return
        shows = "draft_before" in round_.cache
        run_id = round_.run.id
        if run_id in self.run_first_shows:
            self.drafter_shown = self.drafter_shown or shows
        else:
            self.run_first_shows[run_id] = shows
        self.rounds += 1
        problems = _round_problems(round_, round_.run.prompt_length)
        if problems:
            run = f"run {run_id!r} " if run_id else ""
            self.bad += 1
            self.first = self.first or (f"{run}round {round_.index} (line {round_.line}): "
                                        + "; ".join(problems))

    def merge(self, other: RewindState) -> None:
        self.drafter_shown = self.drafter_shown or other.drafter_shown or any(
            shows for run_id, shows in other.run_first_shows.items()
            if run_id in self.run_first_shows)
        for run_id, shows in other.run_first_shows.items():
            self.run_first_shows.setdefault(run_id, shows)
        self.rounds += other.rounds
        self.bad += other.bad
        self.first = self.first or other.first

    def result(self) -> CheckResult:
        """The rewind lemma's cache invariant every round with offsets; zero tolerance.

        Power against over-trimming the drafter's cache: a run's first round starts from
        the prompt, so only how it ends can show the bug, and it need not (all drafts kept,
        or none, leaves an over-trimmed cache within the lemma's slack); every later round
        of the run starts from the cache the round before left, and its ``draft_before`` plus
        ``draft_fed`` misses the current token. So the power is 1 once some run records
        ``draft_before`` on a round after its first, and not modelled before."""
        name, threshold = "rewind", "0 rounds off the invariant"
        if not self.rounds:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "the trace records no cache offsets")
        power = (Power(DRAFT_CACHE_OVER_TRIM.id, 1.0, "deterministic: every round after a "
                       "run's first shows it")
                 if self.drafter_shown else
                 Power(DRAFT_CACHE_OVER_TRIM.id, None, "no run records the drafter's cache "
                       "(draft_before) on a round after its first, and a run's first round "
                       "shows the bug only by chance"))
        return CheckResult(
            name, Verdict.FAIL if self.bad else Verdict.PASS,
            f"rounds off = {self.bad} of {self.rounds}", threshold, self.first, [power],
        )
