"""How a generator's `rule` argument becomes an `AcceptanceRule`, the environment included.

The core's `acceptance_rule` reads only its arguments. The shell's automatic
choice (`rule="auto"`) also lets two environment variables switch the default
off, for users who cannot change the code that builds the generator; this
module is the one place that reads them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from specaccept.core.acceptance import AcceptanceRule, acceptance_rule
from specaccept.core.sampler_config import SamplerConfig

__all__ = [
    "BLOCK_VERIFY_ENV",
    "RULE_CHOICES",
    "STOCHASTIC_ACCEPT_ENV",
    "RuleChoice",
    "choose_rule",
    "switch_from_environment",
]

RuleChoice = Literal["auto", "stochastic", "sampler-match", "block"]
"""How the rule is chosen: automatically (the environment may switch it), or forced."""
RULE_CHOICES: tuple[RuleChoice, ...] = ("auto", "stochastic", "sampler-match", "block")

STOCHASTIC_ACCEPT_ENV = "SPECACCEPT_STOCHASTIC_ACCEPT"
"""Switches stochastic acceptance (and with it block verification) under ``rule="auto"``."""
BLOCK_VERIFY_ENV = "SPECACCEPT_BLOCK_VERIFY"
"""Switches block verification under ``rule="auto"``; off leaves the stochastic rule."""

_ENABLED = frozenset({"1", "true", "yes", "on"})
_DISABLED = frozenset({"0", "false", "no", "off"})


def switch_from_environment(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """An on/off switch: unset is on; anything but 1/true/yes/on or 0/false/no/off raises.

    >>> switch_from_environment("X", {}), switch_from_environment("X", {"X": " Off "})
    (True, False)
    """
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None:
        return True
    value = raw.strip().lower()
    if value in _ENABLED:
        return True
    if value in _DISABLED:
        return False
    raise ValueError(f"{name} must be one of 1/true/yes/on or 0/false/no/off, got {raw!r}")


def choose_rule(
    choice: RuleChoice, target_config: SamplerConfig, environ: Mapping[str, str] | None = None
) -> AcceptanceRule:
    """The rule a generator with a drafter that reports q runs for `choice`.

    ``auto`` reads both switches (a bad value is an error at every temperature,
    so a typo never goes unnoticed at T = 0); a forced choice reads neither.

    >>> choose_rule("auto", SamplerConfig(), {}).value
    'block'
    >>> choose_rule("auto", SamplerConfig(), {BLOCK_VERIFY_ENV: "0"}).value
    'stochastic'
    >>> choose_rule("sampler-match", SamplerConfig(), {STOCHASTIC_ACCEPT_ENV: "on"}).value
    'sampler-match'
    """
    if choice not in RULE_CHOICES:
        raise ValueError(
            f"rule must be one of {', '.join(map(repr, RULE_CHOICES))}, got {choice!r}"
        )
    if choice == "auto":
        stochastic = switch_from_environment(STOCHASTIC_ACCEPT_ENV, environ)
        block = switch_from_environment(BLOCK_VERIFY_ENV, environ)
    else:
        stochastic, block = choice != "sampler-match", choice == "block"
    return acceptance_rule(
        target_config, drafter_has_distribution=True, stochastic=stochastic, block=block
    )
