"""The history in one SQLite file (the default): standard library, WAL.

The file follows the audit log's trust rules: made 0600 in a directory only its
owner can write; refused (one line) when it is not a regular file of yours or
others can write it. A file that is not a lockwatch history, or one of a newer
schema, is one line too. Two recorders on one file both write: WAL lets readers
go on during a write, and a writer waits (busy_timeout) for the other's commit.
A size cap (`max_mb`) turns into SQLite's max_page_count: past it a write fails
as on a full disk, and the recorder stops saying so.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from lockwatch import trusted
from lockwatch.history.base import HistoryError
from lockwatch.history.store import SqlStore

BUSY_MS = 5000
WAL_KEPT_BYTES = 1 << 20
APPLICATION_ID = 0x4C4B5748  # "LKWH": `file` and lockwatch tell the file by it


class SqliteStore(SqlStore):
    @classmethod
    def open(
        cls, path: Path, *, host: str, write: bool, max_mb: float | None = None
    ) -> SqliteStore:
        name = str(path)
        if write:
            _make_own(path)
        elif not path.exists():
            raise HistoryError(f"{name}: no history recorded here (no such file)")
        why = trusted.own_file_problem(path)
        if why is not None and (write or "can write it" in why):
            raise HistoryError(f"{name}: refused: {why}")
        # Two recorders starting on a new file (a `serve` and a dashboard) race to
        # make it: the loser's journal-mode switch or schema is refused as busy at
        # once, not after busy_timeout. Tried again, within the same bound.
        deadline = time.monotonic() + BUSY_MS / 1000
        while True:
            store = cls(_connect(name, write), name=name, host=host)
            try:
                store._prepare(write, max_mb)
                return store
            except _Busy as busy:
                if time.monotonic() > deadline:
                    raise HistoryError(f"{name}: {busy}") from None
                time.sleep(_RETRY_S)

    def _prepare(self, write: bool, max_mb: float | None) -> None:
        db = self._db
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            # Both read in one snapshot: another recorder making the file sets its
            # id, then its tables; read apart, a file half made looked foreign.
            db.execute("BEGIN")
            application = db.execute("PRAGMA application_id").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            db.execute("COMMIT")
            if application != APPLICATION_ID and tables:
                raise HistoryError(f"{self.name}: not a lockwatch history (another SQLite file)")
            if write:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
                # The WAL is cut back to this after a checkpoint (else it keeps its
                # largest size for good: megabytes beside a small history).
                db.execute(f"PRAGMA journal_size_limit = {WAL_KEPT_BYTES}")
                if max_mb is not None:
                    page = db.execute("PRAGMA page_size").fetchone()[0]
                    db.execute(f"PRAGMA max_page_count = {max(16, int(max_mb * 2**20 / page))}")
                if not tables:
                    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                # Made if new, migrated if older (a reader reads either as it is).
                self.create("INTEGER PRIMARY KEY", "BLOB", clustered=" WITHOUT ROWID")
            if not tables and not write:
                raise HistoryError(f"{self.name}: no history recorded here (an empty file)")
            if self.check_version() is None:
                raise HistoryError(f"{self.name}: not a lockwatch history (no schema version)")
        except sqlite3.DatabaseError as exc:
            db.close()
            if write and getattr(exc, "sqlite_errorname", "").startswith("SQLITE_BUSY"):
                raise _Busy(str(exc)) from None
            if getattr(exc, "sqlite_errorname", "") in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
                raise HistoryError(f"{self.name}: not a lockwatch history ({exc})") from None
            raise self._error(exc) from None
        except HistoryError:
            db.close()
            raise

    def _begin(self) -> None:
        # Python's sqlite3 runs DDL outside a transaction unless one is open:
        # a migration is all or nothing, and one recorder at a time makes it.
        if not self._db.in_transaction:
            self._db.execute("BEGIN IMMEDIATE")

    def _error(self, exc: Exception) -> HistoryError:
        text = str(exc)
        code = getattr(exc, "sqlite_errorname", "")
        if "full" in text or code.startswith(("SQLITE_FULL", "SQLITE_IOERR")):
            # SQLite says "disk I/O error" where a write found no room (ENOSPC).
            return HistoryError(f"{self.name}: disk full (or past history.max_mb): {text}")
        return HistoryError(f"{self.name}: {text}")


class _Busy(Exception):
    """Preparing a file another recorder is preparing too: try again."""


_RETRY_S = 0.05


def _connect(name: str, write: bool) -> sqlite3.Connection:
    try:
        return sqlite3.connect(
            name if write else f"file:{name}?mode=ro",
            uri=not write,
            timeout=BUSY_MS / 1000,
            check_same_thread=False,
            isolation_level="DEFERRED",
        )
    except sqlite3.Error as exc:
        raise HistoryError(f"{name}: cannot open: {exc}") from exc


def _make_own(path: Path) -> None:
    """Make the file (0600, in a directory made 0700) if it is not there: an
    existing one is checked by the caller."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, _ = trusted.open_own(path, os.O_RDWR)
        os.close(fd)
    except trusted.Refused as exc:
        raise HistoryError(f"{path}: refused: {exc}") from exc
    except OSError as exc:
        raise HistoryError(f"{path}: cannot make it: {exc.strerror or exc}") from exc
