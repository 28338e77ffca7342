"""Where a speculative round's time goes, measured rather than inferred.

A round queues lazy work and synchronises once, so its wall time alone cannot say
what the drafter, the target, the sampler and Python each cost. A `RoundClock`
handed to a generator measures it in one of two ways:

- **pipelined** (the round as it runs): per round, the wall time and the time the
  host waits in the round's one synchronisation; host time is the difference, the
  Python that builds the round's graphs, dispatches them and books the result. The
  host time is also split at each phase's end (`HOST_PARTS`), so a slow host shows
  which part of the round it spends its time on.
- **phased** (a separate, slower run for the breakdown): every phase is evaluated
  and synchronised on its own, so each phase's device time is timed alone, and the
  Python between two phases is timed apart from it. A phased round synchronises
  2k + 3 times: it measures the pieces, never the throughput.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx

__all__ = ["HOST_PARTS", "PHASES", "RoundClock"]

PHASES = (
    "drafter forward",
    "draft sampling",
    "target forward",
    "sampling and verification",
    "host sync wait",
    "python",
)
"""The phases a phased clock reports, in the order a round runs them."""

HOST_PARTS = (*(f"host: {name}" for name in PHASES[:4]), "host: after sync")
"""A pipelined clock's host time, split where each phase ends: building a phase's graphs
and dispatching what the generator launches early (each draft, the target forward); the
verification is dispatched by the synchronisation, whose wait is not host time."""


@dataclass
class RoundClock:
    """Seconds per phase, summed over the rounds a generator ran with this clock.

    Args:
        phased: evaluate each phase on its own (the breakdown) instead of timing
            the pipelined round.
    """

    phased: bool = False
    rounds: int = field(default=0, init=False)
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float), init=False)
    _mark: float = field(default=0.0, init=False, repr=False)
    _round_start: float = field(default=0.0, init=False, repr=False)
    _part: str = field(default=HOST_PARTS[0], init=False, repr=False)

    def start_round(self) -> None:
        """A round begins: its Python time counts from here."""
        self._round_start = self._mark = time.perf_counter()

    def phase(self, name: str, *arrays: Any) -> None:
        """A phase's work is queued; a phased clock evaluates and times it now."""
        start = time.perf_counter()
        if not self.phased:
            self._part = f"host: {name}"
            self.seconds[self._part] += start - self._mark
            self._mark = start
            return
        self.seconds["python"] += start - self._mark
        mx.eval(*arrays)
        self._mark = time.perf_counter()
        self.seconds[name] += self._mark - start

    def synchronise(self, *arrays: mx.array) -> None:
        """The round's one host synchronisation, timed as the wait it is."""
        start = time.perf_counter()
        # What ran since the last phase ended belongs to it (a pipelined clock's part).
        self.seconds["python" if self.phased else self._part] += start - self._mark
        mx.eval(*arrays)
        self._mark = time.perf_counter()
        self.seconds["host sync wait"] += self._mark - start

    def end_round(self) -> None:
        """The round's result is booked; what followed the sync is Python."""
        end = time.perf_counter()
        if self.phased:
            self.seconds["python"] += end - self._mark
        else:
            self.seconds["host: after sync"] += end - self._mark
            self.seconds["round"] += end - self._round_start
        self.rounds += 1

    def per_round(self) -> dict[str, float]:
        """Mean seconds per round of each measured phase.

        A pipelined clock reports `round`, `host sync wait`, `host` (round minus
        wait) and its parts, `HOST_PARTS`; a phased clock reports the `PHASES`.
        """
        if not self.rounds:
            return {}
        means = {name: total / self.rounds for name, total in self.seconds.items()}
        if not self.phased and "round" in means:
            means["host"] = means["round"] - means.get("host sync wait", 0.0)
        return means
