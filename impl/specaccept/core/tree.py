"""Tree verification: a round's drafts form a tree, and the target keeps one root path of it.

Three schemes, each recursive rejection sampling at every node of the accepted path, with a
proposal law per child that says how the siblings were drafted: i.i.d. from the drafter's
law (SpecInfer, Miao et al. 2024), without replacement from it (RSD, Jeon et al. 2024), or
as distinct deterministic candidates (a one-hot proposal, the rule of EAGLE's posterior
evaluation). The tree's structure is a Python parent array, checked eagerly; the laws and
the uniforms are arrays, and the verdict is built without evaluating them.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple

import mlx.core as mx

from specaccept.core import randomness, validation
from specaccept.core.randomness import UniformKey
from specaccept.core.sampling import sample_from_distribution

__all__ = ["MAX_DRAW_ORDER_ENTRIES", "MAX_TREE_NODES", "TreeKeys", "TreeScheme", "TreeShape",
           "TreeVerdict",
           "candidate_siblings_acceptance", "iid_siblings_acceptance", "multi_draft_ceiling",
           "tree_keys", "tree_shape", "verify_tree", "without_replacement_siblings_acceptance"]

MAX_DRAW_ORDER_ENTRIES = 2**26
"""The most entries (V to the power n: V**(n - 1) draw orders of a `[V]` row each)
`without_replacement_siblings_acceptance` enumerates, about 256 MiB an array in float32."""

MAX_TREE_NODES = 4096
"""The most nodes a tree may have, and the most siblings a closed form counts (num_drafts):
checked before anything is sized by it. Trees in use are far smaller (EAGLE-2 verifies about
60 nodes, Sequoia's largest some 800), and every check of a tree is linear in its nodes."""


class TreeScheme(str, Enum):
    """How the siblings under a node were drafted, which decides how they are verified."""

    IID = "iid"
    """Each child drawn independently from the drafter's law q at the node (with replacement)."""
    WITHOUT_REPLACEMENT = "without-replacement"
    """Children drawn one after another from q, each excluding the tokens drawn before it."""
    DETERMINISTIC = "deterministic"
    """Distinct candidates chosen from drafter-side information alone (top-n of q, say)."""


class TreeShape(NamedTuple):
    """A checked tree: each node's children in index order, and each row's depth."""

    children: tuple[tuple[int, ...], ...]
    """For each row (the root, then node i at i + 1), its children in index order."""
    depths: tuple[int, ...]
    """The depth of each row, 0 for the root and a node's path length for a node."""


def tree_shape(parents: object, draft_tokens: object, *, distinct_siblings: bool) -> TreeShape:
    """Check a parent array and its tokens; return each row's children and depth.

    `parents[i]` is node i's parent: -1 for the root (the round's context) or an earlier
    node. `draft_tokens[i]` is node i's token, a Python int. With `distinct_siblings`, two
    children of one node may not carry the same token.

    >>> tree_shape((-1, -1, 0), (0, 1, 1), distinct_siblings=True)
    TreeShape(children=((0, 1), (2,), (), ()), depths=(0, 1, 1, 2))
    """
    if isinstance(parents, str | bytes) or not isinstance(parents, Sequence):
        raise TypeError(f"parents must be a sequence of ints, got {type(parents).__name__}")
    if isinstance(draft_tokens, str | bytes) or not isinstance(draft_tokens, Sequence):
        raise TypeError(
            f"draft_tokens must be a sequence of ints, got {type(draft_tokens).__name__}")
    size = len(parents)
    if size < 1:
        raise ValueError("parents must name at least one node, got an empty tree")
    if size > MAX_TREE_NODES:
        raise ValueError(f"parents must name at most {MAX_TREE_NODES} nodes, got {size}")
    if len(draft_tokens) != size:
        raise ValueError(
            f"draft_tokens must hold one token per node: {size} nodes, got {len(draft_tokens)}")
    for i, parent in enumerate(parents):
        validation.integer(f"parents[{i}]", parent)
        if not -1 <= parent < size:
            raise ValueError(f"parents[{i}] must be -1 (the root) or a node, got {parent}")
    # Each node is walked from once: a walk stops at a node an earlier walk finished, so
    # finding a cycle costs O(N) whatever the depth.
    finished = [False] * size
    for i in range(size):
        walk, on_walk, node = [], set(), i
        while node != -1 and not finished[node]:
            if node in on_walk:
                raise ValueError(f"parents has a cycle through node {i}: {_brief(parents)}")
            on_walk.add(node)
            walk.append(node)
            node = parents[node]
        for node in walk:
            finished[node] = True
    for i, parent in enumerate(parents):
        if parent >= i:
            raise ValueError(
                f"parents[{i}] = {parent}: a parent must come before its child (topological "
                "order, the layout of a tree-attention mask)")
    children: list[list[int]] = [[] for _ in range(size + 1)]
    depths = [0]
    for i, parent in enumerate(parents):
        children[parent + 1].append(i)
        depths.append(depths[parent + 1] + 1)
    for i, token in enumerate(draft_tokens):
        validation.integer(f"draft_tokens[{i}]", token)
        if token < 0:
            raise ValueError(f"draft_tokens[{i}] must be a token id >= 0, got {token}")
    if distinct_siblings:
        for row, siblings in enumerate(children):
            tokens = [draft_tokens[c] for c in siblings]
            if len(set(tokens)) != len(tokens):
                raise ValueError(
                    f"draft_tokens: the children {siblings} of row {row} repeat a token "
                    f"({tokens}); the scheme needs distinct siblings")
    return TreeShape(tuple(tuple(c) for c in children), tuple(depths))


def _brief(values: Sequence[int]) -> str:
    """A parent array in a message: whole when short, its first entries when long."""
    shown = tuple(values[:16])
    return str(shown) if len(values) <= 16 else f"{str(shown)[:-1]}, ... ({len(values)} nodes)"


class TreeVerdict(NamedTuple):
    """A verified tree: emit the tokens of ``accepted_nodes[:num_accepted]``, then `next_token`."""

    num_accepted: mx.array
    """The accepted path's length, a 0-d int32 in [0, D]."""
    accepted_nodes: mx.array
    """`[D]` int32: the accepted path's nodes from the root down, -1 past `num_accepted`."""
    next_token: mx.array
    """The token after the path, a 0-d int32, drawn from the residual at the last node."""


def _proposal(scheme: TreeScheme, q: mx.array, token: int | mx.array,
              drawn: mx.array | None) -> mx.array:
    """The law a child with `token` was drafted from, given its elder siblings' tokens are
    `drawn` (a `[V]` bool mask, None for the eldest): kept incrementally, so that a node's
    W children cost O(W V), not O(W**2 V)."""
    if scheme is TreeScheme.DETERMINISTIC:
        return (mx.arange(q.shape[-1]) == token).astype(mx.float32)
    if scheme is TreeScheme.IID or drawn is None:
        return q
    kept = mx.where(drawn, 0.0, q)
    mass = kept.sum()
    return mx.where(mass > 0, kept / mx.where(mass > 0, mass, 1.0), kept)


def _token_array(value: mx.array, size: int, vocab_size: int) -> validation.DraftIds:
    """Draft tokens given as an array: a `[N]` integer array, its shape and dtype checked; an
    id outside [0, V) is a placeholder (no draft), gathered through index 0."""
    if not mx.issubdtype(value.dtype, mx.integer):
        raise TypeError(f"draft_tokens must be an integer array, got {value.dtype}")
    return validation.draft_ids("draft_tokens", value, vocab_size=vocab_size,
                                batch_shape=(size,))


def _entry(values: mx.array, index: mx.array) -> mx.array:
    """``values[index]`` for a 1-d int32 `values` and a 0-d `index`, as a masked sum: array
    indexing by an array loses the batch axis under ``mx.vmap`` (MLX 0.32), and engines
    verify a batch of trees at once."""
    return mx.where(mx.arange(values.shape[0]) == index, values, 0).sum().astype(mx.int32)


def verify_tree(
    scheme: TreeScheme,
    parents: Sequence[int],
    target_probs: mx.array,
    draft_probs: mx.array | None,
    draft_tokens: Sequence[int] | mx.array,
    accept_uniforms: mx.array,
    sample_uniforms: mx.array,
) -> TreeVerdict:
    """Verify a tree of N drafts by recursive rejection sampling down one root path.

    Rows: row 0 is the root (the round's context), row i + 1 is node i. `target_probs[v]`
    is the target's law at row v, conditioned on its path; `draft_probs[v]` the drafter's
    law q that v's children were drafted from (unread under `DETERMINISTIC`, where it must
    be None). At a row, with r = p the target's law, the children j = 0, 1, ... in index
    order are tested: child j with token x and proposal q_j (see the spec) is accepted
    when ``r(x) > 0 and accept_uniforms[node] * q_j(x) <= r(x)``; the first accepted child
    is descended into; a rejected one sets ``r = relu(r - q_j) / Σ relu(r - q_j)`` (r
    unchanged if that has no mass). When no child is accepted (a leaf has none), the next
    token is ``sample_from_distribution(r, sample_uniforms[depth])``.

    Args:
        scheme: how the siblings were drafted.
        parents: N Python ints, node i's parent (-1 the root), parents before children.
        target_probs: `[N+1, V]` float32.
        draft_probs: `[N+1, V]` float32, or None under `DETERMINISTIC`.
        draft_tokens: N Python ints in [0, V); distinct among siblings except under `IID`.
            Or a `[N]` integer array, not read on the host (a generator that drafts the
            tree lazily verifies it in the round's one synchronisation): an id outside
            [0, V) in it is a placeholder, no draft, as in the chain verifiers. It is never
            accepted and leaves the residual as it was, so its subtree is never reached:
            the tree is verified as if the placeholder and its subtree were absent.
            Distinct siblings are then a precondition.
        accept_uniforms: `[N]` float, node i's accept test.
        sample_uniforms: `[D+1]` float, the draw at depth d (D the tree's depth).

    >>> import mlx.core as mx
    >>> target = mx.array([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    >>> verdict = verify_tree(TreeScheme.DETERMINISTIC, (-1, -1), target, None, (0, 1),
    ...                       mx.array([0.75, 0.25]), mx.array([0.0, 0.0]))
    >>> verdict.num_accepted.item(), verdict.accepted_nodes.tolist(), verdict.next_token.item()
    (1, [1], 0)
    """
    if not isinstance(scheme, TreeScheme):
        raise TypeError(f"scheme must be a TreeScheme, got {type(scheme).__name__} {scheme!r}")
    is_array = isinstance(draft_tokens, mx.array)
    if is_array and not isinstance(parents, str | bytes) and isinstance(parents, Sequence):
        shape = tree_shape(parents, [0] * len(parents), distinct_siblings=False)
    else:
        shape = tree_shape(parents, draft_tokens, distinct_siblings=scheme is not TreeScheme.IID)
    size, depth = len(parents), max(shape.depths)
    target_probs = validation.require_probabilities("target_probs", target_probs, ndims=(2,))
    vocab_size = target_probs.shape[1]
    if target_probs.shape[0] != size + 1:
        raise ValueError(f"target_probs must be [N+1, V] = [{size + 1}, V] for {size} nodes, "
                         f"got {tuple(target_probs.shape)}")
    if isinstance(draft_tokens, mx.array):
        ids = _token_array(draft_tokens, size, vocab_size)
        node_tokens: list[int | mx.array] = [ids.clamped[i] for i in range(size)]
        node_valid: list[mx.array | None] = [ids.valid[i] for i in range(size)]
    else:
        for i, token in enumerate(draft_tokens):
            if token >= vocab_size:
                raise ValueError(f"draft_tokens[{i}] must lie in [0, {vocab_size}), got {token}")
        node_tokens, node_valid = [*draft_tokens], [None] * size
    if scheme is TreeScheme.DETERMINISTIC:
        if draft_probs is not None:
            raise ValueError("draft_probs must be None under the deterministic scheme: the "
                             "proposal of a candidate is the one-hot of its token")
        q_rows = target_probs  # never read: every proposal is one-hot
    else:
        if draft_probs is None:
            raise ValueError(f"draft_probs is required by the {scheme.value} scheme, got None")
        q_rows = validation.require_probabilities("draft_probs", draft_probs, ndims=(2,))
        if tuple(q_rows.shape) != (size + 1, vocab_size):
            raise ValueError(f"draft_probs must be [N+1, V] = [{size + 1}, {vocab_size}] like "
                             f"target_probs, got {tuple(q_rows.shape)}")
    accept_u = validation.uniform("accept_uniforms", validation.require_array(
        "accept_uniforms", accept_uniforms), batch_shape=(size,))
    sample_u = validation.uniform("sample_uniforms", validation.require_array(
        "sample_uniforms", sample_uniforms), batch_shape=(depth + 1,))

    chosen_rows: list[mx.array] = []
    residuals: list[mx.array] = []
    for index, kids in enumerate(shape.children):
        r = target_probs[index]
        chosen = mx.array(-1, dtype=mx.int32)
        drawn: mx.array | None = None
        for child in kids:
            node_token, valid = node_tokens[child], node_valid[child]
            q_j = _proposal(scheme, q_rows[index], node_token, drawn)
            r_x, q_x = r[node_token], q_j[node_token]
            accepted = mx.logical_and(r_x > 0, accept_u[child] * q_x <= r_x)
            excess = mx.maximum(r - q_j, 0.0)
            mass = excess.sum()
            rejected = mx.where(mass > 0, excess / mx.where(mass > 0, mass, 1.0), r)
            is_token = mx.arange(vocab_size) == node_token
            if valid is not None:  # a placeholder is no draft: never kept, changes nothing
                accepted = mx.logical_and(valid, accepted)
                rejected = mx.where(valid, rejected, r)
                is_token = mx.logical_and(valid, is_token)
            chosen = mx.where(mx.logical_and(chosen < 0, accepted), child, chosen)
            r = rejected
            if scheme is TreeScheme.WITHOUT_REPLACEMENT:
                drawn = is_token if drawn is None else mx.logical_or(drawn, is_token)
        chosen_rows.append(chosen)
        residuals.append(r)
    chosen_child = mx.stack(chosen_rows)  # [N+1]: the accepted child of each row, or -1
    row_uniforms = sample_u[mx.array(shape.depths, dtype=mx.int32)]
    candidates = sample_from_distribution(mx.stack(residuals), row_uniforms)
    accepted_nodes, last_row = _accepted_path(parents, shape, chosen_child)
    num_accepted = (accepted_nodes >= 0).sum().astype(mx.int32)
    return TreeVerdict(num_accepted, accepted_nodes, _entry(candidates, last_row))


def _accepted_path(
    parents: Sequence[int], shape: TreeShape, chosen_child: mx.array
) -> tuple[mx.array, mx.array]:
    """(the `[D]` accepted path, -1 past its end; the row it stops at), in O(N log D).

    Node i is on the path when it and each of its ancestors is its parent's chosen child.
    The AND over ancestors is taken by pointer doubling, with the ancestors known on the
    host; nodes sorted by depth then give each depth's path node as a difference of two
    prefix sums (one node of each depth, or none, is on the path).
    """
    size, depth = len(parents), max(shape.depths)
    nodes = mx.arange(size, dtype=mx.int32)
    on_path = chosen_child[mx.array([p + 1 for p in parents], dtype=mx.int32)] == nodes
    # Row N + 1 (past the rows) stands for "above the root", always on the path.
    on_path = mx.concatenate([on_path, mx.array([True])])
    ancestor = [p if p >= 0 else size for p in parents] + [size]
    hop = 1
    while hop < depth:
        on_path = mx.logical_and(on_path, on_path[mx.array(ancestor, dtype=mx.int32)])
        ancestor = [ancestor[a] for a in ancestor]
        hop *= 2
    by_depth = sorted(range(size), key=lambda i: shape.depths[i + 1])
    marks = mx.where(on_path[mx.array(by_depth, dtype=mx.int32)],
                     mx.array(by_depth, dtype=mx.int32) + 1, 0)
    prefix = mx.concatenate([mx.zeros((1,), dtype=mx.int32), mx.cumsum(marks)])
    ends = [0] * (depth + 1)  # ends[d]: how many nodes have depth <= d
    for i in range(size):
        ends[shape.depths[i + 1]] += 1
    for d in range(1, depth + 1):
        ends[d] += ends[d - 1]
    ends_array = mx.array(ends, dtype=mx.int32)
    accepted_nodes = (prefix[ends_array[1:]] - prefix[ends_array[:-1]] - 1).astype(mx.int32)
    # Parents come before their children, so the deepest path node is the largest.
    last_row = mx.where(on_path[:size], nodes + 1, 0).max().astype(mx.int32)
    return accepted_nodes, last_row


class TreeKeys(NamedTuple):
    """The keys of every uniform a tree round may read, in `verify_tree`'s layout."""

    draft: list[UniformKey]
    """Entry i draws node i's token (`DRAFT`, offset i)."""
    accept: list[UniformKey]
    """Entry i is node i's accept test (`ACCEPT`, offset i)."""
    sample: list[UniformKey]
    """Entry d (of D + 1) draws the token after a path of length d, at output position
    round_position + d (`SAMPLE`, keyed by that absolute position)."""


def tree_keys(round_position: int, parents: Sequence[int]) -> TreeKeys:
    """The keys a tree round starting at output `round_position` reads.

    Node i's draft and accept test are keyed by (round_position, i), as draft i of a chain
    is: a chain tree reads exactly `round_keys`' keys. Rounds start at distinct positions
    (each emits at least one token), so no key is read by two rounds.

    >>> keys = tree_keys(5, (-1, -1, 0))
    >>> keys.accept[2], keys.sample[2]
    (UniformKey(slot=0, position=5, offset=2), UniformKey(slot=1, position=7, offset=None))
    """
    shape = tree_shape(parents, [0] * len(parents), distinct_siblings=False)
    chain = randomness.round_keys(round_position, len(parents))
    sample = [randomness.UniformKey(randomness.SAMPLE, round_position + d, None)
              for d in range(max(shape.depths) + 1)]
    return TreeKeys(chain.draft, [row[0] for row in chain.verify[:-1]], sample)


def _law_pair(p: object, q: object) -> tuple[mx.array, mx.array]:
    p = validation.require_probabilities("p", p, ndims=(1,))
    q = validation.require_probabilities("q", q, ndims=(1,))
    validation.require_same_shape("p", p, "q", q)
    return p, q


def _draft_count(name: str, value: object) -> int:
    count = validation.integer(name, value)
    if not 1 <= count <= MAX_TREE_NODES:
        shown = count if count.bit_length() <= 64 else f"an int of {count.bit_length()} bits"
        raise ValueError(f"{name} must lie in [1, {MAX_TREE_NODES}] (MAX_TREE_NODES), got {shown}")
    return count


def iid_siblings_acceptance(p: mx.array, q: mx.array, num_drafts: int) -> mx.array:
    """P(a node accepts one of `num_drafts` children drafted i.i.d. from q), target p.

    ``1 - Π_j (1 - Σ_x min(r_j(x), q(x)))`` with r_0 = p and r_{j+1} the residual
    ``relu(r_j - q)`` normalised (r_j unchanged if it has no mass): under i.i.d. drafts
    the residuals do not depend on the drafted tokens, so this is exact. A 0-d float32.

    >>> import mlx.core as mx
    >>> p, q = mx.array([0.5, 0.5]), mx.array([1.0, 0.0])
    >>> iid_siblings_acceptance(p, q, 1).item(), iid_siblings_acceptance(p, q, 2).item()
    (0.5, 0.5)
    """
    p, q = _law_pair(p, q)
    num_drafts = _draft_count("num_drafts", num_drafts)
    r, miss = p, mx.array(1.0, dtype=mx.float32)
    for _ in range(num_drafts):
        miss = miss * (1.0 - mx.minimum(r, q).sum())
        excess = mx.maximum(r - q, 0.0)
        mass = excess.sum()
        r = mx.where(mass > 0, excess / mx.where(mass > 0, mass, 1.0), r)
    return 1.0 - miss


def without_replacement_siblings_acceptance(
    p: mx.array, q: mx.array, num_drafts: int
) -> mx.array:
    """P(a node accepts one of `num_drafts` children drafted from q without replacement).

    Child j is drafted from q_j, q with the earlier siblings' tokens removed and
    renormalised, and tested against the residual r_j as `verify_tree` does. A rejected
    child x leaves ``relu(r_j - q_j)`` normalised, which does not depend on x, but the next
    proposal q_{j+1} does; so the acceptance is a sum over the orders in which the first
    n - 1 children can be drawn and rejected:
    ``A(r, q_j) = Σ_x min(r(x), q_j(x)) + Σ_x relu(q_j(x) - r(x)) A(r', q_j without x)``.
    Exact, at the cost of V**(n - 1) rows of V: V**n at most `MAX_DRAW_ORDER_ENTRIES`,
    else ValueError. A 0-d float32; at n = 1 it is Σ min(p, q).

    >>> import mlx.core as mx
    >>> p, q = mx.array([0.5, 0.25, 0.25]), mx.array([0.25, 0.25, 0.5])
    >>> without_replacement_siblings_acceptance(p, q, 2).item()
    0.875
    """
    p, q = _law_pair(p, q)
    num_drafts = _draft_count("num_drafts", num_drafts)
    vocab_size = p.shape[0]
    # An exact integer: num_drafts <= MAX_TREE_NODES keeps it small, and at V = 1 (every
    # power 1) that bound is the one that holds the loop below.
    if vocab_size**num_drafts > MAX_DRAW_ORDER_ENTRIES:
        raise ValueError(
            f"num_drafts must keep V**num_drafts within {MAX_DRAW_ORDER_ENTRIES} enumerated "
            f"entries, got num_drafts {num_drafts} at V = {vocab_size}")
    # One row per order of rejected siblings so far: its residual, its proposal and the
    # probability of that order.
    r, proposal, reach = p[None], q[None], mx.ones((1,), dtype=mx.float32)
    accepted = mx.array(0.0, dtype=mx.float32)
    for j in range(num_drafts):
        accepted = accepted + (reach * mx.minimum(r, proposal).sum(axis=-1)).sum()
        if j == num_drafts - 1:
            break
        rejected = mx.maximum(proposal - r, 0.0)  # [B, V]: draft x drawn and rejected
        excess = mx.maximum(r - proposal, 0.0)
        mass = excess.sum(axis=-1, keepdims=True)
        r = mx.where(mass > 0, excess / mx.where(mass > 0, mass, 1.0), r)
        rows, vocab = proposal.shape
        # Row b * V + x: order b, then x drawn and rejected, x removed from the proposal.
        removed = mx.repeat(proposal, vocab, axis=0) * mx.tile(
            1.0 - mx.eye(vocab, dtype=mx.float32), (rows, 1))
        kept = removed.sum(axis=-1, keepdims=True)
        proposal = mx.where(kept > 0, removed / mx.where(kept > 0, kept, 1.0), removed)
        r = mx.repeat(r, vocab, axis=0)
        reach = (reach[:, None] * rejected).reshape(-1)
    return accepted


def candidate_siblings_acceptance(
    p: mx.array, candidates: Sequence[int] | mx.array
) -> mx.array:
    """P(a node accepts one of its deterministic candidates): ``Σ_c p(c)``, target p.

    A candidate's proposal is the one-hot of its token, so child j is kept with probability
    r_j(x_j), and a rejection removes x_j from the residual and renormalises it: the node
    accepts with the target's mass on the candidates, whatever their order. `candidates`
    are the node's children's tokens: distinct Python ints in [0, V), checked; or an `[n]`
    integer array, of at most `MAX_TREE_NODES` entries, whose distinctness is then a
    precondition, so that a generator sums them without evaluating its drafts; an id
    outside [0, V) in it is a placeholder (as in `verify_tree`) and counts no mass. A 0-d float32.

    >>> import mlx.core as mx
    >>> candidate_siblings_acceptance(mx.array([0.5, 0.25, 0.25]), [2, 0]).item()
    0.75
    """
    p = validation.require_probabilities("p", p, ndims=(1,))
    if isinstance(candidates, mx.array):
        if not mx.issubdtype(candidates.dtype, mx.integer) or candidates.ndim != 1:
            raise TypeError(f"candidates must be a 1-d integer array, got "
                            f"{candidates.dtype} of shape {tuple(candidates.shape)}")
        if candidates.shape[0] > MAX_TREE_NODES:
            raise ValueError(f"candidates must hold at most {MAX_TREE_NODES} tokens "
                             f"(MAX_TREE_NODES), got {candidates.shape[0]}")
        ids = validation.draft_ids("candidates", candidates, vocab_size=p.shape[0],
                                   batch_shape=tuple(candidates.shape))
        return mx.where(ids.valid, p[ids.clamped], 0.0).sum()
    if isinstance(candidates, (str, bytes)) or not isinstance(candidates, Sequence):
        raise TypeError(f"candidates must be a sequence of ints, got {type(candidates).__name__}")
    if not candidates:
        raise ValueError("candidates must hold at least one token, got none")
    if len(candidates) > MAX_TREE_NODES:
        raise ValueError(f"candidates must hold at most {MAX_TREE_NODES} tokens "
                         f"(MAX_TREE_NODES), got {len(candidates)}")
    seen: set[int] = set()
    for i, token in enumerate(candidates):
        validation.integer(f"candidates[{i}]", token)
        if not 0 <= token < p.shape[0]:
            raise ValueError(f"candidates[{i}] must lie in [0, {p.shape[0]}), got {token}")
        if token in seen:
            raise ValueError(f"candidates must be distinct, got {token} twice")
        seen.add(token)
    return p[mx.array(list(candidates), dtype=mx.int32)].sum()


def multi_draft_ceiling(p: mx.array, q: mx.array, num_drafts: int) -> mx.array:
    """The most any lossless verifier of `num_drafts` i.i.d. drafts from q accepts, target p.

    ``alpha* = min over token sets H of p(H) + 1 - q(H)^n``: the emitted token lands in H at
    most p(H) of the time, and outside H on a draft only if some draft is outside H. The
    minimum is reached on a prefix of the ids sorted by p/q ascending (q = 0 last), so
    one sort and two cumulative sums: O(V log V). A 0-d float32; at n = 1 it is
    Σ min(p, q).

    >>> import mlx.core as mx
    >>> p, q = mx.array([0.5, 0.5]), mx.array([1.0, 0.0])
    >>> multi_draft_ceiling(p, q, 1).item(), multi_draft_ceiling(p, q, 3).item()
    (0.5, 0.5)
    """
    p, q = _law_pair(p, q)
    num_drafts = _draft_count("num_drafts", num_drafts)
    ratio = mx.where(q > 0, p / mx.where(q > 0, q, 1.0), mx.inf)
    order = mx.argsort(ratio)
    zero = mx.zeros((1,), dtype=mx.float32)
    p_prefix = mx.concatenate([zero, mx.cumsum(p[order])])
    q_prefix = mx.concatenate([zero, mx.cumsum(q[order])])
    return (p_prefix + 1.0 - q_prefix**num_drafts).min()
