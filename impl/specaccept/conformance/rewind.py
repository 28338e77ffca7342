"""The rewind check: the cache offsets every round against Lemma 7's invariant."""

from __future__ import annotations

from specaccept.conformance.bugs import DRAFT_CACHE_OVER_TRIM
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Trace

__all__ = ["check_rewind"]


def check_rewind(trace: Trace) -> CheckResult:
    """Lemma 7's cache invariant every round with offsets; zero tolerance."""
    name, threshold = "rewind", "0 rounds off the invariant"
    rounds = [r for r in trace.rounds if r.cache is not None]
    prompt_length = trace.prompt_length
    if not rounds or prompt_length is None:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                           "the trace records no cache offsets")
    bad: list[str] = []
    for round_ in rounds:
        cache = round_.cache
        assert cache is not None
        start = prompt_length + round_.position - 1  # tokens before the round's current token
        end = start + len(round_.emitted)
        where = f"round {round_.index} (line {round_.line})"
        problems = []
        if cache["target_before"] != start:
            problems.append(f"target cache holds {cache['target_before']} entries at the start, "
                            f"{start} tokens precede the current token")
        if "draft_before" in cache and cache["draft_before"] + cache["draft_fed"] != start + 1:
            problems.append(
                f"drafter cache holds {cache['draft_before']} entries and is fed "
                f"{cache['draft_fed']}: it ends "
                f"{cache['draft_before'] + cache['draft_fed'] - start - 1:+d} entries off the "
                "current token")
        if not round_.stopped:
            if "target_after" in cache and cache["target_after"] != end:
                problems.append(f"target cache holds {cache['target_after']} entries after the "
                                f"rewind, {end} tokens precede the next current token")
            if "draft_after" in cache and not end - 1 <= cache["draft_after"] <= end:
                problems.append(f"drafter cache holds {cache['draft_after']} entries after the "
                                f"rewind; it must hold {end} (or {end - 1}, owing the last draft)")
        if problems:
            bad.append(f"{where}: " + "; ".join(problems))
    powers = [Power(DRAFT_CACHE_OVER_TRIM.id,
                    1.0 if any(r.cache and ("draft_before" in r.cache or "draft_after" in r.cache)
                               for r in rounds[1:]) else None,
                    "deterministic: every round after the first shows it")]
    return CheckResult(
        name, Verdict.FAIL if bad else Verdict.PASS, f"rounds off = {len(bad)} of {len(rounds)}",
        threshold, bad[0] if bad else "", powers,
    )
