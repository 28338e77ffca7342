"""The shell's rule choice: the one place the environment's rule switches are read.

`choose_rule` takes the environment as a mapping, so these tests pass it explicitly and
never touch the process's own environment.
"""

from __future__ import annotations

import pytest

from specaccept import AcceptanceRule, SamplerConfig
from specaccept.shell.rule_choice import (
    BLOCK_VERIFY_ENV,
    STOCHASTIC_ACCEPT_ENV,
    choose_rule,
    switch_from_environment,
)

SAMPLING, GREEDY = SamplerConfig(), SamplerConfig(temperature=0.0)


@pytest.mark.parametrize("value", ["1", "true", "TRUE", " yes ", "On", "\ton\n", "Yes"])
def test_switch_values_that_enable(value: str) -> None:
    assert switch_from_environment(STOCHASTIC_ACCEPT_ENV, {STOCHASTIC_ACCEPT_ENV: value})
    assert choose_rule("auto", SAMPLING, {STOCHASTIC_ACCEPT_ENV: value}) is AcceptanceRule.BLOCK


@pytest.mark.parametrize("value", ["0", "false", "False", " NO", "off ", "OFF"])
def test_switch_values_that_disable(value: str) -> None:
    assert not switch_from_environment(STOCHASTIC_ACCEPT_ENV, {STOCHASTIC_ACCEPT_ENV: value})
    rule = choose_rule("auto", SAMPLING, {STOCHASTIC_ACCEPT_ENV: value})
    assert rule is AcceptanceRule.SAMPLER_MATCH


def test_switches_unset_enable_block_verification() -> None:
    assert choose_rule("auto", SAMPLING, {}) is AcceptanceRule.BLOCK
    assert choose_rule("auto", GREEDY, {}) is AcceptanceRule.GREEDY_ARGMAX


@pytest.mark.parametrize("value", ["0", "false", " NO", "off ", "OFF"])
def test_the_block_switch_off_restores_the_stochastic_rule(value: str) -> None:
    assert choose_rule("auto", SAMPLING, {BLOCK_VERIFY_ENV: value}) is AcceptanceRule.STOCHASTIC
    both_off = {BLOCK_VERIFY_ENV: value, STOCHASTIC_ACCEPT_ENV: "off"}
    assert choose_rule("auto", SAMPLING, both_off) is AcceptanceRule.SAMPLER_MATCH


@pytest.mark.parametrize("name", [STOCHASTIC_ACCEPT_ENV, BLOCK_VERIFY_ENV])
@pytest.mark.parametrize("value", ["", " ", "2", "enable", "tru", "yes please", "y", "none"])
def test_bad_switch_values_raise_naming_the_variable(name: str, value: str) -> None:
    for config in (SAMPLING, GREEDY):  # at every temperature: a typo never passes unnoticed
        with pytest.raises(ValueError, match=f"{name} must be one of"):
            choose_rule("auto", config, {name: value})


def test_a_forced_choice_reads_neither_switch() -> None:
    garbage = {STOCHASTIC_ACCEPT_ENV: "maybe", BLOCK_VERIFY_ENV: "maybe"}
    assert choose_rule("stochastic", SAMPLING, garbage) is AcceptanceRule.STOCHASTIC
    assert choose_rule("sampler-match", SAMPLING, garbage) is AcceptanceRule.SAMPLER_MATCH
    assert choose_rule("block", SAMPLING, garbage) is AcceptanceRule.BLOCK
    assert choose_rule("block", GREEDY, garbage) is AcceptanceRule.GREEDY_ARGMAX


def test_an_unknown_choice_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"rule must be one of .* got 'fast'"):
        choose_rule("fast", SAMPLING, {})  # type: ignore[arg-type]
