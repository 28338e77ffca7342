"""Tree-attention mask against batched root-to-leaf paths, on the demo target (a 2 x 3 tree).

Writes the markdown record to stdout:
``PYTHONPATH=impl python docs/results/tree_forward.py > docs/results/tree-forward.md``.
"""

from __future__ import annotations

import platform
import random
import time
from typing import Any

import mlx.core as mx
import mlx_lm
from mlx_lm.models.cache import KVCache, make_prompt_cache

from specaccept.demo import target_path
from specaccept.shell.tree_generator import full_tree_parents

WIDTH, DEPTH = 2, 3
model, tokenizer = mlx_lm.load(str(target_path()))[:2]
context = list(tokenizer.encode("ROMEO:\nWhat say you to the matter of the day?\n" * 4))
parents = full_tree_parents(WIDTH, DEPTH)
size, leaves = len(parents), WIDTH**DEPTH
rng = random.Random(0)
nodes = [rng.randrange(67) for _ in range(size)]
current = context[-1]
depth = [0]
for parent in parents:
    depth.append(depth[parent + 1] + 1)
ancestors: list[set[int]] = []
for i, parent in enumerate(parents):
    ancestors.append({i} | (ancestors[parent] if parent >= 0 else set()))
tree_rows = [[True] + [False] * size] + [
    [True] + [j in ancestors[i] for j in range(size)] for i in range(size)]


class TreeMaskCache(KVCache):  # type: ignore[misc]
    """mlx-lm asks the first layer's cache for the mask: answer with the tree's."""

    def make_mask(self, n: int, **kwargs: Any) -> mx.array:
        prefix = mx.ones((n, self.offset), dtype=mx.bool_)
        return mx.concatenate([prefix, mx.array(tree_rows)], axis=1)


prefill = make_prompt_cache(model)
model(mx.array(context[:-1])[None], cache=prefill)
saved = [(c.keys[..., : c.offset, :], c.values[..., : c.offset, :], c.offset) for c in prefill]
mx.eval(saved)


def fresh(kind: type, rows: int = 1) -> list[Any]:
    caches = []
    for keys, values, offset in saved:
        cache = kind()
        cache.keys, cache.values = mx.repeat(keys, rows, axis=0), mx.repeat(values, rows, axis=0)
        cache.offset = offset
        caches.append(cache)
    return caches


def leaf_path(leaf: int) -> list[int]:
    node, path = sum(WIDTH**t for t in range(1, DEPTH)) + leaf, []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return [current] + [nodes[v] for v in reversed(path)]


paths = [leaf_path(leaf) for leaf in range(leaves)]


def tree_forward() -> mx.array:
    return model(mx.array([current, *nodes])[None], cache=fresh(TreeMaskCache))[0]


def path_forward() -> mx.array:
    return model(mx.array(paths), cache=fresh(KVCache, leaves))


def chain_forward(tokens: list[int]) -> mx.array:
    return model(mx.array(tokens)[None], cache=fresh(KVCache))[0]


tree, batched = tree_forward(), path_forward()
worst, argmax_differs = 0.0, 0
for v in range(size):
    d = depth[v + 1]
    leaf = (v - sum(WIDTH**t for t in range(1, d))) * (leaves // WIDTH**d)
    difference = mx.abs(tree[v + 1] - batched[leaf, d])
    worst = max(worst, float(difference.max()))
    argmax_differs += int(mx.argmax(tree[v + 1]).item() != mx.argmax(batched[leaf, d]).item())
exact = float(mx.abs(chain_forward(paths[-1]) - batched[-1]).max())


def median_ms(fn: Any, repeats: int = 50) -> float:
    for _ in range(5):
        mx.eval(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        mx.eval(fn())
        times.append(time.perf_counter() - start)
    return sorted(times)[repeats // 2] * 1e3


print(f"`PYTHONPATH=impl python docs/results/tree_forward.py > docs/results/tree-forward.md`"
      f" ({platform.machine()} CPU, mlx {mx.__version__}, mlx-lm {mlx_lm.__version__})\n")
print(f"Demo target, a context of {len(context)} tokens, the full tree of width {WIDTH} and "
      f"depth {DEPTH}: {size} nodes, {leaves} root-to-leaf paths.\n")
print("| forward | target logits of the tree's nodes | median of 50 |")
print("|---|---|---|")
print(f"| tree-attention mask, {size + 1} tokens in breadth-first order, through mlx-lm's "
      f"mask hook | differ from the chain's by up to {worst:.2f} (argmax at {argmax_differs} "
      f"of {size} nodes): node i sits at position offset + i, not offset + its depth | "
      f"{median_ms(tree_forward):.1f} ms |")
print(f"| {leaves} batched paths of {DEPTH + 1} tokens (cache copied to {leaves} rows) | "
      f"equal a batch-1 chain forward of the path (max difference {exact:.1e}) | "
      f"{median_ms(path_forward):.1f} ms |")
print(f"| reference: one chain of {size + 1} tokens | | "
      f"{median_ms(lambda: chain_forward([current, *nodes])):.1f} ms |")
print(f"| reference: one chain of {DEPTH + 1} tokens | | "
      f"{median_ms(lambda: chain_forward(paths[0])):.1f} ms |")
