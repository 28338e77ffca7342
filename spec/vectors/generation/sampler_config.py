"""The ``sampler_config`` vectors.
"""

from __future__ import annotations

from specaccept import SamplerConfig

from .common import Json, Vector, check_equal, config, encode_config, f32, vector
from .errors import decode_config

# --- sampler_config, acceptance_rule, expected_tokens_per_round, expected_speedup ---------


def sampler_config_vectors() -> list[Vector]:
    cases: list[tuple[str, str, SamplerConfig, bool, bool]] = [
        ("defaults", "every field at its default: not greedy, no history read", config(),
         False, False),
        ("temperature_zero_greedy", "temperature 0 is greedy", config(temperature=0.0), True,
         False),
        ("top_k_one_greedy", "top_k = 1 is greedy at any temperature",
         config(temperature=0.7, top_k=1), True, False),
        ("top_k_two_not_greedy", "top_k = 2 is not greedy", config(top_k=2), False, False),
        ("tiny_temperature_not_greedy", "only temperature 0 itself is greedy",
         config(temperature=2.0**-20), False, False),
        ("presence_reads_history", "a presence penalty reads the history",
         config(presence_penalty=0.5), False, True),
        ("repetition_reads_history", "a repetition penalty != 1 reads the history",
         config(repetition_penalty=1.5), False, True),
        ("dry_reads_history", "DRY with a positive multiplier reads the history",
         config(dry_multiplier=0.5), False, True),
        ("dry_last_n_zero_is_off", "dry_penalty_last_n = 0 turns DRY off",
         config(dry_multiplier=0.5, dry_penalty_last_n=0), False, False),
        ("bounds_accepted", "every field at an inclusive bound of its range",
         config(top_p=1.0, min_p=1.0, repetition_penalty=2.0**-10, repetition_context_size=1,
                dry_base=1.0, dry_allowed_length=1, dry_penalty_last_n=-1,
                xtc_probability=1.0, xtc_threshold=0.0, dry_sequence_breakers=(0,),
                logit_bias={0: -1.0}), False, True),
        ("extreme_bounds_accepted", "every real at the far end of its float32 envelope",
         config(temperature=2.0**-126, repetition_penalty=2.0**32, frequency_penalty=2.0**64,
                presence_penalty=-(2.0**64), dry_multiplier=3.4028234663852886e38,
                dry_base=3.4028234663852886e38, dry_sequence_breakers=(2**31 - 1,),
                logit_bias={2**31 - 1: 2.0**64}), False, True),
        ("other_ends_accepted", "the other end of each range that has two",
         config(temperature=3.4028234663852886e38, repetition_penalty=2.0**-32,
                frequency_penalty=-(2.0**64), presence_penalty=2.0**64, xtc_threshold=1.0,
                logit_bias={0: -(2.0**64)}), False, True),
    ]
    out = []
    for name, note, cfg, greedy, history in cases:
        check_equal(name, (cfg.is_greedy, cfg.uses_history), (greedy, history))
        out.append(vector(name, note, {"config": encode_config(cfg)},
                          {"is_greedy": greedy, "uses_history": history,
                           "config": encode_config(cfg)}, 0.0))
    # Fields left out take their defaults: the only vectors that pin the defaults.
    partial: list[tuple[str, str, dict[str, Json]]] = [
        ("defaults_from_nothing", "no field given: every default, as float32", {}),
        ("defaults_beside_one_field", "one field given, the other fifteen at their defaults",
         {"temperature": 0.5, "dry_sequence_breakers": [3]}),
    ]
    for name, note, fields in partial:
        cfg = decode_config(fields)
        out.append(vector(name, note, {"config": fields},
                          {"is_greedy": cfg.is_greedy, "uses_history": cfg.uses_history,
                           "config": encode_config(cfg)}, 0.0))
    check_equal("the default config", out[-2]["expected"], {  # written out by hand
        "is_greedy": False, "uses_history": False, "config": {
            "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
            "repetition_penalty": 1.0, "repetition_context_size": 20,
            "frequency_penalty": 0.0, "presence_penalty": 0.0, "dry_multiplier": 0.0,
            "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": -1,
            "dry_sequence_breakers": [], "xtc_probability": 0.0,
            "xtc_threshold": f32(0.1), "logit_bias": []}})
    return out
