"""What top-p's sort costs a speculative round's sampling and verification, at a real vocabulary.

Run from the repository root:

    python benchmarks/top_p.py [--vocab 128256] [-k 4] [--repeats 30]

Top-p is the one filter `effective_token_distribution` computes with a full sort over the
vocabulary (top-k takes `mx.topk`, min-p a max). A round samples k drafts (one row each)
and verifies k + 1 target rows, so at V = 128,256 it sorts k + k + 1 rows of 128k. This
script times, on the default device, each filter's rows alone and the fused path's round
(k draft steps and one verification, stochastic rule) with each filter, every piece
evaluated and synchronised alone, medians over `--repeats`: what top-p adds is the
difference between its row and the unfiltered one. Whether that dominates a round is a
question for the same device's forwards (`benchmarks/round_anatomy.py`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from importlib.metadata import version
from pathlib import Path

import mlx.core as mx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "impl")]

from specaccept import SamplerConfig, effective_token_distribution  # noqa: E402
from specaccept.cli.options import blas_in_use  # noqa: E402
from specaccept.core.acceptance import AcceptanceRule  # noqa: E402
from specaccept.shell.fused import FusedSampler  # noqa: E402


def _ms(build: Callable[[], object], repeats: int) -> float:
    """Median ms to build and evaluate `build()` (an array or a tuple of them), after two
    warm-up calls."""
    samples = []
    for _ in range(repeats + 2):
        start = time.perf_counter()
        mx.eval(build())
        samples.append(time.perf_counter() - start)
    return 1e3 * statistics.median(samples[2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128_256)
    parser.add_argument("-k", "--num-draft-tokens", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    vocab, k = args.vocab, args.num_draft_tokens
    # Logits spread like a language model's (a few strong tokens, a long tail).
    key_rows, key_draft = mx.random.split(mx.random.key(0))
    rows = 4.0 * mx.random.normal((k + 1, vocab), key=key_rows)
    draft_logits = 4.0 * mx.random.normal((vocab,), key=key_draft)
    tokens = mx.zeros((k,), dtype=mx.int32)
    uniforms = mx.full((k + 1, 2), 0.5, dtype=mx.float32)
    u = mx.array(0.5, dtype=mx.float32)
    mx.eval(rows, draft_logits)
    configs = {
        "no filter": SamplerConfig(temperature=1.0),
        "top-k 50": SamplerConfig(temperature=1.0, top_k=50),
        "min-p 0.05": SamplerConfig(temperature=1.0, min_p=0.05),
        "top-p 0.9": SamplerConfig(temperature=1.0, top_p=0.9),
    }
    print(f"device={mx.default_device()} mlx={version('mlx')} BLAS: {blas_in_use()}; "
          f"V={vocab:,} k={k} repeats={args.repeats}\n")
    print("ms, each piece evaluated and synchronised alone (medians). The round's sampling "
          f"and verification: {k} fused draft steps and one fused stochastic verification "
          f"of {k + 1} rows, timed one by one and summed.\n")
    print(f"| filter | 1 row | {k + 1} rows | `mx.sort` share of {k + 1} rows "
          "| round's sampling and verification |")
    print("|---|---:|---:|---:|---:|")
    sort_ms = _ms(lambda: mx.sort(-rows, axis=-1), args.repeats)
    for label, config in configs.items():
        one = _ms(partial(effective_token_distribution, draft_logits, config), args.repeats)
        many = _ms(partial(effective_token_distribution, rows, config), args.repeats)
        fused = FusedSampler(config, config, compiled=False)
        q_rows = effective_token_distribution(rows[:k], config)
        mx.eval(q_rows)
        step = _ms(partial(fused.draft_step, draft_logits, u), args.repeats)
        verify = _ms(partial(fused.verify_round, AcceptanceRule.STOCHASTIC, rows, q_rows,
                             tokens, uniforms), args.repeats)
        share = f"{sort_ms / many:.0%}" if config.top_p < 1.0 else ""
        print(f"| {label} | {one:.2f} | {many:.2f} | {share} | {k * step + verify:.2f} |",
              flush=True)
    print(f"\n`mx.sort` alone over {k + 1} rows: {sort_ms:.2f} ms.")


if __name__ == "__main__":
    main()
