"""The history store's SQL, shared by SQLite and PostgreSQL: one schema (a host
column on every row; the tables in schema.py), written in `?` placeholders (the
PostgreSQL store turns them into `%s`). Times are float seconds since the epoch
(UTC), a lock span's integer milliseconds (schema.py). A lock span lives in
`open_spans` while it goes on and is written into `spans` once, with its end,
when it ends.

Rows of a recorder session (`sessions`) that died without closing stay open;
readers end them at that session's last heartbeat once it is older than
`DEAD_AFTER` seconds (or a later session of the same host started), so a
SIGKILL loses at most what the writer had not flushed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from lockwatch.history.base import SCHEMA_VERSION, Batch, HistoryError
from lockwatch.history.reading import Reader
from lockwatch.history.rows import ms, ts, undigested, who_json
from lockwatch.history.schema import HEAD, TABLES
from lockwatch.history.unpack import pack
from lockwatch.model.changes import Entry
from lockwatch.model.episodes import TRAIL_STATES
from lockwatch.model.history import ActionMark, LockSpan, WaitSpan

# How often a live recorder says so, and how long after its last word a
# recorder that never closed counts as dead.
BEAT_SECONDS = 30.0
DEAD_AFTER = 3 * BEAT_SECONDS
# Bounded reads: no query hands back more rows than this, no entry is decoded
# from more bytes than this.
MAX_ROWS = 5_000_000

PRUNED = ("waits", "outages")
# A closed session's end (float seconds) as a span's end (milliseconds).
_ENDED = "CAST(round(s.ended * 1000) AS BIGINT)"


class SqlStore(Reader):
    """The store over a DB-API connection; subclasses open it and say how
    placeholders, binary values and errors are spelt."""

    name: str
    host: str
    placeholder = "?"

    def __init__(self, connection: Any, *, name: str, host: str) -> None:
        self._db = connection
        self.name = name
        self.host = host
        self._session: int | None = None
        # Each lock's reference and base entry (lockrefs), as looked up or made.
        self._refs: dict[str, tuple[int, bytes]] = {}
        # Each (state, reason codes) pair's row in `kinds`, as looked up or made.
        self._kinds: dict[tuple[str, str], int] = {}
        # The schema version of what is read (a reader does not migrate).
        self.version = SCHEMA_VERSION
        self._sessions: dict[int, tuple[str, float | None]] | None = None

    # --- plumbing -----------------------------------------------------------

    def _sql(self, text: str) -> str:
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    def _rows(self, text: str, args: Sequence[Any] = ()) -> list[Any]:
        try:
            cursor = self._db.execute(self._sql(text), tuple(args))
            return list(cursor.fetchmany(MAX_ROWS))
        except Exception as exc:
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> HistoryError:
        return HistoryError(f"{self.name}: {exc}")

    def _blob(self, data: bytes) -> Any:
        return data

    def _insert_id(self, text: str, args: Sequence[Any]) -> int:
        cursor = self._db.execute(self._sql(text), tuple(args))
        return int(cursor.lastrowid or 0)

    def _begin(self) -> None:
        """Start the transaction a migration runs in (where DDL does not)."""

    def _commit(self) -> None:
        self._db.commit()

    def _rollback(self) -> None:
        # Rows made in the transaction are gone: so are their ids.
        self._refs.clear()
        self._kinds.clear()
        with contextlib.suppress(Exception):  # the first error is the one to report
            self._db.rollback()

    def check_version(self) -> int | None:
        rows = self._rows("SELECT value FROM meta WHERE key = 'schema'")
        if not rows:
            return None
        try:
            version = int(rows[0][0])
        except (TypeError, ValueError):
            raise HistoryError(
                f"{self.name}: not a lockwatch history (a bad schema version)"
            ) from None
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"{self.name}: written by a newer lockwatch (history schema {version};"
                f" this one reads up to {SCHEMA_VERSION}): upgrade lockwatch, or use --no-history"
            )
        self.version = version
        return version

    def create(
        self, serial: str, blob: str, view: str = "VIEW IF NOT EXISTS", clustered: str = ""
    ) -> None:
        """Make what is missing, migrating an older schema first (in the one
        transaction: a migration that fails leaves the file as it was)."""
        from lockwatch.history import schema

        formats = {"serial": serial, "blob": blob, "view": view, "clustered": clustered}
        for statement in HEAD:
            self._db.execute(statement.format(**formats))
        self._begin()
        version = self.check_version()
        if version is not None and version < SCHEMA_VERSION:
            schema.migrate(self, version, formats)
        else:
            for statement in TABLES:
                self._db.execute(statement.format(**formats))
        self._db.execute(
            self._sql(
                "INSERT INTO meta (key, value) VALUES ('schema', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            ),
            (str(SCHEMA_VERSION),),
        )
        self.version = SCHEMA_VERSION
        self._commit()

    # --- sessions -------------------------------------------------------------

    def _session_ends(self) -> dict[int, tuple[str, float | None]]:
        """Each session's host and where its open rows end (None: it lives)."""
        if self._sessions is not None:
            return self._sessions
        rows = self._rows("SELECT id, host, started, beat, ended FROM sessions")
        now = time.time()
        later: dict[str, float] = {}
        for _, host, started, _, _ in rows:
            later[host] = max(later.get(host, started), started)
        ends: dict[int, tuple[str, float | None]] = {}
        for sid, host, _, beat, ended in rows:
            if sid == self._session:
                ends[sid] = (host, None)
            elif ended is not None:
                ends[sid] = (host, ended)
            elif beat < now - DEAD_AFTER:
                ends[sid] = (host, beat)
            else:
                ends[sid] = (host, None)
        self._sessions = ends
        return ends

    def _stop(self, session: int, stop: float | None) -> float | None:
        if stop is not None:
            return stop
        found = self._session_ends().get(session)
        return None if found is None else found[1]

    def _start_session(self, poll_seconds: float, at: float) -> int:
        import os

        sid = self._insert_id(
            "INSERT INTO sessions (host, pid, started, beat, poll) VALUES (?, ?, ?, ?, ?)",
            (self.host, os.getpid(), at, at, poll_seconds),
        )
        self._session = sid
        self._sessions = None
        self._end_closed_sessions()
        return sid

    def _end_closed_sessions(self) -> None:
        """Move the open spans of sessions that were closed into `spans`, ended
        where readers end them (the session's end): `open_spans` stays the
        locks being watched now, however often recorders restart."""
        self._db.execute(
            "INSERT INTO spans (session, ref, kind, holder, stop, dur, entry)"
            " SELECT o.session, o.ref, o.kind, o.holder, " + _ENDED + ", " + _ENDED + " - o.start,"
            " o.entry"
            " FROM open_spans AS o JOIN sessions AS s ON s.id = o.session"
            " WHERE s.ended IS NOT NULL ON CONFLICT DO NOTHING"
        )
        self._db.execute(
            "DELETE FROM open_spans WHERE session IN"
            " (SELECT id FROM sessions WHERE ended IS NOT NULL)"
        )

    # --- writing --------------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One transaction: committed, or rolled back with its error said in
        one line (the database's own error as the store's)."""
        try:
            yield
            self._commit()
        except HistoryError:
            self._rollback()
            raise
        except Exception as exc:
            self._rollback()
            raise self._error(exc) from exc

    def record(self, batch: Batch, *, poll_seconds: float) -> None:
        with self._writing():
            self._record(batch, poll_seconds)

    def _record(self, batch: Batch, poll_seconds: float) -> None:
        from lockwatch.sources.recording import know_sources

        know_sources()
        first = min((ts(s.start) for s, _ in batch.opened), default=time.time())
        sid = (
            self._session if self._session is not None else self._start_session(poll_seconds, first)
        )
        # In time order, an end before a start at one instant: a batch holds several
        # polls, and a span may start and end within it (closed after it is made).
        steps: list[tuple[float, int, int]] = [
            (ts(end), 0, n) for n, (_, end) in enumerate(batch.closed)
        ] + [(ts(span.start), 1, n) for n, (span, _) in enumerate(batch.opened)]
        for _, kind, n in sorted(steps):
            if kind == 0:
                lock_id, end = batch.closed[n]
                ref = self._ref_of(lock_id)
                if ref is not None:
                    self._close_span(sid, ref[0], ms(end))
                continue
            self._open_span(sid, *batch.opened[n])
        self._write_waits(sid, batch)
        for mark in batch.actions:
            self._insert_action(sid, mark)
        self._write_outages(sid, batch)

    def _close_span(self, sid: int, ref: int, stop: int) -> None:
        """Move the lock's open span into `spans`, written once with its end."""
        self._db.execute(
            self._sql(
                "INSERT INTO spans (session, ref, kind, holder, stop, dur, entry)"
                " SELECT session, ref, kind, holder, ?, ? - start, entry FROM open_spans"
                " WHERE session = ? AND ref = ? ON CONFLICT DO NOTHING"
            ),
            (stop, stop, sid, ref),
        )
        self._db.execute(
            self._sql("DELETE FROM open_spans WHERE session = ? AND ref = ?"), (sid, ref)
        )

    def _open_span(self, sid: int, span: LockSpan, entry: Entry) -> None:
        from lockwatch.model.codec import dumps_line

        whole = dumps_line(undigested(entry))
        ref = self._ref_of(span.lock_id) or self._new_ref(span, whole)
        packed = None if whole == ref[1] else pack(whole, ref[1])
        self._db.execute(
            self._sql(
                "INSERT INTO open_spans (session, ref, kind, holder, start, entry)"
                " VALUES (?, ?, ?, ?, ?, ?)"
            ),
            (
                sid,
                ref[0],
                self._kind_of(span.state, " ".join(span.reasons)),
                span.holder if span.state in TRAIL_STATES else "",
                ms(span.start),
                None if packed is None else self._blob(packed),
            ),
        )

    def _kind_of(self, state: str, reasons: str) -> int:
        """The `kinds` row of (state, reason codes), made the first time."""
        found = self._kinds.get((state, reasons))
        if found is None:
            rows = self._rows(
                "SELECT id FROM kinds WHERE state = ? AND reasons = ?", (state, reasons)
            )
            found = (
                int(rows[0][0])
                if rows
                else self._insert_id(
                    "INSERT INTO kinds (state, reasons) VALUES (?, ?)", (state, reasons)
                )
            )
            self._kinds[(state, reasons)] = found
        return found

    def _ref_of(self, lock_id: str) -> tuple[int, bytes] | None:
        """The lock's reference and base entry, as this host recorded it first."""
        found = self._refs.get(lock_id)
        if found is None:
            rows = self._rows(
                "SELECT id, base FROM lockrefs WHERE host = ? AND lock_id = ?",
                (self.host, lock_id),
            )
            if rows:
                found = self._refs[lock_id] = (int(rows[0][0]), bytes(rows[0][1]))
        return found

    def _new_ref(self, span: LockSpan, whole: bytes) -> tuple[int, bytes]:
        ref = self._insert_id(
            "INSERT INTO lockrefs (host, lock_id, source, name, place, base)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (self.host, span.lock_id, span.source, span.name, span.place, self._blob(whole)),
        )
        found = self._refs[span.lock_id] = (ref, whole)
        return found

    def _write_waits(self, sid: int, batch: Batch) -> None:
        close = self._sql(
            "UPDATE waits SET stop = ?, outcome = ? WHERE session = ? AND server = ?"
            " AND waiter_node = ? AND blocker_node = ? AND stop IS NULL"
        )
        # In time order, as the lock spans (a wait may start and end in one batch).
        steps: list[tuple[float, int, int]] = [
            (ts(end), 0, n) for n, (_, end, _) in enumerate(batch.waits_closed)
        ] + [(ts(span.start), 1, n) for n, span in enumerate(batch.waits_opened)]
        for _, kind, n in sorted(steps):
            if kind == 1:
                self._insert_wait(sid, batch.waits_opened[n])
                continue
            (server, waiter, blocker), end, outcome = batch.waits_closed[n]
            self._db.execute(close, (ts(end), outcome, sid, server, waiter, blocker))

    def _insert_wait(self, sid: int, span: WaitSpan) -> None:
        self._db.execute(
            self._sql(
                "INSERT INTO waits (session, host, source, server, resource, mode, waiter_node,"
                " blocker_node, waiter, blocker, start, stop, outcome, origin, cycle)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (
                sid,
                span.host,
                span.source,
                span.server,
                span.resource,
                span.mode,
                span.waiter.node,
                span.blocker.node,
                who_json(span.waiter),
                who_json(span.blocker),
                ts(span.start),
                None if span.end is None else ts(span.end),
                span.outcome,
                span.origin,
                int(span.cycle),
            ),
        )

    def _insert_action(self, sid: int, mark: ActionMark) -> None:
        self._db.execute(
            self._sql(
                "INSERT INTO actions (session, host, at, lock_id, action, operator, audit_id,"
                " result, node) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (
                sid,
                mark.host,
                ts(mark.at),
                mark.lock_id,
                mark.action,
                mark.operator,
                mark.audit_id,
                mark.result,
                mark.node,
            ),
        )

    def _write_outages(self, sid: int, batch: Batch) -> None:
        close = self._sql(
            "UPDATE outages SET stop = ? WHERE session = ? AND source = ? AND name = ?"
            " AND stop IS NULL"
        )
        insert = self._sql(
            "INSERT INTO outages (session, host, source, name, start, detail)"
            " VALUES (?, ?, ?, ?, ?, ?)"
        )
        # In time order, as the spans: an outage may begin and end within one batch.
        steps: list[tuple[float, int, int]] = [
            (ts(end), 0, n) for n, (_, end) in enumerate(batch.outages_closed)
        ] + [(ts(o.start), 1, n) for n, o in enumerate(batch.outages_opened)]
        for _, kind, n in sorted(steps):
            if kind == 0:
                (source, name), end = batch.outages_closed[n]
                self._db.execute(close, (ts(end), sid, source, name))
                continue
            outage = batch.outages_opened[n]
            self._db.execute(
                insert,
                (sid, outage.host, outage.source, outage.name, ts(outage.start), outage.detail),
            )

    def beat(self, at: datetime) -> None:
        if self._session is None:
            return
        with self._writing():
            self._db.execute(
                self._sql("UPDATE sessions SET beat = ? WHERE id = ?"), (ts(at), self._session)
            )

    def add_waits(self, spans: Sequence[WaitSpan], *, poll_seconds: float = 0.0) -> int:
        added = 0
        with self._writing():
            sid = self._session
            if sid is None:
                sid = self._start_session(poll_seconds, time.time())
            for span in spans:
                if self._rows(
                    "SELECT 1 FROM waits WHERE host = ? AND server = ? AND waiter_node = ?"
                    " AND blocker_node = ? AND start = ? AND origin = ?",
                    (
                        span.host,
                        span.server,
                        span.waiter.node,
                        span.blocker.node,
                        ts(span.start),
                        span.origin,
                    ),
                ):
                    continue
                self._insert_wait(sid, span)
                added += 1
        return added

    def record_action(self, mark: ActionMark) -> None:
        with self._writing():
            sid = (
                self._session
                if self._session is not None
                else self._start_session(0.0, ts(mark.at))
            )
            self._insert_action(sid, mark)

    def prune(self, before: datetime, *, most: int = 5000) -> int:
        gone: int = 0
        cut = ts(before)
        with self._writing():
            # Spans by their end (the table's key): up to the `most`-th oldest end.
            cursor = self._db.execute(
                self._sql(
                    "DELETE FROM spans WHERE stop < ? AND stop <= (SELECT max(stop) FROM"
                    " (SELECT stop FROM spans WHERE stop < ? ORDER BY stop LIMIT ?) AS oldest)"
                ),
                (round(cut * 1000), round(cut * 1000), most),
            )
            gone += max(int(cursor.rowcount), 0)
            for table in PRUNED:
                cursor = self._db.execute(
                    self._sql(
                        f"DELETE FROM {table} WHERE id IN"
                        f" (SELECT id FROM {table} WHERE stop < ? LIMIT ?)"
                    ),
                    (cut, most),
                )
                gone += max(int(cursor.rowcount), 0)
            cursor = self._db.execute(
                self._sql(
                    "DELETE FROM actions WHERE id IN (SELECT id FROM actions WHERE at < ? LIMIT ?)"
                ),
                (cut, most),
            )
            gone += max(int(cursor.rowcount), 0)
        return gone

    def close(self) -> None:
        try:
            if self._session is not None:
                self._db.execute(
                    self._sql("UPDATE sessions SET ended = beat WHERE id = ?"), (self._session,)
                )
                self._commit()
        except Exception:  # noqa: BLE001 - a dead session is ended by readers anyway
            self._rollback()
        finally:
            self._db.close()
