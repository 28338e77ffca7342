"""Record SGLang's tree verification as a conformance trace of ``tree-round`` records.

    python examples/engines/sglang/record.py --trees 1000 --out sglang.jsonl
    specaccept conform sglang.jsonl

Runs SGLang's own verification code, loaded at run time from outside this repository:

* ``--kernel cuda``: the CUDA kernel ``TreeSpeculativeSamplingTargetOnly`` of the SGLang
  0.5.23 wheel (``sglang/kernels/jit/include/sgl_kernel/speculative/sampling.cuh``) with
  FlashInfer 0.7.2's top-level headers, built here as a small PyTorch extension (needs
  nvcc and a GPU);
* ``--kernel triton`` (default): the Triton port of that kernel written for ROCm
  (``python/sglang/kernels/ops/speculative/tree_sampling.py`` of sgl-project/sglang at
  commit ba2453e4, pull request 34140; in no released wheel), on the CPU under Triton's
  interpreter or on a GPU.

Each tree is random: a shape of up to ``--max-nodes`` drafts and depth ``--max-depth``,
target rows drawn as a softmax of random logits, some truncated to a top-k (so candidates
with p = 0 occur), and candidates chosen as the distinct top tokens of a noisy copy of the
logits (drafter-side information). ``--rows numpy`` draws them on the CPU one row at a time;
``--rows torch`` (the default with ``--kernel cuda``) a batch at a time by a torch generator
on ``--device`` (`draw_batch`): other trees from the same seed. ``layout.py`` says how the
kernel's arrays become a tree round. ``--fixed-cases`` runs SGLang's seven fixed cases
instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

if __package__ in (None, ""):  # run as a script: make `engines.sglang` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "impl"))  # the trace writer

import numpy as np

import specaccept_trace
from engines.sglang import layout

SGLANG = "sglang==0.5.23"
FLASHINFER = "flashinfer-python==0.7.2"
CUDA_KERNEL = "sglang/kernels/jit/include/sgl_kernel/speculative/sampling.cuh"
CUDA_KERNEL_SHA256 = "5dc446636f189325f4c6f5588ebe02f77c50d3e8dc453f6d13f79d7abd2e6e7d"
FLASHINFER_HEADERS = "flashinfer/data/include/flashinfer/"
TRITON_PORT_COMMIT = "ba2453e443b9548d4b16b46c7b9b158befa5d972"
TRITON_PORT_PATH = "python/sglang/kernels/ops/speculative/tree_sampling.py"
TRITON_PORT_SHA256 = "126ac5161f028d807dbb90e2f78094c04dd91a0a88ea5100e9d7397f71d1fd17"
TRITON_PORT_URL = (f"https://raw.githubusercontent.com/sgl-project/sglang/{TRITON_PORT_COMMIT}/"
                   f"{TRITON_PORT_PATH}")
DEFAULT_CACHE = Path(os.environ.get("SPECACCEPT_ENGINE_CACHE",
                                    Path.home() / ".cache" / "specaccept-engines"))


_FIXED_CASES_VOCAB = 20
"""The fixed cases' largest V; their smaller rows are padded with zeros in the trace."""


class RecorderError(Exception):
    """A bad argument or a missing engine file: printed as one line, exit status 2."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- SGLang's files, from its distributions ------------------------------------------------


def _wheel(cache: Path, requirement: str) -> Path:
    """The pinned wheel in the cache, downloaded by pip (no dependencies) if missing."""
    name, version = requirement.split("==")
    stem = name.replace("-", "_")
    found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        result = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                 "--only-binary=:all:", requirement, "-d", str(cache)],
                                check=False, capture_output=True, text=True)
        found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
        if result.returncode != 0 or not found:
            raise RecorderError(f"--cache {cache}: could not download {requirement} with pip "
                                f"({result.stderr.strip().splitlines()[-1:]})")
    return found[0]


def cuda_sources(cache: Path) -> tuple[Path, dict[str, str]]:
    """Extract SGLang's kernel header and FlashInfer's top-level headers into the cache.

    Returns the include folder and the SHA-256 of what was loaded. Already-extracted files
    are reused (a machine without the wheels can be handed the folder).
    """
    include = cache / "extracted" / "sglang-0.5.23-include"
    kernel = include / "sgl_kernel" / "speculative" / "sampling.cuh"
    headers = include / "flashinfer"
    if not kernel.exists() or not (headers / "sampling.cuh").exists():
        kernel.parent.mkdir(parents=True, exist_ok=True)
        headers.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(_wheel(cache, SGLANG)) as wheel:
            kernel.write_bytes(wheel.read(CUDA_KERNEL))
        with zipfile.ZipFile(_wheel(cache, FLASHINFER)) as wheel:
            for member in wheel.namelist():
                rest = member.removeprefix(FLASHINFER_HEADERS)
                if member.startswith(FLASHINFER_HEADERS) and rest and "/" not in rest:
                    (headers / rest).write_bytes(wheel.read(member))
    digest = _sha256(kernel)
    if digest != CUDA_KERNEL_SHA256:
        raise RecorderError(f"--cache {cache}: {kernel} has SHA-256 {digest}, not SGLang "
                            f"0.5.23's {CUDA_KERNEL_SHA256}")
    return include, {"sampling.cuh": digest,
                     "flashinfer/sampling.cuh": _sha256(headers / "sampling.cuh")}


def triton_port(source: Path) -> tuple[ModuleType, str]:
    """Import the Triton port from `source`, checked against its pinned SHA-256."""
    if not source.is_file():
        raise RecorderError(
            f"--triton-source {source}: no such file. The Triton port is in no SGLang "
            f"release; fetch it from {TRITON_PORT_URL} (SHA-256 {TRITON_PORT_SHA256})")
    digest = _sha256(source)
    if digest != TRITON_PORT_SHA256:
        raise RecorderError(f"--triton-source {source}: SHA-256 {digest}, not the pinned "
                            f"{TRITON_PORT_SHA256} of sgl-project/sglang@{TRITON_PORT_COMMIT}")
    import importlib.util

    spec = importlib.util.spec_from_file_location("sglang_tree_sampling_port", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, digest


# Our own launcher of SGLang's kernel: the template instantiation its JIT wrapper makes
# (1024 threads, FlashInfer's scan and reduce algorithms, float32, int32 outputs, int64 tree).
_CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <sgl_kernel/speculative/sampling.cuh>

template <uint32_t VEC>
void launch(torch::Tensor predicts, torch::Tensor accept_index, torch::Tensor accept_num,
            torch::Tensor candidates, torch::Tensor retrive_index, torch::Tensor next_token,
            torch::Tensor next_sibling, torch::Tensor coins, torch::Tensor final_coins,
            torch::Tensor target_probs, torch::Tensor draft_probs, double threshold_single,
            double threshold_acc) {
  using namespace flashinfer::sampling;
  constexpr uint32_t threads = 1024;
  constexpr size_t smem = sizeof(SamplingTempStorage<threads, SCAN_ALGO, REDUCE_ALGO>);
  auto kernel = sglang::speculative_sampling::TreeSpeculativeSamplingTargetOnly<
      threads, SCAN_ALGO, REDUCE_ALGO, VEC, true, float, int32_t, int64_t>;
  TORCH_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)
              == cudaSuccess, "cudaFuncSetAttribute failed");
  uint32_t batch = candidates.size(0);
  kernel<<<batch, threads, smem, at::cuda::getCurrentCUDAStream()>>>(
      predicts.data_ptr<int32_t>(), accept_index.data_ptr<int32_t>(),
      accept_num.data_ptr<int32_t>(), candidates.data_ptr<int64_t>(),
      retrive_index.data_ptr<int64_t>(), next_token.data_ptr<int64_t>(),
      next_sibling.data_ptr<int64_t>(), coins.data_ptr<float>(), final_coins.data_ptr<float>(),
      target_probs.data_ptr<float>(), draft_probs.data_ptr<float>(), batch,
      accept_index.size(1), candidates.size(1), target_probs.size(2),
      static_cast<float>(threshold_single), std::max(static_cast<float>(threshold_acc), 1e-9f));
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "kernel launch failed");
}

void verify(torch::Tensor predicts, torch::Tensor accept_index, torch::Tensor accept_num,
            torch::Tensor candidates, torch::Tensor retrive_index, torch::Tensor next_token,
            torch::Tensor next_sibling, torch::Tensor coins, torch::Tensor final_coins,
            torch::Tensor target_probs, torch::Tensor draft_probs, double threshold_single,
            double threshold_acc) {
  auto vocab = target_probs.size(2);
  auto run = vocab % 4 == 0 ? launch<4> : vocab % 2 == 0 ? launch<2> : launch<1>;
  run(predicts, accept_index, accept_num, candidates, retrive_index, next_token, next_sibling,
      coins, final_coins, target_probs, draft_probs, threshold_single, threshold_acc);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("verify", &verify); }
"""


def cuda_kernel(cache: Path) -> tuple[Callable[..., None], dict[str, str]]:
    """Build SGLang's CUDA kernel as a PyTorch extension; returns its launcher."""
    from torch.utils import cpp_extension

    include, digests = cuda_sources(cache)
    build = cache / "extracted" / "build-sglang-0.5.23"
    build.mkdir(parents=True, exist_ok=True)
    source = build / "tree_verify.cu"
    if not source.exists() or source.read_text("utf-8") != _CUDA_WRAPPER:
        # Rewritten only when it changed: a newer file makes every recorder rebuild (a minute).
        source.write_text(_CUDA_WRAPPER, "utf-8")
    try:
        module = _build(cpp_extension, source, include, build)
    except Exception as error:  # nvcc, ninja and the loader raise their own types
        raise RecorderError(f"--kernel cuda: building SGLang's kernel failed: "
                            f"{str(error).strip().splitlines()[-1:]}") from error
    verify: Callable[..., None] = module.verify
    return verify, digests


def _build(cpp_extension: Any, source: Path, include: Path, build: Path) -> Any:
    return cpp_extension.load(
        name="sglang_tree_verify", sources=[str(source)], extra_include_paths=[str(include)],
        build_directory=str(build), verbose=False,
        # PyTorch defines these four; FlashInfer's headers need half and bfloat16 operators.
        extra_cuda_cflags=["-std=c++17", "--expt-relaxed-constexpr",
                           "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                           "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__"])


# --- running a batch ----------------------------------------------------------------------


def run_kernel(
    verify: Callable[..., None], requests: Sequence[layout.KernelRequest], max_depth: int,
    thresholds: tuple[float, float], device: str,
) -> list[tuple[list[int], list[int]]]:
    """Verify `requests` in one kernel call; per request (accepted slots, tokens along path).

    The requests share the kernel's slot count (the largest; shorter ones are padded with
    unlinked slots) and its ``accept_index`` width, ``max_depth + 1``.
    """
    import torch

    batch = len(requests)
    slots = max(len(r.candidates) for r in requests)
    vocab = len(requests[0].target_rows[0])
    candidates = torch.zeros((batch, slots), dtype=torch.int64)
    links = torch.full((2, batch, slots), -1, dtype=torch.int64)
    coins = torch.zeros((batch, slots), dtype=torch.float32)
    target = torch.zeros((batch, slots, vocab), dtype=torch.float32)
    target[:, :, 0] = 1.0  # padding slots hold a valid row the kernel never reads
    for b, r in enumerate(requests):
        n = len(r.candidates)
        candidates[b, :n] = torch.tensor(r.candidates)
        links[0, b, :n] = torch.tensor(r.next_token)
        links[1, b, :n] = torch.tensor(r.next_sibling)
        coins[b, :n] = torch.tensor(r.coins, dtype=torch.float32)
        target[b, :n] = torch.tensor(r.target_rows, dtype=torch.float32)
    final = torch.tensor([r.final_coin for r in requests], dtype=torch.float32)
    return _launch(verify, candidates, links, coins, final, target.to(device), max_depth,
                   thresholds, device)


def _launch(
    verify: Callable[..., None], candidates: Any, links: Any, coins: Any, final: Any,
    target: Any, max_depth: int, thresholds: tuple[float, float], device: str,
) -> list[tuple[list[int], list[int]]]:
    """One kernel call on the batch's tensors (`target` already on `device`)."""
    import torch

    batch, slots = candidates.shape
    retrive = torch.arange(batch * slots, dtype=torch.int64).view(batch, slots)
    predicts = torch.full((batch * slots,), -1, dtype=torch.int32)
    accept_index = torch.full((batch, max_depth + 1), -1, dtype=torch.int32)
    accept_num = torch.zeros((batch,), dtype=torch.int32)
    tensors = [predicts, accept_index, accept_num, candidates, retrive, links[0].contiguous(),
               links[1].contiguous(), coins, final]
    tensors = [t.to(device) for t in tensors] + [target, torch.zeros_like(target)]
    verify(*tensors, float(thresholds[0]), float(thresholds[1]))
    predicts_h, index_h, num_h = (t.cpu().tolist() for t in tensors[:3])
    out = []
    for b in range(batch):
        count = num_h[b]
        path_global = index_h[b][: count + 1]
        accepted = [g - b * slots for g in path_global[1:]]
        out.append((accepted, [predicts_h[g] for g in path_global]))
    return out


def _greedy_verify(module: ModuleType) -> Callable[..., None]:
    """SGLang's greedy verifier as `eagle_sample` calls it: the argmax of each slot's row."""
    def verify(*tensors: Any) -> None:
        import torch

        (predicts, accept_index, accept_num, candidates, retrive, next_token, next_sibling,
         _coins, _final, target, _draft, _single, _acc) = tensors
        module.verify_tree_greedy_triton(
            predicts=predicts, accept_index=accept_index, accept_token_num=accept_num,
            candidates=candidates, retrieve_index=retrive, retrieve_next_token=next_token,
            retrieve_next_sibling=next_sibling, target_predict=torch.argmax(target, dim=-1))

    return verify


def _triton_verify(module: ModuleType) -> Callable[..., None]:
    def verify(*tensors: Any) -> None:
        *arrays, threshold_single, threshold_acc = tensors
        module.tree_speculative_sampling_target_only_triton(
            *arrays, threshold_single=threshold_single, threshold_acc=threshold_acc)

    return verify


# --- random trees -------------------------------------------------------------------------


def random_parents(rng: np.random.Generator, max_nodes: int, max_depth: int) -> list[int]:
    """A random tree shape, level by level: the root has 1 to 3 children, a node 0 to 3."""
    parents: list[int] = []
    frontier, depth = [-1], 0
    while frontier and depth < max_depth and len(parents) < max_nodes:
        next_frontier = []
        for parent in frontier:
            for _ in range(int(rng.integers(0 if parent >= 0 else 1, 4))):
                if len(parents) == max_nodes:
                    break
                parents.append(parent)
                next_frontier.append(len(parents) - 1)
        frontier, depth = next_frontier, depth + 1
    return parents


def random_request(
    rng: np.random.Generator, vocab: int, max_nodes: int, max_depth: int,
) -> layout.KernelRequest:
    """One random tree in the kernel's slots, its target rows and its coins."""
    parents = random_parents(rng, max_nodes, max_depth)
    kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for node, parent in enumerate(parents):
        kids[parent + 1].append(node)
    rows, tokens = [], [0] * len(parents)
    for row_kids in kids:
        logits = rng.normal(0.0, float(rng.uniform(1.0, 4.0)), vocab)
        if rng.random() < 0.5:  # a top-k target: tokens outside it have p = 0 exactly
            keep = int(rng.integers(1, vocab + 1))
            logits[np.argsort(logits)[: vocab - keep]] = -np.inf
        p = np.exp(logits - logits.max())
        rows.append((p / p.sum()).astype(np.float32))
        noise = rng.normal(0.0, float(rng.uniform(0.2, 1.5)), vocab)
        noisy = np.where(np.isfinite(logits), logits, -30.0) + noise
        for node, token in zip(row_kids, np.argsort(-noisy)[: len(row_kids)], strict=False):
            tokens[node] = int(token)
    coins = rng.random(len(parents) + 1, dtype=np.float32)
    final = float(rng.random(dtype=np.float32))
    return layout.request_from_parents(
        parents, tokens, int(rng.integers(vocab)), [r.tolist() for r in rows],
        [float(c) for c in coins], final)


# --- random trees drawn by torch, a batch at a time ----------------------------------------

MAX_CHILDREN = 3
"""`random_parents` gives a row at most this many children."""


@dataclass(frozen=True)
class DrawnBatch:
    """Random trees whose rows a torch generator drew, node i of each at slot i + 1."""

    parents: list[list[int]]
    requests: list[layout.KernelRequest]
    """Each tree's slots, coins and final coin; its `target_rows` are left empty."""
    target: Any
    """`[trees, slots, V]` float32 on the generator's device: the kernel's ``target_probs``
    (slots past a tree's own hold a row the kernel never reads)."""
    rows: Any
    """`[R, V]` float32 on the host: every tree's rows, one tree after the other."""
    first_row: list[int]
    """Tree b's rows are ``rows[first_row[b] : first_row[b] + len(parents[b]) + 1]``."""


def draw_batch(
    rng: np.random.Generator, generator: Any, trees: int, vocab: int, max_nodes: int,
    max_depth: int,
) -> DrawnBatch:
    """`trees` random trees as `random_request` makes them, their rows drawn by torch.

    The shapes and every per-row number (logit scale, whether and where the row is cut to
    a top-k, noise scale, coins) come from `rng`; the `[R, V]` draws (the logits and the
    drafter's noise) from `generator`, on its device, for all R rows of the batch at
    once. The top-k cut keeps the `keep` largest logits of a row (ties with the keep-th
    kept too); candidates are a row's `MAX_CHILDREN` largest noisy logits
    (`torch.topk`), in order. The rows come to the host in one transfer. Not the trees
    `random_request` draws from the same seed: another source, drawn the same way.
    """
    import torch

    if vocab < MAX_CHILDREN:
        raise RecorderError(f"--vocab {vocab}: drawing rows with torch needs at least "
                            f"{MAX_CHILDREN} tokens (a row's distinct candidates)")
    device = generator.device
    parents = [random_parents(rng, max_nodes, max_depth) for _ in range(trees)]
    counts = [len(p) + 1 for p in parents]
    first_row = [int(x) for x in np.cumsum([0, *counts[:-1]])]
    total = sum(counts)
    scale = rng.uniform(1.0, 4.0, total)
    cut_rows = rng.random(total) < 0.5
    keep = rng.integers(1, vocab + 1, total)
    noise_scale = rng.uniform(0.2, 1.5, total)
    coins = rng.random(total, dtype=np.float32)
    finals = rng.random(trees, dtype=np.float32)
    roots = rng.integers(vocab, size=trees)

    def column(values: Any, dtype: Any) -> Any:
        return torch.as_tensor(values, dtype=dtype).to(device)[:, None]

    shape = (total, vocab)
    logits = torch.randn(shape, generator=generator, device=device) * column(scale, torch.float32)
    kth = torch.sort(logits, dim=1, descending=True).values.gather(
        1, column(keep - 1, torch.int64))
    cut = column(cut_rows, torch.bool) & (logits < kth)  # p = 0 exactly below the top-k
    rows = torch.softmax(logits.masked_fill(cut, float("-inf")), dim=1)
    noise = torch.randn(shape, generator=generator, device=device)
    noisy = logits.masked_fill(cut, -30.0) + noise * column(noise_scale, torch.float32)
    top = torch.topk(noisy, MAX_CHILDREN, dim=1).indices.cpu().tolist()
    del logits, kth, cut, noise, noisy
    slots = max(counts)
    target = torch.zeros((trees, slots, vocab), dtype=torch.float32, device=device)
    target[:, :, 0] = 1.0
    tree_of = torch.repeat_interleave(torch.arange(trees), torch.tensor(counts))
    slot_of = torch.cat([torch.arange(c) for c in counts])
    target[tree_of.to(device), slot_of.to(device)] = rows
    requests = []
    for b, tree in enumerate(parents):
        tokens, taken = [0] * len(tree), [0] * (len(tree) + 1)
        for node, parent in enumerate(tree):
            tokens[node] = int(top[first_row[b] + parent + 1][taken[parent + 1]])
            taken[parent + 1] += 1
        row_coins = coins[first_row[b]: first_row[b] + counts[b]]
        requests.append(layout.request_from_parents(
            tree, tokens, int(roots[b]), [], [float(c) for c in row_coins], float(finals[b])))
    return DrawnBatch(parents, requests, target, rows.cpu().numpy(), first_row)


def run_drawn(
    verify: Callable[..., None], batch: DrawnBatch, max_depth: int,
    thresholds: tuple[float, float], device: str,
) -> list[tuple[list[int], list[int]]]:
    """Verify a drawn batch in one kernel call, its rows already on the device."""
    import torch

    trees, slots = batch.target.shape[:2]
    candidates = torch.zeros((trees, slots), dtype=torch.int64)
    links = torch.full((2, trees, slots), -1, dtype=torch.int64)
    coins = torch.zeros((trees, slots), dtype=torch.float32)
    for b, r in enumerate(batch.requests):
        n = len(r.candidates)
        candidates[b, :n] = torch.tensor(r.candidates)
        links[0, b, :n] = torch.tensor(r.next_token)
        links[1, b, :n] = torch.tensor(r.next_sibling)
        coins[b, :n] = torch.tensor(r.coins, dtype=torch.float32)
    final = torch.tensor([r.final_coin for r in batch.requests], dtype=torch.float32)
    return _launch(verify, candidates, links, coins, final, batch.target, max_depth,
                   thresholds, device)


# --- recording ----------------------------------------------------------------------------


def _write_round(
    run: specaccept_trace.RunWriter, request: layout.KernelRequest, max_depth: int,
    outcome: tuple[list[int], list[int]], strict: bool, extra: dict[str, Any],
    *, greedy: bool = False, sampled: bool = False,
) -> None:
    tree = layout.tree_round(request, max_depth, strict=strict)
    rows = np.zeros((len(tree.target_rows), run.trace.vocab_size), dtype="<f4")
    rows[:, : len(tree.target_rows[0])] = tree.target_rows  # the fixed cases' smaller V
    _write_tree(run, tree, rows, request.final_coin, outcome, extra, greedy=greedy,
                sampled=sampled)


def write_drawn_round(
    run: specaccept_trace.RunWriter, parents: Sequence[int], request: layout.KernelRequest,
    rows: Any, max_depth: int, outcome: tuple[list[int], list[int]], strict: bool,
    extra: dict[str, Any], *, greedy: bool = False, sampled: bool = False,
) -> None:
    """Write what `_write_round` writes for `request` with these rows (`[n + 1, V]`
    float32, node i's at i + 1), without reading the rows one value at a time.

    `layout.tree_round` renumbers the nodes level by level and leaves out those deeper
    than `max_depth`; a tree drawn level by level (`random_parents`: parents in
    nondecreasing order) within `max_depth` keeps its numbering, which is checked here.
    """
    depths = [0]
    for node, parent in enumerate(parents):
        if not -1 <= parent < node or (node and parent < parents[node - 1]):
            raise ValueError(f"parents {list(parents)}: not numbered level by level")
        depths.append(depths[parent + 1] + 1)
    if max(depths) > max_depth:
        raise ValueError(f"parents {list(parents)}: deeper than max_depth = {max_depth}")
    tokens = list(request.candidates[1:])
    coins = list(request.coins)
    accept = layout.accept_uniforms(parents, tokens, cast("Sequence[Sequence[float]]", rows),
                                    coins, strict=strict)
    tree = layout.TreeRound(list(parents), tokens, [], list(range(len(parents) + 1)), accept,
                            [0.0] * (max(depths) + 1))
    _write_tree(run, tree, np.asarray(rows, dtype="<f4"), request.final_coin, outcome, extra,
                greedy=greedy, sampled=sampled)


def _write_tree(
    run: specaccept_trace.RunWriter, tree: layout.TreeRound, rows: Any, final_coin: float,
    outcome: tuple[list[int], list[int]], extra: dict[str, Any], *, greedy: bool,
    sampled: bool,
) -> None:
    path, emitted, sample = layout.kernel_outcome(tree, outcome[0], outcome[1], final_coin)
    if greedy:
        # A greedy request's law is the one-hot row at the argmax (a sampled request's, with
        # --sampled, the row itself), and the verifier draws nothing: no uniforms.
        if not sampled:
            rows = np.eye(rows.shape[1], dtype="<f4")[np.argmax(rows, axis=1)]
        run.write_tree_round(
            scheme="deterministic", parents=tree.parents, node_tokens=tree.node_tokens,
            target=specaccept_trace.b64_block(rows.tobytes(), rows=rows.shape[0]), path=path,
            emitted=emitted, extra=extra or None)
        return
    if tree.slots != list(range(len(tree.slots))):
        extra = {**extra, "slots": tree.slots}
    run.write_tree_round(
        scheme="deterministic", parents=tree.parents, node_tokens=tree.node_tokens,
        target=specaccept_trace.b64_block(rows.tobytes(), rows=rows.shape[0]), path=path,
        emitted=emitted, uniforms={"accept": tree.accept, "sample": sample},
        extra=extra or None)


def _share_coin(request: layout.KernelRequest) -> layout.KernelRequest:
    """The planted mutant ``shared-coin``: one coin per tree, read by every row's children
    and by the draw after the path (the kernel reads, and the trace records, that coin)."""
    coin = request.coins[0]
    return dataclasses.replace(request, coins=(coin,) * len(request.coins), final_coin=coin)


def record_random(args: argparse.Namespace, verify: Callable[..., None],
                  writer: specaccept_trace.TraceWriter, strict: bool,
                  stages: dict[str, float] | None = None) -> int:
    rng = np.random.default_rng(args.seed)
    run = writer.start_run(f"sglang-seed-{args.seed}", extra={"seed": args.seed})
    done, step = 0, 0
    if args.rows == "torch":
        return _record_drawn(args, verify, run, rng, strict,
                             {} if stages is None else stages)
    while done < args.trees:
        size = min(args.batch, args.trees - done)
        requests = [random_request(rng, args.vocab, args.max_nodes, args.max_depth)
                    for _ in range(size)]
        if args.mutant == "shared-coin":
            requests = [_share_coin(r) for r in requests]
        outcomes = run_kernel(verify, requests, args.max_depth, tuple(args.thresholds),
                              args.device)
        for slot, (request, outcome) in enumerate(zip(requests, outcomes, strict=True)):
            _write_round(run, request, args.max_depth, outcome, strict,
                         {"step": step, "slot": slot}, greedy=args.kernel == "greedy-triton",
                         sampled=args.sampled)
        done, step = done + size, step + 1
    return done


def _record_drawn(args: argparse.Namespace, verify: Callable[..., None],
                  run: specaccept_trace.RunWriter, rng: np.random.Generator,
                  strict: bool, stages: dict[str, float]) -> int:
    """`record_random` with rows drawn by `draw_batch`; adds each stage's seconds (draw,
    kernel, write) to `stages`."""
    import torch

    generator = torch.Generator(device=args.device)
    generator.manual_seed(args.seed)
    done, step = 0, 0
    for stage in ("draw", "kernel", "write"):
        stages.setdefault(stage, 0.0)
    while done < args.trees:
        size = min(args.batch, args.trees - done)
        start = time.perf_counter()
        batch = draw_batch(rng, generator, size, args.vocab, args.max_nodes, args.max_depth)
        if args.mutant == "shared-coin":
            batch = dataclasses.replace(batch, requests=[_share_coin(r) for r in batch.requests])
        drawn = time.perf_counter()
        outcomes = run_drawn(verify, batch, args.max_depth, tuple(args.thresholds),
                             args.device)
        verified = time.perf_counter()
        stages["draw"] += drawn - start
        stages["kernel"] += verified - drawn
        for slot, (tree, request, outcome) in enumerate(zip(batch.parents, batch.requests,
                                                            outcomes, strict=True)):
            first = batch.first_row[slot]
            write_drawn_round(run, tree, request, batch.rows[first: first + len(tree) + 1],
                              args.max_depth, outcome, strict, {"step": step, "slot": slot},
                              greedy=args.kernel == "greedy-triton", sampled=args.sampled)
        stages["write"] += time.perf_counter() - verified
        done, step = done + size, step + 1
    return done


def record_fixed(args: argparse.Namespace, verify: Callable[..., None],
                 writer: specaccept_trace.TraceWriter, strict: bool) -> dict[str, Any]:
    """Run the seven fixed cases; write each case's requests as a run of its own."""
    summary: dict[str, Any] = {}
    cases = layout.load_fixed_cases()
    names = [c.name for c in cases]
    for name in args.case or []:
        if name not in names:
            raise RecorderError(f"--case {name!r}: not a fixed case; one of {names}")
    for case in cases:
        if args.case and case.name not in args.case:
            continue
        outcomes = run_kernel(verify, case.requests, case.max_depth,
                              (case.threshold_single, case.threshold_acc), args.device)
        run = writer.start_run(case.name, extra={
            "thresholds": [case.threshold_single, case.threshold_acc]})
        agrees = True
        for request, outcome, slots, tokens in zip(case.requests, outcomes,
                                                    case.expected_accepted,
                                                    case.expected_tokens, strict=True):
            agrees &= outcome[0] == slots and outcome[1][: len(tokens)] == tokens
            _write_round(run, request, case.max_depth, outcome, strict, {})
        summary[case.name] = {"accepted": [o[0] for o in outcomes],
                              "tokens": [o[1] for o in outcomes],
                              "agrees_with_sglang": agrees}
    return summary


def _probability(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not 0.0 <= value <= 1.0:
            raise argparse.ArgumentTypeError(f"{name} must lie in [0, 1], got {text}")
        return value

    return parse


def _positive(name: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{name} must be >= 1, got {value}")
        return value

    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=_positive("--trees"), default=1000)
    parser.add_argument("--out", type=Path, required=True, help="trace path (.gz: gzipped)")
    parser.add_argument("--kernel", choices=("triton", "cuda", "greedy-triton"),
                        default="triton",
                        help="'greedy-triton': the released greedy verifier "
                             "(verify_tree_greedy_triton), on greedy requests")
    parser.add_argument("--thresholds", nargs=2, metavar=("SINGLE", "ACC"),
                        type=_probability("--thresholds"), default=[1.0, 1.0],
                        help="threshold_single and threshold_acc (1 1: lossless)")
    parser.add_argument("--sampled", action="store_true",
                        help="with --kernel greedy-triton: record each tree with the law its "
                             "request samples from (the random row), as SGLang does on CPU "
                             "and XPU for a sampled request (the trace must fail)")
    parser.add_argument("--mutant", choices=("shared-coin",),
                        help="plant a wrong engine: 'shared-coin' hands the kernel one coin "
                             "per tree for every row and the final draw (the trace must fail "
                             "tree-fresh)")
    parser.add_argument("--fixed-cases", action="store_true",
                        help="run SGLang's seven fixed cases instead of random trees")
    parser.add_argument("--case", action="append",
                        help="with --fixed-cases: run only this case (repeatable)")
    parser.add_argument("--summary", type=Path, help="write a JSON summary here")
    parser.add_argument("--vocab", type=_positive("--vocab"), default=64)
    parser.add_argument("--batch", type=_positive("--batch"), default=64)
    parser.add_argument("--max-nodes", type=_positive("--max-nodes"), default=12)
    parser.add_argument("--max-depth", type=_positive("--max-depth"), default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", choices=("numpy", "torch"),
                        help="how random trees' rows are drawn: 'numpy', on the CPU one row "
                             "at a time (the default, but with --kernel cuda); 'torch', a "
                             "batch at a time by a torch generator on --device (the default "
                             "with --kernel cuda; other trees than 'numpy' draws)")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        help="default: cuda for --kernel cuda, else cpu (Triton's interpreter)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="where the pinned wheels and extracted files live")
    parser.add_argument("--triton-source", type=Path,
                        help="the Triton port (default: CACHE/sglang-ba2453e/tree_sampling.py)")
    args = parser.parse_args(argv)
    args.device = args.device or ("cuda" if args.kernel == "cuda" else "cpu")
    args.rows = args.rows or ("torch" if args.kernel == "cuda" else "numpy")
    args.triton_source = args.triton_source or (
        args.cache / f"sglang-{TRITON_PORT_COMMIT[:7]}" / "tree_sampling.py")
    if args.kernel == "cuda" and args.device != "cuda":
        parser.error("--device cpu: the CUDA kernel runs on a GPU only")
    if args.mutant and (args.fixed_cases or args.kernel == "greedy-triton"):
        parser.error("--mutant plants a wrong coin in random trees of a sampling kernel: not "
                     "with --fixed-cases or --kernel greedy-triton")
    if args.sampled and args.kernel != "greedy-triton":
        parser.error("--sampled needs --kernel greedy-triton")
    if args.kernel == "greedy-triton" and args.fixed_cases:
        parser.error("--fixed-cases are the sampling kernel's cases, not --kernel greedy-triton's")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.kernel == "triton":
            if args.device == "cpu":
                os.environ["TRITON_INTERPRET"] = "1"  # read when the port's kernel is defined
            module, digest = triton_port(args.triton_source)
            verify, loaded = _triton_verify(module), {"tree_sampling.py": digest}
            engine = (f"SGLang Triton port of tree_speculative_sampling_target_only "
                      f"(sgl-project/sglang@{TRITON_PORT_COMMIT[:10]}), {args.device}")
        elif args.kernel == "greedy-triton":
            if args.device == "cpu":
                os.environ["TRITON_INTERPRET"] = "1"
            import tempfile

            from engines.sglang import record_chain
            from engines.sglang.record import RecorderError as LoadError  # as record_chain's

            scratch = tempfile.TemporaryDirectory(prefix="specaccept-sglang-")
            try:
                module, digest = record_chain.load_greedy_kernel(args.cache,
                                                                 Path(scratch.name))
            except LoadError as error:  # this script's class, imported again as a module
                raise RecorderError(str(error)) from None
            verify, loaded = _greedy_verify(module), {"spec_tree.py": digest}
            engine = (f"SGLang 0.5.23 verify_tree_greedy_triton "
                      f"({'sampled' if args.sampled else 'greedy'} requests), {args.device}")
        else:
            verify, loaded = cuda_kernel(args.cache)
            engine = "SGLang 0.5.23 TreeSpeculativeSamplingTargetOnly (CUDA), FlashInfer 0.7.2"
        strict = args.kernel == "cuda"  # the CUDA kernel accepts on coin < cdf, the port on <=
        vocab = _FIXED_CASES_VOCAB if args.fixed_cases else args.vocab
        header = {"kernel": args.kernel, "loaded_sha256": loaded,
                  "thresholds": list(args.thresholds), "vocab": vocab}
        if args.mutant:
            header["mutant"] = args.mutant
        if args.rows == "torch" and not args.fixed_cases:
            import torch

            header["rows"] = f"torch {torch.__version__}, generator on {args.device}"
        start = time.perf_counter()
        with specaccept_trace.TraceWriter(str(args.out), vocab_size=vocab, engine=engine,
                                          extra=header) as writer:
            if args.fixed_cases:
                summary: dict[str, Any] = {"fixed_cases": record_fixed(args, verify, writer,
                                                                       strict)}
                count = sum(len(v["accepted"]) for v in summary["fixed_cases"].values())
            else:
                stages: dict[str, float] = {}
                count = record_random(args, verify, writer, strict, stages)
                summary = {"seconds_by_stage": {k: round(v, 2) for k, v in stages.items()}
                           } if stages else {}
        seconds = time.perf_counter() - start
    except (RecorderError, specaccept_trace.TraceWriteError) as error:
        print(f"record.py: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"record.py: --out {args.out}: {error.strerror or error}", file=sys.stderr)
        return 2
    summary.update(trees=count, seconds=round(seconds, 2), engine=engine, **header)
    print(json.dumps(summary))
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=1) + "\n", "utf-8")
    print(f"{count} trees in {seconds:.1f} s ({count / seconds:.1f} trees/s) -> {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
