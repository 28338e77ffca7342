"""Skip the Triton interpreter's redundant re-patching of ``triton.language`` (CPU path only).

Under ``TRITON_INTERPRET=1`` every call of a ``@triton.jit`` helper from inside a kernel
re-patches every builtin of ``triton.language`` with its interpreted form (a scan of the
module's members, about 5 ms), although the running kernel has patched them already. vLLM's
kernels call helpers inside loops, and that scan was most of the recorder's time. While a
kernel runs, this patch lets a helper's call patch only language modules the kernel has not
patched yet; what runs, and every value, is unchanged (the recorder's test compares traces
recorded with and without it, byte for byte).
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["install"]


def install() -> None:
    """Wrap the interpreter's `_patch_lang` and `GridExecutor.__call__`; idempotent."""
    import triton.language as tl
    from triton.runtime import interpreter

    if getattr(interpreter, "_specaccept_fast_patch", False):
        return
    original_patch = interpreter._patch_lang
    original_call = interpreter.GridExecutor.__call__
    languages = (tl, tl.core)
    state: dict[str, Any] = {"running": False, "patched": set()}
    fn_languages: dict[int, frozenset[int]] = {}

    def languages_of(fn: Any) -> frozenset[int]:
        key = id(fn)
        if key not in fn_languages:
            fn_languages[key] = frozenset(
                id(value) for value in fn.__globals__.values()
                if inspect.ismodule(value) and value in languages)
        return fn_languages[key]

    def patch_lang(fn: Any) -> Any:
        wanted = languages_of(fn)
        if state["running"] and wanted <= state["patched"]:
            return interpreter._LangPatchScope()
        scope = original_patch(fn)
        if state["running"]:
            state["patched"] |= wanted
        return scope

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        state["running"], state["patched"] = True, set()
        try:
            return original_call(self, *args, **kwargs)
        finally:
            state["running"], state["patched"] = False, set()

    interpreter._patch_lang = patch_lang
    interpreter.GridExecutor.__call__ = call
    interpreter._specaccept_fast_patch = True
