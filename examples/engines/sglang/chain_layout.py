"""SGLang's chain verification layout, read as the trace's ``round`` records.

SGLang's rejection-sampling verifier, ``chain_speculative_sampling_triton``
(``sglang/kernels/ops/speculative/reject_sampling.py`` of its wheel), verifies a batch of
draft *chains*. One request holds ``S = k + 1`` slots: ``candidates[0]`` is the round's
current token (the root) and ``candidates[1..k]`` are the drafts ``d_0 .. d_{k-1}``;
``retrive_index[s]`` is slot s's index in the flat ``predicts`` output of the whole batch.
``target_probs[s]`` is the target's law after the root and ``d_0 .. d_{s-1}``;
``draft_probs[s]`` (``k`` rows) is the law ``d_s`` was drawn from. The kernel reads coin
``uniform_samples[s]`` for the test of ``d_s`` and ``uniform_samples_for_final_sampling``
for the token after the accepted prefix; it writes the number of accepted drafts ``a`` to
``accept_token_num``, the global slots of the root and the accepted drafts to
``accept_index[0..a]`` (``-1`` after them), and at each of those slots in ``predicts`` the
token emitted there: the next accepted draft, then, at the last, the replacement or bonus.

This module builds the chain arrays for a batch and reads one request's outputs back as a
round (draft tokens, emitted tokens, the uniforms the rule read), checking that the
outputs are a chain verdict at all; it needs no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ChainArrays",
    "ChainRound",
    "LayoutError",
    "chain_arrays",
    "chain_round",
]


class LayoutError(ValueError):
    """Kernel outputs that are no chain verdict of the request's inputs; says which."""


@dataclass(frozen=True)
class ChainArrays:
    """A batch's chain inputs, as nested lists shaped as SGLang passes them."""

    candidates: list[list[int]]
    """``[B, k + 1]``: each request's root token, then its drafts."""
    retrive_index: list[list[int]]
    """``[B, k + 1]``: slot s of request b is ``b * (k + 1) + s`` of ``predicts``."""
    retrive_next_token: list[list[int]]
    """``[B, k + 1]``: slot s's child, ``s + 1`` (``-1`` at the last slot)."""
    retrive_next_sibling: list[list[int]]
    """``[B, k + 1]``: all ``-1`` (a chain has no siblings; the kernel does not read it)."""


@dataclass(frozen=True)
class ChainRound:
    """One request's verdict as a trace round."""

    draft_tokens: list[int]
    emitted: list[int]
    num_accepted: int
    uniforms: list[list[float | None]]
    """``[k + 1, 2]``: the accept tests the rule read, and the draw at ``[a][1]``."""


def chain_arrays(roots: Sequence[int], drafts: Sequence[Sequence[int]]) -> ChainArrays:
    """The chain inputs of a batch whose request b has root ``roots[b]`` and ``drafts[b]``.

    Raises:
        LayoutError: the batch is empty, or its requests' draft counts differ or are 0.
    """
    if not roots or len(roots) != len(drafts):
        raise LayoutError(f"roots and drafts must name the same requests, at least one: "
                          f"got {len(roots)} roots and {len(drafts)} draft lists")
    k = len(drafts[0])
    if k < 1 or any(len(row) != k for row in drafts):
        raise LayoutError(f"every request must propose the same k >= 1 drafts, got counts "
                          f"{sorted({len(row) for row in drafts})}")
    slots = k + 1
    return ChainArrays(
        candidates=[[int(root), *map(int, row)] for root, row in zip(roots, drafts, strict=True)],
        retrive_index=[[b * slots + s for s in range(slots)] for b in range(len(roots))],
        retrive_next_token=[[s + 1 if s < k else -1 for s in range(slots)] for _ in roots],
        retrive_next_sibling=[[-1] * slots for _ in roots],
    )


def chain_round(
    candidates: Sequence[int],
    retrive_index: Sequence[int],
    accept_index: Sequence[int],
    accept_token_num: int,
    predicts: Sequence[int],
    coins: Sequence[float],
    final_coin: float,
    *,
    block: bool,
) -> ChainRound:
    """Read one request's kernel outputs as a round of rule ``block`` or ``stochastic``.

    `candidates`, `retrive_index`, `accept_index` and `coins` are the request's rows
    (``k + 1`` entries each); `predicts` is the whole batch's flat output. The standard rule
    read the coins of the tested drafts (``d_0 .. d_min(a, k-1)``), block verification every
    draft's; both drew the token after the prefix with `final_coin` (``uniforms[a][1]``).

    Raises:
        LayoutError: ``a`` outside ``[0, k]``, an ``accept_index`` that is not the chain's
            first ``a + 1`` slots followed by ``-1``, or a ``predicts`` entry at an accepted
            slot that is not the next draft.
    """
    slots = len(candidates)
    k = slots - 1
    if k < 1 or len(retrive_index) != slots or len(accept_index) != slots \
            or len(coins) != slots:
        raise LayoutError(f"candidates, retrive_index, accept_index and coins must have the "
                          f"same k + 1 >= 2 entries, got {slots}, {len(retrive_index)}, "
                          f"{len(accept_index)}, {len(coins)}")
    a = int(accept_token_num)
    if not 0 <= a <= k:
        raise LayoutError(f"accept_token_num must lie in [0, {k}], got {a}")
    expected = [int(i) for i in retrive_index[:a + 1]] + [-1] * (k - a)
    if [int(i) for i in accept_index] != expected:
        raise LayoutError(f"accept_index must be the chain's first {a + 1} slots then -1: "
                          f"expected {expected}, got {list(accept_index)}")
    emitted = [int(predicts[int(i)]) for i in retrive_index[:a + 1]]
    drafts = [int(t) for t in candidates[1:]]
    if emitted[:a] != drafts[:a]:
        raise LayoutError(f"predicts at the accepted slots must be the accepted drafts "
                          f"{drafts[:a]}, got {emitted[:a]}")
    read = k if block else min(a + 1, k)
    uniforms: list[list[float | None]] = [
        [float(coins[i]) if i < read else None, None] for i in range(k + 1)]
    uniforms[a][1] = float(final_coin)
    return ChainRound(drafts, emitted, a, uniforms)
