"""The ``verify_draft_token`` vectors.
"""

from __future__ import annotations

from fractions import Fraction

import mlx.core as mx

from specaccept import AcceptanceRule, verify_draft_token

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
    bools,
    check_equal,
    draw_from,
    encode_ids,
    encode_reals,
    id_array,
    ints,
    oracle_verify,
    rational,
    scalar_bool,
    scalar_int,
    seed_of,
    slug,
    vector,
)

# --- verify_draft_token ----------------------------------------------------------------------


def verify_vector(
    name: str, note: str, rule: AcceptanceRule, p: Row, q: Row | None, token: int,
    u_accept: float, u_sample: float,
) -> Vector | None:
    accepted, emitted, robust = oracle_verify(
        rule, rational(p), None if q is None else rational(q), token,
        Fraction(u_accept), Fraction(u_sample),
    )
    if not robust:
        return None
    verdict = verify_draft_token(rule, arr(p), None if q is None else arr(q), token,
                                 u_accept, u_sample)
    check_equal(name, (scalar_bool(verdict.accepted), scalar_int(verdict.token)),
                (accepted, emitted))
    return vector(name, note, {
        "rule": rule.value, "p": encode_reals(p),
        "q": None if q is None else encode_reals(q),
        "token": token, "u_accept": u_accept, "u_sample": u_sample,
    }, {"accepted": accepted, "token": emitted}, 0.0)


def verify_draft_token_vectors() -> list[Vector]:
    g, m, s = (AcceptanceRule.GREEDY_ARGMAX, AcceptanceRule.SAMPLER_MATCH,
               AcceptanceRule.STOCHASTIC)
    n = AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION
    p, q = [0.25, 0.75], [0.5, 0.5]
    hand = [
        verify_vector("greedy_accepts_argmax", "the draft is argmax p", g, [0.25, 0.75], None, 1,
                      0.0, 0.0),
        verify_vector("greedy_tie_lowest_id", "argmax ties go to the lowest id: id 1 loses to 0",
                      g, [0.5, 0.5], None, 1, 0.0, 0.0),
        verify_vector("greedy_ignores_uniforms", "no uniform is read", g, [0.0, 0.0, 1.0], None, 2,
                      0.96875, 0.96875),
        verify_vector("greedy_is_argmax_not_a_draw",
                      "greedy-argmax accepts the argmax; a draw from p with u_sample = 0 would "
                      "give id 0 and reject", g, [0.25, 0.75], None, 1, 0.0, 0.0),
        verify_vector("greedy_rejects_what_a_draw_accepts",
                      "greedy-argmax rejects id 0 and emits the argmax 1, where a draw with "
                      "u_sample = 0 would accept id 0", g, [0.25, 0.75], None, 0, 0.0, 0.0),
        verify_vector("stochastic_reject_residual", "u * q = 0.375 > 0.25; residual is id 1",
                      s, p, q, 0, 0.75, 0.0),
        verify_vector("stochastic_accept", "u * q = 0.125 <= 0.25", s, p, q, 0, 0.25, 0.5),
        verify_vector("stochastic_underflowed_q",
                      "p[t] = q[t] = 0: rejected by the p[t] > 0 conjunct, residual emitted",
                      s, [0.0, 0.5, 0.5], [0.0, 1.0, 0.0], 0, 0.0, 0.25),
        verify_vector("stochastic_q_zero_accepts", "q[t] = 0 < p[t]: accepted", s, [0.5, 0.5],
                      [0.0, 1.0], 0, 0.96875, 0.0),
        verify_vector("sampler_match_hit", "the draw with u_sample = 0.5 is id 1", m, p, None, 1,
                      0.96875, 0.5),
        verify_vector("sampler_match_miss", "the draw is id 1, the draft 0: emit the draw", m, p,
                      None, 0, 0.0, 0.5),
        verify_vector("sampler_match_ignores_q", "q is passed and unused", m, p, q, 0, 0.0, 0.0),
        verify_vector("no_proposal_distribution_like_sampler_match",
                      "same arithmetic as sampler-match", n, p, None, 0, 0.0, 0.5),
    ]
    out = [v for v in hand if v is not None]
    if len(out) != len(hand):
        raise GenerationError("a hand-written verify_draft_token case is not robust")

    pr, qr = [[0.25, 0.75], [0.0, 1.0]], [[0.5, 0.5], [0.5, 0.5]]
    verdict = verify_draft_token(s, arr(pr), arr(qr), mx.array([0, 0]), mx.array([0.25, 0.0]),
                                 mx.array([0.0, 0.0]))
    got_acc, got_tok = bools(verdict.accepted), ints(verdict.token)
    want = [oracle_verify(s, rational(a), rational(b), 0, Fraction(ua), Fraction(0))[:2]
            for a, b, ua in zip(pr, qr, (0.25, 0.0), strict=True)]
    check_equal("rows", list(zip(got_acc, got_tok, strict=True)), want)
    out.append(vector("stochastic_rows", "[k, V] rows", {
        "rule": s.value, "p": encode_reals(pr), "q": encode_reals(qr), "token": [0, 0],
        "u_accept": [0.25, 0.0], "u_sample": [0.0, 0.0],
    }, {"accepted": list(got_acc), "token": list(got_tok)}, 0.0))

    # A placeholder under every rule: rejected, and the target's own token emitted. Under
    # stochastic the draw is from p (id 2 with u_sample = 0.875), not from the residual,
    # which is all on id 0.
    for rule in RULES:
        q_rows = [PLACEHOLDER_Q] * 2 if rule.needs_proposal_distribution else None
        for label, value, dtype in PLACEHOLDER_IDS[::3] if rule is not s else PLACEHOLDER_IDS:
            tokens, u_sample = [0, value], [0.25, 0.875]
            verdict = verify_draft_token(rule, arr([PLACEHOLDER_P] * 2),
                                         None if q_rows is None else arr(q_rows),
                                         id_array(tokens, dtype), mx.array([0.0, 0.0]),
                                         mx.array(u_sample))
            got = list(zip(bools(verdict.accepted), ints(verdict.token), strict=True))
            want = []
            for t, us in zip(tokens, u_sample, strict=True):
                accepted, emitted, robust = oracle_verify(
                    rule, rational(PLACEHOLDER_P),
                    None if q_rows is None else rational(PLACEHOLDER_Q), t, Fraction(0),
                    Fraction(us))
                if not robust:
                    raise GenerationError(f"placeholder_{label}: not robust")
                want.append((accepted, emitted))
            name = f"{slug(rule)}_placeholder_{label}"
            check_equal(name, got, want)
            out.append(vector(name, f"id {value} ({dtype or 'int32'}) is no draft: rejected, "
                              "the target's own token emitted", {
                "rule": rule.value, "p": encode_reals([PLACEHOLDER_P] * 2),
                "q": None if q_rows is None else encode_reals(q_rows),
                "token": encode_ids(tokens, dtype), "u_accept": [0.0, 0.0],
                "u_sample": encode_reals(u_sample),
            }, {"accepted": [a for a, _ in got], "token": [t for _, t in got]}, 0.0))

    for r_index, rule in enumerate(RULES):
        rng = Lcg(seed_of(4, r_index))
        made = 0
        while made < 6:
            size = 2 + rng.below(5)
            p = rng.dyadic_distribution(size)
            q = p if rng.below(3) == 0 else rng.dyadic_distribution(size)
            token = draw_from(q, rng)
            q_arg = q if rule.needs_proposal_distribution else None
            made_vector = verify_vector(f"{slug(rule)}_random_{made:02d}",
                                        "pseudo-random dyadic case; token drawn from q", rule, p,
                                        q_arg, token, rng.uniform(), rng.uniform())
            if made_vector is not None:
                out.append(made_vector)
                made += 1
    return out
