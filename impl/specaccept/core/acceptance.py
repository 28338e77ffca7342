"""Acceptance rules: which drafted tokens a target keeps, and what it emits instead.

Notation: p is the target's effective distribution at a position, q the law
the draft token t was drawn from, u a uniform in [0, 1).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, NamedTuple

import mlx.core as mx

from specaccept.core import deprecated_names, validation
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.sampling import sample_from_distribution
from specaccept.core.validation import Scalar

__all__ = [
    "AcceptanceRule",
    "TokenwiseVerdict",
    "Verdict",
    "accept_draft_token",
    "acceptance_rule",
    "residual_distribution",
    "residual_resample",
    "verify_draft_token",
    "verify_tokenwise",
]

def _pair(p: object, q: object) -> tuple[mx.array, mx.array]:
    p = validation.require_probabilities("p", p, ndims=(1, 2))
    q = validation.require_probabilities("q", q, ndims=(1, 2))
    validation.require_same_shape("p", p, "q", q)
    return p, q


def _at(probs: mx.array, token: mx.array) -> mx.array:
    """probs[..., token] for a token per row."""
    return mx.take_along_axis(probs, token[..., None], axis=-1)[..., 0]


def accept_draft_token(p: mx.array, q: mx.array, token: Scalar, u: Scalar) -> mx.array:
    """Decide whether to keep draft `token`: ``0 <= t < V and p[t] > 0 and u * q[t] <= p[t]``.

    Accepting with probability min(1, p[t] / q[t]) is modified rejection
    sampling. The test is written without a division so that q[t] = 0 needs no
    special case, and the first conjunct is load-bearing: if q[t] has
    underflowed to zero, ``u * q[t] <= p[t]`` reads ``0 <= 0`` and would admit
    a token the target excluded. An id outside [0, V) in an array (a placeholder such
    as -1) is no draft: it is rejected, and p and q are read at id 0 instead, so that
    no id reads outside the rows.

    Args:
        p: target distribution, `[V]` float32 (or `[k, V]` rows).
        q: the law `token` was drawn from, same shape as `p`.
        token: the draft token id (or `[k]` ids of any integer dtype).
        u: a uniform in [0, 1) (or `[k]`).

    >>> import mlx.core as mx
    >>> p, q = mx.array([0.25, 0.75]), mx.array([0.5, 0.5])
    >>> [accept_draft_token(p, q, 0, u).item() for u in (0.25, 0.5, 0.75)]
    [True, True, False]
    >>> accept_draft_token(mx.array([0.0, 1.0]), mx.array([0.0, 1.0]), 0, 0.0).item()
    False
    """
    p, q = _pair(p, q)
    batch = tuple(p.shape[:-1])
    ids = validation.draft_ids("token", token, vocab_size=p.shape[-1], batch_shape=batch)
    u = validation.uniform("u", u, batch_shape=batch)
    return _accepts(p, q, ids, u)


def _accepts(p: mx.array, q: mx.array, ids: validation.DraftIds, u: mx.array) -> mx.array:
    """accept_draft_token on validated arrays: a placeholder id is never accepted."""
    p_t, q_t = _at(p, ids.clamped), _at(q, ids.clamped)
    # logical_and, not &: under mx.vmap (MLX 0.32) & with an unbatched operand drops the
    # batch axis, so a vmap over the uniforms alone kept one verdict for every uniform.
    return mx.logical_and(ids.valid, mx.logical_and(p_t > 0, u * q_t <= p_t))


def residual_distribution(p: mx.array, q: mx.array) -> mx.array:
    """Return ``relu(p - q) / sum(relu(p - q))``, `[V]` float32, the law of a replacement.

    When the residual has no mass (p <= q everywhere, i.e. p == q for two
    distributions) rejection has probability zero in exact arithmetic, so any
    choice is lossless; this returns p, which keeps a float-rounding rejection
    inside the target's support.

    >>> import mlx.core as mx
    >>> residual_distribution(mx.array([0.5, 0.25, 0.25]), mx.array([0.25, 0.5, 0.25])).tolist()
    [1.0, 0.0, 0.0]
    >>> residual_distribution(mx.array([0.5, 0.5]), mx.array([0.5, 0.5])).tolist()
    [0.5, 0.5]
    """
    p, q = _pair(p, q)
    excess = mx.maximum(p - q, 0.0)
    mass = excess.sum(axis=-1, keepdims=True)
    has_mass = mass > 0
    return mx.where(has_mass, excess / mx.where(has_mass, mass, 1.0), p)


def residual_resample(p: mx.array, q: mx.array, u: Scalar) -> mx.array:
    """Draw a replacement token from `residual_distribution(p, q)` with uniform `u` (int32).

    >>> import mlx.core as mx
    >>> p, q = mx.array([0.5, 0.25, 0.25]), mx.array([0.25, 0.25, 0.5])
    >>> [residual_resample(p, q, u).item() for u in (0.0, 0.5, 0.99)]
    [0, 0, 0]
    """
    return sample_from_distribution(residual_distribution(p, q), u)


class AcceptanceRule(enum.Enum):
    """The acceptance rules, by stable id (the `rule=` of the summary line)."""

    GREEDY_ARGMAX = "greedy-argmax"
    """For a greedy target, accept iff the draft is the target's argmax; emit the argmax."""
    SAMPLER_MATCH = "sampler-match"
    """Draw from p; accept iff the draw equals the draft; emit the draw. Accepts Σ p·q."""
    STOCHASTIC = "stochastic"
    """Modified rejection sampling; accepts Σ min(p, q), the ceiling of lossless rules."""
    SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION = "sampler-match-no-proposal-distribution"
    """Sampler-match because the drafter reported no q, though stochastic was enabled."""
    BLOCK = "block"
    """The drafts of a round verified jointly (block verification, `verify_blockwise`)."""

    @property
    def needs_proposal_distribution(self) -> bool:
        """True when the rule reads q."""
        return self in (AcceptanceRule.STOCHASTIC, AcceptanceRule.BLOCK)

    @property
    def verifies_jointly(self) -> bool:
        """True for the rule whose decisions are not one per position (block)."""
        return self is AcceptanceRule.BLOCK


def acceptance_rule(
    target_config: SamplerConfig,
    *,
    drafter_has_distribution: bool,
    stochastic: bool | None = None,
    block: bool | None = None,
) -> AcceptanceRule:
    """Choose the rule for a target sampler and a drafter.

    A greedy target gets greedy-argmax. Otherwise stochastic acceptance, when
    enabled, needs the drafter's q; without it the rule is the (equally
    lossless) sampler-match, under its own id so a log shows why. With q, the
    rule is block verification when `block` is on, else the stochastic rule.

    `stochastic=None` is the automatic choice: both switches take their defaults,
    on, unless `block` is given. An explicit `stochastic` asks for that rule, and
    `block` then defaults to off. The function reads nothing but its arguments;
    a shell that lets the environment choose (`specaccept.shell.rule_choice`)
    passes what it read as explicit switches.

    >>> acceptance_rule(SamplerConfig(temperature=0.0), drafter_has_distribution=True).value
    'greedy-argmax'
    >>> acceptance_rule(SamplerConfig(), drafter_has_distribution=True, stochastic=True).value
    'stochastic'
    >>> acceptance_rule(SamplerConfig(), drafter_has_distribution=True, stochastic=True,
    ...                 block=True).value
    'block'
    >>> acceptance_rule(SamplerConfig(), drafter_has_distribution=False, stochastic=True).value
    'sampler-match-no-proposal-distribution'
    >>> acceptance_rule(SamplerConfig(), drafter_has_distribution=True, stochastic=False).value
    'sampler-match'
    """
    if not isinstance(target_config, SamplerConfig):
        raise TypeError(
            f"target_config must be a SamplerConfig, got {type(target_config).__name__}"
        )
    if not isinstance(drafter_has_distribution, bool):
        raise TypeError(
            f"drafter_has_distribution must be a bool, got {drafter_has_distribution!r}"
        )
    if stochastic is not None and not isinstance(stochastic, bool):
        raise TypeError(f"stochastic must be a bool or None, got {stochastic!r}")
    if block is not None and not isinstance(block, bool):
        raise TypeError(f"block must be a bool or None, got {block!r}")
    automatic = stochastic is None
    enabled = True if stochastic is None else stochastic
    if block is None:
        block = automatic
    if target_config.is_greedy:
        return AcceptanceRule.GREEDY_ARGMAX
    if not enabled:
        return AcceptanceRule.SAMPLER_MATCH
    if drafter_has_distribution:
        return AcceptanceRule.BLOCK if block else AcceptanceRule.STOCHASTIC
    return AcceptanceRule.SAMPLER_MATCH_NO_PROPOSAL_DISTRIBUTION


class Verdict(NamedTuple):
    """The outcome of verifying one position."""

    accepted: mx.array
    """Whether the draft token is kept (bool)."""
    token: mx.array
    """The token to emit (int32), the draft on acceptance and the replacement otherwise."""


def _require_rule(rule: object, function: str) -> AcceptanceRule:
    if not isinstance(rule, AcceptanceRule):
        raise TypeError(f"rule must be an AcceptanceRule, got {type(rule).__name__} {rule!r}")
    if rule.verifies_jointly:
        raise ValueError(
            f"rule {rule.value!r} verifies a round's drafts jointly: call "
            f"verify_blockwise, not {function}, which verifies token by token"
        )
    return rule


def _replacement_rows(p: mx.array, q: mx.array, ids: validation.DraftIds) -> mx.array:
    """The law of the token emitted on a rejection under stochastic: the residual, or p itself
    where the id is no draft (no token was drawn from q there, so p is the target's law)."""
    return mx.where(ids.valid[..., None], residual_distribution(p, q), p)


def _verify(
    rule: AcceptanceRule, p: mx.array, q: mx.array | None, ids: validation.DraftIds,
    u_accept: mx.array, u_sample: mx.array,
) -> Verdict:
    """verify_draft_token on validated arrays, `[..., V]`."""
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        emitted = mx.argmax(p, axis=-1).astype(mx.int32)
        return Verdict(mx.logical_and(ids.valid, emitted == ids.clamped), emitted)
    if rule is AcceptanceRule.STOCHASTIC:
        assert q is not None
        accepted = _accepts(p, q, ids, u_accept)
        replacement = sample_from_distribution(_replacement_rows(p, q, ids), u_sample)
        return Verdict(accepted, mx.where(accepted, ids.clamped, replacement))
    draw = sample_from_distribution(p, u_sample)
    return Verdict(mx.logical_and(ids.valid, draw == ids.clamped), draw)


def verify_draft_token(
    rule: AcceptanceRule,
    p: mx.array,
    q: mx.array | None,
    token: Scalar,
    u_accept: Scalar,
    u_sample: Scalar,
) -> Verdict:
    """Verify one draft token under `rule`: every rule returns (accepted, token to emit).

    - greedy-argmax: accept iff `token` is argmax p (lowest id on ties); emit the argmax.
    - sampler-match (either id): draw from p with `u_sample`; accept iff the draw
      equals `token`; emit the draw. `u_accept` is unused.
    - stochastic: `accept_draft_token(p, q, token, u_accept)`; on rejection emit
      `residual_resample(p, q, u_sample)`.

    Rule block has no per-position form and raises ValueError: its drafts are
    verified together by `verify_blockwise`.

    An id outside [0, V) in a `token` array is no draft (a placeholder): it is
    rejected under every rule, and the emitted token is the target's own: the argmax
    under greedy-argmax, the draw from p with `u_sample` under the others (under
    stochastic too, not the residual: no token was drawn from q there).

    *Note*: greedy-argmax is lossless only for a greedy target, whose p is one-hot.
    Given a tempered p it is the biased argmax-against-argmax rule; `acceptance_rule`
    never chooses it then, and callers that pick a rule by hand must not either.

    Args:
        rule: the acceptance rule.
        p: target distribution, `[V]` float32 (or `[k, V]`).
        q: the draft's law, same shape; required by stochastic, else may be None.
        token: the draft token id (or `[k]` ids of any integer dtype).
        u_accept, u_sample: uniforms in [0, 1) (or `[k]`).

    >>> import mlx.core as mx
    >>> p, q = mx.array([0.25, 0.75]), mx.array([0.5, 0.5])
    >>> accepted, token = verify_draft_token(AcceptanceRule.STOCHASTIC, p, q, 0, 0.75, 0.0)
    >>> accepted.item(), token.item()
    (False, 1)
    >>> accepted, token = verify_draft_token(AcceptanceRule.SAMPLER_MATCH, p, None, 0, 0.0, 0.5)
    >>> accepted.item(), token.item()
    (False, 1)
    """
    rule = _require_rule(rule, "verify_draft_token")
    if q is None:
        if rule.needs_proposal_distribution:
            raise ValueError(f"q is required by rule {rule.value!r}, got None")
        p = validation.require_probabilities("p", p, ndims=(1, 2))
    else:
        p, q = _pair(p, q)
    batch = tuple(p.shape[:-1])
    ids = validation.draft_ids("token", token, vocab_size=p.shape[-1], batch_shape=batch)
    ua = validation.uniform("u_accept", u_accept, batch_shape=batch)
    us = validation.uniform("u_sample", u_sample, batch_shape=batch)
    return _verify(rule, p, q, ids, ua, us)


class TokenwiseVerdict(NamedTuple):
    """The outcome of a round: emit ``draft_tokens[:num_accepted] + [next_token]``."""

    num_accepted: mx.array
    """The length of the accepted prefix, a 0-d int32 in [0, k]."""
    next_token: mx.array
    """The replacement at the first rejection, or the bonus token from row k (0-d int32)."""


def verify_tokenwise(
    rule: AcceptanceRule,
    target_probs: mx.array,
    draft_probs: mx.array | None,
    draft_tokens: mx.array,
    uniforms: mx.array,
) -> TokenwiseVerdict:
    """Verify a whole round of k drafts with array ops only (one evaluation for the caller).

    Row i of `target_probs` is the target's distribution after the prefix plus
    ``draft_tokens[:i]``; row k gives the bonus token when all k are accepted.
    Position i uses ``uniforms[i, 0]`` to accept and ``uniforms[i, 1]`` to
    sample, so under sampler-match the emitted token at each position is the
    target's own draw with ``uniforms[i, 1]``. Rows after the first rejection
    are computed and ignored. This is token-by-token verification: rule block,
    which keeps the longest prefix passing a joint test instead, raises ValueError
    here and is `verify_blockwise`.

    An id outside [0, V) (a placeholder such as -1) is no draft: the round ends there,
    and the verdict is that of the round truncated before it (the first i drafts when
    draft i is the first placeholder), so num_accepted <= i and, when it is i, the next
    token is the target's own draw from row i with ``uniforms[i, 1]``.

    Args:
        rule: the acceptance rule.
        target_probs: `[k+1, V]` float32.
        draft_probs: `[k, V]` float32, the law of each draft; None unless stochastic.
        draft_tokens: `[k]` ids of any integer dtype.
        uniforms: `[k+1, 2]` float, values in [0, 1).

    >>> import mlx.core as mx
    >>> target = mx.array([[0.5, 0.5], [0.25, 0.75], [1.0, 0.0]])
    >>> draft = mx.array([[0.5, 0.5], [1.0, 0.0]])
    >>> uniforms = mx.array([[0.5, 0.0], [0.5, 0.5], [0.0, 0.0]])
    >>> drafts = mx.array([1, 0])
    >>> n, nxt = verify_tokenwise(AcceptanceRule.STOCHASTIC, target, draft, drafts, uniforms)
    >>> n.item(), nxt.item()
    (1, 1)
    """
    rule = _require_rule(rule, "verify_tokenwise")
    required = f"rule {rule.value!r}" if rule.needs_proposal_distribution else None
    target_probs, draft_probs, tokens, u, k, _ = validation.round_arguments(
        target_probs, draft_probs, draft_tokens, uniforms, draft_probs_required=required
    )

    # Each row's draw is independent of the others, so the k verdicts and the bonus
    # draw share one batched draw over k+1 rows: the same tokens as verify_draft_token
    # row by row, with a third of the kernels (they dominate a small model's round).
    if rule is AcceptanceRule.GREEDY_ARGMAX:
        candidates = mx.argmax(target_probs, axis=-1).astype(mx.int32)
        accepted = mx.logical_and(tokens.valid, candidates[:k] == tokens.clamped)
    elif rule is AcceptanceRule.STOCHASTIC:
        assert draft_probs is not None
        accepted = _accepts(target_probs[:k], draft_probs, tokens, u[:k, 0])
        rows = mx.concatenate([_replacement_rows(target_probs[:k], draft_probs, tokens),
                               target_probs[k:]])
        candidates = sample_from_distribution(rows, u[:, 1])
    else:
        candidates = sample_from_distribution(target_probs, u[:, 1])
        accepted = mx.logical_and(tokens.valid, candidates[:k] == tokens.clamped)
    num_accepted = mx.cumprod(accepted.astype(mx.int32)).sum().astype(mx.int32)
    # Row num_accepted holds the replacement at the first rejection, or the bonus token;
    # an accepted row's candidate is never read.
    next_token = candidates[num_accepted]
    return TokenwiseVerdict(num_accepted, next_token)


# The names these verdicts had up to 0.2, when `verify_tokenwise` returned a "BlockVerdict"
# and `verify_blockwise` a "JointVerdict": kept, with a DeprecationWarning, for one release.
if TYPE_CHECKING:
    BlockVerdict = TokenwiseVerdict
else:
    __getattr__ = deprecated_names(__name__, globals(),
                                              {"BlockVerdict": "TokenwiseVerdict"})
