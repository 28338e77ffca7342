"""The NumPy port behind the JSON-line protocol of spec/vectors/schema.md ("Replaying a port").

Reads one request per line on stdin, ``{"family": ..., "name": ..., "input": {...}}``, and
answers each with one line on stdout: ``{"output": {...}}`` holding the family's expected
fields, or ``{"error": {"kind": "TypeError" | "ValueError", "argument": ...}}`` when the port
rejects the input. Run it under the harness:

    specaccept vectors check --port "python examples/numpy_port/serve.py"
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import specport as sp  # the port sits next to this file

NON_FINITE = {"-inf": -math.inf, "inf": math.inf, "nan": math.nan}
DTYPES = {
    "float16": np.float16, "float32": np.float32, "float64": np.float64, "int32": np.int32,
    "int64": np.int64, "uint32": np.uint32, "bool_": np.bool_,
    # NumPy has no bfloat16; for validation only its not being float32 matters.
    "bfloat16": np.float16,
}


# --- decoding (spec/vectors/schema.md, "Value encoding") ---------------------------------


def value(raw: Any) -> Any:
    """A scalar argument: "-inf", "inf", "nan" are floats; anything else passes unchanged."""
    if isinstance(raw, str) and raw in NON_FINITE:
        return NON_FINITE[raw]
    return raw


def nested(raw: Any) -> Any:
    return [nested(v) for v in raw] if isinstance(raw, list) else value(raw)


def array(raw: Any, dtype: Any) -> Any:
    """A JSON array as an array of the argument's dtype; {"array", "dtype"} of that dtype."""
    if isinstance(raw, dict) and {"array", "dtype"} <= set(raw) <= {"array", "dtype", "shape"}:
        values: Any = np.array(nested(raw["array"]), dtype=DTYPES[raw["dtype"]])
        return values.reshape(raw["shape"]) if "shape" in raw else values
    if isinstance(raw, list):
        return np.array(nested(raw), dtype=dtype)
    return value(raw)


def floats(raw: Any) -> Any:
    return array(raw, np.float32)


def ids(raw: Any) -> Any:
    return array(raw, np.int32)


def sequence(raw: Any) -> Any:
    """history and alphas are sequences of Python values, checked item by item."""
    if isinstance(raw, list):
        return [value(v) for v in raw]
    return ids(raw)


def config(raw: Any) -> Any:
    if not isinstance(raw, dict):
        return raw
    fields = {name: value(v) for name, v in raw.items()}  # absent fields keep their defaults
    if "logit_bias" in raw:
        fields["logit_bias"] = {pair[0]: value(pair[1]) for pair in raw["logit_bias"]}
    if "dry_sequence_breakers" in raw:
        fields["dry_sequence_breakers"] = tuple(value(v) for v in raw["dry_sequence_breakers"])
    return sp.SamplerConfig(**fields)


# --- encoding ---------------------------------------------------------------------------


def plain(result: Any) -> Any:
    """float32 arrays and scalars as JSON numbers, ids as ints, verdicts as booleans."""
    if isinstance(result, np.ndarray):
        return plain(result.tolist())
    if isinstance(result, list):
        return [plain(v) for v in result]
    if isinstance(result, np.bool_ | bool):
        return bool(result)
    if isinstance(result, np.integer):
        return int(result)
    if isinstance(result, np.floating):
        return float(result)
    return result


# --- one handler per family --------------------------------------------------------------


def sampler_config(i: dict[str, Any]) -> dict[str, Any]:
    cfg = config(i["config"])
    fields: dict[str, Any] = {}
    for name in cfg.__dataclass_fields__:
        field = getattr(cfg, name)
        if name == "logit_bias":
            fields[name] = [[token, float(np.float32(bias))]
                            for token, bias in sorted(field.items())]
        elif name == "dry_sequence_breakers":
            fields[name] = list(field)
        elif isinstance(field, float):
            fields[name] = float(np.float32(field))
        else:
            fields[name] = field
    return {"is_greedy": cfg.is_greedy, "uses_history": cfg.uses_history, "config": fields}


def effective_token_distribution(i: dict[str, Any]) -> dict[str, Any]:
    logits, cfg, history = floats(i["logits"]), config(i["config"]), sequence(i["history"])
    probs = sp.effective_token_distribution(logits, cfg, history)
    tokens = [sp.sample_token_with_distribution(logits, cfg, history, value(u))[0]
              for u in i["draw_uniforms"]]
    return {"probs": plain(probs), "draw_tokens": plain(tokens)}


def sample_from_distribution(i: dict[str, Any]) -> dict[str, Any]:
    return {"token": plain(sp.sample_from_distribution(floats(i["probs"]), floats(i["u"])))}


def accept_draft_token(i: dict[str, Any]) -> dict[str, Any]:
    accepted = sp.accept_draft_token(floats(i["p"]), floats(i["q"]), ids(i["token"]),
                                     floats(i["u"]))
    return {"accepted": plain(accepted)}


def residual_distribution(i: dict[str, Any]) -> dict[str, Any]:
    p, q = floats(i["p"]), floats(i["q"])
    residual = sp.residual_distribution(p, q)
    tokens = [sp.residual_resample(p, q, value(u)) for u in i["u"]]
    return {"residual": plain(residual), "tokens": plain(tokens)}


def verify_draft_token(i: dict[str, Any]) -> dict[str, Any]:
    q = None if i["q"] is None else floats(i["q"])
    verdict = sp.verify_draft_token(value(i["rule"]), floats(i["p"]), q, ids(i["token"]),
                                    floats(i["u_accept"]), floats(i["u_sample"]))
    return {"accepted": plain(verdict.accepted), "token": plain(verdict.token)}


def verify_tokenwise(i: dict[str, Any]) -> dict[str, Any]:
    draft = None if i["draft_probs"] is None else floats(i["draft_probs"])
    num, nxt = sp.verify_tokenwise(value(i["rule"]), floats(i["target_probs"]), draft,
                               ids(i["draft_tokens"]), floats(i["uniforms"]))
    return {"num_accepted": num, "next_token": nxt}


def verify_blockwise(i: dict[str, Any]) -> dict[str, Any]:
    draft = None if i["draft_probs"] is None else floats(i["draft_probs"])
    verdict = sp.verify_blockwise(floats(i["target_probs"]), draft, ids(i["draft_tokens"]),
                                       floats(i["uniforms"]))
    return {"num_accepted": verdict.num_accepted, "next_token": verdict.next_token,
            "accepted_length_law": plain(verdict.accepted_length_law)}


def rewind_trim(i: dict[str, Any]) -> dict[str, Any]:
    target, draft, backfill = sp.rewind_trim(value(i["num_draft"]), value(i["num_accepted"]))
    return {"target_trim": target, "draft_trim": draft, "draft_backfill": backfill}


def acceptance_closed_forms(i: dict[str, Any]) -> dict[str, Any]:
    p, q = floats(i["p"]), floats(i["q"])
    if "rule" in i:  # an error vector for acceptance_probability alone
        sp.acceptance_probability(value(i["rule"]), p, q)
        return {}
    sum_min, sum_prod, tv = sp.acceptance_closed_forms(p, q)
    return {"sum_min": plain(sum_min), "sum_prod": plain(sum_prod),
            "total_variation": plain(tv),
            "acceptance_probability": {rule: plain(sp.acceptance_probability(rule, p, q))
                                       for rule in sp.RULES}}


def acceptance_rule(i: dict[str, Any]) -> dict[str, Any]:
    rule = sp.acceptance_rule(config(i["target_config"]),
                              drafter_has_distribution=value(i["drafter_has_distribution"]),
                              stochastic=value(i["stochastic"]),
                              block=value(i.get("block")))
    return {"rule": rule}


def expected_tokens_per_round(i: dict[str, Any]) -> dict[str, Any]:
    return {"tokens": sp.expected_tokens_per_round(sequence(i["alphas"]))}


def expected_speedup(i: dict[str, Any]) -> dict[str, Any]:
    if "verify_cost" not in i:  # left out: the default
        return {"speedup": sp.expected_speedup(value(i["alpha"]), value(i["k"]), value(i["c"]))}
    return {"speedup": sp.expected_speedup(value(i["alpha"]), value(i["k"]), value(i["c"]),
                                           verify_cost=value(i["verify_cost"]))}


def grid_draw_counts(i: dict[str, Any]) -> dict[str, Any]:
    return {"counts": plain(sp.grid_draw_counts(floats(i["probs"])))}


def position_uniform(i: dict[str, Any]) -> dict[str, Any]:
    slot = sp.SLOTS.get(i["slot"], i["slot"]) if isinstance(i["slot"], str) else i["slot"]
    return {"u": sp.position_uniform(value(i["seed"]), value(i["position"]), slot)}


def verify_tree(i: dict[str, Any]) -> dict[str, Any]:
    draft = None if i["draft_probs"] is None else floats(i["draft_probs"])
    verdict = sp.verify_tree(value(i["scheme"]), sequence(i["parents"]),
                             floats(i["target_probs"]), draft, sequence(i["draft_tokens"]),
                             floats(i["accept_uniforms"]), floats(i["sample_uniforms"]))
    return {"num_accepted": verdict.num_accepted, "accepted_nodes": verdict.accepted_nodes,
            "next_token": verdict.next_token}


def tree_acceptance(i: dict[str, Any]) -> dict[str, Any]:
    p, q, n = floats(i["p"]), floats(i["q"]), value(i["num_drafts"])
    return {"iid_siblings_acceptance": sp.iid_siblings_acceptance(p, q, n),
            "without_replacement_siblings_acceptance":
                sp.without_replacement_siblings_acceptance(p, q, n),
            "candidate_siblings_acceptance":
                sp.candidate_siblings_acceptance(p, sequence(i["candidates"])),
            "multi_draft_ceiling": sp.multi_draft_ceiling(p, q, n)}


HANDLERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "sampler_config": sampler_config,
    "effective_token_distribution": effective_token_distribution,
    "sample_from_distribution": sample_from_distribution,
    "accept_draft_token": accept_draft_token,
    "residual_distribution": residual_distribution,
    "verify_draft_token": verify_draft_token,
    "verify_tokenwise": verify_tokenwise,
    "verify_blockwise": verify_blockwise,
    "rewind_trim": rewind_trim,
    "acceptance_closed_forms": acceptance_closed_forms,
    "acceptance_rule": acceptance_rule,
    "expected_tokens_per_round": expected_tokens_per_round,
    "expected_speedup": expected_speedup,
    "grid_draw_counts": grid_draw_counts,
    "position_uniform": position_uniform,
    "verify_tree": verify_tree,
    "tree_acceptance": tree_acceptance,
}


# --- a round's uniforms and a whole seeded run ---------------------------------------------


def round_uniform(i: dict[str, Any]) -> dict[str, Any]:
    slot = sp.SLOTS.get(i["slot"], i["slot"]) if isinstance(i["slot"], str) else i["slot"]
    return {"u": sp.round_uniform(value(i["seed"]), value(i["round_position"]),
                                  value(i["offset"]), slot)}


def table_law(raw: dict[str, Any]) -> Callable[[list[int]], Any]:
    """The law of the next token: the row of the last `context_length` tokens, read as
    base-V digits, oldest first."""
    rows = np.array(raw["rows"], dtype=np.float32)
    context_length, vocab_size = int(raw["context_length"]), rows.shape[1]

    def law(history: list[int]) -> Any:
        index = 0
        for token in history[len(history) - context_length:]:
            index = index * vocab_size + token
        return rows[index]

    return law


def seeded_run(i: dict[str, Any]) -> dict[str, Any]:
    rounds = sp.seeded_run(table_law(i["target_law"]), table_law(i["draft_law"]),
                           [value(t) for t in i["prompt"]], value(i["rule"]),
                           value(i["num_draft_tokens"]), value(i["max_tokens"]),
                           value(i["seed"]))
    return {"tokens": [t for r in rounds for t in [*r.draft_tokens[:r.num_accepted],
                                                   r.next_token]],
            "rounds": [{"position": r.position, "draft_tokens": r.draft_tokens,
                        "num_accepted": r.num_accepted, "next_token": r.next_token}
                       for r in rounds]}


HANDLERS.update({"round_uniform": round_uniform, "seeded_run": seeded_run})


def answer(request: dict[str, Any]) -> dict[str, Any]:
    handler = HANDLERS.get(request["family"])
    if handler is None:
        return {"failure": f"this port implements no family {request['family']!r} yet"}
    try:
        return {"output": handler(request["input"])}
    except (sp.ArgumentTypeError, sp.ArgumentValueError) as error:
        kind = "TypeError" if isinstance(error, TypeError) else "ValueError"
        return {"error": {"kind": kind, "argument": error.argument}}
    except Exception as error:  # a bug of the port: say so, and keep answering
        return {"failure": f"{type(error).__name__}: {error}"}


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(json.loads(line)), allow_nan=True), flush=True)


if __name__ == "__main__":
    main()
