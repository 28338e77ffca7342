"""Random-weight model pairs with real shapes, built in memory: cost without downloads.

A speculative round's cost depends on the shapes (layers, widths, the vocabulary) and
the dtype, not on what the weights learned, so a Llama-shaped pair with random weights
times the round of a real pair of the same shapes. Its acceptance is another matter:
two independent random models agree far less than a trained drafter agrees with its
target, so acceptance rates, tokens per round and speedups measured on such a pair
describe that random pair, never a trained one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import mlx.core as mx

from specaccept.shell.loading import ModelPair

__all__ = ["RANDOM_PAIRS", "RandomPairPreset", "random_pair"]


@dataclass(frozen=True)
class RandomPairPreset:
    """The shapes of a target and a drafter (mlx-lm `llama.ModelArgs` fields) and a dtype."""

    description: str
    target: dict[str, Any]
    drafter: dict[str, Any]
    dtype: str


def _llama(**fields: Any) -> dict[str, Any]:
    return {"model_type": "llama", "rms_norm_eps": 1e-5, "rope_theta": 500000.0, **fields}


_LLAMA3_VOCAB = 128_256

RANDOM_PAIRS: dict[str, RandomPairPreset] = {
    "llama-3-8b-1b": RandomPairPreset(
        description="Llama-3.1-8B-shaped target, Llama-3.2-1B-shaped drafter, "
        f"vocabulary {_LLAMA3_VOCAB:,}, bfloat16 (about 16 GB + 2.5 GB of weights)",
        target=_llama(
            hidden_size=4096, num_hidden_layers=32, intermediate_size=14336,
            num_attention_heads=32, num_key_value_heads=8, head_dim=128,
            vocab_size=_LLAMA3_VOCAB, tie_word_embeddings=False,
        ),
        drafter=_llama(
            hidden_size=2048, num_hidden_layers=16, intermediate_size=8192,
            num_attention_heads=32, num_key_value_heads=8, head_dim=64,
            vocab_size=_LLAMA3_VOCAB, tie_word_embeddings=True,
        ),
        dtype="bfloat16",
    ),
    "small": RandomPairPreset(
        description="a small Llama-shaped pair for a CPU (4 + 1 layers, width 256 / 128, "
        "vocabulary 8,192, float32)",
        target=_llama(
            hidden_size=256, num_hidden_layers=4, intermediate_size=512,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=8192,
            tie_word_embeddings=False,
        ),
        drafter=_llama(
            hidden_size=128, num_hidden_layers=1, intermediate_size=256,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=8192,
            tie_word_embeddings=True,
        ),
        dtype="float32",
    ),
}
"""The presets `specaccept bench --random-pair` accepts, by name."""


def _randomise(model: Any, key: mx.array, dtype: mx.Dtype) -> None:
    """Give every weight a value drawn from `key`, in `dtype`, one tensor at a time.

    Matrices are uniform in ±1/sqrt(fan-in), as mlx's own Linear draws them, so the
    activations keep their scale through the layers; the norms keep their ones.
    Drawing from explicit keys leaves the global random state alone and makes the
    pair a function of the seed; evaluating tensor by tensor keeps the peak memory
    at the weights themselves.
    """
    from mlx.utils import tree_flatten, tree_unflatten

    leaves = cast(list[tuple[str, mx.array]], tree_flatten(model.parameters()))
    keys = mx.random.split(key, len(leaves))
    for index, (name, value) in enumerate(leaves):
        if value.ndim >= 2:
            bound = 1.0 / math.sqrt(value.shape[-1])
            value = mx.random.uniform(-bound, bound, value.shape, dtype=dtype, key=keys[index])
        else:
            value = value.astype(dtype)
        model.update(tree_unflatten([(name, value)]))
        mx.eval(value)


def _build(fields: dict[str, Any], key: mx.array, dtype: mx.Dtype) -> Any:
    from mlx_lm.models import llama

    model = llama.Model(llama.ModelArgs(**fields))
    _randomise(model, key, dtype)
    model.eval()
    return model


def random_pair(preset: str, *, seed: int = 0) -> ModelPair:
    """Build the preset's target and drafter with random weights; no tokenizer, no files.

    Raises:
        ValueError: `preset` is not a key of `RANDOM_PAIRS`.
    """
    if preset not in RANDOM_PAIRS:
        raise ValueError(
            f"random pair preset must be one of {sorted(RANDOM_PAIRS)}, got {preset!r}"
        )
    shapes = RANDOM_PAIRS[preset]
    dtype = getattr(mx, shapes.dtype)
    target_key, drafter_key = mx.random.split(mx.random.key(seed), 2)
    return ModelPair(
        target=_build(shapes.target, target_key, dtype),
        drafter=_build(shapes.drafter, drafter_key, dtype),
        tokenizer=None,
        target_path=Path(f"random-{preset}-target"),
        drafter_path=Path(f"random-{preset}-drafter"),
    )
