"""How far to rewind both KV caches after a round."""

from __future__ import annotations

from typing import NamedTuple

from specaccept.core import validation

__all__ = ["RewindPlan", "rewind_trim"]


class RewindPlan(NamedTuple):
    """What to do to the caches after a round, in this order."""

    target_trim: int
    """Entries to trim from the end of the target's cache."""
    draft_trim: int
    """Entries to trim from the end of the drafter's cache."""
    draft_backfill: bool
    """True when every draft was accepted, so the last draft is forwarded to the drafter."""


def rewind_trim(num_draft: int, num_accepted: int) -> RewindPlan:
    """Plan the cache rewind after a round of `num_draft` drafts with `num_accepted` kept.

    In the round the target forwarded ``[current, d0 .. d(n-1)]`` (n + 1
    entries) and the drafter ``[current, d0 .. d(n-2)]`` (n entries). The next
    round's current token is the one emitted after the accepted prefix, so
    both caches must end holding the ``a + 1`` entries ``current, d0 .. d(a-1)``:
    the target trims ``n - a``; the drafter trims ``n - a - 1``, except when all
    n were accepted, when it lacks ``d(n-1)`` and is backfilled instead.

    Raises:
        ValueError: unless ``num_draft >= 1`` and ``0 <= num_accepted <= num_draft``.

    >>> rewind_trim(4, 0)
    RewindPlan(target_trim=4, draft_trim=3, draft_backfill=False)
    >>> rewind_trim(4, 2)
    RewindPlan(target_trim=2, draft_trim=1, draft_backfill=False)
    >>> rewind_trim(4, 4)
    RewindPlan(target_trim=0, draft_trim=0, draft_backfill=True)
    """
    n = validation.integer("num_draft", num_draft)
    a = validation.integer("num_accepted", num_accepted)
    if n < 1:
        raise ValueError(f"num_draft must be >= 1, got {n}")
    if not 0 <= a <= n:
        raise ValueError(f"num_accepted must lie in [0, num_draft] = [0, {n}], got {a}")
    if a == n:
        return RewindPlan(target_trim=0, draft_trim=0, draft_backfill=True)
    return RewindPlan(target_trim=n - a, draft_trim=n - a - 1, draft_backfill=False)
