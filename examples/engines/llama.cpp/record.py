"""Record llama.cpp's speculative decoding, as llama-cpp-python drives it, as a conformance trace.

llama-cpp-python 0.3.36 (``Llama(draft_model=...)``, the path its OpenAI-compatible server
takes) verifies drafts by sampler-match: it runs the target once over the current token and
the drafts, draws each position with its llama.cpp sampler chain, and keeps a draft while it
equals the draw. This recorder runs that code, unchanged, from the pinned PyPI sdist: the
Python package ``llama_cpp`` (its ``Llama.generate`` loop and ctypes bindings) over the
``libllama`` built from the llama.cpp the sdist vendors. Both models of the demo pair are
converted to GGUF (``to_gguf.py``) and run by llama.cpp, the drafter proposing greedily (or,
with ``--drafter prompt-lookup``, the sdist's ``LlamaPromptLookupDecoding`` drafting).

Each run is a ``generate`` call with its own seed and temperature; each round is one
verification: the drafts, what ``generate`` yielded, the target rows llama.cpp computed
(``Llama.scores``, the logits the sampler read) and, for a sampled run, the uniforms of
llama.cpp's ``dist`` sampler (std::mt19937 seeded with the run's seed, one
``uniform_real_distribution<double>`` per draw), recomputed here; every one is written, the
summary counts those that give the emitted token again, and conform's replay judges them.

Usage (from the repository root)::

    python examples/engines/llama.cpp/record.py --rounds 1000 --out llama.jsonl.gz
    specaccept conform llama.jsonl.gz
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # `engines`: the recorders' shared helpers

from engines.arguments import integer_at_least  # noqa: E402

VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}.tar.gz"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SOURCE = f"llama_cpp_python-{VERSION}"
DEFAULT_CACHE = Path(os.environ.get("SPECACCEPT_ENGINE_CACHE",
                                    Path.home() / ".cache" / "specaccept-engines"))
FROM_SDIST = {
    "llama_cpp/llama.py": "fff35cbe5f93076683089447cf7b38195c85a9d7bb344459fa22361994b1f228",
    "llama_cpp/_internals.py": "349a1794a0061685ce1ad52e38aba0c9906a7907e83df1167cf36bfbbba0dd58",
    "llama_cpp/llama_cpp.py": "db8d48ce5003d8ed1bb690b3b529ae112ca71881110a43fb9acd164210848fd0",
    "llama_cpp/llama_speculative.py":
        "37dabf1ee9aad01d82da6d5e69fbc0a37cdebd7ac5bc042cac8ead4e3d6fb6ba",
    "vendor/llama.cpp/src/llama-sampler.cpp":
        "991c4a1eb391bdb56fac75cf1c09b837e601b879f56b58058c14d28a9051a449",
}
"""The sdist's files the recorded decisions go through (the verification loop, the bindings,
llama.cpp's samplers), with their SHA-256, checked on every run."""
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF", "-DLLAMA_BUILD_EXAMPLES=ON", "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DGGML_NATIVE=ON",
)
"""CPU only, tuned to this CPU; the examples are configured (their targets exist in the same
build folder) but only the ``llama`` target is built."""

# Planted defects, each a one-line change of the sdist's llama.py:
# - temperature-squared: the sampler chain applies the temperature twice (draws at T^2
#   while the trace, like the caller, says T); replay fails, and so does the law check at a
#   single temperature (over a mix of T < 1 and T > 1 the two deviations cancel in a pooled
#   chi-square, so the law check also tests the temperatures apart).
# - reseed-each-round: the sampler is reset (its mt19937 reseeded with the run's seed) before
#   every forward of generate, so each round re-draws the run's first uniforms; the recorded
#   uniforms (the unbroken stream) no longer give the emitted tokens and replay fails.
MUTANTS = {
    "temperature-squared": ("sampler.add_temp(temp)", "sampler.add_temp(temp * temp)"),
    "reseed-each-round": ("            self.eval(tokens)\n",
                          "            self.eval(tokens)\n            self._sampler.reset()\n"),
}
CONTEXT = 512
"""llama.cpp's context for both models (the demo models were trained on 256 tokens)."""
PROMPT_LENGTH = 32
TEMPERATURES = (0.7, 0.0, 1.0, 1.3)
"""Run r samples at TEMPERATURES[r % 4] (0 is llama.cpp's greedy sampler)."""


class RecorderError(Exception):
    """A setting or the environment is unusable; the message says which and why."""


# --- llama.cpp from the sdist -------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def engine_dir(cache: Path) -> Path:
    """Where the sdist, its extraction and the build live: ``CACHE/llama.cpp``."""
    return cache / "llama.cpp"


def sdist_path(cache: Path, download: bool) -> Path:
    """The pinned sdist under `cache`, downloaded by pip if absent, checked against its hash."""
    cache = engine_dir(cache)
    path = cache / SDIST
    if not path.exists():
        if not download:
            raise RecorderError(f"--cache {cache}: {SDIST} is not there; run `pip download "
                                f"--no-deps --no-binary :all: llama-cpp-python=={VERSION} "
                                f"-d {cache}`")
        cache.mkdir(parents=True, exist_ok=True)
        print(f"downloading llama-cpp-python=={VERSION} (sdist, no dependencies) into {cache}",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", f"llama-cpp-python=={VERSION}", "-d",
                        str(cache)], check=True)
    if _sha256(path) != SDIST_SHA256:
        raise RecorderError(f"--cache {cache}: {SDIST} has sha256 {_sha256(path)}, not the "
                            f"pinned {SDIST_SHA256}")
    return path


def source_tree(cache: Path, sdist: Path) -> Path:
    """The sdist extracted under `cache` (once), its checked files verified each time."""
    cache = engine_dir(cache)
    root = cache / SOURCE
    if not (root / "vendor" / "llama.cpp" / "CMakeLists.txt").exists():
        print(f"extracting {sdist.name} into {cache}", file=sys.stderr)
        with tarfile.open(sdist) as archive:
            archive.extractall(cache, filter="data")
    for member, sha256 in FROM_SDIST.items():
        if _sha256(root / member) != sha256:
            raise RecorderError(f"{root / member} is not llama-cpp-python {VERSION}'s (its "
                                f"SHA-256 is {_sha256(root / member)}); remove {root}")
    return root


def build_libllama(cache: Path, root: Path, jobs: int) -> Path:
    """``libllama`` built from the vendored llama.cpp with CMake (once); its folder."""
    build = engine_dir(cache) / "build"
    library = build / "bin" / "libllama.so"
    if library.exists():
        return library.parent
    if shutil.which("cmake") is None:
        raise RecorderError("cmake is not on PATH; it builds libllama from the sdist")
    print(f"building libllama from {root / 'vendor' / 'llama.cpp'} into {build} (CPU only, "
          f"-j{jobs}); this takes minutes", file=sys.stderr)
    started = time.perf_counter()
    subprocess.run(["cmake", "-S", str(root / "vendor" / "llama.cpp"), "-B", str(build),
                    *CMAKE_OPTIONS], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build), "--target", "llama", f"-j{jobs}"],
                   check=True, stdout=subprocess.DEVNULL)
    print(f"built libllama in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if not library.exists():
        raise RecorderError(f"the build finished without {library}")
    return library.parent


def load_llama_cpp(root: Path, library_dir: Path, staging: Path, mutant: str | None) -> Any:
    """Import the sdist's ``llama_cpp`` package (with `mutant` planted) over `library_dir`."""
    package = staging / "llama_cpp"
    shutil.copytree(root / "llama_cpp", package, ignore=shutil.ignore_patterns("lib"))
    if mutant is not None:
        before, after = MUTANTS[mutant]
        source = (package / "llama.py").read_text(encoding="utf-8")
        if source.count(before) != 1:
            raise RecorderError(f"--mutant {mutant}: the line it changes occurs "
                                f"{source.count(before)} times in llama_cpp/llama.py, not once")
        (package / "llama.py").write_text(source.replace(before, after), encoding="utf-8")
    if "llama_cpp" in sys.modules:
        raise RecorderError("a module named llama_cpp is already imported; run the recorder "
                            "in a process of its own")
    os.environ["LLAMA_CPP_LIB_PATH"] = str(library_dir)
    sys.path.insert(0, str(staging))
    return importlib.import_module("llama_cpp")


# --- llama.cpp's dist sampler, reproduced -------------------------------------------------


class DistUniforms:
    """The uniforms llama.cpp's ``dist`` sampler draws for a seed, in order.

    ``llama_sampler_init_dist(seed)`` seeds a ``std::mt19937`` with `seed`; each draw takes
    ``std::uniform_real_distribution<double>(0, 1)``, which in libstdc++ is
    ``generate_canonical<double, 53>``: two 32-bit outputs a, b and ``(a + b 2^32) / 2^64``
    in double. NumPy's ``RandomState(seed)`` seeds its MT19937 the same way (init_genrand).
    """

    def __init__(self, seed: int) -> None:
        seeded = np.random.RandomState(seed).get_state(legacy=False)
        self._generator = np.random.MT19937()
        self._generator.state = {"bit_generator": "MT19937", "state": seeded["state"]}

    def next(self) -> float:
        low, high = (float(x) for x in self._generator.random_raw(2))
        value = (low + high * 4294967296.0) / 18446744073709551616.0
        return value if value < 1.0 else float(np.nextafter(1.0, 0.0))


def dist_draw(logits: Any, temperature: float, u: float) -> int:
    """The token llama.cpp's ``temp`` then ``dist`` samplers pick from `logits` with `u`.

    ``dist`` exponentiates in float (after subtracting the maximum), sums in double, and
    takes the first id, in id order, whose running double sum reaches ``u`` times the total.
    """
    scaled = (np.asarray(logits, dtype=np.float32) / np.float32(temperature)).astype(np.float32)
    weights = np.exp(scaled - scaled.max()).astype(np.float32).astype(np.float64)
    running = np.cumsum(weights)
    return int(np.argmax(running >= running[-1] * u))


# --- the recording ------------------------------------------------------------------------


@dataclass
class Settings:
    rounds: int
    out: Path
    drafts: int
    tokens_per_run: int
    temperatures: tuple[float, ...]
    seed: int
    mutant: str | None
    cache: Path
    download: bool
    jobs: int
    gguf_dir: Path | None
    drafter: str = "model"


@dataclass
class Round:
    """What the generator did between two drafter calls."""

    drafts: list[int]
    start: int
    emitted: list[int] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)
    uniforms: list[float | None] = field(default_factory=list)


class StopRun(Exception):
    """Raised from the drafter to end a `generate` call at a round boundary."""


def greedy_proposer(model: Any, drafts: int) -> Any:
    """Drafts `drafts` tokens, each the argmax of llama.cpp's `model` (the demo drafter)."""

    def propose(input_ids: Any) -> Any:
        history = [int(t) for t in input_ids]
        cached = model.input_ids[: model.n_tokens].tolist()
        common = 0
        for a, b in zip(cached, history, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(history) - 1)
        model.n_tokens = common
        model.eval(history[common:])
        out: list[int] = []
        for j in range(drafts):
            token = int(np.argmax(model.scores[model.n_tokens - 1]))
            out.append(token)
            if j + 1 < drafts:
                model.eval([token])
        return np.array(out, dtype=np.intc)

    return propose


def watched_drafter(llama_cpp: Any, propose: Any) -> Any:
    """A ``LlamaDraftModel`` that drafts with `propose` and reports each call and its drafts."""
    base = llama_cpp.llama_speculative.LlamaDraftModel

    class WatchedDrafter(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.on_call: Any = None
            self.on_drafts: Any = None

        def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
            if self.on_call is not None:
                self.on_call([int(t) for t in input_ids])
            out = propose(input_ids)
            if self.on_drafts is not None:
                self.on_drafts([int(t) for t in out])
            return out

    return WatchedDrafter()


def record(settings: Settings) -> dict[str, Any]:
    sys.path.insert(0, str(HERE.parents[2] / "impl"))
    from to_gguf import convert_demo_pair

    import specaccept_trace as st

    sdist = sdist_path(settings.cache, settings.download)
    root = source_tree(settings.cache, sdist)
    library_dir = build_libllama(settings.cache, root, settings.jobs)
    with tempfile.TemporaryDirectory(prefix="specaccept-llama-") as tmp:
        staging = Path(tmp)
        target_gguf, drafter_gguf = convert_demo_pair(settings.gguf_dir or staging / "gguf")
        llama_cpp = load_llama_cpp(root, library_dir, staging / "py", settings.mutant)
        importlib.import_module("llama_cpp.llama_speculative")
        n_ctx = CONTEXT
        common = {"n_ctx": n_ctx, "n_batch": 512, "logits_all": True, "verbose": False,
                  "n_threads": 1, "n_threads_batch": 1}
        if settings.drafter == "model":
            drafter_model = llama_cpp.Llama(model_path=str(drafter_gguf), **common)
            propose = greedy_proposer(drafter_model, settings.drafts)
        else:  # the drafter llama-cpp-python's server configures, from the sdist
            propose = llama_cpp.llama_speculative.LlamaPromptLookupDecoding(
                num_pred_tokens=settings.drafts)
        drafter = watched_drafter(llama_cpp, propose)
        target = llama_cpp.Llama(model_path=str(target_gguf), draft_model=drafter, **common)
        vocab = int(target.n_vocab())
        corpus = _corpus_ids()
        stats: dict[str, Any] = {"rounds": 0, "runs": 0, "tokens": 0, "drafts": 0,
                                 "accepted": 0, "draws": 0, "draws_reproduced": 0}
        rng = np.random.default_rng(settings.seed)
        started = time.perf_counter()
        engine = (f"llama-cpp-python {VERSION} (Llama.generate, {settings.drafter} drafter), "
                  f"libllama from its vendored llama.cpp, CPU")
        with st.TraceWriter(str(settings.out), vocab_size=vocab, engine=engine) as trace:
            r = 0
            while stats["rounds"] < settings.rounds:
                temperature = settings.temperatures[r % len(settings.temperatures)]
                seed = int(rng.integers(0, 2**32 - 1))
                offset = int(rng.integers(0, len(corpus) - 64))
                prompt = corpus[offset: offset + PROMPT_LENGTH]
                run = trace.start_run(f"run-{r}", prompt=prompt,
                                      target_sampler={"temperature": temperature},
                                      extra={"seed": seed, "temperature": temperature})
                budget = min(settings.tokens_per_run, n_ctx - len(prompt) - settings.drafts - 2)
                _record_run(target, drafter, run, prompt, temperature, seed,
                            budget, settings.rounds - stats["rounds"], stats)
                stats["runs"] += 1
                r += 1
        stats["wall_s"] = round(time.perf_counter() - started, 2)
    return stats


def _corpus_ids() -> list[int]:
    from specaccept.demo import corpus_path, target_path

    tokenizer = json.loads((target_path() / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tokenizer["model"]["vocab"]
    text = corpus_path().read_text(encoding="utf-8")
    held_out = text[int(len(text) * 0.9):]
    return [vocab[c] for c in held_out if c in vocab]


def _record_run(target: Any, drafter: Any, run: Any, prompt: list[int],
                temperature: float, seed: int, budget: int, rounds_left: int,
                stats: dict[str, Any]) -> None:
    import specaccept_trace as st

    greedy = temperature == 0.0
    uniforms = None if greedy else DistUniforms(seed)
    history = list(prompt)
    current = Round(drafts=[], start=len(history))
    written = 0

    def close_round() -> None:
        nonlocal written
        if not current.emitted:
            return
        rows = np.stack(current.rows).astype(np.float32)
        k, a = len(current.drafts), len(current.emitted) - 1
        run.write_round(
            rule="greedy-argmax" if greedy else "sampler-match",
            draft_tokens=current.drafts, emitted=current.emitted,
            target=st.b64_block(np.ascontiguousarray(rows, dtype="<f4").tobytes(),
                                rows=rows.shape[0], kind="logits"),
            uniforms=None if greedy else
            [[None, current.uniforms[i] if i < len(current.uniforms) else None]
             for i in range(k + 1)],
            cache={"target_before": current.start - 1 if written else 0,
                   "target_fed": k + 1 if written else len(prompt),
                   "target_after": current.start + len(current.emitted) - 1},
        )
        written += 1
        stats["rounds"] += 1
        stats["drafts"] += k
        stats["accepted"] += a
        stats["tokens"] += len(current.emitted)

    def on_draft_call(seen: list[int]) -> None:
        nonlocal current
        if seen != history:
            raise RecorderError(f"run {run.run_id}: the drafter was handed a history of "
                                f"{len(seen)} tokens that is not the {len(history)} emitted")
        close_round()
        if written >= rounds_left or len(history) - len(prompt) >= budget:
            raise StopRun
        current = Round(drafts=[], start=len(history))

    def on_drafts(drafts: list[int]) -> None:
        current.drafts = list(drafts)

    drafter.on_call, drafter.on_drafts = on_draft_call, on_drafts
    target.reset()  # no prefix shared with the last run's cache: round 0 is a full prefill
    target.set_seed(seed)
    generator = target.generate(prompt, top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0,
                                temp=temperature, repeat_penalty=1.0, reset=True)
    try:
        for token in generator:
            row = np.array(target.scores[len(history) - 1], dtype=np.float32)
            current.rows.append(row)
            if uniforms is not None:
                # The uniform llama.cpp's dist sampler drew is recorded whether or not the
                # draw reproduces here: conform's replay is what judges it.
                u = uniforms.next()
                current.uniforms.append(u)
                stats["draws"] += 1
                stats["draws_reproduced"] += dist_draw(row, temperature, u) == int(token)
            current.emitted.append(int(token))
            history.append(int(token))
    except StopRun:
        pass
    finally:
        drafter.on_call = drafter.on_drafts = None
        generator.close()


# --- command line -------------------------------------------------------------------------



def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=integer_at_least("--rounds", 1), required=True,
                        help="verification rounds to record, over as many runs as it takes")
    parser.add_argument("--out", type=Path, required=True, help="trace file (.gz: gzipped)")
    parser.add_argument("--drafts", type=integer_at_least("--drafts", 1), default=4,
                        help="tokens the drafter proposes a round (default 4)")
    parser.add_argument("--drafter", choices=("model", "prompt-lookup"), default="model",
                        help="model: the demo drafter in llama.cpp, greedy (default); "
                             "prompt-lookup: llama-cpp-python's LlamaPromptLookupDecoding, "
                             "the drafter its server sets up")
    parser.add_argument("--tokens-per-run", type=integer_at_least("--tokens-per-run", 1),
                        default=200,
                        help="tokens a run generates before the next starts (default 200)")
    parser.add_argument("--temperatures", default=",".join(map(str, TEMPERATURES)),
                        help="comma-separated; run r samples at entry r mod their number "
                             "(0: greedy)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the runs' seeds and prompts")
    parser.add_argument("--mutant", choices=sorted(MUTANTS), default=None,
                        help="plant a defect in llama-cpp-python's llama.py (see README)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help="folder for the sdist, its extraction and the build "
                             "(default ~/.cache/specaccept-engines or $SPECACCEPT_ENGINE_CACHE)")
    parser.add_argument("--no-download", action="store_true",
                        help="fail instead of downloading the sdist")
    parser.add_argument("--jobs", type=integer_at_least("--jobs", 1), default=2,
                        help="parallel compile jobs for the one-time build (default 2)")
    parser.add_argument("--gguf-dir", type=Path, default=None,
                        help="keep the converted demo pair here (default: a temporary folder)")
    args = parser.parse_args(argv)
    if args.drafts > 64:
        parser.error(f"--drafts must be at most 64, got {args.drafts}")
    if args.tokens_per_run + args.drafts > CONTEXT - PROMPT_LENGTH - 2:
        parser.error(f"--tokens-per-run plus --drafts must be at most "
                     f"{CONTEXT - PROMPT_LENGTH - 2} (the context of {CONTEXT} less the "
                     f"prompt), got {args.tokens_per_run} + {args.drafts}")
    temperatures: list[float] = []
    for text in args.temperatures.split(","):
        try:
            value = float(text)
        except ValueError:
            parser.error(f"--temperatures: {text!r} is not a number")
        if not (value == 0.0 or 0.05 <= value <= 10.0):
            parser.error(f"--temperatures entries must be 0 (greedy) or in [0.05, 10], "
                         f"got {value}")
        temperatures.append(value)
    return Settings(args.rounds, args.out, args.drafts, args.tokens_per_run,
                    tuple(temperatures), args.seed, args.mutant, args.cache,
                    not args.no_download, args.jobs, args.gguf_dir, args.drafter)


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    sys.path.insert(0, str(HERE))
    try:
        stats = record(settings)
    except (RecorderError, OSError, ValueError, subprocess.CalledProcessError) as error:
        # ValueError: the trace writer's TraceWriteError (an --out that exists, say)
        print(f"record.py: {error}", file=sys.stderr)
        return 2
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
