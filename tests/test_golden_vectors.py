"""Replay the golden vectors of spec/vectors/ through the library, and keep them in sync.

Three guarantees, each a test below:

- every committed vector replays: ids and bools exactly, floats within the vector's `atol`;
- regenerating the vectors reproduces the committed files byte for byte, so a change to the
  library or the generator that moves a vector fails CI until the files are regenerated and
  the change is reviewed;
- the replay can fail: a vector with one corrupted expected value is reported.

`replay` is written as a porter would write it in another language: it reads only the JSON
fields that spec/vectors/schema.md documents and calls the public API.

The last tests keep the spec pages that document the vectors honest without a Sphinx build:
their `{doctest}` blocks run and their relative links point at pages that exist (their inline
code is checked against impl/ by tests/test_spec_pages.py).
"""

from __future__ import annotations

import copy
import doctest
import json
import math
import re
import struct
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest

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

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec"
VECTORS = SPEC / "vectors"
GENERATOR = VECTORS / "generate.py"
FORMAT_VERSION = 2
FAMILIES = (
    "sampler_config",
    "effective_token_distribution",
    "sample_from_distribution",
    "accept_draft_token",
    "residual_distribution",
    "verify_draft_token",
    "verify_tokenwise",
    "verify_blockwise",
    "rewind_trim",
    "acceptance_closed_forms",
    "acceptance_rule",
    "expected_tokens_per_round",
    "expected_speedup",
    "grid_draw_counts",
    "position_uniform",
    "round_uniform",
    "seeded_run",
    "verify_tree",
    "tree_acceptance",
)
CONFIG_FIELDS = (
    "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "repetition_context_size",
    "frequency_penalty", "presence_penalty", "dry_multiplier", "dry_base", "dry_allowed_length",
    "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold",
    "logit_bias",
)

Problems = list[str]
"""What a replay found wrong; empty when the library reproduces the vector."""


# --- reading JSON values -----------------------------------------------------------------


class SchemaError(ValueError):
    """A vector does not follow spec/vectors/schema.md."""


def obj(value: object, what: str) -> dict[str, object]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise SchemaError(f"{what} must be an object, got {value!r}")
    return {str(k): v for k, v in value.items()}


def seq(value: object, what: str) -> list[object]:
    if not isinstance(value, list):
        raise SchemaError(f"{what} must be an array, got {value!r}")
    return list(value)


def integer(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchemaError(f"{what} must be an integer, got {value!r}")
    return value


NON_FINITE = {"-inf": -math.inf, "inf": math.inf, "nan": math.nan}


def real(value: object, what: str) -> float:
    """A JSON number, or one of the strings "-inf", "inf", "nan" (which JSON cannot spell)."""
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaError(f"{what} must be a number or \"-inf\", got {value!r}")
    return float(value)


# Arguments are decoded permissively: a JSON array becomes an array of the argument's dtype,
# {"array": ..., "dtype": ...} an array of that dtype, "-inf"/"inf"/"nan" a float, and anything
# else is passed to the library unchanged. A well-formed vector then reaches the library
# exactly as the schema describes it, and an error vector's faulty argument reaches it too.


def value_arg(value: object) -> Any:
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    return value


def nested(value: object) -> Any:
    return [nested(v) for v in value] if isinstance(value, list) else value_arg(value)


def array_arg(value: object, dtype: mx.Dtype) -> Any:
    if isinstance(value, dict) and {"array", "dtype"} <= set(value) <= {"array", "dtype", "shape"}:
        array = mx.array(nested(value["array"]), dtype=getattr(mx, str(value["dtype"])))
        return array.reshape(value["shape"]) if "shape" in value else array
    if isinstance(value, list):
        return mx.array(nested(value), dtype=dtype)
    return value_arg(value)


def float_array(value: object, what: str) -> Any:
    """A [V] or [R, V] float32 array (or the faulty value of an error vector)."""
    return array_arg(value, mx.float32)


def token_arg(value: object, what: str) -> Any:
    """A token id (int) or a batch of ids ([k] int32)."""
    return array_arg(value, mx.int32)


def uniform_arg(value: object, what: str) -> Any:
    """A uniform (float) or a batch of uniforms ([k] float32)."""
    return array_arg(value, mx.float32)


def sequence_arg(value: object) -> Any:
    """A Python sequence (history, alphas): its items reach the library unchanged."""
    if isinstance(value, list):
        return [value_arg(v) for v in value]
    return array_arg(value, mx.int32)


def rule_arg(value: object) -> Any:
    return AcceptanceRule(value) if isinstance(value, str) else value


def sampler_config(value: object, *, partial: bool = False) -> Any:
    """A SamplerConfig from its JSON fields: all sixteen, or (`partial`, only in
    sampler_config.json) any subset, the others taking their defaults."""
    if not isinstance(value, dict):
        return value
    raw = obj(value, "config")
    if not (set(raw) <= set(CONFIG_FIELDS) if partial else sorted(raw) == sorted(CONFIG_FIELDS)):
        raise SchemaError(f"config must hold the fields {CONFIG_FIELDS}, got {sorted(raw)}")
    fields: dict[str, Any] = {name: value_arg(raw[name]) for name in raw}
    if "logit_bias" in raw:
        fields["logit_bias"] = {pair[0]: value_arg(pair[1])
                                for pair in seq(raw["logit_bias"], "b") if isinstance(pair, list)}
    if "dry_sequence_breakers" in raw:
        fields["dry_sequence_breakers"] = tuple(
            value_arg(t) for t in seq(raw["dry_sequence_breakers"], "dry_sequence_breakers")
        )
    return SamplerConfig(**fields)


def float32(value: float) -> float:
    """`value` rounded to float32, as the Python float that holds it exactly."""
    rounded: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return rounded


def config_fields(cfg: SamplerConfig) -> dict[str, object]:
    """The sixteen fields as sampler_config.json's expected.config writes them (float32 reals)."""
    out: dict[str, object] = {}
    for name in CONFIG_FIELDS:
        value = getattr(cfg, name)
        if name == "logit_bias":
            out[name] = [[token, float32(bias)] for token, bias in sorted(value.items())]
        elif name == "dry_sequence_breakers":
            out[name] = list(value)
        elif isinstance(value, float):
            out[name] = float32(value)
        else:
            out[name] = value
    return out


# --- comparing results -------------------------------------------------------------------


def same(label: str, got: object, want: object) -> Problems:
    """Exact equality for ids and bools (a bool never equals an int here)."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{label}: got {got!r}, expected {want!r}"]
        return [p for i, (g, w) in enumerate(zip(got, want, strict=True))
                for p in same(f"{label}[{i}]", g, w)]
    if isinstance(got, bool) != isinstance(want, bool) or got != want:
        return [f"{label}: got {got!r}, expected {want!r}"]
    return []


def close(label: str, got: object, want: object, atol: float) -> Problems:
    """``abs(got - want) <= atol`` elementwise; atol 0 is exact equality."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{label}: got {got!r}, expected {want!r}"]
        return [p for i, (g, w) in enumerate(zip(got, want, strict=True))
                for p in close(f"{label}[{i}]", g, w, atol)]
    expected = real(want, label)
    if isinstance(got, bool) or not isinstance(got, int | float):
        return [f"{label}: got {got!r}, expected {expected!r}"]
    if not abs(float(got) - expected) <= atol:
        return [f"{label}: got {got!r}, expected {expected!r} (atol {atol})"]
    return []


# --- one replay per family ---------------------------------------------------------------

Replayer = Callable[[dict[str, object], dict[str, object], float], Problems]


def replay_effective_token_distribution(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    logits = float_array(inputs["logits"], "logits")
    cfg = sampler_config(inputs["config"])
    history = sequence_arg(inputs["history"])
    probs = effective_token_distribution(logits, cfg, history)
    # Every call before any comparison, so that an error vector reaches the call that raises.
    draws = [sample_token_with_distribution(logits, cfg, history, value_arg(u))
             for u in seq(inputs["draw_uniforms"], "draw_uniforms")]
    problems = close("probs", probs.tolist(), expected["probs"], atol)
    tokens = seq(expected["draw_tokens"], "draw_tokens")
    if len(draws) != len(tokens):
        raise SchemaError("draw_uniforms and draw_tokens must have the same length")
    for j, ((drawn, law), token) in enumerate(zip(draws, tokens, strict=True)):
        problems += same(f"draw_tokens[{j}]", drawn.item(), token)
        problems += close(f"draw law [{j}]", law.tolist(), expected["probs"], atol)
    return problems


def replay_sample_from_distribution(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    probs = float_array(inputs["probs"], "probs")
    token = sample_from_distribution(probs, uniform_arg(inputs["u"], "u"))
    return same("token", token.tolist(), expected["token"])


def replay_accept_draft_token(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    accepted = accept_draft_token(
        float_array(inputs["p"], "p"), float_array(inputs["q"], "q"),
        token_arg(inputs["token"], "token"), uniform_arg(inputs["u"], "u"),
    )
    return same("accepted", accepted.tolist(), expected["accepted"])


def replay_residual_distribution(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    p, q = float_array(inputs["p"], "p"), float_array(inputs["q"], "q")
    residual = residual_distribution(p, q)
    drawn = [residual_resample(p, q, value_arg(u)).item() for u in seq(inputs["u"], "u")]
    problems = close("residual", residual.tolist(), expected["residual"], atol)
    tokens = seq(expected["tokens"], "tokens")
    if len(drawn) != len(tokens):
        raise SchemaError("u and tokens must have the same length")
    for j, (got, token) in enumerate(zip(drawn, tokens, strict=True)):
        problems += same(f"tokens[{j}]", got, token)
    return problems


def replay_verify_draft_token(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    q = inputs["q"]
    verdict = verify_draft_token(
        rule_arg(inputs["rule"]), float_array(inputs["p"], "p"),
        None if q is None else float_array(q, "q"), token_arg(inputs["token"], "token"),
        uniform_arg(inputs["u_accept"], "u_accept"), uniform_arg(inputs["u_sample"], "u_sample"),
    )
    return (same("accepted", verdict.accepted.tolist(), expected["accepted"])
            + same("token", verdict.token.tolist(), expected["token"]))


def replay_verify_tokenwise(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    draft = inputs["draft_probs"]
    verdict = verify_tokenwise(
        rule_arg(inputs["rule"]), float_array(inputs["target_probs"], "target_probs"),
        None if draft is None else float_array(draft, "draft_probs"),
        token_arg(inputs["draft_tokens"], "draft_tokens"),
        float_array(inputs["uniforms"], "uniforms"),
    )
    return (same("num_accepted", verdict.num_accepted.item(), expected["num_accepted"])
            + same("next_token", verdict.next_token.item(), expected["next_token"]))


def replay_verify_blockwise(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    # An error vector passes draft_probs = null to show it is required: pass None through.
    raw = inputs["draft_probs"]
    draft: Any = None if raw is None else float_array(raw, "draft_probs")
    verdict = verify_blockwise(
        float_array(inputs["target_probs"], "target_probs"), draft,
        token_arg(inputs["draft_tokens"], "draft_tokens"),
        float_array(inputs["uniforms"], "uniforms"),
    )
    return (same("num_accepted", verdict.num_accepted.item(), expected["num_accepted"])
            + same("next_token", verdict.next_token.item(), expected["next_token"])
            + close("accepted_length_law", verdict.accepted_length_law.tolist(),
                    expected["accepted_length_law"], atol))


def replay_rewind_trim(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    plan = rewind_trim(value_arg(inputs["num_draft"]), value_arg(inputs["num_accepted"]))
    return (same("target_trim", plan.target_trim, expected["target_trim"])
            + same("draft_trim", plan.draft_trim, expected["draft_trim"])
            + same("draft_backfill", plan.draft_backfill, expected["draft_backfill"]))


def replay_acceptance_closed_forms(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    p, q = float_array(inputs["p"], "p"), float_array(inputs["q"], "q")
    if "rule" in inputs:  # only error vectors name a rule: acceptance_probability alone
        acceptance_probability(rule_arg(inputs["rule"]), p, q)
        return ["acceptance_probability raised nothing"]
    forms = acceptance_closed_forms(p, q)
    problems = (close("sum_min", forms.sum_min.tolist(), expected["sum_min"], atol)
                + close("sum_prod", forms.sum_prod.tolist(), expected["sum_prod"], atol)
                + close("total_variation", forms.total_variation.tolist(),
                        expected["total_variation"], atol))
    per_rule = obj(expected["acceptance_probability"], "acceptance_probability")
    if sorted(per_rule) != sorted(rule.value for rule in AcceptanceRule):
        raise SchemaError(f"acceptance_probability must name every rule id, got {sorted(per_rule)}")
    for rule_id, want in sorted(per_rule.items()):
        got = acceptance_probability(AcceptanceRule(rule_id), p, q).tolist()
        problems += close(f"acceptance_probability[{rule_id}]", got, want, atol)
    return problems


def replay_sampler_config(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    cfg = sampler_config(inputs["config"], partial=True)
    return (same("is_greedy", cfg.is_greedy, expected["is_greedy"])
            + same("uses_history", cfg.uses_history, expected["uses_history"])
            + same("config", config_fields(cfg), expected["config"]))


def replay_acceptance_rule(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    rule = acceptance_rule(
        sampler_config(inputs["target_config"]),
        drafter_has_distribution=value_arg(inputs["drafter_has_distribution"]),
        stochastic=value_arg(inputs["stochastic"]),
        block=value_arg(inputs.get("block")),
    )
    return same("rule", rule.value, expected["rule"])


def replay_expected_tokens_per_round(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    return close("tokens", expected_tokens_per_round(sequence_arg(inputs["alphas"])),
                 expected["tokens"], atol)


def replay_expected_speedup(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    alpha, k, c = value_arg(inputs["alpha"]), value_arg(inputs["k"]), value_arg(inputs["c"])
    speedup = (expected_speedup(alpha, k, c) if "verify_cost" not in inputs  # the default
               else expected_speedup(alpha, k, c, verify_cost=value_arg(inputs["verify_cost"])))
    return close("speedup", speedup, expected["speedup"], atol)


def replay_grid_draw_counts(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    counts = grid_draw_counts(float_array(inputs["probs"], "probs"))
    return same("counts", counts.tolist(), expected["counts"])


SLOTS = {"accept": randomness.ACCEPT, "sample": randomness.SAMPLE, "draft": randomness.DRAFT}


def replay_position_uniform(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    slot = inputs["slot"]
    u = randomness.position_uniform(value_arg(inputs["seed"]), value_arg(inputs["position"]),
                                    SLOTS[slot] if isinstance(slot, str) else value_arg(slot))
    return close("u", u, expected["u"], atol)


def replay_round_uniform(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    slot = inputs["slot"]
    u = randomness.round_uniform(
        value_arg(inputs["seed"]), value_arg(inputs["round_position"]),
        value_arg(inputs["offset"]), SLOTS[slot] if isinstance(slot, str) else value_arg(slot),
    )
    return close("u", u, expected["u"], atol)


def table_law(value: object, what: str) -> Callable[[list[int]], mx.array]:
    """A law of the history from its table: row index = the last `context_length` tokens
    read as base-V digits, oldest first (spec/vectors/schema.md, seeded_run.json)."""
    law = obj(value, what)
    context_length = integer(law["context_length"], f"{what}.context_length")
    rows = [[real(x, f"{what}.rows") for x in seq(row, f"{what}.rows")]
            for row in seq(law["rows"], f"{what}.rows")]
    vocab_size = len(rows[0])
    if len(rows) != vocab_size**context_length:
        raise SchemaError(f"{what} must hold V ** context_length rows, got {len(rows)}")

    def next_token_law(history: list[int]) -> mx.array:
        if len(history) < context_length:
            raise SchemaError(f"{what}: a history shorter than context_length")
        index = 0
        for token in history[len(history) - context_length:]:
            index = index * vocab_size + token
        return mx.array(rows[index], dtype=mx.float32)

    return next_token_law


def replay_seeded_run(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    rounds = seeded_run(
        table_law(inputs["target_law"], "target_law"), table_law(inputs["draft_law"], "draft_law"),
        sequence_arg(inputs["prompt"]), rule=rule_arg(inputs["rule"]),
        num_draft_tokens=value_arg(inputs["num_draft_tokens"]),
        max_tokens=value_arg(inputs["max_tokens"]), seed=value_arg(inputs["seed"]),
    )
    got = [{"position": r.position, "draft_tokens": r.draft_tokens,
            "num_accepted": r.num_accepted, "next_token": r.next_token} for r in rounds]
    return (same("tokens", [t for r in rounds for t in r.emitted], expected["tokens"])
            + same("rounds", got, expected["rounds"]))
def replay_verify_tree(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    raw_scheme, raw_draft = inputs["scheme"], inputs["draft_probs"]
    scheme: Any = TreeScheme(raw_scheme) if isinstance(raw_scheme, str) else raw_scheme
    verdict = verify_tree(
        scheme,
        sequence_arg(inputs["parents"]), float_array(inputs["target_probs"], "target_probs"),
        None if raw_draft is None else float_array(raw_draft, "draft_probs"),
        sequence_arg(inputs["draft_tokens"]),
        uniform_arg(inputs["accept_uniforms"], "accept_uniforms"),
        uniform_arg(inputs["sample_uniforms"], "sample_uniforms"),
    )
    return (same("num_accepted", verdict.num_accepted.item(), expected["num_accepted"])
            + same("accepted_nodes", verdict.accepted_nodes.tolist(), expected["accepted_nodes"])
            + same("next_token", verdict.next_token.item(), expected["next_token"]))


def replay_tree_acceptance(
    inputs: dict[str, object], expected: dict[str, object], atol: float
) -> Problems:
    p, q = float_array(inputs["p"], "p"), float_array(inputs["q"], "q")
    n = value_arg(inputs["num_drafts"])
    got = {
        "iid_siblings_acceptance": iid_siblings_acceptance(p, q, n).item(),
        "without_replacement_siblings_acceptance":
            without_replacement_siblings_acceptance(p, q, n).item(),
        "candidate_siblings_acceptance":
            candidate_siblings_acceptance(p, sequence_arg(inputs["candidates"])).item(),
        "multi_draft_ceiling": multi_draft_ceiling(p, q, n).item(),
    }
    return [problem for field, value in got.items()
            for problem in close(field, value, expected[field], atol)]


REPLAYERS: dict[str, Replayer] = {
    "sampler_config": replay_sampler_config,
    "effective_token_distribution": replay_effective_token_distribution,
    "sample_from_distribution": replay_sample_from_distribution,
    "accept_draft_token": replay_accept_draft_token,
    "residual_distribution": replay_residual_distribution,
    "verify_draft_token": replay_verify_draft_token,
    "verify_tokenwise": replay_verify_tokenwise,
    "verify_blockwise": replay_verify_blockwise,
    "rewind_trim": replay_rewind_trim,
    "acceptance_closed_forms": replay_acceptance_closed_forms,
    "acceptance_rule": replay_acceptance_rule,
    "expected_tokens_per_round": replay_expected_tokens_per_round,
    "expected_speedup": replay_expected_speedup,
    "grid_draw_counts": replay_grid_draw_counts,
    "position_uniform": replay_position_uniform,
    "round_uniform": replay_round_uniform,
    "seeded_run": replay_seeded_run,
    "verify_tree": replay_verify_tree,
    "tree_acceptance": replay_tree_acceptance,
}


def replay(family: str, vector: Mapping[str, object]) -> Problems:
    """Replay one vector of `family`; return what differs (empty: the library reproduces it)."""
    record = obj(dict(vector), "vector")
    atol = real(record["atol"], "atol")
    if not atol >= 0.0:
        raise SchemaError(f"atol must be >= 0, got {atol}")
    inputs = obj(record["input"], "input")
    if "error" in record:
        return replay_error(family, inputs, obj(record["error"], "error"))
    expected = obj(record["expected"], "expected")
    return REPLAYERS[family](inputs, expected, atol)


ERROR_KINDS: dict[str, type[Exception]] = {"TypeError": TypeError, "ValueError": ValueError}


def replay_error(family: str, inputs: dict[str, object], error: dict[str, object]) -> Problems:
    """The family's replay must raise the error's kind, with a message naming its argument."""
    kind, argument = str(error["kind"]), str(error["argument"])
    try:
        REPLAYERS[family](inputs, {}, 0.0)
    except (TypeError, ValueError) as raised:
        if type(raised) is not ERROR_KINDS[kind]:
            return [f"raised {type(raised).__name__}({raised}), expected {kind}"]
        if not re.search(rf"(?<![\w.]){re.escape(argument)}(?!\w)", str(raised)):
            return [f"{kind} {str(raised)!r} does not name {argument!r}"]
        return []
    except KeyError as missing:  # an expected field read after every call returned
        return [f"raised nothing before reading expected {missing}, expected {kind}"]
    return [f"raised nothing, expected {kind} naming {argument!r}"]


# --- the committed files -----------------------------------------------------------------


def load(family: str) -> dict[str, object]:
    document = obj(json.loads((VECTORS / f"{family}.json").read_text("ascii")), family)
    if document["family"] != family or document["format_version"] != FORMAT_VERSION:
        raise SchemaError(f"{family}.json has the wrong family or format_version")
    return document


def vectors_of(family: str) -> list[dict[str, object]]:
    return [obj(v, "vector") for v in seq(load(family)["vectors"], "vectors")]


CASES = [
    pytest.param(family, vector, id=f"{family}/{vector['name']}")
    for family in FAMILIES
    for vector in vectors_of(family)
]


def test_replayers_cover_every_family() -> None:
    assert tuple(REPLAYERS) == FAMILIES
    committed = sorted(path.stem for path in VECTORS.glob("*.json") if path.stem != "schema")
    assert committed == sorted(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_vector_names_are_unique(family: str) -> None:
    names = [v["name"] for v in vectors_of(family)]
    assert names, f"{family}.json has no vectors"
    assert len(names) == len(set(map(str, names)))


@pytest.mark.parametrize(("family", "vector"), CASES)
def test_vector_replays(family: str, vector: dict[str, object]) -> None:
    assert replay(family, vector) == []


def corruptible(value: object) -> bool:
    if isinstance(value, dict):
        return any(corruptible(v) for v in value.values())
    if isinstance(value, list):
        return bool(value) and corruptible(value[0])
    return isinstance(value, int | float | str)


def corrupt(value: object) -> object:
    """`value` with its first leaf changed beyond any tolerance a vector may carry."""
    if isinstance(value, dict):
        first = next(key for key in sorted(value) if corruptible(value[key]))
        return {**value, first: corrupt(value[first])}
    if isinstance(value, list):
        return [corrupt(value[0]), *value[1:]]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        return value + "-corrupted"
    raise TypeError(f"cannot corrupt {value!r}")


@pytest.mark.parametrize("family", FAMILIES)
def test_a_corrupted_expected_value_fails_the_replay(family: str) -> None:
    for vector in vectors_of(family):
        assert replay(family, vector) == []
        if "error" in vector:
            error = obj(vector["error"], "error")
            other_kind = "ValueError" if error["kind"] == "TypeError" else "TypeError"
            for wrong in ({**error, "kind": other_kind}, {**error, "argument": "nowhere"}):
                assert replay(family, {**vector, "error": wrong}) != [], (
                    f"{vector['name']} passes with the wrong error {wrong}")
            continue
        mutated = copy.deepcopy(vector)
        mutated["expected"] = corrupt(mutated["expected"])
        assert replay(family, mutated) != [], f"corrupting {vector['name']} went unnoticed"


def test_regenerating_reproduces_the_committed_files(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--out", str(tmp_path)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    fresh = sorted(path.name for path in tmp_path.glob("*.json"))
    committed = sorted(path.name for path in VECTORS.glob("*.json") if path.stem != "schema")
    assert fresh == committed
    for name in fresh:
        assert (tmp_path / name).read_bytes() == (VECTORS / name).read_bytes(), (
            f"spec/vectors/{name} is stale: run `python spec/vectors/generate.py` and review the "
            "diff"
        )


def test_committed_files_follow_the_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((VECTORS / "schema.json").read_text("ascii"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for family in FAMILIES:
        errors = [e.message for e in validator.iter_errors(load(family))]
        assert errors == [], f"{family}.json: {errors[:3]}"


# --- the spec pages ----------------------------------------------------------------------

PAGES = sorted(SPEC.rglob("*.md"))
DOCTEST_BLOCK = re.compile(r"^```\{doctest\}\n(.*?)^```$", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\]\(([^)#\s]+\.md)(#[^)]*)?\)")
# docs/conf.py's doctest_default_flags: sphinx.ext.doctest's defaults without
# IGNORE_EXCEPTION_DETAIL, so the message of a Traceback example is checked, not only its type.
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.DONT_ACCEPT_TRUE_FOR_1


def page_id(page: Path) -> str:
    return str(page.relative_to(SPEC))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_spec_doctest_blocks_pass(page: Path) -> None:
    text = page.read_text("utf-8")
    parser = doctest.DocTestParser()
    for number, block in enumerate(DOCTEST_BLOCK.findall(text)):
        test = parser.get_doctest(block, {}, f"{page_id(page)}[{number}]", str(page), 0)
        runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS)
        runner.run(test)
        assert runner.summarize(verbose=False).failed == 0, f"{test.name} failed"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_spec_links_point_at_existing_pages(page: Path) -> None:
    for target, _anchor in LINK.findall(page.read_text("utf-8")):
        assert (page.parent / target).is_file(), f"{page_id(page)} links to a missing {target}"
