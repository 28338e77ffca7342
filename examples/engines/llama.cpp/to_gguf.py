"""Write the demo pair (specaccept.demo) as GGUF files that llama.cpp loads.

The demo models are Llama-architecture checkpoints in float32 safetensors with a
character-level tokenizer (ids 0..64 the sorted Tiny Shakespeare characters, 65
``<|endoftext|>``, 66 ``<unk>``). This writes each as a GGUF file of architecture ``llama``
with the ``gguf`` package (published by the llama.cpp project), keeping every tensor in
float32:

- tensor names come from ``gguf``'s own Hugging Face name map for ``MODEL_ARCH.LLAMA``;
- the query and key projections are reordered from the half-split rotary layout the
  checkpoint uses (``rope_traditional: false``) to the interleaved pairs of llama.cpp's
  ``llama`` graph, as llama.cpp's converter does for Hugging Face Llama checkpoints;
- the embedding is tied (no ``output.weight``; llama.cpp then reads ``token_embd``);
- the vocabulary is a SentencePiece-type (``llama``) vocabulary whose pieces are the
  characters themselves, space written ``\u2581`` as SentencePiece writes it, the last two
  ids control tokens; no BOS is added. The recorder feeds token ids, so llama.cpp's
  tokenizer is never on its path; the vocabulary only has to load.

Usage::

    python examples/engines/llama.cpp/to_gguf.py --out DIR    # DIR/target.gguf, DIR/drafter.gguf
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

SPACE_PIECE = "\u2581"


class ConversionError(Exception):
    """The checkpoint is not one this converter handles; the message says why."""


def rotary_interleaved(weight: Any, heads: int) -> Any:
    """Rows of a query/key projection from half-split rotary pairs to interleaved pairs.

    Within each head, row j of the first half and row j of the second half are one rotary
    pair in the checkpoint; llama.cpp's ``llama`` graph rotates rows 2j and 2j + 1.
    """
    rows = weight.shape[0]
    if rows % (2 * heads):
        raise ConversionError(f"a projection of {rows} rows does not split into {heads} "
                              "heads of rotary pairs")
    return (weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def vocabulary(tokenizer_json: Path, vocab_size: int) -> tuple[list[str], list[int]]:
    """The pieces, by id, and their token types (gguf.TokenType values)."""
    import gguf

    tokenizer = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    model = tokenizer["model"]
    if model.get("type") != "WordLevel":
        raise ConversionError(f"{tokenizer_json}: a {model.get('type')} tokenizer, not the "
                              "demo's character-level WordLevel one")
    pieces: list[str | None] = [None] * vocab_size
    types = [int(gguf.TokenType.NORMAL)] * vocab_size
    for text, token in model["vocab"].items():
        pieces[token] = text.replace(" ", SPACE_PIECE)
    for added in tokenizer.get("added_tokens", []):
        pieces[added["id"]] = added["content"]
        types[added["id"]] = int(gguf.TokenType.CONTROL if added["content"] != "<unk>"
                                 else gguf.TokenType.UNKNOWN)
    missing = [i for i, piece in enumerate(pieces) if piece is None]
    if missing:
        raise ConversionError(f"{tokenizer_json}: no piece for ids {missing[:5]}")
    return [piece for piece in pieces if piece is not None], types


def convert(checkpoint: Path, out: Path, name: str) -> None:
    """Write `checkpoint` (a demo model folder) as the GGUF file `out`."""
    import gguf
    from safetensors.numpy import load_file

    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "llama" or not config.get("tie_word_embeddings"):
        raise ConversionError(f"{checkpoint}: model_type {config.get('model_type')!r}, tied "
                              f"{config.get('tie_word_embeddings')!r}; expected a tied llama")
    if config.get("rope_traditional", False):
        raise ConversionError(f"{checkpoint}: rope_traditional is true; only the half-split "
                              "rotary layout is handled")
    layers = int(config["num_hidden_layers"])
    heads, kv_heads = int(config["num_attention_heads"]), int(config["num_key_value_heads"])
    hidden, head_dim = int(config["hidden_size"]), int(config["head_dim"])
    vocab_size = int(config["vocab_size"])
    extra = config.get("specaccept_demo", {})

    writer = gguf.GGUFWriter(str(out), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    writer.add_name(name)
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(config["rope_theta"]))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    writer.add_vocab_size(vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    pieces, types = vocabulary(checkpoint / "tokenizer.json", vocab_size)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(pieces)
    writer.add_token_scores([0.0] * vocab_size)
    writer.add_token_types(types)
    writer.add_eos_token_id(int(config["eos_token_id"]))
    if "unk_token_id" in extra:
        writer.add_unk_token_id(int(extra["unk_token_id"]))
    writer.add_add_bos_token(False)
    writer.add_add_space_prefix(False)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, layers)
    for key, tensor in sorted(load_file(str(checkpoint / "model.safetensors")).items()):
        if key.endswith("self_attn.q_proj.weight"):
            tensor = rotary_interleaved(tensor, heads)
        elif key.endswith("self_attn.k_proj.weight"):
            tensor = rotary_interleaved(tensor, kv_heads)
        mapped = names.get_name(key, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ConversionError(f"{checkpoint}: no GGUF name for tensor {key}")
        writer.add_tensor(mapped, np.ascontiguousarray(tensor, dtype=np.float32))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def convert_demo_pair(out: Path) -> tuple[Path, Path]:
    """Write the demo target and drafter into `out`; returns their paths."""
    from specaccept.demo import drafter_path, target_path

    out.mkdir(parents=True, exist_ok=True)
    target, drafter = out / "target.gguf", out / "drafter.gguf"
    convert(target_path(), target, "specaccept-demo-target")
    convert(drafter_path(), drafter, "specaccept-demo-drafter")
    return target, drafter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for target.gguf and drafter.gguf")
    args = parser.parse_args(argv)
    try:
        for path in convert_demo_pair(args.out):
            print(path)
    except (ConversionError, OSError) as error:
        print(f"to_gguf: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
