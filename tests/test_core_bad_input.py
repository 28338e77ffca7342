"""Bad input fails eagerly, with an error whose message names the offending argument."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

from specaccept import (
    BLOCK_VERIFY_ENV,
    STOCHASTIC_ACCEPT_ENV,
    AcceptanceRule,
    SamplerConfig,
    accept_draft_token,
    acceptance_rule,
    effective_token_distribution,
    residual_distribution,
    residual_resample,
    sample_from_distribution,
    verify_draft_token,
    verify_tokenwise,
)

P = mx.array([0.25, 0.5, 0.25])
Q = mx.array([0.5, 0.25, 0.25])
P2 = mx.array([[0.25, 0.5, 0.25], [1.0, 0.0, 0.0]])
Q2 = mx.array([[0.5, 0.25, 0.25], [0.5, 0.5, 0.0]])
STOCHASTIC = AcceptanceRule.STOCHASTIC

Call = Callable[[], object]


def _case(call: Call, error: type[Exception], match: str, id_: str) -> Any:
    return pytest.param(call, error, match, id=id_)


BAD_U = [
    (float("nan"), ValueError, r"must lie in \[0, 1\)"),
    (float("inf"), ValueError, r"must lie in \[0, 1\)"),
    (1.0, ValueError, r"must lie in \[0, 1\)"),
    (1, ValueError, r"must lie in \[0, 1\)"),
    (-0.1, ValueError, r"must lie in \[0, 1\)"),
    (True, TypeError, "got bool"),
    (False, TypeError, "got bool"),
    ("0.5", TypeError, "must be a float or an mlx.core.array"),
    (None, TypeError, "must be a float or an mlx.core.array"),
    (mx.array(0, dtype=mx.int32), TypeError, "must be a floating array"),
    (mx.array([0.5, 0.5]), ValueError, r"must have shape \(\)"),
]


@pytest.mark.parametrize(("u", "error", "match"), BAD_U, ids=repr)
@pytest.mark.parametrize("argument", ["u", "u_accept", "u_sample", "sample-u", "residual-u"])
def test_bad_uniforms_are_rejected_by_name(
    argument: str, u: object, error: type[Exception], match: str
) -> None:
    name = {"sample-u": "u", "residual-u": "u"}.get(argument, argument)
    calls: dict[str, Call] = {
        "u": lambda: accept_draft_token(P, Q, 0, u),  # type: ignore[arg-type]
        "u_accept": lambda: verify_draft_token(STOCHASTIC, P, Q, 0, u, 0.5),  # type: ignore[arg-type]
        "u_sample": lambda: verify_draft_token(STOCHASTIC, P, Q, 0, 0.5, u),  # type: ignore[arg-type]
        "sample-u": lambda: sample_from_distribution(P, u),  # type: ignore[arg-type]
        "residual-u": lambda: residual_resample(P, Q, u),  # type: ignore[arg-type]
    }
    with pytest.raises(error, match=rf"^{name} .*{match}"):
        calls[argument]()


def test_batched_uniforms_must_match_the_rows() -> None:
    with pytest.raises(ValueError, match=r"u must have shape \(2,\)"):
        accept_draft_token(P2, Q2, mx.array([0, 1]), mx.array([0.5, 0.5, 0.5]))
    with pytest.raises(ValueError, match=r"u must have shape \(2,\)"):
        sample_from_distribution(P2, mx.array(0.5))
    with pytest.raises(TypeError, match="u_sample must be a floating array"):
        verify_draft_token(STOCHASTIC, P2, Q2, mx.array([0, 1]), 0.5, mx.array([0, 0]))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        # Probabilities: an array, 1-d or 2-d, float32, with a vocabulary.
        _case(lambda: accept_draft_token([0.5, 0.5], Q, 0, 0.5),  # type: ignore[arg-type]
              TypeError, "p must be an mlx.core.array", "p-list"),
        _case(lambda: accept_draft_token(P, Q.tolist(), 0, 0.5),  # type: ignore[arg-type]
              TypeError, "q must be an mlx.core.array", "q-list"),
        _case(lambda: accept_draft_token(mx.zeros((1, 1, 3)), Q, 0, 0.5),
              ValueError, "p must be 1-d or 2-d", "p-3d"),
        _case(lambda: accept_draft_token(mx.array(0.5), Q, 0, 0.5),
              ValueError, "p must be 1-d or 2-d", "p-0d"),
        _case(lambda: accept_draft_token(mx.zeros((0,)), mx.zeros((0,)), 0, 0.5),
              ValueError, "p must have a non-empty vocabulary", "p-empty-vocab"),
        _case(lambda: accept_draft_token(P.astype(mx.float16), Q, 0, 0.5),
              TypeError, "p must be float32", "p-float16"),
        _case(lambda: accept_draft_token(P.astype(mx.bfloat16), Q, 0, 0.5),
              TypeError, "p must be float32", "p-bfloat16"),
        _case(lambda: accept_draft_token(P, Q.astype(mx.float16), 0, 0.5),
              TypeError, "q must be float32", "q-float16"),
        _case(lambda: accept_draft_token(mx.array([0, 1, 0]), Q, 0, 0.5),
              TypeError, "p must be float32", "p-int"),
        _case(lambda: residual_distribution(P.astype(mx.float16), Q),
              TypeError, "p must be float32", "residual-p-float16"),
        _case(lambda: sample_from_distribution(P.astype(mx.float16), 0.5),
              TypeError, "probs must be float32", "probs-float16"),
        _case(lambda: sample_from_distribution(mx.zeros((2, 2, 2)), 0.5),
              ValueError, "probs must be 1-d or 2-d", "probs-3d"),
        # The reason given fits the dtype: half precision underflows, float64 and ints do not.
        _case(lambda: sample_from_distribution(P.astype(mx.float16), 0.5),
              TypeError, "probs must be float32, got mlx.core.float16: half-precision",
              "probs-float16-reason"),
        _case(lambda: sample_from_distribution(mx.array([0.5, 0.5], dtype=mx.float64), 0.5),
              TypeError, r"probs must be float32, got mlx.core.float64: every rule is specified "
              r"in float32; convert with \.astype", "probs-float64-reason"),
        _case(lambda: sample_from_distribution(mx.array([1, 0]), 0.5),
              TypeError, "probs must be float32, got mlx.core.int32: probabilities are real "
              "weights", "probs-int32-reason"),
        # An empty batch of rows has nothing to draw.
        _case(lambda: sample_from_distribution(mx.zeros((0, 3)), 0.5),
              ValueError, r"probs must hold at least one row, got shape \(0, 3\)",
              "probs-no-rows"),
        _case(lambda: residual_resample(mx.zeros((0, 3)), mx.zeros((0, 3)), 0.5),
              ValueError, "p must hold at least one row", "residual-no-rows"),
        # p and q must share a vocabulary.
        _case(lambda: accept_draft_token(P, mx.array([0.5, 0.5]), 0, 0.5),
              ValueError, "p and q must have the same shape", "vocab-mismatch-accept"),
        _case(lambda: verify_draft_token(STOCHASTIC, P, mx.array([0.5, 0.5]), 0, 0.5, 0.5),
              ValueError, "p and q must have the same shape", "vocab-mismatch-verify"),
        _case(lambda: residual_distribution(P, mx.array([0.5, 0.5])),
              ValueError, "p and q must have the same shape", "vocab-mismatch-residual"),
        _case(lambda: residual_resample(P2, Q, 0.5),
              ValueError, "p and q must have the same shape", "rows-mismatch-residual"),
        # Token ids: an int in range, or an integer array of the batch shape.
        _case(lambda: accept_draft_token(P, Q, 3, 0.5),
              ValueError, r"token must lie in \[0, 3\), got 3", "token-too-large"),
        _case(lambda: accept_draft_token(P, Q, -1, 0.5),
              ValueError, r"token must lie in \[0, 3\), got -1", "token-negative"),
        _case(lambda: verify_draft_token(STOCHASTIC, P, Q, 7, 0.5, 0.5),
              ValueError, r"token must lie in \[0, 3\)", "verify-token-too-large"),
        _case(lambda: accept_draft_token(P, Q, True, 0.5),
              TypeError, "token must be an integer token id, got bool", "token-bool"),
        _case(lambda: accept_draft_token(P, Q, 1.0, 0.5),
              TypeError, "token must be an int", "token-float"),
        _case(lambda: accept_draft_token(P, Q, mx.array(1.0), 0.5),
              TypeError, "token must be an integer array", "token-float-array"),
        _case(lambda: accept_draft_token(P2, Q2, mx.array([0, 1, 2]), 0.5),
              ValueError, r"token must have shape \(2,\)", "token-shape"),
        # Rules.
        _case(lambda: verify_draft_token("stochastic", P, Q, 0, 0.5, 0.5),  # type: ignore[arg-type]
              TypeError, "rule must be an AcceptanceRule", "rule-string"),
        _case(lambda: verify_draft_token(STOCHASTIC, P, None, 0, 0.5, 0.5),
              ValueError, "q is required by rule 'stochastic'", "stochastic-without-q"),
    ],
)
def test_bad_arrays_and_ids_are_rejected_by_name(
    call: Call, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        call()


def test_sampler_match_and_greedy_need_no_q() -> None:
    for rule in AcceptanceRule:
        if rule.needs_proposal_distribution:
            continue
        accepted, token = verify_draft_token(rule, P, None, 1, 0.5, 0.5)
        assert accepted.item() is True and token.item() == 1


# ---------------------------------------------------------------------------------------------
# verify_tokenwise shapes.

K = 2
TARGET = mx.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [1.0, 0.0, 0.0]])  # [k+1, V]
DRAFT = mx.array([[0.25, 0.5, 0.25], [0.5, 0.25, 0.25]])  # [k, V]
TOKENS = mx.array([1, 0])
UNIFORMS = mx.full((K + 1, 2), 0.5)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        _case(lambda: verify_tokenwise("greedy", TARGET, DRAFT, TOKENS, UNIFORMS),  # type: ignore[arg-type]
              TypeError, "rule must be an AcceptanceRule", "rule"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET[0], DRAFT, TOKENS, UNIFORMS),
              ValueError, "target_probs must be 2-d", "target-1d"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET.astype(mx.float16), DRAFT, TOKENS,
                                   UNIFORMS),
              TypeError, "target_probs must be float32", "target-float16"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET[:K], DRAFT, TOKENS, UNIFORMS),
              ValueError, r"target_probs must be \[k\+1, V\] = \[3, V\]", "target-rows"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT, TOKENS.tolist(),  # type: ignore[arg-type]
                                   UNIFORMS),
              TypeError, "draft_tokens must be an mlx.core.array", "tokens-list"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT, TOKENS[None], UNIFORMS),
              ValueError, r"draft_tokens must be \[k\] with k >= 1", "tokens-2d"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET[:1], DRAFT[:0],
                                   mx.zeros((0,), dtype=mx.int32), UNIFORMS[:1]),
              ValueError, r"draft_tokens must be \[k\] with k >= 1", "tokens-empty"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT, TOKENS.astype(mx.float32),
                                   UNIFORMS),
              TypeError, "draft_tokens must be an integer array", "tokens-float"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT, TOKENS, UNIFORMS[:K]),
              ValueError, r"uniforms must be \[k\+1, 2\] = \[3, 2\]", "uniforms-rows"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT, TOKENS, UNIFORMS[:, :1]),
              ValueError, r"uniforms must be \[k\+1, 2\]", "uniforms-cols"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT, TOKENS,
                                   UNIFORMS.astype(mx.int32)),
              TypeError, "uniforms must be a floating array", "uniforms-int"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT, TOKENS,
                                   UNIFORMS.tolist()),  # type: ignore[arg-type]
              TypeError, "uniforms must be an mlx.core.array", "uniforms-list"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, None, TOKENS, UNIFORMS),
              ValueError, "draft_probs is required by rule 'stochastic'", "draft-none"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, TARGET, TOKENS, UNIFORMS),
              ValueError, r"draft_probs must be \[k, V\] = \[2, 3\]", "draft-rows"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT[:, :2], TOKENS, UNIFORMS),
              ValueError, r"draft_probs must be \[k, V\]", "draft-vocab"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT[0], TOKENS, UNIFORMS),
              ValueError, "draft_probs must be 2-d", "draft-1d"),
        _case(lambda: verify_tokenwise(STOCHASTIC, TARGET, DRAFT.astype(mx.float16), TOKENS,
                                   UNIFORMS),
              TypeError, "draft_probs must be float32", "draft-float16"),
        _case(lambda: verify_tokenwise(AcceptanceRule.SAMPLER_MATCH, TARGET, DRAFT[:1], TOKENS,
                                   UNIFORMS),
              ValueError, r"draft_probs must be \[k, V\]", "draft-rows-sampler-match"),
    ],
)
def test_verify_tokenwise_shape_errors(call: Call, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


def test_verify_tokenwise_accepts_good_input_for_every_rule() -> None:
    for rule in AcceptanceRule:
        if rule.verifies_jointly:
            with pytest.raises(ValueError, match="verify_blockwise"):
                verify_tokenwise(rule, TARGET, DRAFT, TOKENS, UNIFORMS)
            continue
        draft = DRAFT if rule.needs_proposal_distribution else None
        num_accepted, next_token = verify_tokenwise(rule, TARGET, draft, TOKENS, UNIFORMS)
        assert num_accepted.dtype == mx.int32 and num_accepted.ndim == 0
        assert next_token.dtype == mx.int32 and next_token.ndim == 0


# ---------------------------------------------------------------------------------------------
# effective_token_distribution arguments.


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        _case(lambda: effective_token_distribution([0.0, 1.0], SamplerConfig()),  # type: ignore[arg-type]
              TypeError, "logits must be an mlx.core.array", "logits-list"),
        _case(lambda: effective_token_distribution(mx.zeros((1, 1, 2)), SamplerConfig()),
              ValueError, "logits must be", "logits-3d"),
        _case(lambda: effective_token_distribution(mx.zeros((0,)), SamplerConfig()),
              ValueError, "logits must be", "logits-empty"),
        _case(lambda: effective_token_distribution(mx.zeros((0, 3)), SamplerConfig()),
              ValueError, r"logits must be \[V\] or \[R, V\] with R, V >= 1", "logits-no-rows"),
        _case(lambda: effective_token_distribution(mx.zeros((0, 3)), SamplerConfig(temperature=0)),
              ValueError, r"logits must be .* R, V >= 1", "logits-no-rows-greedy"),
        _case(lambda: effective_token_distribution(mx.array([0, 1]), SamplerConfig()),
              TypeError, "logits must be a floating array", "logits-int"),
        _case(lambda: effective_token_distribution(mx.zeros(3), {"temperature": 1.0}),  # type: ignore[arg-type]
              TypeError, "config must be a SamplerConfig", "config-dict"),
        _case(lambda: effective_token_distribution(mx.zeros(3), SamplerConfig(), [0, 3]),
              ValueError, r"history\[1\] must lie in \[0, 3\)", "history-out-of-range"),
        _case(lambda: effective_token_distribution(mx.zeros(3), SamplerConfig(), [0, True]),
              TypeError, r"history\[1\]", "history-bool"),
        _case(lambda: effective_token_distribution(mx.zeros(3), SamplerConfig(),
                                                   "01"),  # type: ignore[arg-type]
              TypeError, "history must be a sequence of token ids", "history-str"),
        _case(lambda: effective_token_distribution(mx.zeros(3), SamplerConfig(), 2),  # type: ignore[arg-type]
              TypeError, "history must be a sequence of token ids", "history-int"),
        _case(lambda: effective_token_distribution(mx.zeros(3), SamplerConfig(),
                                                   mx.zeros((2, 2), dtype=mx.int32)),
              ValueError, "history must be 1-d", "history-2d"),
        _case(lambda: effective_token_distribution(mx.zeros(3), SamplerConfig(), mx.zeros(2)),
              TypeError, "history must be an integer array", "history-float-array"),
        _case(lambda: effective_token_distribution(mx.zeros(3), SamplerConfig(logit_bias={3: 1.0})),
              ValueError, "logit_bias key 3 is outside the vocabulary", "bias-out-of-vocab"),
    ],
)
def test_bad_sampler_arguments(call: Call, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------------------------------------
# SamplerConfig: every field, a bad value, and the field named in the message.

BAD_FIELDS: list[tuple[str, object, type[Exception]]] = [
    ("temperature", -0.1, ValueError),
    ("temperature", float("nan"), ValueError),
    ("temperature", float("inf"), ValueError),
    ("temperature", "0.7", TypeError),
    ("temperature", True, TypeError),
    ("top_k", -1, ValueError),
    ("top_k", 2.0, TypeError),
    ("top_k", True, TypeError),
    ("top_p", 0.0, ValueError),
    ("top_p", 1.5, ValueError),
    ("top_p", -0.5, ValueError),
    ("top_p", float("nan"), ValueError),
    ("top_p", None, TypeError),
    ("min_p", -0.01, ValueError),
    ("min_p", 1.01, ValueError),
    ("min_p", "0", TypeError),
    ("repetition_penalty", 0.0, ValueError),
    ("repetition_penalty", -1.0, ValueError),
    ("repetition_penalty", float("inf"), ValueError),
    ("repetition_context_size", 0, ValueError),
    ("repetition_context_size", 1.5, TypeError),
    ("frequency_penalty", float("inf"), ValueError),
    ("frequency_penalty", float("nan"), ValueError),
    ("frequency_penalty", "1", TypeError),
    ("presence_penalty", float("-inf"), ValueError),
    ("presence_penalty", [1.0], TypeError),
    ("dry_multiplier", -0.5, ValueError),
    ("dry_multiplier", False, TypeError),
    ("dry_base", 0.99, ValueError),
    ("dry_base", float("nan"), ValueError),
    ("dry_allowed_length", 0, ValueError),
    ("dry_allowed_length", 2.0, TypeError),
    ("dry_penalty_last_n", -2, ValueError),
    ("dry_penalty_last_n", None, TypeError),
    ("dry_sequence_breakers", [1, 2], TypeError),
    ("dry_sequence_breakers", (1, -1), ValueError),
    ("dry_sequence_breakers", (1, "\n"), TypeError),
    ("dry_sequence_breakers", (True,), TypeError),
    ("xtc_probability", 1.5, ValueError),
    ("xtc_probability", -0.1, ValueError),
    ("xtc_threshold", 1.01, ValueError),
    ("xtc_threshold", -0.1, ValueError),
    ("xtc_threshold", "0.1", TypeError),
    ("logit_bias", [(0, 1.0)], TypeError),
    ("logit_bias", {-1: 1.0}, ValueError),
    ("logit_bias", {"a": 1.0}, TypeError),
    ("logit_bias", {1.0: 1.0}, TypeError),
    ("logit_bias", {0: float("inf")}, ValueError),
    ("logit_bias", {0: "1"}, TypeError),
]

# Finite in Python, unusable in float32: each used to turn a valid row into NaN.
FLOAT32_UNUSABLE: list[tuple[str, object, type[Exception]]] = [
    ("temperature", 1e-50, ValueError),
    ("temperature", 1e-46, ValueError),
    ("temperature", 1e-40, ValueError),
    ("temperature", 1e39, ValueError),
    ("repetition_penalty", 1e-50, ValueError),
    ("repetition_penalty", 1e39, ValueError),
    ("frequency_penalty", 1e39, ValueError),
    ("frequency_penalty", -1e39, ValueError),
    ("presence_penalty", 1e39, ValueError),
    ("dry_multiplier", 1e39, ValueError),
    ("dry_base", 1e39, ValueError),
    ("logit_bias", {0: 1e39}, ValueError),
    ("logit_bias", {0: -1e39}, ValueError),
    ("logit_bias", {2**31: 1.0}, ValueError),
    ("dry_sequence_breakers", (2**31,), ValueError),
    # 0 in float32 times a DRY power that overflowed to inf: the whole row was NaN.
    ("dry_multiplier", 1e-50, ValueError),
    ("dry_multiplier", 1e-40, ValueError),
]
BAD_FIELDS += FLOAT32_UNUSABLE

# Integers MLX would meet as 64-bit indices or slice bounds ("Slice indices must be 32-bit").
BEYOND_INT32: list[tuple[str, object, type[Exception]]] = [
    (name, value, ValueError)
    for name in ("top_k", "repetition_context_size", "dry_allowed_length", "dry_penalty_last_n")
    for value in (2**31, 2**63)
]
BAD_FIELDS += BEYOND_INT32


@pytest.mark.parametrize(("field", "value", "error"), BEYOND_INT32, ids=repr)
def test_an_integer_field_beyond_int32_is_refused_with_the_bound(
    field: str, value: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match=re.escape(field) + r" must be <= 2\*\*31 - 1"):
        SamplerConfig(**{field: value})  # type: ignore[arg-type]


def test_an_int_real_is_stored_as_a_float_and_samples() -> None:
    # 2**63 as an int reached MLX as an int64 scalar: std::bad_cast deep inside the sampler.
    config = SamplerConfig(temperature=2**63, repetition_penalty=2, dry_multiplier=1)
    assert type(config.temperature) is float and config.temperature == 2.0**63
    assert type(config.repetition_penalty) is float and type(config.dry_multiplier) is float
    row = effective_token_distribution(mx.array([0.0, 1.0, 2.0]), config,
                                       mx.array([0, 1, 0, 1], dtype=mx.int32))
    assert np.isfinite(np.array(row)).all() and abs(float(row.sum()) - 1) < 1e-6


def test_the_smallest_dry_multiplier_keeps_an_overflowed_power_finite() -> None:
    # base**n overflows to inf here; 2**-126 * inf is inf (a ban), never 0 * inf = NaN.
    config = SamplerConfig(dry_multiplier=2.0**-126, dry_base=3.4e38, dry_allowed_length=1)
    history = mx.array([1, 2, 3] * 20 + [1, 2], dtype=mx.int32)
    row = np.array(effective_token_distribution(mx.zeros(8), config, history))
    assert np.isfinite(row).all() and abs(row.sum() - 1) < 1e-6 and (row == 0).any()


@pytest.mark.parametrize(("field", "value", "error"), BAD_FIELDS, ids=repr)
def test_every_sampler_config_field_is_validated_by_name(
    field: str, value: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match=re.escape(field)):
        SamplerConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value", "error"), FLOAT32_UNUSABLE, ids=repr)
def test_a_value_unusable_in_float32_is_refused_with_the_usable_range(
    field: str, value: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match=re.escape(field) + r".* (lie in|token ids in) \["):
        SamplerConfig(**{field: value})  # type: ignore[arg-type]


def test_every_field_has_a_bad_value_above() -> None:
    fields = set(SamplerConfig.__dataclass_fields__)
    assert fields == {field for field, _, _ in BAD_FIELDS}


def test_boundary_values_are_accepted() -> None:
    SamplerConfig(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0)
    SamplerConfig(top_p=1e-9, min_p=1.0, repetition_penalty=1e-6, repetition_context_size=1)
    SamplerConfig(dry_base=1.0, dry_allowed_length=1, dry_penalty_last_n=-1,
                  xtc_probability=1.0, xtc_threshold=1.0, dry_sequence_breakers=(0,))
    SamplerConfig(temperature=2.0**-126, repetition_penalty=2.0**-32, frequency_penalty=-(2.0**64),
                  presence_penalty=2.0**64, dry_multiplier=3.4e38, dry_base=3.4e38,
                  dry_sequence_breakers=(2**31 - 1,), logit_bias={2**31 - 1: -(2.0**64)})
    SamplerConfig(temperature=3.4e38, repetition_penalty=2.0**32)
    bias = {0: 1.5}
    config = SamplerConfig(logit_bias=bias)
    bias[0] = 99.0  # the mapping is copied on construction
    assert config.logit_bias == {0: 1.5}


# ---------------------------------------------------------------------------------------------
# The rule choice reads its arguments only.


@pytest.mark.parametrize("value", ["0", "off", "garbage"])
def test_acceptance_rule_never_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # The switches' variables belong to the shell (specaccept.shell.rule_choice); set to
    # anything, even a value the shell refuses, they leave the core's choice unchanged.
    monkeypatch.setenv(STOCHASTIC_ACCEPT_ENV, value)
    monkeypatch.setenv(BLOCK_VERIFY_ENV, value)
    assert acceptance_rule(SamplerConfig(), drafter_has_distribution=True) is AcceptanceRule.BLOCK
    assert acceptance_rule(SamplerConfig(), drafter_has_distribution=True,
                           stochastic=True) is STOCHASTIC
    assert acceptance_rule(SamplerConfig(), drafter_has_distribution=True,
                           stochastic=False) is AcceptanceRule.SAMPLER_MATCH
    with pytest.raises(TypeError, match="block"):
        acceptance_rule(SamplerConfig(), drafter_has_distribution=True, block="on")  # type: ignore[arg-type]


def test_acceptance_rule_argument_types() -> None:
    with pytest.raises(TypeError, match="target_config"):
        acceptance_rule(None, drafter_has_distribution=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="drafter_has_distribution"):
        acceptance_rule(SamplerConfig(), drafter_has_distribution=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stochastic"):
        acceptance_rule(SamplerConfig(), drafter_has_distribution=True,
                        stochastic=1)  # type: ignore[arg-type]
    greedy = SamplerConfig(temperature=0.0)
    for stochastic in (True, False, None):
        rule = acceptance_rule(greedy, drafter_has_distribution=True, stochastic=stochastic)
        assert rule is AcceptanceRule.GREEDY_ARGMAX


@pytest.mark.parametrize("extra", [{}, {"top_p": 0.5}, {"min_p": 0.5}, {"top_k": 2},
                                   {"repetition_penalty": 2.0**32}], ids=repr)
def test_the_smallest_temperature_gives_a_distribution(extra: dict[str, Any]) -> None:
    # float32's smallest normal, accepted: the shift by the maximum before the division
    # keeps every row finite (the limiting one-hot, or uniform over tied maxima).
    config = SamplerConfig(temperature=1.1754943508222875e-38, **extra)
    rng = np.random.default_rng(0)
    for logits in (rng.normal(0, 10, 16), np.zeros(16), np.r_[2.0**64, -(2.0**64), 1.0, 1.0]):
        row = np.array(effective_token_distribution(
            mx.array(logits.astype(np.float32)), config, mx.array([0, 1], dtype=mx.int32)))
        assert np.isfinite(row).all() and abs(row.sum() - 1) < 1e-6, (extra, logits, row)
