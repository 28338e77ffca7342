"""The sampler as a distribution, against an independent NumPy reference of its documented chain.

The reference below is written from the documentation of the core's sampler modules (the
chain order of `effective_token_distribution` in `sampling.py`, the XTC definition in its
docstring, DRY's in `dry.py`, the field comments of `SamplerConfig`), in float64 and with
loops rather than the implementation's vectorised formulations. It is the main
oracle; the property tests restate single documented rules on their own.

float32 against float64 can only disagree at a decision boundary (a near tie,
a cumulative mass within rounding of top_p, ...). Inputs are drawn on a grid of
multiples of 1/8, where ties are exact in both, and examples that sit within a
stated margin of a boundary are discarded with `assume`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from specaccept import (
    SamplerConfig,
    effective_token_distribution,
    sample_from_distribution,
    sample_token_with_distribution,
)

F64 = npt.NDArray[np.float64]
TIE_MARGIN = 1e-3  # logits of different provenance closer than this are a float near-tie
MASS_MARGIN = 1e-5  # cumulative mass or probability this close to top_p / xtc_threshold
RATIO_MARGIN = 1e-3  # |log(p_i / p_max) - log(min_p)| closer than this
PROPERTY = settings(max_examples=50, deadline=None)
ORACLE = settings(max_examples=100, deadline=None)  # the main oracle: cheap, so a little more


# ---------------------------------------------------------------------------------------------
# The reference.


def ref_softmax(x: F64) -> F64:
    finite = np.isfinite(x)
    out = np.zeros_like(x)
    shifted = x[finite] - x[finite].max()
    out[finite] = np.exp(shifted) / np.exp(shifted).sum()
    return out


def ref_dry_penalty(history: list[int], config: SamplerConfig, vocab: int) -> F64:
    """Documented DRY: candidate window[i] with match length L = the longest L such that
    window[i-L:i] == window[n-L:n] and the matched suffix holds no breaker; breakers are
    never penalised; penalty multiplier * base ** (L - allowed_length) once L >= allowed,
    capped at 1e30."""
    last_n = config.dry_penalty_last_n
    window = history if last_n == -1 else (history[-last_n:] if last_n > 0 else [])
    breakers = set(config.dry_sequence_breakers)
    n = len(window)
    longest: dict[int, int] = {}
    for i in range(1, n):
        token = window[i]
        if token in breakers:
            continue
        length = 0
        while (
            length < i
            and window[i - 1 - length] == window[n - 1 - length]
            and window[n - 1 - length] not in breakers
        ):
            length += 1
        longest[token] = max(longest.get(token, 0), length)
    penalty = np.zeros(vocab)
    for token, length in longest.items():
        if length >= config.dry_allowed_length:
            penalty[token] = min(
                config.dry_multiplier * config.dry_base ** (length - config.dry_allowed_length),
                1e30,
            )
    return penalty


def ref_penalised(logits: F64, config: SamplerConfig, history: list[int]) -> F64:
    """Logit bias, then CTRL repetition / frequency / presence over the last
    repetition_context_size tokens, then DRY."""
    x = logits.astype(np.float64).copy()
    vocab = x.size
    for token, bias in config.logit_bias.items():
        x[token] += bias
    if config.repetition_penalty != 1.0 or config.frequency_penalty or config.presence_penalty:
        recent = history[-config.repetition_context_size :]
        counts = np.bincount(np.array(recent, dtype=np.int64), minlength=vocab).astype(float)
        for token in range(vocab):
            if counts[token] == 0:
                continue
            if config.repetition_penalty != 1.0:
                if x[token] > 0:
                    x[token] /= config.repetition_penalty
                else:
                    x[token] *= config.repetition_penalty
            x[token] -= counts[token] * config.frequency_penalty + config.presence_penalty
    if config.dry_multiplier > 0.0 and config.dry_penalty_last_n != 0:
        x = x - ref_dry_penalty(history, config, vocab)
    return x


def ref_xtc_cut(x: F64, threshold: float) -> F64:
    """Mask every token at or above `threshold` (softmax at temperature 1) but the least
    likely such token(s), when at least two reach it. A zero-probability token never
    qualifies, even at threshold 0."""
    probs = ref_softmax(x)
    above = [i for i in range(x.size) if probs[i] >= threshold and probs[i] > 0]
    if len(above) < 2:
        return x
    smallest = min(probs[i] for i in above)
    out = x.copy()
    for i in above:
        if probs[i] > smallest:
            out[i] = -np.inf
    return out


def ref_top_p_keep(probs: F64, top_p: float) -> npt.NDArray[np.bool_]:
    """Keep i iff the mass strictly more likely than i is below top_p: this is the smallest
    most-likely prefix reaching top_p (crossing token included) plus its ties."""
    return np.array([probs[probs > probs[i]].sum() < top_p for i in range(probs.size)])


def ref_filtered(x: F64, config: SamplerConfig) -> F64:
    """temperature -> top-k -> top-p -> min-p -> softmax."""
    x = (x - x[np.isfinite(x)].max()) / config.temperature
    vocab = x.size
    if 0 < config.top_k < vocab:
        kth = np.sort(x)[::-1][config.top_k - 1]
        x = np.where(x >= kth, x, -np.inf)
    if config.top_p < 1.0:
        x = np.where(ref_top_p_keep(ref_softmax(x), config.top_p), x, -np.inf)
    if config.min_p > 0.0:
        probs = ref_softmax(x)
        x = np.where(probs >= config.min_p * probs.max(), x, -np.inf)
    return ref_softmax(x)


def ref_distribution(logits: F64, config: SamplerConfig, history: list[int]) -> F64:
    x = ref_penalised(logits, config, history)
    if config.temperature == 0.0 or config.top_k == 1:
        out = np.zeros_like(x)
        out[int(np.argmax(x))] = 1.0  # first maximum: lowest id on ties
        return out
    uncut = ref_filtered(x, config)
    if config.xtc_probability == 0.0:
        return uncut
    cut = ref_filtered(ref_xtc_cut(x, config.xtc_threshold), config)
    return (1.0 - config.xtc_probability) * uncut + config.xtc_probability * cut


# ---------------------------------------------------------------------------------------------
# Conditioning: is this example away from every decision boundary?


def _provenance(logits: F64, config: SamplerConfig, history: list[int]) -> list[tuple[Any, ...]]:
    """What each processed logit is computed from: equal tuples give bit-equal floats."""
    vocab = logits.size
    penalised = (
        config.repetition_penalty != 1.0 or config.frequency_penalty or config.presence_penalty
    )
    recent = history[-config.repetition_context_size :] if penalised else []
    dry = (
        ref_dry_penalty(history, config, vocab)
        if config.dry_multiplier > 0 and config.dry_penalty_last_n != 0
        else np.zeros(vocab)
    )
    return [
        (logits[i], config.logit_bias.get(i, 0.0), recent.count(i), dry[i]) for i in range(vocab)
    ]


def _no_near_ties(x: F64, provenance: list[tuple[Any, ...]]) -> bool:
    for i in range(x.size):
        for j in range(i):
            if provenance[i] == provenance[j] or not (np.isfinite(x[i]) and np.isfinite(x[j])):
                continue
            if abs(x[i] - x[j]) < TIE_MARGIN:
                return False
    return True


def _filters_well_conditioned(x: F64, config: SamplerConfig) -> bool:
    x = (x - x[np.isfinite(x)].max()) / config.temperature
    if 0 < config.top_k < x.size:
        kth = np.sort(x)[::-1][config.top_k - 1]
        x = np.where(x >= kth, x, -np.inf)
    if config.top_p < 1.0:
        probs = ref_softmax(x)
        masses = np.cumsum(np.sort(probs)[::-1])
        if np.abs(masses - config.top_p).min() < MASS_MARGIN:
            return False
        x = np.where(ref_top_p_keep(probs, config.top_p), x, -np.inf)
    if config.min_p > 0.0:
        finite = x[np.isfinite(x)]
        if np.abs(finite - finite.max() - math.log(config.min_p)).min() < RATIO_MARGIN:
            return False
    return True


def well_conditioned(logits: F64, config: SamplerConfig, history: list[int]) -> bool:
    x = ref_penalised(logits, config, history)
    if not _no_near_ties(x, _provenance(logits, config, history)):
        return False
    if config.temperature == 0.0 or config.top_k == 1:
        return True
    if config.xtc_probability > 0.0:
        probs = ref_softmax(x)
        positive = probs[probs > 0]  # exact zeros (masked tokens) are exact in float32 too
        if np.abs(positive - config.xtc_threshold).min() < MASS_MARGIN:
            return False
        if not _filters_well_conditioned(ref_xtc_cut(x, config.xtc_threshold), config):
            return False
    return _filters_well_conditioned(x, config)


# ---------------------------------------------------------------------------------------------
# Strategies.


@dataclass(frozen=True)
class Case:
    logits: F64
    config: SamplerConfig
    history: list[int]


def grid_logits(draw: st.DrawFn, vocab: int, masked: bool) -> F64:
    logits = np.array(draw(st.lists(st.integers(-40, 40), min_size=vocab, max_size=vocab))) / 8.0
    if masked:
        mask = np.array(draw(st.lists(st.booleans(), min_size=vocab, max_size=vocab)))
        mask[draw(st.integers(0, vocab - 1))] = False  # at least one finite logit
        logits = np.where(mask, -np.inf, logits)
    return logits.astype(np.float64)


def eighths(low: int, high: int) -> st.SearchStrategy[float]:
    return st.integers(low, high).map(lambda n: n / 8.0)


@st.composite
def chain_cases(draw: st.DrawFn) -> Case:
    vocab = draw(st.integers(2, 8))
    logits = grid_logits(draw, vocab, masked=draw(st.booleans()))
    history = draw(st.lists(st.integers(0, vocab - 1), max_size=12))
    bias_tokens = draw(st.lists(st.integers(0, vocab - 1), max_size=3, unique=True))
    config = SamplerConfig(
        temperature=draw(st.sampled_from([0.0, 0.25, 0.5, 0.7, 1.0, 1.3, 2.0])),
        top_k=draw(st.integers(0, vocab + 1)),
        top_p=draw(st.one_of(st.just(1.0), st.floats(0.05, 1.0))),
        min_p=draw(st.one_of(st.just(0.0), st.floats(0.01, 1.0))),
        repetition_penalty=draw(st.sampled_from([1.0, 0.8, 1.25, 1.5, 2.0])),
        repetition_context_size=draw(st.integers(1, 12)),
        frequency_penalty=draw(eighths(-4, 8)),
        presence_penalty=draw(eighths(-4, 8)),
        dry_multiplier=draw(st.sampled_from([0.0, 0.5, 1.0])),
        dry_base=draw(st.sampled_from([1.0, 1.5, 1.75, 2.0])),
        dry_allowed_length=draw(st.integers(1, 3)),
        dry_penalty_last_n=draw(st.sampled_from([-1, 0, 3, 8])),
        dry_sequence_breakers=tuple(draw(st.lists(st.integers(0, vocab - 1), max_size=2))),
        xtc_probability=draw(st.sampled_from([0.0, 0.0, 0.3, 1.0])),
        xtc_threshold=draw(st.one_of(st.just(0.0), st.floats(0.01, 0.6))),
        logit_bias={t: draw(eighths(-16, 16)) for t in bias_tokens},
    )
    return Case(logits, config, history)


def run(case: Case) -> F64:
    probs = effective_token_distribution(
        mx.array(case.logits.astype(np.float32)), case.config, case.history
    )
    assert probs.dtype == mx.float32
    assert tuple(probs.shape) == case.logits.shape
    return np.array(probs, dtype=np.float64)


def assert_matches_reference(got: F64, want: F64) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # Exact zeros outside the support; inside it float32 may only underflow what is tiny.
    assert (got[want == 0.0] == 0.0).all(), (got, want)
    assert (want[got == 0.0] < 1e-30).all(), (got, want)


# ---------------------------------------------------------------------------------------------
# The oracle.


@ORACLE
@given(chain_cases())
def test_effective_distribution_matches_the_reference_chain(case: Case) -> None:
    assume(well_conditioned(case.logits, case.config, case.history))
    got = run(case)
    want = ref_distribution(case.logits, case.config, case.history)
    assert abs(got.sum() - 1.0) <= 1e-5
    assert (got >= 0.0).all()
    assert_matches_reference(got, want)


@PROPERTY
@given(
    st.integers(2, 10).flatmap(
        lambda v: st.lists(
            st.floats(-30.0, 30.0, allow_nan=False, width=32), min_size=v, max_size=v
        )
    ),
    st.floats(0.05, 3.0),
    st.integers(0, 10),
    st.floats(0.01, 1.0),
    st.floats(0.0, 1.0),
)
def test_any_logits_give_a_distribution(
    logits: list[float], temperature: float, top_k: int, top_p: float, min_p: float
) -> None:
    config = SamplerConfig(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    probs = np.array(effective_token_distribution(mx.array(logits), config), dtype=np.float64)
    assert abs(probs.sum() - 1.0) <= 1e-5
    assert (probs >= 0.0).all()
    assert (probs > 0).any()


@PROPERTY
@given(chain_cases(), st.integers(1, 4))
def test_rows_are_verified_like_single_rows(case: Case, rows: int) -> None:
    # [R, V] logits share one history; each row must equal its own [V] call.
    stacked = np.stack([np.roll(case.logits, r) for r in range(rows)])
    got = np.array(effective_token_distribution(
        mx.array(stacked.astype(np.float32)), case.config, case.history
    ))
    for r in range(rows):
        single = effective_token_distribution(
            mx.array(stacked[r].astype(np.float32)), case.config, case.history
        )
        np.testing.assert_allclose(got[r], np.array(single), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------------
# Single documented rules.


@st.composite
def filter_cases(draw: st.DrawFn) -> tuple[F64, float]:
    vocab = draw(st.integers(2, 8))
    logits = np.array(draw(st.lists(st.integers(-12, 12), min_size=vocab, max_size=vocab))) / 4.0
    return logits.astype(np.float64), draw(st.sampled_from([0.5, 0.7, 1.0, 1.5]))


@PROPERTY
@given(filter_cases(), st.data())
def test_top_k_keeps_every_token_at_or_above_the_kth_largest_logit(
    case: tuple[F64, float], data: st.DataObject
) -> None:
    logits, temperature = case
    k = data.draw(st.integers(2, logits.size))
    probs = run(Case(logits, SamplerConfig(temperature=temperature, top_k=k), []))
    kth = np.sort(logits)[::-1][k - 1]
    np.testing.assert_array_equal(probs > 0, logits >= kth)  # ties with the k-th are kept
    kept = logits >= kth
    weights = np.where(kept, np.exp(logits / temperature), 0.0)
    np.testing.assert_allclose(probs, weights / weights.sum(), rtol=1e-5, atol=1e-7)


@PROPERTY
@given(filter_cases(), st.floats(0.05, 0.999))
def test_top_p_keeps_the_smallest_prefix_reaching_top_p_plus_ties(
    case: tuple[F64, float], top_p: float
) -> None:
    logits, temperature = case
    base = ref_softmax(logits / temperature)
    masses = np.cumsum(np.sort(base)[::-1])
    assume(np.abs(masses - top_p).min() >= MASS_MARGIN)
    probs = run(Case(logits, SamplerConfig(temperature=temperature, top_p=top_p), []))
    order = np.argsort(-base, kind="stable")
    # The prefix: most likely first, stop at the first token whose running mass reaches top_p.
    prefix = []
    mass = 0.0
    for token in order:
        prefix.append(int(token))
        mass += base[token]
        if mass >= top_p:
            break
    least = base[prefix[-1]]
    expected = np.zeros(logits.size, dtype=bool)
    expected[prefix] = True
    expected |= base == least  # every token tied with the prefix's least likely member
    np.testing.assert_array_equal(probs > 0, expected)
    assert base[expected].sum() >= top_p - 1e-9  # the kept mass reaches top_p
    np.testing.assert_allclose(probs[expected], base[expected] / base[expected].sum(), rtol=1e-5)


@PROPERTY
@given(filter_cases(), st.floats(0.01, 1.0), st.sampled_from([0, 2, 3, 5, 8]),
       st.floats(0.05, 1.0))
def test_min_p_keeps_tokens_within_min_p_of_the_most_likely(
    case: tuple[F64, float], min_p: float, top_k: int, top_p: float
) -> None:
    logits, temperature = case
    # min-p reads the probabilities after temperature, top-k and top-p.
    before = ref_filtered(logits, SamplerConfig(temperature=temperature, top_k=top_k, top_p=top_p))
    config = SamplerConfig(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    assume(_filters_well_conditioned(logits, config))
    probs = run(Case(logits, config, []))
    np.testing.assert_array_equal(probs > 0, before >= min_p * before.max())


@PROPERTY
@given(chain_cases())
def test_a_greedy_config_is_the_one_hot_argmax_after_bias_and_penalties(case: Case) -> None:
    for config in (
        dataclasses.replace(case.config, temperature=0.0),
        dataclasses.replace(case.config, temperature=0.9, top_k=1),
    ):
        assume(well_conditioned(case.logits, config, case.history))
        probs = run(Case(case.logits, config, case.history))
        penalised = ref_penalised(case.logits, config, case.history)
        winner = int(np.flatnonzero(penalised == penalised.max())[0])  # lowest id on ties
        np.testing.assert_array_equal(probs, np.eye(case.logits.size)[winner])


DYADIC_LOGITS = mx.log(mx.array([0.5, 0.25, 0.125, 0.125]))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # The crossing token is kept when the prefix mass reaches top_p exactly.
        (SamplerConfig(top_p=0.5), [1.0, 0.0, 0.0, 0.0]),
        (SamplerConfig(top_p=0.75), [2 / 3, 1 / 3, 0.0, 0.0]),
        (SamplerConfig(top_p=0.8), [0.5, 0.25, 0.125, 0.125]),  # crossing at a tie: both kept
        # min-p is inclusive: a token exactly at min_p * max survives.
        (SamplerConfig(min_p=0.5), [2 / 3, 1 / 3, 0.0, 0.0]),
        (SamplerConfig(min_p=0.25), [0.5, 0.25, 0.125, 0.125]),
        (SamplerConfig(min_p=0.5, top_k=3), [2 / 3, 1 / 3, 0.0, 0.0]),
        # top-k keeps the tie at the k-th largest logit.
        (SamplerConfig(top_k=3), [0.5, 0.25, 0.125, 0.125]),
        (SamplerConfig(top_k=2), [2 / 3, 1 / 3, 0.0, 0.0]),
        # XTC's threshold is inclusive and the least likely qualifying tokens (ties) survive.
        (SamplerConfig(xtc_probability=1.0, xtc_threshold=0.25), [0.0, 0.5, 0.25, 0.25]),
        (SamplerConfig(xtc_probability=1.0, xtc_threshold=0.125), [0.0, 0.0, 0.5, 0.5]),
        (SamplerConfig(xtc_probability=1.0, xtc_threshold=0.3), [0.5, 0.25, 0.125, 0.125]),
        (SamplerConfig(xtc_probability=0.5, xtc_threshold=0.25), [0.25, 0.375, 0.1875, 0.1875]),
    ],
    ids=repr,
)
def test_exact_boundaries_on_dyadic_probabilities(
    config: SamplerConfig, expected: list[float]
) -> None:
    got = np.array(effective_token_distribution(DYADIC_LOGITS, config), dtype=np.float64)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0)


def test_greedy_ties_go_to_the_lowest_id() -> None:
    logits = mx.array([0.5, 2.0, 1.0, 2.0, 2.0])
    for config in (SamplerConfig(temperature=0.0), SamplerConfig(top_k=1)):
        assert effective_token_distribution(logits, config).tolist() == [0, 1, 0, 0, 0]
    # Top-k 2 at temperature > 0 is not greedy: all three tied maxima are kept.
    kept = np.array(effective_token_distribution(logits, SamplerConfig(top_k=2)))
    np.testing.assert_allclose(kept, [0, 1 / 3, 0, 1 / 3, 1 / 3], rtol=1e-6)


def _history_cases(vocab: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, vocab - 1), max_size=16)


@PROPERTY
@given(st.integers(2, 8).flatmap(
    lambda v: st.tuples(
        st.lists(st.integers(-24, 24), min_size=v, max_size=v), _history_cases(v),
        st.dictionaries(st.integers(0, v - 1), eighths(-24, 24), max_size=v),
    )
))
def test_logit_bias_is_added_before_softmax(
    case: tuple[list[int], list[int], dict[int, float]],
) -> None:
    raw, history, bias = case
    logits = np.array(raw, dtype=np.float64) / 8.0
    got = run(Case(logits, SamplerConfig(logit_bias=bias), history))
    shifted = logits + np.array([bias.get(i, 0.0) for i in range(logits.size)])
    np.testing.assert_allclose(got, ref_softmax(shifted), rtol=1e-5, atol=1e-7)


@PROPERTY
@given(
    st.integers(2, 8).flatmap(
        lambda v: st.tuples(st.lists(st.integers(-24, 24), min_size=v, max_size=v),
                            _history_cases(v))
    ),
    st.floats(0.5, 3.0),
    st.integers(1, 16),
    st.floats(-1.0, 2.0),
    st.floats(-1.0, 2.0),
)
def test_repetition_frequency_and_presence_penalties(
    case: tuple[list[int], list[int]], penalty: float, context: int, frequency: float,
    presence: float,
) -> None:
    raw, history = case
    logits = np.array(raw, dtype=np.float64) / 8.0
    config = SamplerConfig(repetition_penalty=penalty, repetition_context_size=context,
                           frequency_penalty=frequency, presence_penalty=presence)
    got = run(Case(logits, config, history))
    # CTRL: over the last `context` tokens, a positive logit is divided by the penalty and a
    # non-positive one multiplied; then count * frequency and presence are subtracted.
    expected = logits.copy()
    recent = history[-context:]
    for token in set(recent):
        x = expected[token]
        expected[token] = (x / penalty if x > 0 else x * penalty) - (
            recent.count(token) * frequency + presence
        )
    np.testing.assert_allclose(got, ref_softmax(expected), rtol=1e-4, atol=1e-7)


def test_repetition_penalty_worked_example() -> None:
    logits = mx.array([2.0, -1.0, 0.5, 1.0])
    config = SamplerConfig(repetition_penalty=2.0, repetition_context_size=2)
    # Only the last two tokens (1 and 0) count; token 3 is outside the context.
    got = np.array(effective_token_distribution(logits, config, [3, 1, 0]))
    np.testing.assert_allclose(got, ref_softmax(np.array([1.0, -2.0, 0.5, 1.0])), rtol=1e-6)
    config = SamplerConfig(frequency_penalty=0.5, presence_penalty=0.25)
    got = np.array(effective_token_distribution(logits, config, [0, 0, 2]))
    np.testing.assert_allclose(got, ref_softmax(np.array([0.75, -1.0, -0.25, 1.0])), rtol=1e-6)


@PROPERTY
@given(
    st.integers(2, 5).flatmap(lambda v: st.tuples(st.just(v), st.lists(
        st.integers(0, v - 1), max_size=20))),
    st.sampled_from([0.5, 1.0, 2.0]),
    st.sampled_from([1.0, 1.5, 1.75]),
    st.integers(1, 4),
    st.sampled_from([-1, 0, 1, 2, 5, 10]),
    st.lists(st.integers(0, 4), max_size=2),
)
def test_dry_penalty_matches_its_documented_definition(
    vocab_history: tuple[int, list[int]], multiplier: float, base: float, allowed: int,
    last_n: int, breakers: list[int],
) -> None:
    vocab, history = vocab_history
    config = SamplerConfig(dry_multiplier=multiplier, dry_base=base, dry_allowed_length=allowed,
                           dry_penalty_last_n=last_n, dry_sequence_breakers=tuple(breakers))
    logits = np.zeros(vocab)
    got = run(Case(logits, config, history))
    penalty = ref_dry_penalty(history, config, vocab) if last_n != 0 else np.zeros(vocab)
    np.testing.assert_allclose(got, ref_softmax(-penalty), rtol=1e-5, atol=1e-7)


def test_dry_penalty_of_a_long_repeat_is_finite_and_excludes_the_token() -> None:
    # 1.75 ** 300 overflows float32; the documented cap keeps the row a distribution.
    config = SamplerConfig(dry_multiplier=1.0, dry_base=1.75, dry_allowed_length=2)
    history = [0, 1] * 160
    probs = np.array(effective_token_distribution(mx.array([5.0, 0.0, 0.0]), config, history))
    assert np.isfinite(probs).all()
    np.testing.assert_allclose(probs, [0.0, 0.5, 0.5], atol=1e-7)
    # A fully penalised row (the only unmasked token repeats): an uncapped inf penalty would
    # leave every logit -inf and the softmax NaN.
    for logits, expected in (([5.0], [1.0]), ([0.0, -np.inf], [1.0, 0.0])):
        probs = np.array(effective_token_distribution(mx.array(logits), config, [0] * 300))
        np.testing.assert_array_equal(probs, expected)


def test_dry_worked_example() -> None:
    # History "a b c a b": the "c" at position 2 follows "a b", which matches the suffix
    # "a b" (length 2 = allowed), so "c" is penalised by multiplier * base ** 0. No other
    # position's preceding context ends like the suffix ("... b").
    a, b, c, d = 0, 1, 2, 3
    config = SamplerConfig(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=2)
    got = np.array(effective_token_distribution(mx.zeros(4), config, [a, b, c, a, b]))
    np.testing.assert_allclose(got, ref_softmax(np.array([0.0, 0.0, -1.0, 0.0])), rtol=1e-6)
    # A longer match grows the penalty by the base: "a b c d a b c" penalises "d" by 2 ** 1.
    got = np.array(effective_token_distribution(mx.zeros(4), config, [a, b, c, d, a, b, c]))
    np.testing.assert_allclose(got, ref_softmax(np.array([0.0, 0.0, 0.0, -2.0])), rtol=1e-6)
    # A breaker inside the suffix stops the match; a breaker is never penalised itself.
    breaking = SamplerConfig(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=2,
                             dry_sequence_breakers=(b,))
    got = np.array(effective_token_distribution(mx.zeros(4), breaking, [a, b, c, a, b]))
    np.testing.assert_allclose(got, np.full(4, 0.25), rtol=1e-6)
    # The window: with dry_penalty_last_n=3 only "c a b" is searched, where nothing matches.
    windowed = dataclasses.replace(config, dry_penalty_last_n=3)
    got = np.array(effective_token_distribution(mx.zeros(4), windowed, [a, b, c, a, b]))
    np.testing.assert_allclose(got, np.full(4, 0.25), rtol=1e-6)
    # "c" follows a full match of the suffix "a b" but is itself a breaker: not penalised.
    breaker_c = dataclasses.replace(breaking, dry_sequence_breakers=(c,))
    got = np.array(effective_token_distribution(mx.zeros(4), breaker_c, [a, b, c, a, b]))
    np.testing.assert_allclose(got, np.full(4, 0.25), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# XTC: the returned mixture against a Monte Carlo of the random cut.

XTC_LOGITS = np.log(np.array([0.4, 0.3, 0.15, 0.1, 0.05]))
XTC_CONFIG = SamplerConfig(temperature=0.8, xtc_probability=0.3, xtc_threshold=0.14)
XTC_SAMPLES = 40_000
XTC_THRESHOLD = float(stats.chi2.ppf(1.0 - 1e-4, XTC_LOGITS.size - 1))


def _xtc_monte_carlo() -> npt.NDArray[np.int64]:
    """Sample what an XTC sampler does: cut with probability xtc_probability, then the chain."""
    rng = np.random.default_rng(2024)
    x = ref_penalised(XTC_LOGITS, XTC_CONFIG, [])
    cut = rng.random(XTC_SAMPLES) < XTC_CONFIG.xtc_probability
    laws = (ref_filtered(x, XTC_CONFIG), ref_filtered(ref_xtc_cut(x, XTC_CONFIG.xtc_threshold),
                                                      XTC_CONFIG))
    tokens = np.empty(XTC_SAMPLES, dtype=np.int64)
    for branch in (0, 1):
        where = cut == bool(branch)
        tokens[where] = rng.choice(XTC_LOGITS.size, size=int(where.sum()), p=laws[branch])
    return np.bincount(tokens, minlength=XTC_LOGITS.size)


def _xtc_chi_square(counts: npt.NDArray[np.int64], law: F64) -> float:
    law = law / law.sum()
    return float(stats.chisquare(counts, f_exp=law * counts.sum()).statistic)


def test_xtc_mixture_matches_a_monte_carlo_of_the_cut() -> None:
    counts = _xtc_monte_carlo()
    mixture = run(Case(XTC_LOGITS, XTC_CONFIG, []))
    statistic = _xtc_chi_square(counts, mixture)
    print(f"\nXTC mixture: chi2={statistic:.2f} (threshold {XTC_THRESHOLD:.2f})")
    assert (mixture > 0).all()
    assert statistic <= XTC_THRESHOLD


def test_the_xtc_statistic_rejects_wrong_mixtures() -> None:
    counts = _xtc_monte_carlo()
    x = ref_penalised(XTC_LOGITS, XTC_CONFIG, [])
    uncut = ref_filtered(x, XTC_CONFIG)
    cut = ref_filtered(ref_xtc_cut(x, XTC_CONFIG.xtc_threshold), XTC_CONFIG)
    # Cut decided on the tempered probabilities, i.e. XTC after temperature, not before it.
    tempered = x / XTC_CONFIG.temperature
    cut_late = ref_filtered(
        ref_xtc_cut(tempered, XTC_CONFIG.xtc_threshold) * XTC_CONFIG.temperature, XTC_CONFIG
    )
    wrong = {
        "weights swapped": 0.3 * uncut + 0.7 * cut,
        "xtc_probability 0.4 for 0.3": 0.6 * uncut + 0.4 * cut,
        "cut after temperature": 0.7 * uncut + 0.3 * cut_late,
    }
    for name, law in wrong.items():
        statistic = _xtc_chi_square(counts, law)
        print(f"\nXTC wrong ({name}): chi2={statistic:.2f} (threshold {XTC_THRESHOLD:.2f})")
        assert statistic > XTC_THRESHOLD, name


def test_xtc_threshold_zero_with_a_masked_token_is_a_distribution() -> None:
    # Regression (found by this suite, fixed in 6e63379): xtc_threshold=0 is a valid config
    # and -inf logits are documented masks. The masked token's probability 0 used to
    # "reach" threshold 0 and become the least likely qualifying token, so every real
    # token was cut and the softmax of an all -inf row was NaN.
    config = SamplerConfig(xtc_probability=1.0, xtc_threshold=0.0)
    probs = np.array(effective_token_distribution(mx.array([0.0, -np.inf, -1.0]), config))
    assert np.isfinite(probs).all() and abs(probs.sum() - 1.0) <= 1e-5
    np.testing.assert_array_equal(probs, [0.0, 0.0, 1.0])  # the least likely real token
    mixed = SamplerConfig(xtc_probability=0.5, xtc_threshold=0.0)
    probs = np.array(effective_token_distribution(mx.array([0.0, -np.inf]), mixed))
    np.testing.assert_array_equal(probs, [1.0, 0.0])  # one real token: nothing to cut


# ---------------------------------------------------------------------------------------------
# Dtypes.


@pytest.mark.parametrize("dtype", [mx.float16, mx.bfloat16])
def test_half_precision_logits_are_upcast(dtype: mx.Dtype) -> None:
    logits = mx.array([1.5, -0.25, 0.75, 3.0, -8.0]).astype(dtype)
    config = SamplerConfig(temperature=0.6, top_p=0.95)
    got = effective_token_distribution(logits, config)
    assert got.dtype == mx.float32
    want = effective_token_distribution(logits.astype(mx.float32), config)
    assert got.tolist() == want.tolist()
    # A float32 result can hold what float16 cannot: the tail's tiny probability survives.
    tiny = effective_token_distribution(mx.array([0.0, -20.0]).astype(dtype), SamplerConfig())
    assert 0.0 < float(np.asarray(tiny)[1]) < 6e-8


# ---------------------------------------------------------------------------------------------
# sample_from_distribution: the inverse-CDF contract.


def ref_inverse_cdf(weights: list[float], u: float) -> int:
    total = sum(weights)
    running = 0.0
    for i, w in enumerate(weights):
        running += w
        if running > u * total:
            return i
    raise AssertionError("unreachable for u < 1")


@pytest.mark.parametrize(
    "weights",
    [
        [0.5, 0.0, 0.25, 0.25],
        [2.0, 0.0, 1.0, 1.0],  # unnormalised weights: u scales the total
        [0.125] * 8,
        [0.0, 0.0, 0.75, 0.25],
        [0.25, 0.5, 0.25, 0.0, 0.0],
    ],
)
def test_inverse_cdf_on_dyadic_weights(weights: list[float]) -> None:
    us = [i / 64 for i in range(64)]  # dyadic: every comparison is exact in float32
    rows = mx.broadcast_to(mx.array(weights), (len(us), len(weights)))
    got = sample_from_distribution(rows, mx.array(us)).tolist()
    assert got == [ref_inverse_cdf(weights, u) for u in us]
    single = [sample_from_distribution(mx.array(weights), u).item() for u in (0.0, 0.5, 63 / 64)]
    assert single == [ref_inverse_cdf(weights, u) for u in (0.0, 0.5, 63 / 64)]


def test_the_documented_examples() -> None:
    probs = mx.array([0.5, 0.0, 0.25, 0.25])
    got = [sample_from_distribution(probs, u).item() for u in (0.0, 0.49, 0.5, 0.75, 0.99)]
    assert got == [0, 0, 2, 3, 3]


def test_rounding_past_the_last_partial_sum_returns_the_last_positive_id() -> None:
    # A subnormal total: u * total rounds back up to total, no partial sum exceeds it, and
    # the documented fallback must pick the last id of positive mass (not id 0).
    probs = mx.array([0.0, 3e-45, 0.0])
    assert float(np.asarray(probs)[1]) > 0
    assert sample_from_distribution(probs, 1.0 - 2.0**-24).item() == 1
    rows = mx.array([[0.0, 3e-45, 0.0], [0.0, 0.0, 3e-45]])
    assert sample_from_distribution(rows, 1.0 - 2.0**-24).tolist() == [1, 2]


def test_never_a_zero_probability_id() -> None:
    near_one = 1.0 - 2.0**-24
    cases = [
        [0.3, 0.7, 0.0, 0.0],
        [0.1] * 10 + [0.0] * 6,  # float32 partial sums of 0.1 end off 1
        [1e-30, 0.0, 0.0],
        [0.0, 0.0, 1.0],
        [1.0 / 3.0] * 3 + [0.0],
    ]
    for weights in cases:
        probs = mx.array(np.array(weights, dtype=np.float32))
        for u in (0.0, 0.5, near_one):
            token = int(np.asarray(sample_from_distribution(probs, u)))
            assert weights[token] > 0, (weights, u, token)
        assert int(np.asarray(sample_from_distribution(probs, near_one))) == max(
            i for i, w in enumerate(weights) if w > 0
        )
    rng = np.random.default_rng(9)
    gamma = rng.gamma(0.5, size=(2000, 7))
    gamma[rng.random(gamma.shape) < 0.4] = 0.0
    gamma[:, 2] += 1e-6
    rows = (gamma / gamma.sum(axis=1, keepdims=True)).astype(np.float32)
    us = rng.random(2000).astype(np.float32)
    us[:500] = np.float32(near_one)
    tokens = np.array(sample_from_distribution(mx.array(rows), mx.array(us)))
    assert (rows[np.arange(2000), tokens] > 0).all()


def test_batched_rows() -> None:
    probs = mx.array([[0.5, 0.5, 0.0], [0.0, 0.25, 0.75], [1.0, 0.0, 0.0]])
    got = sample_from_distribution(probs, mx.array([0.75, 0.5, 0.9]))
    assert got.dtype == mx.int32 and tuple(got.shape) == (3,)
    assert got.tolist() == [1, 2, 0]
    assert sample_from_distribution(probs, 0.25).tolist() == [0, 2, 0]  # one u for all rows
    single = sample_from_distribution(mx.array([0.5, 0.5]), 0.5)
    assert single.dtype == mx.int32 and single.ndim == 0


def test_sample_token_with_distribution_returns_the_law_it_drew_from() -> None:
    logits = mx.array([0.3, 1.2, -0.4, 0.9, 0.0])
    config = SamplerConfig(temperature=0.8, top_k=3, repetition_penalty=1.3)
    history = [1, 3]
    for u in (0.0, 0.3, 0.6, 0.99):
        token, probs = sample_token_with_distribution(logits, config, history, u)
        law = effective_token_distribution(logits, config, history)
        assert probs.tolist() == law.tolist()
        assert token.item() == sample_from_distribution(law, u).item()
        assert token.dtype == mx.int32 and token.ndim == 0
    with pytest.raises(ValueError, match="logits"):
        sample_token_with_distribution(mx.zeros((2, 5)), config, history, 0.5)


@pytest.mark.parametrize("temperature", [2.0**-126, 1e-30, 1e-20])
def test_a_tiny_usable_temperature_gives_the_limiting_distribution(temperature: float) -> None:
    # The shift by the maximum comes before the division: the maximum divides to exactly 0
    # and every other id to -inf, never inf - inf.
    config = SamplerConfig(temperature=temperature)
    logits = mx.array([1.0, 1.0 - 2.0**-20, -3.0, float("-inf")])
    assert effective_token_distribution(logits, config).tolist() == [1.0, 0.0, 0.0, 0.0]
    tied = mx.array([2.0, -1.0, 2.0, 0.0])
    assert effective_token_distribution(tied, config).tolist() == [0.5, 0.0, 0.5, 0.0]
    huge = mx.array([2.0**64, -(2.0**64), 0.0])
    assert effective_token_distribution(huge, config).tolist() == [1.0, 0.0, 0.0]
