"""Checks of ``proofs/float_draw.md``: `grid_draw_counts` is the draw's exact law on the
2**-24 grid, the error budget holds, and the dyadic tables of the exact checks are drawn
exactly."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import mlx.core as mx
import numpy as np
import pytest

from proofs.exact_rounds import DRAFTERS, TARGETS, V3_NOISE, V3_TARGETS
from proofs.float_budget import (
    STATED_BUDGET,
    TWO_LEVEL_BUDGET,
    blocks,
    budget_problems,
    budget_row,
    logits,
    proved_bound,
    two_level_counts,
    two_level_draw,
)
from specaccept import (
    UNIFORM_GRID_SIZE,
    SamplerConfig,
    accept_draft_token,
    effective_token_distribution,
    grid_draw_counts,
    sample_from_distribution,
)

G = UNIFORM_GRID_SIZE


def grid_uniforms(start: int, stop: int) -> mx.array:
    """The grid uniforms i / 2**24 for i in [start, stop), exact in float32."""
    return mx.arange(start, stop, dtype=mx.int32).astype(mx.float32) * (1.0 / G)


def draw_histogram(probs: mx.array) -> np.ndarray:
    """What the draw returns at every one of the 2**24 grid points, counted per id."""
    vocab_size = probs.shape[0]
    histogram = np.zeros(vocab_size, dtype=np.int64)
    chunk = 1 << 21
    for start in range(0, G, chunk):
        rows = mx.broadcast_to(probs, (chunk, vocab_size))
        tokens = sample_from_distribution(rows, grid_uniforms(start, start + chunk))
        histogram += np.bincount(np.array(tokens), minlength=vocab_size)
    return histogram


EDGE_CASES = {
    # zeros first and inside, an id absorbed by the prefix sum (1 + 2**-30 == 1), ids
    # below one grid step, an unnormalized total.
    "absorbed and sub-grid": [0.0, 1.0, 2.0**-30, 0.0, 3e-8, 0.5, 1e-9, 0.1],
    "non-dyadic thirds": [0.1, 1 / 3, 0.0, 1 / 3, 0.2333],
    # a subnormal total: u * total takes few distinct values, so the breakpoints lie far
    # from the real quotient's estimate (a window search around it got these wrong).
    "subnormal total": [2.0**-149, 2.0**-149, 0.0],
    "subnormal mixed": [2.0**-140, 0.0, 3 * 2.0**-149, 2.0**-130],
}


@pytest.mark.parametrize("weights", EDGE_CASES.values(), ids=EDGE_CASES.keys())
def test_grid_draw_counts_is_the_draw_at_every_grid_point(weights: list[float]) -> None:
    """Part 1: the counts equal the histogram of the draw over all 2**24 grid uniforms."""
    probs = mx.array(weights, dtype=mx.float32)
    counts = np.array(grid_draw_counts(probs))
    assert counts.sum() == G
    assert (counts == draw_histogram(probs)).all()


def run_ends(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids with a run, first grid index of each run, last grid index of each run)."""
    ids = np.flatnonzero(counts)
    stops = np.cumsum(counts)[ids]
    return ids, stops - counts[ids], stops - 1


def draws_at(probs: mx.array, indices: np.ndarray) -> np.ndarray:
    rows = mx.broadcast_to(probs, (len(indices), probs.shape[0]))
    uniforms = mx.array(indices.astype(np.int32)).astype(mx.float32) * (1.0 / G)
    return np.array(sample_from_distribution(rows, uniforms))


def runs_agree_with_the_draw(probs: mx.array, counts: np.ndarray) -> bool:
    """Both ends of every run, and the points just outside it, are drawn as the counts say.
    The draw is monotone in the grid index (float_draw.md, part 1), so this fixes every
    count."""
    if counts.sum() != G or (counts < 0).any():
        return False
    ids, firsts, lasts = run_ends(counts)
    previous = np.concatenate([[-1], ids[:-1]])
    following = np.concatenate([ids[1:], [-1]])
    inner_firsts, inner_lasts = firsts[1:], lasts[:-1]
    return bool(
        (draws_at(probs, firsts) == ids).all()
        and (draws_at(probs, lasts) == ids).all()
        and (draws_at(probs, inner_firsts - 1) == previous[1:]).all()
        and (draws_at(probs, inner_lasts + 1) == following[:-1]).all()
    )


@pytest.mark.parametrize("kind", ["Gaussian", "Zipf"])
def test_grid_draw_counts_matches_the_draw_at_every_run_end(kind: str) -> None:
    """Part 1 at V = 1000, with ids below the grid (Gaussian at T = 0.7)."""
    probs = effective_token_distribution(logits(kind, 1000), SamplerConfig(temperature=0.7), ())
    counts = np.array(grid_draw_counts(probs))
    assert runs_agree_with_the_draw(probs, counts)


def exact_breakpoint_counts(probs: mx.array) -> np.ndarray:
    """Wrong: the counts of an exact inverse CDF, ignoring float32 prefix sums."""
    weights = [Fraction(float(w)) for w in np.array(probs).tolist()]
    total = sum(weights, Fraction(0))
    cumulative, ends = Fraction(0), []
    for w in weights:
        cumulative += w
        ends.append(-(-cumulative * G // total))  # ceil
    return np.diff(np.array([0, *ends], dtype=np.int64))


def non_strict_counts(probs: mx.array) -> np.ndarray:
    """Wrong: the draw with ``S_i >= u * total`` (a port's `<=` slip), counted at every
    grid point."""
    partial = np.cumsum(np.array(probs, dtype=np.float32), dtype=np.float32)
    targets = grid_uniforms(0, G) * float(partial[-1])
    ends = np.searchsorted(np.array(targets), partial, side="right")  # u*total <= S_j
    return np.diff(np.concatenate([[0], ends])).astype(np.int64)


def test_wrong_counts_are_caught() -> None:
    """The comparisons have power: exact breakpoints and a non-strict comparison both fail
    them, on the edge cases and at V = 1000."""
    edge = mx.array(EDGE_CASES["absorbed and sub-grid"], dtype=mx.float32)
    histogram = draw_histogram(edge)
    dyadic = mx.array([0.5, 0.0, 0.25, 0.25])
    assert not (exact_breakpoint_counts(edge) == histogram).all()
    assert not (non_strict_counts(dyadic) == np.array(grid_draw_counts(dyadic))).all()
    probs = effective_token_distribution(logits("Gaussian", 1000),
                                         SamplerConfig(temperature=0.7), ())
    for wrong in (exact_breakpoint_counts, non_strict_counts):
        assert not runs_agree_with_the_draw(probs, wrong(probs)), wrong.__name__


def test_the_budget_holds_and_the_proved_bound_is_not_vacuous() -> None:
    """Parts 2 and 3 on two rows of the table (the docs build checks them all): the exact
    TV lies under the proved bound and the stated budget, and a row that broke either
    would be reported."""
    for kind, vocab_size in (("Zipf", 128_000), ("Gaussian", 32_000)):
        row = budget_row(kind, vocab_size, 1.0)
        assert not budget_problems([row])
        assert 0 < row.total_variation <= min(STATED_BUDGET, proved_bound(row.positive_ids))
    assert len(budget_problems([replace(row, total_variation=1.0)])) == 2
    assert len(budget_problems([replace(row, two_level_total_variation=1e-4)])) == 1
    assert len(budget_problems([replace(row, total_variation=STATED_BUDGET * 1.01)])) == 1


def test_the_dyadic_check_tables_are_drawn_exactly() -> None:
    """On every distribution of the exact checks' pools the realized law is p itself."""
    for pool in (TARGETS, DRAFTERS, V3_TARGETS, V3_NOISE):
        for p in pool:
            counts = np.array(grid_draw_counts(mx.array([float(x) for x in p])))
            assert [Fraction(int(c), G) for c in counts] == list(p)


def grid_accept_probability(p_t: float, q_t: float) -> Fraction:
    """P(accept) of the library's `accept_draft_token` over all 2**24 grid uniforms."""
    p = mx.array([p_t, 1.0 - p_t], dtype=mx.float32)
    q = mx.array([q_t, 1.0 - q_t], dtype=mx.float32)
    chunk, accepted = 1 << 22, 0
    for start in range(0, G, chunk):
        rows = (mx.broadcast_to(p, (chunk, 2)), mx.broadcast_to(q, (chunk, 2)))
        verdicts = accept_draft_token(*rows, mx.zeros((chunk,), dtype=mx.int32),
                                      grid_uniforms(start, start + chunk))
        accepted += int(np.array(verdicts).sum())
    return Fraction(accepted, G)


def test_the_grid_accept_test_is_within_three_grid_steps() -> None:
    """What float_draw.md says of the accept test: on the grid it accepts with a
    probability within 3 * 2**-24 of min(1, p(t) / q(t)), computed from the float32
    values it is handed. Non-dyadic ratios, so the rounding is exercised; the error is
    positive (the test is closed), so a claim of exactness would fail here."""
    errors = []
    for p_t, q_t in ((0.3, 0.7), (0.1, 0.3), (1e-7, 3e-7), (0.7, 0.3)):
        p32, q32 = Fraction(float(np.float32(p_t))), Fraction(float(np.float32(q_t)))
        error = grid_accept_probability(p_t, q_t) - min(Fraction(1), p32 / q32)
        assert abs(error) <= Fraction(3, G), (p_t, q_t, error * G)
        errors.append(error)
    assert any(errors)


def test_the_two_level_law_is_the_two_level_draw() -> None:
    """two_level_counts is the law of two_level_draw: per-row counts from the vectorised
    call equal those of one call per row, the counts are the product of the two levels,
    each level's runs agree with its draw at both ends, and the two-level draw returns
    the ids the counts say at the ends of runs."""
    probs = effective_token_distribution(logits("Gaussian", 1000),
                                         SamplerConfig(temperature=0.7), ())
    rows = blocks(probs, 256)
    block_counts = np.array(grid_draw_counts(rows.sum(axis=1))).astype(np.int64)
    within = np.array(mx.vmap(grid_draw_counts)(rows)).astype(np.int64)
    law = two_level_counts(probs, 256)
    assert law.sum() == G * G
    assert (law == (block_counts[:, None] * within).reshape(-1)[:1000]).all()
    for block, row in enumerate(rows):
        assert (np.array(grid_draw_counts(row)) == within[block]).all()
    assert runs_agree_with_the_draw(rows.sum(axis=1), block_counts)
    for block, row in enumerate(rows):
        assert runs_agree_with_the_draw(row, within[block])
    # And the two-level draw itself, at the ends of the first and last id runs of every block.
    block_ids, block_firsts, block_lasts = run_ends(block_counts)
    for block, u_first, u_last in zip(block_ids, block_firsts, block_lasts, strict=True):
        ids, firsts, lasts = run_ends(within[block])
        for x, first, last in ((ids[0], firsts[0], lasts[0]), (ids[-1], firsts[-1], lasts[-1])):
            for u_block, u_within in ((u_first, first), (u_last, last)):
                token = two_level_draw(probs, u_block / G, u_within / G, 256)
                assert token == block * 256 + x


def test_the_two_level_draw_meets_its_budget_where_the_plain_draw_does_not() -> None:
    """At V = 128,000 the two-level draw is within 2e-5 of p, and the plain draw is not:
    the budget check tells the two apart."""
    row = budget_row("Zipf", 128_000, 1.0)
    assert row.two_level_total_variation <= TWO_LEVEL_BUDGET < row.total_variation
