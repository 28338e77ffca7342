"""Pearson goodness of fit of whole speculative rounds against target-only sampling.

Null hypothesis: the tokens a speculative decoder emits are distributed as the
target sampler's own draws. The target here ignores its input, so target-only
sampling is i.i.d. draws from one categorical p, and under the null every
emitted token (accepted draft, residual replacement or bonus) is an i.i.d. draw
from p. A chi-square test against p therefore tests the null directly.

alpha = 1e-4 with 5 degrees of freedom: a correct implementation fails one run
in ten thousand, and the uniforms come from fixed keys so a run is reproducible.
Power is demonstrated, not assumed: the same statistic on the same uniforms must
reject two known-wrong rules.
"""

from __future__ import annotations

from collections.abc import Callable

import mlx.core as mx
import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from block_adapter import BlockFn, rule_block
from specaccept import (
    AcceptanceRule,
    BlockwiseVerdict,
    SamplerConfig,
    acceptance_probability,
    effective_token_distribution,
    sample_from_distribution,
    verify_blockwise,
    verify_tokenwise,
)
from wrong_rules import joint_verification, resample_from_p_verify_tokenwise

VOCAB = 6
ALPHA = 1e-4
THRESHOLD = float(stats.chi2.ppf(1.0 - ALPHA, VOCAB - 1))
ROUNDS = 12_000  # every round emits at least one token, so >= 12,000 tokens per k
MIN_TOKENS = 12_000

TARGET_CONFIG = SamplerConfig(temperature=0.7)
DRAFT_CONFIG = SamplerConfig(temperature=1.0)
P = effective_token_distribution(mx.array([1.6, 1.0, 0.4, 0.0, -0.6, -1.2]), TARGET_CONFIG)
Q = effective_token_distribution(mx.array([-1.0, -0.2, 0.3, 0.9, 0.2, 1.5]), DRAFT_CONFIG)

# verify_tokenwise with one change: a rejection is replaced by a draw from p, not the residual.
_wrong_resample_from_p = rule_block(AcceptanceRule.STOCHASTIC, resample_from_p_verify_tokenwise)
_wrong_resample_from_p.__name__ = "_wrong_resample_from_p"  # named in the printed statistic


def _wrong_argmax_against_argmax(
    target: mx.array, draft: mx.array, tokens: mx.array, uniforms: mx.array
) -> tuple[mx.array, mx.array]:
    """The greedy rule applied to a sampled target: argmax whatever the temperature."""
    verdict = verify_tokenwise(AcceptanceRule.GREEDY_ARGMAX, target, None, tokens, uniforms)
    return verdict.num_accepted, verdict.next_token


def emitted_tokens(
    block: BlockFn, k: int, seed: int, p: mx.array = P, q: mx.array = Q
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Run ROUNDS independent rounds in one vmapped evaluation; return (tokens, num_accepted)."""
    draft_key, uniform_key = mx.random.split(mx.random.key(seed), 2)
    draft_u = mx.random.uniform(shape=(ROUNDS * k,), key=draft_key)
    drafts = sample_from_distribution(mx.broadcast_to(q, (ROUNDS * k, VOCAB)), draft_u)
    drafts = drafts.reshape(ROUNDS, k)
    uniforms = mx.random.uniform(shape=(ROUNDS, k + 1, 2), key=uniform_key)
    target = mx.broadcast_to(p, (ROUNDS, k + 1, VOCAB))  # the target ignores its input
    draft = mx.broadcast_to(q, (ROUNDS, k, VOCAB))
    num_accepted, next_token = mx.vmap(block)(target, draft, drafts, uniforms)
    mx.eval(drafts, num_accepted, next_token)
    d = np.array(drafts, dtype=np.int64)
    a = np.array(num_accepted, dtype=np.int64)
    assert a.min() >= 0 and a.max() <= k
    kept = np.arange(k)[None, :] < a[:, None]  # emit d[:a] + [next_token]
    tokens = np.concatenate([d[kept], np.array(next_token, dtype=np.int64)])
    return tokens, a


def chi_square(tokens: npt.NDArray[np.int64], target: mx.array = P) -> float:
    counts = np.bincount(tokens, minlength=VOCAB)
    p = np.array(target, dtype=np.float64)
    p /= p.sum()
    return float(stats.chisquare(counts, f_exp=p * counts.sum()).statistic)


def test_vmapped_rounds_agree_with_single_calls() -> None:
    # The harness batches rounds with mx.vmap; the statistic is about verify_tokenwise, so pin
    # that the batched verdicts are the unbatched ones.
    k, rounds = 4, 40
    keys = mx.random.split(mx.random.key(7), 2)
    drafts = mx.random.randint(0, VOCAB, (rounds, k), key=keys[0])
    uniforms = mx.random.uniform(shape=(rounds, k + 1, 2), key=keys[1])
    target = mx.broadcast_to(P, (rounds, k + 1, VOCAB))
    draft = mx.broadcast_to(Q, (rounds, k, VOCAB))
    for rule in (AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH):
        block = rule_block(rule)
        batched = mx.vmap(block)(target, draft, drafts, uniforms)
        singles = [block(target[i], draft[i], drafts[i], uniforms[i]) for i in range(rounds)]
        assert np.array(batched[0]).tolist() == [int(np.asarray(s[0])) for s in singles]
        assert np.array(batched[1]).tolist() == [int(np.asarray(s[1])) for s in singles]


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize(
    "rule", [AcceptanceRule.STOCHASTIC, AcceptanceRule.SAMPLER_MATCH], ids=lambda r: r.value
)
def test_emitted_tokens_fit_the_target_distribution(rule: AcceptanceRule, k: int) -> None:
    tokens, accepted = emitted_tokens(rule_block(rule), k, seed=1000 + k)
    statistic = chi_square(tokens)
    tested = np.minimum(accepted + 1, k).sum()  # a round stops testing at its first rejection
    rate = accepted.sum() / tested
    print(
        f"\n{rule.value} k={k}: chi2={statistic:.2f} (threshold {THRESHOLD:.2f}) "
        f"tokens={tokens.size} per-position acceptance={rate:.4f} "
        f"closed form={acceptance_probability(rule, P, Q).item():.4f}"
    )
    assert tokens.size >= MIN_TOKENS
    assert statistic <= THRESHOLD


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize(
    "wrong",
    [_wrong_resample_from_p, _wrong_argmax_against_argmax],
    ids=["resample-from-p", "argmax-against-argmax"],
)
def test_the_same_statistic_rejects_wrong_rules(wrong: BlockFn, k: int) -> None:
    tokens, _ = emitted_tokens(wrong, k, seed=1000 + k)  # the very uniforms of the test above
    statistic = chi_square(tokens)
    print(
        f"\n{wrong.__name__} k={k}: chi2={statistic:.2f} (threshold {THRESHOLD:.2f}) "
        f"tokens={tokens.size}"
    )
    assert tokens.size >= MIN_TOKENS
    assert statistic > THRESHOLD


# --- block verification ------------------------------------------------------------------
# A second pair, found by computing the exact emitted law of each wrong variant: on the pair
# above, the residual-without-weight variant shifts the token frequencies too little for
# 12,000 rounds to see (non-centrality ~10 at k = 4); on this one it is ~100.
BLOCK_P = effective_token_distribution(mx.array([-0.1, 1.8, 1.3, 1.4, 1.3, 1.2]), TARGET_CONFIG)
BLOCK_Q = effective_token_distribution(mx.array([-0.2, 2.3, 1.7, -1.0, 0.7, 1.6]), DRAFT_CONFIG)


def _joint_block(
    verify: Callable[[mx.array, mx.array, mx.array, mx.array], BlockwiseVerdict],
) -> BlockFn:
    def block(
        target: mx.array, draft: mx.array, tokens: mx.array, uniforms: mx.array
    ) -> tuple[mx.array, mx.array]:
        verdict = verify(target, draft, tokens, uniforms)
        return verdict.num_accepted, verdict.next_token

    return block


JOINT_VARIANTS = {
    "first-failure-instead-of-longest-prefix": joint_verification(longest_prefix=False),
    "residual-without-weight": joint_verification(weighted_residual=False),
    "last-keep-probability-one": joint_verification(last_keep_is_weight=False),
}


def test_the_joint_variants_differ_from_the_library_only_by_their_switch() -> None:
    k, rounds = 4, 2000
    keys = mx.random.split(mx.random.key(11), 3)
    drafts = mx.random.randint(0, VOCAB, (rounds, k), key=keys[0])
    uniforms = mx.random.uniform(shape=(rounds, k + 1, 2), key=keys[1])
    target = mx.broadcast_to(BLOCK_P, (rounds, k + 1, VOCAB))
    draft = mx.broadcast_to(BLOCK_Q, (rounds, k, VOCAB))
    library = mx.vmap(_joint_block(verify_blockwise))(target, draft, drafts, uniforms)
    clone = mx.vmap(_joint_block(joint_verification()))(target, draft, drafts, uniforms)
    assert np.array(library[0]).tolist() == np.array(clone[0]).tolist()
    assert np.array(library[1]).tolist() == np.array(clone[1]).tolist()
    for name, variant in JOINT_VARIANTS.items():
        wrong = mx.vmap(_joint_block(variant))(target, draft, drafts, uniforms)
        assert (np.array(wrong[0]).tolist(), np.array(wrong[1]).tolist()) != (
            np.array(library[0]).tolist(), np.array(library[1]).tolist()), name


@pytest.mark.parametrize("k", [1, 4])
def test_block_verification_fits_the_target_distribution(k: int) -> None:
    block = _joint_block(verify_blockwise)
    tokens, kept = emitted_tokens(block, k, seed=2000 + k, p=BLOCK_P, q=BLOCK_Q)
    statistic = chi_square(tokens, BLOCK_P)
    stochastic = rule_block(AcceptanceRule.STOCHASTIC)
    _, token_by_token = emitted_tokens(stochastic, k, seed=2000 + k, p=BLOCK_P, q=BLOCK_Q)
    print(
        f"\nblock k={k}: chi2={statistic:.2f} (threshold {THRESHOLD:.2f}) tokens={tokens.size} "
        f"mean kept {kept.mean():.4f}, stochastic on the same uniforms {token_by_token.mean():.4f}"
    )
    assert tokens.size >= MIN_TOKENS
    assert statistic <= THRESHOLD


@pytest.mark.parametrize("name", list(JOINT_VARIANTS))
def test_the_same_statistic_rejects_the_wrong_block_variants(name: str) -> None:
    k = 4
    block = _joint_block(JOINT_VARIANTS[name])
    tokens, _ = emitted_tokens(block, k, seed=2000 + k, p=BLOCK_P, q=BLOCK_Q)
    statistic = chi_square(tokens, BLOCK_P)
    print(f"\n{name} k={k}: chi2={statistic:.2f} (threshold {THRESHOLD:.2f}) tokens={tokens.size}")
    assert tokens.size >= MIN_TOKENS
    assert statistic > THRESHOLD
