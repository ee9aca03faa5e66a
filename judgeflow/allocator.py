"""The C allocator's mmap threshold, pinned for processes that run for months.

glibc serves a block of at least `M_MMAP_THRESHOLD` bytes (128 KiB at start) with its own mapping, which it
returns to the system when the block is freed. But the threshold is dynamic: each time such a block is freed,
glibc raises the threshold to that block's size (up to 32 MiB). The worker frees many large blocks (a fetch
response, a produce batch, a RocksDB memtable block), so after its first minutes large blocks are carved out of
the main heap instead, between small long-lived objects; the heap's free space then grows and is never
returned. Measured on the worker (bench/PROFILE.md): with the dynamic threshold its heap grew 29.7 -> 37.2 MiB
between 20,000 and 200,000 claims while the bytes malloc held stayed at 32-36 MiB; with the threshold pinned
the heap stayed at 27.7-28.6 MiB. Setting the threshold through `mallopt` also turns the dynamic adjustment
off (mallopt(3)).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

M_MMAP_THRESHOLD = -3
"""mallopt(3)'s parameter number, from glibc's malloc.h."""
MMAP_THRESHOLD = 128 * 1024
"""glibc's own initial threshold, kept fixed (`JUDGEFLOW_MALLOC_MMAP_THRESHOLD`; 0 leaves glibc dynamic)."""

log = logging.getLogger("judgeflow.allocator")


def pin_mmap_threshold(nbytes: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `nbytes`; True when it took effect, False where there is no glibc
    (musl, macOS) or `nbytes` is 0. Call it once, early in the process."""
    if nbytes <= 0:
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.debug("no mallopt in %s: the allocator keeps its own threshold", name)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, nbytes))
