"""Block verification, exactly: the checks of ``proofs/block_verification.md``.

The rule in ``Fraction`` arithmetic is ``proofs/exact_block.py`` (which the golden vectors'
generator checks its block-verification vectors against too), with three switches that turn
it into the three wrong variants an engine can ship (the prefix before the first failure
instead of the longest passing prefix; the residual without the weight w_tau; h_k = 1). On
history-dependent toy models (V <= 4, k <= 3) the checks enumerate every draft sequence and
every outcome of a round, exactly, and compare:

- the emitted law, continued by target sampling, with the target's autoregressive law
  (losslessness), for the rule and for each wrong variant, which must fail;
- the library's `verify_blockwise`, integrated over all 2(k+1) of its uniforms jointly,
  with the exact rule;
- the expected kept length with the stochastic rule's (never below it, strictly above it on
  most instances) and with the optimum of a linear program over every lossless verifier of
  one round (equal to it);
- the closed form of E[tau | drafts] with the law the library's keep tests realise.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import prod
from typing import TypeAlias

import mlx.core as mx
import numpy as np
import pytest
from scipy.optimize import linprog

from proofs.exact_block import (
    BLOCK,
    FIRST_FAILURE,
    LAST_KEEP_ONE,
    WRONG_VARIANTS,
    Variant,
    exact_round,
    kept_length_law,
)
from proofs.exact_rounds import (
    DRAFTER,
    PROMPTS,
    TARGET,
    Dist,
    Law,
    Table,
    Tokens,
    as_float32,
    cut_points,
    inside,
    pieces,
)
from specaccept import verify_blockwise

Outcomes: TypeAlias = dict[tuple[int, int], Fraction]
"""The law of (tau, next token) of one round, given its drafts."""

ZERO, ONE = Fraction(0), Fraction(1)
LP_TOLERANCE = 1e-9


def block_outcomes(ps: Sequence[Dist], qs: Sequence[Dist], drafts: Tokens,
                   variant: Variant = BLOCK) -> Outcomes:
    r = exact_round(ps, qs, drafts, variant)
    out: defaultdict[tuple[int, int], Fraction] = defaultdict(Fraction)
    for tau, weight in enumerate(kept_length_law(r.keep, longest_prefix=variant.longest_prefix)):
        for y, py in enumerate(r.rows[tau]):
            if weight and py:
                out[(tau, y)] += weight * py
    return dict(out)


def stochastic_outcomes(ps: Sequence[Dist], qs: Sequence[Dist], drafts: Tokens) -> Outcomes:
    """Token-by-token modified rejection sampling (lemmas 1 and 6), exactly."""
    out: defaultdict[tuple[int, int], Fraction] = defaultdict(Fraction)
    reach = ONE
    for i, x in enumerate(drafts):
        p, q = ps[i], qs[i]
        accept = ZERO if p[x] == 0 else ONE if q[x] == 0 else min(ONE, p[x] / q[x])
        excess = [max(a - b, ZERO) for a, b in zip(p, q, strict=True)]
        mass = sum(excess, ZERO)
        for y, py in enumerate([e / mass for e in excess] if mass > 0 else p):
            if py and reach * (1 - accept):
                out[(i, y)] += reach * (1 - accept) * py
        reach *= accept
    for y, py in enumerate(ps[len(drafts)]):
        if py and reach:
            out[(len(drafts), y)] += reach * py
    return dict(out)


def mean_kept(outcomes: Outcomes) -> Fraction:
    return sum((tau * w for (tau, _), w in outcomes.items()), ZERO)


# --------------------------------------------------------------------------------------
# Whole rounds on history-dependent models.

Verifier: TypeAlias = Callable[[Sequence[Dist], Sequence[Dist], Tokens], Outcomes]


def draft_sequences(drafter: Table, prefix: Tokens, k: int,
                    vocab: int) -> list[tuple[Tokens, Fraction]]:
    out = []
    for drafts in itertools.product(range(vocab), repeat=k):
        weight = prod((drafter(prefix + drafts[:i])[drafts[i]] for i in range(k)), start=ONE)
        if weight:
            out.append((drafts, weight))
    return out


def rows(target: Table, drafter: Table, prefix: Tokens,
         drafts: Tokens) -> tuple[list[Dist], list[Dist]]:
    k = len(drafts)
    return ([target(prefix + drafts[:i]) for i in range(k + 1)],
            [drafter(prefix + drafts[:i]) for i in range(k)])


def round_law(verify: Verifier, target: Table, drafter: Table, prefix: Tokens, k: int,
              vocab: int) -> tuple[Law, Fraction]:
    """The exact law of the tokens a round emits, and its expected kept length."""
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    expected = ZERO
    for drafts, weight in draft_sequences(drafter, prefix, k, vocab):
        for (tau, y), w in verify(*rows(target, drafter, prefix, drafts), drafts).items():
            law[(*drafts[:tau], y)] += weight * w
            expected += weight * w * tau
    return dict(law), expected


def is_lossless(law: Law, target: Table, prefix: Tokens, length: int, vocab: int) -> bool:
    """Whether the round, continued by target sampling, has the target's law of the next
    `length` tokens: for every s, sum over emitted prefixes e of s of P(e) p(s | e) = p(s)."""
    assert sum(law.values(), ZERO) == 1

    def target_prob(s: Tokens, start: int) -> Fraction:
        return prod((target(prefix + s[:i])[s[i]] for i in range(start, len(s))), start=ONE)

    for s in itertools.product(range(vocab), repeat=length):
        reached = sum((w * target_prob(s, len(e)) for e, w in law.items()
                       if s[:len(e)] == e), ZERO)
        if reached != target_prob(s, 0):
            return False
    return True


def random_dist(vocab: int, rng: random.Random, units: int = 8) -> Dist:
    counts = [0] * vocab
    for _ in range(units):
        counts[rng.randrange(vocab)] += 1
    return tuple(Fraction(c, units) for c in counts)


def random_table(vocab: int, rng: random.Random, size: int = 5) -> Table:
    """A history-dependent table: the law depends on a hash of the whole context."""
    pool = [random_dist(vocab, rng) for _ in range(size)]
    salt = rng.randrange(1000)

    def lookup(context: Tokens) -> Dist:
        h = salt
        for x in context:
            h = (h * 7 + x + 3) % 1009
        return pool[h % size]

    return lookup


@dataclass(frozen=True)
class Case:
    name: str
    target: Table
    drafter: Table
    vocab: int
    k: int
    prefix: Tokens = ()


def cases() -> list[Case]:
    """The toy models of lemma 6 (V = 4) for k = 1, 2, 3 and each prompt, then 90 random
    history-dependent pairs with V in {2, 3, 4} and k in {1, 2, 3}."""
    out = [Case(f"lemma6 k={k} prompt={prefix}", TARGET, DRAFTER, 4, k, prefix)
           for k in (1, 2, 3) for prefix in PROMPTS]
    rng = random.Random(11)
    for i in range(90):
        vocab, k = 2 + i % 3, 1 + (i // 3) % 3
        out.append(Case(f"random {i} V={vocab} k={k}", random_table(vocab, rng),
                        random_table(vocab, rng), vocab, k))
    return out


CASES = cases()


def test_block_verification_is_lossless() -> None:
    """(1) Every enumerated round, continued by target sampling, has the target's law."""
    for case in CASES:
        law, _ = round_law(block_outcomes, case.target, case.drafter, case.prefix, case.k,
                           case.vocab)
        assert is_lossless(law, case.target, case.prefix, case.k + 1, case.vocab), case.name


@pytest.mark.parametrize("variant", WRONG_VARIANTS, ids=lambda v: v.name)
def test_each_wrong_variant_emits_another_law(variant: Variant) -> None:
    """The losslessness check has power: it rejects every wrong variant on the lemma-6
    models at k = 2 and 3, and on at least 10 of the 99 cases."""

    def verify(ps: Sequence[Dist], qs: Sequence[Dist], drafts: Tokens) -> Outcomes:
        return block_outcomes(ps, qs, drafts, variant)

    failing = []
    for case in CASES:
        law, _ = round_law(verify, case.target, case.drafter, case.prefix, case.k, case.vocab)
        if not is_lossless(law, case.target, case.prefix, case.k + 1, case.vocab):
            failing.append(case.name)
    print(f"\n{variant.name}: lossless check fails on {len(failing)}/{len(CASES)} cases")
    for k in (2, 3):
        assert any(name.startswith(f"lemma6 k={k}") for name in failing), (variant.name, k)
    assert len(failing) >= 10


def test_one_draft_is_the_stochastic_rule() -> None:
    """k = 1: block verification and modified rejection sampling have the same outcome law."""
    for case in CASES:
        for drafts, _ in draft_sequences(case.drafter, case.prefix, 1, case.vocab):
            ps, qs = rows(case.target, case.drafter, case.prefix, drafts)
            assert block_outcomes(ps, qs, drafts) == stochastic_outcomes(ps, qs, drafts)


def test_never_fewer_kept_drafts_than_stochastic() -> None:
    """(2) E[tau] >= the stochastic rule's on every case, strictly on many; per draft
    sequence (given the drafts) it can be lower, so the claim is about the round's mean."""
    strict, per_draft_lower = [], 0
    for case in CASES:
        _, block = round_law(block_outcomes, case.target, case.drafter, case.prefix, case.k,
                             case.vocab)
        _, stochastic = round_law(stochastic_outcomes, case.target, case.drafter, case.prefix,
                                  case.k, case.vocab)
        assert block >= stochastic, (case.name, block, stochastic)
        if block > stochastic:
            strict.append((case.name, block, stochastic))
        for drafts, _ in draft_sequences(case.drafter, case.prefix, case.k, case.vocab):
            ps, qs = rows(case.target, case.drafter, case.prefix, drafts)
            if mean_kept(block_outcomes(ps, qs, drafts)) < mean_kept(
                    stochastic_outcomes(ps, qs, drafts)):
                per_draft_lower += 1
    print(f"\nstrictly more on {len(strict)}/{len(CASES)} cases, e.g.")
    for name, block, stochastic in strict[:6]:
        print(f"  {name}: E[tau] block {block} = {float(block):.4f} > "
              f"stochastic {stochastic} = {float(stochastic):.4f}")
    assert len(strict) >= 30
    assert all(not name.startswith("random") or "k=1" not in name for name, _, _ in strict)
    assert per_draft_lower > 0


def test_the_papers_example() -> None:
    """Sun et al.'s motivating example: context-free p = (1/3, 2/3), q = (2/3, 1/3), k = 2.
    Token by token keeps 10/9 drafts per round, block verification 11/9."""
    p, q = (Fraction(1, 3), Fraction(2, 3)), (Fraction(2, 3), Fraction(1, 3))
    target, drafter = (lambda c: p), (lambda c: q)
    law, block = round_law(block_outcomes, target, drafter, (), 2, 2)
    _, stochastic = round_law(stochastic_outcomes, target, drafter, (), 2, 2)
    assert (stochastic, block) == (Fraction(10, 9), Fraction(11, 9))
    assert is_lossless(law, target, (), 3, 2)
    assert optimal_mean_kept(target, drafter, 2, 2) == pytest.approx(11 / 9, abs=LP_TOLERANCE)


# --------------------------------------------------------------------------------------
# (3) Optimality: a linear program over every lossless verifier of one round.


def optimal_mean_kept(target: Table, drafter: Table, vocab: int, k: int) -> float:
    """The largest E[tau] of any verifier of one round that is lossless.

    A verifier maps the drafts x (drawn from the drafter) to a law pi(tau, y | x) of the
    kept length and the next token, knowing both models completely. The round emits
    S = x_1..x_tau y. It is lossless iff for every s of length k + 1,
    sum_j P(S = s_1..s_j) p(s_{j+1}..s_{k+1} | s_1..s_j) = p(s).
    """
    drafts = draft_sequences(drafter, (), k, vocab)
    index = {(x, tau, y): n for n, (x, tau, y) in enumerate(
        (x, tau, y) for x, _ in drafts for tau in range(k + 1) for y in range(vocab))}
    weight = dict(drafts)

    def target_prob(s: Tokens, start: int) -> float:
        return float(prod((target(s[:i])[s[i]] for i in range(start, len(s))), start=ONE))

    objective = np.zeros(len(index))
    for (x, tau, _), n in index.items():
        objective[n] = -float(weight[x]) * tau
    equalities, values = [], []
    for x, _ in drafts:
        row = np.zeros(len(index))
        for tau in range(k + 1):
            for y in range(vocab):
                row[index[(x, tau, y)]] = 1.0
        equalities.append(row)
        values.append(1.0)
    for s in itertools.product(range(vocab), repeat=k + 1):
        row = np.zeros(len(index))
        for (x, tau, y), n in index.items():
            if x[:tau] == s[:tau] and y == s[tau]:
                row[n] += float(weight[x]) * target_prob(s, tau + 1)
        equalities.append(row)
        values.append(target_prob(s, 0))
    result = linprog(objective, A_eq=np.array(equalities), b_eq=np.array(values),
                     bounds=(0, None), method="highs")
    assert result.status == 0, result.message
    return float(-result.fun)


def lp_cases() -> list[Case]:
    rng = random.Random(5)
    return [Case(f"lp {i} V={2 + i % 2}", random_table(2 + i % 2, rng),
                 random_table(2 + i % 2, rng), 2 + i % 2, 2) for i in range(24)]


def test_no_lossless_verifier_keeps_more() -> None:
    """(3) V in {2, 3}, k = 2, history-dependent models: the LP optimum over all lossless
    verifiers equals block verification's E[tau]; the stochastic rule falls short of it
    wherever block verification is strictly better, so the LP can tell them apart."""
    below = 0
    for case in lp_cases():
        best = optimal_mean_kept(case.target, case.drafter, case.vocab, case.k)
        _, block = round_law(block_outcomes, case.target, case.drafter, (), case.k, case.vocab)
        _, stochastic = round_law(stochastic_outcomes, case.target, case.drafter, (), case.k,
                                  case.vocab)
        assert best == pytest.approx(float(block), abs=LP_TOLERANCE), case.name
        below += best > float(stochastic) + LP_TOLERANCE
    assert below >= 5


# --------------------------------------------------------------------------------------
# The library, integrated exactly over its uniforms; (4) the closed form.


def library_outcomes(ps: Sequence[Dist], qs: Sequence[Dist], drafts: Tokens
                     ) -> tuple[Outcomes, list[float]]:
    """The exact law of what `verify_blockwise` returns, all 2(k+1) uniforms integrated
    jointly: eta_i cut at h_i, each row's draw uniform at its row's partial sums (exact),
    and every cell of the product evaluated (vmapped), none assumed irrelevant. Also the
    library's `accepted_length_law`."""
    k = len(drafts)
    r = exact_round(ps, qs, drafts)
    axes = [[((a_hi - a_lo) * (s_hi - s_lo), (inside(a_lo, a_hi), inside(s_lo, s_hi)))
             for a_lo, a_hi in pieces([r.keep[i]] if i < k else [])
             for s_lo, s_hi in pieces(cut_points(r.rows[i]))]
            for i in range(k + 1)]
    cells = list(itertools.product(*axes))
    uniforms = mx.array(np.array([[c[1] for c in cell] for cell in cells], dtype=np.float32))
    target, draft = as_float32(ps), as_float32(qs)
    tokens = mx.array(list(drafts), dtype=mx.int32)

    def one_round(tp: mx.array, dp: mx.array, ids: mx.array, u: mx.array
                  ) -> tuple[mx.array, mx.array]:
        verdict = verify_blockwise(tp, dp, ids, u)
        return verdict.num_accepted, verdict.next_token

    # Every argument is mapped (broadcast per cell): under mx.vmap, MLX 0.32's `&` drops the
    # batch axis when one operand is unmapped, which the library's draw would then hit.
    n = len(cells)
    kept, nxt = mx.vmap(one_round)(
        mx.broadcast_to(target, (n, *target.shape)), mx.broadcast_to(draft, (n, *draft.shape)),
        mx.broadcast_to(tokens, (n, k)), uniforms,
    )
    for row in range(0, n, max(1, n // 8)):  # mx.vmap == a direct call
        direct = one_round(target, draft, tokens, uniforms[row])
        assert (direct[0].item(), direct[1].item()) == (kept[row].item(), nxt[row].item())
    out: defaultdict[tuple[int, int], Fraction] = defaultdict(Fraction)
    for cell, tau, y in zip(cells, np.array(kept).tolist(), np.array(nxt).tolist(), strict=True):
        out[(int(tau), int(y))] += prod((c[0] for c in cell), start=ONE)
    law = verify_blockwise(target, draft, tokens, uniforms[0]).accepted_length_law
    return dict(out), [float(x) for x in np.array(law).tolist()]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_library_is_the_exact_rule(k: int) -> None:
    """The library's round, integrated exactly, has the exact rule's outcome law for every
    draft sequence of the lemma-6 models (so the library is lossless by the check above),
    and its `accepted_length_law` is the closed form P(tau = i) = h_i prod_{j>i} (1 - h_j)
    within float32 rounding; E[tau | drafts] is its mean."""
    for prefix in PROMPTS:
        for drafts, _ in draft_sequences(DRAFTER, prefix, k, 4):
            ps, qs = rows(TARGET, DRAFTER, prefix, drafts)
            got, law = library_outcomes(ps, qs, drafts)
            assert got == block_outcomes(ps, qs, drafts), (prefix, drafts)
            closed = kept_length_law(exact_round(ps, qs, drafts).keep)
            assert law == pytest.approx([float(x) for x in closed], abs=1e-6)
            kept: defaultdict[int, Fraction] = defaultdict(Fraction)
            for (tau, _), w in got.items():
                kept[tau] += w
            assert [kept[i] for i in range(k + 1)] == closed
            assert mean_kept(got) == sum((i * closed[i] for i in range(k + 1)), ZERO)


def test_closed_form_tells_the_variants_apart() -> None:
    """The closed form is specific: on the lemma-6 models, the first-failure law and the
    h_k = 1 law of tau differ from it for some draft sequence (the residual variant keeps
    the same tau, and is caught by the losslessness check)."""
    differs = {FIRST_FAILURE.name: False, LAST_KEEP_ONE.name: False}
    for drafts, _ in draft_sequences(DRAFTER, (), 3, 4):
        ps, qs = rows(TARGET, DRAFTER, (), drafts)
        right = kept_length_law(exact_round(ps, qs, drafts).keep)
        first = kept_length_law(exact_round(ps, qs, drafts).keep, longest_prefix=False)
        one = kept_length_law(exact_round(ps, qs, drafts, LAST_KEEP_ONE).keep)
        differs[FIRST_FAILURE.name] |= first != right
        differs[LAST_KEEP_ONE.name] |= one != right
    assert all(differs.values()), differs
