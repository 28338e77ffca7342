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
import sys
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
from engines.sglang.chain_layout import chain_arrays, chain_round  # noqa: E402
from engines.sglang.record import SGLANG, RecorderError, _wheel  # noqa: E402
from engines.synthetic_pair import HistoryPair  # noqa: E402

CHAIN_KERNEL = "sglang/kernels/ops/speculative/reject_sampling.py"
CHAIN_KERNEL_SHA256 = "62caac17755082e2f89b1c81a743f55c81c31b7ff0485b7533c0267e72e9262c"
DEFAULT_CACHE = Path(os.environ.get("SPECACCEPT_ENGINE_CACHE",
                                    Path.home() / ".cache" / "specaccept-engines"))
TEMPERATURES = (0.7, 1.0, 1.3, 0.9)
"""Request r samples at TEMPERATURES[r % 4] (SGLang sends greedy batches elsewhere)."""
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
    vocab_size: int
    requests: int
    drafts: int
    seed: int
    thresholds: tuple[float, float]
    mutant: str | None
    cache: Path
    write_trace: bool = True


def load_chain_kernel(cache: Path) -> tuple[ModuleType, str]:
    """``reject_sampling.py`` from the pinned wheel (downloaded into `cache` if missing)."""
    target = cache / "extracted" / "sglang-0.5.23" / CHAIN_KERNEL
    if not target.is_file():
        with zipfile.ZipFile(_wheel(cache, SGLANG)) as wheel:
            try:
                raw = wheel.read(CHAIN_KERNEL)
            except KeyError:
                raise RecorderError(f"--cache {cache}: the {SGLANG} wheel holds no "
                                    f"{CHAIN_KERNEL}") from None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(raw)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != CHAIN_KERNEL_SHA256:
        raise RecorderError(f"--cache {cache}: {target} has SHA-256 {digest}, not SGLang "
                            f"0.5.23's {CHAIN_KERNEL_SHA256}")
    spec = importlib.util.spec_from_file_location("sglang_reject_sampling", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, digest


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
    import torch

    kernel, digest = load_chain_kernel(settings.cache)
    import triton

    device = "cuda" if torch.cuda.is_available() else "cpu"
    V, R, K = settings.vocab_size, settings.requests, settings.drafts
    rng = np.random.default_rng(settings.seed)
    coins_rng = torch.Generator(device=device).manual_seed(settings.seed)
    pair = HistoryPair(V, settings.seed)
    rule = "block" if settings.block else "stochastic"
    engine = (f"SGLang 0.5.23 chain_speculative_sampling_triton "
              f"({'block verification' if settings.block else 'standard rule'}), Triton "
              f"{triton.__version__} {'interpreter' if device == 'cpu' else 'on ' + device}"
              + (f", mutant {settings.mutant}" if settings.mutant else ""))
    header = {"sglang": "0.5.23", "kernel": CHAIN_KERNEL, "kernel_sha256": digest,
              "thresholds": list(settings.thresholds), "mutant": settings.mutant}
    stats: dict[str, Any] = {"rounds": 0, "steps": 0, "accepted": 0, "tested": 0,
                             "kernel_s": 0.0}
    started = time.perf_counter()
    with st.TraceWriter(str(settings.out) if settings.write_trace else os.devnull,
                        vocab_size=V, engine=engine, extra=header) as trace:
        requests = []
        for r in range(R):
            prompt = [int(t) for t in rng.integers(0, V, size=4)]
            temperature, top_k = TEMPERATURES[r % len(TEMPERATURES)], TOP_KS[r % len(TOP_KS)]
            run = trace.start_run(f"req-{r}", prompt=prompt,
                                  extra={"temperature": temperature, "top_k": top_k})
            requests.append(Request(run, r, temperature, top_k, prompt))
        while stats["rounds"] < settings.rounds:
            batch = requests[: min(R, settings.rounds - int(stats["rounds"]))]
            n = len(batch)
            target = torch.empty((n, K + 1, V), dtype=torch.float32)
            draft = torch.empty((n, K, V), dtype=torch.float32)
            handed = torch.empty_like(draft)  # the draft rows the kernel is given
            drafts = [[0] * K for _ in batch]
            # Drafting, token by token: each draft is drawn from its row of q, and the
            # target's rows come from the same contexts (root, d_0 .. d_{i-1}).
            for i in range(K + 1):
                contexts = [q.history + drafts[b][:i] for b, q in enumerate(batch)]
                target_logits, draft_logits = pair.rows(contexts)
                for b, q in enumerate(batch):
                    target[b, i] = _probs(torch.from_numpy(target_logits[b]), q.temperature,
                                          q.top_k)
                    if i == K:
                        continue
                    law = _probs(torch.from_numpy(draft_logits[b]), q.temperature, 0)
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
                if settings.write_trace:
                    q.run.write_round(
                        rule=rule, draft_tokens=verdict.draft_tokens, emitted=verdict.emitted,
                        target=_probs_block(target[b]), draft=_probs_block(draft[b]),
                        uniforms=verdict.uniforms, batch=(int(stats["steps"]), q.slot))
                q.history.extend(verdict.emitted)
                stats["rounds"] += 1
                stats["accepted"] += verdict.num_accepted
                stats["tested"] += K if settings.block else min(verdict.num_accepted + 1, K)
            stats["steps"] += 1
    stats["wall_s"] = time.perf_counter() - started
    stats["device"] = device
    return stats


def _probs_block(rows: Any) -> dict[str, Any]:
    tensor = rows.to("cpu").contiguous()
    return st.b64_block(tensor.numpy().tobytes(), rows=tensor.shape[0], kind="probs")


# --- command line ---------------------------------------------------------------------


def _integer(name: str, low: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{name} must be at least {low}, got {value}")
        return value
    return parse


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
    parser.add_argument("--rounds", type=_integer("--rounds", 1), required=True,
                        help="request-rounds to record")
    parser.add_argument("--out", type=Path, default=None, help="the trace (.gz: gzip)")
    parser.add_argument("--summary-only", action="store_true",
                        help="run the kernel and print the summary, writing no trace")
    parser.add_argument("--block", action="store_true",
                        help="block verification (speculative_use_block_verification)")
    parser.add_argument("--vocab", type=_integer("--vocab", 16), default=64,
                        help="vocabulary size V (default 64; at least 16, the largest top-k)")
    parser.add_argument("--requests", type=_integer("--requests", 1), default=8,
                        help="requests verified together in each step (default 8)")
    parser.add_argument("--drafts", type=_integer("--drafts", 1), default=4,
                        help="drafts each request proposes, k (default 4)")
    parser.add_argument("--seed", type=_integer("--seed", 0), default=0,
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
    return Settings(args.rounds, args.out or Path(os.devnull), args.block, args.vocab,
                    args.requests, args.drafts, args.seed, tuple(args.thresholds),
                    args.mutant, args.cache, not args.summary_only)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("record_chain.py: torch is not installed; install "
              "examples/engines/sglang/requirements.txt", file=sys.stderr)
        return 2
    # Triton reads TRITON_INTERPRET when it is imported: decide before anything imports it.
    if not torch.cuda.is_available():
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            print("record_chain.py: no GPU, and Triton was imported before the interpreter "
                  "could be chosen; set TRITON_INTERPRET=1", file=sys.stderr)
            return 2
        os.environ["TRITON_INTERPRET"] = "1"
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
