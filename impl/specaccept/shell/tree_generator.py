"""Tree speculation: the drafter proposes a full tree, the target keeps one root path of it.

A round of width W and depth D drafts W children under every node, level by level, down
to depth D (N = W + W**2 + ... + W**D nodes, in breadth-first order: `full_tree_parents`),
with the siblings drawn as the scheme says (`TreeScheme`). The target verifies the
whole tree in ONE forward of its N + 1 tokens (the current token, then the nodes) with a
tree-attention mask and each node at position offset + its depth (`tree_attention`), so
every node's logits are those of a chain forward of its root path. `verify_tree`
decides; each cache then keeps the accepted path's entries, moved down behind the
committed context (`keep_path`; nothing is copied per path), as many as `rewind_trim`
plans, and the round's values are read back in one host synchronisation.

The drafter drafts in the same one-row cache: its first forward (the current token and
any owed backfill) gives the root's law, then level d's W**d nodes go in one tree
forward that gives each its law (D forwards in all, as a chain of D drafts takes; the
leaves are never forwarded).

Uniforms are keyed as `tree_keys` names them: node i's draft and accept test by (the
round's first output position, i), the draw after a path of length d by the absolute
position round_position + d, so every round reads fresh keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx

from specaccept.core import randomness
from specaccept.core.randomness import SAMPLE, position_uniform
from specaccept.core.rewind import rewind_trim
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.sampling import effective_token_distribution, sample_from_distribution
from specaccept.core.tree import (
    MAX_DRAW_ORDER_ENTRIES,
    MAX_TREE_NODES,
    TreeScheme,
    candidate_siblings_acceptance,
    iid_siblings_acceptance,
    tree_keys,
    tree_shape,
    verify_tree,
    without_replacement_siblings_acceptance,
)
from specaccept.shell.arguments import (
    LanguageModel,
    check_model,
    check_prompt,
    check_run_arguments,
    vocab_size_of,
)
from specaccept.shell.caches import CacheInvariantError
from specaccept.shell.guards import NonFiniteLogitsError
from specaccept.shell.tree_attention import (
    TreeLayout,
    keep_path,
    make_tree_cache,
    tree_forward,
    tree_forward_refusal,
)

__all__ = [
    "MAX_TREE_PATHS",
    "TreeRoundObservation",
    "TreeRun",
    "TreeSpeculativeGenerator",
    "TreeStats",
    "check_tree_size",
    "full_tree_parents",
]

MAX_TREE_PATHS = 1024
"""The most root-to-leaf paths (W to the power D) a round's tree may have; its N + 1 < 2 W**D
tokens go in one target forward."""


def full_tree_parents(width: int, depth: int) -> tuple[int, ...]:
    """The parent array of the full tree of `width` children per node down to `depth`.

    Breadth-first: level d's W**d nodes follow level d - 1's, and the children of a
    level's node m are its next level's nodes m * W .. m * W + W - 1.

    >>> full_tree_parents(2, 2)
    (-1, -1, 0, 0, 1, 1)
    >>> full_tree_parents(1, 3)
    (-1, 0, 1)
    """
    check_tree_size(width, depth)
    parents: list[int] = []
    level_start, previous_start = 0, -1
    for level in range(1, depth + 1):
        for m in range(width**level):
            parents.append(-1 if level == 1 else previous_start + m // width)
        previous_start, level_start = level_start, level_start + width**level
    return tuple(parents)


def check_tree_size(width: object, depth: object) -> None:
    """Refuse a width and depth outside the bounds, before any power of them is computed.

    The paths W**D are at most `MAX_TREE_PATHS` and the nodes W + ... + W**D at most
    `MAX_TREE_NODES` (a width of 1 is a chain of D nodes). A ValueError names the values.
    """
    for name, value in (("width", width), ("depth", depth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"tree {name} must be an int >= 1, got {_short(value)}")
    assert isinstance(width, int) and isinstance(depth, int)
    if depth > MAX_TREE_NODES:
        raise ValueError(f"tree depth must be at most {MAX_TREE_NODES} (MAX_TREE_NODES: a "
                         f"level holds at least one node), got {_short(depth)}")
    # W**D is computed only once W <= MAX_TREE_PATHS and, for W >= 2, D <= log2 of it.
    if width > MAX_TREE_PATHS or (width > 1 and depth > MAX_TREE_PATHS.bit_length()):
        paths = f"more than {MAX_TREE_PATHS}"
    elif width**depth > MAX_TREE_PATHS:
        paths = f"{width}**{depth} = {width**depth}"
    else:
        return
    raise ValueError(
        f"a tree of width {_short(width)} and depth {depth} has {paths} root-to-leaf paths, "
        f"all verified in one target forward; at most {MAX_TREE_PATHS} are allowed")


def _short(value: object) -> str:
    """A value in a message: an int of more than 20 digits by its size, not its digits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an int of {value.bit_length()} bits"
    return repr(value)


@dataclass
class TreeStats:
    """Counters of one tree run.

    A node is *tested* when the accepted path reaches it and it has children: the round
    tests the root, then each accepted node above depth D. Each test passes (the path
    grows by one) or ends the round.
    """

    scheme: TreeScheme
    width: int
    depth: int
    rounds: int = 0
    drafted: int = 0
    nodes_tested: int = 0
    accepted: int = 0
    generated: int = 0
    host_syncs: int = 0
    diagnostics: bool = False
    closed_form_total: float = 0.0
    """The sum over tested nodes of P(the node accepts a child | the path so far), each the
    scheme's closed form of the node's laws (`iid_siblings_acceptance`,
    `without_replacement_siblings_acceptance`, or `candidate_siblings_acceptance` of its
    children's tokens)."""
    closed_form_variance_total: float = 0.0
    """Σ over tested nodes of a(1 - a), a the node's closed-form acceptance."""

    @property
    def mean_accepted_len(self) -> float:
        """The ratio accepted / rounds, the drafts kept per round."""
        return self.accepted / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_round(self) -> float:
        """The ratio generated / rounds, the accepted drafts plus the token after them."""
        return self.generated / self.rounds if self.rounds else 0.0

    @property
    def per_node_acceptance(self) -> float:
        """The ratio accepted / nodes_tested, how often a tested node extends the path."""
        return self.accepted / self.nodes_tested if self.nodes_tested else 0.0

    @property
    def closed_form_per_node(self) -> float:
        """The closed-form acceptance averaged over the tested nodes (diagnostics)."""
        return self.closed_form_total / self.nodes_tested if self.nodes_tested else 0.0

    @property
    def acceptance_z(self) -> float:
        """(accepted - Σ a) / sqrt(Σ a(1 - a)) over the tested nodes (diagnostics).

        Given the path so far, a tested node's test passes with its closed-form
        probability a, so the numerator is a martingale with that variance: a lossless
        tree reads a z within 4 of zero.
        """
        difference = self.accepted - self.closed_form_total
        if self.closed_form_variance_total > 0:
            return float(difference / math.sqrt(self.closed_form_variance_total))
        return 0.0 if abs(difference) < 1e-6 else math.copysign(math.inf, difference)

    def summary_line(self) -> str:
        """The one-line summary of the run, in the chain summary's key=value form."""
        line = (
            f"[Tree speculation] scheme={self.scheme.value} tree={self.width}x{self.depth} "
            f"rounds={self.rounds} drafted={self.drafted} nodes_tested={self.nodes_tested} "
            f"accepted={self.accepted} per_node_acceptance={self.per_node_acceptance:.4f} "
            f"mean_accepted_len={self.mean_accepted_len:.4f} "
            f"tokens_per_round={self.tokens_per_round:.4f}"
        )
        if self.diagnostics:
            line += (f" closed_form_per_node={self.closed_form_per_node:.4f}"
                     f" acceptance_z={self.acceptance_z:.2f}")
        return line


@dataclass(frozen=True)
class TreeRoundObservation:
    """What one tree round saw and decided, handed to the `observer` a run was started with.

    A round with no tree (one token left in the budget: the target alone draws it) has
    empty `parents`, `node_tokens`, `path` and `accept_uniforms`, and no `draft_probs`.
    """

    position: int
    """Tokens the run emitted before the round."""
    scheme: TreeScheme
    parents: tuple[int, ...]
    node_tokens: list[int]
    target_probs: mx.array
    """`[N+1, V]` float32, the target's law at each row: the root, then node i at i + 1."""
    draft_probs: mx.array | None
    """`[inner rows, V]` float32, the drafter's law at each row that has children, in row
    order: the law those children were drafted from."""
    path: list[int]
    """The accepted nodes from the root down."""
    emitted: list[int]
    """The tokens emitted, cut after an end-of-sequence token."""
    accept_uniforms: list[float]
    sample_uniforms: list[float]
    target_offset_before: int
    target_offset_after: int
    draft_offset_before: int | None
    draft_fed: int | None
    draft_offset_after: int | None
    stopped: bool
    """True when an end-of-sequence token cut the emission."""


class TreeRun(Iterator[list[int]]):
    """One tree run: iterating it yields the tokens each round emits; `stats` counts them."""

    def __init__(self, blocks: Iterator[list[int]], stats: TreeStats) -> None:
        self.stats = stats
        self._blocks = blocks

    def __iter__(self) -> TreeRun:
        return self

    def __next__(self) -> list[int]:
        return next(self._blocks)


def _offset(cache: list[Any]) -> int:
    return int(cache[0].offset)


def _first_leaf_row(path: Sequence[int], width: int, depth: int) -> list[int]:
    """The accepted path's nodes, then the first child of each down to `depth`."""
    row = list(path)
    while len(row) < depth:
        level = len(row) + 1  # the level of the next node
        level_start = sum(width**t for t in range(1, level))
        local = row[-1] - (level_start - width ** (level - 1)) if row else 0
        row.append(level_start + local * width)
    return row


def _prefill(model: Any, cache: list[Any], tokens: list[int], step: int) -> None:
    body = tokens[:-1]
    for start in range(0, len(body), step):
        model(mx.array(body[start : start + step])[None], cache=cache)
        mx.eval([c.state for c in cache])


def _row_is_invalid(logits: mx.array, probs: mx.array) -> mx.array:
    """Per row: NaN or +inf logits, -inf everywhere, or a law with no finite mass."""
    bad_logits = (mx.isnan(logits) | (logits == float("inf"))).any(axis=-1)
    all_masked = (logits == float("-inf")).all(axis=-1)
    no_mass = ~(mx.isfinite(probs).all(axis=-1) & (probs.sum(axis=-1) > 0))
    return bad_logits | all_masked | no_mass


@dataclass
class TreeSpeculativeGenerator:
    """Tree speculative decoding of `target` with `drafter`, lossless under every scheme.

    Args:
        target, drafter: mlx-lm Llama-family models with the same vocabulary, whose
            prompt caches are mlx-lm's plain `KVCache` in every layer and whose attention
            takes a tree's mask and positions (`tree_attention.tree_forward_refusal`).
        target_config: the target's sampler; it defines the output law.
        draft_config: the drafter's sampler (default: the target's).
        width: children per node (>= 1); `depth`: the tree's depth (>= 1). A round
            drafts W + ... + W**D tokens and has W**D paths (at most `MAX_TREE_PATHS`).
        scheme: how siblings are drafted: i.i.d. from the drafter's law, without
            replacement from it, or the top-W ids of it (deterministic).
        eos_token_ids: generation stops at the first of these emitted.
        check_caches: after every round, assert both cache offsets equal the number
            of tokens before the next current token.
        diagnostics: accumulate, over the tested nodes, the scheme's closed-form
            acceptance (`TreeStats.closed_form_total`); without replacement it enumerates
            V**width entries, at most `MAX_DRAW_ORDER_ENTRIES`.
        prefill_step_size: prompt tokens per prefill forward.

    Samplers that read the history (repetition penalties, DRY) are refused: a node's
    law would read its own path, which one forward of the whole tree does not carry.
    """

    target: LanguageModel
    drafter: LanguageModel
    target_config: SamplerConfig
    draft_config: SamplerConfig | None = None
    width: int = 2
    depth: int = 3
    scheme: TreeScheme = TreeScheme.IID
    eos_token_ids: frozenset[int] = field(default_factory=frozenset)
    check_caches: bool = False
    diagnostics: bool = False
    prefill_step_size: int = 512

    def __post_init__(self) -> None:
        check_model("target", self.target)
        check_model("drafter", self.drafter)
        for name, model in (("target", self.target), ("drafter", self.drafter)):
            refusal = tree_forward_refusal(model)
            if refusal is not None and not hasattr(model, "layers"):
                raise TypeError(f"{name} must be an mlx-lm model (with `layers`), got "
                                f"{type(model).__name__}: {refusal}")
            if refusal is not None:
                raise ValueError(f"{name} cannot verify a tree in one forward: {refusal}")
        if not isinstance(self.target_config, SamplerConfig):
            raise TypeError(f"target_config must be a SamplerConfig, got "
                            f"{type(self.target_config).__name__}")
        if self.draft_config is None:
            self.draft_config = self.target_config
        if not isinstance(self.draft_config, SamplerConfig):
            raise TypeError(f"draft_config must be a SamplerConfig, got "
                            f"{type(self.draft_config).__name__}")
        check_tree_size(self.width, self.depth)
        if not isinstance(self.scheme, TreeScheme):
            raise TypeError(f"scheme must be a TreeScheme, got {self.scheme!r}")
        for name, config in (("target_config", self.target_config),
                             ("draft_config", self.draft_config)):
            if config.uses_history:
                raise ValueError(
                    f"{name} reads the history (repetition penalties or DRY): tree "
                    "speculation does not carry each node's path into its sampler")
        if (self.scheme is TreeScheme.WITHOUT_REPLACEMENT and self.width > 1
                and self.draft_config.is_greedy):
            raise ValueError(
                "scheme without-replacement needs a drafter law with at least width "
                f"({self.width}) tokens, but draft_config is greedy (one token); use the "
                "deterministic scheme for greedy drafts")
        self.eos_token_ids = frozenset(self.eos_token_ids)
        self.vocab_size = vocab_size_of(self.target, "target")
        draft_vocab = vocab_size_of(self.drafter, "drafter")
        if draft_vocab != self.vocab_size:
            raise ValueError(
                f"drafter vocabulary ({draft_vocab}) differs from the target's "
                f"({self.vocab_size}): speculative decoding needs one shared vocabulary")
        if (self.diagnostics and self.scheme is TreeScheme.WITHOUT_REPLACEMENT
                and self.vocab_size**self.width > MAX_DRAW_ORDER_ENTRIES):
            raise ValueError(
                f"diagnostics under without-replacement enumerate V**width draw-order "
                f"entries, at most {MAX_DRAW_ORDER_ENTRIES}; got width {self.width} at "
                f"V = {self.vocab_size}")
        if self.scheme is not TreeScheme.IID and self.width > self.vocab_size:
            raise ValueError(
                f"width {self.width} exceeds the vocabulary ({self.vocab_size}): the "
                f"{self.scheme.value} scheme drafts distinct siblings, at most one per id")
        make_tree_cache(self.target, "target")
        make_tree_cache(self.drafter, "drafter")

    def generate(
        self, prompt: Sequence[int], max_tokens: int, *, seed: int = 0,
        observer: Callable[[TreeRoundObservation], None] | None = None,
    ) -> TreeRun:
        """Start a run: iterate the result for the emitted blocks; its `stats` counts them.

        The round that starts at output position n reads the keys ``tree_keys(n,
        parents)`` names, in a run seeded `seed`. `observer`, when given, is called with a
        `TreeRoundObservation` after every round (a conformance trace records them); the
        round then also reads back its rows.
        """
        if observer is not None and not callable(observer):
            raise TypeError(f"observer must be callable or None, got {observer!r}")
        check_run_arguments(max_tokens, seed, self.prefill_step_size)
        tokens = check_prompt(prompt, self.vocab_size)
        stats = TreeStats(self.scheme, self.width, self.depth, diagnostics=self.diagnostics)
        return TreeRun(self._blocks(tokens, max_tokens, seed, stats, observer), stats)

    def _blocks(
        self, tokens: list[int], max_tokens: int, seed: int, stats: TreeStats,
        observer: Callable[[TreeRoundObservation], None] | None = None,
    ) -> Iterator[list[int]]:
        target_cache = make_tree_cache(self.target, "target")
        draft_cache = make_tree_cache(self.drafter, "drafter")
        _prefill(self.target, target_cache, tokens, self.prefill_step_size)
        _prefill(self.drafter, draft_cache, tokens, self.prefill_step_size)
        before = len(tokens) - 1  # tokens before the current one
        current = tokens[-1]
        backfill: list[int] = []
        generated = 0
        while generated < max_tokens:
            depth = min(self.depth, max_tokens - generated - 1)
            seen: dict[str, Any] | None = {} if observer is not None else None
            offsets = (_offset(target_cache), _offset(draft_cache), len(backfill) + 1)
            if depth == 0:
                emitted = self._final_step(stats, target_cache, current, generated, seed, seen)
            else:
                emitted, owes_backfill = self._round(
                    stats, target_cache, draft_cache, current, backfill, generated, depth, seed,
                    seen)
                backfill = [emitted[-2]] if owes_backfill else []
            cut = next(
                (i + 1 for i, t in enumerate(emitted) if t in self.eos_token_ids), len(emitted))
            if observer is not None:
                assert seen is not None
                drafted = depth > 0
                observer(TreeRoundObservation(
                    position=generated, scheme=self.scheme, emitted=emitted[:cut],
                    stopped=cut < len(emitted), target_offset_before=offsets[0],
                    target_offset_after=_offset(target_cache),
                    draft_offset_before=offsets[1] if drafted else None,
                    draft_fed=offsets[2] if drafted else None,
                    draft_offset_after=_offset(draft_cache) if drafted else None,
                    **seen))
            emitted = emitted[:cut]
            generated += len(emitted)
            stats.generated = generated
            yield emitted
            if emitted[-1] in self.eos_token_ids or generated == max_tokens:
                return
            before += len(emitted)
            current = emitted[-1]
            if self.check_caches:
                target_offset, draft_offset = _offset(target_cache), _offset(draft_cache)
                if target_offset != before or draft_offset + len(backfill) != before:
                    raise CacheInvariantError(
                        f"after round {stats.rounds}: {before} tokens precede the current "
                        f"token, but the target cache holds {target_offset} and the drafter "
                        f"cache {draft_offset} (+{len(backfill)} owed)")

    def _final_step(
        self, stats: TreeStats, target_cache: list[Any], current: int, position: int, seed: int,
        seen: dict[str, Any] | None = None,
    ) -> list[int]:
        logits = self.target(mx.array([current])[None], cache=target_cache)[0, -1]
        probs = effective_token_distribution(logits, self.target_config)
        uniform = position_uniform(seed, position, SAMPLE)
        token = sample_from_distribution(probs, uniform)
        if seen is not None:
            seen.update(parents=(), node_tokens=[], draft_probs=None, path=[],
                        accept_uniforms=[], sample_uniforms=[float(uniform)],
                        target_probs=probs[None])
        invalid = _row_is_invalid(logits[None], probs[None])[0]
        stats.rounds += 1
        stats.host_syncs += 1
        mx.eval(token, invalid)
        if invalid.item():
            raise NonFiniteLogitsError(
                f"the target produced logits with no distribution at output position {position}")
        value = token.item()
        assert isinstance(value, int)
        return [value]

    def _draft_children(
        self, q: mx.array, uniforms: list[float]
    ) -> tuple[mx.array, mx.array]:
        """The children of a level's P nodes, `[P * W]` tokens, and a flag per node that
        its siblings could be drawn (False: its law holds fewer than W tokens)."""
        width, parents = self.width, q.shape[0]
        if self.scheme is TreeScheme.DETERMINISTIC:
            # The top-W ids of each law: distinct, and chosen from the drafter alone.
            top = mx.argsort(-q, axis=-1)[:, :width]
            return top.reshape(-1).astype(mx.int32), mx.ones((parents,), dtype=mx.bool_)
        u = mx.array(uniforms, dtype=mx.float32)
        if self.scheme is TreeScheme.IID:
            laws = mx.repeat(q, width, axis=0)
            return sample_from_distribution(laws, u), mx.ones((parents,), dtype=mx.bool_)
        tokens: list[mx.array] = []
        drawable: list[mx.array] = []
        vocab = mx.arange(q.shape[1])
        for m in range(parents):
            # Each sibling from q with the earlier siblings' tokens removed and the rest
            # renormalised: the proposal `verify_tree` tests it against.
            drawn = mx.zeros((q.shape[1],), dtype=mx.bool_)
            possible = mx.array(True)
            for j in range(width):
                kept = mx.where(drawn, 0.0, q[m]) if j else q[m]
                mass = kept.sum()
                law = mx.where(mass > 0, kept / mx.where(mass > 0, mass, 1.0), kept) if j else kept
                possible = mx.logical_and(possible, mass > 0)
                token = sample_from_distribution(
                    mx.where(mass > 0, law, q[m]), u[m * width + j])
                tokens.append(token)
                drawn = mx.logical_or(drawn, vocab == token)
            drawable.append(possible)
        return mx.stack(tokens), mx.stack(drawable)

    def _closed_forms(self, parents: Sequence[int], target_probs: mx.array, inner: mx.array,
                      node_tokens: mx.array) -> mx.array:
        """Each inner row's closed-form acceptance under the scheme, `[rows with children]`."""
        width = self.width
        if self.scheme is TreeScheme.IID:
            forms = [iid_siblings_acceptance(target_probs[v], inner[v], width)
                     for v in range(inner.shape[0])]
        elif self.scheme is TreeScheme.WITHOUT_REPLACEMENT:
            forms = [without_replacement_siblings_acceptance(target_probs[v], inner[v], width)
                     for v in range(inner.shape[0])]
        else:
            children = tree_shape(parents, [0] * len(parents), distinct_siblings=False).children
            forms = [candidate_siblings_acceptance(
                target_probs[v], node_tokens[mx.array(children[v], dtype=mx.int32)])
                for v in range(inner.shape[0])]
        return mx.stack(forms)

    def _round(
        self,
        stats: TreeStats,
        target_cache: list[Any],
        draft_cache: list[Any],
        current: int,
        backfill: list[int],
        position: int,
        depth: int,
        seed: int,
        seen: dict[str, Any] | None = None,
    ) -> tuple[list[int], bool]:
        assert self.draft_config is not None
        width, vocab_size = self.width, self.vocab_size
        parents = full_tree_parents(width, depth)
        keys = tree_keys(position, parents)
        draft_u = [randomness.uniform(seed, key) for key in keys.draft]
        accept_u = mx.array([randomness.uniform(seed, key) for key in keys.accept],
                            dtype=mx.float32)
        sample_u = mx.array([randomness.uniform(seed, key) for key in keys.sample],
                            dtype=mx.float32)
        target_before = _offset(target_cache)

        # Drafting, level by level, in the drafter's one-row cache: the root's law, then
        # one tree forward per level gives each of its nodes its law.
        logits = self.drafter(mx.array([*backfill, current])[None], cache=draft_cache)[:, -1]
        law = effective_token_distribution(logits, self.draft_config)
        laws, draft_bad, drawable = [law], [_row_is_invalid(logits, law)], []
        levels: list[mx.array] = []
        draft_layout = TreeLayout(_offset(draft_cache) - 1, parents)
        node_start = 0
        for level in range(1, depth + 1):
            count = width**level
            children, possible = self._draft_children(
                laws[-1], draft_u[node_start : node_start + count])
            levels.append(children)
            drawable.append(possible)
            if level < depth:
                logits = tree_forward(self.drafter, draft_cache, children, draft_layout,
                                      node_start + 1)
                law = effective_token_distribution(logits, self.draft_config)
                laws.append(law)
                draft_bad.append(_row_is_invalid(logits, law))
            node_start += count
        node_tokens = mx.concatenate(levels)

        # The target: the current token and every node in one forward, row v's logits
        # those of a chain forward of row v's root path.
        target_layout = TreeLayout(target_before, parents)
        row_logits = tree_forward(
            self.target, target_cache,
            mx.concatenate([mx.array([current], dtype=mx.int32), node_tokens.astype(mx.int32)]),
            target_layout, 0)
        target_probs = effective_token_distribution(row_logits, self.target_config)
        target_bad = _row_is_invalid(row_logits, target_probs)

        inner = mx.concatenate(laws)  # the laws of the nodes that have children
        if self.scheme is TreeScheme.DETERMINISTIC:
            draft_probs = None
        else:
            leaves = mx.zeros((width**depth, vocab_size), dtype=mx.float32)  # unread: leaves
            draft_probs = mx.concatenate([inner, leaves])
        verdict = verify_tree(self.scheme, parents, target_probs, draft_probs, node_tokens,
                              accept_u, sample_u)
        outputs = [verdict.num_accepted, verdict.accepted_nodes, verdict.next_token,
                   node_tokens, target_bad, mx.concatenate(draft_bad),
                   mx.concatenate(drawable)]
        if self.diagnostics:
            outputs.append(self._closed_forms(parents, target_probs, inner, node_tokens))
        stats.host_syncs += 1
        if seen is not None:
            mx.eval(*outputs, target_probs, inner)
            seen.update(parents=parents, target_probs=target_probs, draft_probs=inner,
                        accept_uniforms=accept_u.tolist(), sample_uniforms=sample_u.tolist())
        else:
            mx.eval(*outputs)
        values: list[Any] = [array.tolist() for array in outputs]
        accepted, path_nodes, next_token, tokens, target_invalid, draft_invalid, possible = (
            values[:7])
        path = path_nodes[:accepted]
        rows = [0] + [v + 1 for v in path]  # the rows that decided a token
        for depth_of_row, row in enumerate(rows):
            if target_invalid[row]:
                raise NonFiniteLogitsError(
                    f"the target produced logits with no distribution at output position "
                    f"{position + depth_of_row}")
            if row < len(draft_invalid) and draft_invalid[row]:
                raise NonFiniteLogitsError(
                    f"the drafter produced logits with no distribution at output position "
                    f"{position + depth_of_row}")
            if row < len(possible) and not possible[row]:
                raise ValueError(
                    f"the drafter's law at output position {position + depth_of_row} holds "
                    f"fewer than width ({width}) tokens: the without-replacement scheme "
                    "cannot draw distinct siblings from it; use the iid or deterministic "
                    "scheme")

        tested = min(accepted + 1, depth)
        stats.rounds += 1
        stats.drafted += len(tokens)
        stats.nodes_tested += tested
        stats.accepted += accepted
        if self.diagnostics:
            closed = [values[7][row] for row in rows[:tested]]
            stats.closed_form_total += sum(closed)
            stats.closed_form_variance_total += sum(a * (1.0 - a) for a in closed)

        if seen is not None:
            seen.update(node_tokens=tokens, path=path)
        # Each cache keeps the root and the accepted path, as many entries as the rewind
        # plans (past the path: the first children below it, entries a rewind never keeps).
        row = _first_leaf_row(path, width, depth)
        entries = [0, *(v + 1 for v in row)]
        plan = rewind_trim(depth, accepted)
        keep_path(target_cache, target_layout.prefix, entries[: depth + 1 - plan.target_trim])
        keep_path(draft_cache, draft_layout.prefix, entries[: depth - plan.draft_trim])
        return [*[tokens[v] for v in path], next_token], plan.draft_backfill
