"""Loading model pairs from disk: the embedded demo pair or any mlx-lm model directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ModelPair", "load_model", "load_pair"]


@dataclass(frozen=True)
class ModelPair:
    """A target, its drafter (None for target-only runs) and their shared tokenizer."""

    target: Any
    drafter: Any | None
    tokenizer: Any
    target_path: Path
    drafter_path: Path | None


def load_model(path: str | os.PathLike[str], *, role: str = "model") -> tuple[Any, Any]:
    """Load an mlx-lm model directory offline; return (model, tokenizer).

    Raises:
        ValueError: `path` is not a directory holding a config.json. specaccept
            never downloads weights: fetch them first (see the README).
    """
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise ValueError(
            f"{role} path {str(path)!r} is not a directory; pass a local mlx-lm model "
            "directory (specaccept never downloads weights)"
        )
    if not (directory / "config.json").is_file():
        raise ValueError(f"{role} path {str(path)!r} has no config.json: not an mlx-lm model")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from mlx_lm import load

    loaded = load(str(directory))
    return loaded[0], loaded[1]


def load_pair(
    target_path: str | os.PathLike[str] | None = None,
    drafter_path: str | os.PathLike[str] | None = None,
    *,
    with_drafter: bool = True,
) -> ModelPair:
    """Load a target and a drafter; with no paths, the embedded demo pair.

    Raises:
        ValueError: a path is missing, or only the drafter is given.
    """
    from specaccept import demo

    if target_path is None and drafter_path is not None:
        raise ValueError("--draft-model needs --model: a drafter is only meaningful for its target")
    if target_path is None:
        target_path = demo.target_path()
        drafter_path = demo.drafter_path()
    target, tokenizer = load_model(target_path, role="target")
    drafter = None
    if with_drafter:
        if drafter_path is None:
            raise ValueError("a speculative run needs --draft-model (or --no-draft)")
        drafter, _ = load_model(drafter_path, role="drafter")
    return ModelPair(
        target=target,
        drafter=drafter,
        tokenizer=tokenizer,
        target_path=Path(target_path),
        drafter_path=Path(drafter_path) if (with_drafter and drafter_path is not None) else None,
    )
