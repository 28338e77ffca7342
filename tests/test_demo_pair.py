"""The embedded demo target/drafter pair loads offline and matches its model card."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any, cast

os.environ["HF_HUB_OFFLINE"] = "1"  # the pair must load with no network at all

import mlx.core as mx
import numpy as np
import pytest

from specaccept.demo import (
    DEMO_DIR,
    DEMO_WEIGHTS_DIR,
    card_path,
    corpus_path,
    drafter_path,
    target_path,
)

mlx_lm = pytest.importorskip("mlx_lm")

TARGET_PARAMS = (2_000_000, 4_000_000)
DRAFTER_PARAMS = (200_000, 400_000)
EVAL_WINDOW = 256
EVAL_WINDOWS = 8  # 8 x 256 = 2,048 predicted characters from the held-out split


def _load(path: Path) -> tuple[Any, Any]:
    loaded = mlx_lm.load(str(path))
    return loaded[0], loaded[1]


@pytest.fixture(scope="module")
def pair() -> dict[str, tuple[Any, Any]]:
    return {"target": _load(target_path()), "drafter": _load(drafter_path())}


@pytest.fixture(scope="module")
def corpus() -> str:
    return corpus_path().read_text(encoding="utf-8")


def _n_params(model: Any) -> int:
    from mlx.utils import tree_flatten

    flat = cast(list[tuple[str, Any]], tree_flatten(model.parameters()))
    return sum(int(v.size) for _, v in flat)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_paths_point_into_the_package() -> None:
    assert target_path().parent == DEMO_WEIGHTS_DIR
    assert drafter_path().parent == DEMO_WEIGHTS_DIR
    assert DEMO_WEIGHTS_DIR.parent == DEMO_DIR
    for path in (target_path(), drafter_path()):
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            assert (path / name).is_file(), path / name


def test_both_load_offline_as_llama(pair: dict[str, tuple[Any, Any]]) -> None:
    for name, (model, tokenizer) in pair.items():
        assert model.model_type == "llama", name
        assert type(tokenizer).__name__ == "TokenizerWrapper", name
        config = json.loads(((DEMO_WEIGHTS_DIR / name) / "config.json").read_text())
        assert config["model_type"] == "llama"
        assert config["eos_token_id"] == tokenizer.eos_token_id
        assert tokenizer.eos_token_ids == {config["eos_token_id"]}


def test_parameter_counts(pair: dict[str, tuple[Any, Any]]) -> None:
    n_target = _n_params(pair["target"][0])
    n_drafter = _n_params(pair["drafter"][0])
    assert TARGET_PARAMS[0] <= n_target <= TARGET_PARAMS[1]
    assert DRAFTER_PARAMS[0] <= n_drafter <= DRAFTER_PARAMS[1]
    assert n_target >= 5 * n_drafter


def test_weights_fit_the_size_budget() -> None:
    total = sum((p / "model.safetensors").stat().st_size for p in (target_path(), drafter_path()))
    assert total <= 15_000_000


def test_tokenizer_round_trips_corpus_text(pair: dict[str, tuple[Any, Any]], corpus: str) -> None:
    excerpts = [corpus[:2000], corpus[500_000:502_000], corpus[-2000:], " a ,b  \n\n x "]
    for name, (_, tokenizer) in pair.items():
        for text in excerpts:
            ids = tokenizer.encode(text)
            assert len(ids) == len(text), name  # one id per character, no BOS/EOS added
            assert tokenizer.decode(ids) == text, name
    assert pair["target"][1].encode("ROMEO:") == pair["drafter"][1].encode("ROMEO:")


def test_vocabularies_are_identical(pair: dict[str, tuple[Any, Any]], corpus: str) -> None:
    target_tok, drafter_tok = pair["target"][1], pair["drafter"][1]
    vocab = target_tok.get_vocab()
    assert vocab == drafter_tok.get_vocab()
    assert target_tok.eos_token_id == drafter_tok.eos_token_id
    assert set(corpus) <= set(vocab)
    assert target_tok.eos_token_id not in target_tok.encode(corpus[:20_000])
    for path in (target_path(), drafter_path()):
        assert json.loads((path / "config.json").read_text())["vocab_size"] == len(vocab)
        assert (path / "tokenizer.json").read_bytes() == (
            target_path() / "tokenizer.json"
        ).read_bytes()


def test_card_checksums_match_the_files() -> None:
    card = card_path().read_text(encoding="utf-8")
    listed = dict(
        (rel, digest)
        for digest, rel in re.findall(r"^([0-9a-f]{64})  (\S+/model\.safetensors)$", card, re.M)
    )
    assert set(listed) == {"weights/target/model.safetensors", "weights/drafter/model.safetensors"}
    for rel, digest in listed.items():
        path = DEMO_DIR / rel
        assert _sha256(path) == digest, rel
        assert f"`{digest}`" in card  # also in the model's table


def _val_loss(model: Any, ids: list[int]) -> float:
    arr = np.array(ids[: EVAL_WINDOWS * EVAL_WINDOW + 1], dtype=np.int32)
    starts = np.arange(EVAL_WINDOWS) * EVAL_WINDOW
    windows = mx.array(arr[starts[:, None] + np.arange(EVAL_WINDOW + 1)[None, :]])
    logits = model(windows[:, :-1]).astype(mx.float32)
    targets = windows[:, 1:]
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    picked = mx.take_along_axis(logprobs, targets[..., None], axis=-1)
    return -float(np.asarray(picked.mean()))


def test_validation_loss_well_below_uniform(pair: dict[str, tuple[Any, Any]], corpus: str) -> None:
    held_out = corpus[int(len(corpus) * 0.9) :]
    text = held_out[-(EVAL_WINDOWS * EVAL_WINDOW + 1) :]
    model, tokenizer = pair["target"]
    uniform = math.log(len(tokenizer.get_vocab()))
    target_loss = _val_loss(model, tokenizer.encode(text))
    drafter_loss = _val_loss(pair["drafter"][0], tokenizer.encode(text))
    assert target_loss < 0.7 * uniform
    assert drafter_loss < 0.8 * uniform
    assert target_loss < drafter_loss
