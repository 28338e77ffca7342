"""The known bug classes, as what each would do to one position: the kit's power model.

For a position with target law p and draft law q, a bug class of single positions gives
the law of the position's outcome had the engine had that bug (`BugClass.outcome`): the
mass of "draft x accepted" and of "replacement y emitted", and the q the engine would
have recorded; and the law of an untested position's token (`BugClass.bonus_law`). The
checks turn these into the probability that they would have caught the bug on the
trace's own positions. A bug class of whole rounds (caches, keying) has no such model:
the check that sees it scores it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.sampler_config import SamplerConfig

__all__ = [
    "BUG_CLASSES",
    "DRAFT_CACHE_OVER_TRIM",
    "MIS_DESCRIBED_DRAFTER",
    "POSITION_KEYED_UNIFORMS",
    "SHARED_BATCH_COIN",
    "TEMPERATURE_SQUARED",
    "BonusLaws",
    "BugClass",
    "Outcome",
    "PositionOutcomes",
    "correct_outcome",
    "emitted_laws",
]


@dataclass(frozen=True)
class Outcome:
    """The law of one tested position's outcome, over tokens."""

    accepted: np.ndarray
    """`[V]`: probability that draft x is drawn and accepted."""
    replaced: np.ndarray
    """`[V]`: probability that the draft is rejected and y emitted instead."""
    claimed_q: np.ndarray
    """`[V]`: the q the engine would record (the kit's closed form reads it)."""
    drafted: np.ndarray | None = None
    """`[V]`: the law the draft was drawn from, when it is not `claimed_q` (the draft-law
    check reads it); None when the draft was drawn from the q the engine records."""

    @property
    def acceptance(self) -> float:
        """The probability of accepting."""
        return float(self.accepted.sum())

    @property
    def emitted(self) -> np.ndarray:
        """The law of the emitted token."""
        law: np.ndarray = self.accepted + self.replaced
        return law


def _normalised(weights: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    total = weights.sum()
    return weights / total if total > 0 else fallback


def _decide(rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, test_q: np.ndarray) -> Outcome:
    """Drafts drawn from q, decided by `rule` as if they came from `test_q`."""
    if rule is AcceptanceRule.STOCHASTIC:
        with np.errstate(divide="ignore", invalid="ignore"):
            keep = np.where(test_q > 0, np.minimum(1.0, p / test_q), (p > 0).astype(np.float64))
        keep = np.where(p > 0, keep, 0.0)
        accepted = q * keep
        residual = _normalised(np.maximum(p - test_q, 0.0), p)
        return Outcome(accepted, (1.0 - accepted.sum()) * residual, test_q, q)
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        winner = np.zeros_like(p)
        winner[int(np.argmax(p))] = 1.0
        accepted = q * winner
        return Outcome(accepted, winner * (1.0 - accepted.sum()), test_q, q)
    # sampler-match: the draw x from p is kept iff it equals the draft.
    accepted = p * q
    return Outcome(accepted, p - accepted, test_q, q)


def correct_outcome(rule: AcceptanceRule, p: np.ndarray, q: np.ndarray) -> Outcome:
    """The outcome law the spec gives a position (drafts drawn from q)."""
    return _decide(rule, p, q, q)


@dataclass(frozen=True)
class BugClass:
    """A known way engines lose losslessness or correctness.

    This base class is a bug of whole rounds, with no per-position model; the bug
    classes of single positions override `models_positions` and `outcome`.
    """

    id: str
    """Stable id, as reported."""
    description: str
    """One line, in the spec's terms."""

    models_positions: ClassVar[bool] = False
    """True when `outcome` models the bug at one position."""
    hidden_from_replay: ClassVar[bool] = False
    """True when the engine decides faithfully on the rows it records, so that replaying
    them finds no divergence whatever the recorded rows are."""

    def outcome(
        self, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, *,
        draft_sampler: SamplerConfig | None = None, p_blind: np.ndarray | None = None,
        target_sampler: SamplerConfig | None = None,
    ) -> Outcome | str:
        """The tested position's outcome law under the bug, or a string saying why the bug
        does not apply.

        Args:
            rule: the claimed rule.
            p, q: the position's target and draft laws, float64.
            draft_sampler: the drafter's sampler, which raw-logits-q needs.
            p_blind: p recomputed without the round's drafts in the history
                (penalties-blind-to-drafts); None when it equals p or cannot be computed.
            target_sampler: the target's sampler, which temperature-squared needs.
        """
        raise ValueError(f"bug class {self.id!r} is a bug of whole rounds: it has no "
                         "per-position outcome (models_positions is False)")

    def bonus_law(self, p: np.ndarray, p_blind: np.ndarray | None, *,
                  target_sampler: SamplerConfig | None = None) -> np.ndarray | None:
        """The law of an untested position's token under the bug; None when it stays p."""
        return None


class _ResampleFromP(BugClass):
    models_positions = True

    def outcome(
        self, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, *,
        draft_sampler: SamplerConfig | None = None, p_blind: np.ndarray | None = None,
        target_sampler: SamplerConfig | None = None,
    ) -> Outcome | str:
        if rule is not AcceptanceRule.STOCHASTIC:
            return "only the stochastic rule has a residual"
        right = correct_outcome(rule, p, q)
        return Outcome(right.accepted, (1.0 - right.acceptance) * p, q)


class _SoftmaxResidual(BugClass):
    models_positions = True

    def outcome(
        self, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, *,
        draft_sampler: SamplerConfig | None = None, p_blind: np.ndarray | None = None,
        target_sampler: SamplerConfig | None = None,
    ) -> Outcome | str:
        if rule is not AcceptanceRule.STOCHASTIC:
            return "only the stochastic rule has a residual"
        right = correct_outcome(rule, p, q)
        shifted = np.exp(p - q - np.max(p - q))
        return Outcome(right.accepted, (1.0 - right.acceptance) * shifted / shifted.sum(), q)


class _RawLogitsQ(BugClass):
    models_positions = True
    # The engine records the q it tested with, so its decisions replay faithfully.
    hidden_from_replay = True

    def outcome(
        self, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, *,
        draft_sampler: SamplerConfig | None = None, p_blind: np.ndarray | None = None,
        target_sampler: SamplerConfig | None = None,
    ) -> Outcome | str:
        if rule is not AcceptanceRule.STOCHASTIC:
            return "only the stochastic rule reads q"
        if draft_sampler is None:
            return "needs the drafter's sampler in the header"
        if draft_sampler != SamplerConfig(temperature=draft_sampler.temperature):
            return "raw logits are recoverable from q only for a temperature-only drafter"
        if draft_sampler.temperature == 0.0:
            return "a greedy drafter has no temperature to forget"
        # q = softmax(l / T), so softmax(l) is proportional to q ** T.
        raw = np.where(q > 0, np.power(np.where(q > 0, q, 1.0), draft_sampler.temperature), 0.0)
        return _decide(rule, p, q, raw / raw.sum())


class _ArgmaxAtTemperature(BugClass):
    models_positions = True

    def outcome(
        self, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, *,
        draft_sampler: SamplerConfig | None = None, p_blind: np.ndarray | None = None,
        target_sampler: SamplerConfig | None = None,
    ) -> Outcome | str:
        if np.count_nonzero(p) <= 1:
            return "the target is greedy here"
        return _decide(AcceptanceRule.GREEDY_ARGMAX, p, q, q)

    def bonus_law(self, p: np.ndarray, p_blind: np.ndarray | None, *,
                  target_sampler: SamplerConfig | None = None) -> np.ndarray | None:
        if np.count_nonzero(p) <= 1:
            return None
        law = np.zeros_like(p)
        law[int(np.argmax(p))] = 1.0
        return law


class _PenaltiesBlindToDrafts(BugClass):
    models_positions = True

    def outcome(
        self, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, *,
        draft_sampler: SamplerConfig | None = None, p_blind: np.ndarray | None = None,
        target_sampler: SamplerConfig | None = None,
    ) -> Outcome | str:
        if p_blind is None:
            return "needs logits rows and a target sampler that reads the history"
        return _decide(rule, p_blind, q, q)

    def bonus_law(self, p: np.ndarray, p_blind: np.ndarray | None, *,
                  target_sampler: SamplerConfig | None = None) -> np.ndarray | None:
        return p_blind


# --- Drafters whose recorded law is not the law they drew from (the draft-law check) ---


class _MisDescribedDrafter(BugClass):
    """Draws at temperature T**2 while recording the law at T: a temperature applied twice.

    With q = softmax(l / T) recorded, the drafts come from softmax(l / T**2), which is
    proportional to q ** (1 / T) on q's support.
    """

    models_positions = True
    # The engine tests with the q it records, so its decisions replay faithfully.
    hidden_from_replay = True

    def outcome(
        self, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, *,
        draft_sampler: SamplerConfig | None = None, p_blind: np.ndarray | None = None,
        target_sampler: SamplerConfig | None = None,
    ) -> Outcome | str:
        if draft_sampler is None:
            return "needs the drafter's sampler in the header"
        temperature = draft_sampler.temperature
        if temperature == 0.0:
            return "a greedy drafter has no temperature to apply twice"
        if temperature == 1.0:
            return "at temperature 1 a temperature applied twice leaves q as it is"
        drawn = np.where(q > 0, np.power(np.where(q > 0, q, 1.0), 1.0 / temperature), 0.0)
        return _decide(rule, p, drawn / drawn.sum(), q)


MIS_DESCRIBED_DRAFTER = _MisDescribedDrafter(
    "mis-described-drafter",
    "draw the drafts at temperature T**2 while recording q at T (a temperature applied twice)")
"""Scored by the draft-law check (and, through the rule, by acceptance and law)."""


class _TemperatureSquared(BugClass):
    """Draws the target's tokens at temperature T**2 while recording p at T: a temperature
    applied twice (a sampler chain dividing the logits by T twice).

    With p = softmax(l / T) recorded, the tokens come from softmax(l / T**2), which is
    proportional to p ** (1 / T) on p's support. Below 1 the law is sharper than p, above 1
    flatter: over a trace of both the law check's settings must be kept apart.
    """

    models_positions = True

    @staticmethod
    def drawn(p: np.ndarray, target_sampler: SamplerConfig | None) -> np.ndarray | str:
        """The law the target's tokens come from, or why the bug does not apply."""
        if target_sampler is None:
            return "needs the target's sampler in the header"
        if target_sampler != SamplerConfig(temperature=target_sampler.temperature):
            return "modelled for a temperature-only target sampler"
        temperature = target_sampler.temperature
        if temperature == 0.0:
            return "a greedy target has no temperature to apply twice"
        if temperature == 1.0:
            return "at temperature 1 a temperature applied twice leaves p as it is"
        # In logs, shifted by the largest: p ** (1 / T) underflows for a small T.
        support = p > 0
        logs = np.log(np.where(support, p, 1.0))
        law = np.where(support, np.exp((logs - logs[support].max()) / temperature), 0.0)
        drawn: np.ndarray = law / law.sum()
        return drawn

    def outcome(
        self, rule: AcceptanceRule, p: np.ndarray, q: np.ndarray, *,
        draft_sampler: SamplerConfig | None = None, p_blind: np.ndarray | None = None,
        target_sampler: SamplerConfig | None = None,
    ) -> Outcome | str:
        drawn = self.drawn(p, target_sampler)
        if isinstance(drawn, str):
            return drawn
        return _decide(rule, drawn, q, q)

    def bonus_law(self, p: np.ndarray, p_blind: np.ndarray | None, *,
                  target_sampler: SamplerConfig | None = None) -> np.ndarray | None:
        drawn = self.drawn(p, target_sampler)
        return None if isinstance(drawn, str) else drawn


TEMPERATURE_SQUARED = _TemperatureSquared(
    "temperature-squared",
    "draw the target's tokens at temperature T**2 while recording p at T (a temperature "
    "applied twice)")
"""Scored by the law check, per sampler setting (and by replay, acceptance, support)."""


DRAFT_CACHE_OVER_TRIM = BugClass(
    "draft-cache-over-trim", "trim the draft cache two entries too many (seed #994)")
"""Scored by the rewind check."""
POSITION_KEYED_UNIFORMS = BugClass(
    "position-keyed-uniforms", "key block verification's tests by absolute position, so a "
    "round re-reads the tests the last one's kept length read")
"""Scored by the fresh-randomness check."""
SHARED_BATCH_COIN = BugClass(
    "shared-batch-coin", "verify the requests of one batch step with one row of uniforms "
    "shared by every request")
"""Scored by the batch check."""

BUG_CLASSES: tuple[BugClass, ...] = (
    _ResampleFromP("resample-from-p",
                   "on rejection, draw the replacement from p, not relu(p - q)"),
    _SoftmaxResidual("softmax-residual",
                     "normalise the residual with softmax(p - q), not by its sum"),
    _RawLogitsQ("raw-logits-q",
                "test with q = softmax(raw logits) while drafting from the tempered law"),
    _ArgmaxAtTemperature("argmax-at-temperature",
                         "emit argmax p for a sampled (temperature > 0) request"),
    _PenaltiesBlindToDrafts("penalties-blind-to-drafts",
                            "compute row i's penalties without drafts[:i] in the history"),
    DRAFT_CACHE_OVER_TRIM,
    POSITION_KEYED_UNIFORMS,
    MIS_DESCRIBED_DRAFTER,
    TEMPERATURE_SQUARED,
    SHARED_BATCH_COIN,
)
"""Every known bug class, in report order."""

PositionOutcomes = dict[BugClass, list[Outcome | str | None]]
"""Per bug class of single positions, per decided position: the tested position's
`Outcome`, a string saying why the bug does not apply there, or None for an untested one."""
BonusLaws = dict[BugClass, list[np.ndarray | None]]
"""Per bug class of single positions, per decided position: the law of an untested
position's token under the bug; None where it stays p or the position is tested."""


def emitted_laws(
    target_laws: Sequence[np.ndarray], outcomes: Sequence[Outcome | str | None],
    bonus_laws: Sequence[np.ndarray | None],
) -> tuple[list[np.ndarray] | None, str]:
    """The law of each position's emitted token under a bug, for the tests of emitted tokens.

    A position the bug does not model (its outcome a note, or None) keeps its target law.
    Returns (None, why) when no position's law moves: no test of the emitted tokens can see
    the bug on this trace, and `why` joins the notes (or says no position was affected).
    """
    laws: list[np.ndarray] = []
    notes: set[str] = set()
    for p, outcome, bonus in zip(target_laws, outcomes, bonus_laws, strict=True):
        law = outcome.emitted if isinstance(outcome, Outcome) else bonus
        if isinstance(outcome, str):
            notes.add(outcome)
        laws.append(law if isinstance(law, np.ndarray) else p)
    if all(np.array_equal(law, p) for law, p in zip(laws, target_laws, strict=True)):
        return None, "; ".join(sorted(notes)) or "no position affected"
    return laws, ""
