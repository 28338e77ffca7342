"""SGLang's tree-verification layout, read as the trace's ``tree-round`` records.

SGLang verifies a batch of draft trees with ``tree_speculative_sampling_target_only``
(the CUDA kernel of its wheel, and a Triton port of it). One request's tree is held in
*slots* ``0 .. n - 1``: slot 0 is the round's current token (the root), every other slot a
draft; ``candidates[s]`` is slot s's token, ``next_token[s]`` its first child's slot and
``next_sibling[s]`` its next sibling's (``-1`` for none). ``target_probs[s]`` is the
target's law after slot s's path. Each row draws **one** coin, ``uniform_samples[s]``, for
all its children: child j (in sibling order) is accepted when ``p(x_j) > 0`` and the coin
lies below the cumulative target mass ``p(x_0) + ... + p(x_j)`` (the CUDA kernel; the port
tests ``<=`` and drops the ``p > 0`` guard). A rejected candidate's mass is removed from
the row, and the token after the path is drawn from what is left with
``uniform_samples_for_final_sampling``.

That is `verify_tree` under the ``deterministic`` scheme (one-hot proposals), given one
fresh uniform per *child*: given that children 0..j-1 were rejected (the coin is at least
``S = p(x_0) + ... + p(x_{j-1})``), ``(coin - S) / (1 - S)`` is uniform on [0, 1), and
child j passes exactly when it lies below ``p(x_j) / (1 - S)``, the residual's mass at
``x_j``. This module maps the kernel's arrays onto a tree round and back, with no torch:
the trees, the per-child uniforms, and the kernel's outputs (``accept_index``,
``predicts``) as a path and its emitted tokens.
"""

from __future__ import annotations

import json
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FIXED_CASES",
    "FixedCase",
    "KernelRequest",
    "TreeRound",
    "accept_uniforms",
    "kernel_outcome",
    "load_fixed_cases",
    "request_from_parents",
    "tree_round",
]

FIXED_CASES = Path(__file__).with_name("fixed_cases.json")
"""SGLang's seven fixed verification cases, in this module's terms (see the file's note)."""


@dataclass(frozen=True)
class KernelRequest:
    """One request's tree in the kernel's slots (slot 0 the root), and its randomness."""

    candidates: tuple[int, ...]
    """Each slot's token; slot 0 holds the current token."""
    next_token: tuple[int, ...]
    """Each slot's first child slot, or -1."""
    next_sibling: tuple[int, ...]
    """Each slot's next sibling slot, or -1."""
    target_rows: tuple[tuple[float, ...], ...]
    """`[n, V]` float32 values: the target's law after each slot's path."""
    coins: tuple[float, ...]
    """`[n]` float32 values: ``uniform_samples``, slot s's coin for its children."""
    final_coin: float
    """``uniform_samples_for_final_sampling``: the draw after the path."""


@dataclass(frozen=True)
class TreeRound:
    """A kernel request read as a tree round: `verify_tree`'s arguments and layout.

    Node i is slot ``slots[i + 1]``; row 0 is slot 0. Nodes deeper than the kernel's
    ``max_depth`` are left out: the kernel never tests them (it samples the token after a
    path of that length from p, as after a leaf).
    """

    parents: list[int]
    node_tokens: list[int]
    target_rows: list[list[float]]
    slots: list[int]
    """Row r's slot: 0 for the root, then node i's at ``r = i + 1``."""
    accept: list[float]
    sample: list[float]


_LAST_BELOW_ONE = 1.0 - 2.0**-24
"""The largest float32 below 1."""


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _next_float32_up(value: float) -> float:
    """The least float32 strictly above `value` (a float >= 0)."""
    single = _float32(value)
    bits = struct.unpack("<I", struct.pack("<f", single))[0]
    while single <= value:
        bits += 1
        single = float(struct.unpack("<f", struct.pack("<I", bits))[0])
    return single


def _least_float32_at_or_above(value: float) -> float:
    single = _float32(value)
    return single if single >= value else _next_float32_up(value)


def _children(request: KernelRequest, slot: int) -> list[int]:
    kids, seen = [], set()
    child = request.next_token[slot]
    while child != -1:
        if child in seen or not 0 < child < len(request.candidates):
            raise ValueError(f"next_token/next_sibling: slot {slot}'s children loop or leave "
                             f"the tree at slot {child}")
        seen.add(child)
        kids.append(child)
        child = request.next_sibling[child]
    return kids


def _greatest_float32_at_or_below(value: float) -> float:
    single = _float32(value)
    if single <= value:
        return single
    bits = struct.unpack("<I", struct.pack("<f", single))[0]
    return float(struct.unpack("<f", struct.pack("<I", bits - 1))[0]) if bits else 0.0


TIE_MARGIN = 2.0**-20
"""How far (relative) a uniform is kept from its threshold, on the side the kernel's
comparison puts it: more than the few float32 roundings by which `verify_tree`'s residual
and the kernel's cumulative sum can differ, far less than any statistic can see."""


def accept_uniforms(
    parents: Sequence[int], node_tokens: Sequence[int], target_rows: Sequence[Sequence[float]],
    row_coins: Sequence[float], *, strict: bool,
) -> list[float]:
    """Node i's accept uniform in `verify_tree`'s layout, from its row's one coin.

    The kernel tests child j of a row (children in index order) against its float32
    cumulative sum ``cdf_j = cdf_{j-1} + p(x_j)``: ``coin < cdf_j`` (`strict`, the CUDA
    kernel) or ``coin <= cdf_j`` (the Triton port). Given that the coin passed no elder
    sibling, ``t = (coin - cdf_{j-1}) / (1 - cdf_{j-1})`` is uniform on [0, 1) and the test
    reads ``t < r`` (or ``<=``) with ``r = p(x_j) / (1 - cdf_{j-1})``, the residual's mass at
    ``x_j``: child j's uniform is t as a float32, moved off r by `TIE_MARGIN` where it lies
    that close, to the side the kernel's comparison puts it (so a tie ``coin = cdf_j`` is
    decided as the kernel's own comparison decides it). The map does not read the kernel's
    ``p > 0`` guard: a child with p = 0 that the comparison passes gets a uniform of 0, which
    `verify_tree` rejects, so an engine without the guard diverges there. A child that no
    coin reaches (an elder sibling passed) reads no uniform: 0.0.
    """
    kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for node, parent in enumerate(parents):
        kids[parent + 1].append(node)
    out = [0.0] * len(parents)
    for row, children in enumerate(kids):
        coin, below = _float32(float(row_coins[row])), 0.0
        for j, child in enumerate(children):
            p = _float32(float(target_rows[row][node_tokens[child]]))
            cdf = _float32(below + p)
            reached = coin >= below if strict else (j == 0 or coin > below)
            if reached and below < 1.0:
                t = (coin - below) / (1.0 - below)
                r = (cdf - below) / (1.0 - below)
                if (coin < cdf) if strict else (coin <= cdf):
                    u = min(_least_float32_at_or_above(t),
                            _greatest_float32_at_or_below(r * (1.0 - TIE_MARGIN)))
                else:
                    u = max(_least_float32_at_or_above(t),
                            _next_float32_up(r * (1.0 + TIE_MARGIN)))
                out[child] = min(max(u, 0.0), _LAST_BELOW_ONE)
            below = cdf
    return out


def tree_round(request: KernelRequest, max_depth: int, *, strict: bool) -> TreeRound:
    """Read one kernel request as a tree round, nodes numbered level by level.

    Nodes are numbered breadth-first along the kernel's links, so a parent comes before its
    children and siblings keep the kernel's order; slots below `max_depth` (the kernel's
    ``accept_index`` width less one) are left out.
    """
    if max_depth < 1:
        raise ValueError(f"max_depth must be >= 1 (accept_index holds at least 2), got {max_depth}")
    parents: list[int] = []
    slots: list[int] = [0]
    queue = deque((c, -1, 1) for c in _children(request, 0))
    while queue:
        slot, parent, depth = queue.popleft()
        node = len(parents)
        parents.append(parent)
        slots.append(slot)
        if depth < max_depth:
            queue.extend((c, node, depth + 1) for c in _children(request, slot))
    if not parents:
        raise ValueError("the tree has no draft: slot 0 has no child")
    tokens = [request.candidates[s] for s in slots[1:]]
    rows = [[_float32(v) for v in request.target_rows[s]] for s in slots]
    depth = _depth(parents)
    accept = accept_uniforms(parents, tokens, rows, [request.coins[s] for s in slots],
                             strict=strict)
    sample = [0.0] * (depth + 1)
    return TreeRound(parents, tokens, rows, slots, accept, sample)


def _depth(parents: Sequence[int]) -> int:
    depths: list[int] = []
    for parent in parents:
        depths.append(1 if parent == -1 else depths[parent] + 1)
    return max(depths)


def kernel_outcome(
    tree: TreeRound, accepted_slots: Sequence[int], tokens_after: Sequence[int],
    final_coin: float,
) -> tuple[list[int], list[int], list[float]]:
    """The kernel's verdict as (path, emitted, sample uniforms) of the tree round.

    `accepted_slots` are the accepted drafts' slots from the root down (``accept_index``
    past its first entry, made local); `tokens_after[d]` is ``predicts`` at the d-th slot of
    the root path (slot 0 first): the accepted child's token, then the token after the
    path. The final coin goes where `verify_tree` reads it, ``sample[len(path)]``.
    """
    node_of = {slot: i for i, slot in enumerate(tree.slots[1:])}
    path = []
    for slot in accepted_slots:
        if slot not in node_of:
            raise ValueError(f"accept_index names slot {slot}, which is not a node of the tree")
        path.append(node_of[slot])
    emitted = [int(t) for t in tokens_after[: len(path) + 1]]
    sample = list(tree.sample)
    sample[len(path)] = _float32(final_coin)
    return path, emitted, sample


def request_from_parents(
    parents: Sequence[int], node_tokens: Sequence[int], root_token: int,
    target_rows: Sequence[Sequence[float]], coins: Sequence[float], final_coin: float,
) -> KernelRequest:
    """A tree in `verify_tree`'s layout (node i at slot i + 1) as the kernel's links."""
    n = len(parents) + 1
    next_token, next_sibling, last = [-1] * n, [-1] * n, [-1] * n
    for node, parent in enumerate(parents):
        slot, parent_slot = node + 1, parent + 1
        if last[parent_slot] == -1:
            next_token[parent_slot] = slot
        else:
            next_sibling[last[parent_slot]] = slot
        last[parent_slot] = slot
    return KernelRequest((root_token, *node_tokens), tuple(next_token), tuple(next_sibling),
                         tuple(tuple(r) for r in target_rows), tuple(coins), final_coin)


# --- SGLang's fixed cases ----------------------------------------------------------------


@dataclass(frozen=True)
class FixedCase:
    """One of SGLang's fixed cases: requests, thresholds and what SGLang asserts."""

    name: str
    vocab_size: int
    threshold_single: float
    threshold_acc: float
    max_depth: int
    requests: list[KernelRequest]
    expected_accepted: list[list[int]]
    """Per request, the accepted drafts' slots."""
    expected_tokens: list[list[int]]
    """Per request, what SGLang asserts of ``predicts`` along the path: the accepted tokens
    and the token after them, or its first entry alone."""
    port_accepted: list[list[int]]
    """Per request, the accepted slots the Triton port returned (recorded)."""
    port_tokens: list[list[int]]
    """Per request, ``predicts`` along the port's path: its accepted tokens, then the next."""
    cuda_accepted: list[list[int]]
    """Per request, the accepted slots SGLang 0.5.23's CUDA kernel returned (recorded)."""
    cuda_tokens: list[list[int]]
    """Per request, ``predicts`` along the CUDA kernel's path."""


def _rows(spec: Any, vocab: int, slots: int) -> tuple[tuple[float, ...], ...]:
    """Target rows from a case's note: ``{"peaks": [...]}`` one-hot rows, or explicit rows
    given by ``{"rows": {slot: [...]}, "default_peak": t}``."""
    if "peaks" in spec:
        return tuple(tuple(1.0 if t == peak else 0.0 for t in range(vocab))
                     for peak in spec["peaks"])
    rows = []
    for slot in range(slots):
        given = spec["rows"].get(str(slot))
        rows.append(tuple(given) if given is not None else
                    tuple(1.0 if t == spec["default_peak"] else 0.0 for t in range(vocab)))
    return tuple(rows)


def load_fixed_cases(path: Path = FIXED_CASES) -> list[FixedCase]:
    """Read the fixed cases file (`FIXED_CASES`)."""
    data = json.loads(path.read_text("utf-8"))
    cases = []
    for case in data["cases"]:
        requests, accepted, tokens = [], [], []
        for req in case["requests"]:
            n = len(req["candidates"])
            requests.append(KernelRequest(
                tuple(req["candidates"]), tuple(req["next_token"]), tuple(req["next_sibling"]),
                _rows(req["target"], case["vocab_size"], n), tuple(req["coins"]),
                req["final_coin"]))
            accepted.append(req["sglang_expects"]["accepted_slots"])
            tokens.append(req["sglang_expects"]["tokens"])
        cases.append(FixedCase(case["name"], case["vocab_size"], case["thresholds"][0],
                               case["thresholds"][1], case["max_depth"], requests, accepted,
                               tokens, case["triton_port"]["accepted_slots"],
                               case["triton_port"]["tokens"],
                               case["cuda_kernel"]["accepted_slots"],
                               case["cuda_kernel"]["tokens"]))
    return cases
