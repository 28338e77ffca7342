"""Serving engines' layouts, adapted onto the spec's functions, and the deterministic cases
those engines' own tests state, replayed through the adapters (spec/verify_batch.md): a
batch layout onto `verify_batch`, and a tree kernel's layout onto `verify_tree`.

The layout is the one the spec page describes for vLLM's Model Runner V2: target logits
``[Σ (k_r + 1), V]`` with ``cu_num_logits`` offsets; per request, the slots hold the last
committed token and then the drafts ``d_1 .. d_k``, ``-1`` a placeholder; a temperature per
request, 0 for a greedy one; one switch for block verification. The drafter's laws come as
``[Σ k_r, V]`` rows, one per draft (an assumption of this adapter: the engine's own draft
layout is not part of the facts the page relies on). The cases are the deterministic ones
that engine's test file states, in its terms: greedy emits only the argmax; a -1 draft is
rejected under every method with an in-range token; trailing placeholders truncate a block;
a placeholder blocks later drafts; all-NaN rows at V = 20,000 give in-range ids; a chunked
batch equals the full batch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import mlx.core as mx
import numpy as np
import pytest

from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    TreeScheme,
    accept_draft_token,
    effective_token_distribution,
    verify_blockwise,
    verify_tree,
)
from specaccept.core.batch import verify_batch


class EngineBatch(NamedTuple):
    """A batch in the engine's terms."""

    target_logits: np.ndarray  # [Σ (k_r + 1), V]
    draft_sampled: list[int]  # Σ (k_r + 1): per request, the last committed token, d_1..d_k
    draft_probs: np.ndarray  # [Σ k_r, V], one row per draft
    cu_num_logits: list[int]  # R + 1 offsets
    temperature: list[float]  # R; 0 is a greedy request
    uniforms: np.ndarray  # [Σ (k_r + 1), 2], in verify_tokenwise's layout per request
    use_block_verification: bool


def adapt(batch: EngineBatch) -> tuple[list[AcceptanceRule], mx.array, mx.array, mx.array,
                                       list[int], mx.array]:
    """The engine's batch as `verify_batch`'s arguments: the target law of each row (the
    request's temperature applied to its logits), the drafts shifted one slot left within
    each request (slot j + 1 is draft j; the committed token's slot becomes the unread bonus
    entry), and the draft rows placed beside the target rows they are verified against."""
    rules, targets, drafts, tokens = [], [], [], []
    offsets = batch.cu_num_logits
    vocab = batch.target_logits.shape[1]
    draft_row = 0
    for r, temperature in enumerate(batch.temperature):
        start, stop = offsets[r], offsets[r + 1]
        k = stop - start - 1
        greedy = temperature == 0.0
        rules.append(AcceptanceRule.GREEDY_ARGMAX if greedy else
                     AcceptanceRule.BLOCK if batch.use_block_verification else
                     AcceptanceRule.STOCHASTIC)
        config = SamplerConfig(temperature=temperature)
        targets.append(effective_token_distribution(
            mx.array(batch.target_logits[start:stop]), config))
        unread = np.full((1, vocab), 1 / vocab, dtype=np.float32)  # the bonus row's q
        drafts.append(mx.array(np.concatenate([batch.draft_probs[draft_row:draft_row + k],
                                               unread])))
        draft_row += k
        tokens.extend([*batch.draft_sampled[start + 1:stop], -1])
    return (rules, mx.concatenate(targets), mx.concatenate(drafts),
            mx.array(tokens, dtype=mx.int32), list(offsets), mx.array(batch.uniforms))


def verdicts(batch: EngineBatch) -> list[tuple[int, int]]:
    result = verify_batch(*adapt(batch))
    accepted = [int(x) for x in np.array(result.num_accepted)]
    emitted = [int(x) for x in np.array(result.next_token)]
    return list(zip(accepted, emitted, strict=True))


def random_engine_batch(seed: int, ks: Sequence[int], vocab: int = 8, *,
                        temperature: Sequence[float] | None = None,
                        block: bool = False) -> EngineBatch:
    rng = np.random.default_rng(seed)
    rows = sum(k + 1 for k in ks)
    logits = rng.normal(size=(rows, vocab)).astype(np.float32)
    draft = rng.dirichlet(np.ones(vocab), size=sum(ks)).astype(np.float32)
    draft = (draft / draft.sum(axis=-1, keepdims=True)).astype(np.float32)
    sampled, cu, row = [], [0], 0
    for k in ks:
        sampled.append(int(rng.integers(vocab)))  # the last committed token
        for _ in range(k):
            sampled.append(int(rng.choice(vocab, p=draft[row].astype(np.float64)
                                          / draft[row].astype(np.float64).sum())))
            row += 1
        cu.append(cu[-1] + k + 1)
    temps = list(temperature) if temperature is not None else [
        float(rng.choice([0.0, 0.5, 1.0])) for _ in ks]
    uniforms = (rng.integers(0, 1 << 24, size=(rows, 2)) / (1 << 24)).astype(np.float32)
    return EngineBatch(logits, sampled, draft, cu, temps, uniforms, block)


def rows_of(batch: EngineBatch, r: int) -> slice:
    return slice(batch.cu_num_logits[r], batch.cu_num_logits[r + 1])


@pytest.mark.parametrize("seed", range(4))
def test_greedy_requests_emit_only_the_argmax(seed: int) -> None:
    batch = random_engine_batch(seed, [3, 0, 2, 4], temperature=[0.0] * 4)
    for r, (accepted, token) in enumerate(verdicts(batch)):
        logits = batch.target_logits[rows_of(batch, r)]
        drafts = batch.draft_sampled[rows_of(batch, r)][1:]
        assert all(drafts[i] == int(np.argmax(logits[i])) for i in range(accepted))
        assert token == int(np.argmax(logits[accepted]))


@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_placeholder_draft_is_rejected_with_an_in_range_token(block: bool,
                                                               temperature: float) -> None:
    batch = random_engine_batch(7, [3, 2], temperature=[temperature] * 2, block=block)
    sampled = list(batch.draft_sampled)
    sampled[1] = -1  # request 0's first draft
    sampled[5] = -1  # request 1's first draft
    results = verdicts(batch._replace(draft_sampled=sampled))
    assert [n for n, _ in results] == [0, 0]
    assert all(0 <= t < 8 for _, t in results)


@pytest.mark.parametrize("seed", range(4))
def test_a_placeholder_blocks_every_later_draft(seed: int) -> None:
    """Drafts after a placeholder are never accepted, whatever they are: here they are set to
    the target's argmax, which a greedy request would otherwise keep."""
    batch = random_engine_batch(seed, [4], temperature=[0.0])
    sampled = list(batch.draft_sampled)
    sampled[2] = -1
    for i in (3, 4):
        sampled[i] = int(np.argmax(batch.target_logits[i - 1]))
    sampled[1] = int(np.argmax(batch.target_logits[0]))
    ((accepted, _),) = verdicts(batch._replace(draft_sampled=sampled))
    assert accepted == 1


@pytest.mark.parametrize("seed", range(6))
def test_trailing_placeholders_truncate_a_block(seed: int) -> None:
    """Block verification with drafts [d_1, d_2, -1, -1] is the round of d_1, d_2 alone: the
    last real draft is tested with its closed-form threshold h_k = w_k of the shorter round."""
    batch = random_engine_batch(seed, [4], temperature=[1.0], block=True)
    sampled = list(batch.draft_sampled)
    sampled[3] = sampled[4] = -1
    (got,) = verdicts(batch._replace(draft_sampled=sampled))
    _, target, draft, _, _, uniforms = adapt(batch)
    short = verify_blockwise(target[:3], draft[:2], mx.array(sampled[1:3], dtype=mx.int32),
                             uniforms[:3])
    assert got == (int(np.array(short.num_accepted)), int(np.array(short.next_token)))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_all_nan_rows_give_in_range_ids(temperature: float) -> None:
    """A violated precondition (spec/validation.md): the reference still returns ids
    in [0, V) for rows of NaN logits at V = 20,000, as the page's table states."""
    vocab = 20_000
    batch = random_engine_batch(3, [2, 1], vocab=vocab, temperature=[temperature] * 2)
    nan_batch = batch._replace(target_logits=np.full_like(batch.target_logits, np.nan))
    for _, token in verdicts(nan_batch):
        assert 0 <= token < vocab


@pytest.mark.parametrize("seed", range(3))
def test_a_chunked_batch_equals_the_full_batch(seed: int) -> None:
    ks = [2, 0, 3, 1, 4]
    batch = random_engine_batch(seed, ks, block=seed == 2)
    whole = verdicts(batch)
    cut = 2
    first_rows, first_drafts = batch.cu_num_logits[cut], sum(ks[:cut])
    head = batch._replace(
        target_logits=batch.target_logits[:first_rows],
        draft_sampled=batch.draft_sampled[:first_rows],
        draft_probs=batch.draft_probs[:first_drafts],
        cu_num_logits=batch.cu_num_logits[:cut + 1], temperature=batch.temperature[:cut],
        uniforms=batch.uniforms[:first_rows])
    tail = batch._replace(
        target_logits=batch.target_logits[first_rows:],
        draft_sampled=batch.draft_sampled[first_rows:],
        draft_probs=batch.draft_probs[first_drafts:],
        cu_num_logits=[c - first_rows for c in batch.cu_num_logits[cut:]],
        temperature=batch.temperature[cut:], uniforms=batch.uniforms[first_rows:])
    assert verdicts(head) + verdicts(tail) == whole


def test_the_accept_test_at_the_edges_of_q_is_the_formula_as_written() -> None:
    """spec/porting_reference.md's table of q(t) at the edges, with p(t) = 1: the library's
    accept test, cell by cell (the engines' validation rules differ there)."""
    text = (Path(__file__).resolve().parents[1] / "spec" / "porting_reference.md").read_text(
        "utf-8")
    block = text.split("<!-- accept-edges:", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (\w+) \| (\w+) \| (\w+) \| (\w+) \|$", block, re.MULTILINE)
    assert len(rows) == 8
    uniforms = [0.0, 0.25, 0.5, 1.0 - 2.0**-24]
    for q_t, *cells in rows:
        q = mx.array([float(q_t), 0.0], dtype=mx.float32)
        got = [bool(accept_draft_token(mx.array([1.0, 0.0]), q, 0, u).item()) for u in uniforms]
        assert got == [cell == "accept" for cell in cells], q_t


# --- a tree kernel's layout ----------------------------------------------------------------
#
# SGLang's target-only tree kernel reads, per request, slots 0..N (slot 0 the root, the last
# verified token): the token of each slot (`candidates`), each slot's first child
# (`retrive_next_token`) and next sibling (`retrive_next_sibling`), -1 for none, and target
# probabilities per slot. It tests a slot's children in sibling-chain order. `verify_tree`
# tests a node's children in node-index order, so the adapter numbers the slots in preorder
# (a parent before its children, siblings in chain order). Its fixed cases with thresholds
# (1, 1) are the lossless rule (deterministic candidates); thresholds below 1 are a relaxed,
# lossy acceptance the spec does not define, so those cases have no adapter.


class EagleTree(NamedTuple):
    parents: list[int]  # verify_tree's parents, in preorder
    tokens: list[int]  # verify_tree's draft_tokens
    slots: list[int]  # the kernel's slot of each verify_tree node (row order follows)


def from_eagle_tree(candidates: Sequence[int], next_token: Sequence[int],
                    next_sibling: Sequence[int]) -> EagleTree:
    parents: list[int] = []
    tokens: list[int] = []
    slots: list[int] = []

    def visit(slot: int, node: int) -> None:
        child = next_token[slot]
        while child != -1:
            parents.append(node)
            tokens.append(candidates[child])
            slots.append(child)
            visit(child, len(slots) - 1)
            child = next_sibling[child]

    visit(0, -1)
    return EagleTree(parents, tokens, slots)


SGLANG_TREES = [
    # candidates, retrive_next_token, retrive_next_sibling, the slots with a target argmax
    # other than 18 ({slot: token}), and the kernel's expected accept_index and bonus token.
    ([0, 1, 2, 3, 4, 5], [1, 2, -1, 4, 5, -1], [-1, 3, -1, -1, -1, -1], {0: 3, 3: 4, 4: 5},
     [0, 3, 4, 5], 18),
    ([7, 8, 9, 10, 11, 12], [4, 2, 3, -1, 5, -1], [-1, -1, -1, -1, 1, -1], {0: 11, 4: 12},
     [0, 4, 5], 18),
]


@pytest.mark.parametrize("case", SGLANG_TREES, ids=["request-0", "request-1"])
def test_the_tree_kernels_fixed_cases_with_thresholds_one(
    case: tuple[list[int], list[int], list[int], dict[int, int], list[int], int],
) -> None:
    """The kernel's fixed 6-slot trees at V = 20: logits 1 everywhere, 10 at each slot's
    target token, temperature 0.01, so every target row is one-hot. The accepted path (as
    the kernel's slots, relative to the request) and the bonus token match its expectations
    for every uniform."""
    candidates, next_token, next_sibling, argmax, accept_slots, bonus = case
    tree = from_eagle_tree(candidates, next_token, next_sibling)
    logits = np.ones((6, 20), dtype=np.float32)
    for slot in range(6):
        logits[slot, argmax.get(slot, 18)] = 10.0
    rows = [0, *tree.slots]  # verify_tree's row v is the kernel's slot rows[v]
    target = effective_token_distribution(mx.array(logits[rows]),
                                          SamplerConfig(temperature=0.01))
    assert all(sorted(np.array(target[v]).tolist())[-2:] == [0.0, 1.0] for v in range(6))
    for u in (0.0, 0.5, 1.0 - 2.0**-24):
        verdict = verify_tree(TreeScheme.DETERMINISTIC, tree.parents, target, None,
                              tree.tokens, mx.full((5,), u), mx.full((4,), u))
        accepted = int(np.array(verdict.num_accepted))
        nodes = [int(x) for x in np.array(verdict.accepted_nodes)][:accepted]
        assert [0, *(tree.slots[n] for n in nodes)] == accept_slots
        assert int(np.array(verdict.next_token)) == bonus
