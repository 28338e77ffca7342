"""The error vectors of every family: inputs the reference rejects, with the error kind and
the argument it names.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import mlx.core as mx

from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    accept_draft_token,
    acceptance_closed_forms,
    acceptance_probability,
    acceptance_rule,
    effective_token_distribution,
    expected_speedup,
    expected_tokens_per_round,
    grid_draw_counts,
    residual_distribution,
    residual_resample,
    rewind_trim,
    sample_from_distribution,
    sample_token_with_distribution,
    verify_blockwise,
    verify_draft_token,
    verify_tokenwise,
)
from specaccept.core import randomness
from specaccept.core.tree import (
    TreeScheme,
    candidate_siblings_acceptance,
    iid_siblings_acceptance,
    multi_draft_ceiling,
    verify_tree,
    without_replacement_siblings_acceptance,
)
from specaccept.shell.seeded_run import seeded_run

from .common import NEG_INF, RULES, ErrorCase, GenerationError, Json, Vector, encode_config, typed
from .seeded_run import TableLaw, decode_law, seeded_run_error_cases
from .uniforms import SLOT_NAMES, round_uniform_error_cases

# --- error vectors ------------------------------------------------------------------------
#
# An error vector gives inputs that the reference rejects from their types, shapes, dtypes,
# Python scalars or SamplerConfig fields alone (spec/validation.md), and expects the
# error kind and the argument it names. The expectation is written by hand; the generator
# decodes the JSON input as a replayer would, runs the family's calls, and stops unless the
# library raises exactly that kind with a message naming that argument.

ERROR_KINDS: dict[str, type[Exception]] = {"TypeError": TypeError, "ValueError": ValueError}
NON_FINITE = {"-inf": NEG_INF, "inf": float("inf"), "nan": float("nan")}


def decode_value(value: Json) -> Any:
    """A non-array argument: "-inf", "inf" and "nan" are floats, anything else passes as is."""
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    return value


def decode_array(value: Json, dtype: mx.Dtype) -> Any:
    """A JSON array becomes an array of the slot's dtype, {"array", "dtype"} one of that dtype;
    any other value is passed through unchanged, for the library to reject."""
    if isinstance(value, dict) and {"array", "dtype"} <= set(value) <= {"array", "dtype", "shape"}:
        name = value["dtype"]
        assert isinstance(name, str)
        array = mx.array(decode_nested(value["array"]), dtype=getattr(mx, name))
        shape = value.get("shape")
        return array if shape is None else array.reshape(shape)
    if isinstance(value, list):
        return mx.array(decode_nested(value), dtype=dtype)
    return decode_value(value)


def decode_nested(value: Json) -> Any:
    if isinstance(value, list):
        return [decode_nested(v) for v in value]
    return decode_value(value)


def decode_sequence(value: Json) -> Any:
    """A Python sequence argument (history, alphas): its items pass through unchanged."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    return decode_array(value, mx.int32) if isinstance(value, dict) else decode_value(value)


def decode_rule(value: Json) -> Any:
    if isinstance(value, str):
        return AcceptanceRule(value)
    return value


def decode_config(value: Json) -> Any:
    """A SamplerConfig from its JSON fields (absent fields take their defaults)."""
    if not isinstance(value, dict):
        return decode_value(value)
    fields: dict[str, Any] = {}
    for name, raw in value.items():
        if name == "logit_bias" and isinstance(raw, list):
            fields[name] = {
                pair[0]: decode_value(pair[1]) for pair in raw if isinstance(pair, list)
            }
        elif name == "dry_sequence_breakers" and isinstance(raw, list):
            fields[name] = tuple(decode_value(v) for v in raw)
        else:
            fields[name] = decode_value(raw)
    return SamplerConfig(**fields)


def run_family(family: str, inputs: dict[str, Json]) -> None:
    """Replay `inputs` through the family's calls, in the order spec/vectors/schema.md gives."""
    f32_, i32 = mx.float32, mx.int32
    if family == "sampler_config":
        decode_config(inputs["config"])
    elif family == "effective_token_distribution":
        logits = decode_array(inputs["logits"], f32_)
        cfg = decode_config(inputs["config"])
        history = decode_sequence(inputs["history"])
        effective_token_distribution(logits, cfg, history)
        draws = inputs["draw_uniforms"]
        assert isinstance(draws, list)
        for u in draws:
            sample_token_with_distribution(logits, cfg, history, decode_value(u))
    elif family == "sample_from_distribution":
        sample_from_distribution(decode_array(inputs["probs"], f32_),
                                 decode_array(inputs["u"], f32_))
    elif family == "accept_draft_token":
        accept_draft_token(decode_array(inputs["p"], f32_), decode_array(inputs["q"], f32_),
                           decode_array(inputs["token"], i32), decode_array(inputs["u"], f32_))
    elif family == "residual_distribution":
        p, q = decode_array(inputs["p"], f32_), decode_array(inputs["q"], f32_)
        residual_distribution(p, q)
        draws = inputs["u"]
        assert isinstance(draws, list)
        for u in draws:
            residual_resample(p, q, decode_value(u))
    elif family == "verify_draft_token":
        verify_draft_token(
            decode_rule(inputs["rule"]), decode_array(inputs["p"], f32_),
            decode_array(inputs["q"], f32_) if inputs["q"] is not None else None,
            decode_array(inputs["token"], i32), decode_array(inputs["u_accept"], f32_),
            decode_array(inputs["u_sample"], f32_),
        )
    elif family == "verify_tokenwise":
        verify_tokenwise(
            decode_rule(inputs["rule"]), decode_array(inputs["target_probs"], f32_),
            decode_array(inputs["draft_probs"], f32_) if inputs["draft_probs"] is not None
            else None,
            decode_array(inputs["draft_tokens"], i32), decode_array(inputs["uniforms"], f32_),
        )
    elif family == "verify_blockwise":
        verify_blockwise(  # a null draft_probs is one of the bad inputs it must refuse
            decode_array(inputs["target_probs"], f32_),
            decode_array(inputs["draft_probs"], f32_) if inputs["draft_probs"] is not None
            else None,  # type: ignore[arg-type]
            decode_array(inputs["draft_tokens"], i32), decode_array(inputs["uniforms"], f32_),
        )
    elif family == "rewind_trim":
        rewind_trim(decode_value(inputs["num_draft"]), decode_value(inputs["num_accepted"]))
    elif family == "acceptance_closed_forms":
        p, q = decode_array(inputs["p"], f32_), decode_array(inputs["q"], f32_)
        if "rule" in inputs:
            acceptance_probability(decode_rule(inputs["rule"]), p, q)
            return
        acceptance_closed_forms(p, q)
        for rule in RULES:
            acceptance_probability(rule, p, q)
    elif family == "acceptance_rule":
        acceptance_rule(decode_config(inputs["target_config"]),
                        drafter_has_distribution=decode_value(inputs["drafter_has_distribution"]),
                        stochastic=decode_value(inputs["stochastic"]),
                        block=decode_value(inputs.get("block")))
    elif family == "grid_draw_counts":
        grid_draw_counts(decode_array(inputs["probs"], f32_))
    elif family == "position_uniform":
        slot = inputs["slot"]  # an unknown name or a non-integer is a bad input, passed on
        named_slot: Any = SLOT_NAMES.get(slot, slot) if isinstance(slot, str) else slot
        randomness.position_uniform(decode_value(inputs["seed"]), decode_value(inputs["position"]),
                                    named_slot)
    elif family == "round_uniform":
        named = inputs["slot"]
        slot = SLOT_NAMES[named] if isinstance(named, str) else decode_value(named)
        randomness.round_uniform(decode_value(inputs["seed"]),
                                 decode_value(inputs["round_position"]),
                                 decode_value(inputs["offset"]), slot)
    elif family == "seeded_run":
        seeded_run(decode_law(inputs["target_law"]), decode_law(inputs["draft_law"]),
                   decode_sequence(inputs["prompt"]), rule=decode_rule(inputs["rule"]),
                   num_draft_tokens=decode_value(inputs["num_draft_tokens"]),
                   max_tokens=decode_value(inputs["max_tokens"]),
                   seed=decode_value(inputs["seed"]))
    elif family == "expected_tokens_per_round":
        expected_tokens_per_round(decode_sequence(inputs["alphas"]))
    elif family == "expected_speedup":
        expected_speedup(decode_value(inputs["alpha"]), decode_value(inputs["k"]),
                         decode_value(inputs["c"]),
                         verify_cost=decode_value(inputs["verify_cost"]))  # errors give it
    elif family == "verify_tree":
        scheme = inputs["scheme"]
        tree_scheme: Any = TreeScheme(scheme) if isinstance(scheme, str) else scheme  # or bad
        verify_tree(
            tree_scheme,
            decode_sequence(inputs["parents"]), decode_array(inputs["target_probs"], f32_),
            decode_array(inputs["draft_probs"], f32_) if inputs["draft_probs"] is not None
            else None,
            decode_sequence(inputs["draft_tokens"]), decode_array(inputs["accept_uniforms"], f32_),
            decode_array(inputs["sample_uniforms"], f32_),
        )
    elif family == "tree_acceptance":
        p, q = decode_array(inputs["p"], f32_), decode_array(inputs["q"], f32_)
        iid_siblings_acceptance(p, q, decode_value(inputs["num_drafts"]))
        without_replacement_siblings_acceptance(p, q, decode_value(inputs["num_drafts"]))
        candidate_siblings_acceptance(p, decode_sequence(inputs["candidates"]))
        multi_draft_ceiling(p, q, decode_value(inputs["num_drafts"]))
    else:
        raise GenerationError(f"no replay for family {family}")


def error_vector(family: str, name: str, note: str, inputs: dict[str, Json], kind: str,
                 argument: str) -> Vector:
    """A vector whose replay must raise `kind` naming `argument`; checked against the library."""
    try:
        run_family(family, inputs)
    except (TypeError, ValueError) as error:
        if type(error) is not ERROR_KINDS[kind]:
            raise GenerationError(
                f"{family}/{name}: library raises {type(error).__name__}({error}), "
                f"expected {kind}") from error
        if not re.search(rf"(?<![\w.]){re.escape(argument)}(?![\w])", str(error)):
            raise GenerationError(
                f"{family}/{name}: the message {str(error)!r} does not name {argument!r}"
            ) from error
    else:
        raise GenerationError(f"{family}/{name}: library raises nothing, expected {kind}")
    return {"name": name, "note": note, "input": inputs,
            "error": {"kind": kind, "argument": argument}, "atol": 0.0}


def base_inputs(family: str) -> dict[str, Json]:
    """A valid input of each family, which an error case alters in one argument."""
    stochastic = AcceptanceRule.STOCHASTIC.value
    bases: dict[str, dict[str, Json]] = {
        "sampler_config": {"config": encode_config(SamplerConfig())},
        "effective_token_distribution": {"logits": [0.0, 0.0, 0.0, 0.0],
                                         "config": encode_config(SamplerConfig()),
                                         "history": [], "draw_uniforms": []},
        "sample_from_distribution": {"probs": [0.5, 0.5], "u": 0.5},
        "accept_draft_token": {"p": [0.25, 0.75], "q": [0.5, 0.5], "token": 0, "u": 0.5},
        "residual_distribution": {"p": [0.5, 0.5], "q": [0.25, 0.75], "u": []},
        "verify_draft_token": {"rule": stochastic, "p": [0.25, 0.75], "q": [0.5, 0.5],
                               "token": 0, "u_accept": 0.5, "u_sample": 0.5},
        "verify_tokenwise": {"rule": stochastic, "target_probs": [[0.5, 0.5], [0.5, 0.5]],
                         "draft_probs": [[0.5, 0.5]], "draft_tokens": [0],
                         "uniforms": [[0.5, 0.5], [0.5, 0.5]]},
        "verify_blockwise": {"target_probs": [[0.5, 0.5], [0.5, 0.5]],
                                  "draft_probs": [[0.5, 0.5]], "draft_tokens": [0],
                                  "uniforms": [[0.5, 0.5], [0.5, 0.5]]},
        "rewind_trim": {"num_draft": 2, "num_accepted": 1},
        "acceptance_closed_forms": {"p": [0.5, 0.5], "q": [0.25, 0.75]},
        "acceptance_rule": {"target_config": encode_config(SamplerConfig()),
                            "drafter_has_distribution": True, "stochastic": True},
        "expected_tokens_per_round": {"alphas": [0.5]},
        "expected_speedup": {"alpha": 0.5, "k": 2, "c": 0.25, "verify_cost": 1.0},
        "grid_draw_counts": {"probs": [0.5, 0.5]},
        "position_uniform": {"seed": 1234, "position": 0, "slot": "sample"},
        "round_uniform": {"seed": 1234, "round_position": 3, "offset": 1, "slot": "accept"},
        "seeded_run": {"rule": AcceptanceRule.STOCHASTIC.value,
                       "target_law": TableLaw(1, [[0.5, 0.5]] * 2).encode(),
                       "draft_law": TableLaw(1, [[0.5, 0.5]] * 2).encode(),
                       "prompt": [0], "num_draft_tokens": 2, "max_tokens": 4, "seed": 1234},
        "verify_tree": {"scheme": "iid", "parents": [-1, -1],
                        "target_probs": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
                        "draft_probs": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
                        "draft_tokens": [0, 1], "accept_uniforms": [0.5, 0.5],
                        "sample_uniforms": [0.5, 0.5]},
        "tree_acceptance": {"p": [0.5, 0.5], "q": [0.25, 0.75], "num_drafts": 2,
                            "candidates": [1, 0]},
    }
    return copy.deepcopy(bases[family])


def config_with(**fields: Any) -> Json:
    cfg = encode_config(SamplerConfig())
    assert isinstance(cfg, dict)
    cfg.update(fields)
    return cfg


def error_cases() -> dict[str, list[ErrorCase]]:
    t, v = "TypeError", "ValueError"
    f16 = typed([0.5, 0.5], "float16")
    return {
        "sampler_config": [
            (f"{field}_{label}", f"{field} = {value!r}: {why}",
             {"config": config_with(**{field: value})}, kind, field)
            for field, label, value, kind, why in [
                ("temperature", "negative", -1.0, v, "must be >= 0"),
                ("temperature", "nan", "nan", v, "must be finite"),
                ("temperature", "bool", True, t, "a bool is not a number"),
                ("temperature", "string", "hot", t, "a string is not a number"),
                ("temperature", "below_float32_normal", 1e-39, v,
                 "a positive temperature below 2**-126 rounds towards 0 in float32"),
                ("temperature", "above_float32_max", 3.5e38, v, "beyond float32's range"),
                ("repetition_penalty", "below_2_pow_minus_32", 2.0**-33, v,
                 "must lie in [2**-32, 2**32]"),
                ("repetition_penalty", "above_2_pow_32", 2.0**33, v,
                 "must lie in [2**-32, 2**32]"),
                ("frequency_penalty", "above_2_pow_64", 2.0**65, v,
                 "must lie in [-2**64, 2**64]"),
                ("presence_penalty", "below_minus_2_pow_64", -(2.0**65), v,
                 "must lie in [-2**64, 2**64]"),
                ("dry_multiplier", "above_float32_max", 3.5e38, v, "beyond float32's range"),
                ("dry_multiplier", "below_float32_normal", 1e-50, v,
                 "a positive multiplier below 2**-126 rounds to 0 and meets an overflowed power"),
                ("top_k", "beyond_int32", 2**31, v, "MLX indexes in int32"),
                ("repetition_context_size", "beyond_int32", 2**31, v, "MLX slices in int32"),
                ("dry_penalty_last_n", "beyond_int32", 2**31, v, "MLX slices in int32"),
                ("dry_base", "above_float32_max", 3.5e38, v, "beyond float32's range"),
                ("dry_sequence_breakers", "beyond_int32", [2**31], v, "ids are int32"),
                ("logit_bias", "id_beyond_int32", [[2**31, 1.0]], v, "ids are int32"),
                ("logit_bias", "bias_above_2_pow_64", [[0, 2.0**65]], v,
                 "biases lie in [-2**64, 2**64]"),
                ("top_k", "negative", -1, v, "must be >= 0"),
                ("top_k", "float", 2.5, t, "an integer field"),
                ("top_p", "zero", 0.0, v, "must lie in (0, 1]"),
                ("top_p", "above_one", 1.5, v, "must lie in (0, 1]"),
                ("min_p", "negative", -0.25, v, "must lie in [0, 1]"),
                ("min_p", "above_one", 1.5, v, "must lie in [0, 1]"),
                ("repetition_penalty", "zero", 0.0, v, "must be > 0"),
                ("repetition_context_size", "zero", 0, v, "must be >= 1"),
                ("repetition_context_size", "float", 20.0, t, "an integer field"),
                ("frequency_penalty", "inf", "inf", v, "must be finite"),
                ("presence_penalty", "bool", False, t, "a bool is not a number"),
                ("dry_multiplier", "negative", -1.0, v, "must be >= 0"),
                ("dry_base", "below_one", 0.5, v, "must be >= 1"),
                ("dry_allowed_length", "zero", 0, v, "must be >= 1"),
                ("dry_penalty_last_n", "below_minus_one", -2, v, "must be >= -1"),
                ("dry_sequence_breakers", "negative_id", [-1], v, "ids are non-negative"),
                ("dry_sequence_breakers", "float_id", [1.5], t, "ids are integers"),
                ("xtc_probability", "above_one", 1.5, v, "must lie in [0, 1]"),
                ("xtc_threshold", "negative", -0.25, v, "must lie in [0, 1]"),
                ("xtc_threshold", "above_one", 1.5, v, "must lie in [0, 1]"),
                ("xtc_probability", "negative", -0.25, v, "must lie in [0, 1]"),
                ("logit_bias", "bias_below_minus_2_pow_64", [[0, -(2.0**65)]], v,
                 "biases lie in [-2**64, 2**64]"),
                ("logit_bias", "negative_id", [[-1, 1.0]], v, "ids are non-negative"),
                ("logit_bias", "nan_bias", [[0, "nan"]], v, "biases must be finite"),
                ("logit_bias", "string_bias", [[0, "x"]], t, "biases are numbers"),
            ]
        ],
        "effective_token_distribution": [
            ("logits_not_an_array", "a number is not logits", {"logits": 0.5}, t, "logits"),
            ("logits_integer_dtype", "logits must be floating",
             {"logits": typed([0, 0, 0, 0], "int32")}, t, "logits"),
            ("logits_three_dimensional", "logits are [V] or [R, V]",
             {"logits": [[[0.0, 0.0]]]}, v, "logits"),
            ("logits_empty_vocabulary", "V >= 1", {"logits": []}, v, "logits"),
            ("logits_empty_batch", "[R, V] logits need R >= 1",
             {"logits": typed([], "float32", [0, 4])}, v, "logits"),
            ("config_not_a_config", "config must be a SamplerConfig", {"config": None}, t,
             "config"),
            ("history_not_a_sequence", "a string is not a token history", {"history": "abc"}, t,
             "history"),
            ("history_id_out_of_range", "a Python history id >= V", {"history": [0, 4]}, v,
             "history"),
            ("history_id_negative", "a Python history id < 0", {"history": [-1]}, v, "history"),
            ("history_id_bool", "a bool is not a token id", {"history": [True]}, t, "history"),
            ("history_id_float", "a float is not a token id", {"history": [1.5]}, t, "history"),
            ("history_array_float_dtype", "a history array must be integer",
             {"history": typed([1.0], "float32")}, t, "history"),
            ("history_array_two_dimensional", "a history array is 1-d",
             {"history": typed([[1]], "int32")}, v, "history"),
            ("logit_bias_id_outside_vocabulary", "a logit_bias id >= V",
             {"config": config_with(logit_bias=[[4, 1.0]])}, v, "logit_bias"),
            ("draw_from_rows", "one draw needs [V] logits", {"logits": [[0.0, 0.0]],
                                                             "draw_uniforms": [0.5]}, v, "logits"),
            ("draw_uniform_one", "a Python uniform must lie in [0, 1)",
             {"draw_uniforms": [1.0]}, v, "u"),
            ("draw_uniform_negative", "a Python uniform must lie in [0, 1)",
             {"draw_uniforms": [-0.5]}, v, "u"),
        ],
        "sample_from_distribution": [
            ("probs_not_an_array", "a number is not probs", {"probs": 0.5}, t, "probs"),
            ("probs_float16", "probabilities must be float32", {"probs": f16}, t, "probs"),
            ("probs_bfloat16", "probabilities must be float32",
             {"probs": typed([0.5, 0.5], "bfloat16")}, t, "probs"),
            ("probs_int32", "probabilities must be float32",
             {"probs": typed([1, 1], "int32")}, t, "probs"),
            ("probs_three_dimensional", "probs are [V] or [R, V]", {"probs": [[[1.0]]]}, v,
             "probs"),
            ("probs_empty_vocabulary", "V >= 1", {"probs": []}, v, "probs"),
            ("probs_empty_batch", "[R, V] rows need R >= 1",
             {"probs": typed([], "float32", [0, 2]), "u": typed([], "float32", [0])}, v,
             "probs"),
            ("u_one", "a Python uniform must lie in [0, 1)", {"u": 1.0}, v, "u"),
            ("u_negative", "a Python uniform must lie in [0, 1)", {"u": -0.25}, v, "u"),
            ("u_nan", "a Python uniform must be finite", {"u": "nan"}, v, "u"),
            ("u_bool", "a bool is not a uniform", {"u": True}, t, "u"),
            ("u_string", "a string is not a uniform", {"u": "half"}, t, "u"),
            ("u_integer_array", "a uniform array must be floating",
             {"probs": [[0.5, 0.5]], "u": typed([0], "int32")}, t, "u"),
            ("u_rows_mismatch", "[R, V] probs take [R] uniforms",
             {"probs": [[0.5, 0.5]], "u": [0.5, 0.5]}, v, "u"),
            ("u_array_for_one_row", "[V] probs take a number or a 0-d array",
             {"u": [0.5]}, v, "u"),
        ],
        "accept_draft_token": [
            ("p_not_an_array", "a number is not p", {"p": 0.5}, t, "p"),
            ("p_float16", "probabilities must be float32", {"p": f16}, t, "p"),
            ("q_float16", "probabilities must be float32", {"q": f16}, t, "q"),
            ("q_other_vocabulary", "p and q must have the same shape", {"q": [0.5, 0.25, 0.25]},
             v, "q"),
            ("p_three_dimensional", "p is [V] or [k, V]", {"p": [[[1.0]]], "q": [[[1.0]]]}, v,
             "p"),
            ("token_out_of_range", "a Python token id >= V", {"token": 2}, v, "token"),
            ("token_negative", "a Python token id < 0", {"token": -1}, v, "token"),
            ("token_bool", "a bool is not a token id", {"token": False}, t, "token"),
            ("token_float", "a float is not a token id", {"token": 1.0}, t, "token"),
            ("token_float_array", "a token array must be integer",
             {"p": [[0.25, 0.75]], "q": [[0.5, 0.5]], "token": typed([0.0], "float32"),
              "u": [0.5]}, t, "token"),
            ("token_rows_mismatch", "[k, V] rows take [k] tokens",
             {"p": [[0.25, 0.75]], "q": [[0.5, 0.5]], "token": [0, 1], "u": [0.5]}, v, "token"),
            ("u_one", "a Python uniform must lie in [0, 1)", {"u": 1.0}, v, "u"),
            ("u_string", "a string is not a uniform", {"u": "half"}, t, "u"),
        ],
        "residual_distribution": [
            ("p_not_an_array", "a number is not p", {"p": 0.5}, t, "p"),
            ("q_float16", "probabilities must be float32", {"q": f16}, t, "q"),
            ("q_other_vocabulary", "p and q must have the same shape", {"q": [1.0]}, v, "q"),
            ("resample_u_one", "a Python uniform must lie in [0, 1)", {"u": [1.0]}, v, "u"),
        ],
        "verify_draft_token": [
            ("rule_not_a_rule", "the rule must be an AcceptanceRule", {"rule": 2}, t, "rule"),
            ("stochastic_without_q", "stochastic reads q", {"q": None}, v, "q"),
            ("p_float16", "probabilities must be float32", {"p": f16}, t, "p"),
            ("q_other_vocabulary", "q is checked against p even where the rule ignores it",
             {"rule": "sampler-match", "q": [1.0]}, v, "q"),
            ("p_only_three_dimensional", "p is [V] or [k, V]",
             {"rule": "greedy-argmax", "p": [[[1.0]]], "q": None}, v, "p"),
            ("token_out_of_range", "a Python token id >= V", {"token": 2}, v, "token"),
            ("token_string", "a string is not a token id", {"token": "0"}, t, "token"),
            ("u_accept_one", "a Python uniform must lie in [0, 1)", {"u_accept": 1.0}, v,
             "u_accept"),
            ("u_sample_negative", "a Python uniform must lie in [0, 1)", {"u_sample": -0.5}, v,
             "u_sample"),
            ("u_sample_rows_mismatch", "[k, V] rows take [k] uniforms",
             {"p": [[0.25, 0.75]], "q": [[0.5, 0.5]], "token": [0], "u_accept": [0.5],
              "u_sample": [0.5, 0.5]}, v, "u_sample"),
            ("rule_block_has_no_single_position_form",
             "rule block verifies a round jointly: verify_blockwise", {"rule": "block"}, v,
             "rule"),
        ],
        "verify_tokenwise": [
            ("rule_not_a_rule", "the rule must be an AcceptanceRule", {"rule": 2},
             t, "rule"),
            ("target_probs_one_dimensional", "target_probs is [k+1, V]",
             {"target_probs": [0.5, 0.5]}, v, "target_probs"),
            ("target_probs_float16", "probabilities must be float32",
             {"target_probs": typed([[0.5, 0.5], [0.5, 0.5]], "float16")}, t, "target_probs"),
            ("target_probs_rows_not_k_plus_one", "k drafts need k + 1 target rows",
             {"target_probs": [[0.5, 0.5]]}, v, "target_probs"),
            ("draft_tokens_not_an_array", "draft_tokens is a [k] array", {"draft_tokens": 0}, t,
             "draft_tokens"),
            ("draft_tokens_empty", "k >= 1", {"draft_tokens": [], "target_probs": [[0.5, 0.5]],
                                              "draft_probs": None, "rule": "sampler-match",
                                              "uniforms": [[0.5, 0.5]]}, v, "draft_tokens"),
            ("draft_tokens_float_dtype", "draft ids must be integer",
             {"draft_tokens": typed([0.0], "float32")}, t, "draft_tokens"),
            ("uniforms_wrong_shape", "uniforms is [k+1, 2]", {"uniforms": [[0.5, 0.5]]}, v,
             "uniforms"),
            ("uniforms_integer_dtype", "uniforms must be floating",
             {"uniforms": typed([[0, 0], [0, 0]], "int32")}, t, "uniforms"),
            ("stochastic_without_draft_probs", "stochastic reads draft_probs",
             {"draft_probs": None}, v, "draft_probs"),
            ("draft_probs_wrong_shape", "draft_probs is [k, V]",
             {"draft_probs": [[0.5, 0.5], [0.5, 0.5]]}, v, "draft_probs"),
            ("draft_probs_float16", "probabilities must be float32",
             {"draft_probs": typed([[0.5, 0.5]], "float16")}, t, "draft_probs"),
            ("rule_block_is_verified_jointly",
             "verify_tokenwise verifies token by token; rule block is verify_blockwise",
             {"rule": "block"}, v, "rule"),
        ],
        "verify_blockwise": [
            ("target_probs_one_dimensional", "target_probs is [k+1, V]",
             {"target_probs": [0.5, 0.5]}, v, "target_probs"),
            ("target_probs_float16", "probabilities must be float32",
             {"target_probs": typed([[0.5, 0.5], [0.5, 0.5]], "float16")}, t, "target_probs"),
            ("target_probs_rows_not_k_plus_one", "k drafts need k + 1 target rows",
             {"target_probs": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]}, v, "target_probs"),
            ("draft_probs_missing", "block verification reads draft_probs",
             {"draft_probs": None}, t, "draft_probs"),
            ("draft_probs_wrong_shape", "draft_probs is [k, V]",
             {"draft_probs": [[0.5, 0.5], [0.5, 0.5]]}, v, "draft_probs"),
            ("draft_probs_float16", "probabilities must be float32",
             {"draft_probs": typed([[0.5, 0.5]], "float16")}, t, "draft_probs"),
            ("draft_tokens_not_an_array", "draft_tokens is a [k] array", {"draft_tokens": 0}, t,
             "draft_tokens"),
            ("draft_tokens_empty", "k >= 1", {"draft_tokens": [], "target_probs": [[0.5, 0.5]],
                                              "draft_probs": [[0.5, 0.5]],
                                              "uniforms": [[0.5, 0.5]]}, v, "draft_tokens"),
            ("draft_tokens_float_dtype", "draft ids must be integer",
             {"draft_tokens": typed([0.0], "float32")}, t, "draft_tokens"),
            ("uniforms_wrong_shape", "uniforms is [k+1, 2]", {"uniforms": [[0.5, 0.5]]}, v,
             "uniforms"),
            ("uniforms_integer_dtype", "uniforms must be floating",
             {"uniforms": typed([[0, 0], [0, 0]], "int32")}, t, "uniforms"),
        ],
        "rewind_trim": [
            ("num_draft_zero", "num_draft >= 1", {"num_draft": 0, "num_accepted": 0}, v,
             "num_draft"),
            ("num_accepted_above_num_draft", "num_accepted <= num_draft", {"num_accepted": 3},
             v, "num_accepted"),
            ("num_accepted_negative", "num_accepted >= 0", {"num_accepted": -1}, v,
             "num_accepted"),
            ("num_draft_float", "an integer argument", {"num_draft": 2.0}, t, "num_draft"),
            ("num_accepted_bool", "a bool is not an integer", {"num_accepted": True}, t,
             "num_accepted"),
        ],
        "acceptance_closed_forms": [
            ("p_not_an_array", "a number is not p", {"p": 0.5}, t, "p"),
            ("p_float16", "probabilities must be float32", {"p": f16}, t, "p"),
            ("q_other_vocabulary", "p and q must have the same shape", {"q": [1.0]}, v, "q"),
            ("p_three_dimensional", "p is [V] or [k, V]", {"p": [[[1.0]]], "q": [[[1.0]]]}, v,
             "p"),
            ("probability_rule_not_a_rule", "acceptance_probability's rule must be a rule",
             {"rule": 3}, t, "rule"),
        ],
        "acceptance_rule": [
            ("target_config_not_a_config", "target_config must be a SamplerConfig",
             {"target_config": None}, t, "target_config"),
            ("drafter_has_distribution_int", "a bool argument", {"drafter_has_distribution": 1},
             t, "drafter_has_distribution"),
            ("stochastic_string", "a bool (or None) argument", {"stochastic": "yes"}, t,
             "stochastic"),
            ("block_string", "a bool (or None) argument", {"block": "yes"}, t, "block"),
        ],
        "expected_tokens_per_round": [
            ("alphas_not_a_sequence", "a number is not a sequence", {"alphas": 0.5}, t, "alphas"),
            ("alphas_string", "a string is not a sequence of probabilities", {"alphas": "0.5"},
             t, "alphas"),
            ("alpha_above_one", "each alpha lies in [0, 1]", {"alphas": [0.5, 1.5]}, v,
             "alphas"),
            ("alpha_nan", "each alpha is finite", {"alphas": ["nan"]}, v, "alphas"),
            ("alpha_bool", "a bool is not a probability", {"alphas": [True]}, t, "alphas"),
        ],
        "position_uniform": [
            ("seed_negative", "seeds lie in [0, 2**64)", {"seed": -1}, v, "seed"),
            ("seed_beyond_64_bits", "seeds lie in [0, 2**64)", {"seed": 2**64}, v, "seed"),
            ("seed_float", "an integer argument", {"seed": 1.0}, t, "seed"),
            ("position_negative", "positions are >= 0", {"position": -1}, v, "position"),
            ("position_bool", "a bool is not a position", {"position": True}, t, "position"),
            ("slot_out_of_range", "slots lie in [0, 4)", {"slot": 4}, v, "slot"),
        ],
        "grid_draw_counts": [
            ("probs_not_an_array", "a number is not probs", {"probs": 0.5}, t, "probs"),
            ("probs_rows", "one [V] law at a time", {"probs": [[0.5, 0.5]]}, v, "probs"),
            ("probs_float16", "probabilities must be float32", {"probs": f16}, t, "probs"),
            ("probs_empty_vocabulary", "V >= 1", {"probs": []}, v, "probs"),
        ],
        "expected_speedup": [
            ("alpha_above_one", "alpha lies in [0, 1]", {"alpha": 1.5}, v, "alpha"),
            ("alpha_string", "a string is not a probability", {"alpha": "0.5"}, t, "alpha"),
            ("k_zero", "k >= 1", {"k": 0}, v, "k"),
            ("k_float", "an integer argument", {"k": 2.0}, t, "k"),
            ("c_negative", "c >= 0", {"c": -0.25}, v, "c"),
            ("c_inf", "c is finite", {"c": "inf"}, v, "c"),
            ("verify_cost_zero", "verify_cost > 0", {"verify_cost": 0.0}, v, "verify_cost"),
        ],
        "verify_tree": [
            ("scheme_not_a_scheme", "scheme must be a TreeScheme", {"scheme": 3}, t, "scheme"),
            ("parents_not_a_sequence", "parents is a sequence of ints", {"parents": 0}, t,
             "parents"),
            ("parents_empty", "a tree has at least one node",
             {"parents": [], "draft_tokens": [], "target_probs": [[0.5, 0.5]],
              "draft_probs": [[0.5, 0.5]], "accept_uniforms": typed([], "float32", [0]),
              "sample_uniforms": [0.5]}, v, "parents"),
            ("parent_float", "a parent is an int", {"parents": [-1, 0.0]}, t, "parents"),
            ("parent_out_of_range", "a parent is -1 or a node", {"parents": [-1, 5]}, v,
             "parents"),
            ("parent_after_child", "parents come before their children",
             {"parents": [1, -1]}, v, "parents"),
            ("parents_cycle", "a cycle never reaches the root", {"parents": [1, 0]}, v,
             "parents"),
            ("parent_is_itself", "a node cannot be its own parent", {"parents": [-1, 1]}, v,
             "parents"),
            ("draft_tokens_not_a_sequence", "draft_tokens is a sequence of ints",
             {"draft_tokens": 0}, t, "draft_tokens"),
            ("draft_tokens_width_mismatch", "one token per node", {"draft_tokens": [0]}, v,
             "draft_tokens"),
            ("draft_token_float", "a token is an int", {"draft_tokens": [0, 1.0]}, t,
             "draft_tokens"),
            ("draft_token_outside_vocabulary", "tokens lie in [0, V)",
             {"draft_tokens": [0, 2]}, v, "draft_tokens"),
            ("draft_token_negative", "tokens lie in [0, V)", {"draft_tokens": [0, -1]}, v,
             "draft_tokens"),
            ("duplicate_candidates", "deterministic candidates are distinct",
             {"scheme": "deterministic", "draft_probs": None, "draft_tokens": [1, 1]}, v,
             "draft_tokens"),
            ("duplicate_siblings_without_replacement",
             "drafts without replacement are distinct", {"scheme": "without-replacement",
                                                         "draft_tokens": [0, 0]}, v,
             "draft_tokens"),
            ("target_probs_rows_not_nodes_plus_one", "N nodes need N + 1 target rows",
             {"target_probs": [[0.5, 0.5], [0.5, 0.5]]}, v, "target_probs"),
            ("target_probs_float16", "probabilities must be float32",
             {"target_probs": typed([[0.5, 0.5]] * 3, "float16")}, t, "target_probs"),
            ("draft_probs_missing", "the iid scheme reads q", {"draft_probs": None}, v,
             "draft_probs"),
            ("draft_probs_under_deterministic", "a candidate's proposal is its one-hot",
             {"scheme": "deterministic"}, v, "draft_probs"),
            ("draft_probs_wrong_shape", "draft_probs is [N+1, V]",
             {"draft_probs": [[0.5, 0.5], [0.5, 0.5]]}, v, "draft_probs"),
            ("draft_probs_float16", "probabilities must be float32",
             {"draft_probs": typed([[0.5, 0.5]] * 3, "float16")}, t, "draft_probs"),
            ("accept_uniforms_wrong_width", "one accept uniform per node",
             {"accept_uniforms": [0.5]}, v, "accept_uniforms"),
            ("accept_uniforms_python_float", "accept_uniforms is an array",
             {"accept_uniforms": 0.5}, t, "accept_uniforms"),
            ("sample_uniforms_wrong_width", "one sample uniform per depth 0..D",
             {"sample_uniforms": [0.5]}, v, "sample_uniforms"),
            ("sample_uniforms_integer_dtype", "uniforms must be floating",
             {"sample_uniforms": typed([0, 0], "int32")}, t, "sample_uniforms"),
        ],
        "tree_acceptance": [
            ("p_not_an_array", "a number is not p", {"p": 0.5}, t, "p"),
            ("p_rows", "one [V] law at a time", {"p": [[0.5, 0.5]]}, v, "p"),
            ("q_float16", "probabilities must be float32",
             {"q": typed([0.25, 0.75], "float16")}, t, "q"),
            ("q_other_vocabulary", "p and q share a vocabulary", {"q": [1.0]}, v, "q"),
            ("num_drafts_zero", "n >= 1", {"num_drafts": 0}, v, "num_drafts"),
            ("num_drafts_float", "an integer argument", {"num_drafts": 2.0}, t, "num_drafts"),
            ("num_drafts_bool", "a bool is not a count", {"num_drafts": True}, t, "num_drafts"),
            ("num_drafts_past_max_tree_nodes", "n <= MAX_TREE_NODES = 4096, checked before "
             "any loop or power", {"num_drafts": 4097}, v, "num_drafts"),
            ("candidates_repeated", "candidates are distinct", {"candidates": [1, 1]}, v,
             "candidates"),
            ("candidates_out_of_range", "a candidate is an id in [0, V)",
             {"candidates": [1, 2]}, v, "candidates"),
            ("candidates_negative", "a candidate is an id in [0, V)",
             {"candidates": [-1]}, v, "candidates"),
            ("candidates_empty", "a node has at least one child", {"candidates": []}, v,
             "candidates"),
            ("candidates_float", "a candidate is an int", {"candidates": [1.0]}, t,
             "candidates"),
        ],
    }


def error_vectors(family: str) -> list[Vector]:
    cases = {**error_cases(), "round_uniform": round_uniform_error_cases(),
             "seeded_run": seeded_run_error_cases()}
    out = []
    for name, note, changes, kind, argument in cases.get(family, []):
        inputs = base_inputs(family)
        inputs.update(copy.deepcopy(changes))
        out.append(error_vector(family, f"error_{name}", note, inputs, kind, argument))
    return out
