"""A speculative-decoding engine on synthetic logits, in NumPy, that writes a conformance trace.

Run from the repository root:

    python benchmarks/synthetic_engine.py --vocab 128256 --rounds 100 --runs 4 --k 4 \\
        --seed 0 --out trace.jsonl [--rule stochastic|block] [--bug NAME] \\
        [--temperature 1.0 | --temperatures 0.7,1.3] [--omit-undecided-rows] \\
        [--unrecorded-draws | --no-uniforms] \\
        [--no-check-values] [--stdlib-checks] [--compact SHARE]

then ``specaccept conform trace.jsonl``. It is what an engine author at a real vocabulary
would write: `--runs` requests verified in lockstep (one batch step per round, each request
a run, each round recording its step and slot), each round's 5 target and 4 draft rows as
float16 logits (``b64_block`` from the raw bytes), both samplers in the run records, every
uniform recorded. The models are synthetic: a row's logits are a Zipf-like ramp over a
permutation fixed per request, plus fresh Gaussian noise per row (the drafter's row is the
target's plus more noise), so the laws change from row to row and the drafter is close to
the target but not equal.

Decisions follow the spec in float32: the accept test ``u * q(t) <= p(t)`` (with p(t) > 0),
the inverse-CDF draw of `sample_from_distribution`, the residual relu(p - q) normalised by its
sum, and for ``--rule block`` the prefix weights and keep probabilities of
`verify_blockwise`. The laws are rebuilt from the float16 logits as the reader rebuilds them
(upcast, shift by the max, divide by the temperature, softmax). NumPy's float32 exp and sums
may differ from MLX's in the last bit; a draw lands on such a difference with a chance of
about V * 2**-24 a draw (below 1e-4 at V = 1024).

`--bug` plants one of the kit's bug classes:

- ``resample-from-p``: on a rejection, draw the replacement from p, not the residual;
- ``position-keyed-uniforms`` (block rule): key the uniforms by the request's absolute
  position, so a round re-reads the tests the last round read past its kept length;
- ``shared-batch-coin``: every request of a batch step reads one row of uniforms;
- ``temperature-squared``: the engine's sampler applies the temperature twice (both models'
  laws at T**2) while the trace says T, as a sampler chain that divides the logits by T
  twice does. Over ``--temperatures 0.7,1.3`` it is too sharp in some requests and too flat
  in others; with ``--no-uniforms`` only the laws of the tokens and drafts show it.

*Note*: at a large vocabulary the replay check finds divergences in a correct run of this
engine: NumPy's float32 softmax differs from MLX's in the last bits of most entries, and at
V = 128,256 an inverse-CDF draw lands between the two versions of a prefix sum about once in
fifty draws. ``--unrecorded-draws`` records the accept tests alone (the draws as ``null``, as
an engine drawing with its library's categorical does), and the replay compares only those.

`--compact SHARE` writes a compact trace: every round's statistics, computed by the writer
from the laws the engine decided on (``target_probs``, ``draft_probs``), and the rows of
that share of rounds (every round under ``--rule block``).

It prints the writer's time a round (``b64_block`` and ``write_round``, not the engine's
arithmetic), wall clock and the writing thread's CPU time, and the trace's bytes a round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "impl"))

import specaccept_trace as st  # the vendored writer, as an engine imports it

BUGS = ("resample-from-p", "position-keyed-uniforms", "shared-batch-coin", "temperature-squared")
RULES = ("stochastic", "block")
Floats = npt.NDArray[np.float32]


# --- the spec's arithmetic, in float32 -----------------------------------------------------


def distribution(logits: npt.NDArray[np.float16], temperature: float) -> Floats:
    """The law a sampler at `temperature` draws from, `[..., V]` float32, as the reader
    rebuilds it from float16 logits: upcast, shift by the max, divide, softmax."""
    x = logits.astype(np.float32)
    x = (x - x.max(axis=-1, keepdims=True)) / np.float32(temperature)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    out: Floats = e / e.sum(axis=-1, keepdims=True, dtype=np.float32)
    return out


def draw(weights: Floats, u: np.float32) -> int:
    """`sample_from_distribution`: the least id of positive weight whose inclusive prefix
    sum exceeds u times the total, in float32; the last positive id if none does."""
    sums = np.cumsum(weights, dtype=np.float32)
    eligible = (sums > np.float32(u) * sums[-1]) & (weights > 0)
    if eligible.any():
        return int(eligible.argmax())
    return int(np.flatnonzero(weights > 0)[-1])


def residual(p: Floats, q: Floats) -> Floats:
    """relu(p - q) normalised by its sum; p where it has no mass."""
    excess = np.maximum(p - q, np.float32(0))
    mass = excess.sum(dtype=np.float32)
    out: Floats = excess / mass if mass > 0 else p
    return out


def accepts(p: Floats, q: Floats, token: int, u: np.float32) -> bool:
    return bool(p[token] > 0 and np.float32(u) * q[token] <= p[token])


def verify_stochastic(
    p: Floats, q: Floats, drafts: list[int], u: Floats, bug: str | None
) -> list[int]:
    """`verify_tokenwise` under the stochastic rule: the tokens the round emits."""
    for i, token in enumerate(drafts):
        if not accepts(p[i], q[i], token, u[i, 0]):
            law = p[i] if bug == "resample-from-p" else residual(p[i], q[i])
            return [*drafts[:i], draw(law, u[i, 1])]
    return [*drafts, draw(p[len(drafts)], u[len(drafts), 1])]


def verify_block(p: Floats, q: Floats, drafts: list[int], u: Floats) -> list[int]:
    """`verify_blockwise`: keep the longest prefix whose test passes, then draw."""
    k = len(drafts)
    pd = np.array([p[i, t] for i, t in enumerate(drafts)], dtype=np.float32)
    qd = np.array([q[i, t] for i, t in enumerate(drafts)], dtype=np.float32)
    excluded = pd <= 0
    unproposable = (qd <= 0) & ~excluded
    finite = ~(excluded | unproposable)
    one = np.float32(1)
    log_ratio = np.where(finite, np.log(np.where(finite, pd, one))
                         - np.log(np.where(finite, qd, one)), np.float32(0)).astype(np.float32)
    log_ratio = np.where(unproposable, np.abs(log_ratio).sum(dtype=np.float32) + one, log_ratio)
    sums = np.concatenate([np.zeros(1, np.float32), np.cumsum(log_ratio, dtype=np.float32)])
    dead = np.concatenate([[False], np.cumsum(excluded) > 0])
    weights = np.where(dead, np.float32(0), np.exp(sums - np.maximum.accumulate(sums)))
    weights = weights.astype(np.float32)
    excess = np.maximum(weights[:k, None] * p[:k] - q, np.float32(0))
    mass = excess.sum(axis=-1, dtype=np.float32)
    z, w = mass[1:], weights[1:k]
    denominator = z + (one - w)
    inner = np.where(denominator > 0, z / np.where(denominator > 0, denominator, one), one)
    keep = np.concatenate([inner, weights[k:]]).astype(np.float32)
    kept = max([i + 1 for i in range(k) if keep[i] > 0 and u[i, 0] <= keep[i]], default=0)
    if kept == k:
        return [*drafts, draw(p[k], u[k, 1])]
    law = excess[kept] / mass[kept] if mass[kept] > 0 else p[kept]
    return [*drafts[:kept], draw(law.astype(np.float32), u[kept, 1])]


# --- the synthetic models ------------------------------------------------------------------


@dataclass
class Request:
    """One request: its run in the trace, its model's token order, its randomness."""

    run: st.RunWriter
    order: npt.NDArray[np.int64]
    rng: np.random.Generator
    seed: int
    temperature: float = 1.0
    position: int = 0


def zipf_logits(request: Request, rows: int, noise: float, rng: np.random.Generator,
                ramp: Floats) -> Floats:
    """`rows` logit rows: the request's Zipf-like ramp, plus Gaussian noise per row."""
    base = ramp[request.order]
    out: Floats = base + np.float32(noise) * rng.standard_normal((rows, ramp.size),
                                                                 dtype=np.float32)
    return out


def _every_uniform(u: Floats) -> list[list[float | None]]:
    out: list[list[float | None]] = u.tolist()
    return out


def _no_uniforms(u: Floats) -> None:
    return None


def _accept_tests_only(u: Floats) -> list[list[float | None]]:
    return [[float(test), None] for test in u[:-1, 0]] + [[None, None]]


def keyed_uniforms(seed: int, positions: range) -> Floats:
    """Uniforms keyed by absolute position: the same position reads the same values."""
    out: Floats = np.array([np.random.default_rng([seed, position]).random(2, dtype=np.float32)
                            for position in positions], dtype=np.float32)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, required=True, help="V, the vocabulary size")
    parser.add_argument("--rounds", type=int, required=True, help="rounds a request")
    parser.add_argument("--runs", type=int, default=1, help="requests verified in lockstep")
    parser.add_argument("--k", type=int, default=4, help="drafts a round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="the trace (.gz: gzip)")
    parser.add_argument("--rule", choices=RULES, default="stochastic")
    parser.add_argument("--bug", choices=BUGS, default=None)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--temperatures", default=None, metavar="T1,T2,...",
                        help="request r samples at the r-th of these, cycling (instead of "
                        "--temperature)")
    parser.add_argument("--no-uniforms", action="store_true",
                        help="record no uniforms (an engine that cannot read its generator's)")
    parser.add_argument("--omit-undecided-rows", action="store_true",
                        help="write only the rows of the decided positions")
    parser.add_argument("--no-check-values", action="store_true",
                        help="skip the writer's value checks (TraceWriter(check_values=False))")
    parser.add_argument("--unrecorded-draws", action="store_true",
                        help="record the accept tests' uniforms only, the draws as null (an "
                        "engine drawing with its library's categorical)")
    parser.add_argument("--compact", type=float, default=None, metavar="SHARE",
                        help="write a compact trace keeping the rows of this share of rounds")
    parser.add_argument("--stdlib-checks", action="store_true",
                        help="check values on the writer's standard-library path, the one a "
                        "process without NumPy takes")
    args = parser.parse_args(argv)
    for name in ("vocab", "rounds", "runs", "k"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if not 0 < args.temperature < float("inf"):
        parser.error(f"--temperature must be positive and finite, got {args.temperature}")
    if args.temperatures is not None:
        try:
            temperatures = [float(t) for t in args.temperatures.split(",")]
        except ValueError:
            parser.error(f"--temperatures must be numbers separated by commas, got "
                         f"{args.temperatures!r}")
        if not all(0 < t < float("inf") for t in temperatures):
            parser.error(f"--temperatures must be positive and finite, got {args.temperatures}")
    if args.compact is not None and not 0 <= args.compact <= 1:
        parser.error(f"--compact must be a share in [0, 1], got {args.compact}")
    if args.bug == "position-keyed-uniforms" and args.rule != "block":
        parser.error("--bug position-keyed-uniforms is a block-rule bug: add --rule block")
    result = run(args)
    print(f"wrote {args.out}: {result['rounds']} rounds, V = {args.vocab}, k = {args.k}, "
          f"rule {args.rule}, bug {args.bug or 'none'}")
    print(f"writer ms a round: median {result['median_ms']:.2f}, mean {result['mean_ms']:.2f}, "
          f"CPU median {result['median_cpu_ms']:.2f}")
    print(f"bytes a round: {result['bytes_per_round']:.0f}")
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the engine; the writer's time a round and the trace's bytes a round."""
    numpy_checks = getattr(st, "_numpy", None)
    if getattr(args, "stdlib_checks", False):
        st._numpy = None  # the path the writer takes where NumPy cannot be imported
    try:
        return _run(args)
    finally:
        st._numpy = numpy_checks


def _run(args: argparse.Namespace) -> dict[str, Any]:
    vocab, k = args.vocab, args.k
    temperatures = ([float(t) for t in args.temperatures.split(",")]
                    if getattr(args, "temperatures", None) else [args.temperature])
    rng = np.random.default_rng(args.seed)
    ramp = (-1.1 * np.log1p(np.arange(vocab))).astype(np.float32)
    timings: list[float] = []
    cpu: list[float] = []  # the writer's thread's CPU time: what a busy host's waits leave out
    engine = f"synthetic numpy engine: rule {args.rule}, bug {args.bug or 'none'}"
    # Passed only when set, so that a writer from before the option can be timed.
    options: dict[str, Any] = {"omit_undecided_rows": True} if args.omit_undecided_rows else {}
    compact = getattr(args, "compact", None)
    if compact is not None:
        options["compact"] = compact
    with st.TraceWriter(args.out, vocab_size=vocab, engine=engine,
                        check_values=not args.no_check_values, **options) as trace:
        requests = []
        for slot in range(args.runs):
            seed = int(rng.integers(2**62))
            prompt = rng.integers(vocab, size=3).tolist()
            temperature = temperatures[slot % len(temperatures)]
            sampler = {"temperature": temperature}
            run_writer = trace.start_run(f"request-{slot}", prompt=prompt,
                                         target_sampler=sampler, draft_sampler=sampler)
            requests.append(Request(run_writer, rng.permutation(vocab),
                                    np.random.default_rng(seed), seed, temperature))
        for step in range(args.rounds):
            shared = rng.random((k + 1, 2), dtype=np.float32)
            for slot, request in enumerate(requests):
                own = request.rng
                target_logits = zipf_logits(request, k + 1, 1.0, own, ramp).astype(np.float16)
                draft_logits = (target_logits[:k].astype(np.float32) + np.float32(0.5)
                                * own.standard_normal((k, vocab), dtype=np.float32)
                                ).astype(np.float16)
                # The engine's own temperature: twice applied under temperature-squared.
                drawn_at = request.temperature * (
                    request.temperature if args.bug == "temperature-squared" else 1.0)
                p, q = distribution(target_logits, drawn_at), distribution(
                    draft_logits, drawn_at)
                drafts = [draw(q[i], np.float32(own.random(dtype=np.float32))) for i in range(k)]
                if args.bug == "shared-batch-coin":
                    u = shared
                elif args.bug == "position-keyed-uniforms":
                    u = keyed_uniforms(request.seed, range(request.position,
                                                           request.position + k + 1))
                else:
                    u = own.random((k + 1, 2), dtype=np.float32)
                if args.rule == "block":
                    emitted = verify_block(p, q, drafts, u)
                else:
                    emitted = verify_stochastic(p, q, drafts, u, args.bug)
                target_bytes, draft_bytes = target_logits.tobytes(), draft_logits.tobytes()
                recorded: Callable[[Floats], list[list[float | None]] | None]
                if getattr(args, "unrecorded_draws", False):
                    recorded = _accept_tests_only
                else:
                    recorded = _every_uniform
                if getattr(args, "no_uniforms", False):
                    recorded = _no_uniforms
                start, start_cpu = time.perf_counter(), time.thread_time()
                laws: dict[str, Any] = ({"target_probs": p, "draft_probs": q}
                                        if compact is not None else {})
                rows = request.run.keeps_rows(args.rule) if compact is not None else True
                request.run.write_round(
                    rule=args.rule, draft_tokens=drafts, emitted=emitted,
                    target=st.b64_block(target_bytes, rows=k + 1, kind="logits",
                                        dtype="float16") if rows else None,
                    draft=st.b64_block(draft_bytes, rows=k, kind="logits", dtype="float16")
                    if rows else None,
                    uniforms=recorded(u), batch=(step, slot), **laws)
                timings.append(time.perf_counter() - start)
                cpu.append(time.thread_time() - start_cpu)
                request.position += len(emitted)
    rounds = len(timings)
    return {"rounds": rounds, "median_ms": 1e3 * statistics.median(timings),
            "mean_ms": 1e3 * statistics.fmean(timings),
            "median_cpu_ms": 1e3 * statistics.median(cpu),
            "bytes_per_round": os.path.getsize(args.out) / rounds}


if __name__ == "__main__":
    raise SystemExit(main())
