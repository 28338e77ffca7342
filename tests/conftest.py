"""Shared fixtures for the test suite.

The acceptance switch is read from the environment when a caller passes
``stochastic=None``; a value exported in the developer's shell must not change
which rule a core test exercises, so every ``test_core_*`` test starts with it
unset. Other modules are left alone: they may pin the variable themselves.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specaccept import STOCHASTIC_ACCEPT_ENV


@pytest.fixture(autouse=True)
def _clean_stochastic_switch(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.node.path.name.startswith("test_core_"):
        monkeypatch.delenv(STOCHASTIC_ACCEPT_ENV, raising=False)
    yield
