"""The project's stand-in for ``sglang.srt.platforms.interface``."""

from typing import Any


def reject_out_of_tree_path(platform: Any, subsystem: str) -> None:
    """Reached only on a platform branch the recorder never takes."""
    raise RuntimeError(f"{subsystem}: the recorder calls SGLang's Triton functions directly; "
                       "no platform dispatch runs here")
