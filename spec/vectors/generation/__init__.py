"""The generator of the golden vectors in ``spec/vectors/*.json``, one module per family.

``spec/vectors/generate.py`` runs it::

    python spec/vectors/generate.py            # rewrite the JSON files in spec/vectors/
    python spec/vectors/generate.py --out DIR  # write them into DIR instead

`families` holds the table of families and the command line; `common` what every family
shares; each other module writes one family (or two small ones) and checks every case.

The output is a pure function of this package, of ``proofs/exact_block.py`` and of the
library: no clock, no PRNG state, no environment variable, no platform-dependent
formatting. Pseudo-random cases come from a fixed 64-bit linear congruential generator
written out in `common`, so they are the same on every machine and every NumPy / MLX
version.

Every case is checked before it is written against an expectation computed independently of
the library: exact rational arithmetic (``fractions.Fraction``) for the acceptance rules (for block
verification, the proofs' own rule, ``proofs/exact_block.py``),
the residual, the inverse-CDF draw, the closed forms and the rewind plan, and hand-written
values (or a float64 softmax of hand-written effective logits) for the sampler chain, the
formulas of spec/randomness.md in plain integers for the uniforms, and, for a seeded run,
the same run in exact arithmetic on uniforms keyed by hand. A library change that alters a
result therefore stops this script instead of silently rewriting a vector;
``tests/test_golden_vectors.py`` fails if a regenerated file differs from the committed one.
The schema is documented in ``spec/vectors/schema.md``.
"""

