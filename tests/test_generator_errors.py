"""The generator refuses bad input with errors that say what is wrong, before doing work.

Construction validates the models and the settings; `generate` validates its
arguments at its first step, before any prefill; a model that produces NaN
(or +inf) logits mid-run stops the run with `NonFiniteLogitsError`, a ValueError
that names the model and the output position those logits decide. (Non-trimmable
caches: test_generator_caches.)
"""

from __future__ import annotations

import re
from typing import Any

import mlx.core as mx
import pytest

from specaccept import SamplerConfig
from specaccept.shell.generator import NonFiniteLogitsError, SpeculativeGenerator
from specaccept.shell.target_only import target_only_generate
from synthetic_models import (
    LogitsFn,
    SyntheticLM,
    collect,
    constant_logits,
    cycle_logits,
    nan_after,
    never_agree,
    shifted_cycle_logits,
)

VOCAB = 6
GREEDY = SamplerConfig(temperature=0.0)
PROMPT = [2, 3]


def _pair() -> tuple[SyntheticLM, SyntheticLM]:
    return SyntheticLM(VOCAB, cycle_logits(VOCAB)), SyntheticLM(VOCAB, cycle_logits(VOCAB))


def test_a_vocabulary_mismatch_names_both_sizes() -> None:
    target, drafter = SyntheticLM(6, cycle_logits(6)), SyntheticLM(7, cycle_logits(7))
    with pytest.raises(ValueError, match=r"drafter vocabulary \(7\).*target's \(6\)"):
        SpeculativeGenerator(target, drafter, GREEDY)
    assert target.forward_calls == drafter.forward_calls == 0


def test_a_vocabulary_is_probed_when_a_model_declares_none() -> None:
    # No args.vocab_size: the generator asks the model (one forward, no cache).
    target, drafter = SyntheticLM(6, cycle_logits(6)), SyntheticLM(5, cycle_logits(5))
    drafter.args = None  # type: ignore[assignment]
    with pytest.raises(ValueError, match=r"\(5\).*\(6\)"):
        SpeculativeGenerator(target, drafter, GREEDY)


@pytest.mark.parametrize(
    ("settings", "pattern"),
    [
        ({"num_draft_tokens": 0}, r"num_draft_tokens must be an int in \[1, 4096\], got 0"),
        ({"num_draft_tokens": -3}, r"num_draft_tokens must be an int in \[1, 4096\], got -3"),
        ({"num_draft_tokens": True}, r"num_draft_tokens must be an int in \[1, 4096\], got True"),
        ({"num_draft_tokens": 2.0}, r"num_draft_tokens must be an int in \[1, 4096\], got 2\.0"),
        # A chain of k drafts is a tree of k nodes: bounded before a round is sized by k.
        ({"num_draft_tokens": 4097}, r"num_draft_tokens must be an int in \[1, 4096\], got 4097"),
        ({"num_draft_tokens": 10**11}, r"must be an int in \[1, 4096\], got 100000000000"),
        ({"rule": "bogus"}, r"rule must be one of .*got 'bogus'"),
        ({"rule": "greedy-argmax"}, r"rule must be one of .*got 'greedy-argmax'"),
    ],
)
def test_bad_settings_are_refused_at_construction(settings: dict[str, Any], pattern: str) -> None:
    target, drafter = _pair()
    with pytest.raises(ValueError, match=pattern):
        SpeculativeGenerator(target, drafter, GREEDY, **settings)
    assert target.forward_calls == drafter.forward_calls == 0


def test_a_config_that_is_not_a_sampler_config_is_a_type_error() -> None:
    target, drafter = _pair()
    with pytest.raises(TypeError, match="target_config must be a SamplerConfig"):
        SpeculativeGenerator(target, drafter, {"temperature": 0.0})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="draft_config must be a SamplerConfig"):
        SpeculativeGenerator(target, drafter, GREEDY, 0.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "seed", "error", "pattern"),
    [
        (PROMPT, -1, 0, ValueError, r"max_tokens must be >= 0, got -1"),
        (PROMPT, 4, -1, ValueError, r"seed must lie in \[0, 2\*\*64\), got -1"),
        (PROMPT, 4, 2**64, ValueError, r"seed must lie in \[0, 2\*\*64\)"),
        ([], 4, 0, ValueError, r"prompt must hold at least one token"),
        ([2, 6], 4, 0, ValueError, r"prompt\[1\] must lie in \[0, 6\), got 6"),
        ([-1], 4, 0, ValueError, r"prompt\[0\] must lie in \[0, 6\), got -1"),
        (PROMPT, 4.0, 0, TypeError, r"max_tokens must be an int"),
        (PROMPT, 4, True, TypeError, r"seed must be an int"),
        ([2, 3.0], 4, 0, TypeError, r"prompt\[1\] must be an int token id"),
    ],
)
def test_bad_run_arguments_are_refused_before_any_forward(
    prompt: list[Any], max_tokens: Any, seed: Any, error: type[Exception], pattern: str
) -> None:
    target, drafter = _pair()
    generator = SpeculativeGenerator(target, drafter, GREEDY)
    with pytest.raises(error, match=pattern):
        collect(generator.generate(prompt, max_tokens, seed=seed))
    assert target.forward_calls == drafter.forward_calls == 0
    with pytest.raises(error, match=pattern):
        list(target_only_generate(target, prompt, GREEDY, max_tokens, seed=seed))
    assert target.forward_calls == 0


# NaN at run time. `nan_after(inner, len(PROMPT) - 1 + n)` makes NaN every logits row
# that decides output position n or later (row j of the context predicts token j + 1).

NAN_FROM = 5


def _nan_target(inner: LogitsFn) -> SyntheticLM:
    return SyntheticLM(VOCAB, nan_after(inner, len(PROMPT) - 1 + NAN_FROM))


def _nan_run(which: str, k: int) -> tuple[list[int], NonFiniteLogitsError]:
    """Run the generator until the NaN stops it: the tokens it emitted, and the error."""
    if which == "target":
        target = _nan_target(cycle_logits(VOCAB))
        drafter = SyntheticLM(VOCAB, shifted_cycle_logits(VOCAB, never_agree))
    else:
        target = SyntheticLM(VOCAB, cycle_logits(VOCAB))
        drafter = _nan_target(shifted_cycle_logits(VOCAB, never_agree))
    generator = SpeculativeGenerator(target, drafter, GREEDY, num_draft_tokens=k)
    emitted: list[int] = []
    with pytest.raises(NonFiniteLogitsError) as raised:
        for block in generator.generate(PROMPT, 30):
            emitted += block
    return emitted, raised.value


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("which", ["target", "drafter"])
def test_nan_logits_stop_the_run_at_the_position_they_decide(which: str, k: int) -> None:
    emitted, error = _nan_run(which, k)
    assert isinstance(error, ValueError)
    message = str(error)
    pattern = rf"the {which} produced NaN(?: or \+inf)? logits at output position (\d+)"
    match = re.fullmatch(pattern, message)
    assert match, message
    # Named like target_only_generate names it: the first output position whose
    # deciding logits are NaN, not the start of the round that computed them.
    assert int(match.group(1)) == NAN_FROM
    # Every draft is rejected, so each round decides one position: NaN rows past it
    # (computed speculatively, deciding nothing) must not stop the run early, and no
    # token decided by NaN logits may be emitted.
    assert emitted == [(PROMPT[-1] + 1 + i) % VOCAB for i in range(NAN_FROM)]


def test_target_only_nan_error_names_the_exact_position() -> None:
    target = _nan_target(cycle_logits(VOCAB))
    emitted: list[int] = []
    with pytest.raises(NonFiniteLogitsError, match=rf"output position {NAN_FROM}$"):
        for token in target_only_generate(target, PROMPT, GREEDY, 30):
            emitted.append(token)
    assert len(emitted) == NAN_FROM


def _plus_inf_at(position: int) -> LogitsFn:
    inner = cycle_logits(VOCAB)

    def logits(context: mx.array, count: int) -> mx.array:
        rows = inner(context, count)
        length = context.shape[0]
        rows_at = mx.arange(length - count, length)[:, None] >= position
        return mx.where(rows_at & (mx.arange(VOCAB)[None, :] == 2), float("inf"), rows)

    return logits


def test_plus_infinite_logits_are_refused_too() -> None:
    target = SyntheticLM(VOCAB, _plus_inf_at(len(PROMPT) - 1 + 2))
    generator = SpeculativeGenerator(
        target, SyntheticLM(VOCAB, cycle_logits(VOCAB)), SamplerConfig(temperature=1.0),
        num_draft_tokens=2,
    )
    # +inf is outside the logits' domain (finite, or -inf for a masked token): left in, it
    # turns into NaN probabilities and the inverse-CDF draw would emit the last id.
    with pytest.raises(NonFiniteLogitsError, match=r"\+inf logits at output position 2$"):
        collect(generator.generate(PROMPT, 8))
    with pytest.raises(NonFiniteLogitsError, match=r"\+inf logits at output position 2$"):
        list(target_only_generate(target, PROMPT, SamplerConfig(temperature=1.0), 8))


def _all_masked_from(position: int) -> LogitsFn:
    inner = cycle_logits(VOCAB)

    def logits(context: mx.array, count: int) -> mx.array:
        rows = inner(context, count)
        length = context.shape[0]
        masked = mx.arange(length - count, length)[:, None] >= position
        return mx.where(masked, float("-inf"), rows)

    return logits


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_fully_masked_logits_row_is_refused(temperature: float) -> None:
    target = SyntheticLM(VOCAB, _all_masked_from(len(PROMPT) - 1 + 2))
    generator = SpeculativeGenerator(
        target, SyntheticLM(VOCAB, cycle_logits(VOCAB)), SamplerConfig(temperature=temperature),
        num_draft_tokens=2,
    )
    with pytest.raises(ValueError, match="output position 2"):
        collect(generator.generate(PROMPT, 8))


def _wider_than_declared() -> SyntheticLM:
    model = SyntheticLM(VOCAB + 2, cycle_logits(VOCAB + 2))
    model.args.vocab_size = VOCAB  # the config declares fewer tokens than the output layer has
    return model


def test_logits_wider_than_the_declared_vocabulary_are_named_as_such() -> None:
    pattern = rf"logits over {VOCAB + 2} tokens, but it declares a vocabulary of {VOCAB}"
    generator = SpeculativeGenerator(
        _wider_than_declared(), SyntheticLM(VOCAB, cycle_logits(VOCAB)), GREEDY
    )
    with pytest.raises(ValueError, match="the target produced " + pattern):
        collect(generator.generate(PROMPT, 8))
    generator = SpeculativeGenerator(
        SyntheticLM(VOCAB, cycle_logits(VOCAB)), _wider_than_declared(), GREEDY
    )
    with pytest.raises(ValueError, match="the drafter produced " + pattern):
        collect(generator.generate(PROMPT, 8))
    with pytest.raises(ValueError, match="the target produced " + pattern):
        list(target_only_generate(_wider_than_declared(), PROMPT, GREEDY, 8))


# Logits beyond the sampler's envelope (|logit| <= 2**64): -3e38 everywhere is finite, but the
# repetition penalty multiplies every seen negative logit by 2 and overflows all of them to
# -inf, so the row keeps no finite mass. Only the shell's flag, read at the round's one
# synchronisation, can see that; it stops the run at the first position.
OVERFLOWING = SamplerConfig(temperature=1.0, repetition_penalty=2.0)


def test_a_sampler_row_with_no_finite_mass_stops_the_run_naming_position_and_cause() -> None:
    every_token = list(range(VOCAB))
    target = SyntheticLM(VOCAB, constant_logits([-3e38] * VOCAB))
    generator = SpeculativeGenerator(
        target, SyntheticLM(VOCAB, cycle_logits(VOCAB)), OVERFLOWING, num_draft_tokens=2
    )
    pattern = r"the target's sampler left no finite probability mass at output position 0: "
    with pytest.raises(NonFiniteLogitsError, match=pattern + ".*overflowed float32"):
        collect(generator.generate(every_token, 8))
    with pytest.raises(NonFiniteLogitsError, match=pattern):
        list(target_only_generate(target, every_token, OVERFLOWING, 8))
    drafter = SyntheticLM(VOCAB, constant_logits([-3e38] * VOCAB))
    generator = SpeculativeGenerator(
        SyntheticLM(VOCAB, cycle_logits(VOCAB)), drafter, SamplerConfig(temperature=1.0),
        draft_config=OVERFLOWING, num_draft_tokens=2,
    )
    with pytest.raises(NonFiniteLogitsError, match="the drafter's sampler left no finite"):
        collect(generator.generate(every_token, 8))


@pytest.mark.parametrize(
    ("settings", "pattern"),
    [
        ({"eos_token_ids": 5}, r"eos_token_ids must be a collection of int token ids.*got int 5"),
        ({"eos_token_ids": None}, r"eos_token_ids must be a collection .*got NoneType"),
        ({"eos_token_ids": "5"}, r"eos_token_ids must be a collection .*got str"),
        ({"eos_token_ids": [1.0]}, r"eos_token_ids must hold int token ids, got 1\.0"),
    ],
)
def test_bad_eos_token_ids_are_named(settings: dict[str, Any], pattern: str) -> None:
    target, drafter = _pair()
    with pytest.raises(TypeError, match=pattern):
        SpeculativeGenerator(target, drafter, GREEDY, **settings)
    with pytest.raises(TypeError, match=pattern):
        list(target_only_generate(target, PROMPT, GREEDY, 4, **settings))


def test_a_missing_model_is_named() -> None:
    target, _ = _pair()
    with pytest.raises(TypeError, match=r"^drafter must be a model.*got NoneType"):
        SpeculativeGenerator(target, None, GREEDY)  # type: ignore[arg-type]  # the refusal
    with pytest.raises(TypeError, match=r"^target must be a model.*got NoneType"):
        SpeculativeGenerator(None, target, GREEDY)  # type: ignore[arg-type]  # the refusal
    with pytest.raises(TypeError, match=r"^target must be a model"):
        list(target_only_generate(None, PROMPT, GREEDY, 4))


def _entry_points() -> dict[str, Any]:
    """Each public way to start a run on a prompt: the chain and tree generators, the target
    alone. One guard (`arguments.check_prompt`) serves them all."""
    from specaccept.shell.tree_generator import TreeSpeculativeGenerator

    target, drafter = _pair()
    chain = SpeculativeGenerator(target, drafter, GREEDY)
    tree = TreeSpeculativeGenerator(target, drafter, GREEDY, width=2, depth=2)
    return {
        "chain": lambda prompt, n: collect(chain.generate(prompt, n)),
        "tree": lambda prompt, n: list(tree.generate(prompt, n)),
        "target-only": lambda prompt, n: list(target_only_generate(target, prompt, GREEDY, n)),
    }


@pytest.mark.parametrize("entry", ["chain", "tree", "target-only"])
@pytest.mark.parametrize(
    ("prompt", "shown"),
    [
        (None, "NoneType None"),
        ("ab", "str 'ab'"),
        (b"ab", "bytes b'ab'"),
        (5, "int 5"),
        ({2: 3}, r"dict \{2: 3\}"),
        (iter([2]), "list_iterator <list_iterator"),
        (mx.array([2, 3]), "array array"),
    ],
)
def test_a_prompt_that_is_no_sequence_of_ids_is_named(entry: str, prompt: Any, shown: str) -> None:
    """generate(None, 5) on the chain generator raised list()'s TypeError, naming nothing."""
    with pytest.raises(TypeError, match=rf"^prompt must be a sequence of token ids, got {shown}"):
        _entry_points()[entry](prompt, 5)


@pytest.mark.parametrize("entry", ["chain", "tree"])
def test_a_long_prompt_is_shown_cut(entry: str) -> None:
    with pytest.raises(TypeError, match=r"got str '(x){56}\.\.\.$"):
        _entry_points()[entry]("x" * 10_000, 5)


class _NotAModel:
    """Callable, declares no vocabulary: probing it is all the generator can do."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.layers: list[Any] = []

    def __call__(self, inputs: Any, cache: Any = None) -> Any:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.mark.parametrize("role", ["target", "drafter"])
@pytest.mark.parametrize(
    ("result", "words"),
    [
        (None, r"probing it raised AttributeError"),
        (KeyError("x"), r"probing it raised KeyError"),
        (mx.zeros((1, 6)), r"one token gave shape \[1, 6\]"),
        (mx.zeros((1, 1, 0)), r"one token gave shape \[1, 1, 0\]"),
    ],
)
def test_a_callable_that_is_no_model_is_named_by_both_generators(
    role: str, result: Any, words: str
) -> None:
    from specaccept.shell.tree_generator import TreeSpeculativeGenerator

    model: Any = _NotAModel(result)
    other = SyntheticLM(VOCAB, cycle_logits(VOCAB))
    target, drafter = (model, other) if role == "target" else (other, model)
    with pytest.raises(TypeError, match=rf"^{role} must be an mlx-lm model.*{words}"):
        SpeculativeGenerator(target, drafter, GREEDY)
    if role == "target":
        with pytest.raises(TypeError, match=rf"^target must be an mlx-lm model.*{words}"):
            list(target_only_generate(model, PROMPT, GREEDY, 4))
    with pytest.raises((TypeError, ValueError), match=rf"^{role} "):
        TreeSpeculativeGenerator(target, drafter, GREEDY)


@pytest.mark.parametrize(("step", "error"), [(0, ValueError), (-3, ValueError),
                                             (2.0, TypeError), (None, TypeError)])
def test_the_tree_generator_checks_its_prefill_step(step: Any, error: type[Exception]) -> None:
    """It never did: 0 raised range()'s ValueError mid-prefill."""
    from specaccept.shell.tree_generator import TreeSpeculativeGenerator

    target, drafter = _pair()
    tree = TreeSpeculativeGenerator(target, drafter, GREEDY, width=2, depth=2,
                                    prefill_step_size=step)
    with pytest.raises(error, match="prefill_step_size must be"):
        list(tree.generate(PROMPT, 4))
