"""Command-line arguments the engines' recorders share."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["integer_at_least"]


def integer_at_least(name: str, low: int) -> Callable[[str], int]:
    """An argparse type: a whole number no smaller than `low`, refused by `name` otherwise."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{name} must be at least {low}, got {value}")
        return value
    return parse
