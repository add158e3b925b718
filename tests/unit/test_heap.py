"""`heap.give_back`: freed C-heap memory goes back to the system."""

from __future__ import annotations

import psutil
import pytest

from lockwatch import heap

MB = 2**20


def test_memory_freed_below_a_live_allocation_is_returned() -> None:
    if heap._malloc_trim() is None:
        pytest.fail("this C library has no malloc_trim: lockwatch runs on glibc")
    # Objects over 512 bytes come from malloc. With the last one kept, the heap's
    # top stays in use, so glibc cannot shrink it by itself: the 80 MB freed below
    # it stay resident until trimmed.
    blobs = [b"%d" % i + b"x" * 1000 for i in range(80_000)]
    kept = blobs[-1]
    del blobs
    process = psutil.Process()
    before = process.memory_info().rss
    assert heap.give_back() is True
    after = process.memory_info().rss
    assert before - after > 40 * MB, (before / MB, after / MB)
    assert kept.endswith(b"x")
