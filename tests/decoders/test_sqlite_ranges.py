"""SQLite's lock levels from the kernel's byte ranges, as SQLite's os_unix.c
takes them: the cases a real SQLite holds only for an instant (PENDING, the
pending byte read-locked while SHARED is taken) and the ranges one process's
POSIX locks merge into (EXCLUSIVE: one write lock over all three)."""

from __future__ import annotations

import pytest

from lockwatch.sources.filelocks import FileKey, KernelLock
from lockwatch.sources.files.decoders.sqlite import (
    PENDING_BYTE,
    RESERVED_BYTE,
    SHARED_FIRST,
    SHARED_LAST,
    database_level,
    shm_roles,
)

FILE = FileKey("254:0", 42)


def _lock(mode: str, start: int, end: int | None) -> KernelLock:
    return KernelLock(1, "POSIX", mode, FILE, start, end, 4242, owners=(4242,))


@pytest.mark.parametrize(
    ("locks", "level"),
    [
        ([_lock("READ", SHARED_FIRST, SHARED_LAST)], "SHARED"),
        ([_lock("READ", PENDING_BYTE, PENDING_BYTE)], "SHARED"),  # taking SHARED
        (
            [
                _lock("WRITE", RESERVED_BYTE, RESERVED_BYTE),
                _lock("READ", SHARED_FIRST, SHARED_LAST),
            ],
            "RESERVED",
        ),
        (
            [_lock("WRITE", PENDING_BYTE, RESERVED_BYTE), _lock("READ", SHARED_FIRST, SHARED_LAST)],
            "PENDING",
        ),
        ([_lock("WRITE", PENDING_BYTE, SHARED_LAST)], "EXCLUSIVE"),  # merged, as /proc/locks shows
        ([_lock("WRITE", SHARED_FIRST, SHARED_LAST)], "EXCLUSIVE"),
        ([_lock("WRITE", 0, None)], "EXCLUSIVE"),  # a whole-file lock covers every byte
        ([_lock("WRITE", 0, 100)], None),  # not SQLite's bytes
        ([], None),
    ],
)
def test_database_levels(locks: list[KernelLock], level: str | None) -> None:
    assert database_level(locks) == level


def test_shm_roles() -> None:
    assert shm_roles([_lock("WRITE", 120, 120), _lock("READ", 128, 128)]) == [
        "the WAL write lock (a write transaction)",
        "open",
    ]
    assert shm_roles([_lock("WRITE", 121, 121)]) == ["checkpointing"]
    assert shm_roles([_lock("READ", 124, 124), _lock("READ", 128, 128)]) == [
        "reading (a WAL read mark)",
        "open",
    ]
    assert shm_roles([_lock("READ", 0, 10)]) == []
