"""Exact running sums and the JSON form of the checks' states.

A check's state must merge exactly: the state of two pieces of a trace merged equals the
state of their concatenation, bit for bit, so that a verdict does not depend on how the
trace was cut. Counts are integers; a sum of floats is kept as `ExactSum`, the
non-overlapping partials of Shewchuk's algorithm (the one behind `math.fsum`), whose
value is the exact sum rounded once, whatever the order the terms arrived in.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from typing import Any, Protocol, Self, TypeVar, cast

import numpy as np

__all__ = ["ExactSum", "from_json_value", "merge_notes", "merge_per_key", "to_json_value"]


class ExactSum:
    """A sum of floats held exactly; `value` rounds it once.

    >>> ExactSum([1e16, 1.0, -1e16]).value, sum([1e16, 1.0, -1e16])
    (1.0, 0.0)
    >>> a, b = ExactSum([0.1, 1e20]), ExactSum([0.2, -1e20])
    >>> a.merge(b)
    >>> a.value == ExactSum([0.1, 0.2]).value
    True
    """

    __slots__ = ("partials",)

    def __init__(self, partials: Iterable[float] = ()) -> None:
        self.partials: list[float] = []
        for x in partials:
            self.add(x)

    def add(self, x: float) -> None:
        """Add one finite term (Shewchuk's grow-expansion)."""
        x = float(x)
        if not math.isfinite(x):
            raise ValueError(f"an exact sum takes finite terms, got {x!r}")
        kept = 0
        for y in self.partials:
            if abs(x) < abs(y):
                x, y = y, x
            high = x + y
            low = y - (high - x)
            if low:
                self.partials[kept] = low
                kept += 1
            x = high
        del self.partials[kept:]
        self.partials.append(x)

    def add_all(self, values: Iterable[float] | np.ndarray) -> None:
        """Add every term; an array's terms are added in index order (the result does not
        depend on it)."""
        items = values.tolist() if isinstance(values, np.ndarray) else values
        for x in items:
            self.add(x)

    def merge(self, other: ExactSum) -> None:
        """Add another sum's terms."""
        self.add_all(list(other.partials))

    @property
    def value(self) -> float:
        """The exact sum, rounded once to the nearest float."""
        return math.fsum(self.partials)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExactSum) and self.value == other.value and (
            math.fsum([*self.partials, *(-p for p in other.partials)]) == 0.0)

    def __repr__(self) -> str:
        return f"ExactSum({self.value!r})"


def to_json_value(value: Any) -> Any:
    """A state's field as JSON: exact sums as their partials, arrays as lists, sets and
    tuples as lists, dicts with non-string keys as lists of pairs (each tagged)."""
    if isinstance(value, ExactSum):
        return {"exact_sum": list(value.partials)}
    if isinstance(value, np.generic):  # a NumPy scalar: its Python value
        value = value.item()
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((to_json_value(v) for v in value), key=repr)}
    if isinstance(value, tuple):
        return {"tuple": [to_json_value(v) for v in value]}
    if isinstance(value, dict):
        return {"items": [[to_json_value(k), to_json_value(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [to_json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    to_json = getattr(value, "to_json", None)
    if to_json is not None:
        return {"state": type(value).__name__, "fields": to_json()}
    raise TypeError(f"no JSON form for a {type(value).__name__}")


def from_json_value(value: Any, states: dict[str, Any]) -> Any:
    """The inverse of `to_json_value`; `states` maps a state's class name to its class."""
    if isinstance(value, list):
        return [from_json_value(v, states) for v in value]
    if not isinstance(value, dict):
        return value
    if "exact_sum" in value:
        return ExactSum(value["exact_sum"])
    if "array" in value:
        return np.array(value["array"], dtype=value["dtype"])
    if "set" in value:
        return {_hashable(from_json_value(v, states)) for v in value["set"]}
    if "tuple" in value:
        return tuple(from_json_value(v, states) for v in value["tuple"])
    if "items" in value:
        return {_hashable(from_json_value(k, states)): from_json_value(v, states)
                for k, v in value["items"]}
    if "float" in value:
        return float(value["float"])
    if "state" in value:
        cls = states.get(value["state"])
        if cls is None:
            raise ValueError(f"unknown state {value['state']!r}")
        return cls.from_json(value["fields"], states)
    raise ValueError(f"not a state value: keys {sorted(value)[:4]}")


def _hashable(value: Any) -> Any:
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value


class State:
    """A check's state: a dataclass whose fields `to_json_value` writes; subclasses add
    `update`, `merge` and `result`."""

    def to_json(self) -> dict[str, Any]:
        """The state's fields as JSON values."""
        import dataclasses

        fields: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(cast(Any, self))
        return {f.name: to_json_value(getattr(self, f.name)) for f in fields}

    @classmethod
    def from_json(cls, data: dict[str, Any], states: dict[str, Any]) -> Any:
        """A state from `to_json`'s output."""
        return cls(**{key: from_json_value(value, states) for key, value in data.items()})


class LogSurvival:
    """The product of (1 - d) over terms d in [0, 1], kept as an exact sum of logarithms and
    a count of certain terms (d = 1), so that it merges exactly."""

    __slots__ = ("certain", "logs")

    def __init__(self) -> None:
        self.logs = ExactSum()
        self.certain = 0

    def add(self, d: float) -> None:
        d = min(1.0, max(0.0, float(d)))
        if d >= 1.0:
            self.certain += 1
        elif d > 0.0:
            self.logs.add(math.log1p(-d))

    def merge(self, other: LogSurvival) -> None:
        self.logs.merge(other.logs)
        self.certain += other.certain

    def scaled(self, factor: float) -> float:
        """The product over a trace of which these terms are a `1 / factor` sample."""
        if self.certain:
            return 0.0
        return math.exp(self.logs.value * factor)

    def to_json(self) -> dict[str, Any]:
        return {"logs": to_json_value(self.logs), "certain": self.certain}

    @classmethod
    def from_json(cls, data: dict[str, Any], states: dict[str, Any]) -> LogSurvival:
        out = cls()
        out.logs = from_json_value(data["logs"], states)
        out.certain = int(data["certain"])
        return out


class _Mergeable(Protocol):
    def merge(self, other: Self, /) -> None: ...


_Key = TypeVar("_Key", bound=Hashable)
_Part = TypeVar("_Part", bound=_Mergeable)


def merge_notes(mine: dict[str, set[str]], other: dict[str, set[str]]) -> None:
    """Add a later piece's notes, key by key (per bug: why it does not apply)."""
    for key, notes in other.items():
        mine.setdefault(key, set()).update(notes)


def merge_per_key(mine: dict[_Key, _Part], other: dict[_Key, _Part]) -> None:
    """Merge a later piece's per-key states (per bug, per run) into these: a key both pieces
    hold merges, a key only the later one holds is taken as it is."""
    for key, part in other.items():
        if key in mine:
            mine[key].merge(part)
        else:
            mine[key] = part
