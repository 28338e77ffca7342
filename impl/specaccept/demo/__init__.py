"""The embedded demo target/drafter pair: paths to the committed weights.

Both models are mlx-lm Llama checkpoints (``config.json``, ``model.safetensors``,
``tokenizer.json``) trained on Tiny Shakespeare with one shared character-level
tokenizer by ``impl/demo_training/train.py`` (kept in the repository, not installed);
``CARD.md`` next to this file describes them. Load one with
``mlx_lm.load(str(target_path()))``. This module imports nothing heavy.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "DEMO_DATA_DIR",
    "DEMO_DIR",
    "DEMO_WEIGHTS_DIR",
    "card_path",
    "corpus_path",
    "drafter_path",
    "target_path",
]

DEMO_DIR: Path = Path(__file__).resolve().parent
"""The directory of this package (holds ``CARD.md``, ``data/`` and ``weights/``)."""

DEMO_WEIGHTS_DIR: Path = DEMO_DIR / "weights"
"""The directory holding the ``target/`` and ``drafter/`` checkpoints."""

DEMO_DATA_DIR: Path = DEMO_DIR / "data"
"""The directory holding the training corpus: in a checkout only, the wheel leaves it out."""


def target_path() -> Path:
    """The mlx-lm checkpoint directory of the demo target (about 3.0M parameters)."""
    return DEMO_WEIGHTS_DIR / "target"


def drafter_path() -> Path:
    """The mlx-lm checkpoint directory of the demo drafter (about 0.34M parameters)."""
    return DEMO_WEIGHTS_DIR / "drafter"


def corpus_path() -> Path:
    """The Tiny Shakespeare corpus both models were trained on (last 10% held out).

    It exists in a checkout of the repository: the wheel leaves the 1.1 MB text out, since
    nothing installed reads it (the training script, tests and benchmarks run from a checkout).
    """
    return DEMO_DATA_DIR / "tinyshakespeare.txt"


def card_path() -> Path:
    """The model card of the pair."""
    return DEMO_DIR / "CARD.md"
