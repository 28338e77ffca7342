"""The ``verify_tree`` vectors (tree verification).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import mlx.core as mx

from specaccept.core.tree import TreeScheme, tree_shape, verify_tree

from .common import (
    PLACEHOLDER_IDS,
    ROBUST_MARGIN,
    GenerationError,
    Lcg,
    Rational,
    Row,
    Vector,
    arr,
    check_equal,
    draw_from,
    draw_is_robust,
    encode_ids,
    encode_reals,
    id_array,
    id_list,
    ints,
    oracle_sample,
    rational,
    scalar_int,
    seed_of,
    vector,
)

# --- verify_tree (tree verification) ---------------------------------------------------------

TREE_SHAPES = {"width2": (-1, -1), "width3": (-1, -1, -1), "chain2": (-1, 0),
               "two_then_two": (-1, -1, 0, 0)}


def tree_proposal(scheme: TreeScheme, q: Rational, tokens: Sequence[int], j: int) -> Rational:
    """The law child j was drafted from, given siblings 0..j-1: q, q without them, one-hot."""
    if scheme is TreeScheme.DETERMINISTIC:
        return [Fraction(int(x == tokens[j])) for x in range(len(q))]
    if scheme is TreeScheme.IID or j == 0:
        return list(q)
    kept = [Fraction(0) if x in tokens[:j] else w for x, w in enumerate(q)]
    mass = sum(kept)
    return kept if mass == 0 else [w / mass for w in kept]


def tree_oracle(scheme: TreeScheme, parents: Sequence[int], target: list[Rational],
                draft: list[Rational], tokens: Sequence[int], accept: Sequence[Fraction],
                sample: Sequence[Fraction]) -> tuple[list[int], int, bool]:
    """(accepted nodes, next token, robust): the rule walked in exact arithmetic."""
    shape = tree_shape(parents, tokens, distinct_siblings=False)
    row, robust = 0, True
    path: list[int] = []
    while True:
        r, kids = target[row], shape.children[row]
        siblings = [tokens[c] for c in kids]
        chosen = None
        for j, child in enumerate(kids):
            q_j = tree_proposal(scheme, draft[row], siblings, j)
            x = siblings[j]
            if q_j[x] > 0 and r[x] > 0:
                robust = robust and abs(accept[child] - r[x] / q_j[x]) >= ROBUST_MARGIN
            if r[x] > 0 and accept[child] * q_j[x] <= r[x]:
                chosen = child
                break
            excess = [max(a - b, Fraction(0)) for a, b in zip(r, q_j, strict=True)]
            mass = sum(excess)
            r = r if mass == 0 else [e / mass for e in excess]
        if chosen is None:
            u = sample[shape.depths[row]]
            return path, oracle_sample(r, u), robust and draw_is_robust(r, u)
        path.append(chosen)
        row = chosen + 1


def tree_vector(name: str, note: str, scheme: TreeScheme, parents: Sequence[int],
                target: list[Row], draft: list[Row] | None, tokens: Sequence[int],
                accept: list[float], sample: list[float], *, exact_tie: bool = False
                ) -> Vector | None:
    """`exact_tie`: a case placed on a test's threshold on purpose, where the threshold is
    exact in float32 (0, or a dyadic ratio of dyadic laws); only the draw must be robust."""
    exact_target = [rational(r) for r in target]
    exact_draft = [rational(r) for r in draft] if draft is not None else exact_target
    path, nxt, robust = tree_oracle(scheme, parents, exact_target, exact_draft, tokens,
                                    [Fraction(u) for u in accept], [Fraction(u) for u in sample])
    if not robust and not exact_tie:
        return None
    verdict = verify_tree(scheme, tuple(parents), arr(target),
                          arr(draft) if draft is not None else None, tuple(tokens),
                          mx.array(accept), mx.array(sample))
    depth = max(tree_shape(parents, tokens, distinct_siblings=False).depths)
    nodes = path + [-1] * (depth - len(path))
    check_equal(name, (scalar_int(verdict.num_accepted), ints(verdict.accepted_nodes),
                       scalar_int(verdict.next_token)), (len(path), nodes, nxt))
    return vector(name, note, {
        "scheme": scheme.value, "parents": list(parents), "target_probs": encode_reals(target),
        "draft_probs": encode_reals(draft) if draft is not None else None,
        "draft_tokens": list(tokens), "accept_uniforms": encode_reals(accept),
        "sample_uniforms": encode_reals(sample),
    }, {"num_accepted": len(path), "accepted_nodes": id_list(nodes), "next_token": nxt}, 0.0)


def tree_drafts(scheme: TreeScheme, parents: Sequence[int], draft: list[Row],
                rng: Lcg) -> list[int] | None:
    """Node tokens drafted as the scheme assumes: i.i.d., without replacement, or top-n."""
    tokens: list[int] = []
    for i, parent in enumerate(parents):
        q = draft[parent + 1]
        earlier = [tokens[s] for s in range(i) if parents[s] == parent]
        if scheme is TreeScheme.DETERMINISTIC:
            order = sorted(range(len(q)), key=lambda x: (-q[x], x))
            tokens.append(order[len(earlier)])
            continue
        weights = [0.0 if (scheme is TreeScheme.WITHOUT_REPLACEMENT and x in earlier) else w
                   for x, w in enumerate(q)]
        if sum(weights) == 0:
            return None
        tokens.append(draw_from(weights, rng))
    return tokens


def searched_tree(scheme: TreeScheme, tree: str, stop_row: int | None) -> Vector:
    """The first pseudo-random round of `tree` under `scheme` that stops at `stop_row`; with
    None, one whose first root child passes while a later root sibling would pass too."""
    parents = TREE_SHAPES[tree]
    size = len(parents)
    row_key = size + 1 if stop_row is None else stop_row
    rng = Lcg(seed_of(11, list(TreeScheme).index(scheme), size, row_key, len(tree)))
    depth = max(tree_shape(parents, [0] * size, distinct_siblings=False).depths)
    for _ in range(50000):
        vocab = 3 + rng.below(2)
        target = [rng.dyadic_distribution(vocab) for _ in range(size + 1)]
        draft = [rng.dyadic_distribution(vocab) for _ in range(size + 1)]
        tokens = tree_drafts(scheme, parents, draft, rng)
        if tokens is None:
            continue
        accept = [rng.uniform() for _ in range(size)]
        sample = [rng.uniform() for _ in range(depth + 1)]
        path, _, robust = tree_oracle(scheme, parents, [rational(r) for r in target],
                                      [rational(r) for r in draft], tokens,
                                      [Fraction(u) for u in accept],
                                      [Fraction(u) for u in sample])
        if not robust:
            continue
        if stop_row is None:
            if not (path and path[0] == 0 and later_sibling_passes(
                    scheme, parents, target, draft, tokens, accept, path)):
                continue
            label, what = "_first_of_two_passing", "the first of two passing root children wins"
        else:
            if (path[-1] + 1 if path else 0) != stop_row:
                continue
            label, what = f"_stop_row{stop_row}", f"the walk stops at row {stop_row}"
        made = tree_vector(
            f"{scheme.value.replace('-', '_')}_{tree}{label}",
            f"pseudo-random dyadic {tree} tree under {scheme.value}: {what}", scheme, parents,
            target, None if scheme is TreeScheme.DETERMINISTIC else draft, tokens, accept, sample)
        if made is not None:
            return made
    raise GenerationError(f"no tree case for {scheme.value} {tree} row {stop_row}")


def later_sibling_passes(scheme: TreeScheme, parents: Sequence[int], target: list[Row],
                         draft: list[Row], tokens: Sequence[int], accept: Sequence[float],
                         path: Sequence[int]) -> bool:
    """Whether, at the first row of the path, a later sibling would pass with r = p."""
    if not path:
        return False
    shape = tree_shape(parents, tokens, distinct_siblings=False)
    kids = shape.children[0]
    p = rational(target[0])
    later = kids[kids.index(path[0]) + 1:]
    for child in later:
        q_j = tree_proposal(scheme, rational(draft[0]), [tokens[c] for c in kids],
                            kids.index(child))
        x = tokens[child]
        if p[x] > 0 and Fraction(accept[child]) * q_j[x] <= p[x]:
            return True
    return False


def placeholder_tree_vectors() -> list[Vector | None]:
    """A `[N]` id array whose node 0 is a placeholder: the tree is verified as if node 0
    were absent. Read as id 0 (clamped without the flag) or Python-style (-4 is id 0, -1
    id 3), node 0 would be kept at its coin 0; without it, node 1 and its child decide."""
    parents = (-1, -1, 1)
    target = [[0.5, 0.25, 0.25, 0.0], [0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25],
              [0.5, 0.25, 0.125, 0.125]]
    draft = [[0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25], [0.5, 0.125, 0.125, 0.25],
             [0.25, 0.25, 0.25, 0.25]]
    accept, sample = [0.0, 0.375, 0.25], [0.3125, 0.3125, 0.8125]
    kept = [0, 2, 3]  # the rows of the tree without node 0: the root, nodes 1 and 2
    path, nxt, robust = tree_oracle(
        TreeScheme.IID, (-1, 0), [rational(target[r]) for r in kept],
        [rational(draft[r]) for r in kept], [1, 2], [Fraction(u) for u in accept[1:]],
        [Fraction(u) for u in sample])
    if not robust:
        return [None]
    path = [n + 1 for n in path]
    out: list[Vector | None] = []
    for label, value, dtype in PLACEHOLDER_IDS:
        tokens = [value, 1, 2]
        verdict = verify_tree(TreeScheme.IID, parents, arr(target), arr(draft),
                              id_array(tokens, dtype), mx.array(accept), mx.array(sample))
        nodes = path + [-1] * (2 - len(path))
        check_equal(f"tree_placeholder_{label}", (scalar_int(verdict.num_accepted),
                    ints(verdict.accepted_nodes), scalar_int(verdict.next_token)),
                    (len(path), nodes, nxt))
        out.append(vector(
            f"placeholder_{label}",
            f"node 0's id {value} ({dtype or 'int32'}) is no draft: never kept, the residual "
            "unchanged, as if the node were absent", {
                "scheme": "iid", "parents": list(parents), "target_probs": encode_reals(target),
                "draft_probs": encode_reals(draft),
                "draft_tokens": encode_ids(tokens, dtype or "int32"),
                "accept_uniforms": encode_reals(accept), "sample_uniforms": encode_reals(sample),
            }, {"num_accepted": len(path), "accepted_nodes": id_list(nodes), "next_token": nxt},
            0.0))
    return out


def verify_tree_vectors() -> list[Vector]:
    half3, p3 = [0.5, 0.25, 0.25], [0.25, 0.5, 0.25]
    hand: list[Vector | None] = [
        tree_vector("zero_mass_draft_rejected_at_coin_zero",
                    "p(1) = 0 and the coin is 0: 0 * q(1) <= 0, yet the r(x) > 0 guard "
                    "rejects the draft and the draw skips id 1", TreeScheme.IID, (-1,),
                    [[0.5, 0.0, 0.5], half3], [[0.25, 0.5, 0.25], half3], [1], [0.0],
                    [0.5, 0.0], exact_tie=True),
        tree_vector("final_draw_reads_the_sample_uniform",
                    "draft 0 rejected (coin 0.75 > 1/2); the residual (0, 1/2, 1/2) drawn with "
                    "the sample uniform 0.25 gives id 1, the rejected coin would give id 2",
                    TreeScheme.IID, (-1,), [half3, half3], [[1.0, 0.0, 0.0], half3], [0],
                    [0.75], [0.25, 0.0]),
        tree_vector("without_replacement_renormalises_q",
                    "sibling 0 (p = 0) rejected, r = (0, 1/5, 4/5); sibling 1 is tested against "
                    "q without id 0, (0, 1/3, 2/3): threshold 3/5 < 0.8125 rejects it (against "
                    "the unrenormalised q(1) = 1/8 it would pass), and the draw gives id 2",
                    TreeScheme.WITHOUT_REPLACEMENT, (-1, -1),
                    [[0.0, 0.25, 0.75], half3, half3], [[0.625, 0.125, 0.25], half3, half3],
                    [0, 1], [0.5, 0.8125], [0.5, 0.0]),
        tree_vector("candidates_are_one_hot",
                    "deterministic candidates 0 and 1 with p = (1/4, 1/2, 1/4): candidate 0 "
                    "fails (0.5 > 1/4), then r = (0, 2/3, 1/3) and 0.5 <= 2/3 keeps candidate 1",
                    TreeScheme.DETERMINISTIC, (-1, -1), [p3, half3, half3], None, [0, 1],
                    [0.5, 0.5], [0.0, 0.0]),
    ]
    hand += placeholder_tree_vectors()
    if any(v is None for v in hand):
        raise GenerationError("a hand-written verify_tree case is not robust")
    out = [v for v in hand if v is not None]
    for scheme in TreeScheme:
        for tree, parents in TREE_SHAPES.items():
            for stop_row in range(len(parents) + 1):
                out.append(searched_tree(scheme, tree, stop_row))
            if tree != "chain2":
                out.append(searched_tree(scheme, tree, None))
    return out
