"""Show that the converted demo pair computes mlx-lm's logits, within a stated tolerance.

Runs both implementations of each demo model on the same sequences (held-out Shakespeare,
every position of each) and prints the largest absolute difference of the logits and of
the probabilities at temperature 1. This script imports mlx-lm beside torch, to compare
them; the adapter (``hf_trace.py``) imports neither mlx nor specaccept.

    python examples/hf_adapter/hf_compare_logits.py [--sequences 8] [--length 128]

Exits 1 if a logit differs by more than ``--tolerance``.
"""

from __future__ import annotations

import argparse
import sys

import mlx.core as mx
import numpy as np
import torch
from hf_convert import DEMO_WEIGHTS, load_demo_model, prompt_ids
from mlx_lm import load as mlx_load


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    result: np.ndarray = shifted / shifted.sum(axis=-1, keepdims=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    args = parser.parse_args(argv)
    sequences = prompt_ids(args.sequences, args.length, start=12_345)
    worst = 0.0
    for role in ("target", "drafter"):
        hf_model = load_demo_model(DEMO_WEIGHTS / role)
        mlx_model = mlx_load(str(DEMO_WEIGHTS / role))[0]
        logit_diff = prob_diff = 0.0
        for ids in sequences:
            with torch.no_grad():
                hf = hf_model(torch.tensor([ids])).logits[0].float().numpy()
            ref = np.array(mlx_model(mx.array([ids]))[0].astype(mx.float32))
            logit_diff = max(logit_diff, float(np.abs(hf - ref).max()))
            prob_diff = max(prob_diff, float(np.abs(softmax(hf) - softmax(ref)).max()))
        worst = max(worst, logit_diff)
        print(f"{role}: {len(sequences)} sequences x {args.length} positions x "
              f"{hf_model.config.vocab_size} logits: max |logit difference| = {logit_diff:.3g}, "
              f"max |probability difference| (T = 1) = {prob_diff:.3g}")
    verdict = "within" if worst <= args.tolerance else "OUTSIDE"
    print(f"{verdict} the tolerance {args.tolerance:g}")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
