"""Random-weight model pairs with real shapes, built in memory: cost without downloads.

A speculative round's cost depends on the shapes (layers, widths, the vocabulary) and
the dtype, not on what the weights learned, so a Llama-shaped pair with random weights
times the round of a real pair of the same shapes. Its acceptance is another matter:
two independent random models agree far less than a trained drafter agrees with its
target, so acceptance rates, tokens per round and speedups measured on such a pair
describe that random pair, never a trained one.

A *self-speculative* preset (LayerSkip-style) makes a pair that agrees: the drafter is
the target's first layers, sharing its embedding, final norm and head, and the target's
residual branches (``o_proj``, ``down_proj``) are scaled down so that its later layers
move the hidden state little, while its head is scaled up so that its laws are peaked
rather than near-uniform. `agreement` measures how much such a pair agrees, Σ min(p, q)
and the target's entropy along the target's own samples; its speedups are those of a
self-speculative pair of that agreement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import mlx.core as mx

from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.sampling import effective_token_distribution
from specaccept.shell.loading import ModelPair
from specaccept.shell.memory import check_fits

__all__ = [
    "RANDOM_PAIRS", "RUN_MARGIN_BYTES", "Agreement", "RandomPairPreset", "agreement",
    "pair_bytes", "random_pair",
]


@dataclass(frozen=True)
class RandomPairPreset:
    """The shapes of a target and a drafter (mlx-lm `llama.ModelArgs` fields) and a dtype."""

    description: str
    target: dict[str, Any]
    drafter: dict[str, Any]
    """The drafter's shapes; for a self-speculative preset, the target's with fewer layers."""
    dtype: str
    self_speculative: bool = False
    """The drafter is the target's first layers, sharing its embedding, norm and head."""
    residual_scale: float = 1.0
    """Factor on the target's residual-branch outputs (``o_proj``, ``down_proj``)."""
    head_scale: float = 1.0
    """Factor on the target's output head."""


def _llama(**fields: Any) -> dict[str, Any]:
    return {"model_type": "llama", "rms_norm_eps": 1e-5, "rope_theta": 500000.0, **fields}


_LLAMA3_VOCAB = 128_256

_LLAMA3_8B = _llama(
    hidden_size=4096, num_hidden_layers=32, intermediate_size=14336,
    num_attention_heads=32, num_key_value_heads=8, head_dim=128,
    vocab_size=_LLAMA3_VOCAB, tie_word_embeddings=False,
)
_SMALL_TARGET = _llama(
    hidden_size=256, num_hidden_layers=4, intermediate_size=512,
    num_attention_heads=4, num_key_value_heads=2, vocab_size=8192,
    tie_word_embeddings=False,
)
_SMALL_DEEP_TARGET = {**_SMALL_TARGET, "num_hidden_layers": 16}

RANDOM_PAIRS: dict[str, RandomPairPreset] = {
    "llama-3-8b-1b": RandomPairPreset(
        description="Llama-3.1-8B-shaped target, Llama-3.2-1B-shaped drafter, "
        f"vocabulary {_LLAMA3_VOCAB:,}, bfloat16 (about 16 GB + 2.5 GB of weights)",
        target=_LLAMA3_8B,
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
        target=_SMALL_TARGET,
        drafter=_llama(
            hidden_size=128, num_hidden_layers=1, intermediate_size=256,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=8192,
            tie_word_embeddings=True,
        ),
        dtype="float32",
    ),
    "llama-3-8b-self": RandomPairPreset(
        description="Llama-3.1-8B-shaped target (residual branches x 0.002, head x 8), "
        "self-speculative drafter of its first 8 layers sharing its embedding, final norm "
        f"and head, vocabulary {_LLAMA3_VOCAB:,}, bfloat16 (about 16 GB of weights)",
        target=_LLAMA3_8B,
        drafter={**_LLAMA3_8B, "num_hidden_layers": 8},
        dtype="bfloat16",
        self_speculative=True, residual_scale=0.002, head_scale=8.0,
    ),
    "llama-3-8b-self-2l": RandomPairPreset(
        description="Llama-3.1-8B-shaped target (residual branches x 0.002, head x 8), "
        "self-speculative drafter of its first 2 layers sharing its embedding, final norm "
        f"and head, vocabulary {_LLAMA3_VOCAB:,}, bfloat16 (about 16 GB of weights)",
        target=_LLAMA3_8B,
        drafter={**_LLAMA3_8B, "num_hidden_layers": 2},
        dtype="bfloat16",
        self_speculative=True, residual_scale=0.002, head_scale=8.0,
    ),
    "small-deep-self-2l": RandomPairPreset(
        description="a deeper small self-speculative pair for a CPU: the `small` target with "
        "16 layers (residual branches x 0.01, head x 8) and a drafter of its first 2 layers "
        "sharing its embedding, final norm and head, vocabulary 8,192, float32",
        target=_SMALL_DEEP_TARGET,
        drafter={**_SMALL_DEEP_TARGET, "num_hidden_layers": 2},
        dtype="float32",
        self_speculative=True, residual_scale=0.01, head_scale=8.0,
    ),
    "small-self": RandomPairPreset(
        description="a small self-speculative pair for a CPU: the `small` target "
        "(residual branches x 0.02, head x 8) and a drafter of its first layer sharing "
        "its embedding, final norm and head, vocabulary 8,192, float32",
        target=_SMALL_TARGET,
        drafter={**_SMALL_TARGET, "num_hidden_layers": 1},
        dtype="float32",
        self_speculative=True, residual_scale=0.02, head_scale=8.0,
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


def _scale_self_speculative(target: Any, preset: RandomPairPreset) -> None:
    """Scale the residual branches and the head, so that the first layers predict the rest."""
    # One tensor at a time: scaled all at once, every old weight stays alive beside its
    # scaled copy until the last is evaluated (5.9 GB more at the 8B shapes).
    for layer in target.model.layers:
        for linear in (layer.self_attn.o_proj, layer.mlp.down_proj):
            linear.weight = linear.weight * preset.residual_scale
            mx.eval(linear.weight)
    target.lm_head.weight = target.lm_head.weight * preset.head_scale
    mx.eval(target.lm_head.weight)


def _first_layers_of(target: Any, fields: dict[str, Any]) -> Any:
    """A drafter made of the target's first layers and its embedding, norm and head.

    The modules are shared, not copied: the drafter adds no weights. Its own freshly
    initialised modules are replaced before they are ever evaluated, so they cost nothing.
    """
    from mlx_lm.models import llama

    drafter = llama.Model(llama.ModelArgs(**fields))
    drafter.model.embed_tokens = target.model.embed_tokens
    drafter.model.layers = target.model.layers[: fields["num_hidden_layers"]]
    drafter.model.norm = target.model.norm
    drafter.lm_head = target.lm_head
    drafter.eval()
    return drafter


RUN_MARGIN_BYTES = 512 * 2**20
"""Bytes `pair_bytes` adds for running the pair: activations, KV caches, logits rows and
the threads the runtime starts. At the presets' shapes a short run's caches and rows take
a few MB; the rest is headroom."""


def _parameter_shapes(fields: dict[str, Any]) -> list[tuple[int, ...]]:
    """The shapes of an mlx-lm Llama's parameters, built lazily: nothing is allocated."""
    from mlx.utils import tree_flatten
    from mlx_lm.models import llama

    leaves = cast(list[tuple[str, mx.array]],
                  tree_flatten(llama.Model(llama.ModelArgs(**fields)).parameters()))
    return [tuple(value.shape) for _, value in leaves]


def pair_bytes(preset: str) -> int:
    """The bytes building and running the preset's pair takes, estimated before any of it.

    The weights, parameters times the dtype's size (a self-speculative drafter shares the
    target's and adds none); plus the largest tensor's random bits, 4 bytes an entry, which
    `mx.random.uniform` draws before casting to the dtype (the weights are drawn one tensor
    at a time, so only one tensor's bits are alive at once); plus `RUN_MARGIN_BYTES`.

    Raises:
        ValueError: `preset` is not a key of `RANDOM_PAIRS`.
    """
    shapes = _preset(preset)
    models = [shapes.target] if shapes.self_speculative else [shapes.target, shapes.drafter]
    sizes = [math.prod(shape) for fields in models for shape in _parameter_shapes(fields)]
    itemsize: int = getattr(mx, shapes.dtype).size
    return sum(sizes) * itemsize + max(sizes) * 4 + RUN_MARGIN_BYTES


def _preset(preset: object) -> RandomPairPreset:
    if not isinstance(preset, str) or preset not in RANDOM_PAIRS:
        raise ValueError(
            f"random pair preset must be one of {sorted(RANDOM_PAIRS)}, got {preset!r}"
        )
    return RANDOM_PAIRS[preset]


def random_pair(preset: str, *, seed: int = 0) -> ModelPair:
    """Build the preset's target and drafter with random weights; no tokenizer, no files.

    Before any weight is drawn, the pair's `pair_bytes` is compared with what the process
    may allocate (its address-space limit, ``ulimit -v``, and the memory the host has
    available, `specaccept.shell.memory.available_bytes`): past either, MLX's allocator
    would end the process by SIGSEGV, with no message.

    Raises:
        ValueError: `preset` is not a key of `RANDOM_PAIRS`, or `seed` is not an int in
            [0, 2**64).
        InsufficientMemoryError: a ValueError, the pair needs more bytes than are
            available; it names the preset and both numbers.
    """
    shapes = _preset(preset)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ValueError(f"seed must be an int in [0, 2**64), got {seed!r}")
    check_fits(f"random pair {preset!r}", pair_bytes(preset))
    dtype = getattr(mx, shapes.dtype)
    target_key, drafter_key = mx.random.split(mx.random.key(seed), 2)
    target = _build(shapes.target, target_key, dtype)
    if shapes.self_speculative:
        _scale_self_speculative(target, shapes)
        drafter = _first_layers_of(target, shapes.drafter)
    else:
        drafter = _build(shapes.drafter, drafter_key, dtype)
    return ModelPair(
        target=target,
        drafter=drafter,
        tokenizer=None,
        target_path=Path(f"random-{preset}-target"),
        drafter_path=Path(f"random-{preset}-drafter"),
    )


@dataclass(frozen=True)
class Agreement:
    """How much a pair agrees along the target's own samples, at one sampler config."""

    sum_min: float
    """Mean over the positions of Σ min(p, q): the stochastic rule's acceptance there."""
    sum_prod: float
    """Mean of Σ p·q: sampler-match's acceptance there."""
    target_entropy: float
    """Mean entropy of the target's sampler law p, in nats."""
    positions: int


def agreement(
    pair: ModelPair, prompt: list[int], config: SamplerConfig, max_tokens: int, *, seed: int = 0
) -> Agreement:
    """Sample the target alone, then compare both models' sampler laws at every position.

    p and q are the target's and the drafter's `effective_token_distribution` after the
    prompt and the target's samples before the position, computed in one forward of each
    model over the whole sequence. At temperature 0 both laws are one-hot: Σ min(p, q) is
    then how often the two argmaxes agree, and the entropy is 0.
    """
    from specaccept.shell.target_only import target_only_generate

    if config.uses_history:
        raise ValueError("agreement compares sampler laws without history: leave penalties off")
    if pair.drafter is None:
        raise ValueError("agreement compares a target with its drafter: the pair has none")
    samples = list(target_only_generate(pair.target, prompt, config, max_tokens, seed=seed))
    sequence = mx.array(prompt + samples[:-1])[None]
    start = len(prompt) - 1
    p = effective_token_distribution(pair.target(sequence)[0, start:], config)
    q = effective_token_distribution(pair.drafter(sequence)[0, start:], config)
    logs = mx.log(mx.where(p > 0, p, 1.0))
    sum_min = mx.minimum(p, q).sum(axis=-1).mean()
    sum_prod = (p * q).sum(axis=-1).mean()
    entropy = -(p * logs).sum(axis=-1).mean()
    means = cast(list[float], mx.stack([sum_min, sum_prod, entropy]).tolist())
    return Agreement(means[0], means[1], means[2], len(samples))
