"""Compare llama.cpp's logits on the GGUF demo pair with the project's MLX forward.

Converts the demo pair (``to_gguf.py``), runs each model in llama.cpp (the sdist's
``llama_cpp`` over the libllama ``record.py`` builds, every position's logits) and in
mlx-lm on the same tokens, and prints, per model, the largest absolute difference of the
logits and whether the two argmaxes agree at every position, as one JSON line. It exits 1
when a difference exceeds ``--tolerance`` (1e-3). Measured: 4.3e-5 with llama.cpp's cache in
float32 (the default here), 6e-3 with its own default, float16 keys and values, and 12.8 for
a converter that leaves the query and key rows in the checkpoint's rotary order.

Usage::

    python examples/engines/llama.cpp/check_gguf.py [--tokens 200] [--tolerance 1e-3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def mlx_logits(checkpoint: Path, tokens: list[int]) -> Any:
    import mlx.core as mx
    from mlx_lm import load

    model = load(str(checkpoint))[0]
    return np.array(model(mx.array([tokens]))[0].astype(mx.float32))


def llama_cpp_logits(llama_cpp: Any, gguf: Path, tokens: list[int], cache_type: int) -> Any:
    model = llama_cpp.Llama(model_path=str(gguf), n_ctx=512, n_batch=512, logits_all=True,
                            verbose=False, n_threads=1, n_threads_batch=1,
                            type_k=cache_type, type_v=cache_type)
    model.eval(tokens)
    return np.array(model.scores[: len(tokens)], dtype=np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=200,
                        help="length of the held-out text fed to both (default 200, at most 256)")
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--kv-cache", choices=("f32", "f16"), default="f32",
                        help="llama.cpp's KV cache type (default f32; llama.cpp's own default, "
                             "f16, rounds keys and values to half precision)")
    args = parser.parse_args(argv)
    if not 1 <= args.tokens <= 256:
        parser.error(f"--tokens must be in [1, 256] (the models' context), got {args.tokens}")
    sys.path.insert(0, str(HERE))
    import record
    from to_gguf import convert_demo_pair

    from specaccept.demo import drafter_path, target_path

    cache = record.DEFAULT_CACHE
    try:
        root = record.source_tree(cache, record.sdist_path(cache, download=True))
        library = record.build_libllama(cache, root, jobs=2)
    except record.RecorderError as error:
        print(f"check_gguf.py: {error}", file=sys.stderr)
        return 2
    tokens = record._corpus_ids()[1000: 1000 + args.tokens]
    report: dict[str, Any] = {"tokens": len(tokens), "kv_cache": args.kv_cache}
    with tempfile.TemporaryDirectory(prefix="specaccept-gguf-") as tmp:
        target_gguf, drafter_gguf = convert_demo_pair(Path(tmp) / "gguf")
        llama_cpp = record.load_llama_cpp(root, library, Path(tmp) / "py", None)
        cache_type = {"f32": llama_cpp.GGML_TYPE_F32, "f16": llama_cpp.GGML_TYPE_F16}[args.kv_cache]
        for name, checkpoint, gguf in (("target", target_path(), target_gguf),
                                       ("drafter", drafter_path(), drafter_gguf)):
            ours, theirs = mlx_logits(checkpoint, tokens), llama_cpp_logits(llama_cpp, gguf,
                                                                             tokens, cache_type)
            report[name] = {
                "max_abs_diff": float(np.max(np.abs(ours - theirs))),
                "logit_range": [float(ours.min()), float(ours.max())],
                "argmax_agree": int(np.sum(ours.argmax(-1) == theirs.argmax(-1))),
            }
    print(json.dumps(report))
    worst = max(report[name]["max_abs_diff"] for name in ("target", "drafter"))
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
