"""The rewind check: the cache offsets every round against Lemma 7's invariant."""

from __future__ import annotations

from specaccept.conformance.bugs import DRAFT_CACHE_OVER_TRIM
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Round, Trace

__all__ = ["check_rewind"]


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


def check_rewind(trace: Trace) -> CheckResult:
    """The rewind lemma's cache invariant every round with offsets; zero tolerance."""
    name, threshold = "rewind", "0 rounds off the invariant"
    rounds = [r for r in trace.rounds if r.cache is not None and r.run.prompt_length is not None]
    if not rounds:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                           "the trace records no cache offsets")
    bad: list[str] = []
    for round_ in rounds:
        assert round_.run.prompt_length is not None
        problems = _round_problems(round_, round_.run.prompt_length)
        if problems:
            run = f"run {round_.run.id!r} " if round_.run.id else ""
            bad.append(f"{run}round {round_.index} (line {round_.line}): " + "; ".join(problems))
    powers = [Power(DRAFT_CACHE_OVER_TRIM.id,
                    1.0 if any(r.cache and ("draft_before" in r.cache or "draft_after" in r.cache)
                               for r in rounds[1:]) else None,
                    "deterministic: every round after the first shows it")]
    return CheckResult(
        name, Verdict.FAIL if bad else Verdict.PASS, f"rounds off = {len(bad)} of {len(rounds)}",
        threshold, bad[0] if bad else "", powers,
    )
