"""Fuzz every public core function: a valid result, or a TypeError/ValueError naming the argument.

Two kinds of input, for each function:

- *valid*: arrays whose contents meet the documented preconditions, configs drawn over the
  whole of each field's range, bounds included. The result must be valid: probabilities
  finite, non-negative, summing to 1 within `SUM_TOLERANCE`; tokens in range and of
  positive probability under the law they were drawn from; counts and closed forms within
  their bounds. This is the float32 envelope of spec/sampler_config.md, checked.
- *hostile*: each argument replaced, independently, by a value that is wrong in what the
  spec says a port must check (type, dtype, rank, shape, a Python scalar out of range).
  The call must either return a valid result (some replacements are legal, such as a
  uint8 token array) or raise TypeError or ValueError whose message names one of the
  function's arguments or a SamplerConfig field. Any other exception fails.

Array *contents* that violate a precondition are not fuzzed here: the spec states what
they return (tests/test_core_preconditions.py). The example budgets are fixed and the
examples derandomized, so CI runs the same inputs every time; the last test prints the
total.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
from specaccept.core.randomness import position_uniform
from specaccept.core.sampler_config import (
    ADJUSTMENT_LIMIT,
    FLOAT32_MAX,
    LOGIT_LIMIT,
    REPETITION_PENALTY_LIMIT,
    SMALLEST_TEMPERATURE,
)

SUM_TOLERANCE = 1e-4
"""How far from 1 a row of probabilities may sum: float32 softmax and mixtures over <= 12 ids."""

EXAMPLES = {"valid": 150, "hostile": 150, "config": 400}
"""The fixed example budget per test kind; the total is printed at the end."""

FIELDS = set(SamplerConfig.__dataclass_fields__)
RULES = list(AcceptanceRule)
examples_run: dict[str, int] = {}


def _budget(kind: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    return settings(
        max_examples=EXAMPLES[kind], deadline=None, derandomize=True, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _int(array: mx.array) -> int:
    value = array.item()
    assert isinstance(value, int), value
    return value


def _count(name: str) -> None:
    examples_run[name] = examples_run.get(name, 0) + 1


# ---------------------------------------------------------------------------------------------
# Valid inputs.

vocab_sizes = st.integers(1, 12)


@st.composite
def distributions(draw: st.DrawFn, vocab: int, rows: int | None = None) -> mx.array:
    """`[V]` (or `[rows, V]`) float32 rows, non-negative, summing to 1, zeros included."""
    count = 1 if rows is None else rows
    weights = np.array(
        draw(st.lists(
            st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 1.0)), min_size=vocab,
                     max_size=vocab),
            min_size=count, max_size=count,
        )),
        dtype=np.float64,
    )
    for row in weights:
        if row.sum() == 0:
            row[draw(st.integers(0, vocab - 1))] = 1.0
    weights = (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)
    array = mx.array(weights)
    return array[0] if rows is None else array


def _edges(low: float, high: float) -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from([low, high]), st.floats(low, high))


configs = st.builds(
    SamplerConfig,
    temperature=st.one_of(st.just(0.0), _edges(SMALLEST_TEMPERATURE, FLOAT32_MAX),
                          st.floats(0.05, 5.0)),
    top_k=st.integers(0, 14),
    top_p=st.one_of(st.just(1.0), st.floats(1e-9, 1.0, exclude_min=False)),
    min_p=st.one_of(st.just(0.0), st.floats(0.0, 1.0)),
    repetition_penalty=st.one_of(
        st.just(1.0), _edges(1.0 / REPETITION_PENALTY_LIMIT, REPETITION_PENALTY_LIMIT)
    ),
    repetition_context_size=st.integers(1, 40),
    frequency_penalty=st.one_of(st.just(0.0), _edges(-ADJUSTMENT_LIMIT, ADJUSTMENT_LIMIT)),
    presence_penalty=st.one_of(st.just(0.0), _edges(-ADJUSTMENT_LIMIT, ADJUSTMENT_LIMIT)),
    dry_multiplier=st.one_of(st.just(0.0), _edges(SMALLEST_TEMPERATURE, FLOAT32_MAX)),
    dry_base=_edges(1.0, FLOAT32_MAX),
    dry_allowed_length=st.integers(1, 4),
    dry_penalty_last_n=st.integers(-1, 30),
    dry_sequence_breakers=st.lists(st.integers(0, 11), max_size=2).map(tuple),
    xtc_probability=st.one_of(st.just(0.0), st.floats(0.0, 1.0)),
    xtc_threshold=st.floats(0.0, 1.0),
    logit_bias=st.dictionaries(st.integers(0, 0), _edges(-ADJUSTMENT_LIMIT, ADJUSTMENT_LIMIT),
                               max_size=1),
)


@st.composite
def logits_rows(draw: st.DrawFn, vocab: int, rows: int | None) -> mx.array:
    """Logits in the envelope: finite within +-LOGIT_LIMIT or -inf, one finite per row."""
    count = 1 if rows is None else rows
    finite = st.one_of(st.sampled_from([0.0, LOGIT_LIMIT, -LOGIT_LIMIT]),
                       st.floats(-50.0, 50.0), st.floats(-LOGIT_LIMIT, LOGIT_LIMIT))
    values = np.array(draw(st.lists(
        st.lists(st.one_of(finite, st.just(-math.inf)), min_size=vocab, max_size=vocab),
        min_size=count, max_size=count,
    )), dtype=np.float32)
    for row in values:
        if not np.isfinite(row).any():
            row[draw(st.integers(0, vocab - 1))] = draw(finite)
    array = mx.array(values)
    return array[0] if rows is None else array


def _assert_distribution(probs: mx.array, shape: tuple[int, ...]) -> np.ndarray:
    values = np.array(probs)
    assert probs.dtype == mx.float32 and values.shape == shape
    assert np.isfinite(values).all(), values
    assert (values >= 0).all(), values
    assert np.allclose(values.sum(axis=-1), 1.0, atol=SUM_TOLERANCE), values.sum(axis=-1)
    return values


@_budget("valid")
@given(st.data())
def test_effective_token_distribution_is_always_a_distribution(data: st.DataObject) -> None:
    vocab = data.draw(vocab_sizes)
    rows = data.draw(st.one_of(st.none(), st.integers(1, 3)))
    config = data.draw(configs)
    logits = data.draw(logits_rows(vocab, rows))
    history = data.draw(st.lists(st.integers(0, vocab - 1), max_size=30))
    probs = effective_token_distribution(logits, config, history)
    _assert_distribution(probs, tuple(logits.shape))
    if rows is None:
        token, drawn = sample_token_with_distribution(
            logits, config, history, data.draw(st.floats(0.0, 1.0, exclude_max=True))
        )
        assert np.array(drawn)[_int(token)] > 0
    _count("effective_token_distribution")


@_budget("valid")
@given(st.data())
def test_draws_are_in_range_and_of_positive_probability(data: st.DataObject) -> None:
    vocab = data.draw(vocab_sizes)
    rows = data.draw(st.one_of(st.none(), st.integers(1, 3)))
    p = data.draw(distributions(vocab, rows))
    q = data.draw(distributions(vocab, rows))
    u = data.draw(st.floats(0.0, 1.0, exclude_max=True))
    batch = tuple(p.shape[:-1])
    token = sample_from_distribution(p, u)
    assert token.dtype == mx.int32 and tuple(token.shape) == batch
    chosen = np.take_along_axis(np.array(p).reshape(-1, vocab),
                                np.array(token).reshape(-1, 1), axis=1)
    assert (chosen > 0).all()
    residual = residual_distribution(p, q)
    _assert_distribution(residual, tuple(p.shape))
    replacement = np.array(residual_resample(p, q, u)).reshape(-1, 1)
    assert (np.take_along_axis(np.array(residual).reshape(-1, vocab), replacement, 1) > 0).all()
    drafted = mx.array(np.array(token).astype(np.int32))
    accepted = accept_draft_token(p, q, drafted, u)
    assert accepted.dtype == mx.bool_ and tuple(accepted.shape) == batch
    if rows is None:
        counts = np.array(grid_draw_counts(p))
        assert counts.sum() == 2**24 and (counts[np.array(p) == 0] == 0).all()
    forms = acceptance_closed_forms(p, q)
    for value in (forms.sum_min, forms.sum_prod):
        assert (np.array(value) >= -1e-6).all() and (np.array(value) <= 1 + 1e-5).all()
    for rule in RULES:
        alpha = np.array(acceptance_probability(rule, p, q))
        assert np.isfinite(alpha).all() and (alpha >= -1e-6).all() and (alpha <= 1 + 1e-5).all()
    _count("sample_from_distribution and the single-position rules")


@_budget("valid")
@given(st.data())
def test_a_round_verdict_is_in_range_under_every_rule(data: st.DataObject) -> None:
    vocab = data.draw(vocab_sizes)
    k = data.draw(st.integers(1, 4))
    target = data.draw(distributions(vocab, k + 1))
    draft = data.draw(distributions(vocab, k))
    drafts = mx.array(
        [sample_from_distribution(draft[i], data.draw(st.floats(0, 0.999))).item()
         for i in range(k)], dtype=mx.int32,
    )
    uniforms = mx.array(data.draw(st.lists(
        st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=2, max_size=2),
        min_size=k + 1, max_size=k + 1,
    )), dtype=mx.float32)
    target_values = np.array(target)
    for rule in RULES:
        if rule.verifies_jointly:
            continue  # verify_blockwise, below
        verdict = verify_tokenwise(rule, target, draft, drafts, uniforms)
        accepted, following = verdict.num_accepted.item(), verdict.next_token.item()
        assert isinstance(accepted, int) and 0 <= accepted <= k
        assert isinstance(following, int) and 0 <= following < vocab
        assert target_values[accepted, following] > 0
        single = verify_draft_token(rule, target[0], draft[0], drafts[0],
                                    uniforms[0, 0], uniforms[0, 1])
        assert 0 <= _int(single.token) < vocab
    joint = verify_blockwise(target, draft, drafts, uniforms)
    accepted = joint.num_accepted.item()
    assert isinstance(accepted, int) and 0 <= accepted <= k
    assert 0 <= _int(joint.next_token) < vocab
    law = np.array(joint.accepted_length_law)
    assert np.isfinite(law).all() and (law >= -1e-6).all() and abs(law.sum() - 1) < 1e-4
    _count("verify_tokenwise, verify_draft_token, verify_blockwise")


@_budget("valid")
@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8),
    st.floats(0.0, 1.0), st.integers(1, 16), st.floats(0.0, 10.0), st.floats(1e-3, 10.0),
    st.integers(0, 2**64 - 1), st.integers(0, 10**6), st.integers(0, 3),
)
def test_the_scalar_functions_stay_in_their_ranges(
    alphas: list[float], alpha: float, k: int, c: float, verify_cost: float,
    seed: int, position: int, slot: int,
) -> None:
    tokens = expected_tokens_per_round(alphas)
    assert 1.0 <= tokens <= len(alphas) + 1 + 1e-9
    speedup = expected_speedup(alpha, k, c, verify_cost=verify_cost)
    assert math.isfinite(speedup) and speedup > 0
    accepted = min(k, int(alpha * (k + 1)))
    plan = rewind_trim(k, accepted)
    assert all(isinstance(v, int | bool) and v >= 0 for v in plan)
    assert 0.0 <= position_uniform(seed, position, slot) < 1.0
    _count("scalar functions")


# ---------------------------------------------------------------------------------------------
# Hostile inputs: wrong in what a port must check.


def _names_an_argument(error: Exception, names: set[str]) -> bool:
    message = str(error)
    return any(re.search(rf"(^|[^\w]){re.escape(name)}([^\w]|$)", message) for name in names)


def _call(function: Callable[..., Any], arguments: dict[str, Any], names: set[str]) -> Any:
    """Call; a TypeError/ValueError must name an argument. Returns None when it raised."""
    try:
        return function(**arguments)
    except (TypeError, ValueError) as error:
        assert _names_an_argument(error, names), f"{type(error).__name__}: {error}"
        return None


def _garbage_array(vocab: int) -> st.SearchStrategy[Any]:
    return st.sampled_from([
        None, "p", True, 0.5, 3, [0.5, 0.5], (1,),
        mx.zeros((vocab,), dtype=mx.float16), mx.zeros((vocab,), dtype=mx.float64),
        mx.zeros((vocab,), dtype=mx.int32), mx.ones((vocab,), dtype=mx.bool_),
        mx.zeros((0,)), mx.zeros((0, vocab)), mx.zeros((1, 1, vocab)), mx.array(0.5),
        mx.full((vocab + 1,), 1.0 / (vocab + 1)), mx.full((2, vocab), 1.0 / vocab),
    ])


def _garbage_scalar() -> st.SearchStrategy[Any]:
    return st.sampled_from([
        None, "0", True, False, -1, 2**40, -0.5, 1.0, 1.5, math.nan, math.inf, [0],
        mx.array(0.5, dtype=mx.float16), mx.array([0.5, 0.5]), mx.array(1, dtype=mx.uint8),
        mx.array(0.25), mx.array(1), mx.array([1]), mx.zeros((2, 2)),
    ])


def _maybe(valid: Any, garbage: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(valid), st.just(valid), garbage)


@_budget("hostile")
@given(st.data())
def test_hostile_arguments_to_the_single_position_functions(data: st.DataObject) -> None:
    vocab = data.draw(st.integers(2, 6))
    p, q = data.draw(distributions(vocab)), data.draw(distributions(vocab))
    p_arg = data.draw(_maybe(p, _garbage_array(vocab)))
    q_arg = data.draw(_maybe(q, _garbage_array(vocab)))
    token = data.draw(_maybe(0, _garbage_scalar()))
    u = data.draw(_maybe(0.5, _garbage_scalar()))
    u_sample = data.draw(_maybe(0.25, _garbage_scalar()))
    rule = data.draw(_maybe(AcceptanceRule.STOCHASTIC,
                            st.sampled_from([*RULES, "stochastic", None, 1])))
    calls: list[tuple[Callable[..., Any], dict[str, Any]]] = [
        (accept_draft_token, {"p": p_arg, "q": q_arg, "token": token, "u": u}),
        (residual_distribution, {"p": p_arg, "q": q_arg}),
        (residual_resample, {"p": p_arg, "q": q_arg, "u": u}),
        (sample_from_distribution, {"probs": p_arg, "u": u}),
        (grid_draw_counts, {"probs": p_arg}),
        (acceptance_closed_forms, {"p": p_arg, "q": q_arg}),
        (acceptance_probability, {"rule": rule, "p": p_arg, "q": q_arg}),
        (verify_draft_token, {"rule": rule, "p": p_arg, "q": q_arg, "token": token,
                              "u_accept": u, "u_sample": u_sample}),
    ]
    for function, arguments in calls:
        result = _call(function, arguments, set(arguments))
        if result is not None:
            for value in (result if isinstance(result, tuple) else (result,)):
                assert np.isfinite(np.array(value, dtype=np.float64)).all(), (function, value)
    _count("hostile single-position calls")


@_budget("hostile")
@given(st.data())
def test_hostile_arguments_to_the_round_functions(data: st.DataObject) -> None:
    vocab, k = data.draw(st.integers(2, 6)), data.draw(st.integers(1, 3))
    target, draft = data.draw(distributions(vocab, k + 1)), data.draw(distributions(vocab, k))
    drafts = mx.zeros((k,), dtype=mx.int32)
    uniforms = mx.full((k + 1, 2), 0.5)
    wrong_rows = st.sampled_from([
        None, 0.5, target[0], target.astype(mx.float16), target[:k], target[:, :1],
        mx.zeros((0, vocab)), target[None], target.astype(mx.int32),
    ])
    wrong_tokens = st.sampled_from([
        None, 0, [0] * k, mx.zeros((k,)), mx.zeros((k + 1,), dtype=mx.int32),
        mx.zeros((0,), dtype=mx.int32), mx.zeros((1, k), dtype=mx.int32),
        mx.zeros((k,), dtype=mx.uint8), mx.zeros((k,), dtype=mx.int64),
    ])
    wrong_uniforms = st.sampled_from([
        None, 0.5, uniforms[:k], uniforms[:, :1], uniforms.astype(mx.int32),
        uniforms.astype(mx.float16), uniforms[None],
    ])
    arguments = {
        "target_probs": data.draw(_maybe(target, wrong_rows)),
        "draft_probs": data.draw(_maybe(draft, wrong_rows)),
        "draft_tokens": data.draw(_maybe(drafts, wrong_tokens)),
        "uniforms": data.draw(_maybe(uniforms, wrong_uniforms)),
    }
    rule = data.draw(_maybe(AcceptanceRule.STOCHASTIC, st.sampled_from([*RULES, "x", None])))
    for function, call in (
        (verify_tokenwise, {"rule": rule, **arguments}),
        (verify_blockwise, arguments),
    ):
        result = _call(function, call, set(call))
        if result is not None:
            assert 0 <= _int(result.num_accepted) <= k
            assert 0 <= _int(result.next_token) < vocab
    _count("hostile round calls")


@_budget("hostile")
@given(st.data())
def test_hostile_arguments_to_the_sampler(data: st.DataObject) -> None:
    vocab = data.draw(st.integers(1, 6))
    logits = mx.zeros((vocab,))
    arguments = {
        "logits": data.draw(_maybe(logits, st.sampled_from([
            None, [0.0] * vocab, mx.zeros((vocab,), dtype=mx.int32), mx.zeros((0,)),
            mx.zeros((0, vocab)), mx.zeros((1, 1, vocab)), mx.array(0.0),
            mx.zeros((2, vocab), dtype=mx.float16), mx.zeros((vocab,), dtype=mx.bfloat16),
        ]))),
        "config": data.draw(_maybe(SamplerConfig(), st.sampled_from([
            None, {"temperature": 1.0}, SamplerConfig(logit_bias={vocab: 1.0}),
            SamplerConfig(temperature=0.0), SamplerConfig(dry_multiplier=1.0),
        ]))),
        "history": data.draw(_maybe([0], st.sampled_from([
            None, "0", 3, [vocab], [-1], [True], [0.0], [2**31], mx.zeros((2, 2), dtype=mx.int32),
            mx.zeros((2,)), mx.array([0, 0], dtype=mx.uint32), (0, 0),
        ]))),
    }
    result = _call(effective_token_distribution, arguments, set(arguments) | FIELDS)
    if result is not None:
        _assert_distribution(result, tuple(result.shape))
    u = data.draw(_maybe(0.5, _garbage_scalar()))
    drawn = _call(sample_token_with_distribution, {**arguments, "u": u},
                  set(arguments) | {"u"} | FIELDS)
    if drawn is not None:
        assert 0 <= _int(drawn.token) < vocab
    _count("hostile sampler calls")


@_budget("hostile")
@given(
    st.one_of(st.lists(st.floats(allow_nan=True, allow_infinity=True)), st.none(), st.text(),
              st.lists(st.text(), max_size=2), st.floats()),
    st.one_of(st.floats(allow_nan=True), st.integers(-2, 2), st.booleans(), st.none()),
    st.one_of(st.integers(-3, 20), st.floats(), st.booleans(), st.none(), st.text()),
    st.one_of(st.floats(allow_nan=True), st.integers(-2, 2), st.booleans(), st.text()),
    st.one_of(st.integers(-3, 5), st.floats(), st.booleans(), st.none()),
    st.one_of(st.integers(-2, 2**65), st.floats(), st.booleans(), st.none()),
    st.one_of(st.sampled_from([*RULES, None, "stochastic", 1])),
)
def test_hostile_arguments_to_the_scalar_functions(
    alphas: Any, alpha: Any, k: Any, c: Any, accepted: Any, seed: Any, rule: Any
) -> None:
    _call(expected_tokens_per_round, {"alphas": alphas}, {"alphas"})
    _call(expected_speedup, {"alpha": alpha, "k": k, "c": c}, {"alpha", "k", "c", "verify_cost"})
    _call(rewind_trim, {"num_draft": k, "num_accepted": accepted}, {"num_draft", "num_accepted"})
    _call(position_uniform, {"seed": seed, "position": accepted, "slot": k},
          {"seed", "position", "slot"})
    _call(acceptance_rule, {"target_config": SamplerConfig(), "drafter_has_distribution": alpha,
                            "stochastic": rule if rule is None or isinstance(rule, bool) else c},
          {"target_config", "drafter_has_distribution", "stochastic"})
    _count("hostile scalar calls")


# ---------------------------------------------------------------------------------------------
# SamplerConfig: any value for any field.

float32_edges = st.sampled_from([
    1e-50, 1e-46, 1e-40, 2.0**-126, 1e-10, 2.0**-32, 2.0**32, 1e30, 2.0**64, 1e20, 3.4e38,
    3.5e38, 1e39, -1e39, -(2.0**64), 2**31 - 1, 2**31, 2**32 - 1,
])
anything = st.one_of(
    float32_edges, float32_edges.map(lambda x: (x,)), float32_edges.map(lambda x: {0: x}),
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=3), st.lists(st.integers(-3, 3), max_size=2),
    st.tuples(st.integers(-(2**33), 2**33)), st.tuples(st.text(max_size=1)),
    st.dictionaries(st.integers(-2, 2**32), st.floats(allow_nan=True), max_size=2),
    st.dictionaries(st.text(max_size=1), st.floats(), max_size=1),
)


@_budget("config")
@given(st.dictionaries(st.sampled_from(sorted(FIELDS)), anything, max_size=3))
def test_a_sampler_config_is_built_or_refused_by_field(settings_: dict[str, Any]) -> None:
    try:
        config = SamplerConfig(**settings_)
    except (TypeError, ValueError) as error:
        assert _names_an_argument(error, set(settings_)), f"{settings_}: {error}"
        _count("SamplerConfig")
        return
    # Built: then it is inside the envelope, so it yields a distribution.
    vocab = 3 + max((k for k in config.logit_bias), default=0)
    if vocab > 64:
        _count("SamplerConfig")
        return
    probs = effective_token_distribution(mx.zeros((vocab,)), config, [0, 1, 0, 1])
    _assert_distribution(probs, (vocab,))
    _count("SamplerConfig")


REAL_FIELDS = sorted(
    name for name, field in SamplerConfig.__dataclass_fields__.items() if field.type == "float"
)
EDGES = [
    1e-50, 1e-46, 1e-40, 2.0**-126, 1e-10, 2.0**-32, 0.5, 1.0, 2.0**32, 1e30, 2.0**64, 1e20,
    3.4e38, 3.5e38, 1e39, -1e39, -(2.0**64), -1e-40,
]


@pytest.mark.parametrize("field", REAL_FIELDS)
def test_every_real_field_at_every_float32_edge_is_refused_or_usable(field: str) -> None:
    # A deterministic sweep beside the random one: each value either is refused naming the
    # field, or yields a distribution from a history that every penalty reads.
    assert len(REAL_FIELDS) >= 10
    for value in EDGES:
        for settings_ in ({field: value}, {field: value, "temperature": 0.5}):
            try:
                config = SamplerConfig(**settings_)  # type: ignore[arg-type]
            except ValueError as error:
                assert _names_an_argument(error, {field}), error
                continue
            logits = mx.array([0.0, 1.0, -1.0, float("-inf")])
            probs = effective_token_distribution(logits, config, [0, 1, 0, 1, 2])
            assert np.isfinite(np.array(probs)).all(), (settings_, probs)
            _assert_distribution(probs, (4,))
        _count("SamplerConfig edges")


def test_zz_report_the_fuzz_budget(capsys: pytest.CaptureFixture[str]) -> None:
    total = sum(examples_run.values())
    with capsys.disabled():
        counts = ", ".join(f"{name}: {count}" for name, count in examples_run.items())
        print(f"\nfuzz: {total} examples ({counts})")
    if examples_run:
        assert total >= 100
