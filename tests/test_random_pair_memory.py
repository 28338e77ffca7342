"""A random pair too large for the process is refused with its size, not ended by SIGSEGV.

Under an address-space cap (``ulimit -v``, a small host's stand-in) MLX's allocator ended
``bench --random-pair llama-3-8b-1b`` by SIGSEGV, with no message. The children here run
under a real ``RLIMIT_AS``, set before they start.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from typing import Any, cast

import pytest

from specaccept.shell import memory
from specaccept.shell.random_pairs import RUN_MARGIN_BYTES, pair_bytes, random_pair

CHILD_SECONDS = 300


def _capped(limit: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def test_bench_refuses_the_8b_pair_under_a_3_gib_cap_in_one_line() -> None:
    code = "import sys; from specaccept.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "bench", "--random-pair", "llama-3-8b-1b", "-n", "4",
         "--repeats", "1"],
        capture_output=True, text=True, timeout=CHILD_SECONDS,
        preexec_fn=_capped(3_000_000 * 1024), check=False)
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    needed = f"{pair_bytes('llama-3-8b-1b'):,}"
    assert lines[0].startswith(f"specaccept: error: random pair 'llama-3-8b-1b' needs about "
                               f"{needed} bytes")
    assert "but this process may allocate" in lines[0] and "ulimit -v 3000000" in lines[0]


# A preset of about 0.3 GB of weights, built under a cap of 300 MiB more than the child maps
# once imported (set there, after the imports): large enough to outgrow the cap, small
# enough to fail fast when the check is left out.
MID_PRESET = """
import resource
from dataclasses import replace
from specaccept.shell import random_pairs
from specaccept.shell.memory import InsufficientMemoryError, _status_bytes
base = random_pairs.RANDOM_PAIRS["small"]
random_pairs.RANDOM_PAIRS["mid"] = replace(
    base, target={**base.target, "vocab_size": 32768, "hidden_size": 1024,
                  "intermediate_size": 2048}, drafter={**base.drafter, "vocab_size": 32768})
cap = _status_bytes("VmSize") + (300 << 20) + %d
resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=CHILD_SECONDS, check=False)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmSize")
def test_the_refusal_is_what_keeps_the_child_alive() -> None:
    """The same build under the same cap: refused with its numbers; with the check left out
    (the nearest wrong variant) the child dies; with room, it builds."""
    build = "random_pairs.random_pair('mid')\nprint('built')\n"
    refused = _run(MID_PRESET % 0 + """
try:
    random_pairs.random_pair('mid')
except InsufficientMemoryError as error:
    print('refused:', error)
""")
    assert refused.returncode == 0, refused.stderr[-2000:]
    assert refused.stdout.startswith("refused: random pair 'mid' needs about"), refused.stdout
    assert "ulimit -v" in refused.stdout
    unchecked = _run(MID_PRESET % 0 + "random_pairs.check_fits = lambda *_: None\n" + build)
    assert unchecked.returncode != 0 and "built" not in unchecked.stdout
    roomy = _run(MID_PRESET % (2 << 30) + build)
    assert roomy.returncode == 0 and roomy.stdout.strip() == "built", roomy.stderr[-2000:]


def test_pair_bytes_counts_the_weights_the_draw_and_the_margin() -> None:
    import mlx.core as mx
    from mlx.utils import tree_flatten

    def sizes(model: Any) -> list[int]:  # an mlx-lm Llama
        leaves = cast(list[tuple[str, mx.array]], tree_flatten(model.parameters()))
        return [value.size for _, value in leaves]

    pair = random_pair("small")
    target, drafter = sizes(pair.target), sizes(pair.require_drafter())
    weights = 4 * (sum(target) + sum(drafter))  # float32
    assert pair_bytes("small") == weights + 4 * max(target) + RUN_MARGIN_BYTES
    # A self-speculative drafter shares the target's weights: they are counted once.
    shared = random_pair("small-self")
    own = sizes(shared.target)
    assert pair_bytes("small-self") == 4 * sum(own) + 4 * max(own) + RUN_MARGIN_BYTES


@pytest.mark.parametrize("preset", [None, 3, "llama-9000", ["small"]])
def test_a_preset_that_is_not_one_is_named(preset: Any) -> None:
    with pytest.raises(ValueError, match=r"random pair preset must be one of .*got "):
        random_pair(preset)
    with pytest.raises(ValueError, match=r"random pair preset must be one of .*got "):
        pair_bytes(preset)


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, True, None])
def test_a_seed_out_of_range_is_named(seed: Any) -> None:
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*64\), got "):
        random_pair("small", seed=seed)


def test_available_bytes_without_proc_reads_sysconf(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where /proc is absent (macOS), the physical memory os.sysconf gives bounds it."""
    monkeypatch.setattr(memory, "_kilobytes", lambda path, field: None)
    monkeypatch.setattr(resource, "getrlimit",
                        lambda which: (resource.RLIM_INFINITY,) * 2)
    pages = {"SC_PHYS_PAGES": 1000, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    available = memory.available_bytes()
    assert available is not None and available.bytes == 4_096_000
    assert "os.sysconf" in available.source
    with pytest.raises(memory.InsufficientMemoryError, match=r"^demo needs about 5,000,000 "
                       r"bytes \(0\.0 GiB\), but this process may allocate 4,096,000"):
        memory.check_fits("demo", 5_000_000)
    memory.check_fits("demo", 4_096_000)


def test_nothing_known_means_no_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_kilobytes", lambda path, field: None)
    monkeypatch.setattr(resource, "getrlimit",
                        lambda which: (resource.RLIM_INFINITY,) * 2)

    def unknown(name: str) -> int:
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", unknown)
    assert memory.available_bytes() is None
    memory.check_fits("anything", 10**30)
