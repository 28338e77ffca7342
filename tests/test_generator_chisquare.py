"""End-to-end goodness of fit: the generator's own token stream follows the target's law.

`test_core_chisquare.py` tests the rules on `verify_tokenwise` directly; these run
the whole generator (drafting, the batched target forward, verification, the
rewinds) and test the stream it yields.

1. A target that ignores its input: target-only sampling is i.i.d. draws from
   p = effective_token_distribution(logits, temperature 0.7), so every emitted
   token must be an i.i.d. draw from p. Pearson chi-square, vocab 6, dof 5.
2. A second-order Markov target (its law at position j reads the two tokens
   before, the older one from the cache, so a wrong rewind changes it): the
   counts of x_{t+1} given each context (x_{t-1}, x_t) must follow the
   transition table (the conditional chi-square of Anderson and Goodman, 1957,
   asymptotically chi-square with contexts * (V - 1) dof for a Markov chain).

alpha = 1e-4: a correct generator fails one seed in ten thousand; the seeds are
fixed, so a run is reproducible. Power is shown, not assumed: a generator with
a deliberately broken rule or rewind must fail the same test.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import mlx.core as mx
import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

import specaccept.shell.fused as fused_module
import specaccept.shell.generator as generator_module
from specaccept import SamplerConfig, effective_token_distribution
from specaccept.shell.generator import RuleChoice, SpeculativeGenerator, SpeculativeStats
from synthetic_models import (
    SyntheticLM,
    constant_logits,
    markov2_logits,
    random_markov2_table,
    target_trims_one_too_few,
)
from wrong_rules import resample_from_p_verify_tokenwise

ALPHA = 1e-4
K = 4
TOKENS = 12_000

pytestmark = pytest.mark.slow

# 1. The input-blind target.

VOCAB = 6
TARGET_CONFIG = SamplerConfig(temperature=0.7)
DRAFT_CONFIG = SamplerConfig(temperature=1.0)
# p = [0.80, 0.07, 0.05, 0.04, 0.025, 0.015] and q = [0.72, 0.10, 0.03, 0.06, 0.01, 0.08]:
# different laws (TV 0.115) that overlap enough (sum min 0.885, sum p*q 0.59) that a
# round emits 2 to 4 tokens, which keeps 12,000 tokens affordable under both rules.
TARGET_LOGITS = [0.7 * float(np.log(x)) for x in (0.80, 0.07, 0.05, 0.04, 0.025, 0.015)]
DRAFT_LOGITS = [float(np.log(x)) for x in (0.72, 0.10, 0.03, 0.06, 0.01, 0.08)]
P: npt.NDArray[np.float64] = np.array(
    effective_token_distribution(mx.array(TARGET_LOGITS), TARGET_CONFIG).tolist(), dtype=np.float64
)
Q: npt.NDArray[np.float64] = np.array(
    effective_token_distribution(mx.array(DRAFT_LOGITS), DRAFT_CONFIG).tolist(), dtype=np.float64
)
IID_THRESHOLD = float(stats.chi2.ppf(1.0 - ALPHA, VOCAB - 1))


@dataclass(frozen=True)
class Run:
    tokens: list[int]
    stats: SpeculativeStats
    seconds: float


def _run(
    target: SyntheticLM,
    drafter: SyntheticLM,
    target_config: SamplerConfig,
    draft_config: SamplerConfig,
    rule: RuleChoice,
    prompt: list[int],
    seed: int,
    tokens: int,
    *,
    check_caches: bool = True,
) -> Run:
    generator = SpeculativeGenerator(
        target, drafter, target_config, draft_config, num_draft_tokens=K, rule=rule,
        check_caches=check_caches, diagnostics=True,
    )
    start = time.perf_counter()
    run = generator.generate(prompt, tokens, seed=seed)
    emitted = [t for block in run for t in block]
    return Run(emitted, run.stats, time.perf_counter() - start)


def _iid_run(rule: RuleChoice, seed: int, tokens: int = TOKENS) -> Run:
    return _run(
        SyntheticLM(VOCAB, constant_logits(TARGET_LOGITS)),
        SyntheticLM(VOCAB, constant_logits(DRAFT_LOGITS)),
        TARGET_CONFIG, DRAFT_CONFIG, rule, [0], seed, tokens,
    )


def _pearson(tokens: list[int]) -> tuple[float, npt.NDArray[np.int64]]:
    counts = np.bincount(np.array(tokens, dtype=np.int64), minlength=VOCAB)
    expected = P * len(tokens)
    return float(((counts - expected) ** 2 / expected).sum()), counts


def _z_score(run_stats: SpeculativeStats, predicted: float) -> float:
    """How many standard errors the measured per-position acceptance sits from `predicted`.

    Each tested position is accepted with probability sum_min of its own (p, q) given
    the past, so accepted - sum of those is a martingale; its variance is at most
    positions_tested * s * (1 - s) for the mean s.
    """
    tested = run_stats.positions_tested
    error = math.sqrt(predicted * (1.0 - predicted) / tested)
    return (run_stats.per_position_acceptance - predicted) / error


def _report(label: str, statistic: float, threshold: float, run: Run) -> None:
    print(
        f"\n{label}: chi2={statistic:.2f} threshold={threshold:.2f} tokens={len(run.tokens)} "
        f"time={run.seconds:.1f}s\n  {run.stats.summary_line()}"
    )


@pytest.mark.parametrize(("rule", "seed"), [("stochastic", 1234), ("sampler-match", 4321)])
def test_iid_target_stream_passes_pearson(rule: RuleChoice, seed: int) -> None:
    run = _iid_run(rule, seed)
    statistic, counts = _pearson(run.tokens)
    _report(f"i.i.d. target, {rule}", statistic, IID_THRESHOLD, run)
    print(f"  counts={counts.tolist()} expected={np.round(P * len(run.tokens), 1).tolist()}")
    assert len(run.tokens) == TOKENS
    assert run.stats.rule.value == rule
    assert statistic < IID_THRESHOLD

    # p and q are the same at every position, so the diagnostics are known exactly and
    # the measured acceptance must sit on the rule's own closed form.
    sum_min, sum_prod = float(np.minimum(P, Q).sum()), float((P * Q).sum())
    assert run.stats.closed_form_sum_min == pytest.approx(sum_min, abs=1e-5)
    assert run.stats.closed_form_sum_prod == pytest.approx(sum_prod, abs=1e-5)
    predicted = sum_min if rule == "stochastic" else sum_prod
    z = _z_score(run.stats, predicted)
    print(f"  per_position_acceptance - closed form = {z:+.2f} standard errors")
    assert abs(z) < 4.0


def test_iid_stream_of_a_resample_from_p_generator_fails_pearson(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The naive mistake: on rejection draw from p instead of relu(p - q). The emitted
    # law becomes min(p, q) + (1 - sum min(p, q)) * p, which over-weights where q > p.
    # Its chi-square grows ~0.012 per token here, so half the tokens still fail it by 3x.
    # The generator verifies through the fused fast path, and through the core
    # `verify_tokenwise` when that path is off: break both.
    monkeypatch.setattr(generator_module, "verify_tokenwise", resample_from_p_verify_tokenwise)
    # The fused verifier also takes the draw it uses; the broken rule draws as the core does.
    monkeypatch.setattr(
        fused_module, "fused_verify_tokenwise",
        lambda rule, p, q, tokens, uniforms, draw=None: resample_from_p_verify_tokenwise(
            rule, p, q, tokens, uniforms),
    )
    run = _iid_run("stochastic", 1234, tokens=TOKENS // 2)
    statistic, _ = _pearson(run.tokens)
    _report("i.i.d. target, broken resample-from-p", statistic, IID_THRESHOLD, run)
    assert statistic > IID_THRESHOLD


# 2. The second-order Markov target.

MARKOV_VOCAB = 4
MARKOV_CONFIG = SamplerConfig(temperature=1.0)  # p is the table row exactly
TABLE = random_markov2_table(MARKOV_VOCAB, 11)
# A different chain that shares half its mass with the target's, for long accepted runs.
DRAFT_TABLE = 0.5 * TABLE + 0.5 * random_markov2_table(MARKOV_VOCAB, 12)
MARKOV_PROMPT = [1, 2]
MARKOV_DOF = MARKOV_VOCAB * MARKOV_VOCAB * (MARKOV_VOCAB - 1)
MARKOV_THRESHOLD = float(stats.chi2.ppf(1.0 - ALPHA, MARKOV_DOF))


def _markov_run(seed: int, tokens: int = TOKENS, rule: RuleChoice = "stochastic") -> Run:
    return _run(
        SyntheticLM(MARKOV_VOCAB, markov2_logits(TABLE)),
        SyntheticLM(MARKOV_VOCAB, markov2_logits(DRAFT_TABLE)),
        MARKOV_CONFIG, MARKOV_CONFIG, rule, MARKOV_PROMPT, seed, tokens,
    )


def _conditional_chi_square(tokens: list[int]) -> tuple[float, float]:
    """The Anderson-Goodman statistic over every context, and the smallest expected cell."""
    sequence = np.array(MARKOV_PROMPT + tokens, dtype=np.int64)
    counts = np.zeros((MARKOV_VOCAB,) * 3)
    np.add.at(counts, (sequence[:-2], sequence[1:-1], sequence[2:]), 1)
    expected = counts.sum(axis=-1, keepdims=True) * TABLE
    return float(((counts - expected) ** 2 / expected).sum()), float(expected.min())


@pytest.fixture(scope="module")
def markov_run() -> Run:
    return _markov_run(2024)


def test_markov_target_stream_passes_the_conditional_chi_square(markov_run: Run) -> None:
    statistic, smallest = _conditional_chi_square(markov_run.tokens)
    _report("Markov-2 target, stochastic", statistic, MARKOV_THRESHOLD, markov_run)
    assert len(markov_run.tokens) == TOKENS
    assert smallest >= 5.0  # the chi-square approximation holds for every cell
    assert markov_run.stats.accepted > 0
    assert statistic < MARKOV_THRESHOLD


def test_markov_stream_of_a_stale_target_cache_fails_the_conditional_chi_square(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The target keeps one rejected draft after every rejecting round, so the next
    # current token is conditioned on it: the test needs far fewer tokens to see it.
    monkeypatch.setattr(generator_module, "rewind_trim", target_trims_one_too_few)
    run = _run(
        SyntheticLM(MARKOV_VOCAB, markov2_logits(TABLE)),
        SyntheticLM(MARKOV_VOCAB, markov2_logits(DRAFT_TABLE)),
        MARKOV_CONFIG, MARKOV_CONFIG, "stochastic", MARKOV_PROMPT, 2024, 2_000,
        check_caches=False,  # the generator's own check would stop it at round one
    )
    statistic, _ = _conditional_chi_square(run.tokens)
    _report("Markov-2 target, broken target rewind", statistic, MARKOV_THRESHOLD, run)
    assert statistic > MARKOV_THRESHOLD


def test_markov_acceptance_sits_on_closed_form_sum_min(markov_run: Run) -> None:
    # Temperature 1, a different (p, q) pair at every context: the diagnostics average
    # sum min(p, q) over the tested positions, which is what stochastic acceptance
    # accepts in expectation.
    run_stats = markov_run.stats
    z = _z_score(run_stats, run_stats.closed_form_sum_min)
    print(
        f"\nMarkov-2 per_position_acceptance={run_stats.per_position_acceptance:.4f} "
        f"closed_form_sum_min={run_stats.closed_form_sum_min:.4f} "
        f"closed_form_sum_prod={run_stats.closed_form_sum_prod:.4f} z={z:+.2f}"
    )
    assert run_stats.positions_tested > 5_000
    assert abs(z) < 4.0
    assert run_stats.closed_form_sum_min >= run_stats.closed_form_sum_prod
    assert 0.0 < run_stats.closed_form_sum_prod < run_stats.closed_form_sum_min < 1.0


# 3. Block verification through the whole generator.


@pytest.fixture(scope="module")
def block_markov_run() -> Run:
    return _markov_run(2025, rule="block")


def test_block_verification_stream_passes_the_conditional_chi_square(
    block_markov_run: Run,
) -> None:
    # The history-dependent target makes every kept prefix and every rewind matter: a
    # round that keeps drafts behind a failing test must still leave the caches, and the
    # stream, exactly where target sampling would.
    statistic, smallest = _conditional_chi_square(block_markov_run.tokens)
    _report("Markov-2 target, block", statistic, MARKOV_THRESHOLD, block_markov_run)
    assert block_markov_run.stats.rule.value == "block"
    assert len(block_markov_run.tokens) == TOKENS
    assert smallest >= 5.0
    assert statistic < MARKOV_THRESHOLD


def test_block_verification_keeps_what_its_closed_form_says(block_markov_run: Run) -> None:
    # Per round, E[accepted | drafts] is the closed form the verdict carries; the sum of
    # accepted - E over rounds is a martingale whose variance the run also sums.
    run_stats = block_markov_run.stats
    z = run_stats.accepted_len_z
    print(
        f"\nblock mean_accepted_len={run_stats.mean_accepted_len:.4f} "
        f"closed_form_block={run_stats.closed_form_block:.4f} z={z:+.2f}"
    )
    assert run_stats.closed_form_accepted_len == pytest.approx(run_stats.closed_form_block)
    assert run_stats.rounds > 2_000
    assert abs(z) < 4.0


def test_stochastic_closed_form_per_round_and_the_block_form_beside_it(markov_run: Run) -> None:
    # Under stochastic, the per-round closed form is sum_i prod_{j <= i} min(1, p/q) on the
    # round's drafts; block verification's form on the same drafts is reported beside it.
    run_stats = markov_run.stats
    z = run_stats.accepted_len_z
    print(
        f"\nstochastic mean_accepted_len={run_stats.mean_accepted_len:.4f} "
        f"closed_form_accepted_len={run_stats.closed_form_accepted_len:.4f} "
        f"closed_form_block={run_stats.closed_form_block:.4f} z={z:+.2f}"
    )
    assert abs(z) < 4.0
    assert run_stats.closed_form_block > run_stats.closed_form_accepted_len
