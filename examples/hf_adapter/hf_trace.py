"""Record Hugging Face transformers' assisted generation as a specaccept conformance trace.

transformers' speculative sampling (``generate(..., assistant_model=drafter,
do_sample=True)``) has no round observer: its loop, ``_assisted_decoding``, calls the
assistant's ``generate`` for the drafts, the target once over the drafts, and the
module-level ``_speculative_sampling`` to decide. This adapter records a soak of many short
``generate`` calls without changing a line of transformers. For the time of one call it
wraps, and then restores:

- ``AssistedCandidateGenerator.get_candidates``: where a round starts (the previous round
  ends: both caches' entries are read then) and which drafts it proposed;
- ``torch.multinomial``: each draw and the probability row it was drawn from, so that the
  drafter's ``q`` is the law its drafts were really drawn from, after every warper HF
  applied, rather than a description of it;
- ``torch.rand_like`` and ``torch.rand`` inside ``_speculative_sampling``: the accept
  uniforms ``r_i`` of HF's test ``r_i < p_i / q_i``;
- ``_speculative_sampling`` itself: the target's rows ``p`` as HF decided with them
  (``softmax`` of the processed logits), the tokens it returned;
- a forward pre-hook on each model: the cache's entries (``get_seq_length()``) and the
  tokens fed, for the offsets (the target's first forward is the prefill fused with the
  first verification: ``target_fed``; the assistant's cache is cropped when its next
  ``get_candidates`` starts: a lazy rewind).

The replacement or bonus token is drawn with ``torch.multinomial``, not with the spec's
inverse-CDF draw, so its uniform is recorded as ``null``.

This process imports torch, transformers, safetensors and the standard-library writer
``specaccept_trace`` (``impl/specaccept_trace.py``), never mlx or the specaccept package;
it checks that at the end. Check the trace in another process with ``specaccept conform``.

    python examples/hf_adapter/hf_trace.py hf-t0.7.jsonl.gz --temp 0.7 --runs 60

``--bug`` runs a copy of HF's ``_speculative_sampling`` with one line changed, to show
that the checks catch it (see `BUGS`); ``--misrecord-q`` leaves HF alone and has the adapter
record the drafter's law before the temperature instead of the law its drafts were drawn
from, to show what a wrongly recorded ``q`` does to a correct engine's verdict.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import patch

import torch
import transformers
import transformers.generation.utils as hf_utils
from hf_convert import load_demo_pair, prompt_ids
from transformers.generation.candidate_generator import AssistedCandidateGenerator

import specaccept_trace as st

__all__ = ["BUGS", "HfRecorder", "record_soak"]

RULE = "stochastic"
"""HF's `_speculative_sampling` is modified rejection sampling (Leviathan et al., Alg. 1)."""

_REUSED_SEED = 1234
BUGS: dict[str, tuple[str, str, str]] = {
    # name: (HF's line, the line that replaces it, what the bug is)
    "resample-from-p": (
        "p_prime = torch.clamp((p_n_plus_1 - q_n_plus_1), min=0)",
        "p_prime = p_n_plus_1.clone()",
        "after a rejection, the replacement is drawn from p instead of relu(p - q)",
    ),
    "raw-logits-q": (
        "q = candidate_logits.softmax(dim=-1)",
        "q = (candidate_logits * _TEMPERATURE).softmax(dim=-1)",
        "the accept test reads q from the assistant's logits before the temperature, "
        "while the drafts are drawn from the tempered law",
    ),
    "reused-uniforms": (
        "r_i = torch.rand_like(probability_ratio)",
        "r_i = torch.rand_like(probability_ratio, generator=_REUSED.manual_seed(_REUSED_SEED))",
        "every round's accept uniforms come from a generator re-seeded alike",
    ),
}


def mutant(bug: str, temperature: float) -> Callable[..., Any]:
    """HF's `_speculative_sampling` with the one line of `BUGS[bug]` replaced.

    Raises:
        ValueError: the installed transformers no longer has that line.
    """
    original, replacement, _ = BUGS[bug]
    source = inspect.getsource(hf_utils._speculative_sampling)
    if source.count(original) != 1:
        raise ValueError(f"bug {bug!r}: transformers {transformers.__version__}'s "
                         f"_speculative_sampling does not hold the line {original!r} once")
    namespace = dict(vars(hf_utils))
    namespace.update(_TEMPERATURE=temperature, _REUSED=torch.Generator(),
                     _REUSED_SEED=_REUSED_SEED)
    exec(compile(source.replace(original, replacement), f"<{bug}>", "exec"), namespace)
    function: Callable[..., Any] = namespace["_speculative_sampling"]
    return function


@dataclass
class Round:
    """What one round of `_assisted_decoding` saw and decided, as the wrappers saw it."""

    drafts: list[int] = field(default_factory=list)
    q_rows: list[list[float]] = field(default_factory=list)
    """The rows `torch.multinomial` drew each draft from, in the assistant's generate."""
    drawn: list[int] = field(default_factory=list)
    """The tokens those draws returned; `_write_round` checks that they are the drafts."""
    q_used: torch.Tensor | None = None
    """softmax(candidate_logits): the q `_speculative_sampling` is handed (before any mutant)."""
    p_rows: list[list[float]] = field(default_factory=list)
    uniforms: list[float] = field(default_factory=list)
    emitted: list[int] = field(default_factory=list)
    hf_n_matches: int | None = None
    draft_before: int | None = None
    draft_fed: int | None = None
    target_before: int | None = None
    target_fed: int | None = None
    target_after: int | None = None
    draft_after: int | None = None
    stopped: bool = False


class HfRecorder:
    """The state the wrappers share during one `generate` call."""

    def __init__(self, speculative_sampling: Callable[..., Any]) -> None:
        self.rounds: list[Round] = []
        self.phase = "idle"
        self.speculative_sampling = speculative_sampling
        self.caches: dict[str, Any] = {}
        self.settings: dict[str, Any] = {}
        """The candidate generator's effective settings, read on its first round."""

    # --- round boundaries --------------------------------------------------------------

    def _close_round(self) -> None:
        if self.rounds:
            last = self.rounds[-1]
            last.target_after = self._entries("target")
            last.draft_after = self._entries("draft")

    def _entries(self, role: str) -> int | None:
        cache = self.caches.get(role)
        return None if cache is None else int(cache.get_seq_length())

    def finish(self) -> None:
        self._close_round()
        self.phase = "idle"

    # --- the wrappers ------------------------------------------------------------------

    def get_candidates(self, inner: Callable[..., Any], generator: Any, input_ids: torch.Tensor,
                       **kwargs: Any) -> Any:
        self._close_round()
        if not self.settings:
            self.settings = {
                "hf_num_assistant_tokens": generator.num_assistant_tokens,
                "hf_assistant_confidence_threshold": generator.assistant_confidence_threshold,
                "hf_logits_processors": [type(p).__name__ for p in generator.logits_processor],
            }
        self.rounds.append(Round())
        self.phase = "draft"
        candidate_ids, candidate_logits = inner(generator, input_ids, **kwargs)
        round_ = self.rounds[-1]
        round_.drafts = [int(t) for t in candidate_ids[0, input_ids.shape[1]:].tolist()]
        if candidate_logits is not None:
            round_.q_used = candidate_logits[0].softmax(dim=-1)
        self.phase = "verify"
        return candidate_ids, candidate_logits

    def pre_forward(self, role: str, kwargs: dict[str, Any]) -> None:
        if not self.rounds:
            return
        round_ = self.rounds[-1]
        cache = kwargs.get("cache")
        self.caches[role] = cache
        before = 0 if cache is None else int(cache.get_seq_length())
        fed = int(kwargs["input_ids"].shape[1])
        if role == "draft" and round_.draft_before is None:
            round_.draft_before, round_.draft_fed = before, fed
        elif role == "target":
            round_.target_before, round_.target_fed = before, fed

    def multinomial(self, inner: Callable[..., torch.Tensor], probs: torch.Tensor,
                    *args: Any, **kwargs: Any) -> torch.Tensor:
        tokens = inner(probs, *args, **kwargs)
        if self.rounds and self.phase == "draft":
            self.rounds[-1].q_rows.append(probs[0].float().tolist())
            self.rounds[-1].drawn.append(int(tokens.reshape(-1)[0]))
        elif self.rounds and self.phase == "verify":
            # No drafts (the token budget left none): HF samples the target's row directly.
            round_ = self.rounds[-1]
            round_.p_rows = probs.reshape(-1, probs.shape[-1]).float().tolist()
            round_.emitted = [int(t) for t in tokens.reshape(-1).tolist()]
        return tokens

    def speculative(self, candidate_input_ids: torch.Tensor, candidate_logits: torch.Tensor,
                    candidate_length: int, new_logits: torch.Tensor, **kwargs: Any) -> Any:
        round_ = self.rounds[-1]
        round_.p_rows = new_logits[0].softmax(dim=-1).float().tolist()
        self.phase = "decide"
        with _recording_uniforms(round_.uniforms):
            valid_tokens, n_matches = self.speculative_sampling(
                candidate_input_ids, candidate_logits, candidate_length, new_logits, **kwargs)
        self.phase = "idle"
        round_.emitted = [int(t) for t in valid_tokens.reshape(-1).tolist()]
        round_.hf_n_matches = int(n_matches)
        return valid_tokens, n_matches


@contextmanager
def _recording_uniforms(out: list[float]) -> Iterator[None]:
    """Within the block, every `torch.rand_like` / `torch.rand` value is appended to `out`."""
    rand_like, rand = torch.rand_like, torch.rand

    def recording_rand_like(*args: Any, **kwargs: Any) -> torch.Tensor:
        values = rand_like(*args, **kwargs)
        out.extend(float(v) for v in values.reshape(-1).tolist())
        return values

    def recording_rand(*args: Any, **kwargs: Any) -> torch.Tensor:
        values = rand(*args, **kwargs)
        out.extend(float(v) for v in values.reshape(-1).tolist())
        return values

    with patch.object(torch, "rand_like", recording_rand_like), \
            patch.object(torch, "rand", recording_rand):
        yield


@contextmanager
def recording(recorder: HfRecorder, target: torch.nn.Module, drafter: torch.nn.Module,
              ) -> Iterator[None]:
    """Install the wrappers and hooks for one `generate` call; restore everything after."""
    get_candidates = AssistedCandidateGenerator.get_candidates
    multinomial = torch.multinomial

    def wrapped_get_candidates(generator: Any, input_ids: torch.Tensor, **kwargs: Any) -> Any:
        return recorder.get_candidates(get_candidates, generator, input_ids, **kwargs)

    def wrapped_multinomial(probs: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return recorder.multinomial(multinomial, probs, *args, **kwargs)

    def hook(role: str) -> Callable[..., None]:
        def pre_forward(module: torch.nn.Module, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> None:
            recorder.pre_forward(role, kwargs)
        return pre_forward

    handles = [target.register_forward_pre_hook(hook("target"), with_kwargs=True),
               drafter.register_forward_pre_hook(hook("draft"), with_kwargs=True)]
    try:
        with patch.object(AssistedCandidateGenerator, "get_candidates", wrapped_get_candidates), \
                patch.object(torch, "multinomial", wrapped_multinomial), \
                patch.object(hf_utils, "_speculative_sampling", recorder.speculative):
            yield
    finally:
        for handle in handles:
            handle.remove()
        recorder.finish()


def _reconcile(rounds: list[Round], generated: list[int]) -> None:
    """Cut the rounds' emission to what `generate` returned (HF crops at EOS and the budget)."""
    position = 0
    for round_ in rounds:
        kept = generated[position:position + len(round_.emitted)]
        if kept != round_.emitted:
            if round_ is not rounds[-1] or round_.emitted[:len(kept)] != kept:
                raise RuntimeError(f"the recorded emission {round_.emitted} disagrees with what "
                                   f"generate returned at {position}: {kept}")
            round_.emitted, round_.stopped = kept, True
        position += len(kept)
    if position != len(generated):
        raise RuntimeError(f"the rounds emitted {position} tokens, generate returned "
                           f"{len(generated)}")


def _untempered(rows: list[list[float]], temperature: float) -> list[list[float]]:
    """softmax(logits) from rows softmax(logits / temperature): each row to the power T."""
    out = []
    for row in rows:
        powered = [value ** temperature for value in row]
        total = sum(powered)
        out.append([value / total for value in powered])
    return out


def _write_round(run: st.RunWriter, round_: Round, misrecord_q: float | None = None) -> float:
    """Write one round; returns the largest |q drawn from - softmax(candidate_logits)|.

    With `misrecord_q` (the temperature), the round's `draft` holds the drafter's law before
    the temperature rather than the law its drafts were drawn from: a wrong recording.
    """
    k = len(round_.drafts)
    if round_.drawn != round_.drafts:
        raise RuntimeError(f"round {run.rounds}: drafts {round_.drafts}, but the assistant's "
                           f"draws were {round_.drawn}")
    gap = 0.0
    if k and round_.q_used is not None:
        drawn = torch.tensor(round_.q_rows)
        gap = float((drawn - round_.q_used.float()).abs().max())
    cache: dict[str, int | str] = {}
    if round_.target_before is not None and round_.target_fed is not None:
        cache = {"target_before": round_.target_before, "target_fed": round_.target_fed,
                 "target_rewind": "eager", "draft_rewind": "lazy"}
        if round_.draft_before is not None and round_.draft_fed is not None:
            cache.update(draft_before=round_.draft_before, draft_fed=round_.draft_fed)
        if round_.target_after is not None:
            cache["target_after"] = round_.target_after
        if round_.draft_after is not None and k:
            cache["draft_after"] = round_.draft_after
    uniforms: list[list[float | None]] | None = None
    if k:
        if len(round_.uniforms) != k:
            raise RuntimeError(f"round {run.rounds}: {k} drafts but {len(round_.uniforms)} "
                               "accept uniforms")
        uniforms = [[u, None] for u in round_.uniforms] + [[None, None]]
    extra: dict[str, Any] = {"q_drawn_vs_candidate_logits_max_abs": gap}
    if round_.hf_n_matches is not None:
        extra["hf_n_matches"] = round_.hf_n_matches
    run.write_round(
        rule=RULE, draft_tokens=round_.drafts, emitted=round_.emitted,
        target=st.probs_block(round_.p_rows[:k + 1]),
        draft=st.probs_block(_untempered(round_.q_rows, misrecord_q) if misrecord_q
                             else round_.q_rows) if k else None,
        uniforms=uniforms, cache=cache or None, stopped=round_.stopped, extra=extra,
    )
    return gap


def record_soak(
    path: str, *, temperature: float, runs: int, max_new_tokens: int, prompt_length: int,
    draft_tokens: int, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
    bug: str | None = None, confidence_threshold: float | None = None,
    misrecord_q: bool = False,
) -> dict[str, float]:
    """Run `runs` assisted `generate` calls on the demo pair and write their trace to `path`.

    Run `i` is seeded with ``torch.manual_seed(seed + i)`` and its prompt is the `i`-th
    held-out Shakespeare excerpt of `prompt_length` characters.

    Returns:
        Counters: rounds, tokens, the largest gap between the q drawn from and
        softmax(candidate_logits), and the seconds spent in `generate`.
    """
    target, drafter = load_demo_pair()
    drafter.generation_config.num_assistant_tokens = draft_tokens
    drafter.generation_config.num_assistant_tokens_schedule = "constant"
    if confidence_threshold is not None:
        drafter.generation_config.assistant_confidence_threshold = confidence_threshold
    decide = mutant(bug, temperature) if bug else hf_utils._speculative_sampling
    vocab = int(target.config.vocab_size)
    eos = target.config.eos_token_id
    totals = {"rounds": 0.0, "tokens": 0.0, "q_gap": 0.0, "generate_s": 0.0}
    engine = (f"transformers {transformers.__version__} assisted generation (do_sample=True), "
              f"torch {torch.__version__}" + (f"; bug injected: {bug}" if bug else "")
              + ("; q recorded before the temperature" if misrecord_q else ""))
    with st.TraceWriter(path, vocab_size=vocab, engine=engine) as trace:
        for i, prompt in enumerate(prompt_ids(runs, prompt_length)):
            sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
            recorder = HfRecorder(decide)
            torch.manual_seed(seed + i)
            started = time.perf_counter()
            with torch.no_grad(), recording(recorder, target, drafter):
                output = target.generate(
                    torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt),
                                                                      dtype=torch.long),
                    assistant_model=drafter, do_sample=True, max_new_tokens=max_new_tokens,
                    pad_token_id=eos, **sampling,
                )
            totals["generate_s"] += time.perf_counter() - started
            generated = [int(t) for t in output[0, len(prompt):].tolist()]
            _reconcile(recorder.rounds, generated)
            run = trace.start_run(f"seed-{seed + i}", prompt=prompt, extra={
                "seed": seed + i, **sampling, "bug": bug, "misrecord_q": misrecord_q,
                **recorder.settings})
            for round_ in recorder.rounds:
                totals["q_gap"] = max(totals["q_gap"], _write_round(
                    run, round_, temperature if misrecord_q else None))
            totals["rounds"] += len(recorder.rounds)
            totals["tokens"] += len(generated)
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="the trace to write (.jsonl, or .jsonl.gz)")
    parser.add_argument("--temp", type=float, default=0.7)
    parser.add_argument("--top-k", type=int, default=0, help="0: off (HF's default is 50)")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=60, help="generate calls, one run each")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--prompt-length", type=int, default=24)
    parser.add_argument("--draft-tokens", type=int, default=4, help="num_assistant_tokens")
    parser.add_argument("--confidence-threshold", type=float, default=None,
                        help="assistant_confidence_threshold (default: HF's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bug", choices=sorted(BUGS), default=None)
    parser.add_argument("--misrecord-q", action="store_true",
                        help="record q before the temperature, not the law drawn from")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: these models are tiny, and on a shared machine "
                        "more threads spin-wait)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.temp <= 0:
        parser.error(f"--temp must be > 0 (speculative sampling), got {args.temp}")
    totals = record_soak(
        args.trace, temperature=args.temp, runs=args.runs, max_new_tokens=args.max_new_tokens,
        prompt_length=args.prompt_length, draft_tokens=args.draft_tokens, top_k=args.top_k,
        top_p=args.top_p, seed=args.seed, bug=args.bug,
        confidence_threshold=args.confidence_threshold, misrecord_q=args.misrecord_q,
    )
    forbidden = sorted(name for name in sys.modules
                       if name.split(".")[0] in ("mlx", "mlx_lm", "specaccept"))
    print(f"wrote {args.trace}: {args.runs} runs, {totals['rounds']:.0f} rounds, "
          f"{totals['tokens']:.0f} tokens, {totals['generate_s']:.1f} s in generate; "
          f"max |q drawn from - softmax(candidate_logits)| = {totals['q_gap']:.3g}")
    if args.bug:
        print(f"bug: {args.bug}: {BUGS[args.bug][2]}")
    if args.misrecord_q:
        print("adapter bug: the trace records q before the temperature, softmax of the "
              "assistant's raw logits, instead of the law its drafts were drawn from")
    print(f"modules of mlx or specaccept imported: {forbidden or 'none'}")
    return 1 if forbidden else 0


if __name__ == "__main__":
    sys.exit(main())
