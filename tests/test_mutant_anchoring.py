"""Mutants are anchored on a function and a run of tokens, so formatting cannot strand them.

`.ci/anchoring.py` places each edit of the mutation gate's catalogue: the tests show that a
reformatted function still takes its mutant, that the same tokens in another function do not
count against uniqueness, and that a moved or vanished function fails the catalogue check.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

CI = Path(__file__).resolve().parents[1] / ".ci"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, CI / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


anchoring = _load("anchoring")

SOURCE = '''\
def residual(p, q):
    excess = max(p - q, 0.0)
    return excess


def other(p, q):
    excess = max(p - q, 0.0)
    return excess
'''

REFORMATTED = '''\
def residual(p, q):
    excess = max(
        p - q,  # what the drafter under-proposes
        0.0,
    )
    return excess


def other(p, q):
    excess = max(p - q, 0.0)
    return excess
'''


def test_an_edit_lands_in_its_function_only() -> None:
    mutated = anchoring.apply_edit(SOURCE, "residual", "max(p - q, 0.0)", "abs(p - q)")
    assert mutated.count("abs(p - q)") == 1
    assert mutated.index("abs(p - q)") < mutated.index("def other")


def test_a_reformatted_function_still_takes_its_edit() -> None:
    mutated = anchoring.apply_edit(REFORMATTED, "residual", "max(p - q, 0.0)", "abs(p - q)")
    assert "excess = abs(p - q)\n" in mutated
    compile(mutated, "reformatted", "exec")


def test_the_same_tokens_twice_in_the_module_are_ambiguous_without_a_scope() -> None:
    with pytest.raises(ValueError, match="occurs 2 times in <module>"):
        anchoring.apply_edit(SOURCE, anchoring.MODULE_SCOPE, "max(p - q, 0.0)", "abs(p - q)")


def test_a_moved_function_fails_naming_the_scope() -> None:
    with pytest.raises(ValueError, match="defines no function or class 'residual_distribution'"):
        anchoring.apply_edit(SOURCE, "residual_distribution", "max(p - q, 0.0)", "abs(p - q)")


def test_a_changed_expression_fails_as_gone() -> None:
    with pytest.raises(ValueError, match="is gone from residual"):
        anchoring.apply_edit(SOURCE, "residual", "max(q - p, 0.0)", "abs(p - q)")


def test_methods_and_nested_functions_are_named_by_qualified_name() -> None:
    source = ("class A:\n    def f(self):\n        def g():\n            return 1\n"
              "        return g\n")
    assert anchoring.enclosing_scope(source, source.index("return 1")) == "A.f.g"
    assert anchoring.enclosing_scope(source, source.index("return g")) == "A.f"
    mutated = anchoring.apply_edit(source, "A.f.g", "return 1", "return 2")
    assert "return 2" in mutated


def test_whitespace_the_original_carries_is_not_doubled() -> None:
    source = "def f():\n    x = 1\n    return x\n"
    mutated = anchoring.apply_edit(source, "f", "    x = 1\n", "    x = 2\n")
    assert mutated == "def f():\n    x = 2\n    return x\n"


def test_a_fragment_of_a_string_literal_is_matched_as_text_once_in_its_scope() -> None:
    source = ('def f(n):\n    raise ValueError(f"n must be >= 1, got {n}")\n\n\n'
              'def g(n):\n    raise ValueError(f"n must be >= 1, got {n}")\n')
    mutated = anchoring.apply_edit(source, "f", "must be >= 1, got", "must be >= 1; got")
    assert mutated.count("must be >= 1; got") == 1
    assert mutated.index("must be >= 1; got") < mutated.index("def g")
    with pytest.raises(ValueError, match="occurs 2 times in <module>"):
        anchoring.apply_edit(source, anchoring.MODULE_SCOPE, "must be >= 1, got", "x")
