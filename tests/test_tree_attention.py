"""One forward of a whole tree equals a chain forward of each of its root paths.

On the demo target (mlx's `nn.RoPE`) and a random Llama-3-style model (mlx-lm's Llama-3
RoPE, grouped-query attention): the target's one tree forward, the drafter's level-by-level
forwards, and the cache after `keep_path`, each against a plain causal forward of the
same tokens. The nearest wrong variants (node i at position offset + i, the old attempt;
a causal mask over the breadth-first order) are shown to miss the tolerance by far.
"""

from __future__ import annotations

import functools
import random
from typing import Any, cast

import mlx.core as mx
import pytest

import specaccept.shell.tree_attention as tree_attention
from specaccept.shell.tree_attention import (
    TreeLayout,
    keep_path,
    make_tree_cache,
    tree_forward,
    tree_forward_refusal,
)
from specaccept.shell.tree_generator import full_tree_parents

TOLERANCE = 1e-4
"""float32 logits of one tree forward against a chain forward: different matmul shapes."""

mlx_lm = pytest.importorskip("mlx_lm")


def _fresh_demo_target() -> Any:
    from specaccept.demo import target_path

    return mlx_lm.load(str(target_path()))[0]


@functools.cache
def _demo_target() -> Any:
    return _fresh_demo_target()


@functools.cache
def _llama3_model() -> Any:
    from mlx_lm.models import llama

    args = llama.ModelArgs(
        model_type="llama", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
        num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=67,
        rope_theta=500000.0, tie_word_embeddings=True, max_position_embeddings=8192,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 1024})
    mx.random.seed(7)
    model = llama.Model(args)
    mx.eval(model.parameters())
    return model


MODELS = {"demo-target": _demo_target, "llama3-rope": _llama3_model}


def _context_and_tree(width: int, depth: int) -> tuple[list[int], tuple[int, ...], list[int]]:
    rng = random.Random(width * 10 + depth)
    context = [rng.randrange(67) for _ in range(12)]
    parents = full_tree_parents(width, depth)
    return context, parents, [rng.randrange(67) for _ in parents]


def _chain_logits(model: Any, tokens: list[int]) -> mx.array:
    logits: mx.array = model(mx.array(tokens)[None])[0, -1]
    return logits


def _gap(a: mx.array, b: mx.array) -> float:
    return cast(float, mx.abs(a - b).max().item())


def _root_path(layout: TreeLayout, entry: int, current: int, nodes: list[int]) -> list[int]:
    return [current] + [nodes[a - 1] for a in layout.lineages[entry][1:]]


def _worst_gap(model: Any, width: int, depth: int) -> float:
    context, parents, nodes = _context_and_tree(width, depth)
    cache = make_tree_cache(model, "target")
    model(mx.array(context[:-1])[None], cache=cache)
    layout = TreeLayout(len(context) - 1, parents)
    tree = tree_forward(model, cache, mx.array([context[-1], *nodes]), layout, 0)
    assert cache[0].offset == len(context) + len(nodes)
    gaps = [_gap(tree[e], _chain_logits(
        model, context[:-1] + _root_path(layout, e, context[-1], nodes)))
        for e in range(len(nodes) + 1)]
    return max(gaps)


@pytest.mark.parametrize("model_name", sorted(MODELS))
@pytest.mark.parametrize(("width", "depth"), [(2, 3), (3, 2), (1, 4)])
def test_one_tree_forward_equals_a_chain_forward_of_every_root_path(
    model_name: str, width: int, depth: int
) -> None:
    assert _worst_gap(MODELS[model_name](), width, depth) <= TOLERANCE


@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_the_wrong_positions_or_a_causal_mask_miss_by_far(
    model_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = MODELS[model_name]()
    with monkeypatch.context() as patch:  # node i at offset + i, the abandoned attempt
        patch.setattr(TreeLayout, "positions", lambda self, start, stop: mx.arange(
            self.prefix + start, self.prefix + stop))
        assert _worst_gap(model, 2, 3) > 100 * TOLERANCE
    with monkeypatch.context() as patch:  # a causal mask over the breadth-first order
        patch.setattr(TreeLayout, "mask", lambda self, start, stop: mx.arange(
            start, stop)[:, None] + self.prefix >= mx.arange(self.prefix + stop)[None])
        assert _worst_gap(model, 2, 3) > 100 * TOLERANCE


@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_level_by_level_drafting_and_keep_path_leave_a_chain_s_cache(model_name: str) -> None:
    model = MODELS[model_name]()
    width, depth = 2, 3
    context, parents, nodes = _context_and_tree(width, depth)
    cache = make_tree_cache(model, "drafter")
    model(mx.array(context)[None], cache=cache)  # the current token is in: the root
    layout = TreeLayout(len(context) - 1, parents)
    start = 0
    for level in range(1, depth + 1):
        count = width**level
        logits = tree_forward(model, cache, mx.array(nodes[start : start + count]), layout,
                              start + 1)
        for row in range(count):
            path = _root_path(layout, start + 1 + row, context[-1], nodes)
            expected = _chain_logits(model, context[:-1] + path)
            assert _gap(logits[row], expected) <= TOLERANCE
        start += count
    # Keep the root and the path through nodes 1, 4 and 9 (the last child's line).
    kept = [0, 2, 5, 12]
    assert layout.lineages[12] == tuple(kept)
    keep_path(cache, layout.prefix, kept)
    assert cache[0].offset == len(context) + 3
    after = model(mx.array([5])[None], cache=cache)[0, -1]
    chain = _chain_logits(model, context + [nodes[e - 1] for e in kept[1:]] + [5])
    assert _gap(after, chain) <= TOLERANCE


def test_a_model_whose_rope_takes_no_per_token_positions_is_refused() -> None:
    model = _fresh_demo_target()  # its layers are edited

    class OtherRoPE:
        pass

    model.layers[1].self_attn.rope = OtherRoPE()
    assert "layer 1's attention has RoPE OtherRoPE" in str(tree_forward_refusal(model))
    with pytest.raises(ValueError, match="target cannot verify a tree in one forward: layer 1"):
        make_tree_cache(model, "target")
    assert "has no mlx-lm `layers`" in str(tree_forward_refusal(lambda tokens, cache: tokens))


def test_feeding_entries_the_cache_does_not_follow_is_refused() -> None:
    model = _demo_target()
    cache = make_tree_cache(model, "target")
    model(mx.array([1, 2, 3])[None], cache=cache)
    with pytest.raises(ValueError, match="the cache holds 3 entries; feeding tree entry 1"):
        tree_forward(model, cache, mx.array([4]), TreeLayout(3, (-1,)), 1)
    assert tree_attention.TreeLayout(3, (-1, -1, 0)).depths == (0, 1, 1, 2)
