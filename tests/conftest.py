"""Shared fixtures for the test suite.

The acceptance switch is read from the environment when a caller passes
``stochastic=None``; a value exported in the developer's shell must not change
which rule a core test exercises, so every ``test_core_*`` test starts with it
unset. Other modules are left alone: they may pin the variable themselves.

The `mutation-gate` Hypothesis profile serves `.ci/mutation_gate.py`, which runs
the suite once per mutant and needs only pass or fail: it skips shrinking a
failing example and keeps no example database, so that no mutant's run replays
examples an earlier mutant's run found.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import Phase, settings

from specaccept import BLOCK_VERIFY_ENV, STOCHASTIC_ACCEPT_ENV

settings.register_profile(
    "mutation-gate",
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
    database=None,
)


@pytest.fixture(autouse=True)
def _clean_stochastic_switch(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.node.path.name.startswith("test_core_"):
        monkeypatch.delenv(STOCHASTIC_ACCEPT_ENV, raising=False)
        monkeypatch.delenv(BLOCK_VERIFY_ENV, raising=False)
    yield
