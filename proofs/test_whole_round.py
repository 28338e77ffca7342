"""Lemma 6, a whole round emits the target's autoregressive law: the checks of
``proofs/whole_round.md``."""

from __future__ import annotations

import itertools
from collections import defaultdict
from fractions import Fraction
from math import prod

import mlx.core as mx
import numpy as np
import pytest

from proofs.exact_rounds import (
    ARGMAX_AGAINST_ARGMAX,
    DRAFTER,
    GREEDY,
    LOSSLESS,
    ONE,
    ONE_HOT_TARGET,
    PAIRS,
    PROMPTS,
    RESAMPLE_FROM_P,
    SAMPLER_MATCH,
    STOCHASTIC,
    TARGET,
    Dist,
    Law,
    Rule,
    Table,
    Tokens,
    accept_breaks,
    as_float32,
    as_law,
    assert_lossless,
    cut_points,
    dist,
    draft_phase,
    inside,
    is_lossless,
    library_rule,
    pieces,
    read_ints,
    read_one,
    round_law,
    sample_breaks,
    support,
    total_mass,
)
from specaccept import (
    AcceptanceRule,
    sample_from_distribution,
    verify_tokenwise,
)


@pytest.mark.parametrize("rule", LOSSLESS, ids=lambda r: r.name)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a_round_emits_the_target_law(rule: Rule, k: int) -> None:
    """Lemma 6: history-dependent target and drafter, V = 4, bonus token included."""
    for prefix in PROMPTS:
        assert_lossless(round_law(rule, TARGET, DRAFTER, prefix, k), TARGET, prefix, k + 1)


@pytest.mark.parametrize("k", [1, 3])
def test_a_greedy_argmax_round_emits_a_one_hot_target_law(k: int) -> None:
    for prefix in PROMPTS:
        law = round_law(GREEDY, ONE_HOT_TARGET, DRAFTER, prefix, k)
        assert_lossless(law, ONE_HOT_TARGET, prefix, k + 1)


@pytest.mark.parametrize("k", [1, 3])
def test_biased_rules_fail_the_round_law(k: int) -> None:
    """The check has power: argmax-against-argmax (at temperature > 0, i.e. non-one-hot p),
    the library's own greedy-argmax applied to such a p (the same rule), and resampling
    from p all give a law that differs from the target's."""
    for rule in (ARGMAX_AGAINST_ARGMAX, GREEDY, RESAMPLE_FROM_P):
        for prefix in PROMPTS:
            law = round_law(rule, TARGET, DRAFTER, prefix, k)
            assert total_mass(law) == 1
            assert not is_lossless(law, TARGET, prefix, k + 1), (rule.name, prefix)


def block_law(rule: AcceptanceRule, target: Table, drafter: Table, prefix: Tokens,
              k: int) -> Law:
    """The exact law of what `verify_tokenwise` emits, its 2(k+1) uniforms integrated jointly:
    every cell of the product of all positions' pieces is evaluated, none is assumed
    irrelevant (the library is mapped over the cells with `mx.vmap`)."""
    weights: list[Fraction] = []
    draft_ids: list[Tokens] = []
    target_rows, draft_rows, uniforms = [], [], []
    for drafts, weight in draft_phase(drafter, prefix, k):
        ps = [target(prefix + drafts[:i]) for i in range(k + 1)]
        qs = [drafter(prefix + drafts[:i]) for i in range(k)]
        # Row i's (u_accept, u_sample) pieces; row k has no draft, so its u_accept has no
        # breakpoint (one piece) and its u_sample those of the bonus draw from p_k.
        breaks = [(accept_breaks(ps[i], qs[i], drafts[i]), sample_breaks(ps[i], qs[i]))
                  for i in range(k)] + [([], cut_points(ps[k]))]
        axes = [
            [((a_hi - a_lo) * (s_hi - s_lo), (inside(a_lo, a_hi), inside(s_lo, s_hi)))
             for a_lo, a_hi in pieces(accept) for s_lo, s_hi in pieces(sample)]
            for accept, sample in breaks
        ]
        tp, dp = np.array(as_float32(ps)), np.array(as_float32(qs))
        for cells in itertools.product(*axes):
            weights.append(weight * prod((c[0] for c in cells), start=ONE))
            uniforms.append([c[1] for c in cells])
            target_rows.append(tp)
            draft_rows.append(dp)
            draft_ids.append(drafts)

    def one_round(tp: mx.array, dp: mx.array, ids: mx.array, u: mx.array
                  ) -> tuple[mx.array, mx.array]:
        verdict = verify_tokenwise(rule, tp, dp, ids, u)
        return verdict.num_accepted, verdict.next_token

    args = (mx.array(np.stack(target_rows)), mx.array(np.stack(draft_rows)),
            mx.array(np.array(draft_ids, dtype=np.int32)),
            mx.array(np.array(uniforms, dtype=np.float32)))
    num_accepted, next_token = mx.vmap(one_round)(*args)
    accepted_list, next_list = read_ints(num_accepted), read_ints(next_token)
    for row in range(0, len(weights), max(1, len(weights) // 16)):  # mx.vmap == a direct call
        direct = one_round(args[0][row], args[1][row], args[2][row], args[3][row])
        assert (read_one(direct[0]), read_one(direct[1])) == (accepted_list[row], next_list[row])
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for w, drafts, a, nxt in zip(weights, draft_ids, accepted_list, next_list, strict=True):
        law[(*drafts[:a], nxt)] += w
    return support(law)


@pytest.mark.parametrize(
    "rule",
    [AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH, AcceptanceRule.GREEDY_ARGMAX],
    ids=lambda rule: rule.value,
)
@pytest.mark.parametrize("k", [1, 2, 3])
def test_verify_tokenwise_emits_the_target_law(rule: AcceptanceRule, k: int) -> None:
    """Lemma 6 for the library's whole-round function: `verify_tokenwise` over all its
    uniforms at once emits the target's law (a one-hot one for greedy-argmax), and the
    same law as the position-by-position composition of `verify_draft_token`."""
    target = ONE_HOT_TARGET if rule is AcceptanceRule.GREEDY_ARGMAX else TARGET
    for prefix in PROMPTS:
        law = block_law(rule, target, DRAFTER, prefix, k)
        assert_lossless(law, target, prefix, k + 1)
        assert law == round_law(library_rule(rule), target, DRAFTER, prefix, k)


def test_verify_tokenwise_with_a_biased_rule_is_caught() -> None:
    """greedy-argmax's `verify_tokenwise` on a temperature > 0 target is argmax-against-argmax."""
    k = 3
    for prefix in PROMPTS:
        law = block_law(AcceptanceRule.GREEDY_ARGMAX, TARGET, DRAFTER, prefix, k)
        assert total_mass(law) == 1
        assert not is_lossless(law, TARGET, prefix, k + 1)


def shared_uniform_law(p: Dist, q: Dist, share: str) -> Law:
    """The exact law of the emitted token when two of (draft, u_accept, u_sample) read one
    uniform u and the third reads an independent v.

    share: "draft=u_accept" or "u_accept=u_sample" (rejection sampling), or
    "draft=u_sample" (sampler-match).
    """
    every_accept_break = [b for t in range(len(q)) for b in accept_breaks(p, q, t)]
    breaks = {"draft": cut_points(q), "u_accept": every_accept_break,
              "u_sample": sample_breaks(p, q)}
    shared = share.split("=")
    (alone,) = set(breaks) - set(shared)
    rule = SAMPLER_MATCH if share == "draft=u_sample" else STOCHASTIC
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for lo, hi in pieces([b for name in shared for b in breaks[name]]):
        for v_lo, v_hi in pieces(breaks[alone]):
            u = {name: inside(lo, hi) for name in shared} | {alone: inside(v_lo, v_hi)}
            token = read_one(sample_from_distribution(as_float32([q])[0], u["draft"]))
            _, emitted = rule.verify(
                as_float32([p]), as_float32([q]), mx.array([token], dtype=mx.int32),
                mx.array([u["u_accept"]], dtype=mx.float32),
                mx.array([u["u_sample"]], dtype=mx.float32),
            )
            law[(read_one(emitted),)] += (hi - lo) * (v_hi - v_lo)
    return support(law)


def test_uniforms_must_be_independent_for_rejection_sampling() -> None:
    """Lemma 6's independence note. Drawing the draft with the accept test's own uniform,
    or the replacement with it, breaks rejection sampling; sampler-match survives the
    draft reading its u_sample (lemma 2: the emitted token is the target's own draw)."""
    half = Fraction(1, 2)
    # The two counterexamples of whole_round.md.
    assert shared_uniform_law(dist(4, 12), dist(8, 8), "draft=u_accept") == {
        (0,): half, (1,): half}
    assert shared_uniform_law(dist(8, 4, 4), dist(16, 0, 0), "u_accept=u_sample") == {
        (0,): half, (2,): half}
    broken = {share: [(p, q) for p, q in PAIRS if shared_uniform_law(p, q, share) != as_law(p)]
              for share in ("draft=u_accept", "u_accept=u_sample", "draft=u_sample")}
    assert broken["draft=u_accept"] and broken["u_accept=u_sample"]
    assert broken["draft=u_sample"] == []
