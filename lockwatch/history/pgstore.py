"""The history in a PostgreSQL database, for a fleet (issue 44, item 6): the
same schema as the SQLite file, every row with its host, so every lockwatch that
records there shares one timeline and `lockwatch history --history
postgresql://…` answers for all of them. No collector of lockwatch's own:
PostgreSQL is the store (psycopg 3).

Every round trip has a deadline (connect_timeout, statement_timeout): a server
that stops answering stops the recording, never the dashboard. The DSN's
password is never shown (`display_name`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lockwatch.history.base import HistoryError
from lockwatch.history.store import SqlStore

CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_MS = 30_000
# Schema creation by two recorders at once: one at a time.
_CREATE_LOCK = 0x6C6B7768  # "lkwh"
_TIMEOUT = f"-c statement_timeout={STATEMENT_TIMEOUT_MS}"


class PgStore(SqlStore):
    placeholder = "%s"

    @classmethod
    def open(cls, dsn: str, *, host: str, write: bool) -> PgStore:
        import psycopg
        from psycopg import conninfo

        from lockwatch.sources.urls import scrub

        try:
            parts = conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:
            raise HistoryError("the --history DSN cannot be read (check its quoting)") from None
        password = str(parts.get("password") or "")
        name = scrub(dsn, [password])
        try:
            connection = psycopg.connect(
                dsn,
                connect_timeout=CONNECT_TIMEOUT_S,
                # Added to the DSN's own options (a search_path, say), not in their place.
                options=f"{parts.get('options') or ''} {_TIMEOUT}".strip(),
                application_name="lockwatch-history",
                autocommit=not write,
            )
        except (psycopg.Error, OSError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise HistoryError(f"{name}: cannot connect: {scrub(first, [password])}") from None
        store = cls(connection, name=name, host=host)
        store._prepare(write)
        return store

    def _prepare(self, write: bool) -> None:
        import psycopg

        try:
            exists = self._db.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]
            if write:
                self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
                self.create("BIGSERIAL PRIMARY KEY", "BYTEA", "OR REPLACE VIEW")
            elif not exists:
                raise HistoryError(f"{self.name}: no history recorded here (no lockwatch tables)")
            if self.check_version() is None:
                raise HistoryError(f"{self.name}: not a lockwatch history (no schema version)")
        except psycopg.Error as exc:
            self._db.close()
            raise self._error(exc) from None
        except HistoryError:
            self._db.close()
            raise

    def _error(self, exc: Exception) -> HistoryError:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return HistoryError(f"{self.name}: {first}")

    def _insert_id(self, text: str, args: Sequence[Any]) -> int:
        cursor = self._db.execute(self._sql(text + " RETURNING id"), tuple(args))
        return int(cursor.fetchone()[0])
