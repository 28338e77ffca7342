"""What the subcommands share: option groups, the sampler they describe, the run header.

This module imports no subcommand, so that `generate`, `table` and `bench` can each
depend on it without depending on each other.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mlx.core as mx

from specaccept.core.sampler_config import SamplerConfig

if TYPE_CHECKING:  # tqdm comes with the `shell` extra; `vectors` and `conform` run without it
    from tqdm import tqdm

__all__ = [
    "DEFAULT_PROMPT",
    "DIAG_ENV",
    "TREE_SCHEMES",
    "add_model_arguments",
    "add_run_arguments",
    "add_sampler_arguments",
    "add_tree_arguments",
    "blas_in_use",
    "diagnostics_enabled",
    "draft_count",
    "encode_prompt",
    "mlx_version",
    "non_negative_int",
    "output_path",
    "positive_int",
    "print_invocation",
    "progress_bar",
    "sampler_config",
    "tree_options",
    "tree_size",
]

DEFAULT_PROMPT = "ROMEO:\n"
DIAG_ENV = "SPECACCEPT_ACCEPT_DIAG"


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def draft_count(text: str) -> int:
    """An argparse type: k, an integer in [1, 4096] (`MAX_TREE_NODES`: a chain of k drafts is
    a tree of k nodes), refused before anything is sized by it."""
    from specaccept.core.tree import MAX_TREE_NODES

    value = positive_int(text)
    if value > MAX_TREE_NODES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_TREE_NODES}, got {value}")
    return value


TREE_SCHEMES = ("iid", "without-replacement", "deterministic")
"""The `--tree-scheme` values: `TreeScheme`'s, spelt here so that parsing imports no core."""


def tree_size(text: str) -> tuple[int, int]:
    """An argparse type: WIDTHxDEPTH, two integers >= 1 (``2x3``), at most 1024 paths."""
    from specaccept.shell.tree_generator import check_tree_size

    width_text, cross, depth_text = text.strip().lower().partition("x")
    try:
        width, depth = int(width_text), int(depth_text)
    except ValueError:
        width = depth = 0
    if not cross or width < 1 or depth < 1:
        raise argparse.ArgumentTypeError(
            f"must be WIDTHxDEPTH, two integers >= 1 such as 2x3, got {text[:40]!r}")
    try:
        check_tree_size(width, depth)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: {error}") from None
    return width, depth


def add_tree_arguments(parser: argparse.ArgumentParser) -> None:
    """--tree WIDTHxDEPTH and --tree-scheme: tree speculation instead of a chain of drafts."""
    group = parser.add_argument_group("tree speculation (instead of a chain of k drafts)")
    group.add_argument(
        "--tree", type=tree_size, metavar="WIDTHxDEPTH",
        help="draft WIDTH children under every node down to DEPTH; the target verifies "
        "every root-to-leaf path in one batched forward (e.g. 2x3)")
    group.add_argument(
        "--tree-scheme", choices=TREE_SCHEMES, default=None,
        help="how siblings are drafted: iid (the default: independently from the "
        "drafter's law), without-replacement, or deterministic (the drafter's top WIDTH)")


def tree_options(args: argparse.Namespace) -> tuple[int, int, str] | None:
    """(width, depth, scheme) when --tree is given, None for a chain; a ValueError names a
    flag that does not combine with it."""
    scheme = getattr(args, "tree_scheme", None)
    if args.tree is None:
        if scheme is not None:
            raise ValueError(f"--tree-scheme {scheme} needs --tree WIDTHxDEPTH")
        return None
    chain_only = "a tree needs a drafter and is decided by verify_tree, not a chain's rule"
    no_history = "a node's sampler does not see its path, so it may not read the history"
    conflicts = [
        ("--no-draft", getattr(args, "no_draft", False), chain_only),
        (f"--rule {getattr(args, 'rule', 'auto')}", getattr(args, "rule", "auto") != "auto",
         chain_only),
        (f"--repetition-penalty {args.repetition_penalty}", args.repetition_penalty != 1.0,
         no_history),
        (f"--frequency-penalty {args.frequency_penalty}", args.frequency_penalty != 0.0,
         no_history),
        (f"--presence-penalty {args.presence_penalty}", args.presence_penalty != 0.0,
         no_history),
    ]
    for flag, given, why in conflicts:
        if given:
            raise ValueError(
                f"--tree {args.tree[0]}x{args.tree[1]} does not combine with {flag}: {why}")
    return args.tree[0], args.tree[1], scheme or "iid"


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """-m/--model and --draft-model (both default to the embedded demo pair)."""
    group = parser.add_argument_group("models (default: the embedded demo pair)")
    group.add_argument("-m", "--model", help="target: a local mlx-lm model directory")
    group.add_argument("--draft-model", help="drafter: a local mlx-lm model directory")


def add_sampler_arguments(parser: argparse.ArgumentParser, *, with_temp: bool = True) -> None:
    """The flags `sampler_config` reads."""
    group = parser.add_argument_group("sampler (the target's; the drafter uses the same)")
    if with_temp:
        group.add_argument("--temp", type=float, default=0.7, help="temperature, 0 = greedy")
    group.add_argument("--top-k", type=non_negative_int, default=0, help="0 = off")
    group.add_argument("--top-p", type=float, default=1.0, help="nucleus mass, 1 = off")
    group.add_argument("--min-p", type=float, default=0.0, help="0 = off")
    group.add_argument("--repetition-penalty", type=float, default=1.0,
                       help="CTRL repetition penalty, 1 = off")
    group.add_argument("--repetition-context-size", type=positive_int, default=20,
                       help="tokens the penalties read")
    group.add_argument("--frequency-penalty", type=float, default=0.0, help="0 = off")
    group.add_argument("--presence-penalty", type=float, default=0.0, help="0 = off")


def output_path(text: str) -> str:
    """An argparse type: a file path that can be written, checked before any work is done."""
    path = Path(text).expanduser()
    parent = path.parent
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"cannot write {text!r}: {str(parent)!r} is not a directory"
        )
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    return text


def add_run_arguments(
    parser: argparse.ArgumentParser, *, tokens: int, measures: bool = False
) -> None:
    """-n/--max-tokens, --seed and --num-draft-tokens; a measurement needs -n >= 1."""
    parser.add_argument(
        "-n", "--max-tokens", type=positive_int if measures else non_negative_int,
        default=tokens, help="tokens each run generates",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="the run's seed (table: seed + prompt index, bench: seed + repeat)")
    parser.add_argument("--num-draft-tokens", type=draft_count, default=4,
                        help="k, drafts per round, at most 4096")


def sampler_config(args: argparse.Namespace, temperature: float | None = None) -> SamplerConfig:
    """The SamplerConfig the flags describe (a ValueError names a bad field)."""
    return SamplerConfig(
        temperature=args.temp if temperature is None else temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        repetition_context_size=args.repetition_context_size,
        frequency_penalty=args.frequency_penalty,
        presence_penalty=args.presence_penalty,
    )


def encode_prompt(tokenizer: Any, prompt: str, *, chat_template: bool) -> list[int]:
    """Token ids of `prompt`, through the chat template when asked and available."""
    if chat_template and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        return [int(t) for t in ids]
    return [int(t) for t in tokenizer.encode(prompt)]


def diagnostics_enabled(flag: bool) -> bool:
    """--diag, or SPECACCEPT_ACCEPT_DIAG set to 1/true/yes/on."""
    return flag or os.environ.get(DIAG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def print_invocation(args: argparse.Namespace) -> None:
    """Print the command that produced a result, as a shell block, when it is known."""
    invocation = getattr(args, "invocation", None)
    if invocation:
        print(f"Produced by:\n\n```sh\n{invocation}\n```\n")


CUDNN_ATTENTION_ENV = "MLX_CUDA_USE_CUDNN_SDPA"
"""MLX's switch for cuDNN attention on its CUDA backend, read at the first attention call."""
SHAPE_FREE_ATTENTION = "0"
"""The switch's value that turns cuDNN attention off."""

MLX_TUNING_ENV = (
    CUDNN_ATTENTION_ENV, "MLX_MAX_OPS_PER_BUFFER", "MLX_MAX_MB_PER_BUFFER", "MLX_USE_CUDA_GRAPHS",
)
"""MLX's variables that change how fast a GPU round runs; a result names those set."""


def tuning_assignments() -> list[str]:
    """The `NAME=value` of each MLX tuning variable set, for a command line.

    The cuDNN switch at the value the command sets anyway is left out: the command
    reproduces without it.
    """
    # Quoted: the value is the caller's text, and a reader pastes the command into a shell.
    return [
        f"{name}={shlex.quote(os.environ[name])}" for name in MLX_TUNING_ENV
        if name in os.environ
        and (name, os.environ[name]) != (CUDNN_ATTENTION_ENV, SHAPE_FREE_ATTENTION)
    ]


def prefer_shape_free_attention() -> None:
    """On MLX's CUDA backend, attend without cuDNN unless the caller chose otherwise.

    MLX builds a cuDNN attention graph for each new key/value length of a query of
    more than one token, and a speculative round verifies k + 1 tokens at a length no
    forward has met before: on an H200 that adds about 63 ms to a 5-token target forward
    of 12.7 ms (`benchmarks/forward_shapes.py`,
    docs/results/forward-shapes-gpu.md). MLX's own fallback attention has no per-shape
    cost. A value already in the environment wins; on other backends the variable is
    never read.
    """
    os.environ.setdefault(CUDNN_ATTENTION_ENV, SHAPE_FREE_ATTENTION)


def attention_in_use() -> str:
    """How MLX attends on this device: the cuDNN switch on a GPU, nothing to say on a CPU."""
    if mx.default_device() != mx.gpu:
        return "MLX's CPU kernels"
    return f"{CUDNN_ATTENTION_ENV}={os.environ.get(CUDNN_ATTENTION_ENV, '(unset: cuDNN on)')}"


def blas_in_use() -> str:
    """Which BLAS serves MLX's CPU matmuls: an LD_PRELOADed library, or the wheel's own."""
    if mx.default_device() == mx.gpu:
        return "none (matmuls run on the GPU)"
    preload = os.environ.get("LD_PRELOAD", "")
    if "blas" in preload.lower():
        return f"LD_PRELOAD={preload}"
    return "the BLAS bundled with the mlx wheel"


def mlx_version() -> str:
    """The installed mlx distribution's version."""
    return version("mlx")


def progress_bar(total: int, label: str, *, quiet: bool = False) -> tqdm[Any]:
    """A tqdm bar on stderr; off when stderr is not a terminal or `quiet` (e.g. --json)."""
    from tqdm import tqdm

    return tqdm(
        total=total, desc=label, file=sys.stderr, leave=False, dynamic_ncols=True,
        disable=quiet or not sys.stderr.isatty(),
    )
