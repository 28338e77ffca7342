#!/usr/bin/env python3
"""Regenerate the golden vectors in ``spec/vectors/*.json`` from the reference implementation.

Usage::

    python spec/vectors/generate.py            # rewrite the JSON files next to this script
    python spec/vectors/generate.py --out DIR  # write them into DIR instead

The generator is the package ``spec/vectors/generation/`` (one module per family, described
in its ``__init__``); this script puts it and the repository root (for the proofs' exact
oracle of block verification, ``proofs/exact_block.py``) on the import path and runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from generation.families import main  # noqa: E402  (the path above makes it importable)

if __name__ == "__main__":
    sys.exit(main())
