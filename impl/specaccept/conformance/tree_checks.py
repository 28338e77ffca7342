"""The six checks on a trace's tree rounds (``tree-round`` records of format version 2).

A tree round drafts a tree and `verify_tree` keeps one root path of it. Each check here is
the chain check's counterpart, read off the tree: replay redoes `verify_tree` on the
recorded uniforms; fresh counts uniforms read twice; support looks for tokens and
rejections of probability 0 under the scheme; acceptance scores each *tested row* (a row of the
accepted path that has children: did it accept one?) against the scheme's acceptance
probability; law runs the randomised PIT of every emitted token against p at its row;
rewind checks the cache offsets. ``docs/conformance_trees.md`` ("Tree engines") says what
each reads and where it stops.

Each check is a streaming state, as the chain checks are (`TreeState` holds the six):
``update`` reads one tree round and keeps only small reductions of it (counts, exact sums,
PIT bin counts, the first diagnosis in file order, the uniforms read), ``merge`` appends
the state of the piece that follows, and ``result`` gives the verdict; no tree round is
kept, so memory does not grow with the trace's tree rounds and a state can be saved.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol, TypeVar

import mlx.core as mx
import numpy as np
from scipy import stats

from specaccept.conformance.acceptance import drift_rejected
from specaccept.conformance.exact import ExactSum, State
from specaccept.conformance.fresh import UNIFORM_SPACING, coincidence_threshold
from specaccept.conformance.law import (
    LAW_SEED,
    ORDERINGS,
    LawCell,
    PitCounts,
    law_tests,
    merge_strata,
    pit_value,
    pooled_counts,
    sampler_stratum,
    stratum_cell,
)
from specaccept.conformance.replay import draw_near, envelope
from specaccept.conformance.report import CheckResult, Verdict
from specaccept.conformance.trace import Trace, TreeRound, unit_hash
from specaccept.core.tree import TreeScheme, verify_tree

__all__ = [
    "TreeAcceptanceState",
    "TreeFreshState",
    "TreeLawState",
    "TreeReplayState",
    "TreeRewindState",
    "TreeState",
    "TreeSupportState",
    "check_tree_acceptance",
    "check_tree_fresh",
    "check_tree_law",
    "check_tree_replay",
    "check_tree_rewind",
    "check_tree_rounds",
    "check_tree_support",
    "node_acceptance",
    "tree_read_uniforms",
]

_MIN_LAW_TOKENS = 10


def _where(round_: TreeRound) -> str:
    return _where_at(round_.run.id, round_.index, round_.line)


def _where_at(run_id: str, index: int, line: int) -> str:
    run = f"run {run_id!r} " if run_id else ""
    return f"{run}tree round {index} (line {line})"


class _TreeCheckState(Protocol):
    def update(self, round_: TreeRound) -> None: ...


_S = TypeVar("_S", bound=_TreeCheckState)


def _fed(state: _S, rounds: Iterable[TreeRound]) -> _S:
    """`state` fed `rounds` in order (a check over rounds already in memory)."""
    for round_ in rounds:
        state.update(round_)
    return state


def _proposal_after(scheme: str, q: np.ndarray, token: int, drawn: np.ndarray) -> np.ndarray:
    """The law a sibling with `token` was drafted from, as `verify_tree` reads it, in
    float64; its elder siblings' tokens are the mask `drawn`, so a child costs O(V)."""
    if scheme == "deterministic":
        one_hot = np.zeros(q.shape[0])
        one_hot[token] = 1.0
        return one_hot
    if scheme == "iid" or not drawn.any():
        return q
    kept = np.where(drawn, 0.0, q)
    mass = kept.sum()
    return kept / mass if mass > 0 else kept


def _walk(round_: TreeRound, row: int) -> tuple[list[float], list[np.ndarray], list[float]]:
    """At `row`: each child's acceptance probability given the earlier siblings were
    rejected, the residual r before each child (and after the last), in float64, and the
    mass each rejection left before it was normalised away."""
    kids = round_.children[row]
    tokens = [round_.node_tokens[c] for c in kids]
    q = (round_.draft_rows[row].astype(np.float64) if round_.draft_rows is not None
         else np.zeros(round_.target_rows.shape[1]))
    r = round_.target_rows[row].astype(np.float64)
    chances, residuals, masses = [], [r], []
    drawn = np.zeros(r.shape[0], dtype=bool)
    for token in tokens:
        q_j = _proposal_after(round_.scheme, q, token, drawn)
        drawn[token] = True
        if r[token] <= 0:
            chances.append(0.0)
        else:
            chances.append(1.0 if q_j[token] <= r[token] else float(r[token] / q_j[token]))
        excess = np.maximum(r - q_j, 0.0)
        mass = excess.sum()
        r = excess / mass if mass > 0 else r
        residuals.append(r)
        masses.append(float(mass))
    return chances, residuals, masses


def node_acceptance(round_: TreeRound, row: int) -> float:
    """P(row accepts one of its children | the path so far), under the claimed scheme.

    i.i.d.: ``1 - Π_j (1 - Σ min(r_j, q))`` over the W children, marginal over the drafts
    (`iid_siblings_acceptance`). Deterministic: ``Σ_children p(c)`` (the product of the
    one-hot rejections telescopes). Without replacement: the probability given the
    siblings actually drawn, ``1 - Π_j (1 - min(1, r_j(t_j) / q_j(t_j)))`` with q_j the
    renormalised law; the marginal over the draws sums V!/(V-W)! ordered sibling tuples.
    """
    if round_.scheme == "iid":
        assert round_.draft_rows is not None
        p = round_.target_rows[row].astype(np.float64)
        q = round_.draft_rows[row].astype(np.float64)
        r, miss = p, 1.0
        for _ in round_.children[row]:
            miss *= 1.0 - float(np.minimum(r, q).sum())
            excess = np.maximum(r - q, 0.0)
            mass = excess.sum()
            r = excess / mass if mass > 0 else r
        return min(1.0, max(0.0, 1.0 - miss))
    if round_.scheme == "deterministic":
        p = round_.target_rows[row].astype(np.float64)
        return min(1.0, float(sum(p[round_.node_tokens[c]] for c in round_.children[row])))
    chances, _, _ = _walk(round_, row)
    return 1.0 - math.prod(1.0 - a for a in chances)


def _tested_rows(round_: TreeRound) -> list[tuple[int, bool]]:
    """(row, accepted a child) for each row of the path that has children."""
    rows = round_.path_rows
    return [(row, d < len(round_.path)) for d, row in enumerate(rows)
            if round_.children[row]]


# --- replay ------------------------------------------------------------------------------


def _verify(round_: TreeRound, scheme: TreeScheme) -> tuple[list[int], int]:
    """(the accepted nodes, the next token) of `verify_tree` under `scheme`."""
    draft = None
    if scheme is not TreeScheme.DETERMINISTIC:
        assert round_.draft_rows is not None
        draft = mx.array(round_.draft_rows)
    assert round_.accept_uniforms is not None and round_.sample_uniforms is not None
    verdict = verify_tree(scheme, round_.parents, mx.array(round_.target_rows), draft,
                          list(round_.node_tokens), mx.array(round_.accept_uniforms),
                          mx.array(round_.sample_uniforms))
    count = int(np.array(verdict.num_accepted))
    nodes = np.array(verdict.accepted_nodes).astype(int).tolist()[:count]
    return nodes, int(np.array(verdict.next_token))


def _agrees(round_: TreeRound, nodes: list[int], token: int) -> bool:
    emitted = [*(round_.node_tokens[n] for n in nodes), token]
    return list(round_.path) == nodes and list(round_.emitted) == emitted[: len(round_.emitted)]


def draw_near_boundary(round_: TreeRound, nodes: list[int]) -> bool:
    """Whether a divergent round keeps the spec's path and the engine's draw after it lies
    within float32 summation of the spec's: u times the law's total within the rounding any
    order of float32 sums may put on its prefix sums (`envelope`, widened by each sibling
    rejection's renormalisation, whose error grows as the residual's mass shrinks).

    Tree rows are the probabilities the engine used, so replay stays exact; this only tells
    an engine whose sums run in another order (a blocked GPU scan, say) from one that draws
    from another law.
    """
    if (list(round_.path) != nodes or round_.next_token is None
            or round_.sample_uniforms is None):
        return False
    row = round_.path_rows[len(round_.path)]
    law = round_.target_rows[row].astype(np.float64)
    sums, smallest = 1, 1.0
    if round_.children[row]:
        _, residuals, masses = _walk(round_, row)
        law, sums = residuals[-1], 1 + len(masses)
        smallest = min([smallest, *masses])
    if smallest <= 0:
        return False
    window = envelope(law.shape[0]) * sums / smallest * float(law.sum())
    return draw_near(law, float(round_.sample_uniforms[len(round_.path)]),
                      round_.next_token, window)


def _replay_diagnosis(round_: TreeRound, nodes: list[int], token: int) -> str:
    where = _where(round_)
    common = 0
    while (common < min(len(nodes), len(round_.path))
           and nodes[common] == round_.path[common]):
        common += 1
    row = round_.path_rows[common]
    label = "the root" if row == 0 else f"node {row - 1}"
    spec = (f"accepts node {nodes[common]} (token {round_.node_tokens[nodes[common]]})"
            if common < len(nodes) else f"accepts no child and draws {token}")
    engine = (f"accepts node {round_.path[common]} (token "
              f"{round_.node_tokens[round_.path[common]]})" if common < len(round_.path)
              else f"accepts no child and emits {round_.next_token}")
    text = f"{where}, depth {common}, at {label}: the spec {spec}, the engine {engine}"
    engine_token = (round_.next_token if common == len(round_.path)
                    else round_.node_tokens[round_.path[common]])
    if engine_token is not None and round_.target_rows[row][engine_token] <= 0:
        text += f"; token {engine_token} has p = 0 there"
    for other in TreeScheme:
        if other.value == round_.scheme or (other is not TreeScheme.DETERMINISTIC
                                            and round_.draft_rows is None):
            continue
        try:
            other_nodes, other_token = _verify(round_, other)
        except ValueError:  # repeated siblings under a scheme that needs distinct ones
            continue
        if _agrees(round_, other_nodes, other_token):
            text += (f"; the engine's round is verify_tree's under the {other.value} scheme: "
                     f"siblings drafted {round_.scheme} were verified as {other.value}")
            break
    return text


@dataclass
class TreeReplayState(State):
    """The tree replay's state: tree rounds seen, replayed (those with uniforms), divergent,
    and the first divergence's diagnosis in file order."""

    rounds: int = 0
    replayed: int = 0
    divergent: int = 0
    first: str = ""
    near_boundary: int = 0
    """Divergent rounds that keep the spec's path and whose draw after it lands within
    float32 summation of a boundary (`draw_near_boundary`): an engine that sums the law in
    another order than the spec's, not one that draws from another law."""

    def update(self, round_: TreeRound) -> None:
        self.rounds += 1
        if round_.accept_uniforms is None:
            return
        self.replayed += 1
        nodes, token = _verify(round_, TreeScheme(round_.scheme))
        if not _agrees(round_, nodes, token):
            self.divergent += 1
            self.first = self.first or _replay_diagnosis(round_, nodes, token)
            self.near_boundary += draw_near_boundary(round_, nodes)

    def merge(self, other: TreeReplayState) -> None:
        self.rounds += other.rounds
        self.replayed += other.replayed
        self.divergent += other.divergent
        self.first = self.first or other.first
        self.near_boundary += other.near_boundary

    def result(self) -> CheckResult:
        """Each tree round with uniforms equals `verify_tree` on them; zero tolerance."""
        name, threshold = "tree-replay", "0 divergent tree rounds"
        if not self.replayed:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "no tree round records its uniforms")
        detail = self.first or (f"{self.rounds - self.replayed} tree rounds without uniforms"
                                if self.replayed < self.rounds else "")
        if self.near_boundary:
            detail += (f"; {self.near_boundary} of the {self.divergent} divergent rounds keep "
                       "the spec's path and draw after it within float32 summation of a "
                       "boundary: the engine's prefix sums are not the spec's left-to-right "
                       "float32 order (spec/float32_operation_order.md)")
        return CheckResult(
            name, Verdict.FAIL if self.divergent else Verdict.PASS,
            f"divergent tree rounds = {self.divergent} of {self.replayed}", threshold, detail)


def check_tree_replay(rounds: Iterable[TreeRound]) -> CheckResult:
    """Each tree round with uniforms equals `verify_tree` on them; zero tolerance."""
    return _fed(TreeReplayState(), rounds).result()


# --- fresh -------------------------------------------------------------------------------


def tree_read_uniforms(round_: TreeRound) -> list[float]:
    """The recorded uniforms the round's outcome read: at each row of the path, the accept
    tests of its children up to the accepted one, then the draw after the path."""
    if round_.accept_uniforms is None or round_.sample_uniforms is None:
        return []
    values: list[float] = []
    for d, row in enumerate(round_.path_rows):
        for child in round_.children[row]:
            values.append(float(round_.accept_uniforms[child]))
            if d < len(round_.path) and child == round_.path[d]:
                break
    if round_.next_token is not None:
        values.append(float(round_.sample_uniforms[len(round_.path)]))
    return values


def _binary_digits(value: float) -> int:
    return Fraction(value).denominator.bit_length() - 1


def _decimal_digits(value: float) -> int:
    # The reader holds uniforms as float32: a decimal counts in float32's shortest form.
    return len(np.format_float_positional(np.float32(value), unique=True, trim="-")
               .partition(".")[2])


@dataclass
class TreeFreshState(State):
    """The tree fresh check's state over the tree rounds of a piece, in file order.

    `values` maps each value read to (the piece's ordinal of its first read, the ordinal of
    the round that read it): enough to count, when an earlier piece is merged in front, the
    reads that become re-reads and the growth of the bound, exactly (`merge`).
    """

    reads: int = 0
    rereads: int = 0
    earlier_count: int = 0
    """Per read, the count of distinct values read before it (in its round or an earlier
    one), summed: mu is this times the spacing."""
    values: dict[float, tuple[int, int]] = field(default_factory=dict)
    table: list[tuple[int, int, str]] = field(default_factory=list)
    """The (round index, line, run id) of each tree round with uniforms, by ordinal."""
    first: tuple[int, float, int, int] | None = None
    """Where the first re-read is (its read ordinal, the value, the ordinal of its round and
    of the round that read the value first)."""
    max_binary: int = 0
    max_decimals: int = 0

    def update(self, round_: TreeRound) -> None:
        if round_.accept_uniforms is not None:
            self.read(tree_read_uniforms(round_), round_.index, round_.line, round_.run.id)

    def read(self, values: Iterable[float], index: int, line: int, run_id: str) -> None:
        """The uniforms one tree round read, in the order it read them."""
        ordinal = len(self.table)
        self.table.append((index, line, run_id))
        for value in values:
            self.earlier_count += len(self.values)
            if value in self.values:
                self.rereads += 1
                if self.first is None:
                    self.first = (self.reads, value, ordinal, self.values[value][1])
            else:
                self.values[value] = (self.reads, ordinal)
            self.reads += 1
            self.max_binary = max(self.max_binary, _binary_digits(value))
            self.max_decimals = max(self.max_decimals, _decimal_digits(value))

    def merge(self, other: TreeFreshState) -> None:
        """Append the next piece's state: its first read of a value this piece read is a
        re-read, and each of its reads had this piece's values before it too, less those it
        had read itself."""
        reads_before, rounds_before = self.reads, len(self.table)
        shared = [(read, value, ordinal) for value, (read, ordinal) in other.values.items()
                  if value in self.values]
        self.earlier_count += (other.earlier_count + other.reads * len(self.values)
                               - sum(other.reads - 1 - read for read, _, _ in shared))
        self.rereads += other.rereads + len(shared)
        if self.first is None:
            candidates = [(read, value, ordinal, -1) for read, value, ordinal in shared]
            if other.first is not None:
                candidates.append(other.first)
            if candidates:
                read, value, ordinal, earlier = min(candidates, key=lambda c: c[0])
                earlier = (self.values[value][1] if earlier < 0
                           else earlier + rounds_before)
                self.first = (read + reads_before, value, ordinal + rounds_before, earlier)
        for value, (read, ordinal) in other.values.items():
            if value not in self.values:
                self.values[value] = (read + reads_before, ordinal + rounds_before)
        self.table += other.table
        self.reads += other.reads
        self.max_binary = max(self.max_binary, other.max_binary)
        self.max_decimals = max(self.max_decimals, other.max_decimals)

    def spacing(self) -> float:
        """`uniform_spacing` of every value read."""
        if not self.reads:
            return UNIFORM_SPACING
        return max(UNIFORM_SPACING, 2.0**-self.max_binary, 10.0**-self.max_decimals)

    def result(self, alpha_level: float) -> CheckResult:
        """No uniform a tree round read equals one read before it, in that round or an
        earlier.

        The chain's bound: a fresh uniform on a grid of spacing s hits one of the m values
        read before it with probability at most m s; with mu the sum of those bounds,
        P(D >= c) <= mu^c / c!, and the check fails at the least c with that bound <= alpha.
        """
        name = "tree-fresh"
        if not self.table:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", "no re-read uniforms",
                               "no tree round records its uniforms")
        spacing = self.spacing()
        mean_bound = self.earlier_count * spacing
        critical = coincidence_threshold(mean_bound, alpha_level)
        first = ""
        if self.first is not None and self.rereads >= critical:
            _, value, ordinal, earlier = self.first
            index, line, run_id = self.table[ordinal]
            e_index, e_line, _ = self.table[earlier]
            first = (f"{_where_at(run_id, index, line)} reads u = {value!r}, which "
                     + ("it already read" if earlier == ordinal else
                        f"tree round {e_index} (line {e_line}) already read")
                     + ": every accept test and draw reads its own uniform")
        return CheckResult(
            name, Verdict.FAIL if self.rereads >= critical else Verdict.PASS,
            f"re-read uniforms D = {self.rereads} of {self.reads} read "
            f"(mu = {mean_bound:.3g} at spacing 2^{math.log2(spacing):.0f})",
            f"D < {critical} (P(D >= {critical}) <= mu^{critical}/{critical}! <= "
            f"{alpha_level:g})",
            first)


def check_tree_fresh(rounds: Iterable[TreeRound], alpha_level: float) -> CheckResult:
    """No uniform a tree round read equals one read before it, in that round or an earlier."""
    return _fed(TreeFreshState(), rounds).result(alpha_level)


# --- support -----------------------------------------------------------------------------


def _support_violation(round_: TreeRound) -> str:
    where = _where(round_)
    rows = round_.path_rows
    for d, token in enumerate(round_.emitted):
        if round_.target_rows[rows[d]][token] <= 0:
            return f"{where}, depth {d}: emitted token {token} has p = 0 at its row"
    for d, row in enumerate(rows):
        kids = round_.children[row]
        if not kids:
            continue
        p = round_.target_rows[row]
        first = kids[0]
        token = round_.node_tokens[first]
        first_rejected = not (d < len(round_.path) and round_.path[d] == first)
        if first_rejected:
            if round_.scheme == "deterministic" and p[token] >= 1:
                return (f"{where}, depth {d}: candidate {token} was rejected though p = 1: "
                        "its acceptance probability is 1")
            if round_.scheme != "deterministic":
                assert round_.draft_rows is not None
                q = round_.draft_rows[row]
                if p[token] > 0 and q[token] <= p[token]:
                    return (f"{where}, depth {d}: the first child, token {token}, was rejected "
                            f"though p = {p[token]:.6g} >= q = {q[token]:.6g}: its acceptance "
                            "probability is 1")
        if d < len(round_.path):
            kept = kids.index(round_.path[d])
            token = round_.node_tokens[round_.path[d]]
            removed_by = _residual_removal(round_, row, token, kept)
            if removed_by is not None:
                return (f"{where}, depth {d}: accepted child {kept} (token {token}) has no "
                        f"mass in the residual after rejecting child {removed_by}: the "
                        "accept test needs r(x) > 0")
        if d != len(round_.path) or round_.next_token is None:
            continue
        # No child accepted: the next token comes from the residual after every child.
        nxt = round_.next_token
        tokens = [round_.node_tokens[c] for c in kids]
        if round_.scheme == "deterministic":
            if nxt in tokens and p[nxt] < 1:
                return (f"{where}, depth {d}: the next token {nxt} is a rejected candidate; "
                        "rejecting a one-hot proposal removes its token from the residual")
        else:
            assert round_.draft_rows is not None
            q = round_.draft_rows[row]
            if (np.maximum(p.astype(np.float64) - q, 0).sum() > 0 and p[nxt] <= q[nxt]):
                return (f"{where}, depth {d}: the next token {nxt} has p = {p[nxt]:.6g} <= "
                        f"q = {q[nxt]:.6g}: outside the residual's support after rejecting "
                        "the first child")
        removed_by = _residual_removal(round_, row, nxt, len(kids))
        if removed_by is not None:
            return (f"{where}, depth {d}: the next token {nxt} has no mass in the residual "
                    f"after the {len(kids)} rejected children: rejecting child {removed_by} "
                    f"(token {tokens[removed_by]}) removed it, and the residual only loses "
                    "tokens (drawn before the last updates, as from an earlier residual?)")
    return ""


_CLEAR_MARGIN = 1e-4
"""A residual step removes token x when q_j(x) exceeds r_j(x) by this relative margin (and
the step's excess has mass): far beyond float32's rounding of r_j, so an engine computing
the residuals in float32 removes x too, and a token once removed never returns."""


def _residual_removal(round_: TreeRound, row: int, token: int, tested: int) -> int | None:
    """The first of the row's first `tested` children whose rejection removed `token` from
    the residual, clearly (`_CLEAR_MARGIN`); None if the residual after them keeps it.

    Zero tolerance: with p, q and (but under i.i.d.) the recorded siblings, the residual
    after each rejection is determined, and a token outside it cannot follow them."""
    kids = round_.children[row]
    tokens = [round_.node_tokens[c] for c in kids]
    q = (round_.draft_rows[row].astype(np.float64) if round_.draft_rows is not None
         else np.zeros(round_.target_rows.shape[1]))
    r = round_.target_rows[row].astype(np.float64)
    drawn = np.zeros(r.shape[0], dtype=bool)
    for j in range(tested):
        q_j = _proposal_after(round_.scheme, q, tokens[j], drawn)
        excess = np.maximum(r - q_j, 0.0)
        mass = excess.sum()
        if mass > _CLEAR_MARGIN and q_j[token] - r[token] > _CLEAR_MARGIN * max(
                q_j[token], r[token]):
            return j
        r = excess / mass if mass > 0 else r
        drawn[tokens[j]] = True
    return None


@dataclass
class TreeSupportState(State):
    """The tree support check's state: rounds, tokens, violations, the first in file order."""

    rounds: int = 0
    tokens: int = 0
    violations: int = 0
    first: str = ""

    def update(self, round_: TreeRound) -> None:
        self.rounds += 1
        self.tokens += len(round_.emitted)
        violation = _support_violation(round_)
        if violation:
            self.violations += 1
            self.first = self.first or violation

    def merge(self, other: TreeSupportState) -> None:
        self.rounds += other.rounds
        self.tokens += other.tokens
        self.violations += other.violations
        self.first = self.first or other.first

    def result(self) -> CheckResult:
        """No emitted token with p = 0 at its row, no certain acceptance rejected, no next
        token outside the residual's support; zero tolerance."""
        return CheckResult(
            "tree-support", Verdict.FAIL if self.violations else Verdict.PASS,
            f"violations = {self.violations} of {self.rounds} tree rounds "
            f"({self.tokens} tokens)", "0 violations", self.first)


def check_tree_support(rounds: Iterable[TreeRound]) -> CheckResult:
    """No emitted token with p = 0 at its row, no certain acceptance rejected, no next token
    outside the residual's support; zero tolerance."""
    return _fed(TreeSupportState(), rounds).result()


# --- acceptance --------------------------------------------------------------------------


@dataclass
class TreeAcceptanceState(State):
    """The tree acceptance check's state: the tested rows, those that accepted, the exact sums
    of their acceptance probabilities a and of a (1 - a), the outcomes against a certain a."""

    tested: int = 0
    accepted: int = 0
    chances: ExactSum = field(default_factory=ExactSum)
    variance: ExactSum = field(default_factory=ExactSum)
    impossible: int = 0
    first: str = ""
    schemes: set[str] = field(default_factory=set)

    def update(self, round_: TreeRound) -> None:
        self.schemes.add(round_.scheme)
        for row, accepted in _tested_rows(round_):
            a = node_acceptance(round_, row)
            self.tested += 1
            self.accepted += accepted
            self.chances.add(a)
            self.variance.add(a * (1 - a))
            if (a <= 1e-12 and accepted) or (a >= 1 - 1e-12 and not accepted):
                self.impossible += 1
                self.first = self.first or (
                    f"{_where(round_)}, row {row}: "
                    f"{'accepted' if accepted else 'rejected'} a child though "
                    f"the {round_.scheme} scheme's acceptance there is {a:.6g}")

    def merge(self, other: TreeAcceptanceState) -> None:
        self.tested += other.tested
        self.accepted += other.accepted
        self.chances.merge(other.chances)
        self.variance.merge(other.variance)
        self.impossible += other.impossible
        self.first = self.first or other.first
        self.schemes |= other.schemes

    def result(self, alpha_level: float) -> CheckResult:
        """Each tested row's outcome against `node_acceptance`, as one martingale z-score.

        Given everything before it, a tested row accepts a child with probability a, so
        Σ (accepted - a) is a martingale with variance Σ a (1 - a); an outcome against a
        certain a (0 or 1) fails the check at once.
        """
        name = "tree-acceptance"
        critical = float(stats.norm.isf(alpha_level / 2))
        threshold = f"|z| <= {critical:.3f}, 0 outcomes against a certain probability"
        if not self.tested:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold, "no tested row")
        variance = self.variance.value
        drift = math.fsum([float(self.accepted), *(-x for x in self.chances.partials)])
        z = drift / math.sqrt(variance) if variance > 0 else 0.0
        # Below a variance of 25 Bennett's bound decides, as for the chain's acceptance.
        failed = drift_rejected(drift, variance, 1.0, critical, alpha_level / 2) or (
            self.impossible > 0)
        detail = self.first or (f"z = {z:.2f}: the rows accept {'more' if z > 0 else 'less'} "
                                "often than the claimed scheme allows" if failed else "")
        if "without-replacement" in self.schemes:
            detail = "; ".join(filter(None, [detail, "without-replacement rows are scored "
                                             "given the siblings drawn"]))
        return CheckResult(
            name, Verdict.FAIL if failed else Verdict.PASS,
            f"z = {z:.3f} (accepted {self.accepted} of {self.tested} tested rows, "
            f"closed form {self.chances.value:.1f})", threshold, detail)


def check_tree_acceptance(rounds: Iterable[TreeRound], alpha_level: float) -> CheckResult:
    """Each tested row's outcome against `node_acceptance`, as one martingale z-score."""
    return _fed(TreeAcceptanceState(), rounds).result(alpha_level)


# --- law ---------------------------------------------------------------------------------


def tree_law_jitter(round_: TreeRound, depth: int) -> float:
    """The PIT's jitter of the token a tree round emits at `depth`: fixed by the seed and the
    token's identity (run, round, depth), as the chain law's is, so a piece checked anywhere
    draws the same one."""
    return unit_hash(LAW_SEED, round_.run.id, round_.index, depth)


@dataclass
class TreeLawState(State):
    """The tree law check's state: per sampler setting of the target (`sampler_stratum`, as
    the chain law keeps them), the emitted tokens' PIT values counted into bins under each
    ordering (`PitCounts`: the bins of every bin count, chosen at the end)."""

    strata: dict[str, LawCell] = field(default_factory=dict)

    def update(self, round_: TreeRound) -> None:
        cell = stratum_cell(self.strata, sampler_stratum(round_.run.target_sampler), LawCell)
        for d, token in enumerate(round_.emitted):
            row = round_.path_rows[d]
            p = round_.target_rows[row].astype(np.float64)
            q = (round_.draft_rows[row].astype(np.float64) if round_.draft_rows is not None
                 and round_.children[row] else None)
            jitter = tree_law_jitter(round_, d)
            for ordering in ORDERINGS:
                key = p
                if ordering == "q/p" and q is not None:
                    with np.errstate(divide="ignore", invalid="ignore"):
                        key = np.where(p > 0, q / np.where(p > 0, p, 1), np.inf)
                cell.pit[ordering].add(pit_value(p, key, token, jitter))

    def merge(self, other: TreeLawState) -> None:
        merge_strata(self.strata, other.strata)

    def pooled(self, ordering: str) -> PitCounts:
        """Every stratum's PIT counts under `ordering` together."""
        return pooled_counts(cell.pit[ordering] for cell in self.strata.values())

    def result(self, alpha_level: float) -> CheckResult:
        """Every emitted token against p at its row: the chain's randomised PIT, chi-square
        on bins, in two orderings (by p, and by q/p where the row has a drafter law), pooled
        and summed over sampler settings, Bonferroni."""
        name = "tree-law"
        n = self.pooled("p").n
        if n < _MIN_LAW_TOKENS:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", f"p-value >= {alpha_level / 2:g}",
                               f"needs at least {_MIN_LAW_TOKENS} tokens, the tree rounds "
                               f"emitted {n}")
        tests = law_tests({key: cell.pit for key, cell in self.strata.items()})
        failed = tests.min_p_value < alpha_level / tests.tests
        return CheckResult(
            name, Verdict.FAIL if failed else Verdict.PASS,
            f"{tests.statistic()}; min p-value = {tests.min_p_value:.3g} over {n} tokens",
            tests.threshold(alpha_level),
            f"the emitted tokens are not distributed as the target's p{tests.where()}"
            if failed else "")


def check_tree_law(rounds: Iterable[TreeRound], alpha_level: float) -> CheckResult:
    """Every emitted token against p at its row: randomised PIT, chi-square on bins."""
    return _fed(TreeLawState(), rounds).result(alpha_level)


# --- rewind ------------------------------------------------------------------------------


def _rewind_problems(round_: TreeRound) -> list[str]:
    cache = round_.cache
    assert cache is not None and round_.run.prompt_length is not None
    start = round_.run.prompt_length + round_.position - 1
    end = start + len(round_.emitted)
    problems = []
    if cache["target_before"] != start:
        problems.append(f"target cache holds {cache['target_before']} entries at the start, "
                        f"{start} tokens precede the current token")
    if "draft_before" in cache and (cache["draft_before"] > start
                                    or cache["draft_before"] + cache["draft_fed"] != start + 1):
        problems.append(f"drafter cache holds {cache['draft_before']} entries and is fed "
                        f"{cache['draft_fed']}: it ends "
                        f"{cache['draft_before'] + cache['draft_fed'] - start - 1:+d} entries "
                        "off the current token")
    if not round_.stopped:
        after = cache.get("target_after")
        if after is not None and after != end:
            problems.append(f"target cache keeps {after} entries of the accepted path's row, "
                            f"{end} tokens precede the next current token")
        after = cache.get("draft_after")
        if after is not None and not end - 1 <= after <= end:
            problems.append(f"drafter cache keeps {after} entries; it must keep {end} (or "
                            f"{end - 1}, owing the last path token)")
    return problems


@dataclass
class TreeRewindState(State):
    """The tree rewind check's state: rounds with offsets, those off the invariant, the
    first in file order."""

    checked: int = 0
    bad: int = 0
    first: str = ""

    def update(self, round_: TreeRound) -> None:
        if round_.cache is None or round_.run.prompt_length is None:
            return
        self.checked += 1
        problems = _rewind_problems(round_)
        if problems:
            self.bad += 1
            self.first = self.first or f"{_where(round_)}: " + "; ".join(problems)

    def merge(self, other: TreeRewindState) -> None:
        self.checked += other.checked
        self.bad += other.bad
        self.first = self.first or other.first

    def result(self) -> CheckResult:
        """The rewind invariant on every tree round with offsets: the kept row of each cache
        ends where the next round's current token starts; zero tolerance."""
        name, threshold = "tree-rewind", "0 tree rounds off the invariant"
        if not self.checked:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "no tree round records cache offsets")
        return CheckResult(name, Verdict.FAIL if self.bad else Verdict.PASS,
                           f"tree rounds off = {self.bad} of {self.checked}", threshold,
                           self.first)


def check_tree_rewind(rounds: Iterable[TreeRound]) -> CheckResult:
    """The rewind invariant on every tree round with offsets; zero tolerance."""
    return _fed(TreeRewindState(), rounds).result()


# --- all six -----------------------------------------------------------------------------


@dataclass
class TreeState(State):
    """The six tree checks' states over the tree rounds of a trace, or of a piece of one,
    and the report's totals (tree rounds, tested rows, emitted tokens)."""

    rounds: int = 0
    tested: int = 0
    tokens: int = 0
    replay: TreeReplayState = field(default_factory=TreeReplayState)
    fresh: TreeFreshState = field(default_factory=TreeFreshState)
    support: TreeSupportState = field(default_factory=TreeSupportState)
    acceptance: TreeAcceptanceState = field(default_factory=TreeAcceptanceState)
    law: TreeLawState = field(default_factory=TreeLawState)
    rewind: TreeRewindState = field(default_factory=TreeRewindState)

    def update(self, round_: TreeRound) -> None:
        """One tree round, in file order; nothing of it is kept but the reductions."""
        self.rounds += 1
        self.tested += len(_tested_rows(round_))
        self.tokens += len(round_.emitted)
        checks: tuple[_TreeCheckState, ...] = (self.replay, self.fresh, self.support,
                                                self.acceptance, self.law, self.rewind)
        for check in checks:
            check.update(round_)

    def merge(self, other: TreeState) -> None:
        """Append the state of the next piece."""
        self.rounds += other.rounds
        self.tested += other.tested
        self.tokens += other.tokens
        self.replay.merge(other.replay)
        self.fresh.merge(other.fresh)
        self.support.merge(other.support)
        self.acceptance.merge(other.acceptance)
        self.law.merge(other.law)
        self.rewind.merge(other.rewind)

    def results(self, alpha: float) -> list[CheckResult]:
        """The six tree checks' results; none when no tree round was read."""
        if not self.rounds:
            return []
        return [self.replay.result(), self.fresh.result(alpha), self.support.result(),
                self.acceptance.result(alpha), self.law.result(alpha), self.rewind.result()]


def check_tree_rounds(trace: Trace, alpha: float) -> list[CheckResult]:
    """The six tree checks on the trace's tree rounds; none when it has none."""
    state = TreeState()
    for round_ in trace.tree_rounds:
        state.update(round_)
    return state.results(alpha)
