"""The ``verify_blockwise`` vectors (block verification), checked against the proofs'
exact rule, ``proofs/exact_block.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

from proofs.exact_block import exact_round, kept_length_law

from specaccept import verify_blockwise

from .common import (
    INEXACT_ATOL,
    PLACEHOLDER_IDS,
    ROBUST_MARGIN,
    GenerationError,
    Lcg,
    Rational,
    Row,
    Vector,
    arr,
    check_close,
    check_equal,
    draw_from,
    draw_is_robust,
    encode_ids,
    encode_reals,
    f32,
    floats,
    id_array,
    is_draft,
    oracle_accept,
    oracle_sample,
    rational,
    scalar_int,
    seed_of,
    vector,
)

# --- verify_blockwise (block verification) -------------------------------------------


class BlockDecision(NamedTuple):
    """One round of block verification at given uniforms, from the proofs' exact rule."""

    num_accepted: int
    next_token: int
    robust: bool
    """Whether float32 reproduces the decision whatever the rounding of a correct port."""
    row: Rational
    """The law the next token was drawn from."""
    law: list[Fraction]
    """The law of the kept length tau = 0..k."""


def decide_block(target: list[Rational], draft: list[Rational], tokens: Sequence[int],
                 uniforms: Sequence[Sequence[Fraction]]) -> BlockDecision:
    """Block verification of one round in exact arithmetic: `exact_round` (the rule of
    ``proofs/exact_block.py``, which lemma 9's checks pin to the library) read at these
    uniforms, tau the largest i with h_i > 0 and eta_i <= h_i."""
    exact = exact_round([tuple(row) for row in target], [tuple(row) for row in draft],
                        tuple(tokens))
    keep = exact.keep
    kept = [i + 1 for i, h in enumerate(keep) if h > 0 and uniforms[i][0] <= h]
    # Block verification reads its keep test through exp and log: only a uniform at
    # least ROBUST_MARGIN from every keep probability gives a reproducible answer.
    robust = all(abs(uniforms[i][0] - h) >= ROBUST_MARGIN for i, h in enumerate(keep))
    num = max(kept, default=0)
    u = uniforms[num][1]
    row = list(exact.rows[num])
    return BlockDecision(num, oracle_sample(row, u), robust and draw_is_robust(row, u), row,
                         kept_length_law(keep))


def first_failure_length(target: list[Rational], draft: list[Rational], tokens: Sequence[int],
                         uniforms: Sequence[Sequence[Fraction]]) -> int:
    """What token-by-token verification (stochastic) keeps from the same uniforms."""
    for i, x in enumerate(tokens):
        if not oracle_accept(target[i], draft[i], x, uniforms[i][0]):
            return i
    return len(tokens)


def joint_vector(name: str, note: str, target: list[Row], draft: list[Row], tokens: list[int],
                 uniforms: list[list[float]], *, keep_tie: bool = False,
                 dtype: str | None = None) -> Vector | None:
    """`keep_tie`: the case puts eta_i exactly on h_i on purpose, where h_i is exact in float32
    (0 from an excluded prefix, or exp(log(1/4) - log(1/2)) = 1/2, the log-dyadic assumption
    of spec/vectors/schema.md); only the draw must then be robust."""
    exact_target, exact_draft = [rational(r) for r in target], [rational(r) for r in draft]
    exact_uniforms = [[Fraction(u) for u in row] for row in uniforms]
    # spec/verify_blockwise.md, Placeholders: the round of the drafts before the first.
    real = next((i for i, t in enumerate(tokens) if not is_draft(t, len(target[0]))),
                len(tokens))
    padding = [Fraction(0)] * (len(tokens) - real)
    if real == 0:  # the target's own step
        num, nxt = 0, oracle_sample(exact_target[0], exact_uniforms[0][1])
        robust = draw_is_robust(exact_target[0], exact_uniforms[0][1])
        law = [Fraction(1), *padding]
    else:
        decision = decide_block(exact_target[: real + 1], exact_draft[:real], tokens[:real],
                                exact_uniforms[: real + 1])
        num, nxt, robust = decision.num_accepted, decision.next_token, decision.robust
        if keep_tie:
            robust = draw_is_robust(decision.row, exact_uniforms[num][1])
        law = [*decision.law, *padding]
    if not robust:
        return None
    verdict = verify_blockwise(arr(target), arr(draft), id_array(tokens, dtype),
                                    arr(uniforms))
    check_equal(name, (scalar_int(verdict.num_accepted), scalar_int(verdict.next_token)),
                (num, nxt))
    check_close(name, floats(verdict.accepted_length_law), [float(x) for x in law],
                INEXACT_ATOL)
    stochastic = first_failure_length(exact_target, exact_draft, tokens, exact_uniforms)
    return vector(name, f"{note}; stochastic keeps {stochastic}", {
        "target_probs": encode_reals(target), "draft_probs": encode_reals(draft),
        "draft_tokens": encode_ids(tokens, dtype), "uniforms": encode_reals(uniforms),
    }, {"num_accepted": num, "next_token": nxt,
        "accepted_length_law": [f32(float(x)) for x in law]}, INEXACT_ATOL)


def verify_blockwise_vectors() -> list[Vector]:
    half, skew, flip = [0.5, 0.5], [0.25, 0.75], [0.75, 0.25]
    hand = [
        joint_vector("keeps_past_the_first_rejection",
                     "w = 1/2 then 3/4: eta_1 = 0.75 > h_1 = 0 but eta_2 = 0.5 <= h_2 = 3/4, "
                     "so both drafts are kept", [skew, skew, [1.0, 0.0]], [half, half], [0, 1],
                     [[0.75, 0.0], [0.5, 0.0], [0.0, 0.0]]),
        joint_vector("three_kept_after_a_failing_second",
                     "h = (0, 1/5, 1): the second test fails, the third passes, and the longest "
                     "passing prefix is kept", [skew, flip, skew, half], [half, half, half],
                     [0, 0, 1], [[0.75, 0.0], [0.96875, 0.0], [0.0, 0.0], [0.0, 0.5]]),
        joint_vector("k1_like_stochastic_accept", "k = 1: h_1 = min(1, p/q) = 1/2",
                     [skew, [1.0, 0.0]], [half], [0], [[0.25, 0.0], [0.0, 0.0]]),
        joint_vector("k1_like_stochastic_reject",
                     "k = 1: rejected, the residual relu(p - q) emits id 1",
                     [skew, [1.0, 0.0]], [half], [0], [[0.75, 0.5], [0.0, 0.0]]),
        joint_vector("q_zero_resets_weight",
                     "q_2(X_2) = 0 < p_2(X_2): the ratio is +inf and w_2 = 1",
                     [skew, half, [1.0, 0.0]], [half, [1.0, 0.0]], [0, 1],
                     [[0.96875, 0.0], [0.96875, 0.0], [0.0, 0.0]]),
        joint_vector("p_zero_excludes_prefix",
                     "p_2(X_2) = 0: w_2 = 0, so the prefix of two is never kept",
                     [half, [1.0, 0.0], half], [half, half], [0, 1],
                     [[0.0, 0.0], [0.5, 0.0], [0.0, 0.0]]),
        joint_vector("zero_residual_mass_bonus",
                     "p = q everywhere: w = 1, Z = 0 (h = 1 by convention), every draft kept",
                     [half, half, skew], [half, half], [1, 0],
                     [[0.96875, 0.96875], [0.96875, 0.96875], [0.0, 0.5]]),
        joint_vector("weighted_residual",
                     "tau = 1 with w_1 = 1/2: the draw is from relu(p_2 / 2 - q_2) = (1/4, 0, 0), "
                     "where relu(p_2 - q_2) would give id 1",
                     [[0.25, 0.75, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]],
                     [[0.5, 0.5, 0.0], [0.0, 0.25, 0.75]], [0, 2],
                     [[0.25, 0.0], [0.5, 0.75], [0.0, 0.0]]),
    ]
    hand += [
        joint_vector("keep_test_inclusive_at_a_tie",
                     "eta_1 = h_1 = 1/2 exactly: the keep test is <=, so the draft is kept and "
                     "the bonus comes from p_2 (with <, the residual would give id 1)",
                     [skew, [1.0, 0.0]], [half], [0], [[0.5, 0.0], [0.0, 0.0]], keep_tie=True),
        joint_vector("excluded_prefix_not_kept_at_eta_zero",
                     "p_1(X_1) = 0 gives h_1 = 0: eta_1 = 0 <= 0, yet the h_1 > 0 guard keeps "
                     "nothing and the residual emits id 1", [[0.0, 1.0], [1.0, 0.0]], [half],
                     [0], [[0.0, 0.0], [0.0, 0.0]], keep_tie=True),
    ]
    # Placeholders: the round of the drafts before the first one. With the 3/4 row the
    # truncated round's last test is h_m = w_m; a placeholder read as p = 0 would test
    # Z_m / (Z_m + 1 - w_m) against the placeholder's q and draw from its residual.
    quarter = [0.75, 0.25]
    for at in range(3):
        for label, value, dtype in PLACEHOLDER_IDS[at::3]:
            tokens = [0, 1, 0]
            tokens[at] = value
            hand.append(joint_vector(
                f"placeholder_{label}_at_{at}",
                f"id {value} ({dtype or 'int32'}) at draft {at} is no draft: the round of the "
                f"first {at} drafts", [skew, quarter, skew, half], [half, half, quarter],
                tokens, [[0.375, 0.875], [0.375, 0.875], [0.375, 0.875], [0.0, 0.875]],
                dtype=dtype))
    hand_kept = [v for v in hand if v is not None]
    if len(hand_kept) != len(hand):
        raise GenerationError("a hand-written verify_blockwise case is not robust")
    out = hand_kept
    for k in range(1, 5):
        for want in range(k + 1):
            out.append(searched_joint(k, want, longer=False))
        # Keeping i < k needs eta_i <= h_i <= w_i, which token-by-token verification passes
        # too; so a longer prefix than the first rejection ends at k, or at 2 <= i < k.
        for want in range(2, k + 1):
            out.append(searched_joint(k, want, longer=True))
    return out


def searched_joint(k: int, want: int, *, longer: bool) -> Vector:
    """The first pseudo-random round that keeps exactly `want`; with `longer`, one where
    token-by-token verification would keep fewer from the same uniforms."""
    rng = Lcg(seed_of(7, k, want, int(longer)))
    for _ in range(50000):
        size = 2 + rng.below(3)
        target = [rng.dyadic_distribution(size) for _ in range(k + 1)]
        draft = [rng.dyadic_distribution(size) for _ in range(k)]
        tokens = [draw_from(q, rng) for q in draft]
        uniforms = [[rng.uniform(), rng.uniform()] for _ in range(k + 1)]
        exact_target, exact_draft = [rational(r) for r in target], [rational(r) for r in draft]
        exact_uniforms = [[Fraction(u) for u in row] for row in uniforms]
        num, _, robust, _, _ = decide_block(exact_target, exact_draft, tokens, exact_uniforms)
        if num != want or not robust:
            continue
        if longer and first_failure_length(exact_target, exact_draft, tokens,
                                           exact_uniforms) >= num:
            continue
        label = "_longer_than_first_rejection" if longer else ""
        made = joint_vector(f"k{k}_keep{want}{label}",
                            f"pseudo-random dyadic round: k = {k}, {want} kept", target, draft,
                            tokens, uniforms)
        if made is not None:
            return made
    raise GenerationError(f"no joint case found for k={k} kept={want} longer={longer}")
