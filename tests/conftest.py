"""Shared test settings.

The `mutation-gate` Hypothesis profile serves `.ci/mutation_gate.py`, which runs
the suite once per mutant and needs only pass or fail: it skips shrinking a
failing example and keeps no example database, so that no mutant's run replays
examples an earlier mutant's run found.
"""

from __future__ import annotations

from hypothesis import Phase, settings

settings.register_profile(
    "mutation-gate",
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
    database=None,
)
