"""How many bytes this process may still allocate, read before a large allocation.

MLX's allocator does not report an allocation the host refuses: past the address-space
limit (``ulimit -v``) a run dies by SIGSEGV with no message, and past the physical memory
the kernel's out-of-memory killer ends it. A step that knows its size beforehand (a model
pair built from shapes) compares it with `available_bytes` and refuses with the numbers
instead, by `check_fits`.
"""

from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass

import mlx.core as mx

__all__ = ["Available", "InsufficientMemoryError", "available_bytes", "check_fits"]


class InsufficientMemoryError(ValueError):
    """A step needs more bytes than the process may allocate; raised before it allocates."""


@dataclass(frozen=True)
class Available:
    """The bytes the process may still allocate, and the limit that sets them."""

    bytes: int
    source: str
    """What bounds them, in words: the address-space limit or the memory available."""


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of /proc/self/status (``VmSize``), in bytes; None where absent."""
    return _kilobytes("/proc/self/status", field)


def _kilobytes(path: str, field: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name == field:
                    return int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _physical_bytes() -> tuple[int, str] | None:
    """Memory a new allocation can take without swapping: MemAvailable where the kernel
    reports it (Linux), else the physical memory `os.sysconf` gives (macOS, where MLX's
    memory is the machine's unified memory), else None."""
    available = _kilobytes("/proc/meminfo", "MemAvailable")
    if available is not None:
        return available, "MemAvailable in /proc/meminfo"
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
    if pages > 0 and size > 0:
        return pages * size, "the physical memory (os.sysconf)"
    return None


def available_bytes() -> Available | None:
    """The smaller of what the address-space limit leaves and what the host's memory holds.

    The address-space limit (``RLIMIT_AS``) counts every mapping of the process, so what it
    leaves is the limit less the process's current size (``VmSize``; where that is not
    reported the limit itself, an over-estimate). The host's memory counts only where the
    arrays live in it: on MLX's CPU device, and on macOS, whose GPU shares it. None when
    neither is known.
    """
    candidates: list[tuple[int, str]] = []
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft > 0:
        used = _status_bytes("VmSize") or 0
        candidates.append((max(soft - used, 0), f"the address-space limit, ulimit -v "
                           f"{soft // 1024} (KiB), less the {used:,} bytes already mapped"))
    if mx.default_device() == mx.cpu or sys.platform == "darwin":
        physical = _physical_bytes()
        if physical is not None:
            candidates.append(physical)
    if not candidates:
        return None
    size, source = min(candidates)
    return Available(size, source)


def check_fits(what: str, needed: int) -> None:
    """Refuse `what` when it needs more than `available_bytes`; pass when that is unknown.

    Raises:
        InsufficientMemoryError: one line naming `what`, the bytes it needs and those
            available, and what bounds them.
    """
    available = available_bytes()
    if available is not None and needed > available.bytes:
        raise InsufficientMemoryError(
            f"{what} needs about {needed:,} bytes ({needed / 2**30:.1f} GiB), but this "
            f"process may allocate {available.bytes:,} ({available.bytes / 2**30:.1f} GiB): "
            f"{available.source}")
