"""Acceptance at one node on the demo pair: a single draft against the multi-draft schemes.

Run from the repository root:

    python benchmarks/tree_acceptance.py [--positions 2048] [--temperatures 1.0 0.7]

The demo target and drafter run forwards over `--positions` characters of the held-out
tenth of their corpus (in windows of 256, their training context); at every position the
target's law p and the drafter's q (`effective_token_distribution` at the temperature, no
other filter) give, averaged over the positions and for n drafts at the node:

- chain: one draft verified by modified rejection sampling, sum min(p, q) (with n = 1 this
  is also what block verification accepts in a round of one draft; block verification's
  gain is over a round, not at a node, so it has no column here);
- RRS: n i.i.d. drafts under SpecInfer's rule, `iid_siblings_acceptance`;
- top-n: n deterministic candidates (the n most likely under q) under the one-hot rule,
  the target's mass on them;
- alpha*: the ceiling of any lossless verifier of n i.i.d. drafts, `multi_draft_ceiling`.

- RSD, n = 2: two drafts without replacement under recursive rejection with q renormalised,
  ``sum min(p, q) + sum_x0 (q(x0) - p(x0))_+ sum_{x1 != x0} min(q(x1) / (1 - q(x0)), r1(x1))``
  with r1 the residual of p after q (it does not depend on x0); checked at the first
  positions against the sum over every ordered pair of drafts. Larger n: no column.

Every figure is computed exactly from the models' float32 laws; nothing is
sampled, so a rerun on the same machine prints the same table.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import mlx.core as mx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "impl")]

from specaccept import (  # noqa: E402
    SamplerConfig,
    effective_token_distribution,
    iid_siblings_acceptance,
    load_pair,
    multi_draft_ceiling,
)
from specaccept.demo import corpus_path  # noqa: E402

WIDTHS = (1, 2, 3, 4)
CHECKED_POSITIONS = 4


def rsd_two(p: mx.array, q: mx.array) -> mx.array:
    """`[P]`: what a node accepts with two drafts without replacement, per position."""
    first = mx.minimum(p, q).sum(axis=-1)
    excess = mx.maximum(p - q, 0.0)
    mass = excess.sum(axis=-1, keepdims=True)
    r1 = mx.where(mass > 0, excess / mx.where(mass > 0, mass, 1.0), p)
    left = mx.maximum(1.0 - q, 1e-30)[..., :, None]  # [P, x0, 1]
    second = mx.minimum(q[..., None, :] / left, r1[..., None, :])  # [P, x0, x1]
    vocab = p.shape[-1]
    second = mx.where(mx.eye(vocab, dtype=mx.bool_), 0.0, second).sum(axis=-1)
    return first + (mx.maximum(q - p, 0.0) * second).sum(axis=-1)


def rsd_two_by_enumeration(p: list[float], q: list[float]) -> float:
    """The same, summed over every ordered pair (x0, x1) of drafts, in float64."""
    total = 0.0
    for x0, q0 in enumerate(q):
        if q0 == 0:
            continue
        a0 = min(1.0, p[x0] / q0)
        total += q0 * a0
        r = [max(a - b, 0.0) for a, b in zip(p, q, strict=True)]
        mass = sum(r)
        r = [x / mass for x in r] if mass > 0 else list(p)
        for x1, q1 in enumerate(q):
            if x1 == x0 or q1 == 0 or r[x1] == 0:
                continue
            renormalised = q1 / (1.0 - q0)
            total += q0 * (1 - a0) * renormalised * min(1.0, r[x1] / renormalised)
    return total


WINDOW = 256
"""Characters per forward: the context the demo pair was trained and evaluated on."""


def laws(positions: int, temperature: float) -> tuple[mx.array, mx.array]:
    """`[positions, V]` target and drafter laws on the held-out text, in windows of 256."""
    pair = load_pair()
    text = corpus_path().read_text(encoding="utf-8")
    held_out = text[len(text) - len(text) // 10:]
    tokens = pair.tokenizer.encode(held_out)[: positions]
    config = SamplerConfig(temperature=temperature)
    assert pair.drafter is not None
    rows: list[list[mx.array]] = [[], []]
    for start in range(0, len(tokens), WINDOW):
        batch = mx.array([tokens[start:start + WINDOW]])
        for side, model in enumerate((pair.target, pair.drafter)):
            logits = model(batch)[0].astype(mx.float32)
            rows[side].append(effective_token_distribution(logits, config, []))
    return mx.concatenate(rows[0]), mx.concatenate(rows[1])


def table(positions: int, temperature: float) -> list[str]:
    p, q = laws(positions, temperature)
    lines = [f"temperature {temperature}, {p.shape[0]} positions, V = {p.shape[1]}:", "",
             "| n | chain (sum min) | RRS, n i.i.d. | RSD, n without replacement | "
             "top-n candidates | alpha* |",
             "| - | --------------- | ------------- | -------------------------- | "
             "---------------- | ------ |"]
    chain = mx.minimum(p, q).sum(axis=-1).mean().item()
    rsd = rsd_two(p, q)
    for i in range(min(CHECKED_POSITIONS, p.shape[0])):
        alone = rsd_two_by_enumeration(p[i].tolist(), q[i].tolist())  # type: ignore[arg-type]
        if abs(rsd[i].item() - alone) > 1e-5:
            raise SystemExit(f"RSD at position {i}: {rsd[i].item()} by formula, {alone} summed")
    order = mx.argsort(-q, axis=-1)
    for n in WIDTHS:
        rrs = mx.stack([iid_siblings_acceptance(p[i], q[i], n) for i in range(p.shape[0])])
        ceiling = mx.stack([multi_draft_ceiling(p[i], q[i], n) for i in range(p.shape[0])])
        top = mx.take_along_axis(p, order[:, :n], axis=-1).sum(axis=-1)
        mx.eval(rrs, ceiling, top)
        wor = {1: f"{chain:.4f}", 2: f"{rsd.mean().item():.4f}"}.get(n, "")
        lines.append(f"| {n} | {chain:.4f} | {rrs.mean().item():.4f} | {wor} | "
                     f"{top.mean().item():.4f} | {ceiling.mean().item():.4f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--positions", type=int, default=2048)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.7])
    args = parser.parse_args()
    for temperature in args.temperatures:
        print("\n".join(table(args.positions, temperature)))
        print()


if __name__ == "__main__":
    main()
