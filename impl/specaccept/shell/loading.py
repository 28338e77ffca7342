"""Loading model pairs from disk: the embedded demo pair or any mlx-lm model directory."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specaccept.shell.arguments import LanguageModel, Tokenizer

__all__ = [
    "SHELL_EXTRA_INSTALL",
    "MissingExtraError",
    "ModelPair",
    "load_model",
    "load_pair",
    "missing_shell_modules",
    "require_shell_extra",
]

SHELL_EXTRA_INSTALL = "pip install 'specaccept[shell]'"
"""The command that installs what running models needs (mlx-lm, tqdm)."""

SHELL_EXTRA_MODULES = {"mlx_lm": "mlx-lm", "tqdm": "tqdm"}
"""The importable modules of the `shell` extra, each with its distribution's name."""


class MissingExtraError(ImportError):
    """A feature needs a package of the `shell` extra that is not installed."""


def missing_shell_modules() -> list[str]:
    """The distributions of the `shell` extra that are not installed, by name."""
    return [dist for module, dist in SHELL_EXTRA_MODULES.items()
            if importlib.util.find_spec(module) is None]


def require_shell_extra(feature: str) -> None:
    """Refuse `feature` in one line naming the extra to install, unless the extra is there.

    Raises:
        MissingExtraError: mlx-lm or tqdm is not installed.
    """
    missing = missing_shell_modules()
    if missing:
        raise MissingExtraError(
            f"{feature} needs {' and '.join(missing)}, not installed: {SHELL_EXTRA_INSTALL}")


@dataclass(frozen=True)
class ModelPair:
    """A target, its drafter (None for target-only runs) and their shared tokenizer."""

    target: LanguageModel
    drafter: LanguageModel | None
    tokenizer: Tokenizer | None
    """None for a pair built in memory (`specaccept.shell.random_pairs`), which has none."""
    target_path: Path
    drafter_path: Path | None

    def require_drafter(self) -> LanguageModel:
        """The drafter, for a speculative generator.

        Raises:
            ValueError: the pair was loaded without one (``with_drafter=False``).
        """
        if self.drafter is None:
            raise ValueError("this pair has no drafter (loaded with_drafter=False): a "
                             "speculative run needs one; target_only_generate needs none")
        return self.drafter

    def require_tokenizer(self) -> Tokenizer:
        """The tokenizer.

        Raises:
            ValueError: the pair was built in memory and has none.
        """
        if self.tokenizer is None:
            raise ValueError("this pair has no tokenizer (built in memory): pass token ids")
        return self.tokenizer


def load_model(path: str | os.PathLike[str], *, role: str = "model") -> tuple[Any, Any]:
    """Load an mlx-lm model directory offline; return (model, tokenizer).

    Raises:
        ValueError: `path` is not a loadable model directory; one line names the
            directory and what is wrong (no or malformed config.json, no or
            truncated weights, no tokenizer files, or mlx-lm's own refusal).
            specaccept never downloads weights: fetch them first (see the README).
        MissingExtraError: mlx-lm is not installed (the `shell` extra).
    """
    require_shell_extra("loading a model")
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise ValueError(
            f"{role} path {str(path)!r} is not a directory; pass a local mlx-lm model "
            "directory (specaccept never downloads weights)"
        )
    _check_model_directory(directory, f"{role} model directory {str(path)!r}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from mlx_lm import load

    try:
        loaded = load(str(directory))
    except Exception as error:  # a boundary: whatever mlx-lm raises becomes one clear line
        detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ValueError(
            f"{role} model directory {str(path)!r} could not be loaded by mlx-lm: "
            f"{type(error).__name__}: {detail}"
        ) from error
    return loaded[0], loaded[1]


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model")


def _check_model_directory(directory: Path, name: str) -> None:
    """Refuse, in one line each, what mlx-lm would report with a traceback."""
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{name} has no config.json: not an mlx-lm model")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{name}: config.json is not valid JSON ({error})") from error
    if not isinstance(config, dict):
        kind = type(config).__name__
        raise ValueError(f"{name}: config.json must hold a JSON object, got {kind}")
    if "model_type" not in config:
        raise ValueError(f"{name}: config.json has no model_type, so no architecture can be built")
    weights = sorted(directory.glob("model*.safetensors"))
    if not weights:
        raise ValueError(f"{name} has no weights: no model*.safetensors file")
    for weight_file in weights:
        problem = _safetensors_problem(weight_file)
        if problem:
            raise ValueError(f"{name}: {weight_file.name} {problem}")
    if not any((directory / file).is_file() for file in _TOKENIZER_FILES):
        raise ValueError(
            f"{name} has no tokenizer files (none of {', '.join(_TOKENIZER_FILES)})"
        )


def _safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file cannot be read in full (its header says how long it is), or None."""
    size = path.stat().st_size
    try:
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                return f"is truncated: {size} bytes, not even the 8-byte header length"
            (header_length,) = struct.unpack("<Q", prefix)
            if 8 + header_length > size:
                needed = 8 + header_length
                return f"is truncated: its header needs {needed} bytes, the file has {size}"
            header = json.loads(handle.read(header_length))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"has an unreadable header ({error})"
    if not isinstance(header, dict):
        return "has a malformed header"
    ends = [
        entry["data_offsets"][1] for key, entry in header.items()
        if key != "__metadata__" and isinstance(entry, dict)
        and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2
        and isinstance(entry["data_offsets"][1], int)
    ]
    needed = 8 + header_length + max(ends, default=0)
    if needed > size:
        return f"is truncated: its tensors need {needed} bytes, the file has {size}"
    return None


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
