"""A check's result and the report of every check on one trace, as text or JSON."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckResult", "ConformanceReport", "Power", "Verdict"]


class Verdict(enum.StrEnum):
    """A check's verdict; its value is how the report writes it."""

    PASS = "pass"
    FAIL = "fail"
    NOT_RUN = "not run"
    """The trace lacks what the check reads (the result's detail says what)."""


@dataclass(frozen=True)
class Power:
    """The probability that a check would have caught a bug class on this trace."""

    bug: str
    probability: float | None
    """None when the bug class does not apply to this trace (see `note`)."""
    note: str = ""


@dataclass
class CheckResult:
    """One check's outcome."""

    name: str
    verdict: Verdict
    statistic: str
    """The statistic, as ``name = value``."""
    threshold: str
    """What the statistic is compared with."""
    detail: str = ""
    """The first failure's diagnosis, or why the check did not run."""
    power: list[Power] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {
            "name": self.name, "verdict": self.verdict.value, "statistic": self.statistic,
            "threshold": self.threshold, "detail": self.detail,
            "power": [
                {"bug": p.bug, "probability": p.probability, "note": p.note} for p in self.power
            ],
        }


@dataclass
class ConformanceReport:
    """Every check's result on one trace."""

    rounds: int
    positions_tested: int
    tokens: int
    alpha: float
    checks: list[CheckResult]
    truncated: str | None = None
    power_note: str = ""
    """How the powers were estimated, when not on every round."""

    @property
    def passed(self) -> bool:
        """True when no check failed."""
        return all(check.verdict is not Verdict.FAIL for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return {
            "rounds": self.rounds, "positions_tested": self.positions_tested,
            "tokens": self.tokens, "alpha": self.alpha, "truncated": self.truncated,
            "passed": self.passed, "checks": [c.to_json() for c in self.checks],
            "power_note": self.power_note,
        }

    def to_text(self, verbose: bool = True) -> str:
        """The report as lines a person reads; without `verbose`, the checks that did not
        run fold into one line and the power figures are left out."""
        lines = [
            f"trace: {self.rounds} rounds, {self.tokens} tokens, "
            f"{self.positions_tested} tested positions; alpha = {self.alpha:g} per check",
        ]
        if self.truncated:
            lines.append(f"TRUNCATED: {self.truncated}")
        skipped = []
        for check in self.checks:
            if not verbose and check.verdict is Verdict.NOT_RUN:
                skipped.append(f"{check.name} ({check.detail})" if check.detail else check.name)
                continue
            lines.append(
                f"{check.name:<10} {check.verdict.upper():<7} {check.statistic}  "
                f"(threshold: {check.threshold})"
            )
            if check.detail:
                lines.append(f"           {check.detail}")
            if not verbose:
                continue
            for power in check.power:
                if power.probability is None:
                    lines.append(f"           power vs {power.bug}: n/a ({power.note})")
                else:
                    lines.append(
                        f"           would have caught {power.bug} with probability "
                        f"{_at_least(power.probability)}"
                        + (f" ({power.note})" if power.note else "")
                    )
        if skipped:
            lines.append("not run: " + "; ".join(skipped))
        if self.power_note:
            lines.append(f"note: {self.power_note}")
        if not verbose and any(check.power for check in self.checks):
            lines.append("power against the known bug classes: run with --verbose")
        lines.append("verdict: " + ("CONFORMS" if self.passed else "DOES NOT CONFORM"))
        return "\n".join(lines)


def _at_least(probability: float) -> str:
    """'>= p' with p rounded down, or '< 0.0001' for a probability that rounds to 0."""
    shown = _floor(probability)
    return "< 0.0001" if shown == "0.0000" else f">= {shown}"


def _floor(probability: float) -> str:
    """A probability rounded down, so a printed lower bound stays a lower bound."""
    if probability >= 1.0:
        return "1"
    if probability > 1 - 1e-6:
        return "0.999999"
    return f"{math.floor(probability * 10_000) / 10_000:.4f}"
