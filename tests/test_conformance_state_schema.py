"""A saved conform state is read only by a kit whose state classes have the fields it was
written with: every change to those fields must bump `STATE_VERSION`, or an older state is
refused as malformed at best (vLLM's H100 states of one day's kit failed so on the next
day's, under the same version) and read with another meaning at worst."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from specaccept.conformance import pieces
from specaccept.conformance.pieces import STATE_VERSION, state_schema

SCHEMA_DIGESTS = {
    2: "a05fdceab4a3cb332022a6371c477c6fe3d778bc4e05f32b982266367c4fda4e",
    3: "0271d62228a8ec5353ce8f5c2aa94396647d6dc1b4b35a3ee08b4971bc2fe7b8",
}
"""Per state format version, the SHA-256 of its `state_schema` as sorted JSON. Changed the
fields of a state? Bump `STATE_VERSION` and add the new version's digest here; never edit
an old version's."""


def schema_digest(schema: dict[str, list[str]]) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()


def test_the_state_version_names_the_fields_its_states_hold() -> None:
    digest = schema_digest(state_schema())
    assert SCHEMA_DIGESTS.get(STATE_VERSION) == digest, (
        f"the saved state's fields changed under format version {STATE_VERSION}: bump "
        f"STATE_VERSION in specaccept/conformance/pieces.py and record {digest!r} for it")
    assert len(set(SCHEMA_DIGESTS.values())) == len(SCHEMA_DIGESTS), "two versions, one schema"


def test_a_field_added_to_a_state_changes_the_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    fields = [(f.name, f.type, f) for f in dataclasses.fields(pieces._STATES["RunSpan"])]
    grown = dataclasses.make_dataclass("RunSpan", [*fields, ("added", "int", 0)])
    before = schema_digest(state_schema())
    monkeypatch.setitem(pieces._STATES, "RunSpan", grown)
    assert schema_digest(state_schema()) != before


def test_a_state_of_another_version_is_refused_by_its_version(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": pieces.STATE_FORMAT, "version": STATE_VERSION - 1,
                                "state": {}}))
    with pytest.raises(ValueError, match=f"format version {STATE_VERSION - 1}; this "
                                         f"specaccept reads version {STATE_VERSION}"):
        pieces.load_state(path)
