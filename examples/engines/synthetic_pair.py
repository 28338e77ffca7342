"""The engines' recorders' synthetic target/draft pair: rows that depend on the history.

No model runs in the engines' recorders; this pair stands in for one, small enough for
Triton's interpreter and history-dependent as a language model is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["HistoryPair"]


class HistoryPair:
    """A target and a drafter whose logits are a function of the last two tokens.

    Each context (its last two tokens) seeds a generator that draws two standard normal
    rows z and w; the target's logits are ``scale * z`` and the drafter's
    ``scale * (rho * z + sqrt(1 - rho^2) * w)``, so the pair agree in part and the rows
    depend on the history, as a language model's do.
    """

    def __init__(self, vocab_size: int, seed: int, scale: float = 2.5, rho: float = 0.8):
        self.vocab_size, self.seed, self.scale, self.rho = vocab_size, seed, scale, rho

    def rows(self, contexts: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        target = np.empty((len(contexts), self.vocab_size), dtype=np.float32)
        draft = np.empty_like(target)
        for row, context in enumerate(contexts):
            rng = np.random.default_rng([self.seed, *(int(t) + 1 for t in context[-2:])])
            z, w = rng.standard_normal((2, self.vocab_size))
            target[row] = self.scale * z
            draft[row] = self.scale * (self.rho * z + math.sqrt(1 - self.rho**2) * w)
        return target, draft
