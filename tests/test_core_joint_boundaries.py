"""Block verification's keep test at its boundaries: ``h_i > 0 and eta_i <= h_i``.

A boundary has measure zero, so no statistical test sees it, but a port that
replays a seeded run bit for bit depends on both conjuncts, exactly as the
accept test of `accept_draft_token` does.
"""

from __future__ import annotations

import mlx.core as mx

from specaccept import verify_blockwise


def test_a_uniform_equal_to_the_keep_probability_keeps_the_prefix() -> None:
    target = mx.array([[0.25, 0.75], [1.0, 0.0]])
    draft = mx.array([[0.5, 0.5]])
    tokens = mx.array([0])
    law = verify_blockwise(target, draft, tokens, mx.zeros((2, 2))).accepted_length_law
    keep = law[1]  # k = 1: P(tau = 1) = h_1, read back as the library computed it
    uniforms = mx.concatenate([mx.stack([keep, mx.array(0.0)])[None], mx.zeros((1, 2))])
    assert verify_blockwise(target, draft, tokens, uniforms).num_accepted.item() == 1
    above = keep + 2.0**-24  # the next float32 above h_1 = 0.5
    uniforms = mx.concatenate([mx.stack([above, mx.array(0.0)])[None], mx.zeros((1, 2))])
    assert verify_blockwise(target, draft, tokens, uniforms).num_accepted.item() == 0


def test_a_prefix_of_keep_probability_zero_is_never_kept_even_at_eta_zero() -> None:
    # The target excludes the draft: w_1 = h_1 = 0, and eta = 0 must not keep it.
    target = mx.array([[0.0, 1.0], [1.0, 0.0]])
    draft = mx.array([[0.5, 0.5]])
    verdict = verify_blockwise(target, draft, mx.array([0]), mx.zeros((2, 2)))
    assert verdict.accepted_length_law.tolist() == [1.0, 0.0]
    assert verdict.num_accepted.item() == 0
    assert verdict.next_token.item() == 1  # the residual, here p_1 itself
