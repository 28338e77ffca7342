"""The six conformance checks, each with its statistic, threshold, verdict and power.

`check_trace` runs them on a parsed `Trace`; ``spec/trace_format.md`` defines the
trace and ``docs/conformance.md`` says why each check is built as it is.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np
from scipy import stats

from specaccept.core.acceptance import AcceptanceRule, verify_draft_token
from specaccept.core.joint import verify_blockwise
from specaccept.core.sampling import effective_token_distribution, sample_from_distribution
from specaccept.shell.conformance.bugs import (
    BUG_CLASSES,
    ROUND_LEVEL_BUGS,
    Outcome,
    bug_outcome,
    correct_outcome,
)
from specaccept.shell.conformance.trace import Round, Trace

__all__ = [
    "DEFAULT_ALPHA",
    "CheckResult",
    "ConformanceReport",
    "Power",
    "check_trace",
]

DEFAULT_ALPHA = 1e-4
"""The false-alarm probability of each statistical check."""
LAW_SEED = 0
"""The seed of the randomised PIT, so a verdict is reproducible."""
_MIN_LAW_TOKENS = 10


@dataclass(frozen=True)
class Power:
    """The probability that a check would have caught a bug class on this trace."""

    bug: str
    probability: float | None
    """None when the bug class does not apply to this trace (see `note`)."""
    note: str = ""


@dataclass
class CheckResult:
    """One check's outcome."""

    name: str
    verdict: str
    """"pass", "fail" or "not run"."""
    statistic: str
    """The statistic, as ``name = value``."""
    threshold: str
    """What the statistic is compared with."""
    detail: str = ""
    """The first failure's diagnosis, or why the check did not run."""
    power: list[Power] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {
            "name": self.name, "verdict": self.verdict, "statistic": self.statistic,
            "threshold": self.threshold, "detail": self.detail,
            "power": [
                {"bug": p.bug, "probability": p.probability, "note": p.note} for p in self.power
            ],
        }


@dataclass
class ConformanceReport:
    """Every check's result on one trace."""

    rounds: int
    positions_tested: int
    tokens: int
    alpha: float
    checks: list[CheckResult]
    truncated: str | None = None

    @property
    def passed(self) -> bool:
        """True when no check failed."""
        return all(check.verdict != "fail" for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return {
            "rounds": self.rounds, "positions_tested": self.positions_tested,
            "tokens": self.tokens, "alpha": self.alpha, "truncated": self.truncated,
            "passed": self.passed, "checks": [c.to_json() for c in self.checks],
        }

    def to_text(self) -> str:
        """The report as lines a person reads."""
        lines = [
            f"trace: {self.rounds} rounds, {self.tokens} tokens, "
            f"{self.positions_tested} tested positions; alpha = {self.alpha:g} per check",
        ]
        if self.truncated:
            lines.append(f"TRUNCATED: {self.truncated}")
        for check in self.checks:
            lines.append(
                f"{check.name:<10} {check.verdict.upper():<7} {check.statistic}  "
                f"(threshold: {check.threshold})"
            )
            if check.detail:
                lines.append(f"           {check.detail}")
            for power in check.power:
                if power.probability is None:
                    lines.append(f"           power vs {power.bug}: n/a ({power.note})")
                else:
                    lines.append(
                        f"           would have caught {power.bug} with probability "
                        f">= {_floor(power.probability)}"
                        + (f" ({power.note})" if power.note else "")
                    )
        lines.append("verdict: " + ("CONFORMS" if self.passed else "DOES NOT CONFORM"))
        return "\n".join(lines)


def _floor(probability: float) -> str:
    """A probability rounded down, so a printed lower bound stays a lower bound."""
    if probability >= 1.0:
        return "1"
    if probability > 1 - 1e-6:
        return "0.999999"
    return f"{math.floor(probability * 10_000) / 10_000:.4f}"


@dataclass
class _Position:
    """One decided output position: a tested draft, or a bonus token."""

    round: Round
    offset: int
    p: np.ndarray
    q: np.ndarray | None
    draft: int | None
    emitted: int
    accepted: bool
    p_blind: np.ndarray | None = None

    @property
    def tested(self) -> bool:
        return self.draft is not None


def _rule(round_: Round) -> AcceptanceRule | None:
    return round_.rule if isinstance(round_.rule, AcceptanceRule) else None


def _token_rule(round_: Round) -> AcceptanceRule | None:
    """The rule when it decides position by position (every rule but block)."""
    rule = _rule(round_)
    return None if rule is None or rule.verifies_jointly else rule


def _full_block_round(round_: Round) -> bool:
    """A block round with every row the joint decision reads, not cut short."""
    return (_rule(round_) is AcceptanceRule.BLOCK and not round_.stopped and round_.k >= 1
            and round_.target_rows.shape[0] == round_.k + 1
            and round_.draft_rows is not None and round_.draft_rows.shape[0] == round_.k)


def _joint(round_: Round, uniforms: np.ndarray | None = None) -> Any:
    """`verify_blockwise` on a full block round (zero uniforms when none recorded)."""
    assert round_.draft_rows is not None
    u = uniforms if uniforms is not None else np.zeros((round_.k + 1, 2), dtype=np.float32)
    return verify_blockwise(
        mx.array(round_.target_rows), mx.array(round_.draft_rows),
        mx.array(round_.draft_tokens), mx.array(u),
    )


def _prefix_weight(round_: Round, kept: int) -> float:
    """w_kept of block verification: min(1, w * p_i(X_i) / q_i(X_i)) along the kept drafts."""
    assert round_.draft_rows is not None
    weight = 1.0
    for i in range(kept):
        token = round_.draft_tokens[i]
        p_i, q_i = float(round_.target_rows[i, token]), float(round_.draft_rows[i, token])
        weight = 0.0 if p_i <= 0 or weight == 0 else (1.0 if q_i <= 0 else
                                                       min(1.0, weight * p_i / q_i))
    return weight


def _blind_rows(trace: Trace, round_: Round, history: list[int]) -> np.ndarray | None:
    """Row i computed with the history as it stood before the round, drafts left out."""
    config = trace.target_sampler
    if round_.target_logits is None or config is None or not config.uses_history:
        return None
    if trace.prompt is None:
        return None
    context = mx.array(history, dtype=mx.int32)
    logits = mx.array(round_.target_logits)
    rows = [effective_token_distribution(logits[i], config, context)
            for i in range(logits.shape[0])]
    return np.array(mx.stack(rows), dtype=np.float64)


def _positions(trace: Trace, *, with_blind: bool) -> list[_Position]:
    out: list[_Position] = []
    history = list(trace.prompt or [])
    for round_ in trace.rounds:
        blind = _blind_rows(trace, round_, history) if with_blind else None
        for i, token in enumerate(round_.emitted):
            tested = i < round_.k
            q = None
            if tested and round_.draft_rows is not None and i < round_.draft_rows.shape[0]:
                q = round_.draft_rows[i].astype(np.float64)
            out.append(_Position(
                round=round_, offset=i, p=round_.target_rows[i].astype(np.float64), q=q,
                draft=round_.draft_tokens[i] if tested else None, emitted=token,
                accepted=i < round_.num_accepted,
                p_blind=blind[i] if blind is not None and i > 0 else None,
            ))
        history += round_.emitted
    return out


def _scalar(array: mx.array) -> int:
    """A 0-d integer array's value."""
    return int(np.array(array))


def _two_sided(z: float) -> float:
    return math.erfc(abs(z) / math.sqrt(2.0))


# --- 1. replay ---------------------------------------------------------------------------


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


def _replay_round(rule: AcceptanceRule, round_: Round) -> tuple[int, int, str]:
    """(decisions compared, divergences, first diagnosis) for one round."""
    u = round_.uniforms
    assert u is not None
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
    if len(round_.emitted) > round_.k:
        row = mx.array(round_.target_rows[round_.k])
        bonus = (mx.argmax(row) if rule is AcceptanceRule.GREEDY_ARGMAX
                 else sample_from_distribution(row, float(u[round_.k, 1])))
        spec.append((False, _scalar(bonus)))
    divergences, first = 0, ""
    for i, token in enumerate(round_.emitted):
        engine = (i < round_.num_accepted, token)
        expected = spec[i]
        same = expected[0] == engine[0] and (engine[0] or expected[1] == token)
        if i == round_.k:
            same = expected[1] == token
        if not same:
            divergences += 1
            if not first:
                first = _diagnose(rule, round_, i, expected, engine)
            break  # after a divergence the engine's round no longer follows the spec's
    return len(round_.emitted), divergences, first


def _replay_block_round(round_: Round) -> tuple[int, int, str]:
    """Block verification: the kept length and the token after it, against the spec's."""
    assert round_.uniforms is not None
    verdict = _joint(round_, round_.uniforms)
    kept, token = _scalar(verdict.num_accepted), _scalar(verdict.next_token)
    engine_token = round_.emitted[round_.num_accepted]
    if kept == round_.num_accepted and token == engine_token:
        return 1, 0, ""
    where = f"round {round_.index} (line {round_.line})"
    law = np.array(verdict.accepted_length_law).tolist()
    if kept != round_.num_accepted:
        return 1, 1, (f"{where}: block verification keeps the longest passing prefix, "
                      f"tau = {kept} (P(tau = i | drafts) = {[round(x, 4) for x in law]}); "
                      f"the engine kept {round_.num_accepted}")
    p = round_.target_rows[kept]
    detail = "the bonus draw from row k" if kept == round_.k else (
        f"the draw from the weighted residual max(w_tau p - q, 0) with w_tau = "
        f"{_prefix_weight(round_, kept):.6g}")
    zero = "; it has p = 0" if p[engine_token] <= 0 else ""
    return 1, 1, (f"{where}: after tau = {kept} the engine emitted {engine_token}, {detail} "
                  f"is {token}{zero}")


def check_replay(trace: Trace, powers: list[Power]) -> CheckResult:
    """Every decision equals the spec's on the recorded uniforms; zero tolerance."""
    name, threshold = "replay", "0 divergent decisions"
    rounds = [r for r in trace.rounds if r.uniforms is not None]
    if not rounds:
        return CheckResult(name, "not run", "n/a", threshold, "the trace records no uniforms")
    compared, divergent, first, skipped = 0, 0, "", 0
    for round_ in rounds:
        rule = _rule(round_)
        if rule is AcceptanceRule.BLOCK:
            if not _full_block_round(round_):
                skipped += 1
                continue
            n, bad, diagnosis = _replay_block_round(round_)
            compared += n
            divergent += bad
            first = first or diagnosis
            continue
        tested = min(len(round_.emitted), round_.k)
        if rule is None or (rule.needs_proposal_distribution and tested and (
                round_.draft_rows is None or round_.draft_rows.shape[0] < tested)):
            skipped += 1
            continue
        n, bad, diagnosis = _replay_round(rule, round_)
        compared += n
        divergent += bad
        first = first or diagnosis
    if compared == 0:
        return CheckResult(name, "not run", "n/a", threshold,
                           "no round has a rule this library replays and the rows it reads")
    detail = first or (f"{skipped} rounds not replayable (unknown rule or missing q)"
                       if skipped else "")
    return CheckResult(
        name, "fail" if divergent else "pass",
        f"divergent rounds = {divergent} of {len(rounds) - skipped} ({compared} decisions)",
        threshold, detail, powers,
    )


# --- 2. fresh randomness ----------------------------------------------------------------


UNIFORM_SPACING = 2.0**-24
"""The spec's uniforms are multiples of 2**-24: two fresh ones coincide with that probability."""


def _read_uniforms(round_: Round) -> list[float]:
    """The recorded uniforms the claimed rule reads: what the round's outcome depends on.

    Block verification reads the test of every draft (its kept length is the longest
    passing prefix) and one draw; stochastic the tests up to the first rejection and one
    draw; sampler-match the target's draw at every compared position; greedy none.
    """
    u, rule = round_.uniforms, _rule(round_)
    if u is None or rule is None:
        return []
    kept, k = round_.num_accepted, round_.k
    if rule is AcceptanceRule.BLOCK:
        cells = [(i, 0) for i in range(k)] + [(kept, 1)]
    elif rule is AcceptanceRule.STOCHASTIC:
        cells = [(i, 0) for i in range(min(kept + 1, k))] + [(kept, 1)]
    elif rule in (AcceptanceRule.SAMPLER_MATCH,
                  AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION):
        cells = [(i, 1) for i in range(min(kept + 1, k + 1))]
    else:
        cells = []
    return [float(u[i, j]) for i, j in cells if i < u.shape[0]]


def _spacing(values: Sequence[float]) -> float:
    """The spacing of the coarsest grid every recorded uniform lies on, at least 2**-24.

    Values that all lie on a coarser grid (fewer binary digits, or decimals written
    short) coincide more often, and the bound uses that grid instead. The reader holds
    uniforms as float32, so a decimal is counted in float32's shortest form.
    """
    from fractions import Fraction

    if not values:
        return UNIFORM_SPACING
    binary = max(Fraction(v).denominator.bit_length() - 1 for v in values)
    decimals = max(len(np.format_float_positional(np.float32(v), unique=True, trim="-")
                       .partition(".")[2]) for v in values)
    # Every value lies on both grids; the coarser one is the resolution they show.
    return max(UNIFORM_SPACING, 2.0**-binary, 10.0**-decimals)


def _coincidence_threshold(mean_bound: float, alpha: float) -> int:
    """The least c >= 1 with mean_bound**c / c! <= alpha: P(D >= c) <= alpha.

    A block trace of 1,000 rounds of k = 4 reads 5,000 uniforms, 40 rounds 200:

    >>> [_coincidence_threshold(n * (n - 1) / 2 * UNIFORM_SPACING, 1e-4) for n in (5000, 200)]
    [7, 2]
    """
    c, tail = 1, mean_bound
    while tail > alpha:
        c += 1
        tail *= mean_bound / c
    return c


def _position_keyed_rereads(rounds: Sequence[Round]) -> int:
    """How many read tests a position-keyed block engine would re-read, given these rounds.

    A round at n keeping tau of k drafts read tests keyed n .. n + k - 1; the next round
    starts at n + tau + 1 and, keyed by position, reads keys n + tau + 1 .. n + k - 1 again
    as its first k - tau - 1 tests, every one of which block verification reads.
    """
    total = 0
    for this, after in itertools.pairwise(rounds):
        if _rule(this) is AcceptanceRule.BLOCK and _rule(after) is AcceptanceRule.BLOCK:
            total += max(0, min(this.k - this.num_accepted - 1, after.k))
    return total


def check_fresh(trace: Trace, alpha_level: float) -> CheckResult:
    """No uniform a round read re-appears among the uniforms a later round read.

    D counts the read uniforms equal to one read by an earlier round. Fresh uniforms
    on a grid of spacing s: given everything before it, a read uniform hits one of the m
    values earlier rounds read with probability at most m s, so with mu the sum of those
    bounds, P(D >= c) <= E[C(D, c)] <= mu^c / c!; the check fails at the least c making
    that bound <= alpha.
    """
    name = "fresh"
    rounds = [r for r in trace.rounds if r.uniforms is not None]
    if not rounds:
        return CheckResult(name, "not run", "n/a", "no re-read uniforms",
                           "the trace records no uniforms")
    read = [_read_uniforms(r) for r in rounds]
    spacing = _spacing([v for values in read for v in values])
    earlier: dict[float, Round] = {}
    rereads, mean_bound, first = 0, 0.0, ""
    for round_, values in zip(rounds, read, strict=True):
        for value in values:
            mean_bound += len(earlier) * spacing
            if value in earlier:
                rereads += 1
                first = first or (
                    f"round {round_.index} (line {round_.line}) reads u = {value!r}, which "
                    f"round {earlier[value].index} (line {earlier[value].line}) already read: "
                    "a later round must read fresh uniforms (keyed by round, not by position)")
        for value in values:
            earlier.setdefault(value, round_)
    critical = _coincidence_threshold(mean_bound, alpha_level)
    expected = _position_keyed_rereads(rounds)
    power = Power("position-keyed-uniforms", float(expected >= critical) if any(
        _rule(r) is AcceptanceRule.BLOCK for r in rounds) else None,
        f"deterministic given the kept lengths: {expected} re-read tests, {critical} needed"
        if any(_rule(r) is AcceptanceRule.BLOCK for r in rounds)
        else "position keys are harmless to the token-by-token rules")
    return CheckResult(
        name, "fail" if rereads >= critical else "pass",
        f"re-read uniforms D = {rereads} of {sum(map(len, read))} read "
        f"(mu = {mean_bound:.3g} at spacing 2^{math.log2(spacing):.0f})",
        f"D < {critical} (P(D >= {critical}) <= mu^{critical}/{critical}! <= {alpha_level:g})",
        first if rereads >= critical else "", [power],
    )


# --- 2. support -------------------------------------------------------------------------


def _support_violation(position: _Position) -> str:
    p, token = position.p, position.emitted
    where = f"round {position.round.index} (line {position.round.line}), position {position.offset}"
    if p[token] <= 0:
        return f"{where}: emitted token {token} has p = 0"
    rule = _rule(position.round)
    if (position.tested and not position.accepted and rule is AcceptanceRule.STOCHASTIC
            and position.q is not None and position.draft is not None):
        # The test keeps draft t when p[t] > 0 and u * q[t] <= p[t], u < 1: certain once
        # p[t] >= q[t], so rejecting such a draft is impossible, not unlikely.
        t = position.draft
        if p[t] > 0 and position.q[t] <= p[t]:
            return (f"{where}: draft {t} was rejected though p = {p[t]:.6g} >= q = "
                    f"{position.q[t]:.6g}: its acceptance probability is 1")
    if (position.tested and not position.accepted and rule in (AcceptanceRule.STOCHASTIC,
                                                                AcceptanceRule.BLOCK)
            and position.q is not None):
        q = position.q
        # Block verification draws from max(w p - q, 0) with w <= 1: inside {p > q} too.
        weight = (_prefix_weight(position.round, position.offset)
                  if rule is AcceptanceRule.BLOCK else 1.0)
        residual_mass = np.maximum(
            np.float32(weight) * p.astype(np.float32) - q.astype(np.float32), 0).sum()
        if residual_mass > 0 and p[token] <= q[token]:
            return (f"{where}: replacement {token} has p = {p[token]:.6g} <= q = {q[token]:.6g}: "
                    "outside the residual's support")
    return ""


def check_support(positions: Sequence[_Position], powers: list[Power]) -> CheckResult:
    """No emitted token with p = 0, no stochastic replacement with p <= q, no stochastic
    rejection of a draft with p >= q (accepted with probability 1); zero tolerance."""
    violations = [v for v in map(_support_violation, positions) if v]
    return CheckResult(
        "support", "fail" if violations else "pass",
        f"violations = {len(violations)} of {len(positions)} tokens", "0 violations",
        violations[0] if violations else "", powers,
    )


# --- 3. acceptance ----------------------------------------------------------------------


def _closed_form(rule: AcceptanceRule, p: np.ndarray, q: np.ndarray) -> float:
    """The token-level rule's acceptance probability (as `acceptance_probability`)."""
    if rule is AcceptanceRule.STOCHASTIC:
        return float(np.minimum(p, q).sum())
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        return float(q[int(np.argmax(p))])
    return float(np.dot(p, q))


def _acceptance_z(accepted: np.ndarray, alpha: np.ndarray) -> tuple[float, int]:
    """(z over the random positions, impossible outcomes at certain positions)."""
    certain = (alpha <= 1e-12) | (alpha >= 1 - 1e-12)
    impossible = int(np.count_nonzero(certain & (np.abs(accepted - alpha) > 0.5)))
    variance = float(np.sum(alpha * (1 - alpha)))
    if variance <= 0:
        return 0.0, impossible
    return float(np.sum(accepted - alpha)) / math.sqrt(variance), impossible


def _acceptance_power(
    alpha: np.ndarray, alpha_bug: np.ndarray, critical: float
) -> float:
    certain = (alpha <= 1e-12) | (alpha >= 1 - 1e-12)
    caught_certain = 1.0 - float(np.prod(1.0 - np.abs(alpha_bug - alpha)[certain]))
    sd0 = math.sqrt(float(np.sum(alpha * (1 - alpha))))
    if sd0 == 0:
        return caught_certain
    shift = float(np.sum(alpha_bug - alpha)) / sd0
    sd = math.sqrt(float(np.sum(alpha_bug * (1 - alpha_bug)))) / sd0
    if sd == 0:
        caught_z = 1.0 if abs(shift) > critical else 0.0
    else:
        caught_z = (0.5 * math.erfc((critical - shift) / (sd * math.sqrt(2)))
                    + 0.5 * math.erfc((critical + shift) / (sd * math.sqrt(2))))
    return max(caught_certain, caught_z)


def _block_rounds(positions: Sequence[_Position]) -> list[Round]:
    seen: dict[int, Round] = {}
    for pos in positions:
        if _full_block_round(pos.round):
            seen[pos.round.index] = pos.round
    return list(seen.values())


def check_acceptance(
    positions: Sequence[_Position], alpha_level: float, bug_outcomes: dict[str, list[Any]],
) -> CheckResult:
    """Acceptance against the claimed rule's closed form, as one martingale z-score.

    Token-level rules contribute one term per tested position, accepted minus the
    rule's acceptance probability; block verification one term per round, the kept
    length minus its mean under `accepted_length_law`.
    """
    name = "acceptance"
    critical = float(stats.norm.isf(alpha_level / 2))
    ceiling_critical = float(stats.norm.isf(alpha_level))
    threshold = f"|z| <= {critical:.3f}, z_ceiling <= {ceiling_critical:.3f}"
    tested: list[tuple[_Position, AcceptanceRule, np.ndarray]] = []
    for pos in positions:
        rule = _token_rule(pos.round)
        if pos.tested and pos.q is not None and rule is not None:
            tested.append((pos, rule, pos.q))
    blocks = _block_rounds(positions)
    skipped = sum(1 for pos in positions if pos.tested) - len(tested) - sum(
        min(len(r.emitted), r.k) for r in blocks)
    if not tested and not blocks:
        return CheckResult(name, "not run", "n/a", threshold,
                           "no tested position has q and a rule with a closed form")
    accepted = np.array([float(pos.accepted) for pos, _, _ in tested])
    claimed = np.array([_closed_form(rule, pos.p, q) for pos, rule, q in tested])
    ceiling = np.array([float(np.minimum(pos.p, q).sum()) for pos, _, q in tested])
    _, impossible = _acceptance_z(accepted, claimed)
    # Block rounds: kept length against its law given the drafts.
    kept = np.array([float(r.num_accepted) for r in blocks])
    laws = [np.array(_joint(r).accepted_length_law, dtype=np.float64) for r in blocks]
    means = np.array([float(np.dot(np.arange(law.size), law)) for law in laws])
    variances = np.array([float(np.dot(np.arange(law.size) ** 2, law)) - m * m
                          for law, m in zip(laws, means, strict=True)])
    impossible += sum(1 for law, t in zip(laws, kept, strict=True) if law[int(t)] <= 0)
    variance = float(np.sum(claimed * (1 - claimed)) + np.sum(np.maximum(variances, 0)))
    drift = float(np.sum(accepted - claimed) + np.sum(kept - means))
    z = drift / math.sqrt(variance) if variance > 0 else 0.0
    z_ceiling, beyond = _acceptance_z(accepted, ceiling) if tested else (0.0, 0)
    above_ceiling = bool(tested) and (z_ceiling > ceiling_critical or (
        beyond > 0 and bool(np.any((ceiling <= 1e-12) & (accepted > 0.5)))))
    failed = abs(z) > critical or impossible > 0 or above_ceiling
    details = []
    if above_ceiling:
        details.append(
            f"IMPOSSIBLE: acceptance {accepted.mean():.4f} lies above the lossless ceiling "
            f"sum min(p, q) = {ceiling.mean():.4f} (z_ceiling = {z_ceiling:.2f}): no lossless "
            "rule accepts this often"
        )
    if impossible:
        details.append(f"{impossible} decisions against a certain outcome (probability 0 or 1)")
    if blocks:
        details.append(f"{len(blocks)} block-verification rounds scored by their kept length "
                       f"(mean {kept.mean():.3f}, closed form {means.mean():.3f})")
    if skipped > 0:
        details.append(f"{skipped} tested positions without q, full rows or a known rule "
                       "were left out")
    powers = []
    for bug in BUG_CLASSES:
        outcomes = bug_outcomes.get(bug.id)
        if outcomes is None:
            continue
        usable = [(pos, o) for pos, o in zip(positions, outcomes, strict=True)
                  if pos.tested and pos.q is not None and _token_rule(pos.round) is not None]
        applicable = [(pos, o) for pos, o in usable if isinstance(o, Outcome)]
        if not applicable:
            notes = {o for _, o in usable if isinstance(o, str)}
            powers.append(Power(bug.id, None, "; ".join(sorted(notes)) or
                                "no token-level tested position"))
            continue
        claimed_bug = np.array([
            _closed_form(_token_rule(pos.round) or AcceptanceRule.STOCHASTIC, pos.p,
                         o.claimed_q)
            for pos, o in applicable])
        actual_bug = np.array([o.acceptance for _, o in applicable])
        powers.append(Power(bug.id, _acceptance_power(claimed_bug, actual_bug, critical),
                            "normal approximation"))
    counted = f"accepted {int(accepted.sum())} of {len(tested)}, closed form {claimed.sum():.1f}"
    if blocks:
        counted += f"; {len(blocks)} block rounds kept {int(kept.sum())}, closed form " \
                   f"{means.sum():.1f}"
    return CheckResult(
        name, "fail" if failed else "pass",
        f"z = {z:.3f} ({counted}); z_ceiling = {z_ceiling:.3f}",
        threshold, "; ".join(details), powers,
    )


# --- 4. law -----------------------------------------------------------------------------


def _pit_bounds(p: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per token, the interval [lo, lo + p) the randomised PIT maps it into.

    Tokens are ordered by `key` descending, ties by id: an order fixed before the
    token is drawn, which is all the PIT needs.
    """
    order = np.lexsort((np.arange(p.shape[0]), -key))
    lo = np.empty_like(p)
    lo[order] = np.cumsum(p[order]) - p[order]
    return lo, p


def _keys(position: _Position, ordering: str) -> np.ndarray:
    # Under block verification a token's law is p given the emitted prefix only, not
    # given the round's drafts, so its order may read nothing of the round: p alone.
    if ordering == "q/p" and position.q is not None and _token_rule(position.round):
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = position.q / np.where(position.p > 0, position.p, 1)
            return np.where(position.p > 0, ratio, np.inf)
    return position.p


def _mean_bin_law(
    bounds: Sequence[tuple[np.ndarray, np.ndarray]], laws: Sequence[np.ndarray], bins: int
) -> np.ndarray:
    """The PIT's distribution over `bins` equal bins, averaged over positions.

    At each position a token drawn from `laws[n]` maps uniformly into its interval
    [lo, lo + width) (a zero-width token sits at lo), so the PIT's mass below an
    edge t is sum_x law(x) clip((t - lo) / width, 0, 1).
    """
    inner = np.linspace(0.0, 1.0, bins + 1)[1:-1]
    lo = np.stack([b[0] for b in bounds])
    width = np.stack([b[1] for b in bounds])
    law = np.stack(laws)
    total = np.zeros(bins)
    chunk = max(1, 2_000_000 // (inner.size * lo.shape[1] + 1))
    for start in range(0, lo.shape[0], chunk):
        part = slice(start, start + chunk)
        lo_p, width_p = lo[part, None, :], width[part, None, :]
        below = np.where(width_p > 0,
                         np.clip((inner[None, :, None] - lo_p) / np.where(width_p > 0, width_p, 1),
                                 0, 1),
                         lo_p < inner[None, :, None])
        cdf = np.einsum("nbv,nv->nb", below, law[part])
        edges = np.concatenate([np.zeros((cdf.shape[0], 1)), cdf,
                                law[part].sum(axis=1, keepdims=True)], axis=1)
        total += np.diff(edges, axis=1).sum(axis=0)
    mean: np.ndarray = total / lo.shape[0]
    return mean


def check_law(
    positions: Sequence[_Position], alpha_level: float, bug_outcomes: dict[str, list[Any]],
    bonus_bug_laws: dict[str, list[Any]],
) -> CheckResult:
    """The emitted tokens against p at each position: randomised PIT, chi-square on bins."""
    name = "law"
    n = len(positions)
    if n < _MIN_LAW_TOKENS:
        return CheckResult(name, "not run", "n/a", f"p-value >= {alpha_level / 2:g}",
                           f"needs at least {_MIN_LAW_TOKENS} tokens, the trace has {n}")
    bins = max(2, min(20, n // 5))
    threshold = f"min p-value >= {alpha_level / 2:g} (two orderings, Bonferroni)"
    rng = np.random.default_rng(LAW_SEED)
    jitter = rng.random(n)
    statistics, p_values = [], []
    bounds = {ordering: [_pit_bounds(pos.p, _keys(pos, ordering)) for pos in positions]
              for ordering in ("p", "q/p")}
    for ordering in ("p", "q/p"):
        u = np.array([lo[pos.emitted] + jitter[j] * width[pos.emitted]
                      for j, (pos, (lo, width)) in enumerate(zip(positions, bounds[ordering],
                                                                  strict=True))])
        counts = np.bincount(np.minimum((u * bins).astype(int), bins - 1), minlength=bins)
        expected = n / bins
        chi2 = float(np.sum((counts - expected) ** 2 / expected))
        statistics.append(chi2)
        p_values.append(float(stats.chi2.sf(chi2, bins - 1)))
    critical = float(stats.chi2.isf(alpha_level / 2, bins - 1))
    failed = min(p_values) < alpha_level / 2
    powers = []
    for bug in BUG_CLASSES:
        if bug.id not in bug_outcomes:
            continue
        laws: list[np.ndarray] = []
        notes: set[str] = set()
        for pos, outcome, bonus in zip(positions, bug_outcomes[bug.id], bonus_bug_laws[bug.id],
                                       strict=True):
            law = outcome.emitted if isinstance(outcome, Outcome) else bonus
            if isinstance(outcome, str):
                notes.add(outcome)
            laws.append(law if isinstance(law, np.ndarray) else pos.p)
        if all(np.array_equal(law, pos.p) for law, pos in zip(laws, positions, strict=True)):
            powers.append(Power(bug.id, None, "; ".join(sorted(notes)) or "no position affected"))
            continue
        best = 0.0
        for ordering in ("p", "q/p"):
            mean_bins = _mean_bin_law(bounds[ordering], laws, bins)
            noncentrality = n * float(np.sum((mean_bins - 1 / bins) ** 2 * bins))
            best = max(best, float(stats.ncx2.sf(critical, bins - 1, noncentrality)))
        powers.append(Power(bug.id, best, "non-central chi-square approximation"))
    return CheckResult(
        name, "fail" if failed else "pass",
        f"chi2 = {statistics[0]:.2f} (p-order), {statistics[1]:.2f} (q/p-order), {bins - 1} "
        f"d.o.f.; min p-value = {min(p_values):.3g}",
        threshold,
        "" if not failed else "the emitted tokens are not distributed as the target's p",
        powers,
    )


# --- 5. rewind --------------------------------------------------------------------------


def check_rewind(trace: Trace) -> CheckResult:
    """Lemma 7's cache invariant every round with offsets; zero tolerance."""
    name, threshold = "rewind", "0 rounds off the invariant"
    rounds = [r for r in trace.rounds if r.cache is not None]
    prompt_length = trace.prompt_length
    if not rounds or prompt_length is None:
        return CheckResult(name, "not run", "n/a", threshold, "the trace records no cache offsets")
    bad: list[str] = []
    for round_ in rounds:
        cache = round_.cache
        assert cache is not None
        start = prompt_length + round_.position - 1  # tokens before the round's current token
        end = start + len(round_.emitted)
        where = f"round {round_.index} (line {round_.line})"
        problems = []
        if cache["target_before"] != start:
            problems.append(f"target cache holds {cache['target_before']} entries at the start, "
                            f"{start} tokens precede the current token")
        if "draft_before" in cache and cache["draft_before"] + cache["draft_fed"] != start + 1:
            problems.append(
                f"drafter cache holds {cache['draft_before']} entries and is fed "
                f"{cache['draft_fed']}: it ends "
                f"{cache['draft_before'] + cache['draft_fed'] - start - 1:+d} entries off the "
                "current token")
        if not round_.stopped:
            if "target_after" in cache and cache["target_after"] != end:
                problems.append(f"target cache holds {cache['target_after']} entries after the "
                                f"rewind, {end} tokens precede the next current token")
            if "draft_after" in cache and not end - 1 <= cache["draft_after"] <= end:
                problems.append(f"drafter cache holds {cache['draft_after']} entries after the "
                                f"rewind; it must hold {end} (or {end - 1}, owing the last draft)")
        if problems:
            bad.append(f"{where}: " + "; ".join(problems))
    powers = [Power("draft-cache-over-trim",
                    1.0 if any(r.cache and ("draft_before" in r.cache or "draft_after" in r.cache)
                               for r in rounds[1:]) else None,
                    "deterministic: every round after the first shows it")]
    return CheckResult(
        name, "fail" if bad else "pass", f"rounds off = {len(bad)} of {len(rounds)}",
        threshold, bad[0] if bad else "", powers,
    )


# --- everything ---------------------------------------------------------------------------


def _support_power(
    positions: Sequence[_Position], outcomes: dict[str, list[Any]],
    bonus: dict[str, list[Any]],
) -> list[Power]:
    powers = []
    for bug in BUG_CLASSES:
        if bug.id not in outcomes:
            continue
        survive, notes, applicable = 1.0, set(), False
        for pos, outcome, bonus_law in zip(positions, outcomes[bug.id], bonus[bug.id], strict=True):
            if isinstance(outcome, str):
                notes.add(outcome)
                continue
            if isinstance(outcome, Outcome):
                applicable = True
                emitted = outcome.emitted
                violation = float(emitted[pos.p <= 0].sum())
                if (_rule(pos.round) is AcceptanceRule.STOCHASTIC and pos.q is not None
                        and np.maximum(pos.p - outcome.claimed_q, 0).sum() > 0):
                    outside = (pos.p <= outcome.claimed_q) & (pos.p > 0)
                    violation += float(outcome.replaced[outside].sum())
            elif isinstance(bonus_law, np.ndarray):
                applicable = True
                violation = float(bonus_law[pos.p <= 0].sum())
            else:
                continue
            survive *= 1.0 - min(1.0, violation)
        powers.append(Power(bug.id, 1.0 - survive if applicable else None,
                            "" if applicable else "; ".join(sorted(notes))))
    return powers


def _replay_power(
    positions: Sequence[_Position], outcomes: dict[str, list[Any]],
    bonus: dict[str, list[Any]],
) -> list[Power]:
    """A lower bound: decisions on shared uniforms differ at least with the laws' TV."""
    powers = []
    for bug in BUG_CLASSES:
        if bug.id not in outcomes:
            continue
        survive, notes, applicable = 1.0, set(), False
        for pos, outcome, bonus_law in zip(positions, outcomes[bug.id], bonus[bug.id], strict=True):
            rule = _rule(pos.round)
            if pos.round.uniforms is None or rule is None:
                continue
            if isinstance(outcome, str):
                notes.add(outcome)
                continue
            if isinstance(outcome, Outcome) and pos.q is not None:
                right = correct_outcome(rule, pos.p, outcome.claimed_q)
                distance = 0.5 * float(np.abs(right.accepted - outcome.accepted).sum()
                                       + np.abs(right.replaced - outcome.replaced).sum())
                if bug.id == "raw-logits-q":
                    distance = 0.0  # the engine decides faithfully on the q it records
            elif isinstance(bonus_law, np.ndarray):
                distance = 0.5 * float(np.abs(bonus_law - pos.p).sum())
            else:
                continue
            applicable = True
            survive *= 1.0 - min(1.0, distance)
        powers.append(Power(bug.id, 1.0 - survive if applicable else None,
                            "lower bound" if applicable else "; ".join(sorted(notes))
                            or "no replayable position"))
    return powers


def _bug_models(
    trace: Trace, positions: Sequence[_Position]
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Per bug, per position: the tested position's Outcome (or why n/a), and a bonus law."""
    outcomes: dict[str, list[Any]] = {}
    bonus: dict[str, list[Any]] = {}
    for bug in BUG_CLASSES:
        if bug.id in ROUND_LEVEL_BUGS:
            continue
        outcomes[bug.id], bonus[bug.id] = [], []
        for pos in positions:
            rule = _rule(pos.round)
            if rule is AcceptanceRule.BLOCK:
                outcomes[bug.id].append("not modelled for block verification")
                bonus[bug.id].append(None)
                continue
            if pos.tested and pos.q is not None and rule is not None:
                outcomes[bug.id].append(bug_outcome(
                    bug.id, rule, pos.p, pos.q, draft_sampler=trace.draft_sampler,
                    p_blind=pos.p_blind,
                ))
                bonus[bug.id].append(None)
                continue
            outcomes[bug.id].append(None)
            law = None
            if bug.id == "argmax-at-temperature" and np.count_nonzero(pos.p) > 1:
                law = np.zeros_like(pos.p)
                law[int(np.argmax(pos.p))] = 1.0
            elif bug.id == "penalties-blind-to-drafts" and pos.p_blind is not None:
                law = pos.p_blind
            bonus[bug.id].append(law)
    return outcomes, bonus


def check_trace(
    trace: Trace, *, alpha: float = DEFAULT_ALPHA,
    progress: Callable[[str], None] | None = None,
) -> ConformanceReport:
    """Run the six checks on a parsed trace.

    Args:
        trace: from `read_trace`.
        alpha: the false-alarm probability of each statistical check.
        progress: called with each check's name as it starts.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    positions = _positions(trace, with_blind=True)
    outcomes, bonus = _bug_models(trace, positions)
    checks: list[CheckResult] = []
    runs: tuple[tuple[str, Callable[[], CheckResult]], ...] = (
        ("replay", lambda: check_replay(trace, _replay_power(positions, outcomes, bonus))),
        ("fresh", lambda: check_fresh(trace, alpha)),
        ("support", lambda: check_support(positions, _support_power(positions, outcomes, bonus))),
        ("acceptance", lambda: check_acceptance(positions, alpha, outcomes)),
        ("law", lambda: check_law(positions, alpha, outcomes, bonus)),
        ("rewind", lambda: check_rewind(trace)),
    )
    for label, run in runs:
        if progress is not None:
            progress(label)
        checks.append(run())
    return ConformanceReport(
        rounds=len(trace.rounds),
        positions_tested=sum(1 for pos in positions if pos.tested),
        tokens=len(positions), alpha=alpha, checks=checks, truncated=trace.truncated,
    )
