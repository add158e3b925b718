"""The history keeps no file digests: a recorded lock reads back with
`sha256` None (what a break compares is the file as it is now; no action runs
on a past state), and a digest written by an older lockwatch is not read."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from datetime import timedelta
from pathlib import Path

from lockwatch.history.api import Batch, open_history
from lockwatch.model.changes import Entry
from lockwatch.model.history import LockSpan
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from tests.conftest import LOCAL_HOST, NOW
from tests.history.schema_v1 import FILE_V2


def _entry(n: int) -> Entry:
    digest = hashlib.sha256(str(n).encode()).hexdigest()
    lock = Lock("file:/srv/a.lock", "file", "generic", "a", "/srv/a.lock", sha256=digest)
    return Entry(lock, Verdict(State.ACTIVE))


def test_a_recorded_lock_has_no_digest(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    store = open_history(str(path), host=LOCAL_HOST, write=True)
    batch = Batch()
    for n in range(3):
        at = NOW - timedelta(minutes=3 - n)
        span = LockSpan(
            LOCAL_HOST, "file:/srv/a.lock", "file", "a", "/srv/a.lock", "active", (), "", at
        )
        if n:
            batch.closed.append(("file:/srv/a.lock", at))
        batch.opened.append((span, _entry(n)))
    batch.closed.append(("file:/srv/a.lock", NOW))
    store.record(batch, poll_seconds=1.0)
    store.close()
    with sqlite3.connect(path) as db:
        stored = b"".join(
            bytes(row[0] or b"")
            for row in db.execute("SELECT entry FROM spans UNION ALL SELECT base FROM lockrefs")
        )
    for n in range(3):
        digest = hashlib.sha256(str(n).encode()).hexdigest()
        assert digest.encode() not in stored and bytes.fromhex(digest) not in stored
    store = open_history(str(path))
    try:
        for n in range(3):
            (entry,) = store.entries_at(NOW - timedelta(minutes=3 - n))
            assert entry.lock.sha256 is None
            assert entry.lock.id == "file:/srv/a.lock"
    finally:
        store.close()


def test_an_older_files_digests_are_not_read(tmp_path: Path) -> None:
    # A copy: a reader that closes the file tidies its WAL away.
    path = tmp_path / "history.sqlite3"
    shutil.copyfile(FILE_V2, path)
    path.chmod(0o600)
    store = open_history(str(path))
    try:
        times = store.change_times(NOW - timedelta(days=30), NOW + timedelta(days=1))
        locks = [lock for at in times for lock in store.locks_at(at)]
    finally:
        store.close()
    assert locks and all(lock.sha256 is None for lock in locks)
