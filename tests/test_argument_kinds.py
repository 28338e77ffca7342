"""The tables of spec/porting_reference.md, checked against the library and the vectors.

The argument-kinds table is parsed from the page, and each row is probed: the function is
called with valid arguments but the one in the row, which takes a value of the stated kind
(it must be accepted) and values of other kinds (each must raise, naming the argument). The
error-arguments table must equal what the error vectors name, file by file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx
import pytest

import specaccept
from specaccept import AcceptanceRule, SamplerConfig, TreeScheme

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "spec" / "porting_reference.md"
ROW = re.compile(r"^\| `(\w+)` \| `(\w+)` \| ([a-z ]+?) \| ?(\w*) ?\|$", re.MULTILINE)

P = mx.array([0.5, 0.25, 0.25])
Q = mx.array([0.25, 0.5, 0.25])
ROWS = mx.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]])
TREE_P = mx.array([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])

BASE: dict[str, dict[str, Any]] = {
    "effective_token_distribution": {"logits": mx.zeros((3,)), "config": SamplerConfig(),
                                     "history": [0, 1]},
    "sample_from_distribution": {"probs": P, "u": 0.5},
    "sample_token_with_distribution": {"logits": mx.zeros((3,)), "config": SamplerConfig(),
                                       "history": (), "u": 0.5},
    "accept_draft_token": {"p": P, "q": Q, "token": 1, "u": 0.5},
    "residual_distribution": {"p": P, "q": Q},
    "residual_resample": {"p": P, "q": Q, "u": 0.5},
    "verify_draft_token": {"rule": AcceptanceRule.STOCHASTIC, "p": P, "q": Q, "token": 1,
                           "u_accept": 0.5, "u_sample": 0.5},
    "verify_tokenwise": {"rule": AcceptanceRule.STOCHASTIC, "target_probs": ROWS,
                         "draft_probs": ROWS[:1], "draft_tokens": mx.array([0]),
                         "uniforms": mx.zeros((2, 2))},
    "verify_blockwise": {"target_probs": ROWS, "draft_probs": ROWS[:1],
                         "draft_tokens": mx.array([0]), "uniforms": mx.zeros((2, 2))},
    "verify_tree": {"scheme": TreeScheme.IID, "parents": (-1, -1), "target_probs": TREE_P,
                    "draft_probs": TREE_P, "draft_tokens": (0, 1),
                    "accept_uniforms": mx.zeros((2,)), "sample_uniforms": mx.zeros((2,))},
    "verify_batch": {"rules": [AcceptanceRule.STOCHASTIC, AcceptanceRule.GREEDY_ARGMAX],
                     "target_probs": mx.concatenate([ROWS, P[None]]),
                     "draft_probs": mx.concatenate([ROWS, Q[None]]),
                     "draft_tokens": mx.array([0, -1, -1]), "cu_num_rows": [0, 2, 3],
                     "uniforms": mx.zeros((3, 2))},
    "rewind_trim": {"num_draft": 2, "num_accepted": 1},
    "acceptance_closed_forms": {"p": P, "q": Q},
    "acceptance_probability": {"rule": AcceptanceRule.STOCHASTIC, "p": P, "q": Q},
    "acceptance_rule": {"target_config": SamplerConfig(), "drafter_has_distribution": True,
                        "stochastic": None, "block": None},
    "expected_tokens_per_round": {"alphas": [0.5, 0.5]},
    "expected_speedup": {"alpha": 0.5, "k": 2, "c": 0.25, "verify_cost": 1.0},
    "grid_draw_counts": {"probs": P},
    "iid_siblings_acceptance": {"p": P, "q": Q, "num_drafts": 2},
    "candidate_siblings_acceptance": {"p": P, "candidates": [0, 1]},
}

OTHER_DTYPE = {"float32": mx.float16, "floating": mx.int32, "integer": mx.float32}
"""For an array of each dtype class, a dtype outside it."""


def table_rows() -> list[tuple[str, str, str, str]]:
    rows = ROW.findall(PAGE.read_text("utf-8"))
    assert len(rows) >= 40, "the argument-kinds table was not found"
    return rows


def call(function: str, argument: str, value: object) -> object:
    arguments = {**BASE[function], argument: value}
    result = getattr(specaccept, function)(**arguments)
    if isinstance(result, mx.array):
        mx.eval(result)
    return result


def raises_naming(function: str, argument: str, value: object) -> bool:
    try:
        call(function, argument, value)
    except (TypeError, ValueError) as error:
        return re.search(rf"(?<![\w.]){argument}(?!\w)", str(error)) is not None
    return False


def sequence_or_array_values(function: str, argument: str) -> tuple[list[int], mx.array]:
    items = [int(x) for x in BASE[function][argument]]
    return items, mx.array(items, dtype=mx.int32)


Probe = Callable[[str, str, str], None]
PROBES: dict[str, Probe] = {}


def probe(kind: str) -> Callable[[Probe], Probe]:
    def register(check: Probe) -> Probe:
        PROBES[kind] = check
        return check

    return register


@probe("array")
def _array(function: str, argument: str, dtype: str) -> None:
    base = BASE[function][argument]
    assert isinstance(base, mx.array)
    call(function, argument, base)
    assert raises_naming(function, argument, base.tolist())
    assert raises_naming(function, argument, base.astype(OTHER_DTYPE[dtype]))
    if dtype == "floating":
        call(function, argument, base.astype(mx.float16))
    if dtype == "integer":
        call(function, argument, base.astype(mx.int64))


@probe("number or array")
def _number_or_array(function: str, argument: str, dtype: str) -> None:
    call(function, argument, 0.5)
    call(function, argument, 0)
    call(function, argument, mx.array(0.5, dtype=mx.float16))
    assert raises_naming(function, argument, 1.0)
    assert raises_naming(function, argument, True)
    assert raises_naming(function, argument, [0.5])
    assert raises_naming(function, argument, mx.array(0, dtype=mx.int32))


@probe("int or array")
def _int_or_array(function: str, argument: str, dtype: str) -> None:
    call(function, argument, 2)
    call(function, argument, mx.array(2, dtype=mx.int64))
    call(function, argument, mx.array(-1, dtype=mx.int32))  # a placeholder, not an error
    assert raises_naming(function, argument, 3)
    assert raises_naming(function, argument, True)
    assert raises_naming(function, argument, 1.0)
    assert raises_naming(function, argument, mx.array(1.0))


@probe("sequence or array")
def _sequence_or_array(function: str, argument: str, dtype: str) -> None:
    items, array = sequence_or_array_values(function, argument)
    call(function, argument, items)
    call(function, argument, tuple(items))
    call(function, argument, array)
    assert raises_naming(function, argument, "01")
    assert raises_naming(function, argument, 1)
    assert raises_naming(function, argument, array.astype(mx.float32))


@probe("sequence")
def _sequence(function: str, argument: str, dtype: str) -> None:
    items = list(BASE[function][argument])
    call(function, argument, items)
    call(function, argument, tuple(items))
    assert raises_naming(function, argument, mx.array(items))
    assert raises_naming(function, argument, "ab")
    assert raises_naming(function, argument, 1)


@probe("int")
def _int(function: str, argument: str, dtype: str) -> None:
    call(function, argument, BASE[function][argument])
    assert raises_naming(function, argument, float(BASE[function][argument]))
    assert raises_naming(function, argument, True)
    assert raises_naming(function, argument, mx.array(BASE[function][argument]))


@probe("real")
def _real(function: str, argument: str, dtype: str) -> None:
    call(function, argument, BASE[function][argument])
    call(function, argument, 1)
    assert raises_naming(function, argument, True)
    assert raises_naming(function, argument, mx.array(0.5))
    assert raises_naming(function, argument, float("nan"))


@probe("bool")
def _bool(function: str, argument: str, dtype: str) -> None:
    call(function, argument, True)
    call(function, argument, False)
    assert raises_naming(function, argument, 1)
    assert raises_naming(function, argument, None)


@probe("bool or None")
def _bool_or_none(function: str, argument: str, dtype: str) -> None:
    for value in (True, False, None):
        call(function, argument, value)
    assert raises_naming(function, argument, 1)
    assert raises_naming(function, argument, "yes")


@probe("enum")
def _enum(function: str, argument: str, dtype: str) -> None:
    member = BASE[function][argument]
    call(function, argument, member)
    assert raises_naming(function, argument, member.value)


@probe("config")
def _config(function: str, argument: str, dtype: str) -> None:
    call(function, argument, SamplerConfig(top_p=0.5))
    assert raises_naming(function, argument, {"top_p": 0.5})
    assert raises_naming(function, argument, None)


@pytest.mark.parametrize(("function", "argument", "kind", "dtype"), table_rows(),
                         ids=[f"{r[0]}.{r[1]}" for r in table_rows()])
def test_each_argument_has_the_kind_the_table_states(function: str, argument: str, kind: str,
                                                     dtype: str) -> None:
    assert kind in PROBES, f"unknown kind {kind!r}"
    assert (dtype != "") == (kind in {"array", "number or array", "int or array",
                                      "sequence or array"}), "a dtype belongs to array kinds"
    PROBES[kind](function, argument, dtype)


def test_a_wrong_table_row_fails_its_probe() -> None:
    """The probes have power: a row that misstates a kind or a dtype fails (an assertion, or
    the library refusing what the row says it accepts)."""
    wrong_rows = [
        ("array", "sample_from_distribution", "u", "floating"),  # u may be a number too
        ("sequence", "effective_token_distribution", "history", ""),  # an array is fine too
        ("array", "accept_draft_token", "p", "floating"),  # p must be float32
        ("int", "expected_speedup", "c", ""),  # c is any real
        ("sequence or array", "verify_tree", "parents", "integer"),  # no array of parents
    ]
    for kind, function, argument, dtype in wrong_rows:
        with pytest.raises((AssertionError, TypeError, ValueError)):
            PROBES[kind](function, argument, dtype)


def error_arguments_from_vectors() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "spec" / "vectors").glob("*.json")):
        document = json.loads(path.read_text("utf-8"))
        if "vectors" not in document:
            continue
        names = {v["error"]["argument"] for v in document["vectors"] if "error" in v}
        out[path.name] = sorted(names)
    return out


def test_the_error_arguments_table_is_what_the_vectors_name() -> None:
    text = PAGE.read_text("utf-8")
    block = text.split("<!-- error-arguments:", 1)[1].split("\n\n", 1)[0]
    stated = {
        match.group(1): sorted(re.findall(r"`(\w+)`", match.group(2)))
        for match in re.finditer(r"^\| `(\w+\.json)` \| (.*) \|$", block, re.MULTILINE)
    }
    assert stated == error_arguments_from_vectors()
