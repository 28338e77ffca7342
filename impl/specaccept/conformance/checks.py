"""`TraceChecker`: every conformance check as a streaming state, and `check_trace`.

Each check has its own module (replay, fresh, support, acceptance, law, rewind, and
draftlaw, history, batch) with its statistic, threshold, verdict and power, kept as a state
with ``update`` (one round), ``merge`` (a later piece's state: the result equals that of
one pass over the concatenation) and ``result``. ``spec/trace_format.md`` defines the trace
and ``docs/conformance_checks.md`` says why each check is built as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from specaccept.conformance.acceptance import AcceptanceState
from specaccept.conformance.batch import BatchState, PieceConflict
from specaccept.conformance.draftlaw import DraftLawState
from specaccept.conformance.exact import State
from specaccept.conformance.fresh import FreshState
from specaccept.conformance.history import HistoryState
from specaccept.conformance.law import LawState
from specaccept.conformance.positions import round_facts
from specaccept.conformance.replay import ReplayState
from specaccept.conformance.report import CheckResult, ConformanceReport
from specaccept.conformance.rewind import RewindState
from specaccept.conformance.support import SupportState
from specaccept.conformance.trace import Round, Trace, TreeRound
from specaccept.conformance.tree_checks import TreeState, tree_read_uniforms
from specaccept.conformance.written_stats import WrittenStatsState

__all__ = ["DEFAULT_ALPHA", "PieceConflict", "RunSpan", "TraceChecker", "check_trace"]

DEFAULT_ALPHA = 1e-4
"""The false-alarm probability of each statistical check."""


@dataclass
class RunSpan(State):
    """Where a run's rounds lie in a piece: how it entered (None: opened in the piece, else
    the (round, position) it resumed at, and the line) and where it left off."""

    source: str
    line: int
    entry: tuple[int, int] | None
    exit: tuple[int, int]


@dataclass
class TraceChecker(State):
    """Every check's state over a trace, or over a piece of one.

    Feed rounds in file order with `update` (with the run's history before each round
    when its sampler reads the history), merge a later piece with `merge`, and read the
    report with `report`. Tree rounds go to the six tree checks' states (`TreeState`),
    which stream as the chain checks do.
    """

    vocab_size: int
    header: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    """The trace file the rounds came from (a batch step is a step of one file)."""
    rounds: int = 0
    with_rows: int = 0
    """Chain rounds that hold their rows (all of a full trace's)."""
    modelled: int = 0
    tokens: int = 0
    positions_tested: int = 0
    replay: ReplayState = field(default_factory=ReplayState)
    fresh: FreshState = field(default_factory=FreshState)
    support: SupportState = field(default_factory=SupportState)
    acceptance: AcceptanceState = field(default_factory=AcceptanceState)
    law: LawState = field(default_factory=LawState)
    rewind: RewindState = field(default_factory=RewindState)
    draft_law: DraftLawState = field(default_factory=DraftLawState)
    history: HistoryState = field(default_factory=HistoryState)
    batch: BatchState = field(default_factory=BatchState)
    written_stats: WrittenStatsState = field(default_factory=WrittenStatsState)
    tree: TreeState = field(default_factory=TreeState)
    runs: dict[str, RunSpan] = field(default_factory=dict)
    truncated: str | None = None

    def update(self, round_: Round | TreeRound, history: list[int] | None = None) -> None:
        """One round; `history` is the run's prompt and emitted tokens before it (needed only
        when a sampler reads the history)."""
        if isinstance(round_, TreeRound):
            self.tree.update(round_)
            self.fresh.read(tree_read_uniforms(round_), round_.index, round_.line,
                            round_.run.id)
            return
        facts = round_facts(round_, history or [], self.vocab_size)
        self.rounds += 1
        self.with_rows += round_.has_rows
        self.modelled += facts.modelled
        self.tokens += len(facts.positions)
        self.positions_tested += sum(1 for pos in facts.positions if pos.tested)
        self.replay.update(facts)
        self.fresh.update(round_, None if facts.block is None
                          else facts.block.accepted_length_law)
        self.support.update(facts)
        self.acceptance.update(facts)
        self.law.update(facts)
        self.rewind.update(round_)
        self.draft_law.update(facts)
        self.history.update(facts)
        self.batch.update(facts, self.source)
        self.written_stats.update(facts)

    def merge(self, other: TraceChecker) -> None:
        """Append the state of the next piece (a later part of the same trace, or another
        trace file of the same engine, whose runs are its own)."""
        for key in ("format", "vocab_size", "engine", "compact"):
            if self.header.get(key) != other.header.get(key):
                raise PieceConflict(f"the pieces' headers differ in {key!r}: "
                                    f"{self.header.get(key)!r} against {other.header.get(key)!r}")
        for run_id, span in other.runs.items():
            mine = self.runs.get(run_id)
            if mine is None:
                # A run entering a piece at its first round had no rounds before it.
                if span.entry is not None and span.entry != (0, 0):
                    raise PieceConflict(f"{span.source} line {span.line}: run {run_id!r} "
                                        f"resumes at round {span.entry[0]}, but no earlier "
                                        "piece holds its earlier rounds")
                self.runs[run_id] = span
                continue
            if span.entry is None and mine.entry is not None and mine.entry != (0, 0):
                raise PieceConflict(f"{span.source} line {span.line}: opens run {run_id!r}, "
                                    f"which an earlier piece resumes at round {mine.entry[0]} "
                                    f"({mine.source} line {mine.line}): pieces out of order")
            if span.entry is None:
                raise PieceConflict(f"{span.source} line {span.line}: opens run {run_id!r}, "
                                    f"which {mine.source} line {mine.line} already opened")
            if span.entry != mine.exit:
                raise PieceConflict(
                    f"{span.source} line {span.line}: run {run_id!r} resumes at round "
                    f"{span.entry[0]}, position {span.entry[1]}, but the pieces before it end "
                    f"at round {mine.exit[0]}, position {mine.exit[1]}")
            mine.exit = span.exit
        if self.truncated is not None and (other.rounds or other.tree.rounds):
            raise PieceConflict(f"a piece before the last is truncated ({self.truncated})")
        self.truncated = other.truncated
        self.rounds += other.rounds
        self.with_rows += other.with_rows
        self.modelled += other.modelled
        self.tokens += other.tokens
        self.positions_tested += other.positions_tested
        for name in ("replay", "fresh", "support", "acceptance", "law", "rewind", "draft_law",
                     "history", "batch", "written_stats"):
            getattr(self, name).merge(getattr(other, name))
        self.tree.merge(other.tree)

    def report(self, alpha: float = DEFAULT_ALPHA,
               progress: Callable[[str], None] | None = None) -> ConformanceReport:
        """Every check's result: the chain checks on the chain rounds, the six tree checks
        on the tree rounds (a trace of tree rounds alone gets the tree checks alone)."""
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        # Checks that read every round's statistics scale the modelled rounds' powers to
        # every round; replay and history read the rounds with rows alone.
        scale = self.rounds / self.modelled if self.modelled else 1.0
        rows_scale = self.with_rows / self.modelled if self.modelled else 1.0
        runs: tuple[tuple[str, Callable[[], CheckResult]], ...] = (
            ("replay", lambda: self.replay.result(rows_scale)),
            ("fresh", lambda: self.fresh.result(alpha)),
            ("support", lambda: self.support.result(scale)),
            ("acceptance", lambda: self.acceptance.result(alpha, scale)),
            ("law", lambda: self.law.result(alpha)),
            ("rewind", lambda: self.rewind.result()),
            ("draft-law", lambda: self.draft_law.result(alpha)),
            ("history", lambda: self.history.result(alpha, rows_scale)),
            ("batch", lambda: self.batch.result(alpha)),
        ) + ((("stats", lambda: self.written_stats.result()),)
             if self.header.get("compact") is not None else ())
        checks: list[CheckResult] = []
        if self.rounds or not self.tree.rounds:
            for label, run in runs:
                if progress is not None:
                    progress(label)
                checks.append(run())
        if self.tree.rounds and progress is not None:
            progress("tree checks")
        checks += self.tree.results(alpha)
        report = ConformanceReport(
            rounds=self.rounds + self.tree.rounds,
            positions_tested=self.positions_tested + self.tree.tested,
            tokens=self.tokens + self.tree.tokens, alpha=alpha,
            checks=checks, truncated=self.truncated,
        )
        if self.modelled < self.rounds:
            report.power_note = (f"powers estimated on the {self.modelled} of {self.rounds} "
                                 f"rounds the power model read (vocab_size {self.vocab_size})")
        if self.with_rows < self.rounds:
            report.power_note = (f"{report.power_note}; " if report.power_note else "") + (
                f"compact trace: {self.with_rows} of {self.rounds} rounds keep their rows "
                "(replay, history and the power model read those)")
        return report


def check_rounds(
    rounds: Iterable[Round | TreeRound], vocab_size: int, header: dict[str, Any],
    histories: dict[str, list[int]],
) -> TraceChecker:
    """A checker fed `rounds` in order, with the runs' histories kept from `histories`
    (each run's prompt), for rounds whose samplers read them."""
    checker = TraceChecker(vocab_size=vocab_size, header=header)
    for round_ in rounds:
        history = histories.setdefault(round_.run.id, list(round_.run.prompt or []))
        checker.update(round_, history)
        history += round_.emitted
    return checker


def check_trace(
    trace: Trace, *, alpha: float = DEFAULT_ALPHA,
    progress: Callable[[str], None] | None = None,
) -> ConformanceReport:
    """Run the chain checks on a parsed trace's chain rounds, and the six tree checks on its
    tree rounds (a trace of tree rounds alone gets the tree checks alone).

    Args:
        trace: from `read_trace`.
        alpha: the false-alarm probability of each statistical check.
        progress: called with each check's name as it starts.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    everything: list[Round | TreeRound] = [*trace.rounds, *trace.tree_rounds]
    ordered = sorted(everything, key=lambda r: r.line)
    checker = check_rounds(ordered, trace.vocab_size, trace.header, {})
    checker.truncated = trace.truncated
    return checker.report(alpha, progress)
