"""The standard-library writer's hold on its path, on every platform's lock.

POSIX ``flock`` is tested for real (here and, across processes, in test_tree_reliability);
Windows' ``msvcrt.locking`` and the lock file used where neither module imports are
reached by replacing the modules the writer found at import.
"""

from __future__ import annotations

import errno
import gzip
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import specaccept_trace as st
from specaccept.conformance import read_trace

P = [[0.25] * 4] * 2
Q = [[0.25] * 4]


def _write(writer: st.TraceWriter, rounds: int) -> None:
    run = writer.start_run(prompt=[1])
    for _ in range(rounds):
        run.write_round(rule="stochastic", draft_tokens=[0], emitted=[0, 1],
                        target=st.probs_block(P), draft=st.probs_block(Q))


@pytest.fixture(params=[".jsonl", ".jsonl.gz"])
def path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / f"t{request.param}")


def _second_is_refused(path: str, first: st.TraceWriter, words: str = "") -> None:
    _write(first, 3)
    with pytest.raises(st.TraceWriteError, match=rf"destination .* is held by another "
                       rf"TraceWriter.*{words}"):
        st.TraceWriter(path, vocab_size=4)
    _write(first, 2)  # the refused writer truncated nothing: the first writes on
    first.close()
    assert len(read_trace(path).rounds) == 5
    with st.TraceWriter(path, vocab_size=4) as third:  # the path is free again
        _write(third, 1)
    assert len(read_trace(path).rounds) == 1


def test_flock_holds_the_path_against_a_writer_in_the_same_process(path: str) -> None:
    assert st._fcntl is not None  # this host is POSIX
    _second_is_refused(path, st.TraceWriter(path, vocab_size=4))


def test_without_fcntl_or_msvcrt_a_lock_file_holds_the_path(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(st, "_fcntl", None)
    monkeypatch.setattr(st, "_msvcrt", None)
    first = st.TraceWriter(path, vocab_size=4)
    assert os.path.exists(path + ".lock")
    _second_is_refused(path, first, words="exists: if no writer is running")
    assert not os.path.exists(path + ".lock")  # removed by close, after the last byte


def test_a_stale_lock_file_is_named_and_removing_it_frees_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(st, "_fcntl", None)
    monkeypatch.setattr(st, "_msvcrt", None)
    path = str(tmp_path / "t.jsonl")
    Path(path + ".lock").touch()  # a writer that died without closing
    with pytest.raises(st.TraceWriteError, match=r"t\.jsonl\.lock' exists: if no writer is "
                       r"running, one stopped without closing and left it"):
        st.TraceWriter(path, vocab_size=4)
    os.unlink(path + ".lock")
    with st.TraceWriter(path, vocab_size=4) as writer:
        _write(writer, 1)


def test_a_device_takes_no_lock_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "_fcntl", None)
    monkeypatch.setattr(st, "_msvcrt", None)
    st.TraceWriter("/dev/null", vocab_size=4).close()  # /dev/null.lock: not ours to create


def test_a_file_system_without_flock_falls_back_to_the_lock_file(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_flock(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(st, "_fcntl", SimpleNamespace(flock=no_flock, LOCK_EX=2, LOCK_NB=4))
    first = st.TraceWriter(path, vocab_size=4)
    assert os.path.exists(path + ".lock")
    _second_is_refused(path, first)


class _FakeMsvcrt:
    """msvcrt.locking's contract: a non-blocking lock of n bytes from the file's position,
    refused (OSError) while another handle holds them; unlocked by LK_UNLCK."""

    LK_NBLCK, LK_UNLCK = 2, 0

    def __init__(self) -> None:
        self.held: dict[tuple[int, int, int], int] = {}  # (device, inode, offset) -> fd
        self.calls: list[tuple[int, int, int]] = []

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino, os.lseek(fd, 0, os.SEEK_CUR))
        self.calls.append((mode, key[2], nbytes))
        if mode == self.LK_UNLCK:
            assert self.held.pop(key) == fd
        elif key in self.held:
            raise PermissionError(errno.EACCES, "Permission denied")
        else:
            self.held[key] = fd


def test_on_windows_the_first_byte_is_locked_and_unlocked_before_close(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _FakeMsvcrt()
    monkeypatch.setattr(st, "_fcntl", None)
    monkeypatch.setattr(st, "_msvcrt", fake)
    first = st.TraceWriter(path, vocab_size=4)
    assert not os.path.exists(path + ".lock")
    _second_is_refused(path, first)
    # Byte 0, one byte, locked then unlocked, for each writer that got the path.
    assert fake.calls[:3] == [(fake.LK_NBLCK, 0, 1), (fake.LK_NBLCK, 0, 1), (fake.LK_UNLCK, 0, 1)]
    assert not fake.held


def test_a_gzip_trace_is_whole_when_its_lock_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trailer is written before the next writer may take the path."""
    monkeypatch.setattr(st, "_fcntl", None)
    monkeypatch.setattr(st, "_msvcrt", None)
    path = str(tmp_path / "t.jsonl.gz")
    writer = st.TraceWriter(path, vocab_size=4)
    _write(writer, 2)
    seen: list[bytes] = []
    lock: Any = writer._lock
    release = lock.release

    def release_and_look() -> None:
        with open(path, "rb") as handle:
            seen.append(handle.read())
        release()

    monkeypatch.setattr(lock, "release", release_and_look)
    writer.close()
    assert gzip.decompress(seen[0]).count(b"\n") == 4  # header, run, two rounds
