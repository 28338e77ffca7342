"""A dependency-free progress bar on stderr (stdout stays clean for tables)."""

from __future__ import annotations

import sys
import time


class Progress:
    """Counts steps of known total and redraws one stderr line."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.done = max(total, 1), label, 0
        self.start = time.perf_counter()
        self._draw("")

    def step(self, note: str = "") -> None:
        self.done += 1
        self._draw(note)
        if self.done >= self.total:
            sys.stderr.write("\n")

    def _draw(self, note: str) -> None:
        width = 24
        filled = width * self.done // self.total
        elapsed = time.perf_counter() - self.start
        sys.stderr.write(
            f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
            f"{self.done}/{self.total} {elapsed:6.1f}s {note[:40]:<40}"
        )
        sys.stderr.flush()
