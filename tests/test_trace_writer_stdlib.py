"""The standard-library trace writer, `impl/specaccept_trace.py`, as an engine would use it.

It must run where MLX, NumPy and specaccept itself cannot be imported (an engine vendors the
one file into a PyTorch process), so the traces below are written in a subprocess whose
imports of those packages fail; then read back here by this library's reader, and checked
against the JSON schema. Whatever the writer refuses, its error names the argument and the
value.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import math
import os
import re
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import specaccept_trace as st
from specaccept.conformance import PROBABILITY_SUM_TOLERANCE, TraceError, read_trace
from specaccept.conformance.trace import MAX_BLOCK_ENTRIES, MAX_VOCAB_SIZE, sampler_from_json
from specaccept.core.acceptance import AcceptanceRule
from specaccept.core.sampler_config import SamplerConfig
from specaccept.core.tree import MAX_TREE_NODES
from specaccept.shell.conformance import encode_rows

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "spec" / "trace_format.schema.json").read_text("utf-8"))
P = [[0.5, 0.25, 0.125, 0.125], [0.5, 0.25, 0.125, 0.125], [0.25, 0.25, 0.25, 0.25]]
Q = [[0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]]
LOGITS = [[0.0, 0.5, 2.0, -1.0], [0.1, 1.0, 0.0, 0.0], [1.5, -0.25, 0.75, 0.0]]

# Run in a subprocess: the packages an engine's process may lack are made unimportable
# before the writer is imported, so that a stray import of any of them fails the test.
WRITE_WITHOUT_MLX = r'''
import sys

class Unimportable:
    blocked = ("mlx", "numpy", "specaccept")

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.blocked:
            raise ImportError(f"{name} is unimportable in this test")
        return None

sys.meta_path.insert(0, Unimportable())
try:
    import mlx.core
except ImportError:
    pass
else:
    raise SystemExit("the import block failed: mlx imported")

import specaccept_trace as st

v1_path, v2_path = sys.argv[1], sys.argv[2]
P = [[0.5, 0.25, 0.125, 0.125], [0.5, 0.25, 0.125, 0.125], [0.25, 0.25, 0.25, 0.25]]
Q = [[0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]]
LOGITS = [[0.0, 0.5, 2.0, -1.0], [0.1, 1.0, 0.0, 0.0], [1.5, -0.25, 0.75, 0.0]]

with st.TraceWriter(v1_path, vocab_size=4, version=1, engine="stdlib test") as trace:
    run = trace.start_run(prompt=[0, 1], target_sampler={"temperature": 0.7,
                                                         "repetition_penalty": 1.3},
                          draft_sampler={"temperature": 0.5})
    run.write_round(rule="stochastic", draft_tokens=[0, 3], emitted=[0, 0],
                    target=st.probs_block(P[:2]), draft=st.probs_block(Q),
                    uniforms=[[0.25, 0.5], [0.93, 0.125], [0.0, 0.75]],
                    cache={"target_before": 1, "draft_before": 1, "draft_fed": 1,
                           "target_after": 3, "draft_after": 3})
    run.write_round(rule="sampler-match", draft_tokens=[2, 1], emitted=[2, 1, 0],
                    target=st.logits_block(LOGITS),
                    draft=st.b64_block(LOGITS[:2], rows=2, kind="logits", dtype="bfloat16"))
    run.write_round(rule="block", draft_tokens=[1], emitted=[1, 2],
                    target=st.b64_block(LOGITS[:2], rows=2, kind="logits", dtype="float16"),
                    draft=st.sparse_block([{0: 0.5, 1: 0.5}]))
    run.write_round(rule="greedy-argmax", draft_tokens=[3, 3], emitted=[3],
                    target=st.b64_block(P[:1], rows=1), stopped=True, num_accepted=1)

with st.TraceWriter(v2_path, vocab_size=4, engine="stdlib test",
                    extra={"host": "test"}) as trace:
    a = trace.start_run("a", prompt=[0, 1], target_sampler={"repetition_penalty": 1.3})
    b = trace.start_run("b", prompt_length=3, extra={"seed": 17})
    a.write_round(rule="sampler-match", draft_tokens=[2], emitted=[2, 1],
                  target=st.logits_block(LOGITS[:2]), uniforms=[[None, 0.62], [None, 0.45]])
    b.write_round(rule="stochastic", draft_tokens=[0, 3], emitted=[0, 0],
                  target=st.probs_block(P[:2]), draft=st.probs_block(Q),
                  uniforms=[[0.31, None], [0.93, None], [None, None]],
                  cache={"target_before": 0, "target_fed": 5, "draft_before": 0,
                         "draft_fed": 3, "target_after": 4, "draft_after": 4,
                         "target_rewind": "eager", "draft_rewind": "lazy"},
                  extra={"verify_ms": 3.2})
    a.write_round(rule="sampler-match", draft_tokens=[], emitted=[3],
                  target=st.logits_block(LOGITS[:1]))
    b.write_round(rule="block", draft_tokens=[0], emitted=[0],
                  target=st.probs_block(P[:1]), draft=st.probs_block(Q[:1]), stopped=True)

loaded = sorted(name.split(".")[0] for name in sys.modules)
assert not {"mlx", "numpy", "specaccept"} & set(loaded), loaded
'''


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("stdlib-traces")
    v1, v2 = folder / "v1.jsonl.gz", folder / "v2.jsonl"
    result = subprocess.run(
        [sys.executable, "-c", WRITE_WITHOUT_MLX, str(v1), str(v2)], capture_output=True,
        text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT / "impl")},
    )
    assert result.returncode == 0, result.stderr
    return v1, v2


def test_it_writes_in_a_process_that_cannot_import_mlx(written: tuple[Path, Path]) -> None:
    v1, v2 = written
    with gzip.open(v1, "rt", encoding="utf-8") as stream:
        assert len(stream.read().splitlines()) == 5
    assert len(v2.read_text("utf-8").splitlines()) == 7


def test_its_version_1_trace_is_read_by_the_reader(written: tuple[Path, Path]) -> None:
    trace = read_trace(written[0])
    (run,) = trace.runs.values()
    assert trace.truncated is None and run.prompt == [0, 1]
    assert run.target_sampler == SamplerConfig(temperature=0.7, repetition_penalty=1.3)
    assert run.draft_sampler == SamplerConfig(temperature=0.5)
    first, second, third, fourth = trace.rounds
    assert (first.rule, first.num_accepted, first.position) == (AcceptanceRule.STOCHASTIC, 1, 0)
    np.testing.assert_array_equal(first.target_rows, np.array(P[:2], dtype=np.float32))
    assert first.uniforms is not None and first.uniforms.tolist() == [
        [0.25, 0.5], [np.float32(0.93), 0.125], [0.0, 0.75]]
    assert first.cache == {"target_before": 1, "draft_before": 1, "draft_fed": 1,
                           "target_after": 3, "draft_after": 3, "target_fed": 3}  # k + 1
    assert (second.rule, second.position, second.num_accepted) == (
        AcceptanceRule.SAMPLER_MATCH, 2, 2)
    assert second.target_logits is not None
    np.testing.assert_array_equal(second.target_logits, np.array(LOGITS, dtype=np.float32))
    assert (third.rule, third.position, third.k) == (AcceptanceRule.BLOCK, 5, 1)
    assert third.draft_rows is not None and third.draft_rows.tolist() == [[0.5, 0.5, 0.0, 0.0]]
    assert fourth.stopped and fourth.num_accepted == 1 and fourth.emitted == [3]


def test_its_base64_rows_are_the_librarys_bytes() -> None:
    for dtype in ("float32", "float16", "bfloat16"):
        ours = st.b64_block(LOGITS, rows=3, kind="logits", dtype=dtype)
        theirs = encode_rows(np.array(LOGITS, dtype=np.float32), kind="logits",
                             encoding="b64", dtype=dtype)
        assert ours == theirs, dtype
    raw = np.array(P, dtype="<f4").tobytes()
    assert st.b64_block(raw, rows=3) == encode_rows(np.array(P, dtype=np.float32),
                                                    encoding="b64")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def test_its_version_2_trace_follows_the_json_schema(written: tuple[Path, Path]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    records = _lines(written[1])
    for record in records:
        validator.validate(record)
    header, *body = records
    assert header == {"format": "specaccept-trace", "version": 2, "vocab_size": 4,
                      "engine": "stdlib test", "extra": {"host": "test"}}
    assert [r.get("record", r.get("run")) for r in body] == ["run", "run", "a", "b", "a", "b"]
    rounds = [r for r in body if "record" not in r]
    assert [(r["run"], r["round"], r["position"]) for r in rounds] == [
        ("a", 0, 0), ("b", 0, 0), ("a", 1, 2), ("b", 1, 2)]
    assert rounds[1]["uniforms"] == [[0.31, None], [0.93, None], [None, None]]
    assert rounds[1]["cache"]["draft_rewind"] == "lazy"


def test_the_schema_tells_the_kinds_of_line_apart(written: tuple[Path, Path]) -> None:
    # One definition per kind of line, so that a version 2 field on a version 1 round is
    # refused by the line's own definition, not accepted by another's.
    jsonschema = pytest.importorskip("jsonschema")
    kinds = [entry["$ref"].rsplit("/", 1)[1] for entry in SCHEMA["oneOf"]]
    validators = {kind: jsonschema.Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{kind}"})
                  for kind in kinds}
    with gzip.open(written[0], "rt", encoding="utf-8") as stream:
        version_1 = [json.loads(line) for line in stream]
    version_2 = _lines(written[1])
    expected = (["header"] + ["round"] * 4, ["header_v2", "run", "run"] + ["round_v2"] * 4)
    for records, kinds_expected in zip((version_1, version_2), expected, strict=True):
        for record, kind in zip(records, kinds_expected, strict=True):
            assert [k for k, v in validators.items() if v.is_valid(record)] == [kind]
    v1_round = {**version_1[1], "extra": {}}
    assert not any(v.is_valid(v1_round) for v in validators.values())


def _example_lines(page: str) -> list[dict[str, Any]]:
    """The JSON records of a page's ```json blocks; a record's continuation lines are indented."""
    records: list[str] = []
    for block in re.findall(r"```json\n(.*?)```", page, re.DOTALL):
        for line in block.splitlines():
            if line.startswith("{"):
                records.append(line)
            else:
                records[-1] += line
    return [json.loads(record) for record in records]


def test_the_format_pages_examples_follow_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    examples = _example_lines((ROOT / "spec" / "trace_examples.md").read_text("utf-8"))
    assert [r.get("version", r.get("record", r.get("run", "round"))) for r in examples] == [
        1, "round", 2, "run", "run", "a", "b", 2, "run", "run", "r0", "r1", 2, "run",
        "tree-round"]
    for record in examples:
        validator.validate(record)


def test_its_version_2_trace_is_read_by_the_reader(written: tuple[Path, Path]) -> None:
    trace = read_trace(written[1])
    assert (trace.version, list(trace.runs)) == (2, ["a", "b"])
    assert trace.runs["b"].prompt_length == 3
    assert trace.runs["a"].target_sampler == SamplerConfig(repetition_penalty=1.3)
    first_a, first_b, second_a, second_b = trace.rounds
    assert [r.run.id for r in trace.rounds] == ["a", "b", "a", "b"]
    assert (second_a.index, second_a.position, second_b.index, second_b.position) == (1, 2, 1, 2)
    assert first_b.uniforms is not None and np.isnan(first_b.uniforms[:, 1]).all()
    assert first_b.cache is not None and first_b.cache["target_fed"] == 5
    assert (first_b.target_rewind, first_b.draft_rewind) == ("eager", "lazy")
    assert first_a.cache is None and second_b.stopped


def test_a_crash_leaves_a_readable_prefix(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    trace = st.TraceWriter(path, vocab_size=4, version=1)
    run = trace.start_run(prompt=[0])
    run.write_round(rule="stochastic", draft_tokens=[0], emitted=[0, 1],
                    target=st.probs_block(P[:2]), draft=st.probs_block(Q[:1]))
    assert len(read_trace(path).rounds) == 1  # before close(): every line was flushed
    trace.close()


def test_it_writes_to_a_stream_and_takes_an_enum_rule() -> None:
    stream = io.StringIO()
    trace = st.TraceWriter(stream, vocab_size=4)
    trace.start_run().write_round(rule=AcceptanceRule.GREEDY_ARGMAX, draft_tokens=[],
                                  emitted=[0], target={"probs": np.array(P[:1])})
    trace.close()
    *_, round_ = (json.loads(line) for line in stream.getvalue().splitlines())
    assert round_["rule"] == "greedy-argmax" and round_["run"] == "0"
    assert round_["target"] == {"probs": [P[0]]}  # NumPy scalars written as JSON numbers


def test_check_values_off_skips_the_numbers_but_not_the_structure() -> None:
    run = st.TraceWriter(io.StringIO(), vocab_size=4, check_values=False).start_run()
    unnormalised = st.probs_block([[0.5, 0.5, 0.5, 0.5]])
    run.write_round(rule="greedy-argmax", draft_tokens=[], emitted=[0], target=unnormalised)
    with pytest.raises(st.TraceWriteError, match=r"target\['probs'\]\[0\] must hold"):
        run.write_round(rule="greedy-argmax", draft_tokens=[], emitted=[0],
                        target=st.probs_block([[1.0]]))


def test_its_constants_are_the_readers() -> None:
    assert st.PROBABILITY_SUM_TOLERANCE == PROBABILITY_SUM_TOLERANCE
    assert (st.MAX_BLOCK_ENTRIES, st.MAX_VOCAB_SIZE) == (MAX_BLOCK_ENTRIES, MAX_VOCAB_SIZE)
    assert st.MAX_TREE_NODES == MAX_TREE_NODES
    assert set(st.RULE_IDS) == {rule.value for rule in AcceptanceRule}
    assert dict(st.SAMPLER_DEFAULTS) == dataclasses.asdict(SamplerConfig())


def test_it_is_installed_as_a_top_level_module() -> None:
    project = (ROOT / "pyproject.toml").read_text("utf-8")
    modules = re.search(r"^only-include = \[(.*)\]$", project, re.MULTILINE)
    assert modules is not None and '"impl/specaccept_trace.py"' in modules.group(1)


SAMPLER_EDGES = [
    ("temperature", 0.0), ("temperature", 2.0**-126), ("temperature", 2.0**-127),
    ("temperature", -1.0), ("temperature", 3.5e38), ("temperature", True), ("temperature", "1"),
    ("top_k", 0), ("top_k", -1), ("top_k", 2**31 - 1), ("top_k", 2**31), ("top_k", 2.0),
    ("top_p", 0.0), ("top_p", 1.0), ("top_p", 1.5), ("min_p", 1.0), ("min_p", -0.1),
    ("repetition_penalty", 2.0**-32), ("repetition_penalty", 2.0**-33),
    ("repetition_penalty", 2.0**32), ("repetition_penalty", 2.0**33),
    ("repetition_context_size", 0), ("repetition_context_size", 1),
    ("frequency_penalty", -(2.0**64)), ("frequency_penalty", 2.0**65),
    ("presence_penalty", 1.5), ("dry_multiplier", 0.0), ("dry_multiplier", 1e-40),
    ("dry_multiplier", 0.8), ("dry_base", 0.5), ("dry_base", 1.0), ("dry_allowed_length", 0),
    ("dry_penalty_last_n", -1), ("dry_penalty_last_n", -2), ("dry_sequence_breakers", [0, 5]),
    ("dry_sequence_breakers", [-1]), ("dry_sequence_breakers", [2**31]),
    ("xtc_probability", 1.0), ("xtc_probability", 1.1), ("xtc_threshold", -0.5),
    ("logit_bias", {3: -2.5}), ("logit_bias", {"3": 1.0}), ("logit_bias", {-1: 1.0}),
    ("logit_bias", {3: 2.0**65}), ("logit_bias", {3: math.nan}), ("top_k", math.inf),
]


@pytest.mark.parametrize(("field", "value"), SAMPLER_EDGES)
def test_it_accepts_a_sampler_exactly_when_the_reader_does(field: str, value: Any) -> None:
    trace = st.TraceWriter(io.StringIO(), vocab_size=4)
    try:
        trace.start_run(target_sampler={field: value})
        written_ok = True
    except st.TraceWriteError as error:
        assert field in str(error)
        written_ok = False
    as_read = json.loads(json.dumps({field: value}))  # what a reader of the line would see
    try:
        sampler_from_json(as_read, 1, "target_sampler")
        read_ok = True
    except TraceError:
        read_ok = False
    assert written_ok == read_ok, (field, value)


@pytest.mark.parametrize(
    "sampler",
    [{}, {"temperature": 0.3}, {"repetition_penalty": 1.1}, {"frequency_penalty": 0.5},
     {"presence_penalty": -0.5}, {"dry_multiplier": 0.8}, {"dry_multiplier": 0.8,
                                                         "dry_penalty_last_n": 0}],
)
def test_logits_for_a_sampler_that_reads_the_history_need_the_prompt(
    sampler: dict[str, Any]
) -> None:
    run = st.TraceWriter(io.StringIO(), vocab_size=4).start_run(prompt_length=2,
                                                                target_sampler=sampler)
    needs_prompt = SamplerConfig(**sampler).uses_history
    try:
        run.write_round(rule="stochastic", draft_tokens=[], emitted=[0],
                        target=st.logits_block(LOGITS[:1]))
        refused = False
    except st.TraceWriteError as error:
        assert "prompt" in str(error)
        refused = True
    assert refused == needs_prompt


def _round(**change: Any) -> Callable[[st.RunWriter], None]:
    arguments: dict[str, Any] = {
        "rule": "stochastic", "draft_tokens": [0, 3], "emitted": [0, 0],
        "target": st.probs_block(P[:2]), "draft": st.probs_block(Q),
    }
    arguments.update(change)
    return lambda run: run.write_round(**arguments)


def _b64(values: list[float], dtype: str = "<f") -> str:
    import base64

    return base64.b64encode(struct.pack(f"{dtype[0]}{len(values)}{dtype[1]}", *values)).decode()


BAD_ROUNDS = [
    (_round(rule=""), "rule", "''"),
    (_round(draft_tokens=[0, 4]), "draft_tokens[1]", "4"),
    (_round(draft_tokens=[0, True]), "draft_tokens[1]", "True"),
    (_round(emitted=[]), "emitted", "0"),
    (_round(emitted=[0, 0, 0, 0]), "emitted", "4"),
    (_round(emitted=[1, 0]), "emitted", "[1, 0]"),
    (_round(num_accepted=0), "num_accepted", "0"),
    (_round(target={"probs": [[0.5, 0.5, 0.0]] * 2}), "target['probs'][0]", "3"),
    (_round(target=st.probs_block([[0.5, 0.25, 0.125, 0.0]] * 2)), "target['probs'][0]",
     "0.875"),
    (_round(target=st.probs_block([[1.5, -0.5, 0.0, 0.0]] * 2)), "target['probs'][0][0]", "1.5"),
    (_round(target={"probs": [[0.5, "0.5", 0.0, 0.0]] * 2}), "target['probs'][0][1]", "'0.5'"),
    (_round(target=st.probs_block(P[:1])), "target", "1"),
    (_round(target={"probs": P[:2], "logits": P[:2]}), "target", "['logits', 'probs']"),
    (_round(target={"probs_b64": _b64([0.25] * 4), "rows": 2}), "target['probs_b64']", "16"),
    (_round(target={"probs_b64": "not base64!", "rows": 2}), "target['probs_b64']",
     "'not base64!'"),
    (_round(target={"logits_b64": _b64([0.0] * 4 + [math.nan] * 4), "rows": 2}),
     "target['logits_b64'] row 1", "NaN"),
    (_round(target={"logits_b64": _b64([0.0] * 4 + [-math.inf] * 4), "rows": 2}),
     "target['logits_b64'] row 1", "-inf"),
    (_round(target={"probs_b64": _b64([0.25] * 8, "<e"), "rows": 2, "dtype": "float16"}),
     "target['dtype']", "'float16'"),
    (_round(target=st.logits_block(LOGITS[:2])), "target holds logits", "target_sampler"),
    (_round(target={"sparse_probs": [{"ids": [0, 0], "values": [0.5, 0.5]}] * 2}),
     "target['sparse_probs'][0]['ids']", "[0, 0]"),
    (_round(draft_tokens=[], emitted=[0], target=st.probs_block(P[:1])), "draft", "probs"),
    (_round(uniforms=[[0.5, 0.5]] * 2), "uniforms", "[[0.5, 0.5], [0.5, 0.5]]"),
    (_round(uniforms=[[0.5, 0.5], [0.5, 1.0], [0.5, 0.5]]), "uniforms[1][1]", "1.0"),
    (_round(uniforms=[[0.5, 0.5], [0.5, 0.99999999], [0.5, 0.5]]), "uniforms[1][1]",
     "0.99999999"),
    (_round(uniforms=[[0.5, None], [0.5, 0.5], [0.5, 0.5]]), "uniforms[0][1]", "None"),
    (_round(cache={"target_after": 3}), "cache", "target_before"),
    (_round(cache={"target_before": 1, "draft_before": 1}), "cache", "draft_before"),
    (_round(cache={"target_before": -1}), "cache['target_before']", "-1"),
    (_round(cache={"target_before": 1, "target_fed": 3}), "cache", "'target_fed'"),
    (_round(cache={"target_before": 1, "draft_rewind": "lazy"}), "cache", "'draft_rewind'"),
    (_round(extra={"note": 1}), "extra", "{'note': 1}"),
    (_round(stopped=1), "stopped", "1"),
]


@pytest.mark.parametrize(("write", "argument", "value"), BAD_ROUNDS)
def test_a_bad_version_1_round_names_the_argument_and_the_value(
    write: Callable[[st.RunWriter], None], argument: str, value: str
) -> None:
    stream = io.StringIO()
    run = st.TraceWriter(stream, vocab_size=4, version=1).start_run(prompt=[0, 1])
    with pytest.raises(st.TraceWriteError) as raised:
        write(run)
    assert argument in str(raised.value) and value in str(raised.value), str(raised.value)
    assert stream.getvalue().count("\n") == 1 and run.rounds == 0  # nothing was written


BAD_V2_ROUNDS = [
    (_round(uniforms=[[0.5, "x"], [0.5, None], [None, None]]), "uniforms[0][1]", "'x'"),
    (_round(cache={"target_before": 0, "target_fed": 0}), "cache['target_fed']", "0"),
    (_round(cache={"target_before": 0, "draft_rewind": "later"}), "cache['draft_rewind']",
     "'later'"),
    (_round(cache={"target_before": 0, "draft_after_rewind": 1}), "cache",
     "'draft_after_rewind'"),
    (_round(extra={"ms": math.nan}), "extra", "NaN"),
    (_round(extra={1: "x"}), "extra", "{1: 'x'}"),
    (_round(extra=["x"]), "extra", "['x']"),
]


@pytest.mark.parametrize(("write", "argument", "value"), BAD_V2_ROUNDS)
def test_a_bad_version_2_round_names_the_argument_and_the_value(
    write: Callable[[st.RunWriter], None], argument: str, value: str
) -> None:
    run = st.TraceWriter(io.StringIO(), vocab_size=4).start_run(prompt=[0, 1])
    with pytest.raises(st.TraceWriteError) as raised:
        write(run)
    assert argument in str(raised.value) and value in str(raised.value), str(raised.value)


BAD_SETUPS: list[tuple[Callable[[], object], str, str]] = [
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=0), "vocab_size", "0"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=2**31 + 1), "vocab_size", "2147483649"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4, version=3), "version", "3"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4, version=True), "version", "True"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4, version=1, extra={}), "extra", "{}"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4, engine=3),  # type: ignore[arg-type]
     "engine", "3"),
    (lambda: st.TraceWriter(42, vocab_size=4), "destination", "42"),  # type: ignore[arg-type]
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4).start_run("has space"), "run_id",
     "'has space'"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4).start_run(prompt=[0, 9]),
     "prompt[1]", "9"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4).start_run(prompt=[]), "prompt", "[]"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4).start_run(prompt=[0], prompt_length=2),
     "prompt_length", "2"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4).start_run(
        target_sampler={"temprature": 0.7}), "target_sampler", "'temprature'"),
    (lambda: st.TraceWriter(io.StringIO(), vocab_size=4).start_run(
        draft_sampler={"top_p": 0.0}), "draft_sampler['top_p']", "0.0"),
    (lambda: st.probs_block([]), "rows", "none"),
    (lambda: st.probs_block([[0.5, math.inf]]), "rows[0][1]", "inf"),
    (lambda: st.b64_block(b"", rows=0), "rows", "0"),
    (lambda: st.b64_block(b"", rows=1, kind="logit"), "kind", "'logit'"),
    (lambda: st.b64_block(b"", rows=1, kind="logits", dtype="float64"), "dtype", "'float64'"),
    (lambda: st.b64_block([[70000.0]], rows=1, kind="logits", dtype="float16"), "data",
     "float16"),
    (lambda: st.sparse_block([([0, 1], [1.0])]), "rows[0]", "2 ids and 1 values"),
]


@pytest.mark.parametrize(("call", "argument", "value"), BAD_SETUPS)
def test_a_bad_header_run_or_block_names_the_argument_and_the_value(
    call: Callable[[], object], argument: str, value: str
) -> None:
    with pytest.raises(st.TraceWriteError) as raised:
        call()
    assert argument in str(raised.value) and value in str(raised.value), str(raised.value)


def test_runs_are_opened_once_and_version_1_holds_one() -> None:
    trace = st.TraceWriter(io.StringIO(), vocab_size=4)
    trace.start_run("a")
    with pytest.raises(st.TraceWriteError, match="run_id must be unique in the file, got 'a'"):
        trace.start_run("a")
    single = st.TraceWriter(io.StringIO(), vocab_size=4, version=1)
    single.start_run(prompt=[0])
    with pytest.raises(st.TraceWriteError, match="version 1 trace holds one run"):
        single.start_run(prompt=[1])


def test_cache_offsets_need_the_prompts_length() -> None:
    run = st.TraceWriter(io.StringIO(), vocab_size=4).start_run()
    with pytest.raises(st.TraceWriteError, match="prompt_length"):
        _round(cache={"target_before": 1})(run)


def test_extra_nested_past_the_serialiser_is_refused_by_name(tmp_path: Path) -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(st.TraceWriteError, match="extra nests objects or arrays deeper"):
        st.TraceWriter(tmp_path / "t.jsonl", vocab_size=4, extra=deep)


@pytest.mark.parametrize("value", [3.4028234663852886e38, -3.4e38])
def test_a_finite_logit_past_bfloat16_is_refused_as_such(value: float) -> None:
    # It was packed as an infinity, and refused later as "NaN or +inf".
    with pytest.raises(st.TraceWriteError, match=r"is finite but rounds to [+-]inf in bfloat16"):
        st.b64_block([[value, 0.0, 0.0, 0.0]], rows=1, kind="logits", dtype="bfloat16")
    largest = st.b64_block([[3.3895e38, 0.0, 0.0, 0.0]], rows=1, kind="logits",
                           dtype="bfloat16")
    assert largest["dtype"] == "bfloat16"
