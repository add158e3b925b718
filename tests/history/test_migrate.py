"""A history file written by schema version 1 (the first round's code, kept in
tests/history/data: see schema_v1.py) is migrated to the current schema when a
writer opens it, and reads the same after as that code read it before; a
reader (which never changes a file) reads the unmigrated file the same too."""

from __future__ import annotations

import json
import shutil
import sqlite3
import zlib
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from lockwatch.history.api import SCHEMA_VERSION, Batch, open_history
from lockwatch.history.unpack import unpack
from lockwatch.model.history import LockSpan
from tests.conftest import LOCAL_HOST, NOW
from tests.history.schema_v1 import (
    FILE,
    FILE_V2,
    FILE_V3,
    READINGS,
    READINGS_V2,
    READINGS_V3,
    normal,
    readings,
)


def _copy(tmp_path: Path, file: Path = FILE) -> Path:
    path = tmp_path / "history.sqlite3"
    shutil.copyfile(file, path)
    path.chmod(0o600)
    return path


def test_a_version_1_file_is_migrated_and_reads_the_same(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    open_history(str(path), host=LOCAL_HOST, write=True).close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == (
            str(SCHEMA_VERSION),
        )
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert "spans_v1" not in tables and {"kinds", "open_spans"} <= tables
    store = open_history(str(path))
    try:
        assert normal(readings(store)) == normal(json.loads(READINGS.read_text()))
    finally:
        store.close()


def test_a_reader_reads_a_version_1_file_unchanged(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    before = path.read_bytes()
    store = open_history(str(path))
    try:
        assert normal(readings(store)) == normal(json.loads(READINGS.read_text()))
    finally:
        store.close()
    assert path.read_bytes() == before


def test_a_migrated_file_records_on(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    store = open_history(str(path), host=LOCAL_HOST, write=True)
    old = store.entries_at(NOW - timedelta(minutes=7))
    # A lock the version 1 code recorded (its `lockrefs` row is reused), anew.
    entry = old[0]
    later, last = NOW + timedelta(minutes=1), NOW + timedelta(minutes=2)
    batch = Batch()
    span = store.lock_spans(None, None, lock_id=entry.lock.id)[0]
    batch.opened.append((replace(span, start=later, end=None), entry))
    batch.closed.append((entry.lock.id, last))
    store.record(batch, poll_seconds=1.0)
    store.close()
    store = open_history(str(path))
    try:
        spans = store.lock_spans(later, None, lock_id=entry.lock.id)
        assert [(s.start, s.end) for s in spans] == [(later, last)]
        assert [e.lock.id for e in store.entries_at(later)] == [entry.lock.id]
        assert store.entries_at(later)[0] == entry
    finally:
        store.close()


def test_a_version_2_file_is_migrated_and_reads_the_same(tmp_path: Path) -> None:
    path = _copy(tmp_path, FILE_V2)
    expected = json.loads(READINGS_V2.read_text())
    store = open_history(str(path))
    try:
        assert normal(readings(store)) == normal(expected)
    finally:
        store.close()
    open_history(str(path), host=LOCAL_HOST, write=True).close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == (
            str(SCHEMA_VERSION),
        )
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM spans").fetchone()[0] > 0
    assert "spans_v2" not in tables and "spans_trail" not in tables
    store = open_history(str(path))
    try:
        assert normal(readings(store)) == normal(expected)
    finally:
        store.close()


def test_a_version_2_entry_that_looks_numbered_is_packed_again(tmp_path: Path) -> None:
    # Version 2 wrote a count byte of 0x80 or more for 128 digests or more: the
    # numbers layout's mark. The migration packs such an entry again.
    path = _copy(tmp_path, FILE_V2)
    with sqlite3.connect(path) as db:
        row, base = db.execute(
            "SELECT o.id, r.base FROM open_spans AS o JOIN lockrefs AS r ON r.id = o.ref LIMIT 1"
        ).fetchone()
        whole = (
            bytes(base)[:-1]
            + b',"extra":['
            + b",".join(b'"' + (bytes([n]) * 32).hex().encode() + b'"' for n in range(130))
            + b"]}"
        )
        # As version 2's pack wrote it (`_MOST_DIGESTS` was 255 then).
        digests = b"".join(bytes([n]) * 32 for n in range(130))
        rest = whole
        for n in range(130):
            rest = rest.replace(b'"' + (bytes([n]) * 32).hex().encode() + b'"', b'"\x00"')
        packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zdict=bytes(base))
        packed = bytes([130]) + digests + packer.compress(rest) + packer.flush()
        assert unpack(packed, bytes(base), 1 << 24, version=2) == whole
        db.execute("UPDATE open_spans SET entry = ? WHERE id = ?", (packed, row))
    open_history(str(path), host=LOCAL_HOST, write=True).close()
    with sqlite3.connect(path) as db:
        (entry,) = db.execute("SELECT entry FROM open_spans WHERE id = ?", (row,)).fetchone()
    assert entry != packed and unpack(bytes(entry), bytes(base), 1 << 24) == whole


def test_a_version_3_file_is_migrated_and_reads_the_same(tmp_path: Path) -> None:
    # Version 4 keeps a lock span's times as integer milliseconds.
    path = _copy(tmp_path, FILE_V3)
    expected = json.loads(READINGS_V3.read_text())
    store = open_history(str(path))
    try:
        assert normal(readings(store)) == normal(expected)
    finally:
        store.close()
    open_history(str(path), host=LOCAL_HOST, write=True).close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == (
            str(SCHEMA_VERSION),
        )
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        kinds = db.execute("SELECT DISTINCT typeof(stop), typeof(dur) FROM spans").fetchall()
        (opened,) = db.execute("SELECT count(*) FROM open_spans").fetchone()
    assert kinds == [("integer", "integer")] and opened > 0
    assert {"open_spans_by_ref", "spans", "open_spans"} <= tables
    assert not {"spans_old", "open_spans_old"} & tables
    store = open_history(str(path))
    try:
        assert normal(readings(store)) == normal(expected)
    finally:
        store.close()


def test_a_time_keeps_its_milliseconds(tmp_path: Path) -> None:
    # A real clock's times (a fraction of a second) read back to the millisecond.
    path = tmp_path / "history.sqlite3"
    store = open_history(str(path), host=LOCAL_HOST, write=True)
    (tmp_path / "old").mkdir()
    old = open_history(str(_copy(tmp_path / "old", FILE_V3)))
    entry = old.entries_at(NOW - timedelta(minutes=7))[0]
    old.close()
    start = NOW - timedelta(minutes=3, microseconds=-123_000)
    end = start + timedelta(seconds=2, microseconds=457_000)
    span = LockSpan(LOCAL_HOST, entry.lock.id, "file", "a", "/a", "active", (), "", start)
    batch = Batch()
    batch.opened.append((span, entry))
    batch.closed.append((entry.lock.id, end))
    store.record(batch, poll_seconds=1.0)
    store.close()
    store = open_history(str(path))
    try:
        (found,) = store.lock_spans(None, None)
        assert (found.start, found.end) == (start, end)
        assert [e.lock.id for e in store.entries_at(end - timedelta(milliseconds=1))] == [
            entry.lock.id
        ]
        assert store.entries_at(end) == []
        assert store.lock_spans(end, None) == [found]
        assert store.lock_spans(end + timedelta(milliseconds=1), None) == []
        assert end in store.change_times(start, end)
    finally:
        store.close()
