"""spec/verify_batch.md: a batch is a map over its requests.

Each invariance the page states is checked bit for bit on pseudo-random ragged batches that
mix every rule (greedy, sampler-match, stochastic, block), drafts of every length (none
included), placeholders and stale drafts: a request's verdict is its own round's; it does not
change with its batch-mates, with the chunking of the batch, or with the shard that verifies
it; and its coins are its own, with every bit of its seed counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import mlx.core as mx
import numpy as np
import pytest

from specaccept import AcceptanceRule, verify_blockwise, verify_tokenwise
from specaccept.core.batch import batch_uniforms, verify_batch
from specaccept.core.randomness import round_uniforms

RULES = tuple(AcceptanceRule)
VOCAB = 6


class Request(NamedTuple):
    """One request's round, in its own rows."""

    rule: AcceptanceRule
    target: np.ndarray  # [k+1, V] float32
    draft: np.ndarray  # [k+1, V] float32; the last row unread
    tokens: list[int]  # k+1 ids; the last unread
    uniforms: np.ndarray  # [k+1, 2] float32


def random_request(rng: np.random.Generator) -> Request:
    k = int(rng.integers(0, 5))
    rule = RULES[int(rng.integers(len(RULES)))]

    def law() -> np.ndarray:
        w = rng.integers(0, 4, size=VOCAB).astype(np.float32)
        w[int(rng.integers(VOCAB))] += 1
        law: np.ndarray = (w / w.sum()).astype(np.float32)
        return law

    target = np.stack([law() for _ in range(k + 1)])
    draft = np.stack([law() for _ in range(k + 1)])
    laws = draft.astype(np.float64)
    tokens = [int(rng.choice(VOCAB, p=laws[i] / laws[i].sum())) for i in range(k + 1)]
    for i in range(k):
        if rng.random() < 0.15:
            tokens[i] = -1  # a placeholder: a missing or stale draft
        elif rng.random() < 0.3:
            tokens[i] = int(np.argmax(target[i]))  # often accepted, so rounds run long
    tokens[k] = int(rng.integers(-1, VOCAB))  # the bonus row's entry is never read
    uniforms = rng.integers(0, 1 << 24, size=(k + 1, 2)).astype(np.float32) / (1 << 24)
    return Request(rule, target, draft, tokens, uniforms.astype(np.float32))


def ints(a: mx.array) -> list[int]:
    return [int(x) for x in np.array(a).reshape(-1)]


def matrix(a: mx.array) -> list[list[float]]:
    return [[float(x) for x in row] for row in np.array(a)]


def random_batch(seed: int, size: int) -> list[Request]:
    rng = np.random.default_rng(seed)
    return [random_request(rng) for _ in range(size)]


def offsets(batch: Sequence[Request]) -> list[int]:
    out = [0]
    for request in batch:
        out.append(out[-1] + request.target.shape[0])
    return out


def run(batch: Sequence[Request]) -> list[tuple[int, int]]:
    verdict = verify_batch(
        [r.rule for r in batch],
        mx.array(np.concatenate([r.target for r in batch])),
        mx.array(np.concatenate([r.draft for r in batch])),
        mx.array(np.concatenate([r.tokens for r in batch]).astype(np.int32)),
        offsets(batch),
        mx.array(np.concatenate([r.uniforms for r in batch])),
    )
    return list(zip(ints(verdict.num_accepted), ints(verdict.next_token), strict=True))


def alone(request: Request) -> tuple[int, int]:
    """The request's round verified by itself, by the single-round functions. With no
    drafts, a round whose one draft is a placeholder: the target's own step."""
    k = request.target.shape[0] - 1
    target = request.target if k else np.concatenate([request.target, request.target])
    draft = request.draft[:k] if k else request.draft[:1]
    tokens = request.tokens[:k] if k else [-1]
    uniforms = request.uniforms if k else np.concatenate([request.uniforms, request.uniforms])
    args = (mx.array(target), mx.array(draft), mx.array(tokens, dtype=mx.int32),
            mx.array(uniforms))
    if request.rule is AcceptanceRule.BLOCK:
        joint = verify_blockwise(*args)
        return ints(joint.num_accepted)[0], ints(joint.next_token)[0]
    q = args[1] if request.rule.needs_proposal_distribution else None
    verdict = verify_tokenwise(request.rule, args[0], q, args[2], args[3])
    return ints(verdict.num_accepted)[0], ints(verdict.next_token)[0]


BATCH_SEEDS = range(6)


@pytest.mark.parametrize("seed", BATCH_SEEDS)
def test_each_request_gets_its_own_rounds_verdict(seed: int) -> None:
    batch = random_batch(seed, 9)
    assert run(batch) == [alone(r) for r in batch]


def test_the_batches_cover_what_the_page_claims() -> None:
    """The premise: every rule, no drafts and four drafts, placeholders, and verdicts that
    accept everything and nothing."""
    batches = [random_batch(seed, 9) for seed in BATCH_SEEDS]
    requests = [r for batch in batches for r in batch]
    verdicts = [v for batch in batches for v in run(batch)]
    assert {r.rule for r in requests} == set(RULES)
    assert {r.target.shape[0] - 1 for r in requests} >= {0, 4}
    assert any(-1 in r.tokens[:-1] for r in requests)
    ks = [r.target.shape[0] - 1 for r in requests]
    assert any(n == k > 0 for (n, _), k in zip(verdicts, ks, strict=True))
    assert any(n == 0 < k for (n, _), k in zip(verdicts, ks, strict=True))


@pytest.mark.parametrize("seed", BATCH_SEEDS)
def test_a_requests_verdict_does_not_depend_on_its_batch_mates(seed: int) -> None:
    batch = random_batch(seed, 7)
    others = random_batch(seed + 100, 7)
    mixed = [batch[i] if i % 2 == 0 else others[i] for i in range(7)]
    got, want = run(mixed), run(batch)
    assert [got[i] for i in range(0, 7, 2)] == [want[i] for i in range(0, 7, 2)]


@pytest.mark.parametrize("seed", BATCH_SEEDS)
def test_chunking_the_batch_changes_nothing(seed: int) -> None:
    batch = random_batch(seed, 6)
    whole = run(batch)
    for cut in range(1, 6):
        assert run(batch[:cut]) + run(batch[cut:]) == whole
    assert [v for r in batch for v in run([r])] == whole


@pytest.mark.parametrize("shards", [2, 3, 4])
def test_the_shard_that_verifies_a_request_changes_nothing(shards: int) -> None:
    """Batch-sharded verification: shard s verifies requests i with i % shards == s."""
    batch = random_batch(shards, 10)
    whole = run(batch)
    gathered: dict[int, tuple[int, int]] = {}
    for shard in range(shards):
        indices = list(range(shard, 10, shards))
        gathered.update(zip(indices, run([batch[i] for i in indices]), strict=True))
    assert [gathered[i] for i in range(10)] == whole


def test_a_request_reads_its_own_coins() -> None:
    """batch_uniforms: request r's rows are its own round's uniforms, whatever its
    batch-mates and its place in the batch."""
    seeds, positions, cu = [11, 2**63 + 5, 11], [0, 7, 3], [0, 3, 4, 6]
    rows = matrix(batch_uniforms(seeds, positions, cu))
    for r in range(3):
        k = cu[r + 1] - cu[r] - 1
        assert rows[cu[r]:cu[r + 1]] == round_uniforms(seeds[r], positions[r], k).verify
    reordered = matrix(batch_uniforms(seeds[::-1], positions[::-1], [0, 2, 3, 6]))
    assert reordered[3:6] == rows[0:3]


def coin_stream(seed: int) -> list[float]:
    return [u for row in matrix(batch_uniforms([seed], [0], [0, 64])) for u in row]


@pytest.mark.parametrize("seed", [0, 7, 2**32 - 1, 123456789])
@pytest.mark.parametrize("bit", [32, 40, 48, 56, 63])
def test_seeds_differing_only_in_high_bits_share_no_coins(seed: int, bit: int) -> None:
    """Every bit of a seed counts: seeds that differ in one bit above the 32nd read
    different coins (equal in at most a few of 128 places, by chance), where a keying that
    folded the seed to 32 bits would hand both requests the same stream."""
    mine, theirs = coin_stream(seed), coin_stream(seed ^ (1 << bit))
    assert sum(a == b for a, b in zip(mine, theirs, strict=True)) <= 2


def test_requests_with_equal_seeds_share_their_coins() -> None:
    """What the page says an engine must avoid: equal seeds at equal positions are the same
    coins, so two such requests are not independent."""
    u = matrix(batch_uniforms([5, 5], [3, 3], [0, 3, 6]))
    assert u[:3] == u[3:]


@pytest.mark.parametrize(("change", "argument", "kind"), [
    ({"cu_num_rows": [0, 2, 2, 3]}, "cu_num_rows", ValueError),
    ({"cu_num_rows": [0, 2]}, "cu_num_rows", ValueError),
    ({"cu_num_rows": [1, 3]}, "cu_num_rows", ValueError),
    ({"cu_num_rows": (0, 2.0, 3)}, "cu_num_rows", TypeError),
    ({"cu_num_rows": mx.array([0, 2, 3])}, "cu_num_rows", TypeError),
    ({"rules": [AcceptanceRule.STOCHASTIC]}, "rules", ValueError),
    ({"rules": ["stochastic", "greedy-argmax"]}, "rules", TypeError),
    ({"draft_probs": None}, "draft_probs", ValueError),
    ({"draft_tokens": mx.array([1, -1])}, "draft_tokens", ValueError),
    ({"draft_tokens": mx.array([1.0, 0.0, 0.0])}, "draft_tokens", TypeError),
    ({"uniforms": mx.zeros((3, 1))}, "uniforms", ValueError),
    ({"target_probs": mx.zeros((3, 2), dtype=mx.float16)}, "target_probs", TypeError),
    ({"draft_probs": mx.zeros((3, 3))}, "draft_probs", ValueError),
])
def test_bad_arguments_are_refused_by_name(change: dict[str, object], argument: str,
                                           kind: type[Exception]) -> None:
    rows = mx.array([[0.5, 0.5], [0.25, 0.75], [0.0, 1.0]])
    arguments: dict[str, object] = {
        "rules": [AcceptanceRule.STOCHASTIC, AcceptanceRule.GREEDY_ARGMAX],
        "target_probs": rows, "draft_probs": rows, "draft_tokens": mx.array([1, -1, -1]),
        "cu_num_rows": [0, 2, 3], "uniforms": mx.zeros((3, 2)),
    }
    with pytest.raises(kind, match=argument):
        verify_batch(**{**arguments, **change})  # type: ignore[arg-type]
