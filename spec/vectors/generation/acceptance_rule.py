"""The ``acceptance_rule`` vectors.
"""

from __future__ import annotations

from specaccept import AcceptanceRule, SamplerConfig, acceptance_rule

from .common import Json, Vector, check_equal, config, encode_config, vector


def acceptance_rule_vectors() -> list[Vector]:
    greedy, tempered = config(temperature=0.0), config(temperature=0.7)
    cases: list[tuple[str, str, SamplerConfig, bool, bool | None, AcceptanceRule]] = [
        ("greedy_target", "a greedy target gets greedy-argmax, whatever the drafter", greedy,
         True, True, AcceptanceRule.GREEDY_ARGMAX),
        ("greedy_target_switch_off", "greedy-argmax also when stochastic is off", greedy, False,
         False, AcceptanceRule.GREEDY_ARGMAX),
        ("greedy_by_top_k", "top_k = 1 is greedy", config(top_k=1), True, True,
         AcceptanceRule.GREEDY_ARGMAX),
        ("stochastic", "a sampling target and a drafter with q", tempered, True, True,
         AcceptanceRule.STOCHASTIC),
        ("no_proposal_distribution", "stochastic enabled, no q: sampler-match under its own id",
         tempered, False, True, AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION),
        ("switch_off", "stochastic disabled: sampler-match", tempered, True, False,
         AcceptanceRule.SAMPLER_MATCH),
        ("switch_off_without_q", "stochastic disabled and no q: sampler-match", tempered, False,
         False, AcceptanceRule.SAMPLER_MATCH),
    ]
    cases.append(("switch_default_is_enabled",
                  "stochastic = null: the switches' defaults, both enabled, so block "
                  "verification", tempered, True, None, AcceptanceRule.BLOCK))
    out = []
    for name, note, cfg, has_q, stochastic, want in cases:
        out.append(acceptance_rule_vector(name, note, cfg, has_q, stochastic, want))
    block_cases = [
        ("block", "stochastic and block on, a drafter with q: block verification", tempered,
         True, True, True, AcceptanceRule.BLOCK),
        ("block_off", "block off: the stochastic rule", tempered, True, True, False,
         AcceptanceRule.STOCHASTIC),
        ("block_without_q", "block on but no q: sampler-match under its own id", tempered,
         False, True, True, AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION),
        ("block_switch_off", "stochastic disabled: sampler-match, block or not", tempered,
         True, False, True, AcceptanceRule.SAMPLER_MATCH),
        ("block_greedy", "a greedy target gets greedy-argmax, block or not", greedy, True,
         True, True, AcceptanceRule.GREEDY_ARGMAX),
    ]
    for name, note, cfg, has_q, stochastic, block, want in block_cases:
        out.append(acceptance_rule_vector(name, note, cfg, has_q, stochastic, want, block))
    return out


def acceptance_rule_vector(name: str, note: str, cfg: SamplerConfig, has_q: bool,
                           stochastic: bool | None, want: AcceptanceRule,
                           block: bool | None = None) -> Vector:
    got = acceptance_rule(cfg, drafter_has_distribution=has_q, stochastic=stochastic,
                          block=block)
    check_equal(name, got, want)
    inputs: dict[str, Json] = {"target_config": encode_config(cfg),
                               "drafter_has_distribution": has_q, "stochastic": stochastic}
    if block is not None:
        inputs["block"] = block
    return vector(name, note, inputs, {"rule": got.value}, 0.0)
