"""The mutation gate's catalogue: named one-change mutants of the library.

Each mutant is one mistake a careful reviewer would plant, most of them mistakes
that speculative-decoding engines have actually shipped. `mutation_gate.py`
applies them one at a time and requires the test-and-proof suite to kill every
one. A mutant names the function (`scope`, a qualified name) that holds its edit,
and an edit's `original` must occur exactly once there, as Python tokens (layout
and comments aside; `anchoring.py`): when the code moves, the gate fails naming
the mutant instead of silently testing nothing.

Notes on mutants deliberately left out because no output can tell them apart
from the library (an unkillable mutant proves nothing about the suite):

- ``eligible = partial_sums > target`` without the ``positive`` guard in
  `sample_from_distribution`: with the strict comparison a zero-weight id i has
  ``partial_sums[i] == partial_sums[i - 1]`` exactly (adding 0.0 is exact in a
  sequential cumulative sum), so it is never the *first* eligible id, and id 0
  with weight 0 has ``0 > u * total`` false. Equivalent on the CPU; the guard
  matters only to a scan whose association differs between neighbours.
- ``logits > 0`` to ``logits >= 0`` in the repetition penalty: at 0 both
  branches give 0.
- ``above.sum(...) >= 2`` to ``>= 1`` in XTC: with a single qualifying token the
  cut keeps that token anyway (it is the least likely qualifier).
- ``0 < top_k < vocab_size`` to ``<= vocab_size``: top-k with k = V keeps all.
- ``longest_needed <= _LONGEST_DIRECT_MATCH`` to ``<`` in DRY: both ways of computing the
  match lengths are exact, so only the cost changes.
- ``precise=True`` to ``False`` in the softmaxes: the flag changes only the
  accumulation of half-precision inputs, and the logits are float32 by then.
"""

from __future__ import annotations

from dataclasses import dataclass

from anchoring import MODULE_SCOPE

SAMPLING = "impl/specaccept/core/sampling.py"
SAMPLER_CONFIG = "impl/specaccept/core/sampler_config.py"
PENALTIES = "impl/specaccept/core/penalties.py"
DRY = "impl/specaccept/core/dry.py"
DRY_FAST = "impl/specaccept/core/dry_fast.py"
ACCEPTANCE = "impl/specaccept/core/acceptance.py"
REWIND = "impl/specaccept/core/rewind.py"
THEORY = "impl/specaccept/core/theory.py"
RANDOMNESS = "impl/specaccept/core/randomness.py"
VALIDATION = "impl/specaccept/core/validation.py"
GENERATOR = "impl/specaccept/shell/generator.py"
JOINT = "impl/specaccept/core/joint.py"
DRAW_LAW = "impl/specaccept/core/draw_law.py"
FUSED = "impl/specaccept/shell/fused.py"
RULE_CHOICE = "impl/specaccept/shell/rule_choice.py"
TREE = "impl/specaccept/core/tree.py"
CONFORMANCE_POSITIONS = "impl/specaccept/conformance/positions.py"
CONFORMANCE_DRAFT_LAW = "impl/specaccept/conformance/draftlaw.py"
CONFORMANCE_HISTORY = "impl/specaccept/conformance/history.py"
CONFORMANCE_BATCH = "impl/specaccept/conformance/batch.py"
CONFORMANCE_TRACE = "impl/specaccept/conformance/trace.py"
NEW_CHECK_TESTS = "tests/test_conformance_drafter_history_batch.py"
TREE_GENERATOR = "impl/specaccept/shell/tree_generator.py"
TREE_ATTENTION = "impl/specaccept/shell/tree_attention.py"
TREE_CHECKS = "impl/specaccept/conformance/tree_checks.py"
TREE_CONFORMANCE_TESTS = "tests/test_conformance_tree.py"
CONFORMANCE_FRESH = "impl/specaccept/conformance/fresh.py"
CONFORMANCE_CHECKS = "impl/specaccept/conformance/checks.py"
CONFORMANCE_EXACT = "impl/specaccept/conformance/exact.py"
CONFORMANCE_LAW = "impl/specaccept/conformance/law.py"
PIECES_TESTS = "tests/test_conformance_pieces.py"
TREE_PIECES_TESTS = "tests/test_conformance_tree_pieces.py"
LAW_STRATA_TESTS = "tests/test_conformance_law_strata.py"
CONFORMANCE_BUGS = "impl/specaccept/conformance/bugs.py"


@dataclass(frozen=True)
class Mutant:
    """One planted mistake: exact text replacements in one file.

    Attributes:
        name: a stable id, named after the mistake.
        path: the mutated file, relative to the repository root.
        edits: (original, replacement) pairs; each original occurs exactly once in `scope`.
        breaks: one line: what engines shipped, or what the change breaks.
        vectors: whether a golden-vector family replays the mutated function,
            so that the vectors alone could be expected to kill it.
        first_tests: tests (files or node ids) known to catch the mistake in
            seconds; the gate runs them right after its first stage, before the
            rest of the suite. Only an order: the verdict is still the whole suite's.
        scope: the qualified name of the function, method or class holding every
            edit, or MODULE_SCOPE for an edit outside all of them (a constant).
    """

    name: str
    path: str
    edits: tuple[tuple[str, str], ...]
    breaks: str
    vectors: bool = True
    first_tests: tuple[str, ...] = ()
    scope: str = MODULE_SCOPE


def mutant(
    name: str, path: str, original: str, replacement: str, breaks: str, *, vectors: bool = True,
    first_tests: tuple[str, ...] = (), scope: str = MODULE_SCOPE,
) -> Mutant:
    """A mutant with a single edit."""
    return Mutant(name, path, ((original, replacement),), breaks, vectors, first_tests, scope)


MUTANTS: tuple[Mutant, ...] = (
    # --- accept test -------------------------------------------------------------------
    mutant(
        "accept-strict-less", ACCEPTANCE,
        "mx.logical_and(p_t > 0, u * q_t <= p_t)",
        "mx.logical_and(p_t > 0, u * q_t < p_t)",
        "`<` for `<=` in the accept test: u * q(t) == p(t) rejects a token it must keep",
        scope="_accepts",
    ),
    mutant(
        "accept-drops-p-guard", ACCEPTANCE,
        "mx.logical_and(p_t > 0, u * q_t <= p_t)",
        "mx.logical_and(True, u * q_t <= p_t)",
        "no `p(t) > 0` guard: an underflowed q(t) = 0 admits a token the target excluded",
        scope="_accepts",
    ),
    mutant(
        "accept-p-and-q-swapped", ACCEPTANCE,
        "mx.logical_and(p_t > 0, u * q_t <= p_t)",
        "mx.logical_and(p_t > 0, u * p_t <= q_t)",
        "Chen's notation read as Leviathan's: accepts with min(1, q/p) instead of min(1, p/q)",
        scope="_accepts",
    ),
    # --- residual ----------------------------------------------------------------------
    mutant(
        "residual-softmax", ACCEPTANCE,
        "return mx.where(has_mass, excess / mx.where(has_mass, mass, 1.0), p)",
        "return mx.where(has_mass, mx.softmax(excess, axis=-1), p)",
        "residual normalised with a softmax: every token, excluded ones too, gets mass",
        scope="residual_distribution",
    ),
    mutant(
        "residual-is-p", ACCEPTANCE,
        "return mx.where(has_mass, excess / mx.where(has_mass, mass, 1.0), p)",
        "return p",
        "resample from p instead of relu(p - q), the classic shipped bug: biased towards q",
        scope="residual_distribution",
    ),
    mutant(
        "residual-q-minus-p", ACCEPTANCE,
        "excess = mx.maximum(p - q, 0.0)",
        "excess = mx.maximum(q - p, 0.0)",
        "residual taken the wrong way round: replacements come from where the drafter over-shoots",
        scope="residual_distribution",
    ),
    mutant(
        "residual-abs", ACCEPTANCE,
        "excess = mx.maximum(p - q, 0.0)",
        "excess = mx.abs(p - q)",
        "|p - q| instead of relu(p - q): replacements can be tokens the drafter over-proposed",
        scope="residual_distribution",
    ),
    mutant(
        "residual-fallback-q", ACCEPTANCE,
        "return mx.where(has_mass, excess / mx.where(has_mass, mass, 1.0), p)",
        "return mx.where(has_mass, excess / mx.where(has_mass, mass, 1.0), q)",
        "zero-mass fallback to q: a float-rounding rejection can leave the target's support",
        scope="residual_distribution",
    ),
    mutant(
        "residual-fallback-nan", ACCEPTANCE,
        "has_mass = mass > 0",
        "has_mass = mass >= 0",
        "zero-mass residual divided by its zero mass: NaN passed to the draw",
        scope="residual_distribution",
    ),
    mutant(
        "resample-from-p", ACCEPTANCE,
        "return sample_from_distribution(residual_distribution(p, q), u)",
        "return sample_from_distribution(p, u)",
        "verify_draft_token's replacement drawn from p, not the residual", scope="residual_resample"
    ),
    mutant(
        "block-resample-from-p", ACCEPTANCE,
        "rows = mx.concatenate([_replacement_rows(target_probs[:k], draft_probs, tokens),",
        "rows = mx.concatenate([target_probs[:k],",
        "verify_tokenwise's replacement drawn from p, not the residual", scope="verify_tokenwise"
    ),
    mutant(
        "block-residual-rows-shifted", ACCEPTANCE,
        "_replacement_rows(target_probs[:k], draft_probs, tokens)",
        "_replacement_rows(target_probs[1:], draft_probs, tokens)",
        "residual of position i built from the target row of position i + 1",
        scope="verify_tokenwise",
    ),
    # --- verify_draft_token and the rule choice ---------------------------------------------
    mutant(
        "verify-accept-reads-u-sample", ACCEPTANCE,
        "accepted = _accepts(p, q, ids, u_accept)",
        "accepted = _accepts(p, q, ids, u_sample)",
        "wrong uniform slot: the accept test and the residual draw share one uniform",
        scope="_verify",
    ),
    mutant(
        "sampler-match-reads-u-accept", ACCEPTANCE,
        "draw = sample_from_distribution(p, u_sample)",
        "draw = sample_from_distribution(p, u_accept)",
        "wrong uniform slot: sampler-match no longer reproduces target-only sampling's stream",
        scope="_verify",
    ),
    mutant(
        "sampler-match-is-argmax", ACCEPTANCE,
        "draw = sample_from_distribution(p, u_sample)",
        "draw = mx.argmax(p, axis=-1).astype(mx.int32)",
        "argmax-against-argmax at temperature > 0 in verify_draft_token: collapses p to its mode",
        scope="_verify",
    ),
    mutant(
        "rule-argmax-when-stochastic-off", ACCEPTANCE,
        "if target_config.is_greedy:\n        return AcceptanceRule.GREEDY_ARGMAX",
        "if target_config.is_greedy or not enabled:\n        return AcceptanceRule.GREEDY_ARGMAX",
        "argmax-against-argmax at temperature > 0 when stochastic is off: biased, not lossless",
        scope="acceptance_rule",
    ),
    mutant(
        "rule-switch-unset-disables", RULE_CHOICE,
        "if raw is None:\n        return True",
        "if raw is None:\n        return False",
        "stochastic acceptance off by default: the documented default is on",
        vectors=False,
        first_tests=("tests/test_rule_choice.py",), scope="switch_from_environment"
    ),
    # --- verify_tokenwise ------------------------------------------------------------------
    mutant(
        "block-sum-of-accepted", ACCEPTANCE,
        "num_accepted = mx.cumprod(accepted.astype(mx.int32)).sum().astype(mx.int32)",
        "num_accepted = accepted.astype(mx.int32).sum().astype(mx.int32)",
        "sum of accepted instead of the accepted prefix (cumprod): keeps drafts after a rejection",
        scope="verify_tokenwise",
    ),
    mutant(
        "block-bonus-row-off-by-one", ACCEPTANCE,
        "target_probs[k:]])",
        "target_probs[k - 1 : k]])",
        "bonus token drawn from row k - 1 (the last draft's row) instead of row k",
        scope="verify_tokenwise",
    ),
    mutant(
        "block-bonus-reads-accept-slot", ACCEPTANCE,
        "candidates = sample_from_distribution(rows, u[:, 1])",
        "candidates = sample_from_distribution(rows, mx.concatenate([u[:k, 1], u[k:, 0]]))",
        "the bonus draw reads uniforms[k, 0] instead of uniforms[k, 1]", scope="verify_tokenwise"
    ),
    mutant(
        "block-accept-reads-sample-slot", ACCEPTANCE,
        "_accepts(target_probs[:k], draft_probs, tokens, u[:k, 0])",
        "_accepts(target_probs[:k], draft_probs, tokens, u[:k, 1])",
        "wrong uniform slot: the accept test reads the uniform of the residual draw",
        scope="verify_tokenwise",
    ),
    mutant(
        "block-accept-uniform-row-shifted", ACCEPTANCE,
        "_accepts(target_probs[:k], draft_probs, tokens, u[:k, 0])",
        "_accepts(target_probs[:k], draft_probs, tokens, u[1:, 0])",
        "position i's accept test reads the uniform of position i + 1", scope="verify_tokenwise"
    ),
    mutant(
        "block-greedy-rows-shifted", ACCEPTANCE,
        "candidates = mx.argmax(target_probs, axis=-1).astype(mx.int32)\n"
        "        accepted = mx.logical_and(tokens.valid, candidates[:k] == tokens.clamped)",
        "candidates = mx.argmax(target_probs, axis=-1).astype(mx.int32)\n"
        "        accepted = mx.logical_and(tokens.valid, candidates[1:] == tokens.clamped)",
        "greedy draft i compared with the argmax of row i + 1 (off by one row)",
        scope="verify_tokenwise",
    ),
    mutant(
        "block-sampler-match-is-argmax", ACCEPTANCE,
        "candidates = sample_from_distribution(target_probs, u[:, 1])",
        "candidates = mx.argmax(target_probs, axis=-1).astype(mx.int32)",
        "argmax-against-argmax at temperature > 0 in verify_tokenwise's sampler-match",
        scope="verify_tokenwise",
    ),
    mutant(
        "block-never-bonus", ACCEPTANCE,
        "next_token = candidates[num_accepted]",
        "next_token = candidates[mx.minimum(num_accepted, k - 1)]",
        "an all-accepted round emits row k - 1's candidate instead of the bonus from row k",
        scope="verify_tokenwise",
    ),
    # --- the draw ----------------------------------------------------------------------
    mutant(
        "draw-inclusive", SAMPLING,
        "eligible = mx.logical_and(partial_sums > target, positive)",
        "eligible = mx.logical_and(partial_sums >= target, positive)",
        "`>=` for `>` in the inverse CDF: u on a breakpoint picks the token before it",
        scope="sample_from_distribution",
    ),
    mutant(
        "draw-fallback-last-id", SAMPLING,
        "chosen = mx.where(eligible.any(axis=-1), first_eligible, last_positive)",
        "chosen = mx.where(eligible.any(axis=-1), first_eligible, vocab_size - 1)",
        "rounding fallback returns the last id, which may have probability zero",
        scope="sample_from_distribution",
    ),
    mutant(
        "draw-assumes-unit-total", SAMPLING,
        "target = u[..., None] * partial_sums[..., -1:]",
        "target = u[..., None]",
        "u compared with unnormalised prefix sums: wrong tokens for weights not summing to 1",
        scope="sample_from_distribution",
    ),
    mutant(
        "draw-normalises-first", SAMPLING,
        "partial_sums = mx.cumsum(probs, axis=-1)",
        "partial_sums = mx.cumsum(probs / probs.sum(axis=-1, keepdims=True), axis=-1)",
        "normalise, then draw: other float32 breakpoints than the normative u * total",
        scope="sample_from_distribution",
    ),
    # --- the sampler chain -------------------------------------------------------------
    mutant(
        "q-is-unfiltered", SAMPLING,
        "return SampledToken(sample_from_distribution(probs, u), probs)",
        "return SampledToken(\n"
        "        sample_from_distribution(probs, u),\n"
        "        mx.softmax(logits.astype(mx.float32), axis=-1),\n"
        "    )",
        "the unfiltered softmax reported as q while drawing from the filtered law",
        scope="sample_token_with_distribution",
    ),
    mutant(
        "temperature-multiplies", SAMPLING,
        "logits = (logits - mx.max(logits, axis=-1, keepdims=True)) / config.temperature",
        "logits = (logits - mx.max(logits, axis=-1, keepdims=True)) * config.temperature",
        "logits multiplied by the temperature instead of divided", scope="_filtered_distribution"
    ),
    mutant(
        "temperature-without-max-shift", SAMPLING,
        "logits = (logits - mx.max(logits, axis=-1, keepdims=True)) / config.temperature",
        "logits = logits / config.temperature",
        "no shift by the max: a tiny temperature overflows to inf and the row turns NaN",
        scope="_filtered_distribution",
    ),
    Mutant(
        "temperature-after-filters", SAMPLING,
        (
            ("logits = (logits - mx.max(logits, axis=-1, keepdims=True)) / config.temperature",
             "logits = logits - mx.max(logits, axis=-1, keepdims=True)"),
            ("return mx.softmax(logits, axis=-1, precise=True)",
             "return mx.softmax(logits / config.temperature, axis=-1, precise=True)"),
        ),
        "temperature applied after top-p/min-p: the filters see the untempered distribution",
        scope="_filtered_distribution",
    ),
    mutant(
        "top-k-keeps-k-minus-one", SAMPLING,
        "mx.topk(logits, config.top_k, axis=-1)",
        "mx.topk(logits, config.top_k - 1, axis=-1)",
        "off-by-one top-k", scope="_filtered_distribution"
    ),
    mutant(
        "top-k-drops-ties", SAMPLING,
        "logits = mx.where(logits >= kth_largest, logits, _NEG_INF)",
        "logits = mx.where(\n"
        "            mx.argsort(mx.argsort(-logits, axis=-1), axis=-1) < config.top_k,\n"
        "            logits, _NEG_INF,\n"
        "        )",
        "top-k by rank: exactly k survive, so ties with the k-th largest are cut arbitrarily",
        scope="_filtered_distribution",
    ),
    mutant(
        "top-p-crossing-inclusive", SAMPLING,
        "below = (mx.cumsum(descending, axis=-1) < config.top_p)",
        "below = (mx.cumsum(descending, axis=-1) <= config.top_p)",
        "`<=` for `<` in top-p: a prefix whose mass equals top_p keeps one more token",
        scope="_filtered_distribution",
    ),
    mutant(
        "top-p-drops-crossing-token", SAMPLING,
        "cutoff_index = mx.minimum(below, vocab_size - 1)",
        "cutoff_index = mx.maximum(below - 1, 0)",
        "top-p keeps only the prefix strictly below top_p, not the token that crosses it",
        scope="_filtered_distribution",
    ),
    mutant(
        "top-p-unsorted-cumsum", SAMPLING,
        "mx.cumsum(descending, axis=-1)",
        "mx.cumsum(probs, axis=-1)",
        "top-p mass accumulated in id order instead of descending probability",
        scope="_filtered_distribution",
    ),
    mutant(
        "top-p-drops-ties", SAMPLING,
        "logits = mx.where(probs >= cutoff, logits, _NEG_INF)",
        "logits = mx.where(\n"
        "            mx.argsort(mx.argsort(-probs, axis=-1), axis=-1) <= cutoff_index,\n"
        "            logits, _NEG_INF,\n"
        "        )",
        "top-p by rank: tokens tied with the last kept one are cut arbitrarily",
        scope="_filtered_distribution",
    ),
    mutant(
        "min-p-before-top-p", SAMPLING,
        "    if config.top_p < 1.0:\n"
        "        # Keep the smallest most-likely prefix whose mass reaches top_p (the crossing\n"
        "        # token included), and every token tied with its least likely member.\n"
        "        probs = mx.softmax(logits, axis=-1, precise=True)\n"
        "        descending = -mx.sort(-probs, axis=-1)\n"
        "        below = (mx.cumsum(descending, axis=-1) < config.top_p)"
        ".sum(axis=-1, keepdims=True)\n"
        "        cutoff_index = mx.minimum(below, vocab_size - 1)\n"
        "        cutoff = mx.take_along_axis(descending, cutoff_index, axis=-1)\n"
        "        logits = mx.where(probs >= cutoff, logits, _NEG_INF)\n"
        "    if config.min_p > 0.0:\n"
        "        probs = mx.softmax(logits, axis=-1, precise=True)\n"
        "        floor = config.min_p * mx.max(probs, axis=-1, keepdims=True)\n"
        "        logits = mx.where(probs >= floor, logits, _NEG_INF)\n",
        "    if config.min_p > 0.0:\n"
        "        probs = mx.softmax(logits, axis=-1, precise=True)\n"
        "        floor = config.min_p * mx.max(probs, axis=-1, keepdims=True)\n"
        "        logits = mx.where(probs >= floor, logits, _NEG_INF)\n"
        "    if config.top_p < 1.0:\n"
        "        probs = mx.softmax(logits, axis=-1, precise=True)\n"
        "        descending = -mx.sort(-probs, axis=-1)\n"
        "        below = (mx.cumsum(descending, axis=-1) < config.top_p)"
        ".sum(axis=-1, keepdims=True)\n"
        "        cutoff_index = mx.minimum(below, vocab_size - 1)\n"
        "        cutoff = mx.take_along_axis(descending, cutoff_index, axis=-1)\n"
        "        logits = mx.where(probs >= cutoff, logits, _NEG_INF)\n",
        "filter order min-p -> top-p: top-p then measures mass after min-p renormalised",
        scope="_filtered_distribution",
    ),
    mutant(
        "min-p-absolute-floor", SAMPLING,
        "floor = config.min_p * mx.max(probs, axis=-1, keepdims=True)",
        "floor = config.min_p",
        "min-p as an absolute floor instead of a fraction of the top probability",
        scope="_filtered_distribution",
    ),
    mutant(
        "min-p-strict", SAMPLING,
        "logits = mx.where(probs >= floor, logits, _NEG_INF)",
        "logits = mx.where(probs > floor, logits, _NEG_INF)",
        "`>` for `>=` in min-p: a token exactly at the floor is cut", scope="_filtered_distribution"
    ),
    mutant(
        "greedy-ties-highest-id", SAMPLING,
        "winner = mx.argmax(logits, axis=-1, keepdims=True)  # lowest id on ties",
        "winner = vocab_size - 1 - mx.argmax(logits[..., ::-1], axis=-1, keepdims=True)",
        "greedy ties broken towards the highest id", scope="_one_hot_argmax"
    ),
    mutant(
        "top-k-one-not-greedy", SAMPLER_CONFIG,
        "return self.temperature == 0.0 or self.top_k == 1",
        "return self.temperature == 0.0",
        "top-k 1 treated as sampling: tied maxima share the mass and the rule is not greedy",
        scope="SamplerConfig.is_greedy",
    ),
    mutant(
        "greedy-before-penalties", SAMPLING,
        "    logits = logits.astype(mx.float32)\n",
        "    logits = logits.astype(mx.float32)\n"
        "    if config.is_greedy:\n"
        "        return _one_hot_argmax(logits)\n",
        "greedy argmax taken before logit bias and penalties", scope="effective_token_distribution"
    ),
    # --- penalties, DRY, XTC -----------------------------------------------------------
    mutant(
        "bias-after-penalties", SAMPLING,
        "    if config.logit_bias:\n"
        "        logits = _apply_logit_bias(logits, config.logit_bias)\n"
        "    if config.repetition_penalty != 1.0 or config.frequency_penalty"
        " or config.presence_penalty:\n"
        "        logits = apply_repetition_penalties(logits, tokens, config)\n",
        "    if config.repetition_penalty != 1.0 or config.frequency_penalty"
        " or config.presence_penalty:\n"
        "        logits = apply_repetition_penalties(logits, tokens, config)\n"
        "    if config.logit_bias:\n"
        "        logits = _apply_logit_bias(logits, config.logit_bias)\n",
        "logit bias applied after the multiplicative repetition penalty",
        scope="effective_token_distribution",
    ),
    mutant(
        "repetition-penalty-direction", PENALTIES,
        "logits > 0, logits / config.repetition_penalty, logits * config.repetition_penalty",
        "logits > 0, logits * config.repetition_penalty, logits / config.repetition_penalty",
        "CTRL penalty the wrong way: repeated tokens become more likely",
        scope="apply_repetition_penalties",
    ),
    mutant(
        "repetition-window-whole-history", PENALTIES,
        "recent = history[-config.repetition_context_size :]",
        "recent = history",
        "repetition_context_size ignored: every earlier token is penalised",
        scope="apply_repetition_penalties",
    ),
    mutant(
        "frequency-as-presence", PENALTIES,
        "- counts * config.frequency_penalty",
        "- seen.astype(mx.float32) * config.frequency_penalty",
        "frequency penalty counts a token once, however often it occurred",
        scope="apply_repetition_penalties",
    ),
    mutant(
        "repetition-penalty-unseen-too", PENALTIES,
        "logits = mx.where(seen, penalised, logits)",
        "logits = penalised",
        "repetition penalty applied to every token, seen or not",
        scope="apply_repetition_penalties",
    ),
    mutant(
        "dry-breaker-candidate-penalised", DRY_FAST,
        "return mx.where(is_breaker[1:], 0, match_length).astype(mx.float32)",
        "return match_length.astype(mx.float32)",
        "DRY: a candidate that is itself a sequence breaker gets a match length (must be 0)",
        scope="saturated_match_lengths",
    ),
    mutant(
        "dry-match-crosses-breakers", DRY_FAST,
        "match_length = mx.minimum(prefix_matches[::-1][:-1], breaker_free)",
        "match_length = prefix_matches[::-1][:-1]",
        "DRY: a matched suffix may run through a sequence breaker", scope="saturated_match_lengths"
    ),
    mutant(
        "dry-match-includes-last-breaker", DRY_FAST,
        "is_breaker.any(), mx.argmax(is_breaker[::-1].astype(mx.int32)), n",
        "is_breaker.any(), mx.argmax(is_breaker[::-1].astype(mx.int32)) + 1, n",
        "DRY: the matched suffix may reach back onto the last breaker itself",
        scope="saturated_match_lengths",
    ),
    # How DRY computes its match lengths the spec leaves free ("compute them as you like"),
    # so a port has none of this code: prefix doubling, reached only by windows over 513
    # ids that do not saturate, and the direct comparison cut at the saturation length. A
    # Z-array short at the end, a match run into the padding or cut one short shows only on
    # histories longer or more repetitive than any vector holds, so no vector family is
    # expected to catch those (vectors=False); tests/test_core_dry_paths.py and
    # tests/test_dry.py do.
    mutant(
        "dry-z-array-stops-short-of-the-end", DRY_FAST,
        "length = mx.where((here + block <= n) & same, length + block, length)",
        "length = mx.where((here + block < n) & same, length + block, length)",
        "DRY's Z-array never extends a match through the window's last token",
        vectors=False, scope="_prefix_match_lengths"
    ),
    mutant(
        "dry-direct-match-runs-into-padding", DRY_FAST,
        "return mx.minimum(first_difference, n - mx.arange(n)).astype(mx.int32)",
        "return first_difference.astype(mx.int32)",
        "DRY's direct comparison lets a match run on into the zero padding past the window",
        vectors=False, scope="_capped_prefix_match_lengths"
    ),
    mutant(
        "dry-direct-match-no-stop-column", DRY_FAST,
        "    differs = mx.concatenate([differs, mx.ones((n, 1), dtype=mx.bool_)], axis=1)\n",
        "",
        "DRY's direct comparison reads a row with no difference as a match of length 0",
        scope="_capped_prefix_match_lengths",
    ),
    mutant(
        "dry-saturation-one-short", DRY_FAST,
        "return allowed + excess if allowed + excess <= _LONGEST_DIRECT_MATCH else None",
        "return allowed + excess - 1 if allowed + excess <= _LONGEST_DIRECT_MATCH else None",
        "DRY cuts match lengths one short of saturation: the longest matches lose their cap",
        vectors=False, scope="saturation_length"
    ),
    mutant(
        "dry-sums-occurrences", DRY,
        ".at[candidate_tokens].maximum(match_length)",
        ".at[candidate_tokens].add(match_length)",
        "DRY: a token's match lengths summed over its occurrences instead of the longest",
        scope="longest_match_penalty",
    ),
    mutant(
        "dry-allowed-length-strict", DRY,
        "return mx.where(longest >= config.dry_allowed_length, penalty, 0.0)",
        "return mx.where(longest > config.dry_allowed_length, penalty, 0.0)",
        "DRY: a match of exactly dry_allowed_length goes unpenalised",
        scope="penalty_of_match_length",
    ),
    mutant(
        "dry-exponent-off-by-one", DRY,
        "exponent = longest - config.dry_allowed_length",
        "exponent = longest - config.dry_allowed_length + 1",
        "DRY penalty one power of the base too large", scope="penalty_of_match_length"
    ),
    mutant(
        "dry-window-off-by-one", DRY,
        "history[-config.dry_penalty_last_n :]",
        "history[-config.dry_penalty_last_n + 1 :]",
        "DRY reads one token fewer than dry_penalty_last_n", scope="dry_window"
    ),
    mutant(
        "dry-uncapped", DRY,
        "    penalty = mx.minimum(penalty, DRY_PENALTY_CAP)\n",
        "",
        "DRY penalty overflows to inf on long repeats; a fully penalised row turns NaN",
        scope="penalty_of_match_length",
    ),
    # DRY's definition, which the chain reaches only through the fast path's match lengths:
    # no vector and no chain test runs it, so only the proof that the two agree
    # (tests/test_dry.py) can kill these; that it does shows the proof compares something.
    mutant(
        "dry-definition-match-crosses-breakers", DRY,
        "    equal = equal & ~is_breaker[suffix][None, :]\n",
        "",
        "DRY's definition lets a matched suffix run through a sequence breaker",
        vectors=False, first_tests=("tests/test_dry.py",), scope="match_lengths",
    ),
    mutant(
        "dry-definition-breaker-candidate-matched", DRY,
        "return mx.where(is_breaker[1:], 0.0, lengths)",
        "return lengths",
        "DRY's definition gives a candidate that is itself a breaker a match length",
        vectors=False, first_tests=("tests/test_dry.py",), scope="match_lengths",
    ),
    mutant(
        "xtc-strict-threshold", SAMPLING,
        "above = (probs >= threshold) & (probs > 0)",
        "above = (probs > threshold) & (probs > 0)",
        "XTC: a token exactly at the threshold does not qualify", scope="_xtc_cut"
    ),
    mutant(
        "xtc-zero-probability-qualifies", SAMPLING,
        "above = (probs >= threshold) & (probs > 0)",
        "above = probs >= threshold",
        "XTC at threshold 0: masked tokens qualify and every real token is cut", scope="_xtc_cut"
    ),
    mutant(
        "xtc-cuts-least-likely-too", SAMPLING,
        "cut = above & (probs > smallest_above)",
        "cut = above & (probs >= smallest_above)",
        "XTC removes every qualifying token, the least likely one included", scope="_xtc_cut"
    ),
    mutant(
        "xtc-needs-three", SAMPLING,
        "(above.sum(axis=-1, keepdims=True) >= 2)",
        "(above.sum(axis=-1, keepdims=True) >= 3)",
        "XTC cuts only when three tokens qualify", scope="_xtc_cut"
    ),
    mutant(
        "xtc-mixture-swapped", SAMPLING,
        "return (1.0 - config.xtc_probability) * uncut + config.xtc_probability * cut",
        "return config.xtc_probability * uncut + (1.0 - config.xtc_probability) * cut",
        "XTC mixture weights swapped: the cut applies with 1 - xtc_probability",
        scope="effective_token_distribution",
    ),
    # --- block verification (verify_blockwise) --------------------------------------
    mutant(
        "joint-first-failure", JOINT,
        "num_accepted = mx.where(keeps, lengths, 0).max(axis=-1).astype(mx.int32)",
        "num_accepted = mx.cumprod(keeps.astype(mx.int32)).sum().astype(mx.int32)",
        "block verification stopped at the first failing test instead of the longest prefix",
        scope="verify_blockwise",
    ),
    mutant(
        "joint-residual-without-weight", JOINT,
        "excess / mx.where(residual_mass > 0, residual_mass, 1.0)[:, None],",
        "mx.maximum(target_probs[:k] - draft_probs, 0.0)\n"
        "                 / mx.maximum(target_probs[:k] - draft_probs, 0.0)"
        ".sum(axis=-1, keepdims=True),",
        "the replacement drawn from relu(p - q), without the prefix weight w_tau on p",
        scope="verify_blockwise",
    ),
    mutant(
        "joint-keep-probability-without-weight", JOINT,
        "excess = mx.maximum(weights[:k, None] * target_probs[:k] - draft_probs, 0.0)",
        "excess = mx.maximum(target_probs[:k] - draft_probs, 0.0)",
        "Z_i and the residual computed from p instead of w_i p", scope="verify_blockwise"
    ),
    mutant(
        "joint-h-k-is-one", JOINT,
        "mx.where(lengths == num_real, weights[1:], 0.0))",
        "mx.where(lengths == num_real, 1.0, 0.0))",
        "h_k = 1 instead of w_k: the whole block is kept whatever its weight",
        scope="verify_blockwise",
    ),
    mutant(
        "joint-weights-uncapped", JOINT,
        "log_weights = prefix_sums - mx.cummax(prefix_sums)",
        "log_weights = prefix_sums",
        "w_i as the plain product of ratios, without min(1, .)", scope="_prefix_weights"
    ),
    mutant(
        "joint-excluded-draft-revives", JOINT,
        "return mx.where(dead, 0.0, mx.exp(log_weights))",
        "return mx.exp(log_weights)",
        "a draft the target excludes (p = 0) does not zero the weight of the prefix",
        scope="_prefix_weights",
    ),
    mutant(
        "joint-keep-strict", JOINT,
        "u[:k, 0] <= keep_probability)",
        "u[:k, 0] < keep_probability)",
        "`<` for `<=` in the keep test: eta == h_i rejects a prefix it must keep",
        scope="verify_blockwise",
    ),
    mutant(
        "joint-drops-h-guard", JOINT,
        "keeps = mx.logical_and(keep_probability > 0, u[:k, 0] <= keep_probability)",
        "keeps = u[:k, 0] <= keep_probability",
        "no `h_i > 0` guard: eta = 0 keeps a prefix of probability zero", scope="verify_blockwise"
    ),
    mutant(
        "joint-bonus-from-last-draft-row", JOINT,
        "rows = mx.where((mx.arange(k + 1) == num_real)[:, None], target_probs, rows)",
        "rows = mx.where((mx.arange(k + 1) == num_real)[:, None],\n"
        "                 mx.concatenate([target_probs[:1], target_probs[:-1]]), rows)",
        "the bonus after an all-kept block drawn from row k - 1 instead of row k",
        scope="verify_blockwise",
    ),
    mutant(
        "joint-length-law-reversed", JOINT,
        "rejects_after = mx.cumprod((1.0 - keep_probability)[::-1])[::-1]",
        "rejects_after = mx.cumprod(1.0 - keep_probability)",
        "P(tau = i) multiplies the rejections before i instead of after it",
        scope="verify_blockwise",
    ),
    # --- the draw's exact law on the uniform grid ------------------------------------------
    mutant(
        "grid-counts-inclusive", DRAW_LAW,
        "below = (middle < UNIFORM_GRID_SIZE) & (uniforms * total < partial_sums)",
        "below = (middle < UNIFORM_GRID_SIZE) & (uniforms * total <= partial_sums)",
        "grid points on a breakpoint credited to the id before it, unlike the draw",
        scope="grid_draw_counts",
    ),
    # --- the fused fast path (a second implementation of the draw and the round) -----------
    mutant(
        "fused-draw-inclusive", FUSED,
        "eligible = (partial_sums > u[..., None] * partial_sums[..., -1:]) & positive",
        "eligible = (partial_sums >= u[..., None] * partial_sums[..., -1:]) & positive",
        "the fast path's draw with `>=`: it no longer emits the reference's token on a breakpoint",
        vectors=False,
        first_tests=(
            "tests/test_fused.py::"
            "test_draw_matches_the_golden_vectors",
        ),
        scope="draw_from_distribution"
    ),
    mutant(
        "fused-first-eligible-inclusive", FUSED,
        "eligible = (partial_sums > threshold) & positive",
        "eligible = (partial_sums >= threshold) & positive",
        "the uncompiled fast path's draw with `>=`: it leaves the reference at a breakpoint",
        vectors=False,
        first_tests=(
            "tests/test_fused.py::"
            "test_draw_matches_the_golden_vectors",
        ),
        scope="draw_by_first_eligible"
    ),
    mutant(
        "fused-first-eligible-first-positive", FUSED,
        "last_positive = vocab_size - 1 - mx.argmax(positive[..., ::-1], axis=-1)",
        "last_positive = mx.argmax(positive, axis=-1)",
        "the uncompiled draw falls back to the first positive id, not the last",
        vectors=False,
        first_tests=(
            "tests/test_fused.py::"
            "test_draw_matches_the_golden_vectors",
        ),
        scope="draw_by_first_eligible"
    ),
    mutant(
        "fused-greedy-argmin", FUSED,
        "return mx.argmax(probs, axis=-1).astype(mx.int32)",
        "return mx.argmin(probs, axis=-1).astype(mx.int32)",
        "the greedy fast draw reads the one-hot law's argmin",
        vectors=False,
        first_tests=(
            "tests/test_fused.py::"
            "test_draft_and_target_steps_match_the_golden_vectors",
        ),
        scope="_greedy_or.argmax_of_one_hot"
    ),
    mutant(
        "fused-resample-from-p", FUSED,
        "residual_distribution(target_probs[:k], draft_probs),",
        "target_probs[:k],",
        "the fast path resamples from p instead of the residual",
        vectors=False, first_tests=("tests/test_fused.py",), scope="fused_verify_tokenwise"
    ),
    mutant(
        "fused-bonus-row-off-by-one", FUSED,
        "rows = mx.concatenate([replacement, target_probs[k:]])",
        "rows = mx.concatenate([replacement, target_probs[k - 1 : k]])",
        "the fast path draws the bonus from row k - 1",
        vectors=False,
        first_tests=(
            "tests/test_fused.py::"
            "test_fused_verify_tokenwise_matches_the_golden_vectors",
        ),
        scope="fused_verify_tokenwise"
    ),
    mutant(
        "fused-sum-of-accepted", FUSED,
        "    num_accepted = mx.cumprod(accepted.astype(mx.int32)).sum().astype(mx.int32)\n"
        "    return num_accepted, candidates[num_accepted]",
        "    num_accepted = accepted.astype(mx.int32).sum().astype(mx.int32)\n"
        "    return num_accepted, candidates[num_accepted]",
        "the fast path counts every accepted draft, not the accepted prefix",
        vectors=False, first_tests=("tests/test_fused.py",), scope="fused_verify_tokenwise"
    ),
    # --- rewind ------------------------------------------------------------------------
    mutant(
        "rewind-994-over-trim", REWIND,
        "return RewindPlan(target_trim=n - a, draft_trim=n - a - 1, draft_backfill=False)",
        "return RewindPlan(target_trim=n - a, draft_trim=min(n - a + 1, n), draft_backfill=False)",
        "the mlxcel #994 draft-cache rewind: trims two too many, the drafter falls behind",
        vectors=True, scope="rewind_trim"
    ),
    mutant(
        "rewind-draft-trims-like-target", REWIND,
        "return RewindPlan(target_trim=n - a, draft_trim=n - a - 1, draft_backfill=False)",
        "return RewindPlan(target_trim=n - a, draft_trim=n - a, draft_backfill=False)",
        "draft cache trimmed like the target's: one entry short of the emitted history",
        scope="rewind_trim",
    ),
    mutant(
        "rewind-no-backfill", REWIND,
        "return RewindPlan(target_trim=0, draft_trim=0, draft_backfill=True)",
        "return RewindPlan(target_trim=0, draft_trim=0, draft_backfill=False)",
        "all-accepted round never backfills d(n-1): the drafter's context loses a token",
        scope="rewind_trim",
    ),
    mutant(
        "rewind-target-under-trim", REWIND,
        "return RewindPlan(target_trim=n - a, draft_trim=n - a - 1, draft_backfill=False)",
        "return RewindPlan(target_trim=n - a - 1, draft_trim=n - a - 1, draft_backfill=False)",
        "target cache keeps the rejected draft: the next forward sees a token never emitted",
        scope="rewind_trim",
    ),
    # --- closed forms ------------------------------------------------------------------
    mutant(
        "closed-form-sum-max", THEORY,
        "sum_min=mx.minimum(p, q).sum(axis=-1)",
        "sum_min=mx.maximum(p, q).sum(axis=-1)",
        "acceptance ceiling computed as sum max(p, q)", scope="acceptance_closed_forms"
    ),
    mutant(
        "total-variation-without-half", THEORY,
        "total_variation=0.5 * mx.abs(p - q).sum(axis=-1)",
        "total_variation=mx.abs(p - q).sum(axis=-1)",
        "total variation reported as the L1 distance", scope="acceptance_closed_forms"
    ),
    mutant(
        "greedy-acceptance-reads-p", THEORY,
        "return mx.take_along_axis(q, winner, axis=-1)[..., 0]",
        "return mx.take_along_axis(p, winner, axis=-1)[..., 0]",
        "greedy-argmax acceptance as p(argmax p) instead of q(argmax p)",
        scope="acceptance_probability",
    ),
    mutant(
        "sampler-match-probability-is-sum-min", THEORY,
        "    return forms.sum_prod\n",
        "    return forms.sum_min\n",
        "sampler-match credited with the stochastic ceiling", scope="acceptance_probability"
    ),
    mutant(
        "expected-tokens-sum-not-product", THEORY,
        "survival *= _probability(f\"alphas[{position}]\", alpha)",
        "survival = _probability(f\"alphas[{position}]\", alpha)",
        "expected tokens as 1 + sum(alpha) instead of the products of the accepted prefix",
        scope="expected_tokens_per_round",
    ),
    mutant(
        "speedup-charges-bonus-draft", THEORY,
        "cost = k * c + verify_cost",
        "cost = (k + 1) * c + verify_cost",
        "speedup charges the drafter k + 1 forwards per round", scope="expected_speedup"
    ),
    # --- uniforms ----------------------------------------------------------------------
    mutant(
        "uniform-slots-collide", RANDOMNESS,
        "(SLOTS * position + slot)",
        "(position + slot)",
        "(position, slot) hashed as position + slot: neighbouring positions reuse uniforms",
        scope="_position_word",
    ),
    mutant(
        "seed-high-bits-dropped", RANDOMNESS,
        "return splitmix64(splitmix64(seed) ^ (SLOTS * position + slot))",
        "return splitmix64(splitmix64(seed & 0xFFFFFFFF) ^ (SLOTS * position + slot))",
        "the seed folded to its low 32 bits: requests whose seeds differ only in the high bits "
        "read the same coins, so a batch's requests are no longer independent",
        first_tests=("tests/test_batch_verification.py",), scope="_position_word",
    ),
    mutant(
        "uniform-half-range", RANDOMNESS,
        "return (word >> (64 - UNIFORM_BITS)) / float(1 << UNIFORM_BITS)",
        "return (word >> (65 - UNIFORM_BITS)) / float(1 << UNIFORM_BITS)",
        "23 random bits over a 24-bit denominator: every uniform lies in [0, 0.5)",
        scope="_word_to_uniform",
    ),
    Mutant(
        "round-keys-by-absolute-position", RANDOMNESS,
        (
            ("draft = [UniformKey(DRAFT, round_position, j) for j in range(num_drafts)]",
             "draft = [UniformKey(DRAFT, round_position + j, 0) for j in range(num_drafts)]"),
            ("[UniformKey(ACCEPT, round_position, i), ",
             "[UniformKey(ACCEPT, round_position + i, 0), "),
        ),
        "accept tests and drafts keyed by absolute position, the keying this reference shipped: "
        "block verification's next round re-reads uniforms its kept length conditioned on",
        scope="round_keys",
    ),
    mutant(
        "draft-reads-accept-slot", RANDOMNESS,
        "DRAFT = 2",
        "DRAFT = 0",
        "the drafter's draw reuses the accept test's uniform: accept and draft correlate",
    ),
    # --- validation --------------------------------------------------------------------
    mutant(
        "history-ids-wrap", VALIDATION,
        "return mx.where(valid, mx.where(valid, value, 0).astype(mx.int32), NO_TOKEN)",
        "return value.astype(mx.int32)",
        "history ids used as given: -1 counts as id V - 1, and an id past V makes the "
        "penalties' scatter write outside the row", scope="token_history"
    ),
    mutant(
        "history-placeholder-counted", PENALTIES,
        ".at[mx.maximum(recent, 0)].add(is_token)",
        ".at[mx.maximum(recent, 0)].add(1.0)",
        "a history id outside the vocabulary counted by the penalties as id 0",
        scope="apply_repetition_penalties",
    ),
    mutant(
        "dry-placeholder-not-a-breaker", DRY,
        ".any(axis=1), window < 0)",
        ".any(axis=1), window < -1)",
        "DRY matches across a history id outside the vocabulary as if it were a token",
        scope="sequence_breakers",
    ),
    mutant(
        "draft-ids-unclamped", VALIDATION,
        "return DraftIds(mx.where(valid, value, 0).astype(mx.int32), valid)",
        "return DraftIds(value.astype(mx.int32), valid)",
        "a placeholder id gathered as given: the read past the row segfaults the process",
        scope="draft_ids",
    ),
    mutant(
        "draft-ids-narrowed-first", VALIDATION,
        "wide = ids.astype(mx.int64)",
        "wide = ids.astype(mx.int32)",
        "ids narrowed to int32 before the range test: int64 2**32 wraps to id 0 and is kept",
        scope="in_vocabulary",
    ),
    mutant(
        "placeholder-accepted", ACCEPTANCE,
        "return mx.logical_and(ids.valid, mx.logical_and(p_t > 0, u * q_t <= p_t))",
        "return mx.logical_and(p_t > 0, u * q_t <= p_t)",
        "a placeholder tested as the id it is gathered at: padding accepted as token 0",
        scope="_accepts",
    ),
    mutant(
        "placeholder-draws-residual", ACCEPTANCE,
        "return mx.where(ids.valid[..., None], residual_distribution(p, q), p)",
        "return residual_distribution(p, q)",
        "a placeholder's replacement drawn from relu(p - q) as for a rejected draft: the "
        "output law is biased, since nothing was drawn from q there", scope="_replacement_rows"
    ),
    mutant(
        "grammar-force-reject-to-masked-target", ACCEPTANCE,
        "return mx.where(ids.valid[..., None], residual_distribution(p, q), p)",
        "return mx.where(mx.logical_and(ids.valid, _at(p, ids.clamped) > 0)[..., None], "
        "residual_distribution(p, q), p)",
        "a draft the (grammar-masked) target excludes force-rejected and replaced by a draw "
        "from p, not the residual: with p = (.5, .5, 0) and q = (.1, .3, .6) it emits "
        "(.4, .6, 0), total variation 1/10 (proofs/grammar_constrained.md)",
        first_tests=("proofs/test_grammar_constrained.py",), scope="_replacement_rows",
    ),
    mutant(
        "greedy-placeholder-accepted", ACCEPTANCE,
        "return Verdict(mx.logical_and(ids.valid, emitted == ids.clamped), emitted)",
        "return Verdict(emitted == ids.clamped, emitted)",
        "greedy-argmax keeps a placeholder whose clamped id is the argmax", scope="_verify"
    ),
    mutant(
        "joint-placeholder-read-as-excluded", JOINT,
        "    keep_probability = mx.where(lengths < num_real, keep_probability,\n"
        "                                mx.where(lengths == num_real, weights[1:], 0.0))\n",
        "    keep_probability = mx.where(lengths <= num_real, keep_probability, 0.0)\n",
        "block verification treats a placeholder as a draft with p = 0: the last real prefix "
        "is tested by h_m = Z_m / (Z_m + 1 - w_m) against a q never sampled, not by w_m",
        scope="verify_blockwise",
    ),
    mutant(
        "joint-placeholder-draws-residual", JOINT,
        "    rows = mx.where((mx.arange(k + 1) == num_real)[:, None], target_probs, rows)\n",
        "",
        "after the last real draft the next token is drawn from the residual against the "
        "placeholder's q, not from the target's own row", scope="verify_blockwise"
    ),
    mutant(
        "fused-placeholder-accepted", FUSED,
        "accepted = mx.logical_and(ids.valid, candidates[:k] == ids.clamped)\n    elif",
        "accepted = candidates[:k] == ids.clamped\n    elif",
        "the fast path keeps a greedy placeholder whose clamped id is the argmax",
        vectors=False, first_tests=("tests/test_fused.py",), scope="fused_verify_tokenwise"
    ),
    mutant(
        "fused-placeholder-draws-residual", FUSED,
        "replacement = mx.where(ids.valid[:, None],\n"
        "                               residual_distribution(target_probs[:k], draft_probs),\n"
        "                               target_probs[:k])",
        "replacement = residual_distribution(target_probs[:k], draft_probs)",
        "the fast path draws a placeholder's replacement from the residual",
        vectors=False, first_tests=("tests/test_fused.py",), scope="fused_verify_tokenwise"
    ),
    mutant(
        "uniform-accepts-one", VALIDATION,
        "if not (math.isfinite(value) and 0.0 <= value < 1.0):",
        "if not (math.isfinite(value) and 0.0 <= value <= 1.0):",
        "u = 1 accepted: the draw falls through every prefix sum", scope="uniform"
    ),
    mutant(
        "probabilities-accept-half-precision", VALIDATION,
        "if array.dtype != mx.float32:",
        "if array.dtype not in (mx.float32, mx.float16, mx.bfloat16):",
        "half-precision probabilities accepted: small ratios underflow to certain accepts",
        scope="require_probabilities",
    ),
    # --- choices a port written from spec/ once got past the vectors ------------------------
    mutant(
        "probabilities-accept-float64", VALIDATION,
        "if array.dtype != mx.float32:",
        "if array.dtype not in (mx.float32, mx.float64):",
        "float64 probabilities accepted: the rules run at a precision nothing specifies",
        scope="require_probabilities",
    ),
    mutant(
        "draw-divides-by-total", SAMPLING,
        "eligible = mx.logical_and(partial_sums > target, positive)",
        "eligible = mx.logical_and(partial_sums / partial_sums[..., -1:] > u[..., None], "
        "positive)",
        "S_i / S > u instead of S_i > u * S: other float32 breakpoints on grid uniforms",
        scope="sample_from_distribution",
    ),
    mutant(
        "joint-zero-residual-keeps-nothing", JOINT,
        "inner = mx.where(denominator > 0, z / mx.where(denominator > 0, denominator, 1.0), 1.0)",
        "inner = mx.where(denominator > 0, z / mx.where(denominator > 0, denominator, 1.0), 0.0)",
        "h_i = 0 instead of 1 where Z_i = 0 and w_i = 1: a prefix is dropped when the next "
        "draft is excluded", scope="verify_blockwise"
    ),
    mutant(
        "joint-q-zero-reset-is-one", JOINT,
        "reset = mx.abs(log_ratio).sum() + 1.0",
        "reset = mx.array(1.0)",
        "a q = 0 draft adds log ratio 1, not more than any deficit: w does not return to 1",
        scope="_prefix_weights",
    ),
    mutant(
        "joint-log-of-ratio", JOINT,
        "mx.log(mx.where(finite, p_drafted, 1.0))\n"
        "                         - mx.log(mx.where(finite, q_drafted, 1.0))",
        "mx.log(mx.where(finite, p_drafted, 1.0)\n"
        "                                / mx.where(finite, q_drafted, 1.0))",
        "log(p / q) instead of log p - log q: p / q overflows for a subnormal q and w turns NaN",
        scope="_prefix_weights",
    ),
    # --- the shell ---------------------------------------------------------------------
    mutant(
        "penalties-ignore-drafts", GENERATOR,
        "row_history = mx.concatenate([history, *[d.reshape(1) for d in drafts[:i]]])",
        "row_history = history",
        "target rows penalised without the drafts before them in the history",
        vectors=False,
        first_tests=(
            "tests/test_generator_sampling.py::"
            "test_sampler_match_replays_target_only_sampling",
        ), scope="SpeculativeGenerator._target_rows"
    ),
    mutant(
        "shell-q-is-unfiltered", GENERATOR,
        "draft_probs.append(q)",
        "draft_probs.append(mx.softmax(logits.astype(mx.float32), axis=-1))",
        "raw logits' softmax used as q while the draft was drawn from the filtered law",
        vectors=False,
        first_tests=(
            "tests/test_conformance.py::"
            "test_the_generator_passes_every_check_replay_included",
        ), scope="SpeculativeGenerator._draft"
    ),
    # --- tree verification -------------------------------------------------------------
    mutant(
        "tree-without-replacement-verified-as-iid", TREE,
        "if scheme is TreeScheme.IID or drawn is None:",
        "if scheme is not TreeScheme.DETERMINISTIC or drawn is None:",
        "drafts without replacement verified with SpecInfer's rule: q not renormalised",
        scope="_proposal",
    ),
    mutant(
        "tree-candidates-verified-as-drawn", TREE,
        "    if scheme is TreeScheme.DETERMINISTIC:\n        return (mx.arange",
        "    if scheme is TreeScheme.DETERMINISTIC and False:\n        return (mx.arange",
        "deterministic candidates tested against a law (p/q) instead of their one-hot proposal",
        scope="_proposal",
    ),
    mutant(
        "tree-final-draw-reuses-accept-coin", TREE,
        "row_uniforms = sample_u[mx.array(shape.depths, dtype=mx.int32)]",
        "row_uniforms = mx.stack([accept_u[kids[-1]] if kids else sample_u[d]\n"
        "                             for kids, d in zip(shape.children, shape.depths)])",
        "SGLang PR #7207: the next token drawn with the last rejected sibling's accept coin",
        scope="verify_tree",
    ),
    mutant(
        "tree-zero-mass-accepted-at-coin-zero", TREE,
        "accepted = mx.logical_and(r_x > 0, accept_u[child] * q_x <= r_x)",
        "accepted = accept_u[child] * q_x <= r_x",
        "SGLang #35771: a draft the residual excludes passes its test at coin 0",
        scope="verify_tree",
    ),
    mutant(
        "tree-rejection-keeps-p", TREE,
        "            rejected = mx.where(mass > 0, excess / mx.where(mass > 0, mass, 1.0), r)\n",
        "            rejected = mx.where(mass > 0, r, r)\n",
        "a rejected sibling leaves the target's law unchanged: later siblings and the draw read p",
        scope="verify_tree",
    ),
    mutant(
        "tree-last-passing-sibling-wins", TREE,
        "chosen = mx.where(mx.logical_and(chosen < 0, accepted), child, chosen)",
        "chosen = mx.where(accepted, child, chosen)",
        "the walk descends into the last sibling that passes, not the first", scope="verify_tree"
    ),
    mutant(
        "tree-duplicate-siblings-allowed", TREE,
        "distinct_siblings=scheme is not TreeScheme.IID)",
        "distinct_siblings=scheme is TreeScheme.DETERMINISTIC)",
        "repeated siblings accepted without replacement: the repeat's q_j(x) = 0 always passes",
        scope="verify_tree",
    ),
    # --- tree speculation (the shell) ------------------------------------------------
    mutant(
        "tree-round-keyed-as-the-first", TREE_GENERATOR,
        "keys = tree_keys(position, parents)",
        "keys = tree_keys(0, parents)",
        "every tree round re-reads the first round's coins: drafts, tests and draws repeat",
        vectors=False,
        first_tests=("tests/test_conformance_tree.py::test_tree_generator_conforms",),
        scope="TreeSpeculativeGenerator._round",
    ),
    mutant(
        "tree-siblings-drawn-with-replacement", TREE_GENERATOR,
        "kept = mx.where(drawn, 0.0, q[m]) if j else q[m]",
        "kept = q[m]",
        "siblings drafted with replacement but verified as drawn without: the wrong q_j",
        vectors=False,
        first_tests=("tests/test_conformance_tree.py::test_tree_generator_conforms",),
        scope="TreeSpeculativeGenerator._draft_children",
    ),
    mutant(
        "tree-keeps-the-first-row", TREE_GENERATOR,
        "row = _first_leaf_row(path, width, depth)",
        "row = _first_leaf_row([], width, depth)",
        "the caches keep the first path's entries, not the accepted path's",
        vectors=False, first_tests=("tests/test_tree_generator.py",),
        scope="TreeSpeculativeGenerator._round",
    ),
    mutant(
        "tree-node-at-offset-plus-index", TREE_ATTENTION,
        "return mx.array([self.prefix + self.depths[e] for e in range(start, stop)],",
        "return mx.array([self.prefix + e for e in range(start, stop)],",
        "node i sits at position offset + i, not offset + its depth: its logits are no chain's",
        vectors=False, first_tests=("tests/test_tree_attention.py",),
        scope="TreeLayout.positions",
    ),
    mutant(
        "tree-mask-causal-over-breadth-first", TREE_ATTENTION,
        "tree_part = mx.array([[c in self.lineages[e] for c in range(stop)]",
        "tree_part = mx.array([[c <= e for c in range(stop)]",
        "a node sees every earlier node, its cousins included, not only its ancestors",
        vectors=False, first_tests=("tests/test_tree_attention.py",),
        scope="TreeLayout.mask",
    ),
    mutant(
        "tree-drops-the-backfill", TREE_GENERATOR,
        "return [*[tokens[v] for v in path], next_token], plan.draft_backfill",
        "return [*[tokens[v] for v in path], next_token], False",
        "after a full path the drafter never gets the leaf it did not forward",
        vectors=False,
        first_tests=("tests/test_conformance_tree.py::test_tree_generator_conforms",),
        scope="TreeSpeculativeGenerator._round",
    ),
    mutant(
        "ceiling-ignores-the-draft-count", TREE,
        "return (p_prefix + 1.0 - q_prefix**num_drafts).min()",
        "return (p_prefix + 1.0 - q_prefix).min()",
        "the multi-draft ceiling computed as the single-draft sum min(p, q), whatever n",
        scope="multi_draft_ceiling",
    ),
    mutant(
        "ceiling-sorted-descending", TREE,
        "order = mx.argsort(ratio)",
        "order = mx.argsort(-ratio)",
        "the ceiling's prefixes taken in decreasing p/q: a minimum over the wrong sets",
        scope="multi_draft_ceiling",
    ),
    mutant(
        "iid-acceptance-keeps-p", TREE,
        "        miss = miss * (1.0 - mx.minimum(r, q).sum())\n        excess",
        "        miss = miss * (1.0 - mx.minimum(p, q).sum())\n        excess",
        "RRS's acceptance as 1 - (1 - sum min(p, q))^n, as if each draft were tested against p",
        scope="iid_siblings_acceptance",
    ),
    mutant(
        "without-replacement-acceptance-keeps-q", TREE,
        "        proposal = mx.where(kept > 0, removed / mx.where(kept > 0, kept, 1.0), removed)",
        "        proposal = mx.repeat(proposal, vocab, axis=0)",
        "RSD's acceptance with the proposal never renormalised: the product form of i.i.d. "
        "drafts, for siblings drafted without replacement",
        scope="without_replacement_siblings_acceptance",
        first_tests=("proofs/test_tree_exact.py",),
    ),
    mutant(
        "without-replacement-acceptance-keeps-r", TREE,
        "        r = mx.where(mass > 0, excess / mx.where(mass > 0, mass, 1.0), r)\n        rows",
        "        rows",
        "RSD's acceptance with every sibling tested against p, the residual never updated",
        scope="without_replacement_siblings_acceptance",
        first_tests=("proofs/test_tree_exact.py",),
    ),
    mutant(
        "candidate-acceptance-independent-tests", TREE,
        "    return p[mx.array(list(candidates), dtype=mx.int32)].sum()",
        "    return 1.0 - (1.0 - p[mx.array(list(candidates), dtype=mx.int32)]).prod()",
        "candidates' acceptance as independent tests against p, 1 - prod(1 - p(x_j)), not "
        "the target's mass on them",
        scope="candidate_siblings_acceptance",
        first_tests=("proofs/test_tree_exact.py",),
    ),
    # --- the conformance kit -----------------------------------------------------------
    mutant(
        "fresh-reads-block-tests-to-kept-length", CONFORMANCE_POSITIONS,
        "cells = [(i, 0) for i in range(k)] + [(kept, 1)]",
        "cells = [(i, 0) for i in range(min(kept + 1, k))] + [(kept, 1)]",
        "block verification's tests counted as read only up to its kept length, as if it "
        "stopped at the first failure (the mistake behind position keying): the fresh check "
        "misses a position-keyed block engine's re-read tests",
        vectors=False,
        first_tests=(
            "tests/test_conformance.py::"
            "test_each_broken_engine_is_caught_within_its_stated_rounds",
        ), scope="read_cells"
    ),
    # --- the conformance kit's tree checks ----------------------------------------------
    mutant(
        "tree-replay-verifies-every-scheme-as-iid", TREE_CHECKS,
        "nodes, token = _verify(round_, TreeScheme(round_.scheme))",
        "nodes, token = _verify(round_, TreeScheme.IID)",
        "the tree replay decides every round with the i.i.d. rule: it passes siblings drafted "
        "without replacement, or top-n, verified with p/q",
        vectors=False,
        first_tests=(f"{TREE_CONFORMANCE_TESTS}::test_broken_tree_engine_is_caught",),
        scope="TreeReplayState.update",
    ),
    mutant(
        "tree-fresh-ignores-rereads-within-a-round", TREE_CHECKS,
        "if value in self.values:",
        "if value in self.values and self.values[value][1] != ordinal:",
        "the tree fresh check compares a round's uniforms with earlier rounds' only: an accept "
        "coin reused for the round's own draw passes",
        vectors=False,
        first_tests=(f"{TREE_CONFORMANCE_TESTS}::test_broken_tree_engine_is_caught",),
        scope="TreeFreshState.read",
    ),
    mutant(
        "tree-fresh-merge-misses-rereads-across-a-cut", TREE_CHECKS,
        "self.rereads += other.rereads + len(shared)",
        "self.rereads += other.rereads",
        "the tree fresh check's merge counts each piece's re-reads alone: a round reusing "
        "the uniforms of a round in an earlier piece passes when the trace is checked in pieces",
        vectors=False,
        first_tests=(f"{TREE_PIECES_TESTS}::"
                     "test_tree_fresh_merge_equals_one_pass_at_every_cut",),
        scope="TreeFreshState.merge",
    ),
    mutant(
        "tree-law-jitter-by-depth-alone", TREE_CHECKS,
        "unit_hash(LAW_SEED, round_.run.id, round_.index, depth)",
        "unit_hash(LAW_SEED, round_.run.id, depth)",
        "the tree law's jitter repeats every round: the PIT values of equal laws coincide "
        "instead of being independent",
        vectors=False,
        first_tests=(f"{TREE_PIECES_TESTS}::test_tree_law_jitter_is_fixed_by_the_token",),
        scope="tree_law_jitter",
    ),
    mutant(
        "tree-support-admits-p-zero", TREE_CHECKS,
        "if round_.target_rows[rows[d]][token] <= 0:",
        "if round_.target_rows[rows[d]][token] < 0:",
        "the tree support check never sees a token the target gives no mass",
        vectors=False,
        first_tests=(f"{TREE_CONFORMANCE_TESTS}::"
                     "test_tree_support_names_a_token_of_probability_zero",),
        scope="_support_violation",
    ),
    mutant(
        "tree-support-against-the-first-residual", TREE_CHECKS,
        "    for j in range(tested):\n",
        "    for j in range(min(tested, 1)):\n",
        "the tree support check tests a token against the residual after the first rejected "
        "child only: a next token drawn before the last sibling's update passes",
        vectors=False,
        first_tests=(f"{TREE_CONFORMANCE_TESTS}::test_broken_tree_engine_is_caught",),
        scope="_residual_removal",
    ),
    mutant(
        "tree-acceptance-iid-against-p", TREE_CHECKS,
        "miss *= 1.0 - float(np.minimum(r, q).sum())",
        "miss *= 1.0 - float(np.minimum(p, q).sum())",
        "the i.i.d. closed form with every sibling tested against p, not the residual",
        vectors=False,
        first_tests=(f"{TREE_CONFORMANCE_TESTS}::"
                     "test_node_acceptance_matches_the_core_closed_forms",),
        scope="node_acceptance",
    ),
    mutant(
        "tree-acceptance-one-sided", TREE_CHECKS,
        "failed = drift_rejected(drift, variance, 1.0, critical, alpha_level / 2) or (",
        "failed = drift_rejected(min(drift, 0.0), variance, 1.0, critical, alpha_level / 2) or (",
        "the tree acceptance z tested one-sided: an engine accepting too often passes",
        vectors=False,
        first_tests=(f"{TREE_CONFORMANCE_TESTS}::"
                     "test_tree_acceptance_rejects_top_n_verified_with_q_without_uniforms",),
        scope="TreeAcceptanceState.result",
    ),
    mutant(
        "tree-law-pit-ignores-the-token", TREE_CHECKS,
        "cell.pit[ordering].add(pit_value(p, key, token, jitter))",
        "cell.pit[ordering].add(jitter)",
        "the tree law's PIT reads its jitter alone: every law passes",
        vectors=False,
        first_tests=(f"{TREE_CONFORMANCE_TESTS}::"
                     "test_tree_law_rejects_top_n_verified_with_q_without_uniforms",),
        scope="TreeLawState.update",
    ),
    mutant(
        "tree-rewind-allows-a-longer-target-cache", TREE_CHECKS,
        "if after is not None and after != end:",
        "if after is not None and after < end:",
        "the tree rewind check passes a target cache that kept rejected entries",
        vectors=False,
        first_tests=(f"{TREE_CONFORMANCE_TESTS}::"
                     "test_tree_rewind_fails_an_offset_off_the_invariant",),
        scope="_rewind_problems",
    ),
    # --- the draft-law, history and batch checks ----------------------------------------
    mutant(
        "draft-law-pit-at-the-midpoint", CONFORMANCE_DRAFT_LAW,
        "cell.pit.add(float(stats.pit_q[i]) + jitter * q_token)",
        "cell.pit.add(float(stats.pit_q[i]) + 0.5 * q_token)",
        "each draft's PIT at the middle of its interval, not randomised across it: a "
        "discrete q is then not uniform, and a correct drafter fails",
        vectors=False,
        first_tests=(
            "tests/test_conformance_drafter_history_batch.py::"
            "test_draft_law_passes_drafts_from_the_recorded_q_and_fails_a_temperature_applied_twice",
        ),
        scope="DraftLawState.update",
    ),
    mutant(
        "history-bets-everything", CONFORMANCE_HISTORY,
        "HISTORY_BET = 0.5", "HISTORY_BET = 1.0",
        "the whole wealth bet on p_blind: one token p_blind rules out sets it to 0 for good, "
        "and the bet never recovers",
        vectors=False,
        first_tests=(
            "tests/test_conformance_drafter_history_batch.py::"
            "test_the_history_bet_survives_a_token_the_blind_law_rules_out",
        ),
    ),
    mutant(
        "history-ratio-inverted", CONFORMANCE_HISTORY,
        "ratio = np.where(p > 0, p_blind / np.where(p > 0, p, 1.0), np.inf)",
        "ratio = np.where(p_blind > 0, p / np.where(p_blind > 0, p_blind, 1.0), np.inf)",
        "the likelihood ratio p / p_blind in place of p_blind / p: no longer a supermartingale "
        "under a correct engine, so Ville's bound is lost and correct traces fail",
        vectors=False,
        first_tests=(
            "tests/test_conformance_drafter_history_batch.py::"
            "test_the_history_bet_false_alarms_at_most_alpha_and_catches_the_blind_law",
        ),
        scope="_log_factor",
    ),
    mutant(
        "batch-ignores-shared-uniforms", CONFORMANCE_BATCH,
        "if other is not None and other is not entry:",
        "if other is not None and other is entry:",
        "a uniform counted as shared only when the same round reads it twice: a coin shared "
        "by the rows of a batch goes unseen",
        vectors=False,
        first_tests=(
            "tests/test_conformance_drafter_history_batch.py::"
            "test_the_batch_check_passes_independent_rows_and_names_a_shared_uniform",
        ),
        scope="_shared_uniforms",
    ),
    mutant(
        "batch-coin-term-of-one-request", CONFORMANCE_BATCH,
        "term = (float(acc_a) - rho_a) * (float(acc_b) - rho_b)",
        "term = (float(acc_a) - rho_a) * (float(acc_a) - rho_a)",
        "the shared-coin term squares one request's residual instead of pairing two: its "
        "mean is positive for independent rows, and a correct batch fails",
        vectors=False,
        first_tests=(
            "tests/test_conformance_drafter_history_batch.py::"
            "test_the_batch_check_passes_independent_rows_and_names_a_shared_uniform",
        ),
        scope="_pairs",
    ),
    mutant(
        "batch-step-may-repeat", CONFORMANCE_TRACE,
        "if state.batch_step is not None and step <= state.batch_step:",
        "if state.batch_step is not None and step < state.batch_step:",
        "a run's round read in the same batch step as its previous round: two rounds of one "
        "request cannot be verified by one forward",
        vectors=False,
        first_tests=(
            "tests/test_conformance_drafter_history_batch.py::"
            "test_the_batch_field_is_read_checked_and_refused_where_it_cannot_be",
        ),
        scope="_Reader._batch",
    ),
    # --- checking in pieces: merges that must equal one pass --------------------------
    mutant(
        "fresh-merge-misses-rereads-across-pieces", CONFORMANCE_FRESH,
        "shared = [value for value in other.values if value in self.values]",
        "shared = []",
        "a later piece's values are not looked up in the earlier piece's: a round that re-reads "
        "a uniform read before the cut goes unseen when the trace is checked in pieces",
        vectors=False,
        first_tests=(f"{PIECES_TESTS}::test_a_reread_across_two_pieces_is_counted",),
        scope="FreshState.merge",
    ),
    mutant(
        "pieces-resume-off-by-one", CONFORMANCE_CHECKS,
        "if span.entry != mine.exit:",
        "if span.entry != (mine.exit[0] + 1, mine.exit[1]):",
        "a piece's run expected to resume one round after the last round the earlier piece "
        "read, not at the next round it names: every honest cut is refused",
        vectors=False,
        first_tests=(f"{PIECES_TESTS}::test_pieces_merged_report_what_one_pass_reports",),
        scope="TraceChecker.merge",
    ),
    mutant(
        "exact-sum-drops-the-low-part", CONFORMANCE_EXACT,
        "if low:", "if False:",
        "a running sum that keeps only the rounded high part: the sum then depends on the "
        "order of its terms, and a merged piece's statistic on where the trace was cut",
        vectors=False,
        first_tests=(f"{PIECES_TESTS}::"
                     "test_an_exact_sum_does_not_depend_on_the_order_or_the_cut_of_its_terms",),
        scope="ExactSum.add",
    ),
    mutant(
        "law-pooled-over-settings", CONFORMANCE_LAW,
        "sampler_stratum(facts.round.run.target_sampler)", '"every setting"',
        "the law check pools the PIT values of every sampler setting: a temperature applied "
        "twice, too sharp at 0.7 and too flat at 1.3, cancels and passes",
        vectors=False,
        first_tests=(f"{LAW_STRATA_TESTS}::test_a_temperature_applied_twice_at_0_7_and_1_3_"
                     "passes_pooled_and_fails_by_setting",),
        scope="LawState.update",
    ),
    mutant(
        "draft-law-pooled-over-settings", CONFORMANCE_DRAFT_LAW,
        "sampler_stratum(round_.run.draft_sampler)", '"every setting"',
        "the draft-law check pools the drafts of every drafter setting: a drafter applying "
        "its temperature twice at 0.7 and 1.3 cancels and passes",
        vectors=False,
        first_tests=(f"{LAW_STRATA_TESTS}::test_a_temperature_applied_twice_at_0_7_and_1_3_"
                     "passes_pooled_and_fails_by_setting",),
        scope="DraftLawState.update",
    ),
    mutant(
        "law-strata-sum-misses-the-remainder", CONFORMANCE_LAW,
        "if sum(sizes[key] for key in rest) >= _MIN_LAW_TOKENS:",
        "if False:",
        "the stratified chi-square leaves out the settings too small for a stratum of their "
        "own, though they may be most of the trace",
        vectors=False,
        first_tests=(f"{LAW_STRATA_TESTS}::test_small_settings_are_tested_together",),
        scope="stratum_groups",
    ),
    mutant(
        "tree-law-pooled-over-settings", TREE_CHECKS,
        "sampler_stratum(round_.run.target_sampler)", '"every setting"',
        "the tree law check pools the PIT values of every sampler setting: a tree engine "
        "applying the temperature twice at 0.7 and 1.3 cancels and passes",
        vectors=False,
        first_tests=(f"{LAW_STRATA_TESTS}::test_a_tree_engine_applying_the_temperature_"
                     "twice_fails_the_tree_law_by_setting",),
        scope="TreeLawState.update",
    ),
    mutant(
        "tree-replay-calls-every-divergence-rounding", TREE_CHECKS,
        "    return draw_near(law, float(round_.sample_uniforms[len(round_.path)]),\n"
        "                      round_.next_token, window)",
        "    return True",
        "tree replay says every divergent round that keeps the spec's path is float32 "
        "summation order, a draw from another law included",
        vectors=False,
        first_tests=("tests/test_conformance_tree_replay_boundary.py::"
                     "test_a_draw_far_from_the_boundary_is_not_called_rounding",),
        scope="draw_near_boundary",
    ),
    mutant(
        "temperature-squared-model-is-p", CONFORMANCE_BUGS,
        "np.exp((logs - logs[support].max()) / temperature)",
        "np.exp(logs - logs[support].max())",
        "the power model of a temperature applied twice draws from p itself: every check "
        "reports no power against it",
        vectors=False,
        first_tests=(f"{LAW_STRATA_TESTS}::"
                     "test_the_temperature_squared_model_is_the_law_at_t_squared",),
        scope="_TemperatureSquared.drawn",
    ),
    mutant(
        "law-power-merge-keeps-the-later-piece", CONFORMANCE_LAW,
        "self.cdf = self.cdf + other.cdf", "self.cdf = other.cdf",
        "the power model's sums of a merged piece replace the earlier piece's: the powers of "
        "a trace checked in pieces are those of its last piece",
        vectors=False,
        first_tests=(f"{PIECES_TESTS}::test_pieces_merged_report_what_one_pass_reports",),
        scope="BinLaws.merge",
    ),
    mutant(
        "history-merge-restarts-the-wealth", CONFORMANCE_HISTORY,
        "shifted = self.log_wealth + value", "shifted = value",
        "a later piece's highs of the betting wealth are not lifted by the wealth before the "
        "cut: the supremum of a trace checked in pieces is understated",
        vectors=False,
        first_tests=(f"{PIECES_TESTS}::test_pieces_merged_report_what_one_pass_reports",),
        scope="HistoryState.merge",
    ),
    mutant(
        "replay-envelope-for-recorded-probabilities", "impl/specaccept/conformance/replay.py",
        "rebuilt = round_.target_logits is not None", "rebuilt = True",
        "the float32 envelope granted to probabilities the engine recorded as it used them: a "
        "draw off by a boundary of its own law is no longer a divergence",
        vectors=False,
        first_tests=("tests/test_conformance_envelope.py",),
        scope="_replay_round",
    ),
    mutant(
        "acceptance-normal-at-any-count", "impl/specaccept/conformance/acceptance.py",
        "if variance >= NORMAL_MIN_VARIANCE:", "if variance >= 0:",
        "the acceptance drift judged by its normal z however small its variance: a correct "
        "request that accepts one draft where the rule's probabilities sum to 0.002 fails",
        vectors=False,
        first_tests=("tests/test_conformance_small_counts.py",),
        scope="drift_rejected",
    ),
    mutant(
        "acceptance-bennett-without-span", "impl/specaccept/conformance/acceptance.py",
        "u = span * drift / variance", "u = drift / variance",
        "Bennett's bound with the increments' span left out: a kept length moves up to k, so "
        "a block trace's small-count drift is judged as if it moved 1",
        vectors=False,
        first_tests=("tests/test_conformance_small_counts.py",),
        scope="bennett_tail",
    ),
    mutant(
        "fresh-blind-within-a-round", CONFORMANCE_FRESH,
        "elif value in seen:", "elif False:",
        "a uniform counted as re-read only when a later round reads it: one coin shared by "
        "every test of a round passes",
        vectors=False,
        first_tests=("tests/test_conformance_fresh_within_round.py",),
        scope="FreshState.read",
    ),
    mutant(
        "fresh-merge-counts-within-round-rereads-twice", CONFORMANCE_FRESH,
        "self.rereads += other.rereads + len(shared)",
        "self.rereads += other.rereads + sum(other.values[v][2] for v in shared)",
        "a value shared across a cut counted once for every read of it in the later piece's "
        "first round, though that piece already counted all but one as re-reads",
        vectors=False,
        first_tests=("tests/test_conformance_fresh_within_round.py",),
        scope="FreshState.merge",
    ),
)
