"""The ``verify_tokenwise`` vectors.
"""

from __future__ import annotations

from fractions import Fraction

from specaccept import AcceptanceRule, verify_tokenwise

from .common import (
    PLACEHOLDER_IDS,
    PLACEHOLDER_P,
    PLACEHOLDER_Q,
    RULES,
    GenerationError,
    Lcg,
    Row,
    Vector,
    arr,
    check_equal,
    draw_from,
    encode_ids,
    encode_reals,
    id_array,
    oracle_argmax,
    oracle_block,
    rational,
    scalar_int,
    seed_of,
    slug,
    vector,
)

# --- verify_tokenwise -----------------------------------------------------------------------------


def block_vector(
    name: str, note: str, rule: AcceptanceRule, target: list[Row], draft: list[Row] | None,
    tokens: list[int], uniforms: list[list[float]], dtype: str | None = None,
) -> Vector | None:
    num, nxt, robust = oracle_block(
        rule, [rational(r) for r in target],
        None if draft is None else [rational(r) for r in draft],
        tokens, [[Fraction(u) for u in row] for row in uniforms],
    )
    if not robust:
        return None
    verdict = verify_tokenwise(rule, arr(target), None if draft is None else arr(draft),
                           id_array(tokens, dtype), arr(uniforms))
    check_equal(name, (scalar_int(verdict.num_accepted), scalar_int(verdict.next_token)),
                (num, nxt))
    return vector(name, note, {
        "rule": rule.value, "target_probs": encode_reals(target),
        "draft_probs": None if draft is None else encode_reals(draft),
        "draft_tokens": encode_ids(tokens, dtype), "uniforms": encode_reals(uniforms),
    }, {"num_accepted": num, "next_token": nxt}, 0.0)


def verify_tokenwise_vectors() -> list[Vector]:
    s, g = AcceptanceRule.STOCHASTIC, AcceptanceRule.GREEDY_ARGMAX
    m = AcceptanceRule.SAMPLER_MATCH
    hand = [
        block_vector("stochastic_reject_second", "first accepted; second: p[0] = 0 rejects, "
                     "residual id 1", s, [[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]],
                     [[0.5, 0.5], [1.0, 0.0]], [1, 0], [[0.5, 0.0], [0.5, 0.5], [0.0, 0.0]]),
        block_vector("greedy_bonus_lowest_id", "all accepted; the bonus argmax ties to id 0", g,
                     [[0.0, 1.0], [0.5, 0.5]], None, [1], [[0.0, 0.0], [0.0, 0.0]]),
        block_vector("greedy_bonus_is_argmax_not_a_draw",
                     "all accepted; the bonus is argmax p_k = 1, where a draw of row k with "
                     "uniforms[k][1] = 0 would give 0", g, [[0.0, 1.0], [0.25, 0.75]], None, [1],
                     [[0.0, 0.0], [0.0, 0.0]]),
        block_vector("sampler_match_bonus_reads_u_k_1",
                     "all accepted; the bonus is the draw of row k with uniforms[k][1]", m,
                     [[0.0, 1.0], [0.25, 0.75]], None, [1], [[0.96875, 0.0], [0.0, 0.5]]),
    ]
    # Placeholders: every real draft (id 0) is kept, so the round ends at the placeholder
    # and emits the target's own token there (stochastic: the draw of p, id 2, where the
    # residual would give 0). The oracle reads a placeholder position by position.
    k = 3
    target, draft = [PLACEHOLDER_P] * (k + 1), [PLACEHOLDER_Q] * k
    for rule in RULES:
        for at in range(k):
            for label, value, dtype in PLACEHOLDER_IDS[at::3]:
                tokens = [0] * k
                tokens[at] = value
                hand.append(block_vector(
                    f"{slug(rule)}_placeholder_{label}_at_{at}",
                    f"id {value} ({dtype or 'int32'}) at draft {at} is no draft: the round of "
                    f"the first {at} drafts", rule, target,
                    draft if rule.needs_proposal_distribution else None, tokens,
                    [[0.0, 0.25 if rule is not s else 0.875]] * (k + 1), dtype))
    hand.append(block_vector(
        "stochastic_drafts_after_a_placeholder_unread",
        "the id after the placeholder (3, with p = 0) is never read: the round ends at -1",
        s, target, draft, [0, -1, 3], [[0.0, 0.875]] * (k + 1)))
    hand.extend(grammar_vectors())
    hand.extend(one_hot_vectors())
    out = [v for v in hand if v is not None]
    if len(out) != len(hand):
        raise GenerationError("a hand-written verify_tokenwise case is not robust")
    for r_index, rule in enumerate(RULES):
        for k in range(1, 5):
            for want in range(k + 1):
                out.append(searched_block(r_index, rule, k, want))
    return out


def searched_block(r_index: int, rule: AcceptanceRule, k: int, want: int) -> Vector:
    """The first pseudo-random round (from a seed of its own) that accepts exactly `want`."""
    rng = Lcg(seed_of(5, r_index, k, want))
    for _ in range(20000):
        size = 2 + rng.below(4)
        target = [rng.dyadic_distribution(size) for _ in range(k + 1)]
        draft = [t if rng.below(2) == 0 else rng.dyadic_distribution(size) for t in target[:k]]
        if rule is AcceptanceRule.GREEDY_ARGMAX:
            tokens = [oracle_argmax(rational(t)) if rng.below(2) == 0 else rng.below(size)
                      for t in target[:k]]
        else:
            tokens = [draw_from(q, rng) for q in draft]
        uniforms = [[rng.uniform(), rng.uniform()] for _ in range(k + 1)]
        draft_arg = draft if rule.needs_proposal_distribution else None
        num, _, robust = oracle_block(
            rule, [rational(r) for r in target],
            None if draft_arg is None else [rational(r) for r in draft_arg], tokens,
            [[Fraction(u) for u in row] for row in uniforms],
        )
        if num != want or not robust:
            continue
        made = block_vector(f"{slug(rule)}_k{k}_accept{want}",
                            f"pseudo-random dyadic round: k = {k}, {want} accepted", rule, target,
                            draft_arg, tokens, uniforms)
        if made is not None:
            return made
    raise GenerationError(f"no case found for {rule.value} k={k} accepted={want}")


def grammar_vectors() -> list[Vector | None]:
    """spec/grammar_constrained_verification.md: the rows are the grammar-masked target, the
    drafter ignored the grammar. A draft outside it is rejected and replaced from
    relu(p_masked - q), where a draw from p_masked (the force-reject variant) differs."""
    s = AcceptanceRule.STOCHASTIC
    masked = [0.5, 0.5, 0.0, 0.0]
    q = [0.125, 0.25, 0.625, 0.0]
    return [
        block_vector(
            "grammar_draft_outside_replaced_from_the_residual",
            "rows masked to ids {0, 1}; draft 2 lies outside the grammar (p = 0): rejected, "
            "and the residual (3/8, 1/4, 0, 0) / (5/8) gives id 0 at u = 0.5625 where a draw "
            "from the masked target gives id 1", s, [masked, masked], [q], [2],
            [[0.0, 0.5625], [0.0, 0.0]]),
        block_vector(
            "grammar_second_draft_outside_after_one_kept",
            "draft 0 (inside the grammar, q <= p) kept; draft 2 at position 1 outside the "
            "grammar of row 1 (ids {0, 1}): replaced from the residual, id 0", s,
            [[0.0, 0.5, 0.5, 0.0], masked, [0.25, 0.25, 0.25, 0.25]],
            [[0.0, 0.25, 0.25, 0.5], q], [1, 2], [[0.5, 0.0], [0.0, 0.5625], [0.0, 0.0]]),
        block_vector(
            "grammar_all_inside_bonus_from_the_masked_row",
            "both drafts inside the grammar and kept; the bonus is drawn from the masked row "
            "k = (0, 0, 0.5, 0.5) with u = 0.25: id 2", s,
            [masked, masked, [0.0, 0.0, 0.5, 0.5]], [[0.5, 0.5, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]],
            [0, 1], [[0.5, 0.0], [0.5, 0.0], [0.0, 0.25]]),
    ]


def one_hot_vectors() -> list[Vector | None]:
    """proofs/one_hot_verification.md: drafts verified as if their q were one-hot (whatever
    drew them). A rejection draws from p without the draft, so the draft is never emitted
    in its own place, where a draw from p would emit it."""
    s = AcceptanceRule.STOCHASTIC
    p = [0.5, 0.25, 0.25]
    return [
        block_vector(
            "one_hot_q_rejection_never_redraws_the_draft",
            "q = one-hot(1): accept iff u <= p(1) = 0.25; u = 0.5 rejects, and the residual "
            "(0.5, 0, 0.25) / 0.75 gives id 0 at u = 0.5, where a draw from p gives id 1 "
            "(the rejected draft)", s, [p, p], [[0.0, 1.0, 0.0]], [1],
            [[0.5, 0.5], [0.0, 0.0]]),
        block_vector(
            "one_hot_q_accepts_at_u_equal_p",
            "q = one-hot(1): u = 0.25 = p(1) accepts (u * 1 <= p(1)); the bonus from row 1",
            s, [p, [0.0, 0.0, 1.0]], [[0.0, 1.0, 0.0]], [1], [[0.25, 0.0], [0.0, 0.5]]),
    ]
