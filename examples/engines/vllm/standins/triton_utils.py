"""The project's stand-in for ``vllm.triton_utils``: Triton itself, under the names vLLM uses.

vLLM's own module resolves the platform and its environment settings on import, which pulls
in most of vLLM; the kernels need only ``triton``, ``tl``, ``tldevice`` and ``HAS_TRITON``.
Under Triton's interpreter (``TRITON_INTERPRET=1``, the CPU path) ``tldevice.log1p`` has no
interpreted form, so there it is NumPy's ``log1p`` on the interpreter's arrays; every other
libdevice name is Triton's own. On a GPU nothing is replaced.
"""

from __future__ import annotations

import os
from typing import Any

import triton
import triton.language as tl
import triton.language.extra.libdevice as _libdevice

__all__ = ["HAS_TRITON", "tl", "tldevice", "triton"]

HAS_TRITON = True


class _InterpretedLibdevice:
    """libdevice for the interpreter: `log1p` computed by NumPy, the rest Triton's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_libdevice, name)

    @staticmethod
    def log1p(x: Any) -> Any:
        import numpy as np
        from triton.runtime.interpreter import TensorHandle

        data = x.handle.data
        return tl.core.tensor(TensorHandle(np.log1p(data).astype(data.dtype), x.handle.dtype),
                              x.type)


tldevice: Any = _InterpretedLibdevice() if os.environ.get("TRITON_INTERPRET") == "1" else _libdevice
