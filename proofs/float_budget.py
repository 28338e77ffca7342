"""The float32 draw's error budget: the cases, their exact distance, and the proved bound.

Shared by the docs build, which renders the table of ``proofs/float_draw.md`` from
`budget_rows` (``docs/_ext/float_budget_table.py``) and fails if a row breaks
`proved_bound` or `STATED_BUDGET`, and by ``proofs/test_float_draw.py``.

Each case is a `[V]` float32 distribution ``w`` from the library's own
`effective_token_distribution` (a plain temperature, no filters) on seeded logits. Its
realized law ``rho = grid_draw_counts(w) / 2**24`` is exact; its target is
``p = w / sum(w)`` with the sum taken exactly over the float32 entries. The total variation
is summed in float64 (``math.fsum``), which is exact to far better than the digits printed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from specaccept import (
    UNIFORM_GRID_SIZE,
    SamplerConfig,
    effective_token_distribution,
    grid_draw_counts,
    sample_from_distribution,
)

VOCAB_SIZES = (1_000, 32_000, 128_000, 256_000)
TEMPERATURES = (0.7, 1.0)
LOGIT_KINDS = ("Gaussian", "Zipf")
GAUSSIAN_SCALE = 3.0
"""Standard deviation of the Gaussian logits."""
ZIPF_EXPONENT = 1.1
"""Zipf logits: ``-ZIPF_EXPONENT * log(rank)``, the ranks in a seeded random order."""
STATED_BUDGET = 2.5e-3
"""The total variation ``proofs/float_draw.md`` states for every case of the table."""
TWO_LEVEL_BLOCK = 512
"""Ids per block of the two-level draw."""
TWO_LEVEL_BUDGET = 2e-5
"""The total variation ``proofs/float_draw.md`` states for the two-level draw, every case."""


@dataclass(frozen=True)
class BudgetRow:
    """One case of the table and its exact figures."""

    kind: str
    vocab_size: int
    temperature: float
    total_variation: float
    """TV(rho, p), exact up to float64 summation."""
    sub_grid_mass: float
    """The mass p puts on ids below one grid step (p(x) < 2**-24)."""
    lost_ids: int
    """Ids with p(x) > 0 that the draw never returns (zero grid points)."""
    positive_ids: int
    """Ids with p(x) > 0."""
    two_level_total_variation: float
    """TV(rho2, p) for the two-level draw of `two_level_draw`."""


def logits(kind: str, vocab_size: int) -> mx.array:
    """Seeded float32 logits of the given kind."""
    rng = np.random.default_rng(vocab_size)
    if kind == "Gaussian":
        values = rng.normal(0.0, GAUSSIAN_SCALE, vocab_size)
    elif kind == "Zipf":
        values = -ZIPF_EXPONENT * np.log(rng.permutation(vocab_size) + 1.0)
    else:
        raise ValueError(f"kind must be one of {LOGIT_KINDS}, got {kind!r}")
    return mx.array(values.astype(np.float32))


def total_variation(counts: np.ndarray, weights: np.ndarray, grid: int = UNIFORM_GRID_SIZE
                    ) -> float:
    """TV between ``counts / grid`` and ``weights / sum(weights)``, summed in float64."""
    exact_weights = weights.astype(np.float64)
    target = exact_weights / math.fsum(exact_weights.tolist())
    realized = counts.astype(np.float64) / grid
    return 0.5 * math.fsum(np.abs(realized - target).tolist())


def blocks(probs: mx.array, block_size: int) -> mx.array:
    """`[B, block_size]`: the weights cut into blocks, the last one padded with zeros."""
    vocab_size = probs.shape[0]
    count = -(-vocab_size // block_size)
    padding = mx.zeros((count * block_size - vocab_size,), dtype=mx.float32)
    return mx.concatenate([probs, padding]).reshape(count, block_size)


def two_level_draw(probs: mx.array, u_block: float, u_within: float,
                   block_size: int = TWO_LEVEL_BLOCK) -> int:
    """A draw in two levels, a proposal measured here and not the library's draw: pick a
    block from the float32 block sums with `u_block`, then an id inside the block from its
    own weights with `u_within`, both with `sample_from_distribution`. Each level runs
    over at most a few hundred entries, so its prefix sums round far less, and an id's
    share of its block is far above one grid step. It needs a second uniform per draw."""
    rows = blocks(probs, block_size)
    (block,) = np.array(sample_from_distribution(rows.sum(axis=1), u_block)).reshape(1).tolist()
    (within,) = np.array(sample_from_distribution(rows[block], u_within)).reshape(1).tolist()
    return int(block) * block_size + int(within)


def two_level_counts(probs: mx.array, block_size: int = TWO_LEVEL_BLOCK) -> np.ndarray:
    """The exact law of `two_level_draw` with both uniforms on the 2**-24 grid, as counts
    over the 2**48 grid pairs: block counts times within-block counts, since the two
    uniforms are independent and each level is a `sample_from_distribution` draw whose
    counts `grid_draw_counts` gives exactly."""
    rows = blocks(probs, block_size)
    per_block = np.array(grid_draw_counts(rows.sum(axis=1))).astype(np.int64)
    within = np.array(mx.vmap(grid_draw_counts)(rows)).astype(np.int64)
    return (per_block[:, None] * within).reshape(-1)[: probs.shape[0]]


def proved_bound(positive_ids: int) -> float:
    """The a-priori bound of ``proofs/float_draw.md``: TV <= (2 V+ + 1/2) 2**-24.

    `positive_ids` is V+, the number of ids with p(x) > 0.
    """
    return (2 * positive_ids + 0.5) * 2.0**-24


def budget_row(kind: str, vocab_size: int, temperature: float) -> BudgetRow:
    probs = effective_token_distribution(
        logits(kind, vocab_size), SamplerConfig(temperature=temperature), ()
    )
    counts = np.array(grid_draw_counts(probs)).astype(np.int64)
    weights = np.array(probs).astype(np.float64)
    total = math.fsum(weights.tolist())
    positive = weights > 0
    return BudgetRow(
        kind=kind,
        vocab_size=vocab_size,
        temperature=temperature,
        total_variation=total_variation(counts, weights),
        sub_grid_mass=math.fsum(weights[weights < total / UNIFORM_GRID_SIZE].tolist()) / total,
        lost_ids=int((positive & (counts == 0)).sum()),
        positive_ids=int(positive.sum()),
        two_level_total_variation=total_variation(
            two_level_counts(probs), weights, UNIFORM_GRID_SIZE**2),
    )


def budget_rows() -> list[BudgetRow]:
    """Every case of the table, in its order."""
    return [
        budget_row(kind, vocab_size, temperature)
        for kind in LOGIT_KINDS
        for vocab_size in VOCAB_SIZES
        for temperature in TEMPERATURES
    ]


def budget_problems(rows: list[BudgetRow]) -> list[str]:
    """Each row that breaks the proved bound or the stated budget; empty: all is well."""
    problems = []
    for row in rows:
        case = f"{row.kind} V={row.vocab_size} T={row.temperature}"
        if row.total_variation > proved_bound(row.positive_ids):
            problems.append(f"{case}: TV {row.total_variation:.3e} breaks the proved bound "
                            f"{proved_bound(row.positive_ids):.3e}: the proof is wrong")
        if row.total_variation > STATED_BUDGET:
            problems.append(f"{case}: TV {row.total_variation:.3e} exceeds the stated budget "
                            f"{STATED_BUDGET:.1e}: correct proofs/float_draw.md")
        if row.two_level_total_variation > TWO_LEVEL_BUDGET:
            problems.append(f"{case}: two-level TV {row.two_level_total_variation:.3e} exceeds "
                            f"the stated {TWO_LEVEL_BUDGET:.0e}: correct proofs/float_draw.md")
    return problems


def markdown_table(rows: list[BudgetRow]) -> str:
    """The table as Markdown, for ``docs/results/float_budget.md``."""
    lines = ["| logits | V | T | TV(rho, p) | proved bound | mass below 2^-24 | ids never drawn "
             "| two-level TV |",
             "| ------ | - | - | ---------- | ------------ | ---------------- | --------------- "
             "| ------------ |"]
    lines += [
        f"| {r.kind} | {r.vocab_size:,} | {r.temperature} | {r.total_variation:.3e} | "
        f"{proved_bound(r.positive_ids):.3e} | {r.sub_grid_mass:.2e} | {r.lost_ids:,} | "
        f"{r.two_level_total_variation:.2e} |"
        for r in rows
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table(budget_rows()))
