"""Short seeded runs under a uniform keying: the generator's counts, and their exact law.

A keying names the uniform every decision of a round reads (`RoundKeys`, as
`specaccept.core.randomness.round_keys` does for the library). The exact law of a run's
first tokens under any keying is `proofs.exact_runs.run_law`'s, the enumerator lemma 10's
checks use: with the library's `round_keys` it is the target's; with a wrong keying it is
the law a generator keyed that way emits, which gives a test's power exactly.

`generator_counts` runs the real `SpeculativeGenerator` once per seed, optionally with
its `round_uniforms` replaced by the values of a wrong keying, and counts the runs.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

# The repository root, for `proofs`, when this file runs as a script (or is imported by one).
sys.path.append(str(Path(__file__).resolve().parents[1]))

from proofs.exact_runs import Dist, Keying, Tokens, position_keyed, run_law, target_law

import specaccept.shell.generator as generator_module
from specaccept import AcceptanceRule, SamplerConfig
from specaccept.core.randomness import RoundUniforms, round_keys, uniform
from specaccept.shell.generator import RuleChoice, SpeculativeGenerator
from synthetic_models import LogitsFn, SyntheticLM

__all__ = [
    "SMALL_K",
    "SMALL_LENGTH",
    "SMALL_PROMPT",
    "SMALL_VOCAB",
    "chi_square",
    "generator_counts",
    "keyed_round_uniforms",
    "noncentral_power",
    "position_keyed",
    "sequences",
    "small_drafter",
    "small_target",
]


def keyed_round_uniforms(keying: Keying) -> Callable[[int, int, int], RoundUniforms]:
    """A drop-in for `round_uniforms` that reads the keys `keying` names."""

    def round_uniforms(seed: int, round_position: int, num_drafts: int) -> RoundUniforms:
        keys = keying(round_position, num_drafts)
        return RoundUniforms([uniform(seed, key) for key in keys.draft],
                             [[uniform(seed, key) for key in row] for row in keys.verify])

    return round_uniforms


# --- the generator's counts and the chi-square -----------------------------------------


def sequences(vocab: int, length: int) -> list[Tokens]:
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


def chi_square(counts: npt.NDArray[np.int64], law: Mapping[Tokens, Fraction], vocab: int,
               length: int) -> float:
    """Pearson's statistic of `counts` against `law`; infinite if a run of no mass occurs."""
    probabilities = np.array([float(law.get(run, 0)) for run in sequences(vocab, length)])
    possible = probabilities > 0
    if np.any(counts[~possible] > 0):
        return float("inf")
    expected = counts.sum() * probabilities[possible]
    return float(((counts[possible] - expected) ** 2 / expected).sum())


def noncentral_power(
    null: Mapping[Tokens, Fraction], wrong: Mapping[Tokens, Fraction], seeds: int,
    alpha: float,
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


# --- the recorded runs -----------------------------------------------------------------

SMALL_VOCAB, SMALL_K, SMALL_LENGTH, SMALL_PROMPT = 2, 2, 3, [0]
"""The smallest setup on which position keys bias block verification: target logits (0, 0),
drafter logits (ln 3, 0), temperature 1, k = 2, three tokens."""


def small_target(context: Tokens) -> Dist:
    """The smallest setup's target law, whatever the context: softmax of (0, 0)."""
    del context
    return (Fraction(1, 2), Fraction(1, 2))


def small_drafter(context: Tokens) -> Dist:
    """The smallest setup's drafter law, whatever the context: softmax of (ln 3, 0)."""
    del context
    return (Fraction(3, 4), Fraction(1, 4))


def _main() -> None:
    import math
    import platform
    import time

    import mlx.core as mx

    from synthetic_models import constant_logits

    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 24_000
    alpha = 1e-4
    target, drafter = constant_logits([0.0, 0.0]), constant_logits([math.log(3.0), 0.0])

    null = target_law(small_target, tuple(SMALL_PROMPT), SMALL_LENGTH)
    small_setup = (small_target, small_drafter, SMALL_PROMPT, SMALL_K, SMALL_LENGTH)
    _, power = noncentral_power(null, run_law(AcceptanceRule.BLOCK, *small_setup, position_keyed),
                                seeds, alpha)
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
        law = run_law(AcceptanceRule(rule), *small_setup, keying)
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
