"""The imperative shell: models, caches, counters and timings around the core.

`generator` runs speculative rounds over any pair mlx-lm loads, `loading` finds the
models, `measure` times the pieces of a round. The shell calls the core for every
decision and is the only layer that imports mlx-lm.
"""
