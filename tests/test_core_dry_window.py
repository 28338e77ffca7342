"""DRY reads exactly the last `dry_penalty_last_n` tokens: one fewer loses a match.

History "a b c a b" penalises "c" (it follows "a b", which the suffix repeats) only
if the window reaches back to the first "a": with the whole history or the last 5
tokens it does; the last 4 ("b c a b") leave "c" a match of length 1, below the
allowed length 2.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from specaccept import SamplerConfig, effective_token_distribution

A, B, C = 0, 1, 2
HISTORY = [A, B, C, A, B]
PENALISED = np.exp(np.array([0.0, 0.0, -1.0, 0.0])) / np.exp(np.array([0.0, 0.0, -1.0, 0.0])).sum()


@pytest.mark.parametrize(("last_n", "penalised"), [(-1, True), (5, True), (6, True), (4, False)])
def test_the_dry_window_holds_exactly_the_last_n_tokens(last_n: int, penalised: bool) -> None:
    config = SamplerConfig(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=2,
                           dry_penalty_last_n=last_n)
    got = np.array(effective_token_distribution(mx.zeros(4), config, HISTORY))
    np.testing.assert_allclose(got, PENALISED if penalised else np.full(4, 0.25), rtol=1e-6)
