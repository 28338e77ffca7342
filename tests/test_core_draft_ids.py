"""A draft id outside [0, V) in an array is no draft: defined, flagged, never read out of bounds.

Serving engines pass draft ids as arrays and pad them with placeholders (-1, or ids past
the vocabulary). spec/validation.md states the outcome: such an id is rejected
under every rule, the token emitted in its place is the target's own, and a round is
verified as if it ended before its first placeholder. Each public function that reads a
draft id is tested here with ids -1, -V, -V - 1, V, 10**6 and 2**31 - 1, in int32, int64
and uint32 (whose wrap to int32 would turn 2**32 - 1 into -1 and int64 2**32 into 0). The
same ids in a `history` array are no token: counted by no penalty, a breaker for DRY.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import mlx.core as mx
import numpy as np
import pytest

from specaccept import (
    AcceptanceRule,
    SamplerConfig,
    accept_draft_token,
    effective_token_distribution,
    sample_from_distribution,
    verify_blockwise,
    verify_draft_token,
    verify_tokenwise,
)
from specaccept.shell.fused import fused_verify_tokenwise

V = 4
# Id 0, where a placeholder is gathered, is a draft every rule would keep: p(0) = 0.5 is the
# argmax, p(0) >= q(0), and a draw from p with u = 0.25 gives 0. A placeholder that leaked
# through the clamp as id 0 would be accepted; one read as p(V + t) would be too for t = -V.
P = mx.array([0.5, 0.25, 0.25, 0.0])
Q = mx.array([0.25, 0.25, 0.25, 0.25])
# A draw from p with u = 0.875 gives 2; the residual relu(p - q) is all on id 0. So a
# placeholder's replacement drawn from the residual (as for a rejected real draft) shows.
U_OWN_DRAW = 0.875
OWN_DRAW = 2

PLACEHOLDER_CASES: list[tuple[int, mx.Dtype]] = [
    *((value, dtype) for value in (-1, -V, -V - 1, V, 10**6, 2**31 - 1)
      for dtype in (mx.int32, mx.int64)),
    *((value, mx.uint32) for value in (V, 10**6, 2**31 - 1, 2**32 - 1)),
    *((value, mx.int64) for value in (2**32, 2**32 + 1, 2**62)),
]
PLACEHOLDERS = [pytest.param(value, dtype, id=f"{value}-{str(dtype).split('.')[-1]}")
                for value, dtype in PLACEHOLDER_CASES]
RULES = [AcceptanceRule.GREEDY_ARGMAX, AcceptanceRule.SAMPLER_MATCH, AcceptanceRule.STOCHASTIC,
         AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION]


def ids(values: list[int], dtype: mx.Dtype) -> mx.array:
    return mx.array(values, dtype=dtype)


CHILD = textwrap.dedent(
    """
    import mlx.core as mx
    from specaccept import (AcceptanceRule, SamplerConfig, accept_draft_token,
                            effective_token_distribution, verify_tokenwise, verify_draft_token,
                            verify_blockwise)
    from specaccept.shell.fused import fused_verify_tokenwise
    V = 4
    p, q = mx.array([0.5, 0.25, 0.25, 0.0]), mx.array([0.25] * 4)
    target, draft, u = mx.stack([p, p, p]), mx.stack([q, q]), mx.array([[0.5, 0.5]] * 3)
    for value in (2**31 - 1, 10**6, -(2**31), -V - 1):
        for dtype in (mx.int32, mx.int64):
            t = mx.array([0, value], dtype=dtype)
            out = [accept_draft_token(p, q, t[1], 0.5), *verify_blockwise(target, draft, t, u)]
            for rule in (AcceptanceRule.GREEDY_ARGMAX, AcceptanceRule.SAMPLER_MATCH,
                         AcceptanceRule.STOCHASTIC):
                out += [*verify_draft_token(rule, p, q, t[1], 0.5, 0.5),
                        *verify_tokenwise(rule, target, draft, t, u),
                        *fused_verify_tokenwise(rule, target, draft, t, u)]
            for config in (SamplerConfig(repetition_penalty=2.0),
                           SamplerConfig(dry_multiplier=1.0, dry_allowed_length=1)):
                history = mx.array([1, value, 1, value], dtype=dtype)
                out.append(effective_token_distribution(mx.zeros(V), config, history))
            mx.eval(out)
    print("ok")
    """
)


def test_no_id_reads_outside_the_rows_in_a_child_process() -> None:
    # An unclamped gather at 2**31 - 1 segfaults the process: run the calls in a child,
    # first, so that the failure is a message, not a crashed test run.
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        f"exit {result.returncode}: {result.stderr[-2000:]}")


def test_the_placeholders_leave_no_id_in_range() -> None:
    # The cases would prove nothing if building one wrapped it into [0, V).
    for value, dtype in PLACEHOLDER_CASES:
        assert ids([value], dtype).astype(mx.int64).item() == value
        assert not 0 <= value < V


@pytest.mark.parametrize(("value", "dtype"), PLACEHOLDERS)
def test_accept_draft_token_rejects_a_placeholder(value: int, dtype: mx.Dtype) -> None:
    assert accept_draft_token(P, Q, ids([value], dtype)[0], 0.0).item() is False
    rows = accept_draft_token(mx.stack([P, P]), mx.stack([Q, Q]), ids([0, value], dtype),
                              mx.array([0.0, 0.0]))
    assert rows.tolist() == [True, False]


@pytest.mark.parametrize(("value", "dtype"), PLACEHOLDERS)
@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.value)
def test_verify_draft_token_emits_the_targets_own_token(
    rule: AcceptanceRule, value: int, dtype: mx.Dtype
) -> None:
    q = Q if rule.needs_proposal_distribution else None
    u_sample = U_OWN_DRAW if rule is AcceptanceRule.STOCHASTIC else 0.25
    own = 0 if rule is not AcceptanceRule.STOCHASTIC else OWN_DRAW
    accepted, token = verify_draft_token(rule, P, q, ids([value], dtype)[0], 0.0, u_sample)
    assert (accepted.item(), token.item()) == (False, own)
    # In rows, next to a real draft that is kept.
    rows_q = None if q is None else mx.stack([Q, Q])
    accepted, token = verify_draft_token(rule, mx.stack([P, P]), rows_q, ids([0, value], dtype),
                                         mx.array([0.0, 0.0]), mx.array([u_sample, u_sample]))
    assert accepted.tolist() == [True, False]
    assert token.tolist() == [0, own]


def block_inputs(k: int, seed: int) -> tuple[mx.array, mx.array, mx.array, mx.array]:
    """Random rows of vocabulary V, k drafts drawn from the draft rows, random uniforms."""
    rng = np.random.default_rng(seed)
    target = rng.dirichlet(np.ones(V), size=k + 1).astype(np.float32)
    draft = rng.dirichlet(np.ones(V), size=k).astype(np.float32)
    tokens = np.array([rng.choice(V, p=row / row.sum()) for row in draft.astype(np.float64)])
    uniforms = rng.random((k + 1, 2)).astype(np.float32)
    return (mx.array(target), mx.array(draft), mx.array(tokens, dtype=mx.int32),
            mx.array(uniforms))


def with_placeholder(tokens: mx.array, at: int, value: int, dtype: mx.Dtype) -> mx.array:
    values = [int(t) for t in np.array(tokens)]
    values[at] = value
    return ids(values, dtype)


@pytest.mark.parametrize(("value", "dtype"), PLACEHOLDERS)
@pytest.mark.parametrize("rule", RULES[:3], ids=lambda r: r.value)
def test_verify_tokenwise_ends_the_round_at_a_placeholder(
    rule: AcceptanceRule, value: int, dtype: mx.Dtype
) -> None:
    k = 3
    target, draft = mx.stack([P] * (k + 1)), mx.stack([Q] * k)
    q = draft if rule.needs_proposal_distribution else None
    u_sample = U_OWN_DRAW if rule is AcceptanceRule.STOCHASTIC else 0.25
    own = 0 if rule is not AcceptanceRule.STOCHASTIC else OWN_DRAW
    uniforms = mx.array([[0.0, u_sample]] * (k + 1))
    for at in range(k):  # every real draft (id 0) is kept, so the round ends at the placeholder
        tokens = with_placeholder(mx.zeros(k, dtype=mx.int32), at, value, dtype)
        verdict = verify_tokenwise(rule, target, q, tokens, uniforms)
        assert (verdict.num_accepted.item(), verdict.next_token.item()) == (at, own)
        fused = fused_verify_tokenwise(rule, target, q, tokens, uniforms)
        assert (fused[0].item(), fused[1].item()) == (at, own)


@pytest.mark.parametrize("rule", RULES[:3], ids=lambda r: r.value)
@pytest.mark.parametrize("seed", range(6))
def test_verify_tokenwise_with_a_placeholder_is_the_truncated_round(
    rule: AcceptanceRule, seed: int
) -> None:
    k = 4
    target, draft, tokens, uniforms = block_inputs(k, seed)
    q = draft if rule.needs_proposal_distribution else None
    for at in range(1, k):
        padded = with_placeholder(tokens, at, -1 if seed % 2 else 10**6, mx.int32)
        got = verify_tokenwise(rule, target, q, padded, uniforms)
        want = verify_tokenwise(rule, target[: at + 1], None if q is None else q[:at], tokens[:at],
                            uniforms[: at + 1])
        assert (got.num_accepted.item(), got.next_token.item()) == (
            want.num_accepted.item(), want.next_token.item())
        fused = fused_verify_tokenwise(rule, target, q, padded, uniforms)
        assert (fused[0].item(), fused[1].item()) == (got.num_accepted.item(),
                                                      got.next_token.item())


@pytest.mark.parametrize(("value", "dtype"), PLACEHOLDERS)
def test_verify_blockwise_with_a_leading_placeholder_is_a_target_step(
    value: int, dtype: mx.Dtype
) -> None:
    k = 3
    target, draft, tokens, uniforms = block_inputs(k, 7)
    padded = with_placeholder(tokens, 0, value, dtype)
    verdict = verify_blockwise(target, draft, padded, uniforms)
    own = sample_from_distribution(target[0], uniforms[0, 1]).item()
    assert (verdict.num_accepted.item(), verdict.next_token.item()) == (0, own)
    assert verdict.accepted_length_law.tolist() == [1.0] + [0.0] * k


@pytest.mark.parametrize("seed", range(12))
def test_verify_blockwise_with_a_placeholder_is_the_truncated_round(seed: int) -> None:
    # Bit for bit, the law included (padded with zeros); some seeds make a draft unproposable
    # (q = 0 < p) or excluded (p = 0), the weights' two special cases.
    k = 4
    target, draft, tokens, uniforms = block_inputs(k, seed)
    if seed % 3 == 1:
        draft = mx.where(mx.arange(V) == tokens[:, None], 0.0, draft)
    if seed % 3 == 2:
        target = mx.where(mx.arange(V) == mx.concatenate([tokens, tokens[:1]])[:, None], 0.0,
                          target)
    for at in range(1, k):
        for value, dtype in ((-1, mx.int32), (V, mx.int64), (2**32 - 1, mx.uint32)):
            padded = with_placeholder(tokens, at, value, dtype)
            got = verify_blockwise(target, draft, padded, uniforms)
            want = verify_blockwise(target[: at + 1], draft[:at], tokens[:at],
                                         uniforms[: at + 1])
            assert got.num_accepted.item() == want.num_accepted.item()
            assert got.next_token.item() == want.next_token.item()
            law = [*np.array(want.accepted_length_law).tolist(), *[0.0] * (k - at)]
            assert np.array(got.accepted_length_law).tolist() == law


def test_real_drafts_after_a_placeholder_are_never_read() -> None:
    k = 3
    target, draft, tokens, uniforms = block_inputs(k, 3)
    first = with_placeholder(tokens, 1, -1, mx.int32)
    drafted = [int(t) for t in np.array(tokens)]
    other = ids([drafted[0], -1, (drafted[2] + 1) % V], mx.int32)
    for rule in RULES[:3]:
        q = draft if rule.needs_proposal_distribution else None
        assert [x.item() for x in verify_tokenwise(rule, target, q, first, uniforms)] == [
            x.item() for x in verify_tokenwise(rule, target, q, other, uniforms)]
    a = verify_blockwise(target, draft, first, uniforms)
    b = verify_blockwise(target, draft, other, uniforms)
    assert a.accepted_length_law.tolist() == b.accepted_length_law.tolist()
    assert (a.num_accepted.item(), a.next_token.item()) == (b.num_accepted.item(),
                                                            b.next_token.item())


def test_a_python_int_out_of_range_still_raises() -> None:
    with pytest.raises(ValueError, match=r"token must lie in \[0, 4\), got 4"):
        accept_draft_token(P, Q, V, 0.0)
    with pytest.raises(ValueError, match=r"token must lie in \[0, 4\), got -1"):
        verify_draft_token(AcceptanceRule.STOCHASTIC, P, Q, -1, 0.0, 0.0)


PENALTIES = SamplerConfig(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25)
LOGITS = mx.array([2.0, 1.0, 0.0, -1.0])


@pytest.mark.parametrize(("value", "dtype"), PLACEHOLDERS)
def test_a_history_id_outside_the_vocabulary_is_counted_by_no_penalty(
    value: int, dtype: mx.Dtype
) -> None:
    # -4 read Python-style would count id 0 twice; int64 2**32 narrowed would too.
    got = effective_token_distribution(LOGITS, PENALTIES, ids([0, value, 3], dtype))
    want = effective_token_distribution(LOGITS, PENALTIES, [0, 3])
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize(("value", "dtype"), PLACEHOLDERS)
def test_dry_reads_a_history_id_outside_the_vocabulary_as_a_breaker(
    value: int, dtype: mx.Dtype
) -> None:
    # With breaker 2 configured (so that no default sentinel stands in for the rule), the
    # placeholder breaks the suffix [1, value] as breaker 2 breaks [1, 2]; as a plain token
    # (id 0 here) it lets id 3 match with L = 2 and be penalised.
    dry = SamplerConfig(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                        dry_sequence_breakers=(2,))
    got = effective_token_distribution(mx.zeros(V), dry, ids([1, value, 3, 1, value], dtype))
    assert got.tolist() == [0.25] * V
    assert got.tolist() == effective_token_distribution(mx.zeros(V), dry, [1, 2, 3, 1, 2]).tolist()
    as_a_token = effective_token_distribution(mx.zeros(V), dry, [1, 0, 3, 1, 0])
    assert as_a_token.tolist() != got.tolist()  # the case tells a breaker from a token
