"""An autodoc adjustment for api.md: dataclass signatures.

For a field declared with ``field(default_factory=f)`` inspect renders the
default as ``<factory>``, which is not Python, so Sphinx cannot parse the
signature, falls back to splitting it on commas and then cross-references
fragments such as ``tuple[int``. `_dataclass_signature` writes ``f()`` there
instead, which is what the default is.

Docstrings in impl/ avoid an opening ``"word: text"`` on attributes: napoleon
(Google style) reads the text before the colon as the attribute's type.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _dataclass_signature(
    app: Sphinx, what: str, name: str, obj: Any, options: Any,
    signature: str | None, return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    if what != "class" or signature is None or "<factory>" not in signature:
        return None
    if not dataclasses.is_dataclass(obj):
        return None
    factories = [
        f.default_factory for f in dataclasses.fields(obj)
        if f.init and f.default_factory is not dataclasses.MISSING
    ]
    if signature.count("<factory>") != len(factories):
        logger.warning(
            f"docs/_ext/api_support.py: cannot match the <factory> defaults of {name}",
            type="specaccept", subtype="api",
        )
        return None
    for factory in factories:
        spelled = getattr(factory, "__qualname__", None) or repr(factory)
        signature = signature.replace("<factory>", f"{spelled}()", 1)
    return signature, return_annotation


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.autodoc")
    app.connect("autodoc-process-signature", _dataclass_signature)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
