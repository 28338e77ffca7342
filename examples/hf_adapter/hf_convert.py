"""Load the embedded demo pair (mlx-lm Llama checkpoints) as transformers `LlamaForCausalLM`.

The demo checkpoints (``impl/specaccept/demo/weights/target`` and ``drafter``) are mlx-lm
Llama models: a ``config.json`` in mlx-lm's spelling and a ``model.safetensors`` whose
tensor names are the Hugging Face ones (``model.layers.0.self_attn.q_proj.weight``...),
float32, with the output head tied to the embedding. mlx-lm's ``rope_traditional: false``
is the rotate-half RoPE that transformers' Llama uses, so the conversion is a config
translation and a strict state-dict load; nothing is permuted. It happens in memory: no
file is written.

This module imports torch, transformers and safetensors, never mlx or specaccept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM

__all__ = ["DEMO_WEIGHTS", "hf_config", "load_demo_model", "load_demo_pair", "prompt_ids"]

REPOSITORY = Path(__file__).resolve().parents[2]
DEMO_WEIGHTS = REPOSITORY / "impl" / "specaccept" / "demo" / "weights"
"""The committed demo checkpoints: ``target/`` and ``drafter/``."""
DEMO_CORPUS = REPOSITORY / "impl" / "specaccept" / "demo" / "data" / "tinyshakespeare.txt"

# mlx-lm config keys that have no transformers LlamaConfig counterpart, or are restated.
_NOT_CONFIG = {"model_type", "architectures", "rope_traditional", "specaccept_demo",
               "torch_dtype"}


def hf_config(checkpoint: Path) -> LlamaConfig:
    """The transformers `LlamaConfig` of an mlx-lm Llama checkpoint directory.

    Raises:
        ValueError: the checkpoint is not a Llama, or uses the interleaved ("traditional")
            RoPE, which transformers' Llama does not implement.
    """
    raw: dict[str, Any] = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    if raw.get("model_type") != "llama":
        raise ValueError(f"checkpoint {checkpoint}: model_type must be 'llama', got "
                         f"{raw.get('model_type')!r}")
    if raw.get("rope_traditional", False):
        raise ValueError(f"checkpoint {checkpoint}: rope_traditional must be false (transformers' "
                         "Llama rotates halves, not interleaved pairs), got true")
    fields = {key: value for key, value in raw.items() if key not in _NOT_CONFIG}
    return LlamaConfig(**fields, dtype=torch.float32)


def load_demo_model(checkpoint: Path) -> LlamaForCausalLM:
    """Build `LlamaForCausalLM` from an mlx-lm checkpoint directory, in memory, in eval mode.

    The state dict is loaded strictly: a tensor the checkpoint lacks (other than the head,
    tied to the embedding) or one it has that the model lacks is an error.
    """
    config = hf_config(checkpoint)
    model = LlamaForCausalLM(config)
    weights = load_file(str(checkpoint / "model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise ValueError(f"checkpoint {checkpoint}: missing tensors {sorted(set(missing) - tied)}, "
                         f"unexpected tensors {sorted(unexpected)}")
    model.tie_weights()
    if not torch.equal(model.lm_head.weight, model.model.embed_tokens.weight):
        raise ValueError(f"checkpoint {checkpoint}: the head is not tied to the embedding")
    torch.nn.Module.eval(model)  # transformers leaves its override untyped
    return model


def load_demo_pair(weights: Path = DEMO_WEIGHTS) -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    """The demo (target, drafter) as transformers models."""
    return load_demo_model(weights / "target"), load_demo_model(weights / "drafter")


def prompt_ids(count: int, length: int, *, start: int = 0, stride: int = 997) -> list[list[int]]:
    """`count` prompts of `length` characters of the held-out tail of the demo corpus, as ids.

    The ids are the demo tokenizer's (``tokenizer.json``: one id per character); prompt `i`
    starts `start + i * stride` characters into the last 10% of the corpus.
    """
    tokenizer = json.loads((DEMO_WEIGHTS / "target" / "tokenizer.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    text = DEMO_CORPUS.read_text(encoding="utf-8")
    held_out = text[len(text) * 9 // 10:]
    prompts = []
    for i in range(count):
        offset = (start + i * stride) % (len(held_out) - length)
        prompts.append([vocab[c] for c in held_out[offset:offset + length]])
    return prompts
