"""The ``seeded_run`` vectors: whole runs, pinned by their token streams and per-round
verdicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, TypeAlias

import mlx.core as mx

from specaccept import AcceptanceRule, SamplerConfig, effective_token_distribution
from specaccept.shell.seeded_run import seeded_run

from .common import (
    ROBUST_MARGIN,
    ErrorCase,
    GenerationError,
    Json,
    Lcg,
    Rational,
    Row,
    Vector,
    check_equal,
    draw_is_robust,
    encode_reals,
    floats,
    id_list,
    is_f32,
    oracle_argmax,
    oracle_sample,
    oracle_verify,
    rational,
    seed_of,
    slug,
    vector,
)
from .uniforms import oracle_position_uniform, oracle_round_uniform
from .verify_blockwise import decide_block

# --- seeded_run: whole runs, pinned by their token streams and per-round verdicts ---------
#
# A run's laws are tables over the last `context_length` tokens of the history (prompt, then
# every emitted token and the round's drafts). Their rows are eighths whose float32 log maps
# back to themselves through softmax, so a model emitting those logits has exactly these
# laws, and tests/test_seeded_run.py can run the real generator on them. Every vector is
# checked against an exact-rational run keyed by hand, and must change under both wrong
# keyings below that can change it, so a port that keys by either fails it.

RUN_RULES = (AcceptanceRule.GREEDY_ARGMAX, AcceptanceRule.SAMPLER_MATCH,
             AcceptanceRule.STOCHASTIC, AcceptanceRule.BLOCK)
RunRecord: TypeAlias = "tuple[int, list[int], int, int]"
"""(position, draft_tokens, num_accepted, next_token): one round, as the vectors write it."""
Keying: TypeAlias = "Callable[[int, int, int], tuple[list[Fraction], list[list[Fraction]]]]"
"""(seed, round position n, k) -> (the k draft uniforms, the k + 1 rows [accept, sample])."""


def spec_keying(seed: int, n: int, k: int) -> tuple[list[Fraction], list[list[Fraction]]]:
    """spec/randomness.md: accept and draft by (n, offset), the target's draw by n + i."""
    draft = [oracle_round_uniform(seed, n, j, 2) for j in range(k)]
    verify = [[oracle_round_uniform(seed, n, i, 0), oracle_position_uniform(seed, n + i, 1)]
              for i in range(k + 1)]
    return draft, verify


def absolute_keying(seed: int, n: int, k: int) -> tuple[list[Fraction], list[list[Fraction]]]:
    """The old, lossy keying: accept and draft by the absolute position n + offset."""
    draft = [oracle_position_uniform(seed, n + j, 2) for j in range(k)]
    verify = [[oracle_position_uniform(seed, n + i, 0), oracle_position_uniform(seed, n + i, 1)]
              for i in range(k + 1)]
    return draft, verify


def sample_by_round_keying(seed: int, n: int,
                           k: int) -> tuple[list[Fraction], list[list[Fraction]]]:
    """A wrong keying: the target's draw by (n, offset) too, like the accept uniforms."""
    draft, verify = spec_keying(seed, n, k)
    return draft, [[row[0], oracle_round_uniform(seed, n, i, 1)] for i, row in enumerate(verify)]


@dataclasses.dataclass(frozen=True)
class TableLaw:
    """A law of the next token given the last `context_length` tokens of the history."""

    context_length: int
    rows: list[Row]
    """V ** context_length rows; row index: the last tokens as base-V digits, oldest first."""

    @property
    def vocab_size(self) -> int:
        return len(self.rows[0])

    def row(self, history: Sequence[int]) -> Row:
        index = 0
        for token in history[len(history) - self.context_length:]:
            index = index * self.vocab_size + token
        return self.rows[index]

    def encode(self) -> Json:
        return {"context_length": self.context_length, "rows": encode_reals(self.rows)}


def round_tripping_rows(vocab_size: int) -> list[Row]:
    """Every law of eighths over `vocab_size` ids that softmax(float32 log) reproduces."""
    rows = []
    for counts in sorted(_eighths(vocab_size, 8), reverse=True):
        row = [c / 8 for c in counts]
        logits = mx.log(mx.array(row, dtype=mx.float32))
        if floats(effective_token_distribution(logits, SamplerConfig())) == row:
            rows.append(row)
    return rows


def _eighths(size: int, left: int) -> list[tuple[int, ...]]:
    if size == 1:
        return [(left,)]
    return [(c, *rest) for c in range(left + 1) for rest in _eighths(size - 1, left - c)]


def random_law(rng: Lcg, palette: list[Row], context_length: int) -> TableLaw:
    vocab_size = len(palette[0])
    return TableLaw(context_length, [palette[rng.below(len(palette))]
                                     for _ in range(vocab_size ** context_length)])


def oracle_run(rule: AcceptanceRule, target: TableLaw, draft: TableLaw, prompt: Sequence[int],
               k_max: int, max_tokens: int, seed: int,
               keying: Keying) -> tuple[list[RunRecord], bool]:
    """The run in exact arithmetic, and whether float32 reproduces every decision of it."""
    history, position, robust = list(prompt), 0, True
    rounds: list[RunRecord] = []
    while position < max_tokens:
        k = min(k_max, max_tokens - position - 1)
        draft_u, verify_u = keying(seed, position, k)
        if k == 0:
            p = rational(target.row(history))
            if rule is AcceptanceRule.GREEDY_ARGMAX:
                token = oracle_argmax(p)
            else:
                token = oracle_sample(p, verify_u[0][1])
                robust = robust and draw_is_robust(p, verify_u[0][1])
            record: RunRecord = (position, [], 0, token)
        else:
            drafts: list[int] = []
            qs: list[Rational] = []
            for j in range(k):
                q = rational(draft.row(history + drafts))
                drafts.append(oracle_sample(q, draft_u[j]))
                robust = robust and draw_is_robust(q, draft_u[j])
                qs.append(q)
            ps = [rational(target.row(history + drafts[:i])) for i in range(k + 1)]
            if rule is AcceptanceRule.BLOCK:
                num, nxt, decided, _, _ = decide_block(ps, qs, drafts, verify_u)
            else:
                num, nxt, decided = oracle_token_round(rule, ps, qs, drafts, verify_u)
            robust = robust and decided
            record = (position, drafts, num, nxt)
        rounds.append(record)
        emitted = [*record[1][: record[2]], record[3]]
        history += emitted
        position += len(emitted)
    return rounds, robust


def oracle_token_round(rule: AcceptanceRule, ps: list[Rational], qs: list[Rational],
                       drafts: Sequence[int],
                       uniforms: Sequence[Sequence[Fraction]]) -> tuple[int, int, bool]:
    """A token-by-token round: (num_accepted, next_token, robust), where robust also covers
    every accept test (``u * q <= p`` rounds ``u * q`` in float32) and every draw it read."""
    robust = True
    for i, token in enumerate(drafts):
        u_accept, u_sample = uniforms[i]
        if rule is AcceptanceRule.STOCHASTIC:
            product = u_accept * qs[i][token]
            robust = robust and (is_f32(product) or abs(product - ps[i][token]) >= ROBUST_MARGIN)
        accepted, emitted, drawn = oracle_verify(rule, ps[i], qs[i], token, u_accept, u_sample)
        if rule is AcceptanceRule.SAMPLER_MATCH:
            robust = robust and draw_is_robust(ps[i], u_sample)
        robust = robust and drawn
        if not accepted:
            return i, emitted, robust
    k = len(drafts)
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        return k, oracle_argmax(ps[k]), robust
    return k, oracle_sample(ps[k], uniforms[k][1]), robust and draw_is_robust(ps[k],
                                                                              uniforms[k][1])


def run_tokens(rounds: Sequence[RunRecord]) -> list[int]:
    return [t for _, drafts, num, nxt in rounds for t in [*drafts[:num], nxt]]


def encode_rounds(rounds: Sequence[RunRecord]) -> Json:
    return [{"position": n, "draft_tokens": list(drafts), "num_accepted": num, "next_token": nxt}
            for n, drafts, num, nxt in rounds]


def library_run(rule: AcceptanceRule, target: TableLaw, draft: TableLaw, prompt: Sequence[int],
                k_max: int, max_tokens: int, seed: int) -> list[RunRecord]:
    """The run as `seeded_run` plays it, from the core functions."""
    def law(table: TableLaw) -> Callable[[list[int]], mx.array]:
        return lambda history: mx.array(table.row(history), dtype=mx.float32)

    rounds = seeded_run(law(target), law(draft), prompt, rule=rule, num_draft_tokens=k_max,
                        max_tokens=max_tokens, seed=seed)
    return [(r.position, r.draft_tokens, r.num_accepted, r.next_token) for r in rounds]


def first_difference(a: Sequence[object], b: Sequence[object]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def wrong_keyings_caught(rule: AcceptanceRule, right: list[RunRecord], target: TableLaw,
                         draft: TableLaw, prompt: Sequence[int], k: int, n: int,
                         seed: int) -> str | None:
    """How each wrong keying shows in the vector, or None when one that can change it doesn't.

    Accept and draft by absolute position change the drafts, hence the rounds, under every
    rule, and the stream under stochastic and block; greedy and sampler-match emit the same
    stream whatever the drafts (checked here). The target's draw by round changes the stream
    of every rule that draws (all but greedy).
    """
    absolute, _ = oracle_run(rule, target, draft, prompt, k, n, seed, absolute_keying)
    by_round, _ = oracle_run(rule, target, draft, prompt, k, n, seed, sample_by_round_keying)
    tokens, drafts_only = run_tokens(right), rule in (AcceptanceRule.GREEDY_ARGMAX,
                                                      AcceptanceRule.SAMPLER_MATCH)
    if drafts_only and run_tokens(absolute) != tokens:
        raise GenerationError(f"{rule.value}: the drafts' keying moved the emitted stream")
    if absolute == right or (not drafts_only and run_tokens(absolute) == tokens):
        return None
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        if run_tokens(by_round) != tokens:
            raise GenerationError("greedy-argmax read a SAMPLE uniform")
        return (f"accept and draft keyed by absolute position change round "
                f"{first_difference(absolute, right)}")
    if run_tokens(by_round) == tokens:
        return None
    where = (f"round {first_difference(absolute, right)}" if drafts_only
             else f"token {first_difference(run_tokens(absolute), tokens)}")
    return (f"accept and draft keyed by absolute position change {where}; the target's draw "
            f"keyed by round changes token {first_difference(run_tokens(by_round), tokens)}")


SEEDED_RUN_CASES = (
    # (k, context_length, vocab_size, max_tokens)
    (2, 1, 3, 10),
    (3, 2, 4, 12),
    (1, 1, 4, 8),
)


def seeded_run_vectors() -> list[Vector]:
    palettes = {size: round_tripping_rows(size) for size in (3, 4)}
    out = []
    for r_index, rule in enumerate(RUN_RULES):
        for c_index, (k, context_length, size, n) in enumerate(SEEDED_RUN_CASES):
            out.append(searched_run(rule, r_index, c_index, k, context_length, palettes[size], n))
    out += edge_runs()
    return out


def searched_run(rule: AcceptanceRule, r_index: int, c_index: int, k: int,
                 context_length: int, palette: list[Row], n: int) -> Vector:
    """The first pseudo-random run (laws and seed) that float32 decides robustly and that
    both wrong keyings that can change it do change."""
    rng = Lcg(seed_of(11, r_index, c_index))
    for _ in range(500):
        target = random_law(rng, palette, context_length)
        # A drafter that often agrees with the target, so that rounds accept drafts.
        draft = TableLaw(context_length, [row if rng.below(2) == 0
                                          else palette[rng.below(len(palette))]
                                          for row in target.rows])
        prompt = [rng.below(len(palette[0])) for _ in range(context_length + 1)]
        seed = rng.below(1 << 31) * (1 << 32) + rng.below(1 << 31)
        right, robust = oracle_run(rule, target, draft, prompt, k, n, seed, spec_keying)
        if not robust:
            continue
        caught = wrong_keyings_caught(rule, right, target, draft, prompt, k, n, seed)
        if caught is None:
            continue
        name = f"{slug(rule)}_k{k}_v{len(palette[0])}_context{context_length}"
        context = "the last token" if context_length == 1 else "the last two tokens"
        note = f"{len(right)} rounds; laws of {context}; {caught}"
        return run_vector(name, note, rule, target, draft, prompt, k, n, seed)
    raise GenerationError(f"no seeded run found for {rule.value}, case {c_index}")


def run_vector(name: str, note: str, rule: AcceptanceRule, target: TableLaw, draft: TableLaw,
               prompt: list[int], k: int, n: int, seed: int) -> Vector:
    for law in (target, draft):
        for row in law.rows:
            logits = mx.log(mx.array(row, dtype=mx.float32))
            if floats(effective_token_distribution(logits, SamplerConfig())) != row:
                raise GenerationError(f"seeded_run/{name}: softmax(log {row}) is not {row}")
    right, robust = oracle_run(rule, target, draft, prompt, k, n, seed, spec_keying)
    if not robust:
        raise GenerationError(f"seeded_run/{name}: float32 may not reproduce the run")
    check_equal(f"seeded_run/{name}", library_run(rule, target, draft, prompt, k, n, seed), right)
    return vector(name, note, {
        "rule": rule.value, "target_law": target.encode(), "draft_law": draft.encode(),
        "prompt": id_list(prompt), "num_draft_tokens": k, "max_tokens": n, "seed": seed,
    }, {"tokens": id_list(run_tokens(right)), "rounds": encode_rounds(right)}, 0.0)


def edge_runs() -> list[Vector]:
    """Hand-written runs: a single token, and the greedy last step."""
    flat = TableLaw(1, [[0.5, 0.25, 0.25]] * 3)
    tied = TableLaw(1, [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])
    s, g = AcceptanceRule.STOCHASTIC, AcceptanceRule.GREEDY_ARGMAX
    # A seed whose last step would draw the tie's higher id: only the argmax emits the lower.
    seed = next(seed for seed in range(1000)
                if last_draw_is_not_the_argmax(tied, flat, [0], 2, 4, seed))
    return [
        run_vector("one_token_is_a_target_draw",
                   "max_tokens = 1: no drafts; the target draws position 0 with the SAMPLE "
                   "uniform of position 0", s, tied, flat, [0], 2, 1, 1234),
        run_vector("greedy_last_step_is_the_argmax",
                   "the run's last step (k = 0) under greedy-argmax emits the argmax of p, the "
                   "lowest id of the tie; a draw with its SAMPLE uniform would emit the other",
                   g, tied, flat, [0], 2, 4, seed),
    ]


def last_draw_is_not_the_argmax(target: TableLaw, draft: TableLaw, prompt: list[int], k: int,
                                n: int, seed: int) -> bool:
    rounds, _ = oracle_run(AcceptanceRule.GREEDY_ARGMAX, target, draft, prompt, k, n, seed,
                           spec_keying)
    last = rounds[-1]
    if last[1]:
        return False  # the run must end on a k = 0 step
    history = [*prompt, *run_tokens(rounds[:-1])]
    p = rational(target.row(history))
    return oracle_sample(p, oracle_position_uniform(seed, last[0], 1)) != oracle_argmax(p)


def seeded_run_error_cases() -> list[ErrorCase]:
    t, v = "TypeError", "ValueError"
    return [
        ("num_draft_tokens_zero", "a round drafts k >= 1 tokens", {"num_draft_tokens": 0}, v,
         "num_draft_tokens"),
        ("num_draft_tokens_bool", "a bool is not a count", {"num_draft_tokens": True}, t,
         "num_draft_tokens"),
        ("max_tokens_negative", "max_tokens >= 0", {"max_tokens": -1}, v, "max_tokens"),
        ("seed_beyond_64_bits", "seeds lie in [0, 2**64)", {"seed": 2**64}, v, "seed"),
        ("prompt_empty", "a run continues a prompt of at least one token", {"prompt": []}, v,
         "prompt"),
    ]


def decode_law(value: Json) -> Any:
    """A table law from JSON, as a function of the history (for the error replays)."""
    if not isinstance(value, dict):
        raise GenerationError(f"a law is an object, got {value!r}")
    context_length, rows = value["context_length"], value["rows"]
    assert isinstance(context_length, int) and isinstance(rows, list)
    table = TableLaw(context_length, [[float(x) for x in row if isinstance(x, int | float)]
                                      for row in rows if isinstance(row, list)])
    return lambda history: mx.array(table.row(history), dtype=mx.float32)
