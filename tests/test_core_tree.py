"""Tree verification's core: agreement with token-by-token verification on chains, the keys,
batching, laziness and the errors of bad trees."""

from __future__ import annotations

import random

import mlx.core as mx
import pytest

from specaccept import AcceptanceRule, TreeScheme, verify_tokenwise, verify_tree
from specaccept.core import randomness
from specaccept.core.tree import tree_keys, tree_shape


def dyadic_law(rng: random.Random, vocab: int) -> list[float]:
    counts = [0] * vocab
    for _ in range(16):
        counts[rng.randrange(vocab)] += 1
    return [c / 16 for c in counts]


@pytest.mark.parametrize("scheme", [TreeScheme.IID, TreeScheme.WITHOUT_REPLACEMENT])
def test_a_chain_is_verify_tokenwise_stochastic(scheme: TreeScheme) -> None:
    """Every node an only child: the tree rule is modified rejection sampling position by
    position, on the same uniforms (accept_uniforms = column 0, sample_uniforms = column 1)."""
    rng = random.Random(5)
    for _ in range(60):
        k, vocab = rng.randint(1, 4), rng.randint(2, 4)
        target = [dyadic_law(rng, vocab) for _ in range(k + 1)]
        draft = [dyadic_law(rng, vocab) for _ in range(k + 1)]
        tokens = [rng.randrange(vocab) for _ in range(k)]
        uniforms = [[rng.randrange(32) / 32, rng.randrange(32) / 32] for _ in range(k + 1)]
        tree = verify_tree(scheme, tuple(range(-1, k - 1)), mx.array(target), mx.array(draft),
                           tokens, mx.array([u[0] for u in uniforms[:k]]),
                           mx.array([u[1] for u in uniforms]))
        block = verify_tokenwise(AcceptanceRule.STOCHASTIC, mx.array(target), mx.array(draft[:k]),
                             mx.array(tokens), mx.array(uniforms))
        assert (tree.num_accepted.item(), tree.next_token.item()) == \
            (block.num_accepted.item(), block.next_token.item())
        kept = block.num_accepted.tolist()
        assert isinstance(kept, int)
        assert tree.accepted_nodes.tolist() == [i if i < kept else -1 for i in range(k)]


def test_a_chain_reads_the_keys_of_a_round() -> None:
    keys = tree_keys(9, (-1, 0, 1))
    chain = randomness.round_keys(9, 3)
    assert keys.draft == chain.draft
    assert keys.accept == [row[0] for row in chain.verify[:3]]
    assert keys.sample == [row[1] for row in chain.verify]


def test_tree_keys_are_fresh_across_rounds() -> None:
    """Two rounds that start at different positions share no accept or draft key."""
    first, second = tree_keys(4, (-1, -1, 0, 0)), tree_keys(5, (-1, -1, 0))
    assert not set(first.accept + first.draft) & set(second.accept + second.draft)
    assert first.sample[1] == second.sample[0]  # the target's draw at position 5, by design


def test_a_batch_of_trees_verifies_under_vmap() -> None:
    rng = random.Random(9)
    parents, vocab = (-1, -1, 0), 3
    target = mx.array([dyadic_law(rng, vocab) for _ in range(4)])
    draft = mx.array([dyadic_law(rng, vocab) for _ in range(4)])
    accept = mx.array([[rng.randrange(32) / 32 for _ in range(3)] for _ in range(16)])
    sample = mx.array([[rng.randrange(32) / 32 for _ in range(3)] for _ in range(16)])
    batch = mx.broadcast_to(target, (16, 4, vocab)), mx.broadcast_to(draft, (16, 4, vocab))

    def one(t: mx.array, d: mx.array, a: mx.array, s: mx.array
            ) -> tuple[mx.array, mx.array, mx.array]:
        verdict = verify_tree(TreeScheme.IID, parents, t, d, (1, 2, 0), a, s)
        return verdict.num_accepted, verdict.accepted_nodes, verdict.next_token

    nums, nodes, nexts = mx.vmap(one)(*batch, accept, sample)
    for i in range(16):
        alone = verify_tree(TreeScheme.IID, parents, target, draft, (1, 2, 0), accept[i],
                            sample[i])
        assert nums[i].item() == alone.num_accepted.item()
        assert nodes[i].tolist() == alone.accepted_nodes.tolist()
        assert nexts[i].item() == alone.next_token.item()


def test_verify_tree_builds_a_graph_without_evaluating() -> None:
    """Nothing is evaluated until the caller asks: a NaN law returns arrays, no error."""
    nan = mx.array([[float("nan")] * 2] * 3)
    verdict = verify_tree(TreeScheme.IID, (-1, -1), nan, nan, (0, 1), mx.zeros((2,)),
                          mx.zeros((2,)))
    assert verdict.next_token.shape == () and verdict.accepted_nodes.shape == (1,)


@pytest.mark.parametrize(("parents", "tokens", "distinct", "message"), [
    ((1, -1), (0, 1), False, r"parents\[0\] = 1: a parent must come before its child"),
    ((1, 0), (0, 1), False, "cycle"),
    ((-1, 1), (0, 1), False, "cycle"),
    ((-1, 3), (0, 1), False, r"parents\[1\] must be -1"),
    ((), (), False, "at least one node"),
    ((-1, -1), (0,), False, "one token per node"),
    ((-1, -1), (1, 1), True, r"children \[0, 1\] of row 0 repeat a token"),
])
def test_bad_trees_are_refused_with_the_argument_named(
        parents: tuple[int, ...], tokens: tuple[int, ...], distinct: bool, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tree_shape(parents, tokens, distinct_siblings=distinct)


def test_repeated_siblings_are_allowed_only_when_iid() -> None:
    assert tree_shape((-1, -1), (1, 1), distinct_siblings=False).children == ((0, 1), (), ())
    half = mx.array([[0.5, 0.5]] * 3)
    verify_tree(TreeScheme.IID, (-1, -1), half, half, (1, 1), mx.zeros((2,)), mx.zeros((2,)))
    for scheme, q in ((TreeScheme.WITHOUT_REPLACEMENT, half), (TreeScheme.DETERMINISTIC, None)):
        with pytest.raises(ValueError, match="draft_tokens"):
            verify_tree(scheme, (-1, -1), half, q, (1, 1), mx.zeros((2,)), mx.zeros((2,)))


@pytest.mark.parametrize("scheme", list(TreeScheme))
def test_tokens_given_as_an_array_verify_as_the_same_python_ints(scheme: TreeScheme) -> None:
    """A generator drafts the tree lazily: its `[N]` token array gives the verdict the
    Python ints give, with nothing evaluated before the caller asks."""
    rng = random.Random(11)
    parents, vocab = (-1, -1, 0, 0, 1, 1), 4
    for _ in range(40):
        target = mx.array([dyadic_law(rng, vocab) for _ in range(7)])
        draft = None if scheme is TreeScheme.DETERMINISTIC else mx.array(
            [dyadic_law(rng, vocab) for _ in range(7)])
        first, second = rng.sample(range(vocab), 2)
        tokens = [first, second] + [rng.randrange(vocab) for _ in range(4)]
        if scheme is not TreeScheme.IID:
            tokens[2:4] = rng.sample(range(vocab), 2)
            tokens[4:6] = rng.sample(range(vocab), 2)
        accept = mx.array([rng.randrange(32) / 32 for _ in range(6)])
        sample = mx.array([rng.randrange(32) / 32 for _ in range(3)])
        ints = verify_tree(scheme, parents, target, draft, tokens, accept, sample)
        lazy = verify_tree(scheme, parents, target, draft, mx.array(tokens), accept, sample)
        assert lazy.num_accepted.item() == ints.num_accepted.item()
        assert lazy.accepted_nodes.tolist() == ints.accepted_nodes.tolist()
        assert lazy.next_token.item() == ints.next_token.item()


def test_a_token_array_of_the_wrong_shape_or_dtype_is_refused() -> None:
    half = mx.array([[0.5, 0.5]] * 3)
    with pytest.raises(ValueError, match=r"draft_tokens must have shape \(2,\)"):
        verify_tree(TreeScheme.IID, (-1, -1), half, half, mx.array([0, 1, 1]), mx.zeros((2,)),
                    mx.zeros((2,)))
    with pytest.raises(TypeError, match="draft_tokens must be an integer array"):
        verify_tree(TreeScheme.IID, (-1, -1), half, half, mx.array([0.0, 1.0]), mx.zeros((2,)),
                    mx.zeros((2,)))
