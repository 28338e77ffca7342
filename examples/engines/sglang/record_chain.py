"""Record SGLang's rejection-sampling chain verifier as a conformance trace of rounds.

    python examples/engines/sglang/record_chain.py --rounds 1000 --out chain.jsonl.gz
    python examples/engines/sglang/record_chain.py --rounds 1000 --block --out block.jsonl.gz
    specaccept conform chain.jsonl.gz

Runs ``chain_speculative_sampling_triton`` (``sglang/kernels/ops/speculative/
reject_sampling.py``), the verifier SGLang 0.5.23 calls when
``speculative_use_rejection_sampling`` is set (``block_verification=True`` with
``speculative_use_block_verification``). The file is extracted at run time from the pinned
PyPI wheel and checked against its SHA-256; it imports only Triton, so it runs as shipped,
on the CPU under Triton's interpreter (``TRITON_INTERPRET=1``, set here) or on a GPU.

The kernel takes its randomness as arguments (``uniform_samples``,
``uniform_samples_for_final_sampling``), so every decision is recorded with the very
uniform that made it and replays exactly. A synthetic history-dependent pair
(``engines/synthetic_pair.py``) stands in for the models: several requests per batch, each
with its own temperature (and some with a target top-k, so drafts of target probability 0
occur). ``chain_layout.py`` maps SGLang's arrays onto the trace.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):  # run as a script: make `engines` importable
    sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[2] / "impl"))  # the dependency-free trace writer

import numpy as np  # noqa: E402

import specaccept_trace as st  # noqa: E402
from engines.arguments import integer_at_least  # noqa: E402
from engines.sglang.chain_layout import chain_arrays, chain_round  # noqa: E402
from engines.sglang.record import SGLANG, RecorderError, _wheel  # noqa: E402
from engines.synthetic_pair import HistoryPair  # noqa: E402
from engines.triton_backend import choose_triton_backend  # noqa: E402

CHAIN_KERNEL = "sglang/kernels/ops/speculative/reject_sampling.py"
CHAIN_KERNEL_SHA256 = "62caac17755082e2f89b1c81a743f55c81c31b7ff0485b7533c0267e72e9262c"
GREEDY_KERNEL = "sglang/kernels/ops/speculative/spec_tree.py"
GREEDY_KERNEL_SHA256 = "2bd4944222af9860aae0ab1c51cde21351d96a6ebee2922175368a0e18916222"
STANDINS = {
    "sglang/srt/platforms/__init__.py": "platforms.py",
    "sglang/srt/platforms/interface.py": "platforms_interface.py",
    "sglang/srt/utils/__init__.py": "utils.py",
}
"""The project's modules loaded under the names ``spec_tree.py`` imports (``standins/``)."""
DEFAULT_CACHE = Path(os.environ.get("SPECACCEPT_ENGINE_CACHE",
                                    Path.home() / ".cache" / "specaccept-engines"))
TEMPERATURES = (0.7, 1.0, 1.3, 0.9)
"""By default request r samples at TEMPERATURES[r % 4] (SGLang sends an all-greedy batch to
its greedy verifier, never to the rejection sampler)."""
TOP_KS = (0, 8, 0, 16)
"""Request r's target keeps its TOP_KS[r % 4] most likely tokens (0: all), renormalised."""
MUTANTS = {
    "untempered-draft-probs": "the kernel is handed the drafter's softmax at temperature 1, "
                              "while the drafts were drawn at the request's temperature",
    "shared-coin": "every draft of a request is tested with the same coin",
}
"""Wrong ways to drive the kernel through its own arguments (its source is not changed)."""


@dataclass
class Settings:
    rounds: int
    out: Path
    block: bool
    verifier: str
    temperatures: tuple[float, ...]
    vocab_size: int
    requests: int
    drafts: int
    seed: int
    thresholds: tuple[float, float]
    mutant: str | None
    cache: Path
    write_trace: bool = True


def _extracted(cache: Path, member: str, sha256: str) -> Path:
    """`member` of the pinned wheel, extracted into `cache` and checked against `sha256`."""
    target = cache / "extracted" / "sglang-0.5.23" / member
    if not target.is_file():
        with zipfile.ZipFile(_wheel(cache, SGLANG)) as wheel:
            try:
                raw = wheel.read(member)
            except KeyError:
                raise RecorderError(f"--cache {cache}: the {SGLANG} wheel holds no "
                                    f"{member}") from None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(raw)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != sha256:
        raise RecorderError(f"--cache {cache}: {target} has SHA-256 {digest}, not SGLang "
                            f"0.5.23's {sha256}")
    return target


def load_chain_kernel(cache: Path) -> tuple[ModuleType, str]:
    """``reject_sampling.py`` from the pinned wheel (downloaded into `cache` if missing)."""
    target = _extracted(cache, CHAIN_KERNEL, CHAIN_KERNEL_SHA256)
    spec = importlib.util.spec_from_file_location("sglang_reject_sampling", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, CHAIN_KERNEL_SHA256


def load_greedy_kernel(cache: Path, root: Path) -> tuple[ModuleType, str]:
    """``spec_tree.py`` from the pinned wheel, beside the stand-ins laid out under `root`."""
    target = _extracted(cache, GREEDY_KERNEL, GREEDY_KERNEL_SHA256)
    if any(name == "sglang" or name.startswith("sglang.") for name in sys.modules):
        raise RecorderError("a module named sglang is already imported; run the recorder in "
                            "a process of its own")
    for member, standin in STANDINS.items():
        path = root / member
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HERE / "standins" / standin, path)
    for folder in (root / "sglang", root / "sglang" / "srt"):
        (folder / "__init__.py").touch()
    sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("sglang_spec_tree", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, GREEDY_KERNEL_SHA256


@dataclass
class Request:
    run: Any
    slot: int
    temperature: float
    top_k: int
    history: list[int]


def _probs(logits: Any, temperature: float, top_k: int) -> Any:
    """SGLang's target law: softmax at the temperature, then a top-k renormalisation."""
    import torch

    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k:
        kept = torch.topk(probs, top_k, dim=-1).indices
        mask = torch.zeros_like(probs, dtype=torch.bool).scatter_(-1, kept, True)
        probs = torch.where(mask, probs, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def record(settings: Settings) -> dict[str, Any]:
    """Run the kernel for `settings.rounds` request-rounds; write the trace."""
    with tempfile.TemporaryDirectory(prefix="specaccept-sglang-") as tmp:
        if settings.verifier == "greedy":
            kernel, digest = load_greedy_kernel(settings.cache, Path(tmp))
        else:
            kernel, digest = load_chain_kernel(settings.cache)
        return _record(settings, kernel, digest)


def _record(settings: Settings, kernel: ModuleType, digest: str) -> dict[str, Any]:
    import torch
    import triton

    device = "cuda" if torch.cuda.is_available() else "cpu"
    V, R, K = settings.vocab_size, settings.requests, settings.drafts
    rng = np.random.default_rng(settings.seed)
    coins_rng = torch.Generator(device=device).manual_seed(settings.seed)
    pair = HistoryPair(V, settings.seed)
    greedy = settings.verifier == "greedy"
    rule = "block" if settings.block else "stochastic"
    engine = (("SGLang 0.5.23 verify_tree_greedy_triton on chains (argmax of the target "
               "logits, as eagle_sample commits on CPU and XPU)" if greedy else
               f"SGLang 0.5.23 chain_speculative_sampling_triton "
               f"({'block verification' if settings.block else 'standard rule'})")
              + f", Triton "
              f"{triton.__version__} {'interpreter' if device == 'cpu' else 'on ' + device}"
              + (f", mutant {settings.mutant}" if settings.mutant else ""))
    header = {"sglang": "0.5.23", "kernel": GREEDY_KERNEL if greedy else CHAIN_KERNEL,
              "kernel_sha256": digest,
              "thresholds": list(settings.thresholds), "mutant": settings.mutant}
    stats: dict[str, Any] = {"rounds": 0, "steps": 0, "accepted": 0, "tested": 0,
                             "kernel_s": 0.0}
    started = time.perf_counter()
    with st.TraceWriter(str(settings.out) if settings.write_trace else os.devnull,
                        vocab_size=V, engine=engine, extra=header) as trace:
        requests = []
        for r in range(R):
            prompt = [int(t) for t in rng.integers(0, V, size=4)]
            temperature = settings.temperatures[r % len(settings.temperatures)]
            top_k = TOP_KS[r % len(TOP_KS)]
            # A greedy request's target is recorded as logits read at temperature 0.
            run = trace.start_run(f"req-{r}", prompt=prompt,
                                  target_sampler={"temperature": 0.0} if temperature == 0
                                  else None,
                                  extra={"temperature": temperature, "top_k": top_k})
            requests.append(Request(run, r, temperature, top_k, prompt))
        while stats["rounds"] < settings.rounds:
            batch = requests[: min(R, settings.rounds - int(stats["rounds"]))]
            n = len(batch)
            target = torch.empty((n, K + 1, V), dtype=torch.float32)
            target_logits_t = torch.empty_like(target)
            draft = torch.empty((n, K, V), dtype=torch.float32)
            handed = torch.empty_like(draft)  # the draft rows the kernel is given
            drafts = [[0] * K for _ in batch]
            # Drafting, token by token: each draft is drawn from its row of q, and the
            # target's rows come from the same contexts (root, d_0 .. d_{i-1}).
            for i in range(K + 1):
                contexts = [q.history + drafts[b][:i] for b, q in enumerate(batch)]
                target_logits, draft_logits = pair.rows(contexts)
                for b, q in enumerate(batch):
                    target_logits_t[b, i] = torch.from_numpy(target_logits[b])
                    target[b, i] = _probs(torch.from_numpy(target_logits[b]),
                                          q.temperature or 1.0, q.top_k)
                    if i == K:
                        continue
                    law = _probs(torch.from_numpy(draft_logits[b]), q.temperature or 1.0, 0)
                    draft[b, i] = law
                    handed[b, i] = (_probs(torch.from_numpy(draft_logits[b]), 1.0, 0)
                                    if settings.mutant == "untempered-draft-probs" else law)
                    weights = law.double().numpy()
                    drafts[b][i] = int(rng.choice(V, p=weights / weights.sum()))
            arrays = chain_arrays([q.history[-1] for q in batch], drafts)
            coins = torch.rand((n, K + 1), generator=coins_rng, dtype=torch.float32,
                               device=device)
            if settings.mutant == "shared-coin":
                coins = coins[:, :1].expand(n, K + 1).contiguous()
            final_coins = torch.rand((n,), generator=coins_rng, dtype=torch.float32,
                                     device=device)
            predicts = torch.zeros(n * (K + 1), dtype=torch.int32, device=device)
            accept_index = torch.full((n, K + 1), -1, dtype=torch.int32, device=device)
            accept_token_num = torch.empty((n,), dtype=torch.int32, device=device)
            tick = time.perf_counter()
            if greedy:
                # eagle_sample's greedy branch: the argmax of the target's logits at every
                # slot, whatever the request's temperature.
                kernel.verify_tree_greedy_triton(
                    predicts=predicts, accept_index=accept_index,
                    accept_token_num=accept_token_num,
                    candidates=torch.tensor(arrays.candidates, dtype=torch.int64,
                                            device=device),
                    retrieve_index=torch.tensor(arrays.retrive_index, dtype=torch.int64,
                                                device=device),
                    retrieve_next_token=torch.tensor(arrays.retrive_next_token,
                                                     dtype=torch.int64, device=device),
                    retrieve_next_sibling=torch.tensor(arrays.retrive_next_sibling,
                                                       dtype=torch.int64, device=device),
                    target_predict=torch.argmax(target_logits_t, dim=-1).to(device))
            else:
                kernel.chain_speculative_sampling_triton(
                    predicts=predicts, accept_index=accept_index,
                    accept_token_num=accept_token_num,
                    candidates=torch.tensor(arrays.candidates, dtype=torch.int64, device=device),
                    retrive_index=torch.tensor(arrays.retrive_index, dtype=torch.int64,
                                               device=device),
                    retrive_next_token=torch.tensor(arrays.retrive_next_token, dtype=torch.int64,
                                                    device=device),
                    retrive_next_sibling=torch.tensor(arrays.retrive_next_sibling,
                                                      dtype=torch.int64, device=device),
                    uniform_samples=coins, uniform_samples_for_final_sampling=final_coins,
                    target_probs=target.to(device), draft_probs=handed.to(device),
                    threshold_single=settings.thresholds[0],
                    threshold_acc=settings.thresholds[1], deterministic=True,
                    block_verification=settings.block)
            if device != "cpu":
                torch.cuda.synchronize()
            stats["kernel_s"] += time.perf_counter() - tick
            predicts_l = predicts.tolist()
            coins_l, final_l = coins.tolist(), final_coins.tolist()
            for b, q in enumerate(batch):
                verdict = chain_round(arrays.candidates[b], arrays.retrive_index[b],
                                      accept_index[b].tolist(), int(accept_token_num[b]),
                                      predicts_l, coins_l[b], final_l[b],
                                      block=settings.block)
                if settings.write_trace and q.temperature == 0:
                    q.run.write_round(
                        rule="greedy-argmax", draft_tokens=verdict.draft_tokens,
                        emitted=verdict.emitted, target=_logits_block(target_logits_t[b]),
                        batch=(int(stats["steps"]), q.slot))
                elif settings.write_trace:
                    # The greedy verifier draws nothing: its rounds record no uniforms.
                    q.run.write_round(
                        rule=rule, draft_tokens=verdict.draft_tokens, emitted=verdict.emitted,
                        target=_probs_block(target[b]), draft=_probs_block(draft[b]),
                        uniforms=None if greedy else verdict.uniforms,
                        batch=(int(stats["steps"]), q.slot))
                q.history.extend(verdict.emitted)
                stats["rounds"] += 1
                stats["accepted"] += verdict.num_accepted
                stats["tested"] += K if settings.block else min(verdict.num_accepted + 1, K)
            stats["steps"] += 1
    stats["wall_s"] = time.perf_counter() - started
    stats["device"] = device
    return stats


def _logits_block(rows: Any) -> dict[str, Any]:
    tensor = rows.to("cpu").contiguous()
    return st.b64_block(tensor.numpy().tobytes(), rows=tensor.shape[0], kind="logits")


def _probs_block(rows: Any) -> dict[str, Any]:
    tensor = rows.to("cpu").contiguous()
    return st.b64_block(tensor.numpy().tobytes(), rows=tensor.shape[0], kind="probs")


# --- command line ---------------------------------------------------------------------



def _temperatures(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--temperatures must be comma-separated numbers, got {text!r}") from None
    for value in values:
        if not (value == 0 or 0.05 <= value <= 100):
            raise argparse.ArgumentTypeError(
                f"--temperatures entries must be 0 or lie in [0.05, 100], got {value}")
    return values


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--thresholds must be numbers, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"--thresholds must lie in [0, 1], got {value}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=integer_at_least("--rounds", 1), required=True,
                        help="request-rounds to record")
    parser.add_argument("--out", type=Path, default=None, help="the trace (.gz: gzip)")
    parser.add_argument("--summary-only", action="store_true",
                        help="run the kernel and print the summary, writing no trace")
    parser.add_argument("--block", action="store_true",
                        help="block verification (speculative_use_block_verification)")
    parser.add_argument("--verifier", choices=("rejection", "greedy"), default="rejection",
                        help="'rejection' (default): chain_speculative_sampling_triton; "
                             "'greedy': verify_tree_greedy_triton on the argmax of the "
                             "target's logits, the path eagle_sample takes on CPU and XPU "
                             "for every request. Its sampled requests' rounds claim the "
                             "standard rule they asked for; greedy ones 'greedy-argmax'")
    parser.add_argument("--temperatures", type=_temperatures, default=TEMPERATURES,
                        help="the requests' temperatures, comma-separated, request r at "
                             "entry r modulo their count; 0 is greedy (--verifier greedy "
                             "only) (default: " + ",".join(map(str, TEMPERATURES)) + ")")
    parser.add_argument("--vocab", type=integer_at_least("--vocab", 16), default=64,
                        help="vocabulary size V (default 64; at least 16, the largest top-k)")
    parser.add_argument("--requests", type=integer_at_least("--requests", 1), default=8,
                        help="requests verified together in each step (default 8)")
    parser.add_argument("--drafts", type=integer_at_least("--drafts", 1), default=4,
                        help="drafts each request proposes, k (default 4)")
    parser.add_argument("--seed", type=integer_at_least("--seed", 0), default=0,
                        help="seeds the pair, the drafts and the coins")
    parser.add_argument("--thresholds", type=_threshold, nargs=2, default=(1.0, 1.0),
                        metavar=("SINGLE", "ACC"),
                        help="SGLang's threshold_single and threshold_acc, passed to the "
                             "kernel (which does not read them) and kept in the header")
    parser.add_argument("--mutant", choices=sorted(MUTANTS), default=None,
                        help="drive the kernel wrongly: " + "; ".join(
                            f"{name}: {what}" for name, what in sorted(MUTANTS.items())))
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help=f"where the SGLang wheel is kept (default {DEFAULT_CACHE})")
    args = parser.parse_args(argv)
    if (args.out is None) == (not args.summary_only):
        parser.error("give --out TRACE, or --summary-only to write no trace")
    if args.out is not None and not args.out.resolve().parent.is_dir():
        parser.error(f"--out {args.out}: the directory {args.out.resolve().parent} does not "
                     "exist")
    if args.verifier == "greedy" and (args.block or args.mutant):
        parser.error("--verifier greedy takes neither --block nor --mutant (it draws nothing)")
    if args.verifier == "rejection" and 0 in args.temperatures:
        parser.error("--temperatures 0 (greedy) needs --verifier greedy: SGLang never sends "
                     "an all-greedy batch to the rejection sampler")
    return Settings(args.rounds, args.out or Path(os.devnull), args.block, args.verifier,
                    args.temperatures, args.vocab,
                    args.requests, args.drafts, args.seed, tuple(args.thresholds),
                    args.mutant, args.cache, not args.summary_only)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    problem = choose_triton_backend("record_chain.py", "examples/engines/sglang/requirements.txt")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    try:
        # The kernel computes over masked lanes the GPU discards too; the interpreter's
        # NumPy warns on them.
        with np.errstate(all="ignore"):
            stats = record(settings)
    except (RecorderError, OSError) as error:
        print(f"record_chain.py: {error}", file=sys.stderr)
        return 2
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
