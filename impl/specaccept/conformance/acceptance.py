"""The acceptance check: accepted drafts against the claimed rule's closed form, as one z-score."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from specaccept.conformance.bugs import BUG_CLASSES, Outcome, PositionOutcomes
from specaccept.conformance.positions import (
    Position,
    is_full_block_round,
    token_rule,
    verify_block_round,
)
from specaccept.conformance.report import CheckResult, Power, Verdict
from specaccept.conformance.trace import Round
from specaccept.core.acceptance import AcceptanceRule

__all__ = ["check_acceptance"]


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


def _block_rounds(positions: Sequence[Position]) -> list[Round]:
    seen: dict[int, Round] = {}
    for pos in positions:
        if is_full_block_round(pos.round):
            seen[pos.round.index] = pos.round
    return list(seen.values())


def check_acceptance(
    positions: Sequence[Position], alpha_level: float, bug_outcomes: PositionOutcomes,
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
    tested: list[tuple[Position, AcceptanceRule, np.ndarray]] = []
    for pos in positions:
        rule = token_rule(pos.round)
        if pos.tested and pos.q is not None and rule is not None:
            tested.append((pos, rule, pos.q))
    blocks = _block_rounds(positions)
    skipped = sum(1 for pos in positions if pos.tested) - len(tested) - sum(
        min(len(r.emitted), r.k) for r in blocks)
    if not tested and not blocks:
        return CheckResult(name, Verdict.NOT_RUN, "n/a", threshold,
                           "no tested position has q and a rule with a closed form")
    accepted = np.array([float(pos.accepted) for pos, _, _ in tested])
    claimed = np.array([_closed_form(rule, pos.p, q) for pos, rule, q in tested])
    ceiling = np.array([float(np.minimum(pos.p, q).sum()) for pos, _, q in tested])
    _, impossible = _acceptance_z(accepted, claimed)
    # Block rounds: kept length against its law given the drafts.
    kept = np.array([float(r.num_accepted) for r in blocks])
    laws = [np.array(verify_block_round(r).accepted_length_law, dtype=np.float64) for r in blocks]
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
        outcomes = bug_outcomes.get(bug)
        if outcomes is None:
            continue
        usable = [(pos, o) for pos, o in zip(positions, outcomes, strict=True)
                  if pos.tested and pos.q is not None and token_rule(pos.round) is not None]
        applicable = [(pos, o) for pos, o in usable if isinstance(o, Outcome)]
        if not applicable:
            notes = {o for _, o in usable if isinstance(o, str)}
            powers.append(Power(bug.id, None, "; ".join(sorted(notes)) or
                                "no token-level tested position"))
            continue
        claimed_bug = np.array([
            _closed_form(token_rule(pos.round) or AcceptanceRule.STOCHASTIC, pos.p,
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
        name, Verdict.FAIL if failed else Verdict.PASS,
        f"z = {z:.3f} ({counted}); z_ceiling = {z_ceiling:.3f}",
        threshold, "; ".join(details), powers,
    )
