"""Machine checks of the proofs in this folder (collected by pytest as ``proofs.test_*``).

The package marker keeps these modules' names (``proofs.test_closed_forms`` ...) apart
from any test of the same file name under ``tests/``.
"""
