"""The fused fast path returns what the core reference returns, bit for bit.

`specaccept.shell.fused` exists only to be faster than the core functions; it may
never differ from them. Every comparison here is exact: token ids and codes equal,
probabilities equal as float32 bit patterns. Each runs twice, with `mx.compile`
fusing and with compilation disabled, and on the golden vectors of spec/vectors/
as well as random inputs (ties, zeros, masked and non-finite rows, a 128k
vocabulary). The last tests show that the comparison catches a wrong fast path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest

import specaccept.shell.fused as fused_module
from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    effective_token_distribution,
    sample_from_distribution,
    sample_token_with_distribution,
    verify_tokenwise,
)
from specaccept.shell.fused import (
    FusedSampler,
    draw_by_first_eligible,
    draw_from_distribution,
    fused_verify_tokenwise,
    invalid_row_codes,
)
from specaccept.shell.generator import (
    RuleChoice,
    SpeculativeGenerator,
    SpeculativeStats,
)
from specaccept.shell.guards import RowCode, invalid_rows
from specaccept.shell.loading import ModelPair
from specaccept.shell.profiling import HOST_PARTS, PHASES, RoundClock
from specaccept.shell.random_pairs import random_pair
from specaccept.shell.target_only import target_only_generate
from test_golden_vectors import float_array, sampler_config

VECTORS = Path(__file__).resolve().parents[1] / "spec" / "vectors"
RULES = (AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH, AcceptanceRule.GREEDY_ARGMAX)
CONFIGS = (
    SamplerConfig(),
    SamplerConfig(temperature=0.7),
    SamplerConfig(temperature=0.05),
    SamplerConfig(temperature=1.5, top_k=40),
    SamplerConfig(temperature=0.7, top_p=0.9),
    SamplerConfig(temperature=0.9, min_p=0.05),
    SamplerConfig(temperature=0.8, top_k=50, top_p=0.95, min_p=0.02),
    SamplerConfig(temperature=0.7, logit_bias={3: 2.5, 10: -float(2**20)}),
    SamplerConfig(temperature=0.0),
)


@pytest.fixture(params=["compiled", "uncompiled"])
def compile_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "uncompiled":
        mx.disable_compile()
    try:
        yield str(request.param)
    finally:
        mx.enable_compile()


def bits(array: mx.array) -> list[int]:
    """The float32 bit patterns (ids and bools as they are), for exact comparison."""
    values = np.array(array)
    if values.dtype == np.float32:
        return [int(v) for v in values.view(np.uint32).ravel()]
    return [int(v) for v in values.ravel()]


def assert_same(label: str, fast: mx.array, reference: mx.array) -> None:
    assert fast.dtype == reference.dtype, f"{label}: dtype {fast.dtype} != {reference.dtype}"
    assert fast.shape == reference.shape, f"{label}: shape {fast.shape} != {reference.shape}"
    assert bits(fast) == bits(reference), f"{label}: {fast.tolist()} != {reference.tolist()}"


def vectors(family: str) -> list[dict[str, object]]:
    data = json.loads((VECTORS / f"{family}.json").read_text(encoding="utf-8"))
    # The error vectors test the reference's validation; the fast path takes validated arrays.
    found: list[dict[str, object]] = [v for v in data["vectors"] if "expected" in v]
    assert len(found) >= 10, family
    return found


def random_logits(key: mx.array, rows: int, vocab: int, scale: float) -> mx.array:
    logits = scale * mx.random.normal((rows, vocab), key=key)
    # Ties, as real logits in bf16 hold many: quantise to a coarse grid.
    return mx.round(logits * 4) / 4


def random_probs(key: mx.array, rows: int, vocab: int) -> mx.array:
    """Rows with exact zeros, ties and a wide dynamic range."""
    a, b = mx.random.split(key)
    logits = random_logits(a, rows, vocab, 6.0)
    logits = mx.where(mx.random.uniform(shape=(rows, vocab), key=b) < 0.3, -mx.inf, logits)
    logits[:, 0] = 0.0  # every row keeps mass
    return mx.softmax(logits, axis=-1, precise=True)


def uniforms_for(key: mx.array, shape: tuple[int, ...]) -> mx.array:
    u = mx.floor(mx.random.uniform(shape=shape, key=key) * 2**24) / 2**24
    return u.astype(mx.float32)


# --- the draw ------------------------------------------------------------------------------


def test_draw_matches_the_golden_vectors(compile_mode: str) -> None:
    draw = mx.compile(draw_from_distribution)
    for vector in vectors("sample_from_distribution"):
        inputs = vector["input"]
        assert isinstance(inputs, dict)
        probs = mx.array(inputs["probs"], dtype=mx.float32)
        # The reference also takes one u for all rows; the fast path takes one per row.
        u = mx.broadcast_to(mx.array(inputs["u"], dtype=mx.float32), probs.shape[:-1])
        reference = sample_from_distribution(probs, u)
        assert_same(str(vector["name"]), draw_from_distribution(probs, u), reference)
        assert_same(f"{vector['name']} first eligible", draw_by_first_eligible(probs, u),
                    reference)
        assert_same(f"{vector['name']} compiled", draw(probs, u), reference)


@pytest.mark.parametrize("vocab", [1, 2, 7, 67, 1000, 128_256])  # 128_256: Llama 3's
def test_draw_matches_the_reference_on_random_rows(compile_mode: str, vocab: int) -> None:
    draw = mx.compile(draw_from_distribution)
    for seed in range(3):
        a, b = mx.random.split(mx.random.key(seed + vocab))
        probs = random_probs(a, 6, vocab)
        u = uniforms_for(b, (6,))
        u[0], u[1] = 0.0, 1.0 - 2**-24  # both ends of the grid
        reference = sample_from_distribution(probs, u)
        assert_same(f"V={vocab}", draw_from_distribution(probs, u), reference)
        assert_same(f"V={vocab} first eligible", draw_by_first_eligible(probs, u), reference)
        assert_same(f"V={vocab} compiled", draw(probs, u), reference)
        assert_same(f"V={vocab} one row", draw(probs[2], u[2]), sample_from_distribution(
            probs[2], u[2]))


def test_draw_matches_the_reference_on_degenerate_rows(compile_mode: str) -> None:
    nan, inf = float("nan"), float("inf")
    probs = mx.array(
        [[0.0, 0.0, 1.0, 0.0], [nan, 0.5, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0],
         [nan, nan, nan, nan], [inf, 0.0, 1.0, 0.0], [2**-149, 0.0, 0.0, 2**-149]],
        dtype=mx.float32,
    )
    u = mx.array([0.5, 0.5, 0.5, 0.5, 0.5, 1 - 2**-24], dtype=mx.float32)
    assert_same("degenerate", mx.compile(draw_from_distribution)(probs, u),
                sample_from_distribution(probs, u))
    assert_same("degenerate, first eligible", draw_by_first_eligible(probs, u),
                sample_from_distribution(probs, u))


# --- the guard -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16, mx.float16])
def test_invalid_row_codes_match_the_reference_guard(compile_mode: str, dtype: mx.Dtype) -> None:
    nan, inf = float("nan"), float("inf")
    rows = mx.array(
        [[0.0, 1.0, 2.0], [0.0, -inf, 1.0], [-inf, -inf, -inf], [nan, 0.0, 0.0],
         [inf, 0.0, 0.0], [inf, -inf, 0.0], [nan, -inf, -inf], [-inf, -inf, inf],
         [-inf, nan, inf], [3e38, -3e38, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0]],
    ).astype(dtype)
    laws = effective_token_distribution(rows, SamplerConfig())
    # Laws the sampler can return besides: no mass at all, a NaN entry, a tiny mass.
    laws[-2] = mx.zeros((3,))
    laws[-1] = mx.array([nan, 0.5, 0.5])
    laws[0] = mx.array([2**-149, 0.0, 0.0])
    codes = mx.compile(invalid_row_codes)(rows, laws)
    assert_same("codes", codes, invalid_rows(rows, laws))
    # -3e38 overflows float16 to -inf, leaving +inf - inf = NaN in its law.
    expected_ninth = RowCode.VALID if dtype != mx.float16 else RowCode.NOT_FINITE
    valid, not_finite, all_masked, no_mass = RowCode
    assert codes.tolist() == [valid, valid, all_masked, *[not_finite] * 6, expected_ninth,
                              no_mass, no_mass]


# --- the draft step and the target-only step ------------------------------------------------


def test_draft_and_target_steps_match_the_golden_vectors(compile_mode: str) -> None:
    served = 0
    for vector in vectors("effective_token_distribution"):
        inputs = vector["input"]
        assert isinstance(inputs, dict)
        config = sampler_config(inputs["config"])
        if inputs["history"] or not FusedSampler.serves(config):
            continue
        served += 1
        fused = FusedSampler(config, config, compiled=compile_mode == "compiled")
        logits = float_array(inputs["logits"], "logits")
        draw_uniforms = inputs["draw_uniforms"]
        assert isinstance(draw_uniforms, list)
        for u_value in draw_uniforms:
            u = mx.array(u_value, dtype=mx.float32)
            token, probs = sample_token_with_distribution(logits, config, (), u)
            step = fused.draft_step(logits, u)
            assert_same(f"{vector['name']} token", step.token, token)
            assert_same(f"{vector['name']} q", step.probs, probs)
            assert_same(f"{vector['name']} code", step.invalid,
                        invalid_rows(logits[None], probs[None])[0])
            target_token, _ = fused.target_step(logits, u)
            assert_same(f"{vector['name']} target token", target_token, token)
    assert served >= 10, "the vectors must exercise the served configurations"


# Greedy too: its fast draw is the argmax of the one-hot law.
@pytest.mark.parametrize("config", (*CONFIGS, SamplerConfig(temperature=0.0)),
                         ids=range(len(CONFIGS) + 1))
@pytest.mark.parametrize("dtype", [mx.float32, mx.bfloat16], ids=["f32", "bf16"])
def test_draft_step_matches_the_reference_on_random_logits(
    compile_mode: str, config: SamplerConfig, dtype: mx.Dtype
) -> None:
    fused = FusedSampler(config, config, compiled=compile_mode == "compiled")
    # A 128k vocabulary, the size this path exists for, once per config.
    sizes = ((0, 67), (1, 4096), (2, 128_256)) if dtype == mx.bfloat16 else ((0, 67), (1, 4096))
    for seed, vocab in sizes:
        a, b = mx.random.split(mx.random.key(seed))
        logits = random_logits(a, 3, vocab, 3.0).astype(dtype)
        u = uniforms_for(b, (3,))
        for row in range(3):
            token, probs = sample_token_with_distribution(logits[row], config, (), u[row])
            step = fused.draft_step(logits[row], u[row])
            assert_same(f"V={vocab} row {row} token", step.token, token)
            assert_same(f"V={vocab} row {row} q", step.probs, probs)
            target_token, _ = fused.target_step(logits[row], u[row])
            assert_same(f"V={vocab} row {row} target", target_token, token)


# --- the round's verdict -------------------------------------------------------------------


def test_fused_verify_tokenwise_matches_the_golden_vectors(compile_mode: str) -> None:
    for vector in vectors("verify_tokenwise"):
        inputs = vector["input"]
        assert isinstance(inputs, dict)
        rule = AcceptanceRule(inputs["rule"])
        target = mx.array(inputs["target_probs"], dtype=mx.float32)
        draft = (None if inputs["draft_probs"] is None
                 else mx.array(inputs["draft_probs"], dtype=mx.float32))
        ids = inputs["draft_tokens"]  # a placeholder vector may type them int64 or uint32
        tokens = (mx.array(ids["array"], dtype=getattr(mx, ids["dtype"])) if isinstance(ids, dict)
                  else mx.array(ids, dtype=mx.int32))
        uniforms = mx.array(inputs["uniforms"], dtype=mx.float32)
        reference = verify_tokenwise(rule, target, draft, tokens, uniforms)
        fast = fused_verify_tokenwise(rule, target, draft, tokens, uniforms)
        compiled = mx.compile(lambda *arrays, rule=rule: fused_verify_tokenwise(rule, *arrays))
        fused = compiled(target, draft, tokens, uniforms) if draft is not None else mx.compile(
            lambda *arrays, rule=rule: fused_verify_tokenwise(rule, arrays[0], None, *arrays[1:])
        )(target, tokens, uniforms)
        for got in (fast, fused):
            assert_same(f"{vector['name']} n", got[0], reference.num_accepted)
            assert_same(f"{vector['name']} next", got[1], reference.next_token)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.value)
@pytest.mark.parametrize("config", CONFIGS[:6], ids=range(6))
def test_verify_round_matches_the_reference_round(
    compile_mode: str, rule: AcceptanceRule, config: SamplerConfig
) -> None:
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        config = SamplerConfig(temperature=0.0)
    fused = FusedSampler(config, config, compiled=compile_mode == "compiled")
    cases = [(0, 67, 4), (1, 1000, 1), (3, 50, 8)]
    if config == CONFIGS[1]:
        cases.append((2, 128_256, 4))
    for seed, vocab, k in cases:
        a, b, c, d = mx.random.split(mx.random.key(100 + seed), 4)
        target_logits = random_logits(a, k + 1, vocab, 2.0).astype(mx.bfloat16)
        # Drafts from a nearby drafter, so that runs of acceptances happen.
        draft_logits = target_logits[:k].astype(mx.float32) + 0.5 * mx.random.normal(
            (k, vocab), key=b)
        draft_probs = effective_token_distribution(draft_logits, config)
        tokens = sample_from_distribution(draft_probs, uniforms_for(c, (k,)))
        uniforms = uniforms_for(d, (k + 1, 2))
        target_probs = effective_token_distribution(target_logits, config)
        proposal = draft_probs if rule.needs_proposal_distribution else None
        reference = verify_tokenwise(rule, target_probs, proposal, tokens, uniforms)
        got = fused.verify_round(rule, target_logits, proposal, tokens, uniforms)
        label = f"V={vocab} k={k}"
        assert_same(f"{label} n", got.num_accepted, reference.num_accepted)
        assert_same(f"{label} next", got.next_token, reference.next_token)
        assert_same(f"{label} probs", got.target_probs, target_probs)
        assert_same(f"{label} codes", got.invalid, invalid_rows(target_logits, target_probs))


def test_the_fused_path_refuses_what_it_does_not_serve() -> None:
    with pytest.raises(ValueError, match="draft_config uses history penalties or XTC"):
        FusedSampler(SamplerConfig(), SamplerConfig(repetition_penalty=1.1))
    with pytest.raises(ValueError, match="target_config"):
        FusedSampler(SamplerConfig(xtc_probability=0.5), SamplerConfig())


# --- the comparison can fail ---------------------------------------------------------------


def test_a_draw_that_ignores_zero_mass_is_caught() -> None:
    """Drop the positivity mask: the draw may land on a zero-probability id, and is caught."""
    probs = mx.array([0.5, 0.0, 0.5], dtype=mx.float32)
    u = mx.array(0.5, dtype=mx.float32)
    partial = mx.cumsum(probs)
    wrong = mx.argmax(partial >= u * partial[-1]).astype(mx.int32)
    with pytest.raises(AssertionError, match="!="):
        assert_same("wrong", wrong, sample_from_distribution(probs, u))


def test_a_rounding_difference_in_q_is_caught() -> None:
    """One ulp in one entry of q is a different distribution to this comparison."""
    probs = effective_token_distribution(mx.array([0.0, 1.0, 2.0]), SamplerConfig())
    nudged = mx.array(np.nextafter(np.array(probs), np.float32(1.0)).astype(np.float32))
    with pytest.raises(AssertionError, match="!="):
        assert_same("nudged", nudged, probs)


# --- the generator: the fast path changes no token -----------------------------------------


@pytest.fixture(scope="module")
def small_pair() -> ModelPair:
    return random_pair("small", seed=3)


@pytest.mark.parametrize(
    ("rule", "config"),
    [("stochastic", SamplerConfig(temperature=0.7)),
     ("sampler-match", SamplerConfig(temperature=0.7)),
     ("stochastic", SamplerConfig(temperature=1.0, top_p=0.9, min_p=0.05)),
     ("auto", SamplerConfig(temperature=0.0)),
     ("stochastic", SamplerConfig(temperature=0.8, repetition_penalty=1.2))],
    ids=["stochastic", "sampler-match", "top-p-min-p", "greedy", "penalty-uses-core"],
)
def test_fast_and_core_paths_generate_the_same_run(
    small_pair: ModelPair, rule: RuleChoice, config: SamplerConfig
) -> None:
    prompt = list(b"ROMEO:\n")
    runs: dict[bool, tuple[list[list[int]], SpeculativeStats, list[int]]] = {}
    for fast_path in (True, False):
        generator = SpeculativeGenerator(
            small_pair.target, small_pair.require_drafter(), config, num_draft_tokens=3, rule=rule,
            diagnostics=True, fast_path=fast_path,
        )
        run = generator.generate(prompt, 40, seed=11)
        blocks = [list(block) for block in run]
        target_only = list(target_only_generate(
            small_pair.target, prompt, config, 12, seed=5, fast_path=fast_path))
        runs[fast_path] = (blocks, run.stats, target_only)
    assert runs[True] == runs[False]
    assert runs[True][1].host_syncs == runs[True][1].rounds


def test_a_clock_times_the_round_without_changing_it(small_pair: ModelPair) -> None:
    config = SamplerConfig(temperature=0.7)
    generator = SpeculativeGenerator(small_pair.target, small_pair.require_drafter(), config)
    plain = generator.generate([1, 2, 3], 30, seed=2)
    blocks = list(plain)
    pipelined, phased = RoundClock(), RoundClock(phased=True)
    for clock in (pipelined, phased):
        run = generator.generate([1, 2, 3], 30, seed=2, clock=clock)
        assert list(run) == blocks
        assert run.stats.host_syncs == run.stats.rounds == plain.stats.rounds
        # A final single target step, when a run ends on one, has no drafts to time.
        assert plain.stats.rounds - 1 <= clock.rounds <= plain.stats.rounds
    assert set(phased.per_round()) == set(PHASES)
    assert all(seconds > 0 for seconds in phased.per_round().values())
    per_round = pipelined.per_round()
    assert set(per_round) == {"round", "host sync wait", "host", *HOST_PARTS}
    # The parts split the host time: together they are all of it.
    assert abs(sum(per_round[part] for part in HOST_PARTS) - per_round["host"]) < 1e-6


def test_a_phased_clock_finds_each_phase_not_yet_started(
    small_pair: ModelPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Work launched early would run before the phase that times it, and its device time
    # would be booked as the Python between phases.
    launched: list[int] = []
    real_async_eval = mx.async_eval

    def counting_async_eval(*arrays: mx.array) -> None:
        launched.append(len(arrays))
        real_async_eval(*arrays)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(mx, "async_eval", counting_async_eval)
    generator = SpeculativeGenerator(
        small_pair.target, small_pair.require_drafter(), SamplerConfig(temperature=0.7)
    )
    list(generator.generate([1, 2, 3], 12, seed=2, clock=RoundClock(phased=True)))
    assert launched == []
    list(generator.generate([1, 2, 3], 12, seed=2, clock=RoundClock()))
    assert launched


def test_without_a_compiler_the_fast_path_runs_uncompiled_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where `mx.compile` fails (no C++ compiler for the CPU), the same functions run plainly."""
    monkeypatch.setattr(fused_module, "_compile_works", lambda: "RuntimeError: no compiler")
    assert fused_module.compile_status() == "uncompiled (RuntimeError: no compiler)"
    config = SamplerConfig(temperature=0.7)
    with caplog.at_level("WARNING", logger="specaccept"):
        fused = FusedSampler(config, config)
    assert "mx.compile is unavailable (RuntimeError: no compiler)" in caplog.text
    logits = random_logits(mx.random.key(7), 1, 500, 3.0)[0]
    u = mx.array(0.375, dtype=mx.float32)
    token, probs = sample_token_with_distribution(logits, config, (), u)
    step = fused.draft_step(logits, u)
    assert_same("token", step.token, token)
    assert_same("q", step.probs, probs)
