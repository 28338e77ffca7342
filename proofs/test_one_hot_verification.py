"""Lemma 13, one-hot verification: the checks of ``proofs/one_hot_verification.md``.

The verifier declares every draft deterministic: it runs the stochastic rule with
q = one-hot(t) whatever law t was drawn from, so it accepts t with probability p(t) and on
rejection draws from p with t removed and renormalised. Lossless for every drafter when the
coins are fresh; the same rule reusing the drafter's coin is caught exactly.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import mlx.core as mx
import pytest

from proofs.exact_rounds import (
    DRAFTER,
    DRAFTERS,
    PAIRS,
    PROMPTS,
    STOCHASTIC,
    TARGET,
    TARGETS,
    ZERO,
    Dist,
    Rule,
    acceptance,
    as_float32,
    as_law,
    assert_lossless,
    cut_points,
    dist,
    emitted_token_law,
    inside,
    one_hot,
    pieces,
    position_law,
    read_ints,
    residual,
    round_law,
    sum_prod,
)
from specaccept import AcceptanceRule, sample_from_distribution, verify_draft_token


class OneHotVerification(Rule):
    """The library's stochastic rule handed one-hot(t) as q, whatever q the draft came from.

    Its decisions switch where the stochastic rule's do for q = one-hot(t) (at u = p(t), and
    at the cut points of p without t), so the exact law is that rule's, read per draft."""

    def verdicts(self, p: Dist, q: Dist, token: int) -> dict[tuple[bool, int], Fraction]:
        return STOCHASTIC.verdicts(p, one_hot(token, len(p)), token)


ONE_HOT_VERIFICATION = OneHotVerification(
    "one-hot verification", STOCHASTIC.verify, sample_from_distribution)


@pytest.mark.parametrize("p", TARGETS)
def test_given_any_draft_the_emitted_token_has_law_p(p: Dist) -> None:
    """Lemma 13, conditionally on the draft: for every t, the library's stochastic rule with
    q = one-hot(t) accepts with probability p(t) and emits exactly p, so a replacement is
    never t itself."""
    for t in range(len(p)):
        law = STOCHASTIC.verdicts(p, one_hot(t, len(p)), t)
        assert acceptance(law) == p[t]
        assert emitted_token_law(law) == as_law(p)
        assert not any(w and not ok and x == t for (ok, x), w in law.items())
        assert residual(p, one_hot(t, len(p))) == (
            p if p[t] == 1 else tuple(ZERO if x == t else w / (1 - p[t]) for x, w in enumerate(p)))


@pytest.mark.parametrize("pair", PAIRS, ids=lambda pq: f"{pq[0]}|{pq[1]}")
def test_one_hot_verification_is_lossless_for_any_drafter(pair: tuple[Dist, Dist]) -> None:
    """Lemma 13: the draft drawn from any q (sampled or one-hot), verified as one-hot, gives
    law p exactly, accepting sum p q: what a sampling drafter treated as greedy costs is
    acceptance, sum min(p, q) - sum p q, not correctness."""
    p, q = pair
    law = position_law(ONE_HOT_VERIFICATION, p, q)
    assert emitted_token_law(law) == as_law(p)
    assert acceptance(law) == sum_prod(p, q)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_round_verified_one_hot_is_lossless(k: int) -> None:
    """Lemma 13 over whole rounds (lemma 6's induction): a sampling, history-dependent
    drafter whose drafts are all verified as one-hot emits the target's law exactly."""
    for prefix in PROMPTS:
        assert_lossless(round_law(ONE_HOT_VERIFICATION, TARGET, DRAFTER, prefix, k), TARGET,
                        prefix, k + 1)


def reused_coin_law(p: Dist, q: Dist) -> dict[int, Fraction]:
    """The exact law when the verifier's accept coin is the very uniform the drafter drew t
    with: t = sample_from_distribution(q, u), accepted iff u <= p(t) (the library's accept
    test against one-hot(t)), the replacement from a fresh coin (so its law is the residual,
    written exactly). Integrated over u on the pieces cut by q's partial sums and every p(t)."""
    law: defaultdict[int, Fraction] = defaultdict(Fraction)
    cells = pieces(cut_points(q) + list(p))
    rows = len(cells)
    u = mx.array([inside(lo, hi) for lo, hi in cells], dtype=mx.float32)
    tokens = sample_from_distribution(as_float32([q] * rows), u)
    declared = (mx.arange(len(p)) == tokens[:, None]).astype(mx.float32)
    accepted = verify_draft_token(AcceptanceRule.STOCHASTIC, as_float32([p] * rows), declared,
                                  tokens, u, mx.zeros((rows,))).accepted
    for (lo, hi), t, ok in zip(cells, read_ints(tokens), read_ints(accepted), strict=True):
        if ok:
            law[t] += hi - lo
        else:
            for x, w in enumerate(residual(p, one_hot(t, len(p)))):
                law[x] += (hi - lo) * w
    return {x: w for x, w in law.items() if w}


def test_reusing_the_drafters_coin_is_caught() -> None:
    """The hypothesis is needed: with p = q = (1/2, 1/2, 0, 0) and the drafter's uniform
    reused as the accept coin, t = 0 exactly when u < 1/2, where u <= p(0) accepts it, and
    t = 1 when u >= 1/2, where u <= p(1) fails (but at u = 1/2): the stream is always 0,
    total variation 1/2. Over the pools, most pairs are biased."""
    half = dist(8, 8, 0, 0)
    assert reused_coin_law(half, half) == {0: Fraction(1)}
    biased = sum(1 for p in TARGETS for q in DRAFTERS
                 if reused_coin_law(p, q) != {x: w for x, w in enumerate(p) if w})
    assert biased >= len(TARGETS) * len(DRAFTERS) // 2
