"""Train the embedded demo target/drafter pair on Tiny Shakespeare.

Usage (from the repository root)::

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 \\
        python impl/demo_training/train.py --out impl/specaccept/demo/weights

(after ``pip install -e .``, or with ``PYTHONPATH=impl``). The script is provenance, not
library: it lives beside the package, outside it, and is not installed.

What it does
------------
* Reads ``demo/data/tinyshakespeare.txt`` (public domain, SHA-256 checked), builds a
  character-level vocabulary (65 characters in sorted order, ids 0..64) plus two special
  tokens: ``<|endoftext|>`` (id 65, the eos token; it never occurs in the corpus) and
  ``<unk>`` (id 66, for characters outside the corpus). Vocabulary size 67.
* Holds out the last 10% of the characters as the validation split.
* Trains two models of mlx-lm's Llama architecture (``mlx_lm.models.llama``): a target of
  about 3.0M parameters and a drafter about 9x smaller (about 0.34M), sharing the
  tokenizer. AdamW, linear warmup then cosine decay, gradient clipping, sequence length 256,
  a fixed number of steps (so the run is deterministic, not time-budgeted).
* Evaluates both on the whole validation split (loss in nats per character, top-1
  accuracy), and the pair: greedy next-token agreement of drafter and target, and the
  mean speculative acceptance probability sum_x min(p(x), q(x)) at temperature 1.
* Saves each model in mlx-lm's on-disk format (``config.json``, float32
  ``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``,
  ``special_tokens_map.json``) under ``<out>/target`` and ``<out>/drafter``, reloads both
  with ``mlx_lm.load`` offline, checks the tokenizer round trip, generates a greedy sample,
  and writes ``<out>/training_report.json`` and the model card ``<out>/../CARD.md``
  (architecture, parameter counts, losses, steps, tokens, wall times, command, SHA-256).

Speed: OpenBLAS
---------------
MLX's CPU backend calls whatever ``sgemm`` the process resolves. The BLAS it links by
default runs at roughly 5 GFLOP/s on this machine's 2 cores; preloading the
multi-threaded OpenBLAS (``LD_PRELOAD=.../openblas-pthread/libblas.so.3``) gives roughly
85 GFLOP/s, i.e. about 16x faster training (measured: 17.6 s vs 1.1 s per target step).
With OpenBLAS the whole run takes about 12 minutes on 2 CPU cores; without it, hours.
The script prints a warning when OpenBLAS is not mapped into the process.

Determinism
-----------
``mx.random.seed`` (initialisation), ``np.random.seed`` and a seeded
``numpy.random.Generator`` (batch positions) fix every random choice, and the step counts
are fixed. Re-running on the same machine and library versions reproduces the run (two runs
on the 2-core development machine, one of them slowed by other load, wrote bit-identical
``model.safetensors`` files); bitwise identical weights across different BLAS builds or
thread counts are not guaranteed (floating-point summation order may differ).

``--card-only`` rewrites the card from ``<out>/training_report.json`` without training.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import mlx.core as mx
import mlx.optimizers as optim
import numpy as np
from mlx.nn.layers.base import Module
from mlx.nn.losses import cross_entropy
from mlx.nn.utils import value_and_grad
from mlx.utils import tree_flatten

from specaccept.demo import DEMO_WEIGHTS_DIR, corpus_path

CORPUS_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
EOS_TOKEN = "<|endoftext|>"
UNK_TOKEN = "<unk>"
SEED = 0
SEQ_LEN = 256
BATCH_SIZE = 16
VAL_FRACTION = 0.10
EVAL_BATCH = 16
OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
CANONICAL_COMMAND = (
    f"LD_PRELOAD={OPENBLAS} python impl/demo_training/train.py --out impl/specaccept/demo/weights"
)


@dataclass(frozen=True)
class ModelSpec:
    """Architecture and optimisation settings of one model of the pair."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    steps: int
    learning_rate: float
    warmup_steps: int
    seed: int


TARGET = ModelSpec(
    name="target",
    hidden_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    intermediate_size=640,
    steps=450,
    learning_rate=2e-3,
    warmup_steps=50,
    seed=SEED,
)
DRAFTER = ModelSpec(
    name="drafter",
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=256,
    steps=500,
    learning_rate=3e-3,
    warmup_steps=50,
    seed=SEED + 1,
)

WEIGHT_DECAY = 0.1
BETAS = (0.9, 0.95)
GRAD_CLIP = 1.0
FINAL_LR_FRACTION = 0.1
RMS_NORM_EPS = 1e-5
ROPE_THETA = 10000.0


def log(message: str) -> None:
    print(message, flush=True)


def openblas_loaded() -> bool:
    """Whether an OpenBLAS library is mapped into this process (Linux only)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    return "openblas" in maps.lower()


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def machine_description() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPU cores, {platform.system()} {platform.machine()}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- tokenizer


def build_vocab(text: str) -> dict[str, int]:
    """Character vocabulary: sorted corpus characters, then eos, then unk."""
    vocab = {ch: i for i, ch in enumerate(sorted(set(text)))}
    vocab[EOS_TOKEN] = len(vocab)
    vocab[UNK_TOKEN] = len(vocab)
    return vocab


def write_tokenizer(directory: Path, vocab: dict[str, int]) -> None:
    """Write ``tokenizer.json`` (tokenizers WordLevel over single characters) and configs.

    The pre-tokenizer isolates every character (whitespace and newlines included), there is
    no normaliser and no post-processor (so no BOS/EOS is ever added), and the ``Fuse``
    decoder concatenates tokens without separators, so decode(encode(text)) == text for any
    text over the corpus alphabet.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(
        [
            AddedToken(EOS_TOKEN, special=True, normalized=False),
            AddedToken(UNK_TOKEN, special=True, normalized=False),
        ]
    )
    directory.mkdir(parents=True, exist_ok=True)
    tok.save(str(directory / "tokenizer.json"))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS_TOKEN,
        "unk_token": UNK_TOKEN,
        "bos_token": None,
        "pad_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids"],
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")
    special = {"eos_token": EOS_TOKEN, "unk_token": UNK_TOKEN}
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def encode_corpus(text: str, vocab: dict[str, int]) -> np.ndarray[Any, np.dtype[np.int32]]:
    table = np.full(0x110000, vocab[UNK_TOKEN], dtype=np.int32)
    for ch, i in vocab.items():
        if len(ch) == 1:
            table[ord(ch)] = i
    codepoints = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    return table[codepoints]


# --------------------------------------------------------------------------- model


def model_config(spec: ModelSpec, vocab: dict[str, int]) -> dict[str, Any]:
    """The ``config.json`` of a model (mlx-lm / Hugging Face Llama keys)."""
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_attention_heads,
        "head_dim": spec.hidden_size // spec.num_attention_heads,
        "intermediate_size": spec.intermediate_size,
        "hidden_act": "silu",
        "rms_norm_eps": RMS_NORM_EPS,
        "rope_theta": ROPE_THETA,
        "rope_traditional": False,
        "vocab_size": len(vocab),
        "tie_word_embeddings": True,
        "attention_bias": False,
        "mlp_bias": False,
        "max_position_embeddings": SEQ_LEN,
        "eos_token_id": vocab[EOS_TOKEN],
        "bos_token_id": None,
        "pad_token_id": None,
        "torch_dtype": "float32",
        "specaccept_demo": {
            "role": spec.name,
            "tokenizer": "character-level, ids 0..64 = sorted Tiny Shakespeare characters",
            "eos_token": EOS_TOKEN,
            "eos_token_id": vocab[EOS_TOKEN],
            "eos_note": "never occurs in the training text; the models do not emit it, "
            "so generation must be bounded by a token budget",
            "unk_token": UNK_TOKEN,
            "unk_token_id": vocab[UNK_TOKEN],
            "train_seq_len": SEQ_LEN,
        },
    }


def build_model(spec: ModelSpec, vocab: dict[str, int]) -> Module:
    from mlx_lm.models.llama import Model, ModelArgs

    cfg = model_config(spec, vocab)
    args = ModelArgs(**{k: v for k, v in cfg.items() if k in ModelArgs.__dataclass_fields__})
    mx.random.seed(spec.seed)
    model: Module = Model(args)
    mx.eval(parameters_of(model))
    return model


def parameters_of(model: Module) -> dict[str, Any]:
    """``model.parameters()`` (the nested dict of arrays), typed."""
    method: Callable[[], dict[str, Any]] = model.parameters
    return method()


def flat_parameters(model: Module) -> list[tuple[str, mx.array]]:
    return cast(list[tuple[str, mx.array]], tree_flatten(parameters_of(model)))


def scalar(value: mx.array) -> float:
    return float(np.asarray(value))


def count_parameters(model: Module) -> int:
    return sum(int(v.size) for _, v in flat_parameters(model))


def lr_schedule(spec: ModelSpec) -> Callable[[mx.array], mx.array]:
    warmup = optim.linear_schedule(0.0, spec.learning_rate, spec.warmup_steps)
    cosine = optim.cosine_decay(
        spec.learning_rate,
        spec.steps - spec.warmup_steps,
        end=spec.learning_rate * FINAL_LR_FRACTION,
    )
    return optim.join_schedules([warmup, cosine], [spec.warmup_steps])


def train_model(
    model: Module,
    spec: ModelSpec,
    train_ids: np.ndarray[Any, np.dtype[np.int32]],
    log_every: int,
) -> dict[str, Any]:
    """Train in place for ``spec.steps`` steps; return timing and loss history."""
    rng = np.random.default_rng(spec.seed)
    optimizer = optim.AdamW(
        learning_rate=lr_schedule(spec), betas=list(BETAS), weight_decay=WEIGHT_DECAY
    )

    def loss_fn(m: Module, x: mx.array, y: mx.array) -> mx.array:
        return cross_entropy(m(x), y).mean()

    loss_and_grad = value_and_grad(model, loss_fn)
    clip_grad_norm: Callable[[Any, float], tuple[Any, mx.array]] = optim.clip_grad_norm
    offsets = np.arange(SEQ_LEN + 1)
    history: list[tuple[int, float]] = []
    start = time.perf_counter()
    cpu_start = time.process_time()
    load_start = load_average()
    for step in range(1, spec.steps + 1):
        starts = rng.integers(0, len(train_ids) - SEQ_LEN - 1, size=BATCH_SIZE)
        window = mx.array(train_ids[starts[:, None] + offsets[None, :]])
        loss, grads = loss_and_grad(model, window[:, :-1], window[:, 1:])
        grads, _ = clip_grad_norm(grads, GRAD_CLIP)
        optimizer.update(model, grads)
        mx.eval(parameters_of(model), optimizer.state, loss)
        if step % log_every == 0 or step == 1 or step == spec.steps:
            value = scalar(loss)
            history.append((step, value))
            elapsed = time.perf_counter() - start
            log(
                f"[{spec.name}] step {step}/{spec.steps} loss {value:.4f} "
                f"lr {scalar(optimizer.learning_rate):.2e} elapsed {elapsed:.1f}s"
            )
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return {
        "wall_time_s": wall,
        "cpu_time_s": cpu,
        "load_average_1min_start_end": [load_start, load_average()],
        "steps": spec.steps,
        "tokens": spec.steps * BATCH_SIZE * SEQ_LEN,
        "batch_size": BATCH_SIZE,
        "seq_len": SEQ_LEN,
        "loss_history": history,
    }


def evaluate_pair(
    target: Module, drafter: Module, val_ids: np.ndarray[Any, np.dtype[np.int32]]
) -> dict[str, float]:
    """Validation metrics over non-overlapping windows of ``SEQ_LEN`` predictions.

    Windows of ``SEQ_LEN + 1`` characters with stride ``SEQ_LEN`` cover the split, so every
    validation character after the first (up to the last full window) is predicted once,
    with 0..SEQ_LEN-1 characters of context.
    """
    n_windows = (len(val_ids) - 1) // SEQ_LEN
    starts = np.arange(n_windows) * SEQ_LEN
    offsets = np.arange(SEQ_LEN + 1)
    sums = {"loss_t": 0.0, "loss_d": 0.0, "acc_t": 0.0, "acc_d": 0.0, "agree": 0.0, "alpha": 0.0}
    count = 0
    for b in range(0, n_windows, EVAL_BATCH):
        idx = starts[b : b + EVAL_BATCH]
        window = mx.array(val_ids[idx[:, None] + offsets[None, :]])
        x, y = window[:, :-1], window[:, 1:]
        lt = target(x).astype(mx.float32)
        ld = drafter(x).astype(mx.float32)
        pt = mx.softmax(lt, axis=-1)
        pd = mx.softmax(ld, axis=-1)
        at = mx.argmax(lt, axis=-1)
        ad = mx.argmax(ld, axis=-1)
        parts = {
            "loss_t": cross_entropy(lt, y).sum(),
            "loss_d": cross_entropy(ld, y).sum(),
            "acc_t": (at == y).sum(),
            "acc_d": (ad == y).sum(),
            "agree": (at == ad).sum(),
            "alpha": mx.minimum(pt, pd).sum(axis=-1).sum(),
        }
        mx.eval(parts)
        for key, value in parts.items():
            sums[key] += scalar(value)
        count += int(y.size)
    return {
        "val_predictions": float(count),
        "target_val_loss": sums["loss_t"] / count,
        "drafter_val_loss": sums["loss_d"] / count,
        "target_val_top1": sums["acc_t"] / count,
        "drafter_val_top1": sums["acc_d"] / count,
        "greedy_agreement": sums["agree"] / count,
        "mean_acceptance_prob_t1": sums["alpha"] / count,
    }


PROFILE_WINDOW = 1024
PROFILE_WINDOWS = 16
PROFILE_BANDS = ((0, 64), (64, 128), (128, 256), (256, 384), (384, 512), (512, 768), (768, 1024))


def context_profile(
    model: Module, val_ids: np.ndarray[Any, np.dtype[np.int32]]
) -> list[dict[str, float]]:
    """Validation loss by position in windows longer than the training length.

    ``PROFILE_WINDOWS`` windows of ``PROFILE_WINDOW`` predictions from the start of the
    validation split; the mean loss of the predictions whose position (= context length)
    falls in each band of ``PROFILE_BANDS``. Shows how far past ``SEQ_LEN`` the models hold.
    """
    offsets = np.arange(PROFILE_WINDOW + 1)
    starts = np.arange(PROFILE_WINDOWS) * PROFILE_WINDOW
    totals = np.zeros(PROFILE_WINDOW)
    for b in range(0, PROFILE_WINDOWS, 4):
        window = mx.array(val_ids[starts[b : b + 4, None] + offsets[None, :]])
        logits = model(window[:, :-1]).astype(mx.float32)
        nll = cross_entropy(logits, window[:, 1:])
        totals += np.asarray(nll.sum(axis=0))
    per_position = totals / PROFILE_WINDOWS
    return [
        {"from": float(lo), "to": float(hi), "loss": float(per_position[lo:hi].mean())}
        for lo, hi in PROFILE_BANDS
    ]


def sampled_text(model: Module, tokenizer: Any, prompt: str, max_tokens: int) -> str:
    """A temperature-0.8 sample with a fixed seed."""
    import mlx_lm
    from mlx_lm.sample_utils import make_sampler

    mx.random.seed(SEED)
    text: str = mlx_lm.generate(
        model, tokenizer, prompt=prompt, max_tokens=max_tokens, sampler=make_sampler(temp=0.8)
    )
    return prompt + text


def save_model(directory: Path, model: Module, spec: ModelSpec, vocab: dict[str, int]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    weights = dict(flat_parameters(model))
    mx.save_safetensors(str(directory / "model.safetensors"), weights, metadata={"format": "mlx"})
    cfg = model_config(spec, vocab)
    (directory / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    write_tokenizer(directory, vocab)


def verify_saved(directory: Path, sample_text: str) -> dict[str, Any]:
    """Reload with ``mlx_lm.load`` (offline) and check the tokenizer round trip."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import mlx_lm

    start = time.perf_counter()
    loaded = mlx_lm.load(str(directory))
    model, tokenizer = loaded[0], loaded[1]
    load_s = time.perf_counter() - start
    ids = tokenizer.encode(sample_text)
    if tokenizer.decode(ids) != sample_text or len(ids) != len(sample_text):
        raise RuntimeError(f"tokenizer round trip failed for {directory}")
    return {"model": model, "tokenizer": tokenizer, "load_s": load_s}


def greedy_sample(model: Module, tokenizer: Any, prompt: str, max_tokens: int) -> str:
    import mlx_lm

    text: str = mlx_lm.generate(model, tokenizer, prompt=prompt, max_tokens=max_tokens)
    return prompt + text


# --------------------------------------------------------------------------- card


def arch_rows(spec: ModelSpec, vocab_size: int) -> list[tuple[str, str]]:
    return [
        ("hidden size", str(spec.hidden_size)),
        ("layers", str(spec.num_hidden_layers)),
        (
            "attention heads (= KV heads)",
            f"{spec.num_attention_heads} (head dim {spec.hidden_size // spec.num_attention_heads})",
        ),
        ("intermediate size (SwiGLU)", str(spec.intermediate_size)),
        ("vocab size", str(vocab_size)),
        ("tied input/output embeddings", "yes"),
    ]


def write_card(card_path: Path, report: dict[str, Any]) -> None:
    ev = report["evaluation"]
    rel = report["weights_dir_relative_to_card"]
    lines: list[str] = [
        "# Demo target/drafter pair (Tiny Shakespeare, character level)",
        "",
        "<!-- Generated by `impl/demo_training/train.py`; do not edit by hand. -->",
        "",
        "Two small models of mlx-lm's Llama architecture (`model_type: llama`), trained from",
        "scratch on the same character-level tokenizer, embedded so that the speculative",
        "decoding shell has a real target/drafter pair that runs offline on a CPU in seconds.",
        "They are toys: the target writes text shaped like the plays (upper-case speaker",
        "names, colons, verse lines, blank lines between speeches) from English-looking",
        "words without meaning, and greedy decoding soon loops on frequent phrases.",
        "",
        "## Data and tokenizer",
        "",
        f"* Corpus: `data/tinyshakespeare.txt`, {report['corpus_chars']:,} characters, "
        "public domain (karpathy/char-rnn `tinyshakespeare/input.txt`),",
        f"  SHA-256 `{report['corpus_sha256']}`.",
        f"* Split: first {report['train_chars']:,} characters train, last "
        f"{report['val_chars']:,} (10%) validation.",
        f"* Tokenizer: one token per character. Vocab size {report['vocab_size']}: ids 0..64 are",
        "  the 65 corpus characters in code-point order (`\\n`=0, space=1, ...),"
        f" `{EOS_TOKEN}` = {report['eos_token_id']}",
        f"  (eos), `{UNK_TOKEN}` = {report['unk_token_id']} (characters outside the corpus).",
        "  No BOS, no normaliser, no post-processor; the decoder concatenates tokens, so",
        "  `decode(encode(text)) == text` for any text over the corpus alphabet.",
        "* The eos token never occurs in the training text, so the models (practically) never",
        "  emit it: bound generation with a token budget.",
        "",
        "## Models",
        "",
    ]
    for name in ("target", "drafter"):
        m = report["models"][name]
        spec = ModelSpec(**m["spec"])
        lines += [f"### {name}", "", "| property | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in arch_rows(spec, report["vocab_size"])]
        lines += [
            f"| parameters | {m['parameters']:,} |",
            f"| validation loss (nats/char) | {ev[name + '_val_loss']:.4f} |",
            f"| validation bits/char | {ev[name + '_val_loss'] / math.log(2):.4f} |",
            f"| validation top-1 accuracy | {ev[name + '_val_top1']:.4f} |",
            f"| training steps | {m['train']['steps']} |",
            f"| batch x sequence length | {BATCH_SIZE} x {SEQ_LEN} |",
            f"| training tokens | {m['train']['tokens']:,} |",
            f"| final training loss (last batch) | {m['train']['loss_history'][-1][1]:.4f} |",
            f"| peak learning rate / warmup | {spec.learning_rate:g} / {spec.warmup_steps} |",
            f"| training wall time (measured) | {m['train']['wall_time_s']:.1f} s "
            f"({m['train']['wall_time_s'] / m['train']['steps']:.2f} s/step) |",
            f"| training CPU time (process) | {m['train']['cpu_time_s']:.1f} s |",
            "| 1-min load average, start / end of training | "
            + " / ".join(f"{x:.2f}" for x in m["train"]["load_average_1min_start_end"])
            + " |",
            "| weights dtype | float32 |",
            f"| `model.safetensors` size | {m['safetensors_bytes']:,} bytes |",
            f"| `model.safetensors` SHA-256 | `{m['safetensors_sha256']}` |",
            f"| `mlx_lm.load` time (mlx_lm already imported) | {m['load_s']:.2f} s |",
            "",
        ]
    ratio = report["models"]["target"]["parameters"] / report["models"]["drafter"]["parameters"]
    uniform = math.log(report["vocab_size"])
    lines += [
        "## Pair",
        "",
        f"* Target/drafter parameter ratio: {ratio:.2f}x.",
        f"* Uniform-guess loss log(V) = {uniform:.4f} nats/char.",
        f"* Greedy next-token agreement (argmax drafter == argmax target) on the validation "
        f"split: **{ev['greedy_agreement']:.4f}**",
        f"  over {int(ev['val_predictions']):,} positions.",
        "* Mean speculative acceptance probability at temperature 1, "
        f"E[sum_x min(p(x), q(x))]: **{ev['mean_acceptance_prob_t1']:.4f}**.",
        "* Evaluation: non-overlapping windows of 256 predictions over the validation split",
        "  (each window starts with no context), float32.",
        "",
        'Greedy sample from the target, prompt `"ROMEO:"`, 200 tokens:',
        "",
        "```text",
        report["target_greedy_sample"],
        "```",
        "",
        'Temperature-0.8 sample from the target (`mx.random.seed(0)`), prompt `"ROMEO:"`,',
        "200 tokens:",
        "",
        "```text",
        report["target_sampled_text"],
        "```",
        "",
        "## Context length",
        "",
        f"Both models were trained on {SEQ_LEN}-character windows. Past that, relative",
        "positions the models never saw appear in attention and the loss climbs. Validation",
        f"loss (nats/char) by position, {PROFILE_WINDOWS} windows of {PROFILE_WINDOW} predictions:",
        "",
        "| positions | target | drafter |",
        "|---|---|---|",
        *[
            f"| {int(t['from'])}-{int(t['to']) - 1} | {t['loss']:.3f} | {d['loss']:.3f} |"
            for t, d in zip(
                report["context_profile"]["target"],
                report["context_profile"]["drafter"],
                strict=True,
            )
        ],
        "",
        f"Keep prompt + generated text within {SEQ_LEN} tokens for in-distribution",
        "behaviour (`max_position_embeddings` in `config.json` records this; mlx-lm does not",
        "enforce it). Note that `mlx_lm.generate(..., max_kv_size=...)` does not bound the",
        "context for these models: the Llama module's own `make_cache()` (a plain `KVCache`)",
        "takes precedence over `max_kv_size`.",
        "",
        "## Loading and tokenizer behaviour",
        "",
        "* `mlx_lm.load(str(specaccept.demo.target_path()))` works offline",
        "  (`HF_HUB_OFFLINE=1`); it returns the model and a `TokenizerWrapper` around a",
        "  transformers fast tokenizer (`tokenizer_class: PreTrainedTokenizerFast`, which",
        "  transformers 5 instantiates as `TokenizersBackend`). `transformers.AutoTokenizer`",
        "  loads the same directory.",
        f"* `eos_token_id` = {report['eos_token_id']} (also `eos_token_id` in `config.json`),"
        " `eos_token_ids` = {" + str(report["eos_token_id"]) + "}; there is no BOS and no",
        "  padding token. `encode` adds nothing: one id per character, with or without",
        "  `add_special_tokens`.",
        "* `decode` concatenates characters exactly. Special ids decode to their literal",
        f"  text (`{EOS_TOKEN}`, `{UNK_TOKEN}`) unless `skip_special_tokens=True`; the literal",
        f"  string `{EOS_TOKEN}` inside input text is encoded as the eos id, and any character",
        f"  outside the corpus alphabet as `{UNK_TOKEN}` (so such text does not round-trip).",
        "* The tokenizer's decoder is a plain `Fuse`, so mlx-lm picks its",
        "  `NaiveStreamingDetokenizer`. Every token is a complete character: after",
        "  `add_token(t)`, `last_segment` is exactly that character, and no text is ever held",
        "  back. (The naive detokenizer re-decodes the current line on each token, which is",
        "  cheap here because lines are short.)",
        "* The models never emit eos in practice (it never occurs in training); bound every",
        "  generation with a token budget.",
        "* Weights are float32 on purpose: MLX's CPU matmuls in float16/bfloat16 are several",
        "  times slower than float32 with OpenBLAS.",
        "",
        "## Training",
        "",
        "AdamW (betas 0.9/0.95, weight decay 0.1), linear warmup then cosine decay to 10% of",
        "the peak rate, gradient clipping at norm 1.0, random 256-character windows from the",
        "training split, fixed seeds (`mx.random.seed`, numpy) and fixed step counts.",
        "",
        "Command that produced these weights (from the repository root, with `pip install -e .`",
        "or `PYTHONPATH=impl`):",
        "",
        "```sh",
        CANONICAL_COMMAND,
        "```",
        "",
        f"Recorded invocation: `{report['invocation']}`",
        "",
        f"* Total wall time of the run (data, both trainings, evaluation, save, verify): "
        f"{report['total_wall_time_s']:.1f} s",
        f"  ({report['total_wall_time_s'] / 60:.1f} min) on {report['machine']}.",
        f"* OpenBLAS preloaded: {report['openblas_loaded']}.",
        "* Wall times are as measured; other processes sharing the cores (see the load",
        "  averages above) lengthen them without changing the result, since the step counts",
        "  and seeds are fixed.",
        f"* Versions: {report['versions']}.",
        *([f"* Note: {report['post_hoc_note']}."] if "post_hoc_note" in report else []),
        "",
        "## Checksums",
        "",
        "In `sha256sum -c` format, relative to this file's directory:",
        "",
        "```text",
        f"{report['models']['target']['safetensors_sha256']}  {rel}/target/model.safetensors",
        f"{report['models']['drafter']['safetensors_sha256']}  {rel}/drafter/model.safetensors",
        "```",
        "",
    ]
    card_path.write_text("\n".join(lines))


# --------------------------------------------------------------------------- main


def load_split(
    corpus: Path,
) -> tuple[
    str, dict[str, int], np.ndarray[Any, np.dtype[np.int32]], np.ndarray[Any, np.dtype[np.int32]]
]:
    """The corpus text, its vocabulary, and the encoded train / validation (last 10%) split."""
    text = corpus.read_text(encoding="utf-8")
    vocab = build_vocab(text)
    ids = encode_corpus(text, vocab)
    n_train = int(len(ids) * (1 - VAL_FRACTION))
    return text, vocab, ids[:n_train], ids[n_train:]


def default_card_path(out: Path, card: Path | None) -> Path:
    return card if card is not None else out.parent / "CARD.md"


def rewrite_card(out: Path, card: Path | None, corpus: Path) -> None:
    """Regenerate the card from a finished run's report, without training.

    Post-hoc measurements that an older report lacks (the context profile, the sampled
    text) are computed from the saved weights and added to the report.
    """
    report_path = out / "training_report.json"
    report = json.loads(report_path.read_text())
    for name in ("target", "drafter"):
        actual = sha256_file(out / name / "model.safetensors")
        if actual != report["models"][name]["safetensors_sha256"]:
            raise RuntimeError(f"{name}: weights changed since the report ({actual})")
    if "context_profile" not in report or "target_sampled_text" not in report:
        _, _, _, val_ids = load_split(corpus)
        loaded = {name: verify_saved(out / name, "ROMEO:\n") for name in ("target", "drafter")}
        report["context_profile"] = {
            name: context_profile(item["model"], val_ids) for name, item in loaded.items()
        }
        target = loaded["target"]
        report["target_sampled_text"] = sampled_text(
            target["model"], target["tokenizer"], "ROMEO:", 200
        )
        report["post_hoc_note"] = (
            "context_profile and target_sampled_text were computed "
            "from the saved weights by --card-only"
        )
        report_path.write_text(json.dumps(report, indent=2) + "\n")
    card_path = default_card_path(out, card)
    write_card(card_path, report)
    log(f"rewrote {card_path} from {out / 'training_report.json'}")


def with_steps(spec: ModelSpec, steps: int) -> ModelSpec:
    """``spec`` with another step count (warmup capped at a tenth of it, for short runs)."""
    warmup = min(spec.warmup_steps, max(1, steps // 10))
    return ModelSpec(**{**asdict(spec), "steps": steps, "warmup_steps": warmup})


def invocation(argv: list[str] | None) -> str:
    """The command line of this run, with the LD_PRELOAD in effect (if any)."""
    words = ["python", "impl/demo_training/train.py"]
    words += list(argv) if argv is not None else sys.argv[1:]
    preload = os.environ.get("LD_PRELOAD")
    prefix = f"LD_PRELOAD={shlex.quote(preload)} " if preload else ""
    return prefix + shlex.join(words)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=DEMO_WEIGHTS_DIR, help="weights directory")
    parser.add_argument(
        "--card", type=Path, default=None, help="model card path (default: <out>/../CARD.md)"
    )
    parser.add_argument("--corpus", type=Path, default=corpus_path())
    parser.add_argument("--target-steps", type=int, default=TARGET.steps)
    parser.add_argument("--drafter-steps", type=int, default=DRAFTER.steps)
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument(
        "--card-only",
        action="store_true",
        help="do not train: rewrite the card from <out>/training_report.json "
        "(after checking the recorded SHA-256 against the weight files)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    t_start = time.perf_counter()
    args = parse_args(argv)
    if args.card_only:
        rewrite_card(args.out, args.card, args.corpus)
        return
    np.random.seed(SEED)
    mx.random.seed(SEED)
    blas = openblas_loaded()
    if not blas:
        log(f"WARNING: OpenBLAS not loaded; training will be ~16x slower (LD_PRELOAD={OPENBLAS})")
    mx.set_default_device(mx.cpu)

    corpus_sha = sha256_file(args.corpus)
    if corpus_sha != CORPUS_SHA256:
        log(f"WARNING: corpus SHA-256 {corpus_sha} differs from {CORPUS_SHA256}")
    text, vocab, train_ids, val_ids = load_split(args.corpus)
    log(f"corpus {len(text)} chars, vocab {len(vocab)}, train {len(train_ids)}, val {len(val_ids)}")

    specs = {
        "target": with_steps(TARGET, args.target_steps),
        "drafter": with_steps(DRAFTER, args.drafter_steps),
    }
    models: dict[str, Module] = {}
    model_reports: dict[str, dict[str, Any]] = {}
    for name, spec in specs.items():
        model = build_model(spec, vocab)
        n_params = count_parameters(model)
        log(f"[{name}] {n_params:,} parameters, {spec.steps} steps")
        train_info = train_model(model, spec, train_ids, args.log_every)
        log(f"[{name}] trained in {train_info['wall_time_s']:.1f}s")
        models[name] = model
        model_reports[name] = {"spec": asdict(spec), "parameters": n_params, "train": train_info}

    evaluation = evaluate_pair(models["target"], models["drafter"], val_ids)
    for key, value in evaluation.items():
        log(f"eval {key}: {value:.4f}")

    out: Path = args.out
    excerpt = text[-2000:]
    loaded: dict[str, dict[str, Any]] = {}
    for name, spec in specs.items():
        directory = out / name
        save_model(directory, models[name], spec, vocab)
        st = directory / "model.safetensors"
        loaded[name] = verify_saved(directory, excerpt)
        model_reports[name]["safetensors_sha256"] = sha256_file(st)
        model_reports[name]["safetensors_bytes"] = st.stat().st_size
        model_reports[name]["load_s"] = loaded[name]["load_s"]
        size = st.stat().st_size
        log(f"[{name}] saved {st} ({size} bytes), reload {loaded[name]['load_s']:.2f}s")

    target_loaded = loaded["target"]
    sample = greedy_sample(target_loaded["model"], target_loaded["tokenizer"], "ROMEO:", 200)
    log("greedy sample (target):\n" + sample)
    sampled = sampled_text(target_loaded["model"], target_loaded["tokenizer"], "ROMEO:", 200)
    log("temperature-0.8 sample (target):\n" + sampled)
    profile = {name: context_profile(models[name], val_ids) for name in specs}
    log(f"context profile: {profile}")

    card_path = default_card_path(out, args.card)
    try:
        rel = os.path.relpath(out.resolve(), card_path.resolve().parent)
    except ValueError:
        rel = str(out.resolve())
    report: dict[str, Any] = {
        "corpus_chars": len(text),
        "corpus_sha256": corpus_sha,
        "train_chars": len(train_ids),
        "val_chars": len(val_ids),
        "vocab_size": len(vocab),
        "eos_token_id": vocab[EOS_TOKEN],
        "unk_token_id": vocab[UNK_TOKEN],
        "models": model_reports,
        "evaluation": evaluation,
        "target_greedy_sample": sample,
        "target_sampled_text": sampled,
        "context_profile": profile,
        "invocation": invocation(argv),
        "openblas_loaded": blas,
        "machine": machine_description(),
        "versions": f"python {platform.python_version()}, mlx {importlib.metadata.version('mlx')}, "
        f"mlx-lm {importlib.metadata.version('mlx-lm')}, numpy {np.__version__}",
        "weights_dir_relative_to_card": rel,
    }
    report["total_wall_time_s"] = time.perf_counter() - t_start
    (out / "training_report.json").write_text(json.dumps(report, indent=2) + "\n")
    write_card(card_path, report)
    log(f"wrote {card_path}; total wall time {report['total_wall_time_s']:.1f}s")


if __name__ == "__main__":
    main()
