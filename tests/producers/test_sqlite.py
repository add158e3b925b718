"""SQLite databases as the real SQLite library (Python's sqlite3 module) locks
them: found under a PATH whatever their names, their kernel locks read in
SQLite's words, one row per database (the kernel's facts on its record)."""

from __future__ import annotations

import json
import socket
import sqlite3
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.formats.common import (
    Holder,
    codes,
    hold_in,
    holder_script,
    killed_at_teardown,
    ls,
    run_break,
)

Record = dict[str, Any]


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    yield from killed_at_teardown()


def _database(directory: Path, *, wal: bool = False) -> Path:
    path = directory / "app.db"  # not a lock's name: found because it is locked
    with sqlite3.connect(path) as db:
        if wal:
            db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
    return path


def _connection(path: Path, then: str) -> list[str]:
    take = (
        "import sqlite3\n"
        f"db = sqlite3.connect({str(path)!r}, isolation_level=None, timeout=0)\n"
        f"{then}"
    )
    return [sys.executable, "-c", holder_script(take, "db.execute('ROLLBACK')")]


def _row(directory: Path, name: str) -> Record:
    listing = ls(directory)
    rows = [lock for lock in listing["locks"] if Path(lock["path"]).name == name]
    assert len(rows) == 1, [(lock["source"], lock["path"]) for lock in listing["locks"]]
    row: Record = rows[0]
    return row


def _messages(row: Record) -> str:
    reasons = row["reasons"]
    assert isinstance(reasons, list)
    return " | ".join(reason["message"] for reason in reasons)


def test_a_write_transaction_is_reserved_held_by_its_process(
    tmp_path: Path, holders: list[Holder]
) -> None:
    path = _database(tmp_path)
    writer = hold_in(
        holders,
        _connection(path, "db.execute('BEGIN IMMEDIATE')\ndb.execute('INSERT INTO t VALUES (1)')"),
    )
    row = _row(tmp_path, "app.db")
    assert row["source"] == "file" and row["format"] == "sqlite", row
    assert row["state"] == "active", row
    holder = row["holder"]
    assert isinstance(holder, dict) and holder["pid"] == writer.proc.pid, row
    assert "sqlite_write" in codes(row), row
    assert "RESERVED" in _messages(row) and "write transaction" in _messages(row), row
    assert " more" not in row["reasons"][0]["message"], row  # one process, two ranges
    # SQLite's own answer: another connection cannot write now.
    other = sqlite3.connect(path, timeout=0)
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        other.execute("BEGIN IMMEDIATE")
    other.close()


def test_a_reader_is_shared_and_a_writer_comes_first(tmp_path: Path, holders: list[Holder]) -> None:
    path = _database(tmp_path)
    reader = hold_in(
        holders, _connection(path, "db.execute('BEGIN')\ndb.execute('SELECT * FROM t').fetchall()")
    )
    row = _row(tmp_path, "app.db")
    assert row["state"] == "active", row
    assert "sqlite_read" in codes(row), row
    assert f"(pid {reader.proc.pid}): SHARED (reading)" in _messages(row), row
    writer = hold_in(holders, _connection(path, "db.execute('BEGIN IMMEDIATE')"))
    row = _row(tmp_path, "app.db")
    holder = row["holder"]
    assert isinstance(holder, dict) and holder["pid"] == writer.proc.pid, row
    assert "sqlite_write" in codes(row) and "sqlite_read" in codes(row), row


def test_wal_mode_names_the_shm_write_lock_on_the_database_row(
    tmp_path: Path, holders: list[Holder]
) -> None:
    path = _database(tmp_path, wal=True)
    idle = hold_in(holders, _connection(path, "db.execute('SELECT * FROM t').fetchall()"))
    writer = hold_in(
        holders,
        _connection(path, "db.execute('BEGIN IMMEDIATE')\ndb.execute('INSERT INTO t VALUES (1)')"),
    )
    row = _row(tmp_path, "app.db")
    holder = row["holder"]
    assert isinstance(holder, dict) and holder["pid"] == writer.proc.pid, row
    said = _messages(row)
    assert "the WAL write lock (a write transaction) in WAL mode" in said, row
    assert f"(pid {idle.proc.pid}): open in WAL mode (no transaction)" in said, row


def test_a_database_nobody_locks_is_not_listed_and_named_is_free(tmp_path: Path) -> None:
    _database(tmp_path)
    names = [Path(lock["path"]).name for lock in ls(tmp_path)["locks"]]
    assert "app.db" not in names
    listing = ls(tmp_path / "app.db")
    (row,) = listing["locks"]
    assert row["format"] == "sqlite" and row["state"] == "free", row
    # Free, but a database: a break never moves it.
    home = tmp_path / "home"
    done = run_break(row["id"], home, tmp_path / "audit.jsonl")
    assert done.returncode != 0 and "never moves it" in done.stderr + done.stdout, done
    assert (tmp_path / "app.db").exists()


def test_who_else_has_it_open_is_told(tmp_path: Path, holders: list[Holder]) -> None:
    path = _database(tmp_path)
    writer = hold_in(holders, _connection(path, "db.execute('BEGIN IMMEDIATE')"))
    # Open, no transaction (a rollback-journal connection holds no lock then): a
    # writer that gets "database is locked" looks like this between its retries.
    idle = hold_in(holders, _connection(path, "db.execute('SELECT 1').fetchall()"))
    row = _row(tmp_path, "app.db")
    assert row["holder"]["pid"] == writer.proc.pid, row
    assert "sqlite_open" in codes(row), row
    said = next(r["message"] for r in row["reasons"] if r["code"] == "sqlite_open")
    assert f"pid {idle.proc.pid}" in said and "busy_timeout" in said, said


def test_a_slice_holding_the_database_alone_still_reads_its_shm(
    tmp_path: Path, holders: list[Holder]
) -> None:
    """`ls --json` judges slices of a tree in workers, each with the kernel's word
    on its own files: the database's slice need not hold its -shm, whose write
    lock names the WAL writer."""
    import orjson

    from lockwatch.sources.files.evidence import kernel_listed
    from lockwatch.sources.files.listing import _judge
    from lockwatch.sources.files.scanner import Candidate

    path = _database(tmp_path, wal=True)
    writer = hold_in(
        holders,
        _connection(path, "db.execute('BEGIN IMMEDIATE')\ndb.execute('INSERT INTO t VALUES (1)')"),
    )
    slice_ = [Candidate(str(path), False, named=True)]  # the database, not its -shm
    judged = _judge(slice_, datetime.now(UTC), socket.gethostname(), kernel_listed())
    (row,) = orjson.loads(judged.locks)
    assert row["holder"]["pid"] == writer.proc.pid, row
    assert "sqlite_write" in codes(row), row


def test_with_kernel_a_write_transaction_is_one_row(tmp_path: Path, holders: list[Holder]) -> None:
    """Issue 46, item 7: SQLite's write transaction is two POSIX locks of one
    process (RESERVED's byte and SHARED's range); `ls DIR --kernel` listed each
    as an `active posix app.db` row beside the database's own. One holder's
    ranges are one lock: the database's row carries them both."""
    from tests.kernel.test_kernel_break import lockwatch

    (tmp_path / "data").mkdir()
    path = _database(tmp_path / "data")
    writer = hold_in(
        holders,
        _connection(path, "db.execute('BEGIN IMMEDIATE')\ndb.execute('INSERT INTO t VALUES (1)')"),
    )
    done = lockwatch("ls", "--json", "--kernel", str(path.parent), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [lock for lock in json.loads(done.stdout)["locks"] if lock["path"] == str(path)]
    assert [(row["source"], row["format"]) for row in rows] == [("file", "sqlite")], rows
    (row,) = rows
    assert row["holder"]["pid"] == writer.proc.pid and row["state"] == "active", row
    # The table, as the operator reads it: one line for the database, its own.
    table = lockwatch("ls", "--kernel", str(path.parent), cwd=tmp_path)
    lines = [line for line in table.stdout.splitlines() if "app.db" in line]
    assert len(lines) == 1 and " sqlite " in lines[0], table.stdout
