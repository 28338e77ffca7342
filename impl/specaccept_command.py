"""The `specaccept` console command, before the library loads.

Importing `specaccept` loads MLX, about 0.2 s in which an interrupt would otherwise end in a
traceback from inside an import, or worse: MLX's extension, interrupted while it
initialises, reports an ImportError or aborts. So this module imports nothing of the library
at load time, and `main` loads it with SIGINT held: an interrupt then is raised once the
import is done, inside the guard, and exits 130 in one line like one that comes later. (The
interpreter's own start-up, before this module runs, is Python's and not covered.)
"""

from __future__ import annotations

import signal
import sys

__all__ = ["EXIT_INTERRUPTED", "main"]

EXIT_INTERRUPTED = 130
"""128 + SIGINT: the status of a command the user interrupted."""


def main() -> int:
    """Load the command-line interface and run it; an interrupt while either runs exits 130."""
    try:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            from specaccept.cli import main as run
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return run()
    except KeyboardInterrupt:
        sys.stderr.write("specaccept: interrupted\n")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
