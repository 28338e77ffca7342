"""The project's stand-in for ``sglang.srt.utils``: every platform test answers False.

``spec_tree.py`` then imports no platform kernel at import time; the recorder calls its
Triton functions (``verify_tree_greedy_triton``, XPU's path) itself.
"""


def _no() -> bool:
    return False


is_cpu = is_cuda = is_hip = is_musa = is_npu = is_xpu = _no
