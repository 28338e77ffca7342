"""The ``rewind_trim`` vectors.
"""

from __future__ import annotations

from specaccept import rewind_trim

from .common import Vector, check_equal, vector

# --- rewind_trim -------------------------------------------------------------------------------


def rewind_trim_vectors() -> list[Vector]:
    out: list[Vector] = []
    for n in range(1, 9):
        for a in range(n + 1):
            plan = rewind_trim(n, a)
            # Both caches must end holding current, d0 .. d(a-1): a + 1 of the round's entries.
            target_entries, draft_entries = n + 1, n
            want_backfill = a == n
            want_draft = 0 if want_backfill else draft_entries - (a + 1)
            check_equal(f"rewind n={n} a={a}", tuple(plan),
                        (target_entries - (a + 1), want_draft, want_backfill))
            out.append(vector(f"n{n}_a{a}", f"{n} drafts, {a} accepted",
                              {"num_draft": n, "num_accepted": a},
                              {"target_trim": plan.target_trim, "draft_trim": plan.draft_trim,
                               "draft_backfill": plan.draft_backfill}, 0.0))
    return out
