"""The ``effective_token_distribution`` vectors (with ``sample_token_with_distribution``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from fractions import Fraction

import mlx.core as mx

from specaccept import SamplerConfig, effective_token_distribution, sample_token_with_distribution

from .common import (
    INEXACT_ATOL,
    NEG_INF,
    Json,
    Vector,
    check_close,
    check_equal,
    config,
    draw_is_robust,
    encode_config,
    encode_reals,
    f32,
    floats,
    matrix,
    oracle_sample,
    rational,
    scalar_int,
    typed,
    vector,
)

# --- effective_token_distribution (+ sample_token_with_distribution) ----------------------

LOG_DYADIC = floats(mx.log(mx.array([0.5, 0.25, 0.125, 0.125])))
"""float32 log([1/2, 1/4, 1/8, 1/8]): softmax maps these back to the exact dyadics."""
DRAW_UNIFORMS = (0.0, 0.25, 0.5, 0.75, 0.96875)


TOP_P_CLAMP_LOGITS = [1.5139237642288208, 1.3458753824234009, 0.7813113927841187,
                      0.2644556164741516, -0.31392282247543335]
"""float32 logits whose softmax, sorted, has every float32 prefix sum below 1 - 2**-24."""


def softmax64(logits: Sequence[float]) -> list[float]:
    top = max(logits)
    weights = [0.0 if x == NEG_INF else math.exp(x - top) for x in logits]
    total = sum(weights)
    return [w / total for w in weights]


@dataclasses.dataclass(frozen=True)
class DistributionCase:
    name: str
    note: str
    logits: list[float] | list[list[float]]
    cfg: SamplerConfig
    want: list[float] | list[list[float]]
    """The expected probabilities, from hand-written values (float64)."""
    exact: bool
    history: tuple[int, ...] = ()
    oracle_atol: float | None = None
    history_dtype: str | None = None
    """When set, `history` is passed as an array of this dtype (ids outside [0, V) allowed:
    spec/validation.md), not as a Python sequence."""
    """How far the float64 hand values may lie from the float32 result (default: the vector's
    atol). Set for the float32 operation-order cases, whose point is a float32 rounding."""


def distribution_cases() -> list[DistributionCase]:
    d = LOG_DYADIC
    dyadic = [0.5, 0.25, 0.125, 0.125]
    two_thirds = [2 / 3, 1 / 3, 0.0, 0.0]
    c = DistributionCase
    return [
        c("plain_softmax_dyadic", "no filter: softmax of log-dyadic logits", d, config(),
          dyadic, True),
        c("uniform_logits", "equal logits: exp(0) = 1 for every id", [0.0] * 4, config(),
          [0.25] * 4, True),
        c("masked_logits_minus_inf", "-inf logits get exact zeros", [0.0, NEG_INF, 0.0, NEG_INF],
          config(), [0.5, 0.0, 0.5, 0.0], True),
        c("temperature_two", "temperature divides the max-shifted logits", d,
          config(temperature=2.0), softmax64([x / 2.0 for x in d]), False),
        c("temperature_half", "temperature below 1 sharpens", d, config(temperature=0.5),
          softmax64([x * 2.0 for x in d]), False),
        c("temperature_tiny_stays_finite",
          "logits are shifted by their max before dividing, so a tiny temperature keeps "
          "the tied maxima at 0 and sends the rest to -inf, never NaN",
          [1.0, 1.0, 0.5], config(temperature=1e-30), [0.5, 0.5, 0.0], True),
        c("greedy_temperature_zero_lowest_id", "temperature 0 is greedy; ties go to the lowest id",
          [1.0, 3.0, 3.0, 2.0], config(temperature=0.0), [0.0, 1.0, 0.0, 0.0], True),
        c("greedy_top_k_one_lowest_id",
          "top_k = 1 is greedy (one-hot, lowest id on ties), unlike top_k = 2 which keeps ties",
          [1.0, 3.0, 3.0, 2.0], config(temperature=0.7, top_k=1), [0.0, 1.0, 0.0, 0.0], True),
        c("greedy_after_logit_bias", "greedy takes the argmax after the logit bias",
          [1.0, 3.0, 3.0, 2.0], config(temperature=0.0, logit_bias={0: 2.5}),
          [1.0, 0.0, 0.0, 0.0], True),
        c("greedy_ignores_xtc", "XTC does not apply to a greedy sampler", d,
          config(temperature=0.0, xtc_probability=1.0, xtc_threshold=0.125),
          [1.0, 0.0, 0.0, 0.0], True),
        c("top_k_ties_at_kth_kept", "every id tied with the k-th largest logit is kept",
          [0.0, 0.0, 0.0, 0.0, -1.0], config(top_k=2), [0.25, 0.25, 0.25, 0.25, 0.0], True),
        c("top_k_cut", "top-k keeps the k largest and renormalizes", d, config(top_k=2),
          two_thirds, False),
        c("top_k_at_vocab_size_is_off", "top_k >= V is off", d, config(top_k=4), dyadic, True),
        c("top_p_first_token_reaches", "cumsum 0.5 is not < 0.5: the first id alone reaches top_p",
          d, config(top_p=0.5), [1.0, 0.0, 0.0, 0.0], True),
        c("top_p_exact_reach_stops", "cumsum reaches 0.75 exactly at id 1: ids 0 and 1 are kept",
          d, config(top_p=0.75), two_thirds, False),
        c("top_p_crossing_token_kept", "the id whose cumsum crosses top_p = 0.625 is kept", d,
          config(top_p=0.625), two_thirds, False),
        c("top_p_ties_with_crossing_token_kept",
          "id 2 crosses top_p = 0.8125; id 3 ties with it and is kept too", d,
          config(top_p=0.8125), dyadic, True),
        c("top_p_uniform_ties", "all ids tie with the crossing id", [0.0] * 4,
          config(top_p=0.3), [0.25] * 4, True),
        c("top_p_robust_tie", "ids 0 and 1 tie; id 0 crosses top_p = 0.25 and id 1 is kept",
          [0.0, 0.0, -1.0], config(top_p=0.25), [0.5, 0.5, 0.0], True),
        c("top_p_after_top_k",
          "top-p runs on the top-k renormalized [2/3, 1/3]: id 0 alone reaches 0.625 "
          "(without top-k, ids 0 and 1 would be kept)", d, config(top_k=2, top_p=0.625),
          [1.0, 0.0, 0.0, 0.0], True),
        c("top_k_tie_keeps_all", "top_k = 3: id 3 ties with the third largest, all four kept", d,
          config(top_k=3), dyadic, True),
        c("min_p_inclusive_at_floor", "floor = 0.25 * max = 0.125; ids equal to the floor are kept",
          d, config(min_p=0.25), dyadic, True),
        c("min_p_excludes_below_floor", "floor = 0.5 * 0.5 = 0.25 drops the two 0.125 ids", d,
          config(min_p=0.5), two_thirds, False),
        c("min_p_after_top_p",
          "top-p keeps ids 0 and 1, then min-p (floor 0.375 * 2/3 = 0.25) keeps both; the "
          "reverse order would leave id 0 alone", d, config(top_p=0.625, min_p=0.375),
          two_thirds, False),
        c("xtc_mixture_half", "0.5 * no cut + 0.5 * cut: the mixture, no randomness", d,
          config(xtc_probability=0.5, xtc_threshold=0.25), [0.25, 0.375, 0.1875, 0.1875], True),
        c("xtc_always_cut", "ids 0 and 1 reach 0.25; all but the least likely (id 1) are cut", d,
          config(xtc_probability=1.0, xtc_threshold=0.25), [0.0, 0.5, 0.25, 0.25], True),
        c("xtc_needs_two_above_threshold", "only id 0 reaches 0.5: no cut", d,
          config(xtc_probability=1.0, xtc_threshold=0.5), dyadic, True),
        c("xtc_ties_at_smallest_survive", "every id tied at the smallest qualifying mass survives",
          d, config(xtc_probability=1.0, xtc_threshold=0.125), [0.0, 0.0, 0.5, 0.5], True),
        c("xtc_before_temperature",
          "XTC reads softmax(logits) at temperature 1, before the temperature: at T = 0.5 only "
          "id 0 would reach 0.2, at T = 1 ids 0 and 1 do, so id 0 is cut",
          d, config(temperature=0.5, xtc_probability=1.0, xtc_threshold=0.2),
          softmax64([NEG_INF] + [x * 2.0 for x in d[1:]]), False),
        c("logit_bias_added_first", "the bias is added to the raw logits", [0.0] * 4,
          config(logit_bias={0: 1.0, 2: -1.0}), softmax64([1.0, 0.0, -1.0, 0.0]), False),
        c("repetition_penalty_sign_aware",
          "seen ids: positive logits divided by the penalty, negative ones multiplied",
          [2.0, 1.0, 0.0, -1.0], config(repetition_penalty=2.0),
          softmax64([1.0, 1.0, 0.0, -2.0]), False, (0, 3)),
        c("repetition_context_window", "only the last repetition_context_size ids count",
          [2.0, 1.0, 0.0, -1.0], config(repetition_penalty=2.0, repetition_context_size=1),
          softmax64([2.0, 0.5, 0.0, -1.0]), False, (0, 3, 1)),
        c("temperature_before_top_p",
          "T = 0.5 sharpens to [0.73, 0.18, 0.05, 0.05] before top-p = 0.7 reads it: id 0 "
          "alone reaches 0.7 (top-p on the untempered law would keep ids 0 and 1)", d,
          config(temperature=0.5, top_p=0.7), [1.0, 0.0, 0.0, 0.0], True, oracle_atol=1e-6),
        c("temperature_before_min_p",
          "T = 0.5 before min-p = 0.2: the floor 0.2 * 0.73 drops ids 2 and 3 (on the "
          "untempered law the floor 0.1 would keep all four)", d,
          config(temperature=0.5, min_p=0.2), [0.8, 0.2, 0.0, 0.0], False),
        c("top_p_sorts_by_probability",
          "the most likely id is the last: top-p = 0.5 accumulates in descending probability, "
          "so id 3 alone reaches it (accumulated in id order, every id would be kept)",
          [d[3], d[2], d[1], d[0]], config(top_p=0.5), [0.0, 0.0, 0.0, 1.0], True),
        c("logit_bias_before_repetition_penalty",
          "the bias is added before the penalty: (1 + 1) / 2 = 1 for id 0, not 1 / 2 + 1",
          [1.0, 0.0], config(logit_bias={0: 1.0}, repetition_penalty=2.0),
          softmax64([1.0, 0.0]), False, (0,)),
        c("dry_window_counts_last_n_tokens",
          "dry_penalty_last_n = 3 reads [1, 1, 1]: id 1 matches with L = 2 = allowed length "
          "(a window one token shorter would give L = 1, no penalty)", [0.0] * 3,
          config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=2, dry_penalty_last_n=3),
          softmax64([0.0, -1.0, 0.0]), False, (0, 1, 1, 1)),
        c("dry_cap_keeps_a_fully_penalised_row_finite",
          "both ids match with L = 3: base 1e20 ** 2 overflows float32 to inf, the cap makes "
          "both lose exactly 1e30 and the row stays uniform (uncapped, both would be -inf and "
          "the row NaN)",
          [0.0, 0.0], config(dry_multiplier=1.0, dry_base=1e20, dry_allowed_length=1),
          [0.5, 0.5], True, (0, 0, 0, 0, 1, 0, 0, 0)),
        c("penalties_with_empty_history", "no history: no id is seen, nothing is penalised",
          [0.0] * 4, config(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.5),
          [0.25] * 4, True),
        c("frequency_and_presence", "subtract count * frequency + seen * presence", [0.0] * 4,
          config(frequency_penalty=0.5, presence_penalty=0.25),
          softmax64([0.0, -1.25, -0.75, 0.0]), False, (1, 1, 2)),
        c("dry_continuation_penalised",
          "suffix [1, 2] occurred before, followed by 3: match length 2 = allowed length, "
          "penalty 1 * 2 ** 0 on id 3",
          [0.0] * 5, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=2),
          softmax64([0.0, 0.0, 0.0, -1.0, 0.0]), False, (1, 2, 3, 1, 2)),
        c("dry_repeat_run", "history 0 0 0 0: id 0 has match length 3, penalty 2 ** (3 - 1)",
          [0.0] * 5, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1),
          softmax64([-4.0, 0.0, 0.0, 0.0, 0.0]), False, (0, 0, 0, 0)),
        c("dry_breaker_stops_match", "a sequence breaker at the end of the suffix stops the match",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_sequence_breakers=(2,)),
          [0.25] * 4, True, (1, 2, 3, 1, 2)),
        c("dry_penalty_last_n_window", "DRY reads only the last dry_penalty_last_n ids",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_penalty_last_n=3),
          [0.25] * 4, True, (1, 2, 3, 1, 2)),
        c("dry_breaker_candidate_has_no_match",
          "id 3 is a breaker: after [1, 2] it would match length 2, but a candidate that is "
          "itself a breaker has L = 0, so nothing is penalised",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_sequence_breakers=(3,)),
          [0.25] * 4, True, (1, 2, 3, 1, 2)),
        c("temperature_shift_before_divide_overflow",
          "(logits - max) / T keeps the tied maxima at 0; logits / T first would overflow "
          "100 / 1e-37 to inf and give NaN",
          [100.0, 100.0, 50.0], config(temperature=1e-37), [0.5, 0.5, 0.0], True),
        c("order_temperature_shift_then_divide",
          "float32 order: (logits - max) / T; dividing first, logits / T - max / T, moves "
          "these probabilities by more than 1e-6",
          [2000.0, 1999.25, 1998.5, 1997.5], config(temperature=0.9),
          softmax64([x / f32(0.9) for x in [0.0, -0.75, -1.5, -2.5]]), False,
          oracle_atol=1e-4),
        c("order_repetition_penalty_divides",
          "float32 order: a positive seen logit is divided by the penalty, not multiplied by "
          "its reciprocal, which moves these probabilities by more than 1e-6",
          [700.0, 699.5, 699.0], config(repetition_penalty=1.1),
          softmax64([x / f32(1.1) for x in [700.0, 699.5, 699.0]]), False, (0, 1, 2),
          oracle_atol=1e-4),
        c("order_frequency_then_presence",
          "float32 order: logits - count * frequency - seen * presence, left to right; "
          "subtracting the summed penalty instead moves these probabilities by more than 1e-6",
          [1000.0, 1000.0, 999.0, 1000.0],
          config(frequency_penalty=1.1, presence_penalty=0.35),
          softmax64([1000.0 - 3 * f32(1.1) - f32(0.35), 1000.0 - f32(1.1) - f32(0.35), 999.0,
                     1000.0 - 2 * f32(1.1) - f32(0.35)]), False, (0, 0, 0, 1, 3, 3),
          oracle_atol=1e-4),
        c("order_xtc_mixture",
          "float32 order: (1 - xi) * uncut + xi * cut with xi = 0.35 (float32), bit for bit; "
          "uncut + xi * (cut - uncut) differs in the last bit of three entries",
          d, config(xtc_probability=0.35, xtc_threshold=0.25),
          [(1 - f32(0.35)) * a + f32(0.35) * b
           for a, b in zip([0.5, 0.25, 0.125, 0.125], [0.0, 0.5, 0.25, 0.25], strict=True)],
          True, oracle_atol=1e-7),
        c("xtc_softmax_shifts_by_max",
          "XTC's temperature-1 softmax is shifted by the max: exp(100) overflows float32, so "
          "an unshifted softmax gives NaN; here ids 0 and 1 reach 0.25 and id 0 is cut",
          [f32(100.0 + x) for x in d], config(xtc_probability=1.0, xtc_threshold=0.25),
          softmax64([NEG_INF] + [f32(100.0 + x) for x in d[1:]]), False),
        c("rows_share_history", "[R, V] logits: each row is filtered independently",
          [d, [0.0] * 4], config(), [dyadic, [0.25] * 4], True),
        c("single_token_vocabulary", "V = 1: the only id gets all the mass", [0.5], config(),
          [1.0], True),
        c("one_row_batch", "[1, V] logits: a batch of one row", [[0.0, 0.0]], config(),
          [[0.5, 0.5]], True),
        c("dry_two_token_history",
          "history [1, 1]: the candidate at position 1 matches the suffix [1], L = 1 = allowed "
          "length, so id 1 loses 1 * 2 ** 0", [0.0] * 3,
          config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1),
          softmax64([0.0, -1.0, 0.0]), False, (1, 1)),
        c("dry_multiplier_zero_is_off",
          "dry_multiplier = 0 skips DRY: computing it anyway would give 0 * base ** 2 = 0 * inf "
          "= NaN with base = float32's max", [0.0] * 4,
          config(dry_multiplier=0.0, dry_base=3.4028234663852886e38, dry_allowed_length=1),
          [0.25] * 4, True, (0, 0, 0, 0)),
        c("dry_last_n_zero_is_off", "dry_penalty_last_n = 0 turns DRY off, whatever the history",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_penalty_last_n=0), [0.25] * 4, True, (0, 0, 0, 0)),
        c("top_p_above_the_float32_total_keeps_all",
          "every float32 prefix sum of these probabilities stays below top_p = 1 - 2**-24, so "
          "the count of prefix sums below top_p is clamped to V - 1 and every id is kept",
          TOP_P_CLAMP_LOGITS, config(top_p=1.0 - 2.0**-24), softmax64(TOP_P_CLAMP_LOGITS),
          False),
        c("xtc_threshold_zero_masked_id_never_qualifies",
          "threshold 0: ids 0, 1 and 3 qualify, the masked id 2 (probability 0) does not, so the "
          "cut keeps ids 1 and 3, tied at the smallest qualifying 0.25",
          [d[0], d[1], NEG_INF, d[1]], config(xtc_probability=1.0, xtc_threshold=0.0),
          [0.0, 0.5, 0.0, 0.5], True),
        c("rows_greedy", "[R, V] logits under a greedy config", [[0.0, 1.0, 1.0], [2.0, 0.0, 2.0]],
          config(temperature=0.0), [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], True),
        # History arrays with ids outside [0, V): no token, counted by no penalty. Read
        # Python-style, -1 would count id 3 twice; narrowed to int32, int64 2**32 would be id 0.
        *(c(f"history_array_{label}_not_counted",
            f"ids {list(ids)} ({dtype}): only ids 0 and 3 are tokens, each counted once",
            [2.0, 1.0, 0.0, -1.0],
            config(repetition_penalty=2.0, frequency_penalty=0.5, presence_penalty=0.25),
            softmax64([0.25, 1.0, 0.0, -2.75]), False, ids, history_dtype=dtype)
          for label, ids, dtype in (
              ("placeholders", (0, -1, 3, 10**6, 2**31 - 1, -5), "int32"),
              ("int64_two_pow_32", (0, 2**32, 3), "int64"),
              ("uint32_max", (0, 2**32 - 1, 3), "uint32"))),
        c("dry_history_placeholder_breaks_match",
          "history [1, -1, 3, 1, -1] with breaker 2: an id outside the vocabulary breaks every "
          "match too, so the suffix ending at it matches nothing (read as a token, id 3 would "
          "match with L = 2)",
          [0.0] * 4, config(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=1,
                            dry_sequence_breakers=(2,)),
          [0.25] * 4, True, (1, -1, 3, 1, -1), history_dtype="int32"),
    ]


def effective_token_distribution_vectors() -> list[Vector]:
    out: list[Vector] = []
    for case in distribution_cases():
        logits = mx.array(case.logits, dtype=mx.float32)
        history: list[int] | mx.array = (
            list(case.history) if case.history_dtype is None
            else mx.array(list(case.history), dtype=getattr(mx, case.history_dtype)))
        probs = effective_token_distribution(logits, case.cfg, history)
        atol = 0.0 if case.exact else INEXACT_ATOL
        oracle_atol = atol if case.oracle_atol is None else case.oracle_atol
        draw_uniforms: list[Json] = []
        draw_tokens: list[Json] = []
        if probs.ndim == 1:
            got = floats(probs)
            want = [float(x) for x in case.want if isinstance(x, int | float)]
            check_close(case.name, got, want, oracle_atol)
            for u in DRAW_UNIFORMS:
                weights = rational(got)
                if not draw_is_robust(weights, Fraction(u)):
                    continue
                token, law = sample_token_with_distribution(logits, case.cfg, history, u)
                check_equal(f"{case.name} draw u={u}", scalar_int(token), oracle_sample(weights,
                                                                                        Fraction(u)))
                check_equal(f"{case.name} draw law", floats(law), got)
                draw_uniforms.append(u)
                draw_tokens.append(scalar_int(token))
            expected_probs: Json = encode_reals(got)
        else:
            rows = matrix(probs)
            for r, (row, want_row) in enumerate(zip(rows, case.want, strict=True)):
                assert isinstance(want_row, list)
                check_close(f"{case.name}[{r}]", row, want_row, oracle_atol)
            expected_probs = encode_reals(rows)
        inputs: Vector = {
            "logits": encode_reals(case.logits),
            "config": encode_config(case.cfg),
            "history": (list(case.history) if case.history_dtype is None
                        else typed(list(case.history), case.history_dtype)),
            "draw_uniforms": draw_uniforms,
        }
        expected: Vector = {"probs": expected_probs, "draw_tokens": draw_tokens}
        out.append(vector(case.name, case.note, inputs, expected, atol))
    return out
