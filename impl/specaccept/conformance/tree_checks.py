"""The six checks on a trace's tree rounds (``tree-round`` records of format version 2).

A tree round drafts a tree and `verify_tree` keeps one root path of it. Each check here is
the chain check's counterpart, read off the tree: replay redoes `verify_tree` on the
recorded uniforms; fresh counts uniforms read twice; support looks for tokens and
rejections of probability 0 under the scheme; acceptance scores each *tested row* (a row of the
accepted path that has children: did it accept one?) against the scheme's acceptance
probability; law runs the randomised PIT of every emitted token against p at its row;
rewind checks the cache offsets. ``docs/conformance_trees.md`` ("Tree engines") says what
each reads and where it stops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
from scipy import stats

from specaccept.conformance.fresh import coincidence_threshold, uniform_spacing
from specaccept.conformance.law import LAW_SEED, pit_bounds
from specaccept.conformance.report import CheckResult, Verdict
from specaccept.conformance.trace import Trace, TreeRound
from specaccept.core.tree import TreeScheme, verify_tree

__all__ = [
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
    run = f"run {round_.run.id!r} " if round_.run.id else ""
    return f"{run}tree round {round_.index} (line {round_.line})"


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


def _walk(round_: TreeRound, row: int) -> tuple[list[float], list[np.ndarray]]:
    """At `row`: each child's acceptance probability given the earlier siblings were
    rejected, and the residual r before each child (and after the last), in float64."""
    kids = round_.children[row]
    tokens = [round_.node_tokens[c] for c in kids]
    q = (round_.draft_rows[row].astype(np.float64) if round_.draft_rows is not None
         else np.zeros(round_.target_rows.shape[1]))
    r = round_.target_rows[row].astype(np.float64)
    chances, residuals = [], [r]
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
    return chances, residuals


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
    chances, _ = _walk(round_, row)
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


def check_tree_replay(rounds: Sequence[TreeRound]) -> CheckResult:
    """Each tree round with uniforms equals `verify_tree` on them; zero tolerance."""
    name, threshold = "tree-replay", "0 divergent tree rounds"
    replayed = [r for r in rounds if r.accept_uniforms is not None]
    if not replayed:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                           "no tree round records its uniforms")
    divergent, first = 0, ""
    for round_ in replayed:
        nodes, token = _verify(round_, TreeScheme(round_.scheme))
        if not _agrees(round_, nodes, token):
            divergent += 1
            first = first or _replay_diagnosis(round_, nodes, token)
    return CheckResult(
        name, Verdict.FAIL if divergent else Verdict.PASS,
        f"divergent tree rounds = {divergent} of {len(replayed)}", threshold,
        first or (f"{len(rounds) - len(replayed)} tree rounds without uniforms"
                  if len(replayed) < len(rounds) else ""))


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


def check_tree_fresh(rounds: Sequence[TreeRound], alpha_level: float) -> CheckResult:
    """No uniform a tree round read equals one read before it, in that round or an earlier.

    The chain's bound: a fresh uniform on a grid of spacing s hits one of the m values
    read before it with probability at most m s; with mu the sum of those bounds,
    P(D >= c) <= mu^c / c!, and the check fails at the least c with that bound <= alpha.
    """
    name = "tree-fresh"
    read = [(r, tree_read_uniforms(r)) for r in rounds if r.accept_uniforms is not None]
    if not read:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", "no re-read uniforms",
                           "no tree round records its uniforms")
    spacing = uniform_spacing([v for _, values in read for v in values])
    earlier: dict[float, TreeRound] = {}
    rereads, mean_bound, first = 0, 0.0, ""
    for round_, values in read:
        for value in values:
            mean_bound += len(earlier) * spacing
            if value in earlier:
                rereads += 1
                before = earlier[value]
                first = first or (
                    f"{_where(round_)} reads u = {value!r}, which "
                    + ("it already read" if before is round_ else
                       f"tree round {before.index} (line {before.line}) already read")
                    + ": every accept test and draw reads its own uniform")
            earlier.setdefault(value, round_)
    critical = coincidence_threshold(mean_bound, alpha_level)
    return CheckResult(
        name, Verdict.FAIL if rereads >= critical else Verdict.PASS,
        f"re-read uniforms D = {rereads} of {sum(len(v) for _, v in read)} read "
        f"(mu = {mean_bound:.3g} at spacing 2^{math.log2(spacing):.0f})",
        f"D < {critical} (P(D >= {critical}) <= mu^{critical}/{critical}! <= {alpha_level:g})",
        first if rereads >= critical else "")


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


def check_tree_support(rounds: Sequence[TreeRound]) -> CheckResult:
    """No emitted token with p = 0 at its row, no certain acceptance rejected, no next token
    outside the residual's support; zero tolerance."""
    violations = [v for v in map(_support_violation, rounds) if v]
    tokens = sum(len(r.emitted) for r in rounds)
    return CheckResult(
        "tree-support", Verdict.FAIL if violations else Verdict.PASS,
        f"violations = {len(violations)} of {len(rounds)} tree rounds ({tokens} tokens)",
        "0 violations", violations[0] if violations else "")


# --- acceptance --------------------------------------------------------------------------


def check_tree_acceptance(rounds: Sequence[TreeRound], alpha_level: float) -> CheckResult:
    """Each tested row's outcome against `node_acceptance`, as one martingale z-score.

    Given everything before it, a tested row accepts a child with probability a, so
    Σ (accepted - a) is a martingale with variance Σ a (1 - a); an outcome against a
    certain a (0 or 1) fails the check at once.
    """
    name = "tree-acceptance"
    critical = float(stats.norm.isf(alpha_level / 2))
    threshold = f"|z| <= {critical:.3f}, 0 outcomes against a certain probability"
    outcomes: list[float] = []
    chances: list[float] = []
    impossible, first = 0, ""
    for round_ in rounds:
        for row, accepted in _tested_rows(round_):
            a = node_acceptance(round_, row)
            outcomes.append(float(accepted))
            chances.append(a)
            if (a <= 1e-12 and accepted) or (a >= 1 - 1e-12 and not accepted):
                impossible += 1
                first = first or (f"{_where(round_)}, row {row}: "
                                  f"{'accepted' if accepted else 'rejected'} a child though "
                                  f"the {round_.scheme} scheme's acceptance there is {a:.6g}")
    if not outcomes:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold, "no tested row")
    accepted_array, chance_array = np.array(outcomes), np.array(chances)
    variance = float(np.sum(chance_array * (1 - chance_array)))
    drift = float(np.sum(accepted_array - chance_array))
    z = drift / math.sqrt(variance) if variance > 0 else 0.0
    failed = abs(z) > critical or impossible > 0
    schemes = sorted({r.scheme for r in rounds})
    detail = first or (f"z = {z:.2f}: the rows accept {'more' if z > 0 else 'less'} often "
                       "than the claimed scheme allows" if failed else "")
    if "without-replacement" in schemes:
        detail = "; ".join(filter(None, [detail, "without-replacement rows are scored given "
                                         "the siblings drawn"]))
    return CheckResult(
        name, Verdict.FAIL if failed else Verdict.PASS,
        f"z = {z:.3f} (accepted {int(accepted_array.sum())} of {len(outcomes)} tested rows, "
        f"closed form {chance_array.sum():.1f})", threshold, detail)


# --- law ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    p: np.ndarray
    q: np.ndarray | None
    token: int


def _law_tokens(rounds: Sequence[TreeRound]) -> list[_Token]:
    out = []
    for round_ in rounds:
        for d, token in enumerate(round_.emitted):
            row = round_.path_rows[d]
            q = (round_.draft_rows[row] if round_.draft_rows is not None
                 and round_.children[row] else None)
            out.append(_Token(round_.target_rows[row].astype(np.float64),
                              None if q is None else q.astype(np.float64), token))
    return out


def check_tree_law(rounds: Sequence[TreeRound], alpha_level: float) -> CheckResult:
    """Every emitted token against p at its row: the chain's randomised PIT, chi-square on
    bins, in two orderings (by p, and by q/p where the row has a drafter law), Bonferroni."""
    name = "tree-law"
    tokens = _law_tokens(rounds)
    n = len(tokens)
    if n < _MIN_LAW_TOKENS:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", f"p-value >= {alpha_level / 2:g}",
                           f"needs at least {_MIN_LAW_TOKENS} tokens, the tree rounds emitted {n}")
    bins = max(2, min(20, n // 5))
    jitter = np.random.default_rng(LAW_SEED).random(n)
    statistics, p_values = [], []
    for ordering in ("p", "q/p"):
        u = np.empty(n)
        for j, item in enumerate(tokens):
            key = item.p
            if ordering == "q/p" and item.q is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    key = np.where(item.p > 0, item.q / np.where(item.p > 0, item.p, 1), np.inf)
            lo, width = pit_bounds(item.p, key)
            u[j] = lo[item.token] + jitter[j] * width[item.token]
        counts = np.bincount(np.minimum((u * bins).astype(int), bins - 1), minlength=bins)
        chi2 = float(np.sum((counts - n / bins) ** 2 / (n / bins)))
        statistics.append(chi2)
        p_values.append(float(stats.chi2.sf(chi2, bins - 1)))
    failed = min(p_values) < alpha_level / 2
    return CheckResult(
        name, Verdict.FAIL if failed else Verdict.PASS,
        f"chi2 = {statistics[0]:.2f} (p-order), {statistics[1]:.2f} (q/p-order), {bins - 1} "
        f"d.o.f.; min p-value = {min(p_values):.3g} over {n} tokens",
        f"min p-value >= {alpha_level / 2:g} (two orderings, Bonferroni)",
        "the emitted tokens are not distributed as the target's p" if failed else "")


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


def check_tree_rewind(rounds: Sequence[TreeRound]) -> CheckResult:
    """The rewind invariant on every tree round with offsets: the kept row of each cache
    ends where the next round's current token starts; zero tolerance."""
    name, threshold = "tree-rewind", "0 tree rounds off the invariant"
    checked = [r for r in rounds if r.cache is not None and r.run.prompt_length is not None]
    if not checked:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                           "no tree round records cache offsets")
    bad = [f"{_where(r)}: " + "; ".join(problems)
           for r in checked if (problems := _rewind_problems(r))]
    return CheckResult(name, Verdict.FAIL if bad else Verdict.PASS,
                       f"tree rounds off = {len(bad)} of {len(checked)}", threshold,
                       bad[0] if bad else "")


def check_tree_rounds(trace: Trace, alpha: float) -> list[CheckResult]:
    """The six tree checks on the trace's tree rounds; none when it has none."""
    rounds = trace.tree_rounds
    if not rounds:
        return []
    return [check_tree_replay(rounds), check_tree_fresh(rounds, alpha),
            check_tree_support(rounds), check_tree_acceptance(rounds, alpha),
            check_tree_law(rounds, alpha), check_tree_rewind(rounds)]
