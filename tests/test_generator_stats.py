"""The run's counters, its one host sync per round, its summary line, and where it stops.

Counters: every round proposes k drafts, tests a prefix of them up to and
including the first rejection, accepts `a` and emits `a + 1` tokens, so
``accepted <= positions_tested <= proposed`` and, without EOS,
``generated == accepted + rounds``. Each round evaluates exactly once
(`_read_back`), so ``host_syncs == rounds``; a static check keeps every other
function a round reaches free of evaluations.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable

import pytest

import specaccept.shell.generator as generator_module
import specaccept.shell.stats as stats_module
from specaccept import SamplerConfig
from specaccept.shell import caches, guards
from specaccept.shell.generator import RuleChoice, SpeculativeGenerator
from specaccept.shell.target_only import target_only_generate
from synthetic_models import (
    SyntheticLM,
    agree_one_in_six,
    collect,
    cycle_logits,
    markov2_logits,
    never_agree,
    random_markov2_table,
    shifted_cycle_logits,
)

VOCAB = 6
GREEDY = SamplerConfig(temperature=0.0)
WARM = SamplerConfig(temperature=1.0)
TABLE = random_markov2_table(VOCAB, 31)
DRAFT_TABLE = 0.5 * TABLE + 0.5 * random_markov2_table(VOCAB, 32)

Scenario = tuple[Callable[[], SyntheticLM], Callable[[], SyntheticLM], SamplerConfig, RuleChoice]


def _cycle() -> SyntheticLM:
    return SyntheticLM(VOCAB, cycle_logits(VOCAB))


def _markov() -> SyntheticLM:
    return SyntheticLM(VOCAB, markov2_logits(TABLE))


SCENARIOS: dict[str, Scenario] = {
    "greedy-all-reject": (
        _cycle, lambda: SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, never_agree)), GREEDY,
        "auto",
    ),
    "greedy-mixed": (
        _cycle, lambda: SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, agree_one_in_six)),
        GREEDY, "auto",
    ),
    "greedy-all-accept": (_cycle, _cycle, GREEDY, "auto"),
    "stochastic-mixed": (
        _markov, lambda: SyntheticLM(VOCAB, markov2_logits(DRAFT_TABLE)), WARM, "stochastic"
    ),
    "stochastic-all-accept": (_markov, _markov, WARM, "stochastic"),
    "sampler-match-mixed": (
        _markov, lambda: SyntheticLM(VOCAB, markov2_logits(DRAFT_TABLE)), WARM, "sampler-match"
    ),
    "block-mixed": (
        _markov, lambda: SyntheticLM(VOCAB, markov2_logits(DRAFT_TABLE)), WARM, "block"
    ),
    "block-all-accept": (_markov, _markov, WARM, "block"),
}
PROMPT = [3, 0, 5]


def _generator(
    scenario: str,
    k: int,
    *,
    eos: frozenset[int] = frozenset(),
    check_caches: bool = False,
    diagnostics: bool = False,
) -> SpeculativeGenerator:
    target, drafter, config, rule = SCENARIOS[scenario]
    return SpeculativeGenerator(
        target(), drafter(), config, num_draft_tokens=k, rule=rule, eos_token_ids=eos,
        check_caches=check_caches, diagnostics=diagnostics,
    )


@pytest.mark.parametrize("k", [1, 3, 4])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_counter_identities_and_one_sync_per_round(scenario: str, k: int) -> None:
    generator = _generator(scenario, k, diagnostics=True)
    run = generator.generate(PROMPT, 53, seed=5)
    blocks = list(run)
    stream = collect(blocks)
    stats = run.stats
    assert all(blocks)  # every round emits at least one token
    assert stats.generated == len(stream) == 53
    assert stats.accepted <= stats.positions_tested <= stats.proposed <= k * stats.rounds
    assert stats.generated == stats.accepted + stats.rounds
    assert stats.rounds == len(blocks)
    assert stats.host_syncs == stats.rounds  # exactly one host synchronisation per round
    assert stats.closed_form_sum_min >= stats.closed_form_sum_prod
    if scenario.endswith("all-accept"):
        assert stats.accepted == stats.positions_tested == stats.proposed
    if scenario.endswith("all-reject"):
        assert stats.accepted == 0 and stats.positions_tested == stats.rounds - 1


def _evaluating_calls(function: ast.AST) -> list[str]:
    """The `mx.eval(...)`, `.item()` and `.tolist()` calls inside a function's body."""
    found = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attribute = node.func
        if attribute.attr in ("item", "tolist"):
            found.append(f".{attribute.attr}() at line {node.lineno}")
        elif (
            attribute.attr == "eval"
            and isinstance(attribute.value, ast.Name)
            and attribute.value.id == "mx"
        ):
            found.append(f"mx.eval() at line {node.lineno}")
    return found


def _round_functions() -> dict[str, ast.FunctionDef]:
    """Every function and method of the modules a speculative round runs, by qualified name."""
    functions: dict[str, ast.FunctionDef] = {}
    for module in (generator_module, caches, guards, stats_module):
        for node in ast.parse(inspect.getsource(module)).body:
            if isinstance(node, ast.FunctionDef):
                functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        functions[f"{node.name}.{item.name}"] = item
    return functions


def test_only_sync_evaluates_during_a_run() -> None:
    functions = _round_functions()
    # The check sees what it looks for: `_read_back` reads back, the untimed clock evaluates.
    assert _evaluating_calls(functions["_read_back"])
    assert _evaluating_calls(functions["_UntimedClock.synchronise"])
    assert {"SpeculativeGenerator._round", "SpeculativeGenerator.generate"} <= set(functions)
    # Allowed elsewhere: prefill runs before the rounds. Every other function a round can
    # reach must stay lazy.
    allowed = {"_read_back", "_UntimedClock.synchronise", "prefill"}
    offenders = {
        name: calls
        for name, function in functions.items()
        if name not in allowed and (calls := _evaluating_calls(function))
    }
    assert offenders == {}


SUMMARY = re.compile(
    r"^\[Speculative acceptance\] "
    r"rule=(greedy-argmax|sampler-match|stochastic|sampler-match-no-proposal-distribution|block) "
    r"rounds=(\d+) proposed=(\d+) positions_tested=(\d+) accepted=(\d+) "
    r"per_position_acceptance=(\d\.\d{4}) acceptance_rate=(\d\.\d{4}) "
    r"mean_accepted_len=(\d+\.\d{4})"
)
DIAGNOSTICS = re.compile(
    r" closed_form_sum_min=(\d\.\d{4}) closed_form_sum_prod=(\d\.\d{4})"
    r" closed_form_accepted_len=(\d+\.\d{4}) closed_form_block=(\d+\.\d{4})$"
)


@pytest.mark.parametrize("diagnostics", [False, True])
@pytest.mark.parametrize(
    "scenario",
    ["greedy-mixed", "stochastic-mixed", "sampler-match-mixed", "greedy-all-accept", "block-mixed"],
)
def test_the_summary_line_shape(scenario: str, diagnostics: bool) -> None:
    generator = _generator(scenario, 4, diagnostics=diagnostics)
    run = generator.generate(PROMPT, 40, seed=3)
    collect(run)
    stats = run.stats
    line = stats.summary_line()
    match = SUMMARY.match(line)
    assert match, line
    assert match.group(1) == stats.rule.value
    counters = [int(match.group(i)) for i in range(2, 6)]
    assert counters == [stats.rounds, stats.proposed, stats.positions_tested, stats.accepted]
    assert float(match.group(6)) == pytest.approx(stats.accepted / stats.positions_tested, abs=5e-5)
    assert float(match.group(7)) == pytest.approx(stats.accepted / stats.proposed, abs=5e-5)
    assert float(match.group(8)) == pytest.approx(stats.accepted / stats.rounds, abs=5e-5)
    rest = line[match.end() :]
    if diagnostics:
        diag = DIAGNOSTICS.fullmatch(rest)
        assert diag, line
        assert float(diag.group(1)) >= float(diag.group(2))
        assert float(diag.group(3)) == pytest.approx(stats.closed_form_accepted_len, abs=5e-5)
        assert float(diag.group(4)) == pytest.approx(stats.closed_form_block, abs=5e-5)
    else:
        assert rest == ""


def test_an_empty_run_has_a_well_formed_summary() -> None:
    generator = _generator("stochastic-mixed", 4, diagnostics=True)
    run = generator.generate(PROMPT, 0)
    assert collect(run) == []
    line = run.stats.summary_line()
    assert SUMMARY.match(line) and DIAGNOSTICS.search(line), line
    assert run.stats.rounds == run.stats.host_syncs == 0


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("scenario", ["greedy-all-accept", "greedy-mixed", "stochastic-mixed"])
def test_max_tokens_is_respected_exactly(scenario: str, k: int) -> None:
    generator = _generator(scenario, k, check_caches=True)
    target_factory, _, config, _ = SCENARIOS[scenario]
    for max_tokens in sorted({0, 1, 2, k, k + 1, k + 2, 2 * k + 1, 3 * k + 5}):
        run = generator.generate(PROMPT, max_tokens, seed=9)
        blocks = list(run)
        stream = collect(blocks)
        assert len(stream) == run.stats.generated == max_tokens
        assert all(blocks)
        if config.is_greedy:
            reference = target_only_generate(target_factory(), PROMPT, config, max_tokens)
            assert stream == list(reference)


# EOS: the 6-cycle from prompt [0] emits 1, 2, 3, 4, 5, 0, ...; with the identical drafter
# and k = 4 the first round accepts drafts 1..4 and emits 5 as its bonus, so an EOS of
# 1..4 sits inside an accepted block, 5 is the bonus and 0 opens the second round.


@pytest.mark.parametrize("eos", range(VOCAB))
@pytest.mark.parametrize("scenario", ["greedy-all-accept", "greedy-mixed", "greedy-all-reject"])
def test_eos_anywhere_in_a_block_ends_the_run_at_it(scenario: str, eos: int) -> None:
    generator = _generator(scenario, 4, eos=frozenset({eos}), check_caches=True)
    run = generator.generate([0], 30)
    stream = collect(run)
    assert stream == (list(range(1, eos + 1)) if eos else [1, 2, 3, 4, 5, 0])
    assert stream == list(
        target_only_generate(_cycle(), [0], GREEDY, 30, eos_token_ids=frozenset({eos}))
    )
    stats = run.stats
    assert stats.generated == len(stream)
    if scenario == "greedy-all-accept" and 0 < eos < 5:
        # The EOS was an accepted draft: the round accepted more than it emitted.
        assert stats.accepted + stats.rounds > stats.generated


def test_the_first_of_several_eos_tokens_ends_the_run() -> None:
    generator = _generator("greedy-all-accept", 8, eos=frozenset({4, 2}))
    assert collect(generator.generate([0], 30)) == [1, 2]


@pytest.mark.parametrize("rule", ["sampler-match", "stochastic"])
def test_eos_ends_a_sampled_run_at_its_first_occurrence(rule: RuleChoice) -> None:
    eos = frozenset({4})
    stopped = 0
    for seed in range(6):
        generator = _generator(f"{rule}-mixed", 4, eos=eos, check_caches=True)
        run = generator.generate(PROMPT, 40, seed=seed)
        stream = collect(run)
        assert run.stats.generated == len(stream) <= 40
        assert 4 not in stream[:-1]
        if stream[-1] == 4:
            stopped += 1
        else:
            assert len(stream) == 40
        if rule == "sampler-match":
            assert stream == list(
                target_only_generate(_markov(), PROMPT, WARM, 40, seed=seed, eos_token_ids=eos)
            )
    assert stopped >= 3  # EOS was actually reached in most runs


def test_interleaved_runs_of_one_generator_keep_their_own_counters() -> None:
    generator = _generator("stochastic-mixed", 4)
    alone = generator.generate(PROMPT, 40, seed=1)
    expected = collect(alone)
    first, second = generator.generate(PROMPT, 40, seed=1), generator.generate(PROMPT, 17, seed=2)
    interleaved: list[int] = []
    for block in first:
        interleaved += block
        next(second, None)  # a round of the other run between each round of this one
    collect(second)
    assert interleaved == expected
    assert first.stats == alone.stats
    assert second.stats.generated == 17
    assert first.stats.host_syncs == first.stats.rounds


def test_a_run_checks_its_arguments_before_it_is_iterated() -> None:
    generator = _generator("stochastic-mixed", 4)
    with pytest.raises(ValueError, match="max_tokens"):
        generator.generate(PROMPT, -1)
