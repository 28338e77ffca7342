"""Lemma 2, sampler-match and greedy-argmax at one position: the checks of
``proofs/sampler_match.md``."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from proofs.exact_rounds import (
    DRAFTERS,
    GREEDY,
    NO_Q,
    PAIRS,
    SAMPLER_MATCH,
    TARGET,
    Dist,
    Tokens,
    acceptance,
    as_float32,
    as_law,
    emitted_token_law,
    one_hot,
    position_law,
    read_one,
    sum_min,
    sum_prod,
)
from specaccept import (
    AcceptanceRule,
    acceptance_probability,
    sample_from_distribution,
    verify_tokenwise,
)


@pytest.mark.parametrize("p,q", PAIRS)
def test_sampler_match_emits_exactly_p(p: Dist, q: Dist) -> None:
    """Lemma 2: sampler-match emits p exactly and accepts with probability sum p*q, with
    or without q; the library's closed form agrees to float32 precision."""
    for rule in (SAMPLER_MATCH, NO_Q):
        law = position_law(rule, p, q)
        assert emitted_token_law(law) == as_law(p)
        assert acceptance(law) == sum_prod(p, q)
    closed = acceptance_probability(AcceptanceRule.SAMPLER_MATCH, *as_float32([p, q]))
    assert abs(closed.item() - float(sum_prod(p, q))) < 1e-6
    closed = acceptance_probability(AcceptanceRule.STOCHASTIC, *as_float32([p, q]))
    assert abs(closed.item() - float(sum_min(p, q))) < 1e-6


@pytest.mark.parametrize("q", DRAFTERS)
def test_greedy_argmax_is_exact_on_a_one_hot_target(q: Dist) -> None:
    """Lemma 2: with a greedy (one-hot) target, greedy-argmax emits p and accepts
    q(argmax p); all three rules then coincide in acceptance."""
    for winner in range(len(q)):
        p = one_hot(winner, len(q))
        law = position_law(GREEDY, p, q)
        assert emitted_token_law(law) == as_law(p)
        assert acceptance(law) == q[winner] == sum_min(p, q) == sum_prod(p, q)


def test_sampler_match_emits_the_target_only_stream_whatever_the_drafts() -> None:
    """Lemma 2, pathwise: under `verify_tokenwise` with sampler-match, the tokens a round
    emits are the target-only draws made with the same u_sample column, for drafts that
    are any function of the uniforms (here: adversarial ones)."""
    rng = np.random.default_rng(902)
    k = 3
    for trial in range(60):
        prefix: Tokens = (trial % 4,)
        uniforms = np.floor(rng.random((k + 1, 2)) * 2**24) / 2**24
        alone: list[int] = []
        for i in range(k + 1):
            p = TARGET(prefix + tuple(alone))
            u = float(uniforms[i, 1])
            alone.append(read_one(sample_from_distribution(as_float32([p])[0], u)))
        # Drafts that agree with the target-only stream up to a random point, then not.
        agree = trial % (k + 1)
        drafts = tuple(alone[:agree]) + tuple((x + 1) % 4 for x in alone[agree:k])
        rows = [TARGET(prefix + drafts[:i]) for i in range(k + 1)]
        verdict = verify_tokenwise(
            AcceptanceRule.SAMPLER_MATCH, as_float32(rows), None,
            mx.array(drafts, dtype=mx.int32), mx.array(uniforms, dtype=mx.float32),
        )
        a = read_one(verdict.num_accepted)
        emitted = [*drafts[:a], read_one(verdict.next_token)]
        assert emitted == alone[: a + 1]
        assert a == agree
