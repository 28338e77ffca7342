"""Trace mlx-lm's `speculative_generate_step` without modifying it.

mlx-lm is driven exactly as a user drives it; the adapter only hands it wrapped
objects: each model is a proxy that records the tokens it is fed, its cache offset
and the logits it returns, and the sampler is a proxy that records its draws. A
round of mlx-lm is k drafter forwards each followed by a sampler call, then one
target forward over ``[current, d0 .. d(k-1)]`` followed by a sampler call, then the
yields of the tokens it emits; the adapter cuts the recording at those boundaries
and writes one trace record per round.

mlx-lm decides by drawing from the target and comparing with the draft
("sampler-match"), with `mx.random.categorical`, so a trace of it holds no
uniforms: replay does not run, the other four checks do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

import mlx.core as mx
import numpy as np

from specaccept.core.sampler_config import SamplerConfig
from specaccept.shell.conformance.writer import TraceWriter, encode_rows

__all__ = ["MLX_LM_RULE", "run_mlx_lm", "trace_mlx_lm"]

MLX_LM_RULE = "sampler-match"
"""The rule mlx-lm implements: draw from the target's sampler, keep the draft iff equal."""


@dataclass
class _Forward:
    """One model call: who, how many tokens, the cache offsets, what came out."""

    role: str
    fed: int
    offset_before: int
    logits: mx.array
    offsets_at_call: dict[str, int]
    """Both caches' offsets just before the call."""
    tokens: mx.array | None = None
    """The sampler's draws from this call's logits (lazy); None for a prefill call."""


@dataclass
class _Round:
    drafts: list[_Forward]
    verify: _Forward
    emitted: list[int] = field(default_factory=list)
    after: dict[str, int] | None = None


class _Recorder:
    """The state the model and sampler proxies share."""

    def __init__(self) -> None:
        self.forwards: list[_Forward] = []
        self.caches: dict[str, Any] = {}
        self.rounds: list[_Round] = []
        self._drafts: list[_Forward] = []

    def offsets(self) -> dict[str, int]:
        return {name: int(c[0].offset) for name, c in self.caches.items()}

    def forward(
        self, role: str, tokens: mx.array, cache: Any, logits: mx.array, offsets: dict[str, int]
    ) -> None:
        self.caches[role] = cache
        fed = int(tokens.shape[-1])
        self.forwards.append(_Forward(role, fed, int(cache[0].offset) - fed, logits, offsets))

    def sampled(self, tokens: mx.array) -> None:
        call = self.forwards[-1]
        call.tokens = tokens  # read back when the round is written, not here: no extra sync
        if call.role == "draft":
            if not self._drafts and self.rounds:
                # A round's first drafter forward comes after the previous round's rewind.
                self.rounds[-1].after = call.offsets_at_call
            self._drafts.append(call)
        else:
            self.rounds.append(_Round(self._drafts, call))
            self._drafts = []


class _ModelProxy:
    """Forwards every attribute to the model; records each call's input, cache and logits."""

    def __init__(self, model: Any, role: str, recorder: _Recorder) -> None:
        self._model = model
        self._role = role
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def __call__(self, tokens: mx.array, cache: Any = None, **kwargs: Any) -> mx.array:
        offsets = self._recorder.offsets()
        logits: mx.array = self._model(tokens, cache=cache, **kwargs)
        self._recorder.forward(self._role, tokens, cache, logits, offsets)
        return logits


def trace_mlx_lm(
    target: Any, drafter: Any, prompt: list[int], max_tokens: int, stream: IO[str], *,
    temperature: float, top_p: float = 0.0, min_p: float = 0.0, top_k: int = 0,
    num_draft_tokens: int = 4, seed: int = 0, vocab_size: int | None = None,
) -> list[int]:
    """Run mlx-lm's speculative decoding and write its trace to `stream`.

    The sampler is mlx-lm's own `make_sampler(temperature, top_p, min_p, top_k=...)`,
    described to the kit as the `SamplerConfig` with the same settings, so the kit
    rebuilds p and q from the recorded logits with the spec's sampler. mlx-lm's
    top-p and min-p are its own implementations; where they differ from the spec's,
    the kit reports the difference.

    Returns:
        The generated tokens.
    """
    from mlx_lm.generate import speculative_generate_step
    from mlx_lm.sample_utils import make_sampler

    recorder = _Recorder()
    sampler = make_sampler(temperature, top_p=top_p, min_p=min_p, top_k=top_k)

    def recording_sampler(logprobs: mx.array) -> mx.array:
        tokens: mx.array = sampler(logprobs)
        recorder.sampled(tokens)
        return tokens

    config = SamplerConfig(temperature=temperature, top_p=top_p or 1.0, min_p=min_p, top_k=top_k)
    if vocab_size is None:
        vocab_size = int(target(mx.array([[prompt[0]]])).shape[-1])
    writer = TraceWriter(
        stream, vocab_size=vocab_size, engine="mlx-lm speculative_generate_step",
        prompt=prompt, target_sampler=config, draft_sampler=config,
    )
    written = 0

    def flush(upto: int) -> None:
        nonlocal written
        while written < upto:
            round_ = recorder.rounds[written]
            _write(writer, round_, stopped=round_.after is None)
            written += 1

    mx.random.seed(seed)
    generated: list[int] = []
    steps = speculative_generate_step(
        mx.array(prompt, dtype=mx.uint32),
        _ModelProxy(target, "target", recorder), _ModelProxy(drafter, "draft", recorder),
        num_draft_tokens=num_draft_tokens, max_tokens=max_tokens, sampler=recording_sampler,
    )
    for token, _, _ in steps:
        recorder.rounds[-1].emitted.append(int(token))
        generated.append(int(token))
        # A round is written once the next has started, when its rewind is known.
        flush(len(recorder.rounds) - (recorder.rounds[-1].after is None))
    flush(len(recorder.rounds))
    return generated


def run_mlx_lm(
    target: Any, drafter: Any, prompt: list[int], max_tokens: int, *, temperature: float,
    top_p: float = 0.0, min_p: float = 0.0, top_k: int = 0, num_draft_tokens: int = 4,
    seed: int = 0,
) -> list[int]:
    """The run `trace_mlx_lm` makes, untraced: the baseline its cost is measured against."""
    from mlx_lm.generate import speculative_generate_step
    from mlx_lm.sample_utils import make_sampler

    mx.random.seed(seed)
    sampler = make_sampler(temperature, top_p=top_p, min_p=min_p, top_k=top_k)
    steps = speculative_generate_step(
        mx.array(prompt, dtype=mx.uint32), target, drafter, num_draft_tokens=num_draft_tokens,
        max_tokens=max_tokens, sampler=sampler,
    )
    return [int(token) for token, _, _ in steps]


def _write(writer: TraceWriter, round_: _Round, *, stopped: bool) -> None:
    k = len(round_.drafts)
    target = np.array(round_.verify.logits[0, -(k + 1):].astype(mx.float32))
    draft = np.array(mx.stack([d.logits[0, -1] for d in round_.drafts]).astype(mx.float32))
    first = round_.drafts[0]
    cache = {"target_before": round_.verify.offset_before, "draft_before": first.offset_before,
             "draft_fed": first.fed}
    if round_.after is not None:
        cache["target_after"] = round_.after["target"]
        cache["draft_after"] = round_.after["draft"]
    writer.write_round(
        rule=MLX_LM_RULE,
        draft_tokens=[int(np.array(d.tokens).reshape(-1)[0]) for d in round_.drafts
                      if d.tokens is not None],
        emitted=round_.emitted, target=encode_rows(target, kind="logits"),
        draft=encode_rows(draft, kind="logits"), cache=cache, stopped=stopped,
    )
