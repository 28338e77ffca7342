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

Drafts without replacement (RSD) have no closed form here (a sum over the draw orders) and
no column. Every figure is computed exactly from the models' float32 laws; nothing is
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
             "| n | chain (sum min) | RRS, n i.i.d. | top-n candidates | alpha* |",
             "| - | --------------- | ------------- | ---------------- | ------ |"]
    chain = mx.minimum(p, q).sum(axis=-1).mean().item()
    order = mx.argsort(-q, axis=-1)
    for n in WIDTHS:
        rrs = mx.stack([iid_siblings_acceptance(p[i], q[i], n) for i in range(p.shape[0])])
        ceiling = mx.stack([multi_draft_ceiling(p[i], q[i], n) for i in range(p.shape[0])])
        top = mx.take_along_axis(p, order[:, :n], axis=-1).sum(axis=-1)
        mx.eval(rrs, ceiling, top)
        lines.append(f"| {n} | {chain:.4f} | {rrs.mean().item():.4f} | "
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
