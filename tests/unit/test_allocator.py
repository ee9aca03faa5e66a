"""The pinned mmap threshold, observed in glibc's own accounting (each case in a fresh interpreter)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from judgeflow.allocator import pin_mmap_threshold

PROBE = """
import ctypes, sys
from judgeflow.allocator import pin_mmap_threshold

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                 "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
pinned = pin_mmap_threshold(int(sys.argv[1]))
big = bytearray(8 << 20)   # served by its own mapping; freeing it raises glibc's dynamic threshold to 8 MiB
del big
before = libc.mallinfo2().hblks
block = bytearray(1 << 20)  # 1 MiB: its own mapping only while the threshold stays below it
print(pinned, libc.mallinfo2().hblks - before)
"""


def _glibc_has_mallinfo2() -> bool:
    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2")
    except OSError:
        return False


def _probe(threshold: int) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(threshold)], capture_output=True, text=True, check=True)
    pinned, mapped = out.stdout.split()
    return pinned, int(mapped)


@pytest.mark.skipif(not _glibc_has_mallinfo2(), reason="needs glibc 2.33+ (mallinfo2)")
def test_a_pinned_threshold_keeps_large_blocks_out_of_the_heap_after_a_larger_one_was_freed() -> None:
    assert _probe(128 * 1024) == ("True", 1)


@pytest.mark.skipif(not _glibc_has_mallinfo2(), reason="needs glibc 2.33+ (mallinfo2)")
def test_without_it_glibc_raises_the_threshold_and_the_block_lands_in_the_heap() -> None:
    assert _probe(0) == ("False", 0)


def test_zero_leaves_the_allocator_alone() -> None:
    assert pin_mmap_threshold(0) is False
