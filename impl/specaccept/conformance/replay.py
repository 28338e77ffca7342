"""The replay check: every decision the engine made, redone by the spec on its own uniforms.

Zero tolerance: one decision that differs from the spec's on the recorded uniforms fails
the trace, with a diagnosis naming the round, the position and, where it can, the bug. A
round whose accept tests are recorded but whose draws are not (an engine drawing with its
library's categorical) replays its accept decisions alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

from specaccept.conformance.bugs import BUG_CLASSES, Outcome, correct_outcome
from specaccept.conformance.exact import LogSurvival, State, merge_notes, merge_per_key
from specaccept.conformance.positions import (
    BlockDecision,
    RoundFacts,
    claimed_rule,
    is_full_block_round,
    prefix_weight,
    read_cells,
    verify_block_round,
)
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Round
from specaccept.core.acceptance import AcceptanceRule, verify_draft_token
from specaccept.core.sampling import sample_from_distribution

__all__ = ["PowerProduct", "ReplayState", "draw_near", "envelope"]


def _scalar(array: mx.array) -> int:
    """A 0-d integer array's value."""
    return int(np.array(array))


def _diagnose(
    rule: AcceptanceRule, round_: Round, i: int, spec: tuple[bool, int], engine: tuple[bool, int]
) -> str:
    p = round_.target_rows[i]
    u = round_.uniforms
    assert u is not None
    where = f"round {round_.index} (line {round_.line}), position {i}"
    engine_token = engine[1]
    if p[engine_token] == 0:
        return (f"{where}: the engine emitted token {engine_token}, which has p = 0; "
                f"the spec emits {spec[1]}")
    if i == round_.k:
        draws = [_scalar(sample_from_distribution(mx.array(row), float(u[i, 1])))
                 for row in round_.target_rows]
        others = [j for j, draw in enumerate(draws) if j != i and draw == engine_token]
        hint = (f"; it equals the draw from row {others[0]}: the bonus came from the wrong row"
                if others else "")
        return (f"{where}: bonus token {engine_token}, but draw(p_k, u[k,1] = {u[i, 1]:.6g}) "
                f"from row k = {i} is {spec[1]}{hint}")
    draft = round_.draft_tokens[i]
    q = round_.draft_rows[i] if round_.draft_rows is not None else None
    if spec[0] != engine[0]:
        said = ("accepts", "rejects") if spec[0] else ("rejects", "accepts")
        if rule is AcceptanceRule.STOCHASTIC and q is not None:
            test = (f"accept test u[i,0]·q(t) = {u[i, 0]:.6g}·{q[draft]:.6g} = "
                    f"{float(np.float32(u[i, 0]) * q[draft]):.6g} vs p(t) = {p[draft]:.6g}")
        elif rule is AcceptanceRule.GREEDY_ARGMAX:
            test = f"argmax p = {int(np.argmax(p))} vs draft t = {draft}"
        else:
            test = (f"the target's draw draw(p, u[i,1] = {u[i, 1]:.6g}) = {spec[1]} "
                    f"vs draft t = {draft}")
        return f"{where}: {test}: the spec {said[0]} draft {draft}, the engine {said[1]} it"
    # Same accept decision, different replacement.
    if rule is AcceptanceRule.STOCHASTIC and q is not None:
        # The most specific diagnosis first: a draw from p on the same uniform names the bug,
        # whether or not that token also falls outside the residual's support.
        from_p = _scalar(sample_from_distribution(mx.array(p), float(u[i, 1])))
        if from_p == engine_token:
            return (f"{where}: replacement {engine_token} is draw(p, u[i,1]), the spec's is "
                    f"draw(relu(p - q), u[i,1]) = {spec[1]}: resampled from p, not the residual")
        if p[engine_token] <= q[engine_token]:
            return (f"{where}: replacement {engine_token} lies outside the residual's support "
                    f"(p = {p[engine_token]:.6g} <= q = {q[engine_token]:.6g}); the spec "
                    f"draws {spec[1]} from relu(p - q)")
        return (f"{where}: replacement {engine_token} lies in the residual's support but is "
                f"not its draw, draw(relu(p - q), u[i,1] = {u[i, 1]:.6g}) = {spec[1]}: the "
                "residual is normalised or drawn differently")
    return f"{where}: the engine emitted {engine_token}, the spec emits {spec[1]}"


def _recorded(round_: Round) -> tuple[bool, bool]:
    """Whether every accept test, and every draw, that the claimed rule reads is recorded."""
    u = round_.uniforms
    assert u is not None
    cells = read_cells(round_)
    return (all(not np.isnan(u[i, 0]) for i, slot in cells if slot == 0),
            all(not np.isnan(u[i, 1]) for i, slot in cells if slot == 1))


def envelope(vocab_size: int) -> float:
    """The relative error a law rebuilt from logits may carry against the engine's own: each
    entry's exponential within a few ulps, and the normalising sum within (V - 1) roundings
    of 2**-24 whatever the order it was added in (the worst case of float32 summation)."""
    return (vocab_size + 8) * 2.0**-24


def _within_envelope(
    rule: AcceptanceRule, round_: Round, i: int, u: np.ndarray, accepted: bool, token: int,
) -> bool:
    """Whether the engine's decision at position i differs from the spec's only by where the
    float32 rounding of a law rebuilt from logits put a boundary: the accept test's two sides,
    or the draw's target u * total, lie within `envelope` of each other."""
    p = round_.target_rows[i].astype(np.float64)
    tol = envelope(p.shape[0])
    q = (round_.draft_rows[i].astype(np.float64)
         if round_.draft_rows is not None and i < round_.draft_rows.shape[0] else None)
    if i < round_.k and rule is AcceptanceRule.STOCHASTIC and q is not None:
        t = round_.draft_tokens[i]
        test = float(np.float32(u[i, 0]) * np.float32(q[t]))
        near = p[t] > 0 and abs(test - p[t]) <= tol * max(p[t], test)
        if accepted:
            return token == t and bool(near)
        spec_accepts = p[t] > 0 and test <= p[t]
        if spec_accepts and not near:
            return False
        # Both reject (or the test sat on the boundary): the replacement's draw. The
        # residual's entries are differences of p and q, so their rounding is a share of
        # p's and q's mass, not of the residual's: the window scales with both laws.
        weights = np.maximum(p * (1 + tol) - q * (1 - tol), 0.0)
        return draw_near(weights, float(u[i, 1]), token, tol * float(p.sum() + q.sum()))
    if rule is AcceptanceRule.GREEDY_ARGMAX or (i == round_.k and rule is None):
        return bool(p[token] >= p.max() * (1 - tol))
    # Sampler-match's target draw and every bonus draw: from p.
    drawn = token if i == round_.k or not accepted else round_.draft_tokens[i]
    return draw_near(p, float(u[i, 1]), drawn, tol * float(p.sum()))


def draw_near(weights: np.ndarray, u: float, token: int, window: float) -> bool:
    """Whether u * total falls in `token`'s interval of the inverse-CDF draw, widened by
    `window` (probability mass) on each side, twice over: once for the interval's ends and
    once for the total that scales u."""
    if not 0 <= token < weights.shape[0] or weights[token] <= 0:
        return False
    sums = np.cumsum(weights)
    target = u * float(sums[-1])
    low, high = float(sums[token] - weights[token]), float(sums[token])
    return low - 2 * window <= target <= high + 2 * window


def _replay_round(
    rule: AcceptanceRule, round_: Round, u: np.ndarray, accepts_only: bool
) -> tuple[int, int, str, int]:
    """(decisions compared, divergences, first diagnosis, decisions within the envelope)
    for one round; with `accepts_only` the draws are not recorded, so only the accept
    decisions are compared. On rows rebuilt from logits, a decision that differs only
    within `envelope` of a boundary is counted apart, not as a divergence."""
    tested = min(len(round_.emitted), round_.k)
    spec: list[tuple[bool, int]] = []
    if tested:
        p = mx.array(round_.target_rows[:tested])
        q = None
        if rule.needs_proposal_distribution:
            assert round_.draft_rows is not None
            q = mx.array(round_.draft_rows[:tested])
        verdict = verify_draft_token(
            rule, p, q, mx.array(round_.draft_tokens[:tested]),
            mx.array(u[:tested, 0]), mx.array(u[:tested, 1]),
        )
        spec += list(zip(np.array(verdict.accepted).astype(bool).tolist(),
                         np.array(verdict.token).astype(int).tolist(), strict=True))
    if len(round_.emitted) > round_.k and not accepts_only:
        row = mx.array(round_.target_rows[round_.k])
        bonus = (mx.argmax(row) if rule is AcceptanceRule.GREEDY_ARGMAX
                 else sample_from_distribution(row, float(u[round_.k, 1])))
        spec.append((False, _scalar(bonus)))
    divergences, first, near = 0, "", 0
    rebuilt = round_.target_logits is not None
    for i, token in enumerate(round_.emitted[: len(spec)]):
        engine = (i < round_.num_accepted, token)
        expected = spec[i]
        same = expected[0] == engine[0] and (engine[0] or accepts_only or expected[1] == token)
        if i == round_.k:
            same = expected[1] == token
        if not same and rebuilt and ((accepts_only and i < round_.k and expected[0] != engine[0])
                                     or not accepts_only) and _within_envelope(
                rule, round_, i, u, engine[0], token):
            near += 1
            continue
        if not same:
            divergences += 1
            if not first:
                first = _diagnose(rule, round_, i, expected, engine)
            break  # after a divergence the engine's round no longer follows the spec's
    return len(spec), divergences, first, near


def _replay_block_round(
    round_: Round, u: np.ndarray, accepts_only: bool, decision: BlockDecision | None,
) -> tuple[int, int, str]:
    """Block verification: the kept length and (unless `accepts_only`) the token after it,
    against the spec's; `decision` is the spec's on the recorded uniforms when the round's
    facts hold it."""
    if decision is None or not decision.on_recorded_uniforms:
        verdict = verify_block_round(round_, u)
        decision = BlockDecision(_scalar(verdict.num_accepted), _scalar(verdict.next_token),
                                 np.array(verdict.accepted_length_law, dtype=np.float64), True)
    kept, token = decision.num_accepted, decision.next_token
    engine_token = round_.emitted[round_.num_accepted]
    if kept == round_.num_accepted and (accepts_only or token == engine_token):
        return 1, 0, ""
    where = f"round {round_.index} (line {round_.line})"
    law = decision.accepted_length_law.tolist()
    if kept != round_.num_accepted:
        return 1, 1, (f"{where}: block verification keeps the longest passing prefix, "
                      f"tau = {kept} (P(tau = i | drafts) = {[round(x, 4) for x in law]}); "
                      f"the engine kept {round_.num_accepted}")
    p = round_.target_rows[kept]
    detail = "the bonus draw from row k" if kept == round_.k else (
        f"the draw from the weighted residual max(w_tau p - q, 0) with w_tau = "
        f"{prefix_weight(round_, kept):.6g}")
    zero = "; it has p = 0" if p[engine_token] <= 0 else ""
    return 1, 1, (f"{where}: after tau = {kept} the engine emitted {engine_token}, {detail} "
                  f"is {token}{zero}")


@dataclass
class PowerProduct(State):
    """Per bug: the chance that no position shows it, as a product of per-position chances;
    the notes of positions it does not apply to; whether any position applied."""

    survival: dict[str, LogSurvival] = field(default_factory=dict)
    notes: dict[str, set[str]] = field(default_factory=dict)

    def add(self, bug: str, distance: float | None, note: str = "") -> None:
        """One position: its chance `distance` of showing the bug, or a note why n/a."""
        self.notes.setdefault(bug, set())
        if distance is None:
            if note:
                self.notes[bug].add(note)
            return
        self.survival.setdefault(bug, LogSurvival()).add(distance)

    def touch(self, bug: str) -> None:
        self.notes.setdefault(bug, set())

    def merge(self, other: PowerProduct) -> None:
        merge_notes(self.notes, other.notes)
        merge_per_key(self.survival, other.survival)

    def powers(self, scale: float, note: str, empty: str) -> list[Power]:
        out = []
        for bug in BUG_CLASSES:
            if bug.id not in self.notes:
                continue
            survival = self.survival.get(bug.id)
            if survival is None:
                out.append(Power(bug.id, None, "; ".join(sorted(self.notes[bug.id])) or empty))
            else:
                out.append(Power(bug.id, 1.0 - survival.scaled(scale), note))
        return out


@dataclass
class ReplayState(State):
    """The replay check's state: decisions compared, divergent rounds, the first diagnosis,
    the rounds left out and why, and the power model's products."""

    rounds: int = 0
    compared: int = 0
    divergent: int = 0
    first: str = ""
    skipped: int = 0
    unrecorded: int = 0
    cut: int = 0
    """Block rounds the engine cut short (end of sequence, token budget)."""
    within_envelope: int = 0
    """Decisions on rows rebuilt from logits that differ from the spec's only within the
    float32 envelope of a boundary (`envelope`)."""
    without_rows: int = 0
    """The rounds of a compact trace that hold statistics alone, with nothing to replay."""
    power: PowerProduct = field(default_factory=PowerProduct)

    def update(self, facts: RoundFacts) -> None:
        round_ = facts.round
        if facts.modelled:
            _power_terms(facts, self.power)
        if not round_.has_rows:
            self.without_rows += 1
            return
        if round_.uniforms is None:
            return
        self.rounds += 1
        rule = claimed_rule(round_)
        tests_recorded, draws_recorded = _recorded(round_)
        accepts_only = not draws_recorded
        if not tests_recorded or (accepts_only and rule not in (AcceptanceRule.STOCHASTIC,
                                                                 AcceptanceRule.BLOCK)):
            self.unrecorded += 1
            return
        # An unrecorded draw is read as 0 and its outcome not compared.
        u = np.nan_to_num(round_.uniforms, nan=0.0)
        if rule is AcceptanceRule.BLOCK:
            if round_.stopped:
                self.cut += 1  # a cut block round shows too little to replay its decision
                return
            if not is_full_block_round(round_):
                self.skipped += 1
                return
            n, bad, diagnosis = _replay_block_round(round_, u, accepts_only, facts.block)
            within = 0
        else:
            tested = min(len(round_.emitted), round_.k)
            if rule is None or (rule.needs_proposal_distribution and tested and (
                    round_.draft_rows is None or round_.draft_rows.shape[0] < tested)):
                self.skipped += 1
                return
            n, bad, diagnosis, within = _replay_round(rule, round_, u, accepts_only)
        self.within_envelope += within
        self.compared += n
        self.divergent += bad
        self.first = self.first or diagnosis

    def merge(self, other: ReplayState) -> None:
        self.rounds += other.rounds
        self.compared += other.compared
        self.divergent += other.divergent
        self.first = self.first or other.first
        self.skipped += other.skipped
        self.unrecorded += other.unrecorded
        self.cut += other.cut
        self.within_envelope += other.within_envelope
        self.without_rows += other.without_rows
        self.power.merge(other.power)

    def result(self, power_scale: float) -> CheckResult:
        """Every decision equals the spec's on the recorded uniforms; zero tolerance."""
        name, threshold = "replay", "0 divergent decisions"
        compact = (f"{self.without_rows} rounds of the compact trace hold statistics, not "
                   "rows, and were not replayed" if self.without_rows else "")
        if not self.rounds:
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                               "the trace records no uniforms" if not self.without_rows else
                               "no round with rows records uniforms; " + compact)
        if self.compared == 0:
            why = ("no round records the uniforms its rule's decisions read" if self.unrecorded
                   else "no round has a rule this library replays and the rows it reads")
            return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold, why)
        not_replayed = [f"{self.skipped} rounds not replayable (unknown rule or missing q)"] * \
            bool(self.skipped) + [f"{self.unrecorded} rounds without the uniforms their "
                                  "decisions read"] * bool(self.unrecorded) + [
            f"{self.cut} block rounds cut short (stopped) before their drafts were all "
            "decided"] * bool(self.cut) + [
            f"{self.within_envelope} decisions on rows rebuilt from logits differ from the "
            "spec's only within float32 rounding of a boundary (not divergences)"] * bool(
            self.within_envelope)
        detail = "; ".join(part for part in (self.first or "; ".join(not_replayed), compact)
                           if part)
        return CheckResult(
            name, Verdict.FAIL if self.divergent else Verdict.PASS,
            f"divergent rounds = {self.divergent} of "
            f"{self.rounds - self.skipped - self.unrecorded - self.cut} "
            f"({self.compared} decisions)",
            threshold, detail,
            self.power.powers(power_scale, "lower bound", "no replayable position"),
        )


def _power_terms(facts: RoundFacts, power: PowerProduct) -> None:
    """A lower bound: decisions on shared uniforms differ at least with the laws' TV."""
    for bug in BUG_CLASSES:
        if bug not in facts.outcomes:
            continue
        power.touch(bug.id)
        rule = claimed_rule(facts.round)
        # A lower bound still when rounds with an unrecorded uniform are left out.
        if facts.round.uniforms is None or rule is None or not all(_recorded(facts.round)):
            continue
        for pos, outcome, bonus_law in zip(facts.positions, facts.outcomes[bug],
                                           facts.bonus[bug], strict=True):
            if isinstance(outcome, str):
                power.add(bug.id, None, outcome)
                continue
            assert pos.p is not None, "the power model reads rounds with rows"
            if isinstance(outcome, Outcome) and pos.q is not None:
                right = correct_outcome(rule, pos.p, outcome.claimed_q)
                distance = 0.5 * float(np.abs(right.accepted - outcome.accepted).sum()
                                       + np.abs(right.replaced - outcome.replaced).sum())
                if bug.hidden_from_replay:
                    distance = 0.0
            elif isinstance(bonus_law, np.ndarray):
                distance = 0.5 * float(np.abs(bonus_law - pos.p).sum())
            else:
                continue
            power.add(bug.id, distance)
