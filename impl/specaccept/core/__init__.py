"""The functional core: pure, typed functions on `mlx.core` arrays.

Every acceptance decision lives here. Nothing in this package keeps state, reads a clock
or draws randomness of its own: uniforms come in as arguments (`randomness` derives
them from a seed and a position), so each decision replays bit for bit. The core imports
neither the shell nor the command line, nor mlx-lm (enforced by the import contracts in
pyproject.toml).
"""
