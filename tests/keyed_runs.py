"""Short seeded runs under a uniform keying: their exact law, and the generator's counts.

A keying names the uniform every decision of a round reads (`RoundKeys`, as
`specaccept.core.randomness.round_keys` does for the library). `run_law` enumerates
every run of a few tokens exactly, in rationals: each uniform is tracked as the
interval its earlier reads confined it to, so a key that two decisions read (the bug
of a wrong keying) is conditioned, not redrawn. With the library's own `round_keys`
the law must be the target's (a check of the enumerator); with a wrong keying it is
the law a generator keyed that way emits, which gives a test's power exactly.

`generator_counts` runs the real `SpeculativeGenerator` once per seed, optionally with
its `round_uniforms` replaced by the values of a wrong keying, and counts the runs.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

import specaccept.shell.generator as generator_module
from specaccept import SamplerConfig
from specaccept.core.randomness import (
    ACCEPT,
    DRAFT,
    SAMPLE,
    RoundKeys,
    RoundUniforms,
    UniformKey,
    round_keys,
    uniform,
)
from specaccept.shell.generator import RuleChoice, SpeculativeGenerator
from synthetic_models import LogitsFn, SyntheticLM

__all__ = [
    "SMALL_K",
    "SMALL_LENGTH",
    "SMALL_P",
    "SMALL_PROMPT",
    "SMALL_Q",
    "SMALL_VOCAB",
    "Dist",
    "Keying",
    "LawFn",
    "accept_keyed_by_offset",
    "chi_square",
    "generator_counts",
    "keyed_round_uniforms",
    "noncentral_power",
    "position_keyed",
    "run_law",
    "sample_keyed_by_offset",
    "sequences",
    "target_run_law",
]

Dist = tuple[Fraction, ...]
LawFn = Callable[[tuple[int, ...]], Dist]
"""The law of the next token given the whole context (prompt, emitted tokens, drafts)."""
Keying = Callable[[int, int], RoundKeys]
"""(round start, number of drafts) -> the keys the round reads."""
Constraints = dict[UniformKey, tuple[Fraction, Fraction]]


# --- wrong keyings ---------------------------------------------------------------------


def position_keyed(round_position: int, num_drafts: int) -> RoundKeys:
    """The keying before round keys: every slot keyed by absolute output position.

    Row i of a round starting at n reads (ACCEPT, n + i) and (SAMPLE, n + i), draft j
    reads (DRAFT, n + j): a round that keeps tau < k drafts leaves the uniforms of
    offsets > tau, which its tau was conditioned on, to the next round.
    """
    draft = [UniformKey(DRAFT, round_position + j, None) for j in range(num_drafts)]
    verify = [[UniformKey(ACCEPT, round_position + i, None),
               UniformKey(SAMPLE, round_position + i, None)] for i in range(num_drafts + 1)]
    return RoundKeys(draft, verify)


def accept_keyed_by_offset(round_position: int, num_drafts: int) -> RoundKeys:
    """The library's keys, except that the accept tests forget the round: (ACCEPT, 0, i).

    Every round re-reads the accept uniforms of the first, which its own past
    accept decisions conditioned: a bug position keying does not have, and one that
    breaks the token-by-token rules too.
    """
    keys = round_keys(round_position, num_drafts)
    verify = [[UniformKey(ACCEPT, 0, i), row[1]] for i, row in enumerate(keys.verify)]
    return RoundKeys(keys.draft, verify)


def keyed_round_uniforms(keying: Keying) -> Callable[[int, int, int], RoundUniforms]:
    """A drop-in for `round_uniforms` that reads the keys `keying` names."""

    def round_uniforms(seed: int, round_position: int, num_drafts: int) -> RoundUniforms:
        keys = keying(round_position, num_drafts)
        return RoundUniforms([uniform(seed, key) for key in keys.draft],
                             [[uniform(seed, key) for key in row] for row in keys.verify])

    return round_uniforms


# --- the exact law ---------------------------------------------------------------------


Pieces = list[tuple[int, Fraction, Fraction]]
"""(outcome, lo, hi): the outcome a uniform in [lo, hi) decides."""


def _draw_pieces(weights: Sequence[Fraction]) -> Pieces:
    """`sample_from_distribution`'s inverse CDF: token x on [C(x-1), C(x)) / total."""
    total = sum(weights, Fraction(0))
    pieces, below = [], Fraction(0)
    for token, weight in enumerate(weights):
        if weight > 0:
            pieces.append((token, below / total, (below + weight) / total))
            below += weight
    return pieces


def _test_pieces(threshold: Fraction) -> Pieces:
    """Outcome 1 (pass) when u <= threshold, 0 otherwise."""
    if threshold <= 0:
        return [(0, Fraction(0), Fraction(1))]
    if threshold >= 1:
        return [(1, Fraction(0), Fraction(1))]
    return [(1, Fraction(0), threshold), (0, threshold, Fraction(1))]


def _read(
    constraints: Constraints, key: UniformKey, pieces: Pieces
) -> Iterator[tuple[int, Fraction, Constraints]]:
    """Every outcome of reading `key`, with its probability given the earlier reads."""
    lo, hi = constraints.get(key, (Fraction(0), Fraction(1)))
    for outcome, a, b in pieces:
        low, high = max(a, lo), min(b, hi)
        if high > low:
            yield outcome, (high - low) / (hi - lo), {**constraints, key: (low, high)}


Branch = tuple[tuple[int, ...], Fraction, Constraints]


def _drafts(
    drafter: LawFn, context: tuple[int, ...], keys: Sequence[UniformKey],
    constraints: Constraints,
) -> Iterator[Branch]:
    if not keys:
        yield (), Fraction(1), constraints
        return
    for token, weight, after in _read(constraints, keys[0], _draw_pieces(drafter(context))):
        for rest, more, final in _drafts(drafter, (*context, token), keys[1:], after):
            yield (token, *rest), weight * more, final


def _token_level(
    rule: RuleChoice, p: list[Dist], q: list[Dist], drafts: tuple[int, ...],
    keys: RoundKeys, constraints: Constraints, i: int = 0,
) -> Iterator[Branch]:
    """Stochastic or sampler-match from row i on: the emitted block's tail."""
    k = len(drafts)
    accept_key, sample_key = keys.verify[i]
    if i == k:
        for token, weight, after in _read(constraints, sample_key, _draw_pieces(p[k])):
            yield (token,), weight, after
        return
    x = drafts[i]
    if rule == "sampler-match":
        for token, weight, after in _read(constraints, sample_key, _draw_pieces(p[i])):
            if token != x:
                yield (token,), weight, after
                continue
            for rest, more, final in _token_level(rule, p, q, drafts, keys, after, i + 1):
                yield (x, *rest), weight * more, final
        return
    for passed, weight, after in _read(constraints, accept_key, _test_pieces(p[i][x] / q[i][x])):
        if passed:
            for rest, more, final in _token_level(rule, p, q, drafts, keys, after, i + 1):
                yield (x, *rest), weight * more, final
            continue
        residual = [max(a - b, Fraction(0)) for a, b in zip(p[i], q[i], strict=True)]
        for token, more, final in _read(after, sample_key, _draw_pieces(residual)):
            yield (token,), weight * more, final


def _block(
    p: list[Dist], q: list[Dist], drafts: tuple[int, ...], keys: RoundKeys,
    constraints: Constraints,
) -> Iterator[Branch]:
    """Block verification as `verify_drafts_jointly` states it, in rationals."""
    k = len(drafts)
    weights = [Fraction(1)]
    for i, x in enumerate(drafts):
        ratio = p[i][x] / q[i][x]
        weights.append(min(Fraction(1), weights[-1] * ratio))
    excess = [[max(weights[i] * a - b, Fraction(0)) for a, b in zip(p[i], q[i], strict=True)]
              for i in range(k)]
    keep = []
    for i in range(1, k):
        mass = sum(excess[i], Fraction(0))
        denominator = mass + 1 - weights[i]
        keep.append(mass / denominator if denominator > 0 else Fraction(1))
    keep.append(weights[k])

    def tests(
        i: int, passed: int, state: Constraints
    ) -> Iterator[tuple[int, Fraction, Constraints]]:
        if i == k:
            yield passed, Fraction(1), state
            return
        for outcome, weight, after in _read(state, keys.verify[i][0], _test_pieces(keep[i])):
            for tau, more, final in tests(i + 1, i + 1 if outcome else passed, after):
                yield tau, weight * more, final

    for tau, weight, after in tests(0, 0, constraints):
        row = list(p[k]) if tau == k else (excess[tau] if sum(excess[tau]) > 0 else list(p[tau]))
        for token, more, final in _read(after, keys.verify[tau][1], _draw_pieces(row)):
            yield (*drafts[:tau], token), weight * more, final


def run_law(
    rule: RuleChoice, target: LawFn, drafter: LawFn, prompt: Sequence[int], k: int,
    length: int, keying: Keying = round_keys,
) -> dict[tuple[int, ...], Fraction]:
    """The exact law of a run's first `length` tokens, rounds as the generator plays them.

    A round at output position n drafts min(k, length - n - 1) tokens; with none left
    to draft, one target step reads the round's row 0 sample key.
    """
    law: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
    start = tuple(prompt)

    def play(emitted: tuple[int, ...], constraints: Constraints, weight: Fraction) -> None:
        n = len(emitted)
        if n >= length:
            law[emitted[:length]] += weight
            return
        num_drafts = min(k, length - n - 1)
        keys = keying(n, num_drafts)
        context = start + emitted
        if num_drafts == 0:
            for token, more, after in _read(constraints, keys.verify[0][1],
                                            _draw_pieces(target(context))):
                play((*emitted, token), after, weight * more)
            return
        for drafts, w_draft, drafted in _drafts(drafter, context, keys.draft, constraints):
            p = [target(context + drafts[:i]) for i in range(num_drafts + 1)]
            q = [drafter(context + drafts[:i]) for i in range(num_drafts)]
            blocks = (_block(p, q, drafts, keys, drafted) if rule == "block"
                      else _token_level(rule, p, q, drafts, keys, drafted))
            for block, w_verify, after in blocks:
                play(emitted + block, after, weight * w_draft * w_verify)

    play((), {}, Fraction(1))
    return dict(law)


def target_run_law(
    target: LawFn, prompt: Sequence[int], length: int
) -> dict[tuple[int, ...], Fraction]:
    """The law of `length` tokens sampled from the target alone."""
    law: dict[tuple[int, ...], Fraction] = {}
    vocab = len(target(tuple(prompt)))
    for run in itertools.product(range(vocab), repeat=length):
        probability, context = Fraction(1), tuple(prompt)
        for token in run:
            probability *= target(context)[token]
            context = (*context, token)
        if probability > 0:
            law[run] = probability
    return law


# --- the generator's counts and the chi-square -----------------------------------------


def sequences(vocab: int, length: int) -> list[tuple[int, ...]]:
    """Every run of `length` tokens, in the order the counts are kept."""
    return list(itertools.product(range(vocab), repeat=length))


def generator_counts(
    rule: RuleChoice, target: LogitsFn, drafter: LogitsFn, vocab: int, prompt: list[int],
    k: int, length: int, seeds: range, *, keying: Keying | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> npt.NDArray[np.int64]:
    """How often each run of `length` tokens comes out of the generator over `seeds`.

    With `keying`, the generator's `round_uniforms` is replaced (through `monkeypatch`)
    by one that reads the keys `keying` names: the generator itself, keyed wrongly.
    """
    if keying is not None:
        assert monkeypatch is not None
        monkeypatch.setattr(generator_module, "round_uniforms", keyed_round_uniforms(keying))
    config = SamplerConfig(temperature=1.0)
    generator = SpeculativeGenerator(
        SyntheticLM(vocab, target), SyntheticLM(vocab, drafter), config, config,
        num_draft_tokens=k, rule=rule,
    )
    index = {run: i for i, run in enumerate(sequences(vocab, length))}
    counts = np.zeros(len(index), dtype=np.int64)
    for seed in seeds:
        run = tuple(token for block in generator.generate(prompt, length, seed=seed)
                    for token in block)
        counts[index[run]] += 1
    return counts


def chi_square(counts: npt.NDArray[np.int64], law: dict[tuple[int, ...], Fraction],
               vocab: int, length: int) -> float:
    """Pearson's statistic of `counts` against `law`; infinite if a run of no mass occurs."""
    probabilities = np.array([float(law.get(run, 0)) for run in sequences(vocab, length)])
    possible = probabilities > 0
    if np.any(counts[~possible] > 0):
        return float("inf")
    expected = counts.sum() * probabilities[possible]
    return float(((counts[possible] - expected) ** 2 / expected).sum())


def noncentral_power(
    null: dict[tuple[int, ...], Fraction], wrong: dict[tuple[int, ...], Fraction],
    seeds: int, alpha: float,
) -> tuple[float, float]:
    """(noncentrality, power): Pearson's test against `null` on runs drawn from `wrong`.

    The statistic is asymptotically noncentral chi-square with
    ``lambda = seeds * sum (wrong - null)^2 / null`` (cells of `null`; a wrong law
    that puts mass outside them is caught by the support alone).
    """
    cells = list(null)
    noncentrality = seeds * sum(float((wrong.get(c, 0) - null[c]) ** 2 / null[c]) for c in cells)
    dof = len(cells) - 1
    critical = float(stats.chi2.isf(alpha, dof))
    return noncentrality, float(stats.ncx2.sf(critical, dof, noncentrality))


def sample_keyed_by_offset(round_position: int, num_drafts: int) -> RoundKeys:
    """The library's keys, except that the target's draws forget the round: (SAMPLE, i).

    Every round re-reads the target-draw uniforms of the first round's offsets: the
    one bug of keying sampler-match can have, since its emitted tokens read nothing else.
    """
    keys = round_keys(round_position, num_drafts)
    verify = [[row[0], UniformKey(SAMPLE, i, None)] for i, row in enumerate(keys.verify)]
    return RoundKeys(keys.draft, verify)


# --- the recorded runs -----------------------------------------------------------------

SMALL_VOCAB, SMALL_K, SMALL_LENGTH, SMALL_PROMPT = 2, 2, 3, [0]
"""The smallest setup on which position keys bias block verification: target logits (0, 0),
drafter logits (ln 3, 0), temperature 1, k = 2, three tokens."""
SMALL_P: Dist = (Fraction(1, 2), Fraction(1, 2))
SMALL_Q: Dist = (Fraction(3, 4), Fraction(1, 4))


def _main() -> None:
    import math
    import platform
    import sys
    import time

    import mlx.core as mx

    from synthetic_models import constant_logits

    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 24_000
    alpha = 1e-4
    target, drafter = constant_logits([0.0, 0.0]), constant_logits([math.log(3.0), 0.0])

    def p_law(context: tuple[int, ...]) -> Dist:
        del context
        return SMALL_P

    def q_law(context: tuple[int, ...]) -> Dist:
        del context
        return SMALL_Q

    null = target_run_law(p_law, SMALL_PROMPT, SMALL_LENGTH)
    critical = float(stats.chi2.isf(alpha, len(null) - 1))
    print("Produced by:\n\n```sh\npython tests/keyed_runs.py" +
          (f" {seeds}" if len(sys.argv) > 1 else "") + "\n```\n")
    print(f"{platform.machine()}, {mx.default_device()}; `SpeculativeGenerator` (fast path), "
          "target logits (0, 0), drafter logits (ln 3, 0), temperature 1, k = 2, prompt [0], "
          f"the first 3 tokens of seeds 0..{seeds - 1}. Pearson's chi-square against the "
          f"target's law (1/8 each), 7 d.o.f., alpha = {alpha:g}: reject above "
          f"{critical:.2f}. Cells in the order 000, 001, ..., 111.\n")
    print("| rule | keying | exact law of the run (x 80) | counts | chi-square | verdict | "
          "chi-square vs its keying's exact law | power at this size vs position keys | "
          "seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    runs: list[tuple[RuleChoice, str, Keying]] = [
        ("block", "round keys (the library)", round_keys),
        ("block", "position keys", position_keyed),
        ("stochastic", "round keys (the library)", round_keys),
        ("sampler-match", "round keys (the library)", round_keys),
    ]
    for rule, label, keying in runs:
        law = run_law(rule, p_law, q_law, SMALL_PROMPT, SMALL_K, SMALL_LENGTH, keying)
        wrong = run_law("block", p_law, q_law, SMALL_PROMPT, SMALL_K, SMALL_LENGTH,
                        position_keyed)
        _, power = noncentral_power(null, wrong, seeds, alpha)
        start = time.perf_counter()
        with pytest.MonkeyPatch.context() as patch:
            counts = generator_counts(
                rule, target, drafter, SMALL_VOCAB, SMALL_PROMPT, SMALL_K, SMALL_LENGTH,
                range(seeds), keying=None if keying is round_keys else keying,
                monkeypatch=patch,
            )
        seconds = time.perf_counter() - start
        statistic = chi_square(counts, null, SMALL_VOCAB, SMALL_LENGTH)
        exact = " ".join(str(law.get(run, 0) * 80) for run in sequences(2, 3))
        own = chi_square(counts, law, SMALL_VOCAB, SMALL_LENGTH)
        power_cell = f"{power:.6f}" if rule == "block" else "n/a (lossless under both keyings)"
        print(f"| {rule} | {label} | {exact} | {' '.join(map(str, counts.tolist()))} | "
              f"{statistic:.2f} | {'reject' if statistic > critical else 'pass'} | "
              f"{own:.2f} | {power_cell} | {seconds:.0f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    _main()
