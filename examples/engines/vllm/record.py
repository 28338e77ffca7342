"""Record vLLM's speculative-decoding verification as a specaccept conformance trace.

vLLM 0.34.0's Model Runner V2 verifies drafts in Triton kernels
(``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py``, `rejection_sample`) and draws
drafts with Gumbel noise (``vllm/v1/worker/gpu/sample/gumbel.py``, `gumbel_sample`). This
recorder extracts those files, and the four they import, from the pinned PyPI wheel at run
time (nothing of vLLM is in this repository), loads them beside two small stand-ins of the
project's own (``standins/``), and drives them with a synthetic target/draft pair: a batch of
requests, each with its own seed and temperature (greedy and sampled rows mixed), draft
placeholders (``-1``) in some rows, the standard rule or block verification. Each request is
a run of a version 2 trace and each verification step a batch step; the accept coins are
recomputed with vLLM's own ``tl_rand32`` on vLLM's keys, the bonus/residual (a Gumbel-max
draw) is recorded as ``null``.

On a machine without a GPU the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``,
set here before Triton is imported); on a GPU they run compiled, unchanged.

Usage (from the repository root)::

    python examples/engines/vllm/record.py --rounds 1000 --out vllm.jsonl.gz [--block]
    specaccept conform vllm.jsonl.gz
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):  # run as a script: make `engines` importable
    sys.path.insert(0, str(HERE.parents[1]))

from engines.arguments import integer_at_least  # noqa: E402
from engines.synthetic_pair import HistoryPair  # noqa: E402
from engines.triton_backend import choose_triton_backend  # noqa: E402

VLLM_VERSION = "0.34.0"
WHEEL = f"vllm-{VLLM_VERSION}-cp38-abi3-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "79ca4b3cd74aec08c4bf476bdf0cb15735b605ae5368526a2faae1e30f044ca2"
DEFAULT_CACHE = Path(os.environ.get("SPECACCEPT_ENGINE_CACHE",
                                    Path.home() / ".cache" / "specaccept-engines"))
FROM_WHEEL = {
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py":
        "e17902b19d3353fba93eacb2d45aab0dd9729c5656d1bb2e3e53a485b2da4df0",
    "vllm/v1/worker/gpu/sample/gumbel.py":
        "820184641a0e4ea48bd837d66724a85f1f6fc2edc3bc1354577e2d635c0a68f1",
    "vllm/v1/worker/gpu/sample/watermark.py":
        "d0eb1760d251f180c0c93216cf64dd54ca70ac4d7e549733a7e2603b348b62c5",
    "vllm/v1/worker/gpu/spec_decode/fly.py":
        "d39b5375330cd69f14ec77917ef3cefba5c46ba5b57bb29cd89c6975343c79f7",
    "vllm/v1/watermarking/prfs/philox.py":
        "9468a4bb045008d4507ae5757da1fdcccd2730b9328ebf8ff909d89109bc8620",
    "vllm/v1/watermarking/prfs/base.py":
        "1228cc2d7245c4df4e0ef13b922655f5c22d659f6839f29c02fc43ed909c2072",
}
"""The wheel's files the recorder runs, unchanged (the mutant aside), with their SHA-256."""
STANDINS = {
    "vllm/triton_utils/__init__.py": "triton_utils.py",
    "vllm/v1/worker/gpu/spec_decode/draft_logits.py": "draft_logits.py",
    "specaccept_vllm_coins.py": "accept_coins.py",
}
"""The project's modules loaded under vLLM's names (see ``standins/``)."""

# The planted regression: block verification keyed its accept coins by (seed, pos) before
# vLLM mixed the draft step into the seed, so a later round re-read the coins of an earlier
# round's unemitted positions. The mutant restores that key in the extracted source.
MUTANTS = {
    "pre-fix-keying": (
        "step_seed = spec_step_seed(seed, i) if USE_BLOCK_VERIFICATION else seed",
        "step_seed = seed",
    ),
}
TEMPERATURES = (0.7, 0.0, 1.0, 1.3)
"""Request r samples at TEMPERATURES[r % 4]: with two or more requests, greedy and sampled
rows share every batch."""


class RecorderError(Exception):
    """A setting or the environment is unusable; the message says which and why."""


# --- loading vLLM from its wheel ----------------------------------------------------------


def wheel_path(cache: Path, download: bool, wheel: Path | None = None) -> Path:
    """The pinned wheel in `cache`, downloaded by pip if absent, checked against its hash.

    `wheel`, when given, is any zip archive holding `FROM_WHEEL`'s files under their paths
    (the wheel itself, or those files alone for a machine without PyPI); their hashes are
    checked when they are extracted.
    """
    if wheel is not None:
        if not wheel.is_file():
            raise RecorderError(f"--wheel {wheel}: no such file")
        return wheel
    path = cache / WHEEL
    if not path.exists():
        if not download:
            raise RecorderError(f"--cache {cache}: {WHEEL} is not there; run "
                                f"`pip download vllm=={VLLM_VERSION} --no-deps -d {cache}`")
        cache.mkdir(parents=True, exist_ok=True)
        print(f"downloading vllm=={VLLM_VERSION} (wheel only, no dependencies) into {cache}",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        f"vllm=={VLLM_VERSION}", "-d", str(cache)], check=True)
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != WHEEL_SHA256:
        raise RecorderError(f"--cache {cache}: {WHEEL} has sha256 {digest.hexdigest()}, not "
                            f"the pinned {WHEEL_SHA256}")
    return path


def extract_vllm(wheel: Path, root: Path, mutant: str | None) -> None:
    """Lay out the wheel's files and the stand-ins as a ``vllm`` package under `root`."""
    with zipfile.ZipFile(wheel) as archive:
        for member, sha256 in FROM_WHEEL.items():
            target = root / member
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                raw = archive.read(member)
            except KeyError:
                raise RecorderError(f"{wheel} holds no {member}") from None
            if hashlib.sha256(raw).hexdigest() != sha256:
                raise RecorderError(f"{wheel}: {member} is not vLLM {VLLM_VERSION}'s (its "
                                    f"SHA-256 is {hashlib.sha256(raw).hexdigest()})")
            source = raw.decode("utf-8")
            if mutant is not None and member.endswith("rejection_sampler_utils.py"):
                before, after = MUTANTS[mutant]
                if source.count(before) != 1:
                    raise RecorderError(f"--mutant {mutant}: the line it changes occurs "
                                        f"{source.count(before)} times in {member}, not once")
                source = source.replace(before, after)
            target.write_text(source, encoding="utf-8")
    for member, standin in STANDINS.items():
        target = root / member
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(HERE / "standins" / standin, target)
    # Empty packages: vLLM's own __init__ files import the rest of vLLM.
    for directory in {p.parent for p in (root / "vllm").rglob("*.py")}:
        while directory != root:
            (directory / "__init__.py").touch(exist_ok=True)
            directory = directory.parent


@dataclass
class Vllm:
    """The loaded kernels and the project's coin kernel."""

    rejection_sample: Any
    gumbel_sample: Any
    apply_temperature: Any
    draft_logits_cache: Any
    accept_coins: Any
    triton_version: str


def load_vllm(wheel: Path, root: Path, mutant: str | None, fast_interpreter: bool) -> Vllm:
    extract_vllm(wheel, root, mutant)
    if os.environ.get("TRITON_INTERPRET") == "1" and fast_interpreter:
        sys.path.insert(0, str(HERE / "standins"))
        importlib.import_module("interpreter_speedup").install()
    if any(name == "vllm" or name.startswith("vllm.") for name in sys.modules):
        raise RecorderError("a module named vllm is already imported; run the recorder in "
                            "a process of its own")
    sys.path.insert(0, str(root))
    utils = importlib.import_module("vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils")
    gumbel = importlib.import_module("vllm.v1.worker.gpu.sample.gumbel")
    cache = importlib.import_module("vllm.v1.worker.gpu.spec_decode.draft_logits")
    coins = importlib.import_module("specaccept_vllm_coins")
    import triton

    return Vllm(utils.rejection_sample, gumbel.gumbel_sample, gumbel.apply_temperature,
                cache.DraftLogitsCache, coins.accept_coins, triton.__version__)


# --- the synthetic pair -----------------------------------------------------------------


class RandomPair:
    """Fresh random rows at every position (large vocabularies: no per-row generator)."""

    def __init__(self, vocab_size: int, seed: int, device: str, scale: float = 3.0,
                 rho: float = 0.9):
        import torch

        self.vocab_size, self.scale, self.rho = vocab_size, scale, rho
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.device = device

    def rows(self, count: int) -> tuple[Any, Any]:
        import torch

        z, w = torch.randn((2, count, self.vocab_size), generator=self.generator,
                           device=self.device, dtype=torch.float32)
        return self.scale * z, self.scale * (self.rho * z + math.sqrt(1 - self.rho**2) * w)


# --- recording ------------------------------------------------------------------------


@dataclass
class Request:
    """One request: a run of the trace."""

    run: Any
    seed: int
    temperature: float
    history: list[int]
    slot: int
    prompt_length: int = field(init=False)

    def __post_init__(self) -> None:
        self.prompt_length = len(self.history)


@dataclass
class Settings:
    rounds: int
    out: Path
    block: bool
    greedy_drafts: bool
    vocab_size: int
    requests: int
    drafts: int
    placeholder_rate: float
    pair: str
    seed: int
    mutant: str | None
    cache: Path
    download: bool
    dtype: str
    write_trace: bool = True
    fast_interpreter: bool = True
    seeds: tuple[int, ...] | None = None
    temperatures: tuple[float, ...] | None = None
    wheel: Path | None = None
    run_prefix: str = ""


def record(settings: Settings) -> dict[str, Any]:
    """Run the kernels for `settings.rounds` request-rounds and write the trace."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    with tempfile.TemporaryDirectory(prefix="specaccept-vllm-") as tmp:
        vllm = load_vllm(wheel_path(settings.cache, settings.download, settings.wheel), Path(tmp),
                         settings.mutant, settings.fast_interpreter)
        # The kernels compute log(0) and NaN where the GPU does too (masked lanes, a
        # residual's log1p(-ratio) with ratio > 1), and select them away with tl.where; the
        # interpreter's NumPy warns on each.
        with np.errstate(all="ignore"):
            return _record(settings, vllm, device)


def _record(settings: Settings, vllm: Vllm, device: str) -> dict[str, Any]:
    import torch

    sys.path.insert(0, str(HERE.parents[2] / "impl"))
    import specaccept_trace as st

    V, R, K = settings.vocab_size, settings.requests, settings.drafts
    rng = np.random.default_rng(settings.seed)
    seeds = (list(settings.seeds) if settings.seeds is not None
             else [int(s) for s in rng.integers(0, 2**62, size=R)])
    temperatures = (list(settings.temperatures) if settings.temperatures is not None
                    else [TEMPERATURES[r % len(TEMPERATURES)] for r in range(R)])
    seed_t = torch.tensor(seeds, dtype=torch.int64, device=device)
    temp_t = torch.tensor(temperatures, dtype=torch.float32, device=device)
    zero_t = torch.zeros(R, dtype=torch.float32, device=device)
    idx_mapping = torch.arange(R, dtype=torch.int32, device=device)
    expanded_idx_mapping = idx_mapping.repeat_interleave(K + 1)
    expanded_local_pos = torch.arange(K + 1, dtype=torch.int32, device=device).repeat(R)
    cu_num_logits = torch.arange(0, R * (K + 1) + 1, K + 1, dtype=torch.int32, device=device)
    cache = None if settings.greedy_drafts else vllm.draft_logits_cache(
        torch.zeros((R, K, V), dtype=torch.float32, device=device))
    history_pair = HistoryPair(V, settings.seed) if settings.pair == "history" else None
    random_pair = (RandomPair(V, settings.seed, device) if settings.pair == "random"
                   else None)
    rule_name = "block" if settings.block else "stochastic"
    engine = (f"vLLM {VLLM_VERSION} Model Runner V2 rejection_sample "
              f"({'block verification' if settings.block else 'standard rule'}, "
              f"{'greedy' if settings.greedy_drafts else 'sampled'} drafts), Triton "
              f"{vllm.triton_version} {'interpreter' if device == 'cpu' else 'on ' + device}"
              + (f", mutant {settings.mutant}" if settings.mutant else ""))
    stats: dict[str, Any] = {"rounds": 0, "steps": 0, "accepted": 0, "tested": 0,
                             "placeholder_rounds": 0, "coins": 0, "coin_repeats": 0,
                             "kernel_s": 0.0}
    # Recorded coins equal to an earlier recorded coin: a diagnostic for a machine without
    # `conform` (fresh judges them against the expected count of float32 coincidences).
    seen_coins: set[float] = set()
    started = time.perf_counter()
    with st.TraceWriter(str(settings.out) if settings.write_trace else os.devnull,
                        vocab_size=V, engine=engine,
                        check_values=V <= 4096) as trace:
        requests = []
        for r in range(R):
            prompt = [int(t) for t in rng.integers(0, V, size=4)]
            sampler = {"temperature": temperatures[r]}
            run = trace.start_run(
                f"{settings.run_prefix}req-{r}", prompt=prompt, target_sampler=sampler,
                draft_sampler=None if settings.greedy_drafts else sampler,
                extra={"seed": seeds[r], "temperature": temperatures[r]})
            requests.append(Request(run, seeds[r], temperatures[r], prompt, r))
        while stats["rounds"] < settings.rounds:
            step = stats["steps"]
            batch = requests[: min(R, settings.rounds - int(stats["rounds"]))]
            n = len(batch)
            valid = [K if rng.random() >= settings.placeholder_rate else int(rng.integers(0, K))
                     for _ in batch]
            lengths = torch.tensor([len(q.history) for q in batch], dtype=torch.int64,
                                   device=device)
            drafts = torch.empty((n, K), dtype=torch.int64, device=device)
            draft_rows = []
            tick = time.perf_counter()
            # Drafting: K draft steps, each a batched Gumbel-max draw by vLLM's kernel that
            # also caches the pre-temperature logits for verification.
            random_rows = random_pair.rows(n * (2 * K + 1)) if random_pair else None
            for j in range(K):
                if history_pair is not None:
                    _, rows_np = history_pair.rows(
                        [q.history + drafts[b, :j].tolist() for b, q in enumerate(batch)])
                    rows = torch.from_numpy(rows_np).to(device)
                else:
                    assert random_rows is not None
                    rows = random_rows[1][j * n:(j + 1) * n].contiguous()
                draft_rows.append(rows)
                drafts[:, j] = vllm.gumbel_sample(
                    rows, idx_mapping[:n], zero_t if settings.greedy_drafts else temp_t,
                    seed_t, lengths - 1 + j, apply_temperature=True, is_drafting=True,
                    logits_cache=None if cache is None else cache.values,
                    logits_cache_col=None if cache is None else torch.tensor(j, device=device))
            # Verification: the target's K + 1 rows per request, temperature applied by
            # vLLM's kernel (as its sampler does before rejection_sample), then the kernels.
            if history_pair is not None:
                contexts = [q.history + drafts[b, :i].tolist()
                            for b, q in enumerate(batch) for i in range(K + 1)]
                target_np, _ = history_pair.rows(contexts)
                target = torch.from_numpy(target_np).to(device)
            else:
                assert random_rows is not None
                target = random_rows[0][:n * (K + 1)].contiguous()
            processed = target.clone()
            m = n * (K + 1)
            vllm.apply_temperature(processed, expanded_idx_mapping[:m], temp_t)
            last = torch.tensor([q.history[-1] for q in batch], dtype=torch.int64, device=device)
            draft_sampled = torch.cat([last[:, None], drafts], dim=1)
            for b, k in enumerate(valid):
                draft_sampled[b, 1 + k:] = -1
            pos = (lengths[:, None] - 1 + torch.arange(K + 1, device=device)).reshape(-1)
            sampled, num_sampled = vllm.rejection_sample(
                processed, cache, draft_sampled.reshape(-1).contiguous(), cu_num_logits[:n + 1],
                pos, idx_mapping[:n], expanded_idx_mapping[:m], expanded_local_pos[:m], temp_t,
                seed_t, K, use_block_verification=settings.block)
            coins = vllm.accept_coins(seed_t, pos, expanded_idx_mapping[:m],
                                      expanded_local_pos[:m],
                                      settings.block and settings.mutant is None)
            if device != "cpu":
                torch.cuda.synchronize()
            stats["kernel_s"] += time.perf_counter() - tick
            sampled_l, num_l = sampled.tolist(), num_sampled.tolist()
            coins_l = coins.reshape(n, K + 1).tolist()
            drafts_l = drafts.tolist()
            for b, q in enumerate(batch):
                k = valid[b]
                emitted = sampled_l[b][: num_l[b]]
                a = len(emitted) - 1
                greedy = q.temperature == 0.0
                rule = "greedy-argmax" if greedy else rule_name
                uniforms = None
                if not greedy and k > 0:
                    # The coins the kernel drew: the standard rule stops at the first
                    # rejection, block verification tests every valid draft.
                    read = k if settings.block else min(a + 1, k)
                    uniforms = [[coins_l[b][i] if i < read else None, None] for i in range(k)]
                    uniforms.append([None, None])
                    for coin in coins_l[b][:read]:
                        stats["coin_repeats"] += coin in seen_coins
                        seen_coins.add(coin)
                    stats["coins"] += read
                if settings.write_trace:
                    rows = target[b * (K + 1): b * (K + 1) + k + 1]
                    target_block = _block(rows, settings.dtype)
                    draft_block = None
                    if k > 0:
                        if cache is None:
                            draft_block = st.sparse_block([{t: 1.0} for t in drafts_l[b][:k]])
                        else:
                            draft_block = _block(cache.values[b, :k], settings.dtype)
                    q.run.write_round(
                        rule=rule, draft_tokens=drafts_l[b][:k], emitted=emitted,
                        target=target_block, draft=draft_block, uniforms=uniforms,
                        batch=(step, q.slot),
                        extra={"placeholders": K - k} if k < K else None)
                q.history.extend(emitted)
                stats["rounds"] += 1
                stats["placeholder_rounds"] += k < K
                if not greedy:
                    stats["tested"] += min(a + 1, k)
                    stats["accepted"] += min(a, k)
            stats["steps"] += 1
    stats["wall_s"] = time.perf_counter() - started
    stats["device"] = device
    return stats


def _block(rows: Any, dtype: str) -> dict[str, Any]:
    import torch

    import specaccept_trace as st

    tensor = rows.to(torch.float16 if dtype == "float16" else torch.float32).cpu().contiguous()
    return st.b64_block(tensor.numpy().tobytes(), rows=tensor.shape[0], kind="logits",
                        dtype=dtype)


# --- command line ---------------------------------------------------------------------



def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--placeholder-rate must be a number, got {text!r}") \
            from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"--placeholder-rate must lie in [0, 1], got {value}")
    return value


def _list(name: str, kind: type, low: float, high: float) -> Any:
    def parse(text: str) -> tuple[Any, ...]:
        try:
            values = tuple(kind(part) for part in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a comma-separated list of {kind.__name__}s, got {text!r}"
            ) from None
        for value in values:
            if not (low <= value <= high) or value != value:
                raise argparse.ArgumentTypeError(
                    f"{name} entries must lie in [{low}, {high}], got {value}")
        return values
    return parse


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=integer_at_least("--rounds", 1), required=True,
                        help="request-rounds to record (round records in the trace)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the trace to write (.gz: gzip)")
    parser.add_argument("--summary-only", action="store_true",
                        help="run the kernels and print the summary, writing no trace (for "
                             "vocabularies whose traces no disk holds: 5.8 MB a round at "
                             "V = 128,256)")
    parser.add_argument("--block", action="store_true", help="block verification")
    parser.add_argument("--greedy-drafts", action="store_true",
                        help="draft by argmax (no draft logits cache: q is one-hot)")
    parser.add_argument("--vocab", type=integer_at_least("--vocab", 2), default=64,
                        help="vocabulary size V (default 64)")
    parser.add_argument("--requests", type=integer_at_least("--requests", 1), default=4,
                        help="requests verified together in each step (default 4)")
    parser.add_argument("--drafts", type=integer_at_least("--drafts", 1), default=4,
                        help="draft tokens a request proposes each step, k (default 4)")
    parser.add_argument("--placeholder-rate", type=_rate, default=0.1,
                        help="share of request-rounds whose tail drafts are -1 (default 0.1)")
    parser.add_argument("--pair", choices=("history", "random"), default=None,
                        help="synthetic pair: 'history' (rows depend on the last two tokens; "
                             "default for V <= 4096) or 'random' (fresh rows; default above)")
    parser.add_argument("--dtype", choices=("float32", "float16"), default="float32",
                        help="how logits rows are stored in the trace (default float32)")
    parser.add_argument("--seed", type=integer_at_least("--seed", 0), default=0,
                        help="seeds the pair, the requests' seeds and the placeholders")
    parser.add_argument("--seeds", type=_list("--seeds", int, -(2**63), 2**63 - 1),
                        default=None,
                        help="the requests' vLLM seeds, comma-separated, one per request "
                             "(default: drawn from --seed)")
    parser.add_argument("--temperatures", type=_list("--temperatures", float, 0.0, 100.0),
                        default=None,
                        help="the requests' temperatures, comma-separated (default: cycling "
                             f"through {', '.join(map(str, TEMPERATURES))})")
    parser.add_argument("--mutant", choices=sorted(MUTANTS), default=None,
                        help="plant a known regression in the extracted kernels")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help=f"where the vLLM wheel is kept (default {DEFAULT_CACHE})")
    parser.add_argument("--plain-interpreter", action="store_true",
                        help="run Triton's interpreter without the recorder's speed-up "
                             "(standins/interpreter_speedup.py); the trace is the same")
    parser.add_argument("--wheel", type=Path, default=None,
                        help="a zip holding the six files (the wheel, or those files alone); "
                             "their hashes are checked")
    parser.add_argument("--run-prefix", default="",
                        help="prefixed to every run id (runs are req-0, req-1, ...): traces "
                             "checked together as one engine's must not share run ids")
    parser.add_argument("--no-download", action="store_true",
                        help="fail rather than download the wheel when it is missing")
    args = parser.parse_args(argv)
    if (args.out is None) == (not args.summary_only):
        parser.error("give --out TRACE, or --summary-only to write no trace")
    if args.out is not None and not args.out.resolve().parent.is_dir():
        parser.error(f"--out {args.out}: the directory {args.out.resolve().parent} does not "
                     "exist")
    if args.mutant is not None and not args.block:
        parser.error(f"--mutant {args.mutant} changes block verification's keys: add --block")
    for name, values in (("--seeds", args.seeds), ("--temperatures", args.temperatures)):
        if values is not None and len(values) != args.requests:
            parser.error(f"{name} must give one value per request (--requests "
                         f"{args.requests}), got {len(values)}")
    if args.temperatures is not None:
        for value in args.temperatures:
            if 0.0 < value < 2.0**-126:
                parser.error(f"--temperatures entries must be 0 (greedy) or at least "
                             f"2**-126, got {value}")
    pair = args.pair or ("history" if args.vocab <= 4096 else "random")
    return Settings(args.rounds, args.out or Path(os.devnull), args.block, args.greedy_drafts,
                    args.vocab,
                    args.requests, args.drafts, args.placeholder_rate, pair, args.seed,
                    args.mutant, args.cache, not args.no_download, args.dtype,
                    not args.summary_only,
                    not args.plain_interpreter, args.seeds, args.temperatures, args.wheel,
                    args.run_prefix)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    problem = choose_triton_backend("record.py", "examples/engines/vllm/requirements.txt")
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    try:
        stats = record(settings)
    except (RecorderError, OSError) as error:
        print(f"record.py: {error}", file=sys.stderr)
        return 2
    except ImportError as error:
        print(f"record.py: {error}; install examples/engines/vllm/requirements.txt",
              file=sys.stderr)
        return 2
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
