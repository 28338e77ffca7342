"""The engines' recorders: run an engine's Triton kernels compiled on a GPU, or under
Triton's interpreter on a machine without one."""

from __future__ import annotations

import os
import sys

__all__ = ["choose_triton_backend"]


def choose_triton_backend(script: str, requirements: str) -> str | None:
    """Choose Triton's interpreter when no GPU is present; an error message, or None.

    Triton reads ``TRITON_INTERPRET`` when it is imported, so this must run before anything
    imports it. `script` and `requirements` name the recorder and its requirements file in
    the messages.
    """
    try:
        import torch
    except ImportError:
        return f"{script}: torch is not installed; install {requirements}"
    if not torch.cuda.is_available():
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            return (f"{script}: no GPU, and Triton was imported before the interpreter could "
                    "be chosen; set TRITON_INTERPRET=1")
        os.environ["TRITON_INTERPRET"] = "1"
    return None
