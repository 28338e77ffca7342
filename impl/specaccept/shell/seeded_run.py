"""A whole seeded run with no models and no caches: the reference the vectors pin runs by.

`seeded_run` drives a generation run from the core functions alone, with the target's and
the drafter's laws given as functions of the history. It reads the uniforms
`round_uniforms` names (spec/randomness.md), samples the drafts, verifies each round and
emits ``drafts[:num_accepted] + [next_token]``, exactly as `SpeculativeGenerator` does with
models whose effective laws are those functions; without caches, the rewind is only where
the next round starts. It is the spec of a whole run (spec/randomness.md, "A whole run"),
and the `seeded_run` golden vectors are its output.

It lives in the shell, not in the core, because a run reads every round's verdict back to
know where the next one starts, and the core never evaluates an array.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import mlx.core as mx

from specaccept.core import validation
from specaccept.core.acceptance import AcceptanceRule, verify_tokenwise
from specaccept.core.joint import verify_blockwise
from specaccept.core.randomness import round_uniforms
from specaccept.core.sampling import sample_from_distribution

__all__ = ["RunRound", "TokenLaw", "seeded_run"]

TokenLaw = Callable[[list[int]], mx.array]
"""history (the prompt, then every token after it, oldest first) -> the next token's `[V]`
float32 law."""


class RunRound(NamedTuple):
    """One round of a seeded run: what it drafted, and what it decided."""

    position: int
    """The output position of the round's first token (0 at the first generated token)."""
    draft_tokens: list[int]
    """The k drafts; empty for the run's last step, a target draw with k = 0."""
    num_accepted: int
    next_token: int

    @property
    def emitted(self) -> list[int]:
        """The tokens the round appends, ``draft_tokens[:num_accepted] + [next_token]``."""
        return [*self.draft_tokens[: self.num_accepted], self.next_token]


def seeded_run(
    target_law: TokenLaw,
    draft_law: TokenLaw,
    prompt: Sequence[int],
    *,
    rule: AcceptanceRule,
    num_draft_tokens: int,
    max_tokens: int,
    seed: int,
) -> list[RunRound]:
    """The rounds of a run of `max_tokens` tokens after `prompt`; their emitted tokens, in
    order, are the run's output.

    The round starting at output position n drafts ``k = min(num_draft_tokens,
    max_tokens - n - 1)`` tokens with uniforms ``u = round_uniforms(seed, n, k)``:
    draft j is ``sample_from_distribution(q_j, u.draft[j])``, q_j the drafter's law after
    the history and drafts[:j]; row i of the target's `[k+1, V]` rows is its law after
    the history and drafts[:i]; `verify_blockwise` (rule block) or `verify_tokenwise`
    decides the round from ``u.verify``. When a single token is left (k = 0), the target
    decides it alone: its argmax under greedy-argmax, else its draw with
    ``u.verify[0][1]``, the `SAMPLE` uniform of position n.

    Args:
        target_law, draft_law: the laws, as functions of the history (`TokenLaw`).
        prompt: at least one token id.
        rule: the acceptance rule.
        num_draft_tokens: k, drafts per round (>= 1).
        max_tokens: the number of tokens to emit (>= 0).
        seed: the run's seed, in [0, 2**64).

    >>> import mlx.core as mx
    >>> law = lambda history: mx.array([0.5, 0.5])
    >>> rounds = seeded_run(law, law, [0], rule=AcceptanceRule.SAMPLER_MATCH,
    ...                     num_draft_tokens=2, max_tokens=4, seed=7)
    >>> sum(len(r.emitted) for r in rounds), rounds[0].position
    (4, 0)
    """
    if not isinstance(rule, AcceptanceRule):
        raise TypeError(f"rule must be an AcceptanceRule, got {type(rule).__name__}")
    k_max = validation.integer("num_draft_tokens", num_draft_tokens)
    if k_max < 1:
        raise ValueError(f"num_draft_tokens must be >= 1, got {k_max}")
    total = validation.integer("max_tokens", max_tokens)
    if total < 0:
        raise ValueError(f"max_tokens must be >= 0, got {total}")
    if isinstance(prompt, str | bytes) or not isinstance(prompt, Sequence) or not prompt:
        raise ValueError(f"prompt must be a non-empty sequence of token ids, got {prompt!r}")
    history = [validation.integer("prompt", token) for token in prompt]
    round_uniforms(seed, 0, 0)  # checks the seed before any law runs

    rounds: list[RunRound] = []
    position = 0
    while position < total:
        k = min(k_max, total - position - 1)
        uniforms = round_uniforms(seed, position, k)
        if k == 0:
            p = target_law(history)
            token = (mx.argmax(p) if rule is AcceptanceRule.GREEDY_ARGMAX
                     else sample_from_distribution(p, uniforms.verify[0][1]))
            played = RunRound(position, [], 0, _integer(token))
        else:
            drafts: list[int] = []
            draft_rows = []
            for j in range(k):
                q = draft_law(history + drafts)
                drafts.append(_integer(sample_from_distribution(q, uniforms.draft[j])))
                draft_rows.append(q)
            target = mx.stack([target_law(history + drafts[:i]) for i in range(k + 1)])
            proposal = mx.stack(draft_rows)
            tokens = mx.array(drafts, dtype=mx.int32)
            verify = mx.array(uniforms.verify, dtype=mx.float32)
            if rule.verifies_jointly:
                verdict = verify_blockwise(target, proposal, tokens, verify)
                num, nxt = verdict.num_accepted, verdict.next_token
            else:
                needed = proposal if rule.needs_proposal_distribution else None
                num, nxt = verify_tokenwise(rule, target, needed, tokens, verify)
            played = RunRound(position, drafts, _integer(num), _integer(nxt))
        rounds.append(played)
        history += played.emitted
        position += len(played.emitted)
    return rounds


def _integer(value: mx.array) -> int:
    """A 0-d integer array's value (one host read-back)."""
    number = value.item()
    assert isinstance(number, int)
    return number
