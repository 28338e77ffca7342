"""The functional core: pure, typed functions on `mlx.core` arrays.

Every acceptance decision lives here. Nothing in this package keeps state, reads a clock
or draws randomness of its own: uniforms come in as arguments (`randomness` derives
them from a seed and a position), so each decision replays bit for bit. The core imports
neither the shell nor the command line, nor mlx-lm (enforced by the import contracts in
pyproject.toml).
"""

import warnings
from collections.abc import Callable


def deprecated_names(module: str, namespace: dict[str, object],
                     renamed: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` serving each old name in `renamed` as the name that replaces
    it, with a DeprecationWarning naming both; any other missing name is an AttributeError.

    `namespace` is the module's ``globals()``, read when a name is asked for.
    """

    def module_getattr(name: str) -> object:
        if name in renamed:
            warnings.warn(f"{module}.{name} is deprecated: use {renamed[name]}",
                          DeprecationWarning, stacklevel=2)
            return namespace[renamed[name]]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return module_getattr
