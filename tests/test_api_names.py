"""The public API's names: verdicts named after the functions that return them, the old
names deprecated, and a model pair typed so that a missing drafter is caught early."""

from __future__ import annotations

import inspect
import typing

import pytest

import specaccept
from specaccept.core import acceptance, joint
from specaccept.shell.arguments import LanguageModel, Tokenizer


def test_each_verdict_is_named_after_its_function() -> None:
    tokenwise = inspect.signature(specaccept.verify_tokenwise).return_annotation
    blockwise = inspect.signature(specaccept.verify_blockwise).return_annotation
    assert (tokenwise, blockwise) == ("TokenwiseVerdict", "BlockwiseVerdict")
    assert "BlockVerdict" not in specaccept.__all__ and "JointVerdict" not in specaccept.__all__


@pytest.mark.parametrize(("module", "old", "new"), [
    (specaccept, "BlockVerdict", "TokenwiseVerdict"),
    (specaccept, "JointVerdict", "BlockwiseVerdict"),
    (acceptance, "BlockVerdict", "TokenwiseVerdict"),
    (joint, "JointVerdict", "BlockwiseVerdict"),
])
def test_an_old_verdict_name_still_works_and_warns(module: object, old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: use {new}"):
        alias = getattr(module, old)
    assert alias is getattr(module, new)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'NoSuchVerdict'"):
        _ = specaccept.NoSuchVerdict  # type: ignore[attr-defined]  # the point of the test


def test_a_model_pair_is_typed() -> None:
    hints = typing.get_type_hints(specaccept.ModelPair)
    assert hints["target"] is LanguageModel
    assert hints["drafter"] == LanguageModel | None
    assert hints["tokenizer"] == Tokenizer | None


def test_a_pair_without_a_drafter_is_refused_before_any_model_runs() -> None:
    pair = specaccept.ModelPair(target=lambda inputs, cache=None: inputs, drafter=None,
                                tokenizer=None, target_path=None, drafter_path=None)  # type: ignore[arg-type]  # a stand-in
    with pytest.raises(ValueError, match="no drafter"):
        pair.require_drafter()
    with pytest.raises(ValueError, match="no tokenizer"):
        pair.require_tokenizer()
    config = specaccept.SamplerConfig(temperature=0.0)
    with pytest.raises(TypeError, match=r"^drafter must be a model, got NoneType: .*"
                       r"target_only_generate"):
        # mypy --strict refuses the call (an optional drafter), and warns of an unused
        # ignore if it ever stops refusing it: the typing half of the check.
        specaccept.SpeculativeGenerator(pair.target, pair.drafter, config)  # type: ignore[arg-type]
