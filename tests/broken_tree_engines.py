"""Deliberately broken tree speculation engines, each tracing itself in format version 2.

One small tree engine (a full tree of W children per node down to depth D) over synthetic
context laws: the target's p and the drafter's q at a context are seeded by its last
tokens, so a node's law depends on its path as a model's would, and a round costs
microseconds. With no bug it drafts as its scheme says and decides with the core's
`verify_tree`; each bug is one known way a tree engine goes wrong. Every trace records
the uniforms the engine read, so replay decides deterministically.

Run as a script it prints the table ``docs/results/broken-tree-engines.md`` records:
``python tests/broken_tree_engines.py``.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from dataclasses import dataclass

import mlx.core as mx
import numpy as np

import specaccept_trace
from specaccept.conformance import ConformanceReport, Verdict, check_trace, read_trace
from specaccept.core.acceptance import AcceptanceRule, verify_tokenwise
from specaccept.core.sampling import sample_from_distribution
from specaccept.core.tree import TreeScheme, verify_tree
from specaccept.shell.tree_generator import full_tree_parents

__all__ = ["TREE_BUGS", "TreeEngineCase", "check_text", "detection_round",
           "run_tree_and_chain_engine", "run_tree_engine"]

VOCAB = 12
PROMPT = (1, 2, 3)


@dataclass(frozen=True)
class TreeEngineCase:
    """A broken tree engine, its tree and the tree checks that must catch it."""

    bug: str
    scheme: TreeScheme
    """How the engine drafts siblings (and what its trace claims)."""
    width: int
    depth: int
    rounds: int
    """The kit flags it within this many rounds, seeds 0 to 2 (asserted in CI)."""
    caught_by: tuple[str, ...]
    grid: int = 24
    """The engine's uniforms are multiples of 2**-grid."""
    sharpness: float = 0.5
    """The drafter's logits are the target's times this, plus noise (see `_laws`)."""
    record_uniforms: bool = True
    """Whether the trace records the uniforms (without them replay and fresh do not run)."""


TREE_BUGS = (
    # RSD drafts, but the rejected siblings' tokens stay in the proposal: q is not
    # renormalised, so a later sibling is tested against the wrong law.
    TreeEngineCase("without-replacement-verified-as-iid", TreeScheme.WITHOUT_REPLACEMENT,
                   4, 2, 12, ("tree-replay",), sharpness=2.0),
    # The drafter's top-W candidates, tested with min(1, p/q) as if drawn from q.
    TreeEngineCase("top-n-verified-with-q", TreeScheme.DETERMINISTIC, 3, 2, 6,
                   ("tree-replay",)),
    # The draw after the path reuses the accept uniform of the last child it rejected,
    # and records it: every decision replays, but one uniform is read twice.
    TreeEngineCase("accept-coin-reused-for-draw", TreeScheme.IID, 2, 2, 6, ("tree-fresh",)),
    # Every round reads the uniforms of the run's first round.
    TreeEngineCase("rounds-keyed-as-first", TreeScheme.IID, 2, 2, 4, ("tree-fresh",)),
    # The accept test u * q(x) <= r(x) without its r(x) > 0 guard: a draft the target
    # gives no mass passes at u = 0, which 3-bit uniforms reach one time in eight.
    TreeEngineCase("zero-mass-accepted-at-coin-0", TreeScheme.IID, 3, 1, 40,
                   ("tree-replay", "tree-support"), grid=3),
    # When every child of a row is rejected, the next token is drawn from the residual as
    # it was before the last sibling's update. No uniforms are recorded, so only the
    # support of the final residual can tell.
    TreeEngineCase("next-token-before-the-last-update", TreeScheme.IID, 2, 1, 160,
                   ("tree-support",), sharpness=2.0, record_uniforms=False),
    TreeEngineCase("next-token-before-the-last-update", TreeScheme.WITHOUT_REPLACEMENT, 3, 1,
                   60, ("tree-support",), record_uniforms=False),
)


def _laws(context: tuple[int, ...], sharpness: float) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) at a context: p keeps its top 5 tokens (the rest have p = 0); q, over
    every token, is flatter than p below sharpness 1 and more peaked above it."""
    rng = np.random.default_rng([7, *context[-3:]])
    logits = rng.normal(0.0, 1.5, VOCAB)
    q = np.exp(sharpness * logits + rng.normal(0.0, 0.5, VOCAB))
    p = np.exp(logits)
    p[np.argsort(logits)[:-5]] = 0.0
    return ((p / p.sum()).astype(np.float32), (q / q.sum()).astype(np.float32))


def _uniforms(seed: int, key: int, count: int, grid: int) -> np.ndarray:
    values = np.random.default_rng([seed, key]).random(count)
    return (np.floor(values * 2.0**grid) / 2.0**grid).astype(np.float32)


def _draft(scheme: TreeScheme, q: np.ndarray, width: int, u: np.ndarray) -> list[int]:
    if scheme is TreeScheme.DETERMINISTIC:
        return [int(t) for t in np.argsort(-q, kind="stable")[:width]]
    tokens: list[int] = []
    for j in range(width):
        law = q.astype(np.float64).copy()
        if scheme is TreeScheme.WITHOUT_REPLACEMENT:
            law[tokens] = 0.0
        tokens.append(int(min(np.searchsorted(np.cumsum(law), u[j] * law.sum(), side="right"),
                              np.flatnonzero(law > 0)[-1])))
    return tokens


def _verify(
    scheme: TreeScheme, parents: tuple[int, ...], p: np.ndarray, q: np.ndarray,
    tokens: list[int], accept_u: np.ndarray, sample_u: np.ndarray,
) -> tuple[list[int], int]:
    verdict = verify_tree(scheme, parents, mx.array(p),
                          None if scheme is TreeScheme.DETERMINISTIC else mx.array(q),
                          tokens, mx.array(accept_u), mx.array(sample_u))
    count = int(np.array(verdict.num_accepted))
    return (np.array(verdict.accepted_nodes).astype(int).tolist()[:count],
            int(np.array(verdict.next_token)))


def _decide(
    bug: str | None, scheme: TreeScheme, parents: tuple[int, ...], children: list[list[int]],
    p: np.ndarray, q: np.ndarray, tokens: list[int], accept_u: np.ndarray,
    sample_u: np.ndarray,
) -> tuple[list[int], int, np.ndarray]:
    """(path, next token, the sample uniforms as read) under the engine's rule and bug."""
    if bug == "without-replacement-verified-as-iid" or bug == "top-n-verified-with-q":
        path, token = _verify(TreeScheme.IID, parents, p, q, tokens, accept_u, sample_u)
        return path, token, sample_u
    path, token = _verify(scheme, parents, p, q, tokens, accept_u, sample_u)
    if bug == "accept-coin-reused-for-draw":
        row = 0 if not path else path[-1] + 1
        if children[row]:
            read = sample_u.copy()
            read[len(path)] = accept_u[children[row][-1]]
            path, token = _verify(scheme, parents, p, q, tokens, accept_u, read)
            return path, token, read
    row = 0 if not path else path[-1] + 1
    if bug == "next-token-before-the-last-update" and len(children[row]) >= 2:
        # The last child made a placeholder: it leaves the residual as it was before it.
        stale = list(tokens)
        stale[children[row][-1]] = -1
        verdict = verify_tree(scheme, parents, mx.array(p),
                              None if scheme is TreeScheme.DETERMINISTIC else mx.array(q),
                              mx.array(stale), mx.array(accept_u), mx.array(sample_u))
        return path, int(np.array(verdict.next_token)), sample_u
    if bug == "zero-mass-accepted-at-coin-0" and not path:
        # Depth 1: the root's children, tested in order without the p > 0 guard.
        for child in children[0]:
            if p[0, tokens[child]] == 0 and accept_u[child] == 0:
                draw = sample_from_distribution(mx.array(p[child + 1]), float(sample_u[1]))
                return [child], int(np.array(draw)), sample_u
    return path, token, sample_u


def run_tree_engine(
    case: TreeEngineCase | None, rounds: int, *, seed: int = 0,
    scheme: TreeScheme | None = None, width: int = 2, depth: int = 2, grid: int = 24,
    sharpness: float = 0.5, record_uniforms: bool = True,
) -> str:
    """Run `rounds` tree rounds of the engine (correct when `case` is None); return its trace."""
    bug = case.bug if case else None
    scheme = case.scheme if case else (scheme or TreeScheme.IID)
    if case is not None:
        width, depth, grid, sharpness = case.width, case.depth, case.grid, case.sharpness
        record_uniforms = record_uniforms and case.record_uniforms
    parents = full_tree_parents(width, depth)
    size = len(parents)
    children: list[list[int]] = [[] for _ in range(size + 1)]
    for i, parent in enumerate(parents):
        children[parent + 1].append(i)
    out = io.StringIO()
    writer = specaccept_trace.TraceWriter(out, vocab_size=VOCAB,
                                          engine=f"broken tree engine: {bug or 'none'}")
    run = writer.start_run("0", prompt=PROMPT)
    history = list(PROMPT)
    for index in range(rounds):
        key = 0 if bug == "rounds-keyed-as-first" else index
        draft_u = _uniforms(seed, 3 * key, size, grid)
        accept_u = _uniforms(seed, 3 * key + 1, size, grid)
        sample_u = _uniforms(seed, 3 * key + 2, depth + 1, grid)
        contexts: list[tuple[int, ...]] = [tuple(history)]
        tokens: list[int] = [0] * size
        p_rows, q_rows = [], []
        for row in range(size + 1):
            p_row, q_row = _laws(contexts[row], sharpness)
            p_rows.append(p_row)
            q_rows.append(q_row)
            if children[row]:
                drawn = _draft(scheme, q_row, width, draft_u[children[row]])
                for child, token in zip(children[row], drawn, strict=True):
                    tokens[child] = token
            if row < size:
                contexts.append((*contexts[parents[row] + 1], tokens[row]))
        p, q = np.stack(p_rows), np.stack(q_rows)
        path, token, read = _decide(bug, scheme, parents, children, p, q, tokens, accept_u,
                                    sample_u)
        emitted = [*(tokens[n] for n in path), token]
        inner = [row for row in range(size + 1) if children[row]]
        run.write_tree_round(
            scheme=scheme, parents=parents, node_tokens=tokens,
            target=specaccept_trace.probs_block(p.tolist()),
            draft=specaccept_trace.probs_block(q[inner].tolist()), path=path, emitted=emitted,
            uniforms=({"accept": accept_u.tolist(), "sample": read.tolist()}
                      if record_uniforms else None))
        history += emitted
    return out.getvalue()


def run_tree_and_chain_engine(rounds: int, *, seed: int = 0, reuse: bool) -> str:
    """A run alternating a tree round (i.i.d., 2x1) and a chain round (k = 1, stochastic).

    Each round is decided correctly on the uniforms it records. With `reuse`, the chain
    round's uniforms are the ones the tree round before it read (its first root child's
    accept coin, then the draw after the path, column by column): the chain round
    conditions on coins the tree round already spent, a cross-kind re-read that only a
    fresh check over every record of the file sees.
    """
    parents = full_tree_parents(2, 1)
    children = [[0, 1], [], []]
    out = io.StringIO()
    writer = specaccept_trace.TraceWriter(out, vocab_size=VOCAB,
                                          engine=f"tree and chain engine: reuse={reuse}")
    run = writer.start_run("0", prompt=PROMPT)
    history = list(PROMPT)
    for index in range(rounds):
        draft_u = _uniforms(seed, 5 * index, 2, 24)
        accept_u = _uniforms(seed, 5 * index + 1, 2, 24)
        sample_u = _uniforms(seed, 5 * index + 2, 2, 24)
        root_p, root_q = _laws(tuple(history), 0.5)
        tokens = _draft(TreeScheme.IID, root_q, 2, draft_u)
        laws = [_laws((*history, t), 0.5) for t in tokens]
        p = np.stack([root_p, *(law[0] for law in laws)])
        q = np.stack([root_q, *(law[1] for law in laws)])
        path, token = _verify(TreeScheme.IID, parents, p, q, tokens, accept_u, sample_u)
        emitted = [*(tokens[n] for n in path), token]
        run.write_tree_round(
            scheme=TreeScheme.IID, parents=parents, node_tokens=tokens,
            target=specaccept_trace.probs_block(p.tolist()),
            draft=specaccept_trace.probs_block(q[[r for r in range(3) if children[r]]].tolist()),
            path=path, emitted=emitted,
            uniforms={"accept": accept_u.tolist(), "sample": sample_u.tolist()})
        history += emitted
        # The chain round: one draft from q at the context, then verify_tokenwise.
        chain_p0, chain_q0 = _laws(tuple(history), 0.5)
        draft = _draft(TreeScheme.IID, chain_q0, 1, _uniforms(seed, 5 * index + 3, 1, 24))[0]
        chain_p1, _ = _laws((*history, draft), 0.5)
        fresh = _uniforms(seed, 5 * index + 4, 4, 24).reshape(2, 2)
        spent = np.array([[accept_u[0], sample_u[len(path)]],
                          [accept_u[1], sample_u[0]]], dtype=np.float32)
        uniforms = spent if reuse else fresh
        verdict = verify_tokenwise(AcceptanceRule.STOCHASTIC, mx.array(np.stack(
            [chain_p0, chain_p1])), mx.array(chain_q0[None]), mx.array([draft]),
            mx.array(uniforms))
        kept = int(np.array(verdict.num_accepted))
        chain_emitted = [*[draft][:kept], int(np.array(verdict.next_token))]
        run.write_round(
            rule="stochastic", draft_tokens=[draft], emitted=chain_emitted,
            target=specaccept_trace.probs_block([chain_p0.tolist(), chain_p1.tolist()]),
            draft=specaccept_trace.probs_block([chain_q0.tolist()]),
            uniforms=uniforms.tolist())
        history += chain_emitted
    return out.getvalue()


def check_text(text: str) -> ConformanceReport:
    """`check_trace` on a trace held in a string."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
        handle.write(text)
    try:
        return check_trace(read_trace(handle.name))
    finally:
        os.unlink(handle.name)


def detection_round(
    case: TreeEngineCase, seed: int, most: int, *, record_uniforms: bool = True,
    checks: tuple[str, ...] | None = None,
) -> int | None:
    """The fewest rounds after which one of `checks` (default `case.caught_by`) fails;
    None within `most`.

    Found by bisection over the trace's prefixes: the zero-tolerance checks, once failed,
    stay failed as rounds are added (a divergence or violation stays; re-reads only grow);
    for a statistical check it is the first prefix the bisection finds failing."""
    lines = run_tree_engine(case, most, seed=seed,
                            record_uniforms=record_uniforms).splitlines(keepends=True)
    names = checks or case.caught_by

    def caught(rounds: int) -> bool:
        report = check_text("".join(lines[: 2 + rounds]))
        return any(c.verdict is Verdict.FAIL and c.name in names for c in report.checks)

    if not caught(most):
        return None
    low, high = 0, most  # not caught after `low` rounds, caught after `high`
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if caught(middle) else (middle, high)
    return high


def _main() -> None:
    seeds = 20
    print("Produced by:\n\n```sh\npython tests/broken_tree_engines.py\n```\n")
    without = sorted({c.bug for c in TREE_BUGS if not c.record_uniforms})
    print(f"Synthetic context laws over a vocabulary of {VOCAB} (tests/broken_tree_engines.py),"
          f" every trace with its uniforms but {', '.join(without)}'s (whose rounds replay and "
          f"fresh cannot judge); alpha = 1e-4 per check. Rounds to detection: the "
          f"fewest rounds after which a listed check fails, over seeds 0 to {seeds - 1}, "
          f"within four times the CI's rounds.\n")
    print("| bug | scheme | tree | CI's rounds | checks that fail (at the CI's rounds, seed 0) "
          "| rounds to detection: median, max | correct engine, same tree and rounds |")
    print("|---|---|---|---|---|---|---|")
    for case in TREE_BUGS:
        report = check_text(run_tree_engine(case, case.rounds))
        failed = [c.name for c in report.checks if c.verdict is Verdict.FAIL]
        found = [detection_round(case, seed, 4 * case.rounds) for seed in range(seeds)]
        caught = [r for r in found if r is not None]
        correct = check_text(run_tree_engine(None, case.rounds, scheme=case.scheme,
                                             width=case.width, depth=case.depth,
                                             grid=case.grid, sharpness=case.sharpness))
        print(f"| {case.bug} | {case.scheme.value} | {case.width}x{case.depth} | "
              f"{case.rounds} | {', '.join(failed) or 'none'} | "
              f"{int(np.median(caught))}, {max(caught)}"
              f"{f' ({seeds - len(caught)} seeds not caught)' if len(caught) < seeds else ''}"
              f" | {'conforms' if correct.passed else 'DOES NOT CONFORM'} |")
        sys.stdout.flush()
    case = next(c for c in TREE_BUGS if c.bug == "top-n-verified-with-q")
    print(f"\nWithout uniforms (replay and fresh do not run): {case.bug}, rounds to detection "
          f"by each statistical check alone, seeds 0 to {seeds - 1} (at most 400 rounds; found "
          "by bisection over the prefixes, so a failing prefix, not always the first).\n")
    print("| check | rounds to detection: median, max | CI's rounds (seed 0) |")
    print("|---|---|---|")
    for check, ci_rounds in (("tree-acceptance", 40), ("tree-law", 240)):
        found = [detection_round(case, seed, 400, record_uniforms=False, checks=(check,))
                 for seed in range(seeds)]
        caught = [r for r in found if r is not None]
        missed = f" ({seeds - len(caught)} seeds not caught)" if len(caught) < seeds else ""
        print(f"| {check} | {int(np.median(caught))}, {max(caught)}{missed} | {ci_rounds} |")
        sys.stdout.flush()


if __name__ == "__main__":
    _main()
