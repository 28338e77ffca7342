"""Exact laws of tree verification: the three schemes lossless, their wrong variants caught.

The checks of ``proofs/tree_verification.md``.

Method. A round drafts a tree (every outcome of the drafting, enumerated with its exact
probability) and verifies it; the law of the emitted tokens, continued by the target alone,
must be the target's own law, compared as Fractions. The verification's law comes two ways:
from `node_law`, the rule in exact arithmetic (each accept test passes with probability
``min(1, r(x) / q_j(x))``), and from the library: `verify_tree` called on every cell of the
uniforms' cut (each accept uniform cut at its exact threshold, each draw's uniform at the
partial sums of every law it can draw from), batched with ``mx.vmap``, each answer weighted by
its cell's exact volume. The two must agree exactly, and both must be lossless. Each wrong
variant is the same computation with one thing changed, and must fail it.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import NamedTuple

import mlx.core as mx
import pytest

from proofs.exact_rounds import (
    Dist,
    Law,
    Table,
    Tokens,
    as_float32,
    dist,
    extend,
    inside,
    pieces,
    target_law,
)
from specaccept.core.tree import (
    TreeScheme,
    candidate_siblings_acceptance,
    iid_siblings_acceptance,
    tree_shape,
    verify_tree,
    without_replacement_siblings_acceptance,
)

ZERO, ONE = Fraction(0), Fraction(1)
V = 3

TARGET_POOL = (dist(8, 4, 4), dist(2, 10, 4), dist(12, 0, 4), dist(5, 5, 6))
DRAFT_POOL = (dist(4, 8, 4), dist(10, 2, 4), dist(4, 4, 8), dist(6, 6, 4))


def table(pool: Sequence[Dist], salt: int) -> Table:
    """A context-dependent law: the pool entry the context hashes to (deterministically)."""
    def law(context: Tokens) -> Dist:
        index = sum((i + 3) * (x + salt) for i, x in enumerate(context)) + len(context) * salt
        return pool[index % len(pool)]
    return law


TARGET = table(TARGET_POOL, 1)
DRAFTER = table(DRAFT_POOL, 2)
PREFIX: Tokens = (1,)

TREES = {
    "width2": (-1, -1),
    "width3": (-1, -1, -1),
    "chain2": (-1, 0),
    "two_then_two": (-1, -1, 0, 0),
    "chain_then_two": (-1, 0, 0),
}


class Variant(NamedTuple):
    """What a verifier does at a node; the library's rule is `Variant(scheme)`."""

    scheme: TreeScheme
    guard: bool = True
    """Reject a child whose token the residual excludes (r(x) = 0), whatever the coin."""
    reuse_coin: bool = False
    """Draw the next token with the last rejected child's accept coin (SGLang PR #7207)."""


# --------------------------------------------------------------------------------------
# The rule in exact arithmetic.


def normalise(weights: Sequence[Fraction]) -> Dist:
    total = sum(weights, ZERO)
    return tuple(w / total for w in weights)


def proposal(scheme: TreeScheme, q: Dist, tokens: Sequence[int], j: int) -> Dist:
    """The law child j was drafted from, after siblings 0..j-1 (the library's `_proposal`)."""
    if scheme is TreeScheme.DETERMINISTIC:
        return tuple(ONE if x == tokens[j] else ZERO for x in range(len(q)))
    if scheme is TreeScheme.IID or j == 0:
        return q
    kept = tuple(ZERO if x in tokens[:j] else w for x, w in enumerate(q))
    return kept if sum(kept, ZERO) == 0 else normalise(kept)


def reject_update(r: Dist, q_j: Dist) -> Dist:
    excess = tuple(max(a - b, ZERO) for a, b in zip(r, q_j, strict=True))
    return r if sum(excess, ZERO) == 0 else normalise(excess)


def accept_probability(r: Dist, q_j: Dist, x: int, *, guard: bool) -> Fraction:
    """P(u * q_j(x) <= r(x)) for u uniform on [0, 1), with the r(x) > 0 guard if asked."""
    if r[x] == 0 and guard:
        return ZERO
    return ONE if q_j[x] == 0 else min(ONE, r[x] / q_j[x])


def draw_on(r: Dist, lo: Fraction) -> dict[int, Fraction]:
    """The law of the inverse-CDF draw from r with u uniform on [lo, 1)."""
    out, start = {}, ZERO
    for y, w in enumerate(r):
        end = start + w
        overlap = max(ZERO, end - max(start, lo))
        if overlap and w:
            out[y] = overlap / (1 - lo)
        start = end
    return out


def node_law(variant: Variant, p: Dist, q: Dist, tokens: Sequence[int]
             ) -> list[tuple[int | None, int | None, Fraction]]:
    """(accepted child index or None, next token or None, probability) at one node."""
    out: list[tuple[int | None, int | None, Fraction]] = []
    r, reach, last_threshold = p, ONE, ZERO
    for j, x in enumerate(tokens):
        q_j = proposal(variant.scheme, q, tokens, j)
        a = accept_probability(r, q_j, x, guard=variant.guard)
        if a:
            out.append((j, None, reach * a))
        reach *= 1 - a
        last_threshold = a
        r = reject_update(r, q_j)
    if reach:
        lo = last_threshold if (variant.reuse_coin and tokens) else ZERO
        out.extend((None, y, reach * w) for y, w in draw_on(r, lo).items())
    return out


def contexts(parents: Sequence[int], tokens: Sequence[int], prefix: Tokens) -> list[Tokens]:
    """Row v's context: the prefix and the tokens of v's path (row 0 the root)."""
    rows = [prefix]
    for i, parent in enumerate(parents):
        rows.append(rows[parent + 1] + (tokens[i],))
    return rows


def verify_law(variant: Variant, parents: Sequence[int], tokens: Sequence[int],
               target: Table, drafter: Table, prefix: Tokens) -> Law:
    """The exact law of the emitted tokens (path, then next) of one drafted tree."""
    shape = tree_shape(parents, tokens, distinct_siblings=False)
    ctx = contexts(parents, tokens, prefix)
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)

    def walk(row: int, emitted: Tokens, weight: Fraction) -> None:
        kids = shape.children[row]
        for j, y, w in node_law(variant, target(ctx[row]), drafter(ctx[row]),
                                [tokens[c] for c in kids]):
            if j is None:
                assert y is not None
                law[(*emitted, y)] += weight * w
            else:
                walk(kids[j] + 1, (*emitted, tokens[kids[j]]), weight * w)

    walk(0, (), ONE)
    return dict(law)


# --------------------------------------------------------------------------------------
# Drafting: every outcome of a tree's drafting, with its probability.


def top_candidates(q: Dist, count: int) -> list[int]:
    """The `count` most likely ids under q, ties to the lowest id: drafter-side only."""
    return sorted(range(len(q)), key=lambda x: (-q[x], x))[:count]


def drafts(drafting: TreeScheme, parents: Sequence[int], drafter: Table,
           prefix: Tokens) -> Iterator[tuple[tuple[int, ...], Fraction]]:
    """Every token assignment of the tree's nodes with its probability under `drafting`."""
    size = len(parents)

    def go(i: int, tokens: tuple[int, ...], weight: Fraction
           ) -> Iterator[tuple[tuple[int, ...], Fraction]]:
        if i == size:
            yield tokens, weight
            return
        parent = parents[i]
        q = drafter(contexts(parents[:i], tokens, prefix)[parent + 1])
        earlier = [tokens[s] for s in range(i) if parents[s] == parent]
        if drafting is TreeScheme.DETERMINISTIC:
            yield from go(i + 1, (*tokens, top_candidates(q, len(earlier) + 1)[-1]), weight)
            return
        if drafting is TreeScheme.WITHOUT_REPLACEMENT:
            remaining = ONE - sum((q[x] for x in earlier), ZERO)
            options = [(x, q[x] / remaining) for x in range(len(q))
                       if x not in earlier and q[x]]
        else:
            options = [(x, q[x]) for x in range(len(q)) if q[x]]
        for x, w in options:
            yield from go(i + 1, (*tokens, x), weight * w)

    yield from go(0, (), ONE)


def round_law(variant: Variant, drafting: TreeScheme, parents: Sequence[int]) -> Law:
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for tokens, w in drafts(drafting, parents, DRAFTER, PREFIX):
        for seq, v in verify_law(variant, parents, tokens, TARGET, DRAFTER, PREFIX).items():
            law[seq] += w * v
    return dict(law)


def depth(parents: Sequence[int]) -> int:
    return max(tree_shape(parents, [0] * len(parents), distinct_siblings=False).depths)


def distance_from_target(law: Law, parents: Sequence[int]) -> Fraction:
    """TV between the round's law (continued by the target) and the target's own law."""
    length = depth(parents) + 1
    got, want = extend(law, TARGET, PREFIX, length), target_law(TARGET, PREFIX, length)
    return sum((abs(got.get(s, ZERO) - want.get(s, ZERO)) for s in set(got) | set(want)),
               ZERO) / 2


# --------------------------------------------------------------------------------------
# The library's law, integrated exactly over its uniforms.


def library_verify_law(scheme: TreeScheme, parents: Sequence[int], tokens: Sequence[int]
                       ) -> Law:
    """The law of `verify_tree`'s emitted tokens: one call per cell of the uniforms' cut."""
    shape = tree_shape(parents, tokens, distinct_siblings=False)
    ctx = contexts(parents, tokens, PREFIX)
    target_rows = [TARGET(c) for c in ctx]
    draft_rows = [DRAFTER(c) for c in ctx]
    accept_cuts: list[list[Fraction]] = [[] for _ in parents]
    sample_cuts: list[list[Fraction]] = [[] for _ in range(max(shape.depths) + 1)]
    for row, kids in enumerate(shape.children):
        r, siblings = target_rows[row], [tokens[c] for c in kids]
        for j, child in enumerate(kids):
            q_j = proposal(scheme, draft_rows[row], siblings, j)
            x = siblings[j]
            if q_j[x] > 0:
                accept_cuts[child].append(r[x] / q_j[x])
            r = reject_update(r, q_j)
        partial = ZERO
        for w in r:
            partial += w
            sample_cuts[shape.depths[row]].append(partial)
    accept_cells = [pieces(c) for c in accept_cuts]
    sample_cells = [pieces(c) for c in sample_cuts]
    cells = list(itertools.product(*accept_cells, *sample_cells))
    size = len(parents)
    accept = mx.array([[inside(*cell[i]) for i in range(size)] for cell in cells])
    sample = mx.array([[inside(*c) for c in cell[size:]] for cell in cells])
    # Every argument is batched: `sample_from_distribution`'s `&` drops the batch axis under
    # mx.vmap when its weights are unbatched and its uniforms are not (MLX 0.32).
    count = len(cells)
    target_probs = mx.broadcast_to(as_float32(target_rows), (count, size + 1, V))
    draft_probs = mx.broadcast_to(as_float32(draft_rows), (count, size + 1, V))

    def one(t: mx.array, d: mx.array, a: mx.array, s: mx.array
            ) -> tuple[mx.array, mx.array, mx.array]:
        q = None if scheme is TreeScheme.DETERMINISTIC else d
        verdict = verify_tree(scheme, parents, t, q, tokens, a, s)
        return verdict.num_accepted, verdict.accepted_nodes, verdict.next_token

    nums, nodes, nexts = mx.vmap(one)(target_probs, draft_probs, accept, sample)
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    counts: list[int] = nums.tolist()  # type: ignore[assignment]
    paths: list[list[int]] = nodes.tolist()  # type: ignore[assignment]
    emitted: list[int] = nexts.tolist()  # type: ignore[assignment]
    for cell, n, path, y in zip(cells, counts, paths, emitted, strict=True):
        volume = ONE
        for lo, hi in cell:
            volume *= hi - lo
        law[(*(tokens[c] for c in path[:n]), y)] += volume
    return dict(law)


def library_round_law(scheme: TreeScheme, parents: Sequence[int]) -> Law:
    law: defaultdict[Tokens, Fraction] = defaultdict(Fraction)
    for tokens, w in drafts(scheme, parents, DRAFTER, PREFIX):
        for seq, v in library_verify_law(scheme, parents, tokens).items():
            law[seq] += w * v
    return dict(law)


# --------------------------------------------------------------------------------------
# The checks.

SCHEMES = tuple(TreeScheme)
LIBRARY_TREES = ("width2", "width3", "two_then_two")


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.value)
@pytest.mark.parametrize("tree", sorted(TREES))
def test_each_scheme_is_lossless_on_its_drafting(scheme: TreeScheme, tree: str) -> None:
    law = round_law(Variant(scheme), scheme, TREES[tree])
    assert sum(law.values(), ZERO) == 1
    assert distance_from_target(law, TREES[tree]) == 0


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.value)
@pytest.mark.parametrize("tree", LIBRARY_TREES)
def test_the_library_realises_the_exact_rule(scheme: TreeScheme, tree: str) -> None:
    """verify_tree's law, integrated over its uniforms, is the rule's, and lossless."""
    law = library_round_law(scheme, TREES[tree])
    assert law == round_law(Variant(scheme), scheme, TREES[tree])
    assert distance_from_target(law, TREES[tree]) == 0


def test_the_chain_is_token_by_token_rejection_sampling() -> None:
    """A width-1 tree under every scheme with q is modified rejection sampling, verify_tokenwise's
    stochastic rule: one law for both schemes that read q."""
    chain = TREES["chain2"]
    assert (round_law(Variant(TreeScheme.IID), TreeScheme.IID, chain)
            == round_law(Variant(TreeScheme.WITHOUT_REPLACEMENT), TreeScheme.IID, chain))


def constant(law: Dist) -> Table:
    """A context-free law."""
    return lambda _context: law


def worst_distance(variant: Variant, drafting: TreeScheme, p_pool: Sequence[Dist],
                   q_pool: Sequence[Dist], width: int) -> Fraction:
    """The largest TV from p of the token one node emits, over the laws of the pools."""
    worst = ZERO
    for p, q in itertools.product(p_pool, q_pool):
        if drafting is not TreeScheme.IID and sum(1 for w in q if w) < width:
            continue  # no `width` distinct tokens to draft
        parents = (-1,) * width
        law: defaultdict[int, Fraction] = defaultdict(Fraction)
        target, drafter = constant(p), constant(q)
        for tokens, w in drafts(drafting, parents, drafter, ()):
            for seq, v in verify_law(variant, parents, tokens, target, drafter, ()).items():
                law[seq[0]] += w * v
        worst = max(worst, sum((abs(law[x] - p[x]) for x in range(len(p))), ZERO) / 2)
    return worst


def grid_laws(denominator: int, size: int) -> list[Dist]:
    return [tuple(Fraction(w, denominator) for w in ws)
            for ws in itertools.product(range(denominator + 1), repeat=size)
            if sum(ws) == denominator]


GRID2 = grid_laws(16, 2)
GRID3 = grid_laws(4, 3)


def test_drafts_without_replacement_verified_as_iid_are_caught() -> None:
    """RSD's drafts verified with SpecInfer's rule (q not renormalised after a rejection):
    over every pair of laws on the 1/4 grid of V = 3, two siblings emit a token as far as
    TV 1/2 from p (3/4 on the 1/8 grid; with V = 2 two siblings are both ids, and the rules
    agree)."""
    wrong = Variant(TreeScheme.IID)
    assert worst_distance(wrong, TreeScheme.WITHOUT_REPLACEMENT, GRID3, GRID3, 2) == \
        Fraction(1, 2)
    right = Variant(TreeScheme.WITHOUT_REPLACEMENT)
    assert worst_distance(right, TreeScheme.WITHOUT_REPLACEMENT, GRID3, GRID3, 2) == 0


def test_top_candidates_verified_with_p_over_q_are_caught() -> None:
    """Deterministic top-n drafts verified with the stochastic test against the drafter's q
    (llama.cpp's multi-draft example): the candidates were never drawn from q. Lossy in the
    demo tables' trees, and over the 1/4 grid of V = 3 as far as TV 1/2 with two candidates
    (3/4 on the 1/8 grid)
    (1/2 with one on the 1/16 grid of V = 2)."""
    wrong = Variant(TreeScheme.IID)
    for tree in ("width2", "two_then_two"):
        law = round_law(wrong, TreeScheme.DETERMINISTIC, TREES[tree])
        assert distance_from_target(law, TREES[tree]) > 0
    assert worst_distance(wrong, TreeScheme.DETERMINISTIC, GRID3, GRID3, 2) == Fraction(1, 2)
    assert worst_distance(wrong, TreeScheme.DETERMINISTIC, GRID2, GRID2, 1) == Fraction(1, 2)
    right = Variant(TreeScheme.DETERMINISTIC)
    assert worst_distance(right, TreeScheme.DETERMINISTIC, GRID3, GRID3, 2) == 0


def emitted_law(variant: Variant, p: Dist, q: Dist, tokens: Sequence[int]) -> list[Fraction]:
    """The law of the token one node emits (its accepted child's, or the draw)."""
    law = [ZERO] * len(p)
    for j, y, w in node_law(variant, p, q, tokens):
        law[tokens[j] if j is not None else y] += w  # type: ignore[index]
    return law


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.value)
def test_a_reused_coin_for_the_final_draw_is_caught(scheme: TreeScheme) -> None:
    """The next token drawn with the last rejected child's accept coin (SGLang PR #7207):
    that coin is known to lie above the child's threshold, so the draw is conditioned.
    Here the rejected draft 0 leaves the residual (0, 1/2, 1/2) and a coin in [1/2, 1),
    which always draws id 2."""
    p, q = dist(8, 4, 4), dist(16, 0, 0)
    assert emitted_law(Variant(scheme), p, q, [0]) == list(p)
    assert emitted_law(Variant(scheme, reuse_coin=True), p, q, [0]) == \
        [Fraction(1, 2), ZERO, Fraction(1, 2)]
    if scheme is TreeScheme.DETERMINISTIC:  # and in a whole round of the demo tables
        law = round_law(Variant(scheme, reuse_coin=True), scheme, TREES["chain2"])
        assert distance_from_target(law, TREES["chain2"]) > 0


def test_duplicate_siblings_without_replacement_are_caught() -> None:
    """Why the scheme rejects repeated siblings: renormalised q gives the repeat q_j(x) = 0,
    so its test passes whatever the coin."""
    p, q = dist(8, 4, 4), dist(4, 8, 4)
    law: defaultdict[int, Fraction] = defaultdict(Fraction)
    for j, y, w in node_law(Variant(TreeScheme.WITHOUT_REPLACEMENT), p, q, [1, 1]):
        law[1 if j is not None else y] += w  # type: ignore[index]
    assert law[1] > p[1]
    with pytest.raises(ValueError, match="draft_tokens"):
        verify_tree(TreeScheme.WITHOUT_REPLACEMENT, (-1, -1), as_float32([p, p, p]),
                    as_float32([q, q, q]), (1, 1), mx.zeros((2,)), mx.zeros((2,)))


def test_siblings_sorted_by_the_target_are_caught() -> None:
    """A tree shaped with target-side information: two i.i.d. drafts put in order of the
    target's probability before verification are no longer i.i.d. in that order."""
    p, q = dist(8, 4, 4), dist(4, 8, 4)
    law: defaultdict[int, Fraction] = defaultdict(Fraction)
    for tokens, w in drafts(TreeScheme.IID, (-1, -1), lambda _c: q, ()):
        ordered = sorted(tokens, key=lambda x: -p[x])
        for j, y, v in node_law(Variant(TreeScheme.IID), p, q, ordered):
            law[ordered[j] if j is not None else y] += w * v  # type: ignore[index]
    assert any(law[x] != p[x] for x in range(V))


GRID_STEP = Fraction(1, 1 << 24)
"""A run's uniforms are multiples of 2**-24, so u = 0 has probability 2**-24."""


def grid_accept_probability(r: Dist, q_j: Dist, x: int, *, guard: bool) -> Fraction:
    """P(u * q_j(x) <= r(x)) for u uniform on the grid {k / 2**24 : 0 <= k < 2**24}."""
    if r[x] == 0 and guard:
        return ZERO
    if q_j[x] == 0:
        return ONE
    passing = min(1 << 24, int(r[x] / q_j[x] / GRID_STEP) + 1)  # k <= (r / q) * 2**24
    return passing * GRID_STEP


def test_a_zero_mass_draft_accepted_at_coin_zero_is_caught() -> None:
    """Without the r(x) > 0 guard, a token the target excludes passes its test at u = 0
    (SGLang #35771): on a run's grid of uniforms that happens with probability 2**-24, and
    the emitted law gives the excluded token mass. The guard keeps it out, and the library
    applies it at u = 0."""
    p, q = dist(8, 0, 8), dist(4, 8, 4)
    assert grid_accept_probability(p, q, 1, guard=True) == 0
    assert grid_accept_probability(p, q, 1, guard=False) == GRID_STEP > p[1]
    assert grid_accept_probability(p, q, 0, guard=True) == 1
    verdict = verify_tree(TreeScheme.IID, (-1,), as_float32([p, p]), as_float32([q, q]),
                          (1,), mx.zeros((1,)), mx.zeros((2,)))
    assert verdict.num_accepted.item() == 0
    assert verdict.next_token.item() != 1


# --------------------------------------------------------------------------------------
# A node's acceptance in closed form: the library's functions against the rule's law.


def exact_node_acceptance(scheme: TreeScheme, p: Dist, q: Dist, width: int) -> Fraction:
    """P(a node with `width` children drafted from q under `scheme` keeps one), enumerated:
    every drafting of the children with its probability, times `node_law`'s acceptance."""
    total = ZERO
    for tokens, weight in drafts(scheme, (-1,) * width, constant(q), ()):
        law = node_law(Variant(scheme), p, q, tokens)
        total += weight * sum((w for child, _, w in law if child is not None), ZERO)
    return total


def library_node_acceptance(scheme: TreeScheme, p: Dist, q: Dist, width: int) -> float:
    p_row, q_row = as_float32([p, q])
    if scheme is TreeScheme.IID:
        form = iid_siblings_acceptance(p_row, q_row, width)
    elif scheme is TreeScheme.WITHOUT_REPLACEMENT:
        form = without_replacement_siblings_acceptance(p_row, q_row, width)
    else:
        form = candidate_siblings_acceptance(p_row, top_candidates(q, width))
    value = form.item()
    assert isinstance(value, float)
    return value


def drawable(scheme: TreeScheme, q: Dist, width: int) -> bool:
    return scheme is TreeScheme.IID or sum(1 for w in q if w) >= width


CLOSED_FORM_LAWS = [*TARGET_POOL, *DRAFT_POOL, *GRID3]


@pytest.mark.parametrize("scheme", list(TreeScheme))
@pytest.mark.parametrize("width", [1, 2, 3])
def test_each_scheme_s_closed_form_is_its_node_s_acceptance(scheme: TreeScheme,
                                                            width: int) -> None:
    """Over every pair of the pools' and the 1/4 grid's laws (V = 3), the closed form of
    the scheme's acceptance at a node equals the enumerated law's, within float32."""
    checked = 0
    for p, q in itertools.product(CLOSED_FORM_LAWS, CLOSED_FORM_LAWS):
        if not drawable(scheme, q, width):
            continue
        exact = exact_node_acceptance(scheme, p, q, width)
        assert library_node_acceptance(scheme, p, q, width) == pytest.approx(
            float(exact), abs=1e-6), (scheme, p, q, width)
        checked += 1
    assert checked > 100


def test_the_closed_forms_tell_the_schemes_apart() -> None:
    """The check above has power against the nearest wrong closed form: i.i.d.'s product
    form for drafts without replacement, and independent tests against p,
    1 - Π(1 - p(x_j)), for deterministic candidates, each miss by more than 1/20 on some
    pair of these laws (and the two schemes' own forms differ there)."""
    def gap(wrong: Callable[[Dist, Dist], float], scheme: TreeScheme) -> float:
        return max(abs(wrong(p, q) - float(exact_node_acceptance(scheme, p, q, 2)))
                   for p, q in itertools.product(CLOSED_FORM_LAWS, CLOSED_FORM_LAWS)
                   if drawable(scheme, q, 2))

    def iid_form(p: Dist, q: Dist) -> float:
        return library_node_acceptance(TreeScheme.IID, p, q, 2)

    def independent_tests(p: Dist, q: Dist) -> float:
        return 1.0 - math.prod(1.0 - float(p[x]) for x in top_candidates(q, 2))

    assert gap(iid_form, TreeScheme.WITHOUT_REPLACEMENT) > 0.05
    assert gap(independent_tests, TreeScheme.DETERMINISTIC) > 0.05


def test_without_replacement_refuses_an_enumeration_past_its_bound() -> None:
    p = mx.full((4097,), 1 / 4097)
    with pytest.raises(ValueError, match=r"num_drafts must keep V\*\*num_drafts .* got "
                                         r"num_drafts 3 at V = 4097"):
        without_replacement_siblings_acceptance(p, p, 3)
