"""The counters of a speculative run, and the closed forms its diagnostics add up.

`SpeculativeStats` counts what a run did; with diagnostics on, each round also adds
what theory expects of it given its drafts (`round_closed_forms`, computed lazily
inside the round and read back in its one synchronisation), so that a run's counts
can be compared with their expectation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import mlx.core as mx

from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.joint import BlockwiseVerdict
from specaccept.core.theory import acceptance_closed_forms

__all__ = ["RoundClosedForms", "SpeculativeStats", "round_closed_forms"]


@dataclass
class SpeculativeStats:
    """Counters of one generation run; the ratios follow the summary line's definitions."""

    rule: AcceptanceRule
    rounds: int = 0
    proposed: int = 0
    positions_tested: int = 0
    accepted: int = 0
    generated: int = 0
    host_syncs: int = 0
    diagnostics: bool = False
    sum_min_total: float = 0.0
    sum_prod_total: float = 0.0
    accepted_len_total: float = 0.0
    """Σ over rounds of E[accepted | the round's drafts] under the rule that ran."""
    accepted_len_variance_total: float = 0.0
    """Σ over rounds of Var[accepted | the round's drafts] under the rule that ran."""
    block_len_total: float = 0.0
    """Σ over rounds of E[accepted | the round's drafts] under block verification."""

    @property
    def per_position_acceptance(self) -> float:
        """The ratio accepted / positions_tested, predicted by theory (Σ min(p, q), stochastic)."""
        return self.accepted / self.positions_tested if self.positions_tested else 0.0

    @property
    def acceptance_rate(self) -> float:
        """The ratio accepted / proposed, low because drafts behind a rejection go untested."""
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def mean_accepted_len(self) -> float:
        """The ratio accepted / rounds, the drafts kept per round."""
        return self.accepted / self.rounds if self.rounds else 0.0

    @property
    def closed_form_sum_min(self) -> float:
        """Σ min(p, q) averaged over the tested positions (diagnostics only)."""
        return self.sum_min_total / self.positions_tested if self.positions_tested else 0.0

    @property
    def closed_form_sum_prod(self) -> float:
        """Σ p·q averaged over the tested positions (diagnostics only)."""
        return self.sum_prod_total / self.positions_tested if self.positions_tested else 0.0

    @property
    def closed_form_accepted_len(self) -> float:
        """E[accepted | drafts] of the rule that ran, per round (diagnostics only)."""
        return self.accepted_len_total / self.rounds if self.rounds else 0.0

    @property
    def closed_form_block(self) -> float:
        """E[accepted | drafts] under block verification on the same drafts, per round."""
        return self.block_len_total / self.rounds if self.rounds else 0.0

    @property
    def accepted_len_z(self) -> float:
        """(accepted - Σ E[accepted | drafts]) / sqrt(Σ Var[accepted | drafts]).

        Given each round's drafts, its accepted count has the closed-form law the
        sums read, so the numerator is a martingale with that variance: a correct
        rule reads a z within 4 of zero.
        """
        difference = self.accepted - self.accepted_len_total
        if self.accepted_len_variance_total > 0:
            return float(difference / math.sqrt(self.accepted_len_variance_total))
        return 0.0 if abs(difference) < 1e-6 else math.copysign(math.inf, difference)

    def summary_line(self) -> str:
        """The stable, greppable one-line summary of the run."""
        line = (
            f"[Speculative acceptance] rule={self.rule.value} rounds={self.rounds} "
            f"proposed={self.proposed} positions_tested={self.positions_tested} "
            f"accepted={self.accepted} "
            f"per_position_acceptance={self.per_position_acceptance:.4f} "
            f"acceptance_rate={self.acceptance_rate:.4f} "
            f"mean_accepted_len={self.mean_accepted_len:.4f}"
        )
        if self.diagnostics:
            line += (
                f" closed_form_sum_min={self.closed_form_sum_min:.4f}"
                f" closed_form_sum_prod={self.closed_form_sum_prod:.4f}"
                f" closed_form_accepted_len={self.closed_form_accepted_len:.4f}"
                f" closed_form_block={self.closed_form_block:.4f}"
            )
        return line

    def count_round(self, proposed: int, accepted: int) -> int:
        """Count a drafting round that kept `accepted` of its `proposed` drafts.

        It returns the positions the round tested: the drafts behind the first
        rejection go untested.
        """
        tested = min(accepted + 1, proposed)
        self.rounds += 1
        self.proposed += proposed
        self.positions_tested += tested
        self.accepted += accepted
        return tested

    def count_closed_forms(
        self, tested: int, sum_min: list[float], sum_prod: list[float], survival: list[float],
        block_survival: list[float],
    ) -> None:
        """Add a round's closed forms (`RoundClosedForms`, read back) over its tested positions."""
        self.sum_min_total += sum(sum_min[:tested])
        self.sum_prod_total += sum(sum_prod[:tested])
        # P(accepted >= i | drafts), i = 1..k: the mean is their sum, and
        # E[accepted^2] = Σ (2i - 1) P(accepted >= i).
        mean = sum(survival)
        self.accepted_len_total += mean
        self.accepted_len_variance_total += max(
            sum((2 * i + 1) * s for i, s in enumerate(survival)) - mean * mean, 0.0
        )
        self.block_len_total += sum(block_survival)


class RoundClosedForms(NamedTuple):
    """What theory expects of one round given its drafts, as lazy `[k]` arrays."""

    sum_min: mx.array
    """Σ min(p, q) at each drafted position."""
    sum_prod: mx.array
    """Σ p·q at each drafted position."""
    survival: mx.array
    """P(accepted >= i | drafts), i = 1..k, under the rule that ran."""
    block_survival: mx.array
    """The same under block verification, on the same drafts."""


def round_closed_forms(
    rule: AcceptanceRule, target_probs: mx.array, draft_probs: mx.array,
    draft_tokens: mx.array, joint: BlockwiseVerdict,
) -> RoundClosedForms:
    """The closed forms of a round of k drafts; `joint` is `verify_blockwise` on its arrays.

    Args:
        rule: the rule that decided the round.
        target_probs: `[k+1, V]`, the target's rows.
        draft_probs: `[k, V]`, the laws the drafts were drawn from.
        draft_tokens: `[k]` int32.
        joint: block verification of the same round, whose kept length's law it reads.
    """
    k = draft_tokens.shape[0]
    forms = acceptance_closed_forms(target_probs[:k], draft_probs)
    block_survival = _survival(joint.accepted_length_law)
    survival = (block_survival if rule.verifies_jointly
                else _token_survival(rule, target_probs[:k], draft_probs, draft_tokens))
    return RoundClosedForms(forms.sum_min, forms.sum_prod, survival, block_survival)


def _survival(law: mx.array) -> mx.array:
    """P(tau >= i), i = 1..k, from the law of tau over 0..k."""
    return mx.cumsum(law[::-1])[::-1][1:]


def _token_survival(
    rule: AcceptanceRule, target_probs: mx.array, draft_probs: mx.array, draft_tokens: mx.array
) -> mx.array:
    """P(accepted >= i | drafts), i = 1..k, for a rule that verifies token by token.

    Position j keeps its draft t with probability c_j given t: min(1, p(t)/q(t)) for
    stochastic (0 when p(t) = 0, 1 when q(t) = 0 < p(t)), p(t) for sampler-match (the
    target's draw equals t), [t = argmax p] for greedy-argmax; the prefix survives
    position i with probability c_1 ... c_i.
    """
    p_t = mx.take_along_axis(target_probs, draft_tokens[:, None], axis=-1)[:, 0]
    if rule is AcceptanceRule.STOCHASTIC:
        q_t = mx.take_along_axis(draft_probs, draft_tokens[:, None], axis=-1)[:, 0]
        ratio = mx.minimum(p_t / mx.where(q_t > 0, q_t, 1.0), 1.0)
        keep = mx.where(p_t > 0, mx.where(q_t > 0, ratio, 1.0), 0.0)
    elif rule is AcceptanceRule.GREEDY_ARGMAX:
        keep = (mx.argmax(target_probs, axis=-1) == draft_tokens).astype(mx.float32)
    else:
        keep = p_t
    return mx.cumprod(keep)

