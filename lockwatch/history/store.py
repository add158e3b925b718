"""The history store's SQL, shared by SQLite and PostgreSQL: one schema (a host
column on every row), written in `?` placeholders (the PostgreSQL store turns
them into `%s`). Times are float seconds since the epoch (UTC).

Rows of a recorder session (`sessions`) that died without closing stay open;
readers end them at that session's last heartbeat once it is older than
`DEAD_AFTER` seconds (or a later session of the same host started), so a
SIGKILL loses at most what the writer had not flushed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from lockwatch.history.api import SCHEMA_VERSION, Batch, HistoryError
from lockwatch.model import episodes as folding
from lockwatch.model.changes import Entry
from lockwatch.model.history import ActionMark, Episode, LockSpan, Outage, WaitSpan, Who
from lockwatch.model.lock import Lock

# How often a live recorder says so, and how long after its last word a
# recorder that never closed counts as dead.
BEAT_SECONDS = 30.0
DEAD_AFTER = 3 * BEAT_SECONDS
# Bounded reads: no query hands back more rows than this, no entry is decoded
# from more bytes than this.
MAX_ROWS = 5_000_000
MAX_ENTRY_BYTES = 16 * 1024 * 1024

TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sessions (id {serial}, host TEXT NOT NULL, pid INTEGER,"
    " started DOUBLE PRECISION NOT NULL, beat DOUBLE PRECISION NOT NULL,"
    " ended DOUBLE PRECISION, poll DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS locks (id {serial}, session BIGINT NOT NULL,"
    " host TEXT NOT NULL, lock_id TEXT NOT NULL, source TEXT NOT NULL, name TEXT NOT NULL,"
    " place TEXT NOT NULL, state TEXT NOT NULL, reasons TEXT NOT NULL, holder TEXT NOT NULL,"
    " start DOUBLE PRECISION NOT NULL, stop DOUBLE PRECISION, entry {blob})",
    "CREATE INDEX IF NOT EXISTS locks_start ON locks (start)",
    "CREATE INDEX IF NOT EXISTS locks_stop ON locks (stop)",
    "CREATE INDEX IF NOT EXISTS locks_open ON locks (session, lock_id) WHERE stop IS NULL",
    "CREATE TABLE IF NOT EXISTS waits (id {serial}, session BIGINT NOT NULL,"
    " host TEXT NOT NULL, source TEXT NOT NULL, server TEXT NOT NULL, resource TEXT NOT NULL,"
    " mode TEXT NOT NULL, waiter_node TEXT NOT NULL, blocker_node TEXT NOT NULL,"
    " waiter TEXT NOT NULL, blocker TEXT NOT NULL, start DOUBLE PRECISION NOT NULL,"
    " stop DOUBLE PRECISION, outcome TEXT, origin TEXT NOT NULL, cycle INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS waits_start ON waits (start)",
    "CREATE INDEX IF NOT EXISTS waits_stop ON waits (stop)",
    "CREATE INDEX IF NOT EXISTS waits_open ON waits (session, server, waiter_node)"
    " WHERE stop IS NULL",
    "CREATE TABLE IF NOT EXISTS actions (id {serial}, session BIGINT NOT NULL,"
    " host TEXT NOT NULL, at DOUBLE PRECISION NOT NULL, lock_id TEXT NOT NULL,"
    " action TEXT NOT NULL, operator TEXT NOT NULL, audit_id BIGINT, result TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS actions_at ON actions (at)",
    "CREATE TABLE IF NOT EXISTS outages (id {serial}, session BIGINT NOT NULL,"
    " host TEXT NOT NULL, source TEXT NOT NULL, name TEXT NOT NULL,"
    " start DOUBLE PRECISION NOT NULL, stop DOUBLE PRECISION, detail TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS outages_start ON outages (start)",
)
PRUNED = ("locks", "waits", "outages")


def ts(at: datetime) -> float:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()


def dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _opt_dt(seconds: float | None) -> datetime | None:
    return None if seconds is None else dt(seconds)


def who_json(who: Who) -> str:
    data = {
        "node": who.node,
        "pid": who.pid,
        "application": who.application,
        "user": who.user,
        "state": who.state,
        "query": who.query,
        "since": None if who.since is None else ts(who.since),
        "lock_id": who.lock_id,
    }
    return orjson.dumps({k: v for k, v in data.items() if v is not None}).decode()


def who_of(text: str) -> Who:
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        data = {}
    if not isinstance(data, dict):
        data = {}

    def text_of(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    pid, since = data.get("pid"), data.get("since")
    return Who(
        node=text_of("node") or "?",
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        application=text_of("application"),
        user=text_of("user"),
        state=text_of("state"),
        query=text_of("query"),
        since=dt(since) if isinstance(since, int | float) and not isinstance(since, bool) else None,
        lock_id=text_of("lock_id"),
    )


class SqlStore:
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
        return int(cursor.lastrowid)

    def _commit(self) -> None:
        self._db.commit()

    def _rollback(self) -> None:
        try:
            self._db.rollback()
        except Exception:  # noqa: BLE001 - the first error is the one to report
            pass

    def check_version(self) -> int | None:
        rows = self._rows("SELECT value FROM meta WHERE key = 'schema'")
        if not rows:
            return None
        try:
            version = int(rows[0][0])
        except (TypeError, ValueError):
            raise HistoryError(f"{self.name}: not a lockwatch history (a bad schema version)")
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"{self.name}: written by a newer lockwatch (history schema {version};"
                f" this one reads up to {SCHEMA_VERSION}): upgrade lockwatch, or use --no-history"
            )
        return version

    def create(self, serial: str, blob: str) -> None:
        for statement in TABLES:
            self._db.execute(statement.format(serial=serial, blob=blob))
        self.migrate()
        self._db.execute(
            self._sql("INSERT INTO meta (key, value) VALUES ('schema', ?)"
                      " ON CONFLICT (key) DO NOTHING"),
            (str(SCHEMA_VERSION),),
        )
        self._commit()

    def migrate(self) -> None:
        """Bring an older schema up to SCHEMA_VERSION (version 1 is the first:
        nothing to do yet). Each later version adds one step here."""

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
        for sid, host, started, beat, ended in rows:
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
        return sid

    # --- writing --------------------------------------------------------------

    def record(self, batch: Batch, *, poll_seconds: float) -> None:
        try:
            self._record(batch, poll_seconds)
            self._commit()
        except HistoryError:
            self._rollback()
            raise
        except Exception as exc:
            self._rollback()
            raise self._error(exc) from exc

    def _record(self, batch: Batch, poll_seconds: float) -> None:
        from lockwatch.model.codec import dumps_line
        from lockwatch.sources.recording import know_sources

        know_sources()
        first = min((ts(s.start) for s, _ in batch.opened), default=time.time())
        sid = self._session if self._session is not None else self._start_session(
            poll_seconds, first
        )
        execute = self._db.execute
        close = self._sql("UPDATE locks SET stop = ? WHERE session = ? AND lock_id = ? AND stop IS NULL")
        for lock_id, end in batch.closed:
            execute(close, (ts(end), sid, lock_id))
        insert = self._sql(
            "INSERT INTO locks (session, host, lock_id, source, name, place, state, reasons,"
            " holder, start, entry) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        for span, entry in batch.opened:
            blob = self._blob(dumps_line(entry))
            execute(
                insert,
                (sid, self.host, span.lock_id, span.source, span.name, span.place, span.state,
                 " ".join(span.reasons), span.holder, ts(span.start), blob),
            )
        self._write_waits(sid, batch)
        for mark in batch.actions:
            self._insert_action(sid, mark)
        self._write_outages(sid, batch)

    def _write_waits(self, sid: int, batch: Batch) -> None:
        close = self._sql(
            "UPDATE waits SET stop = ?, outcome = ? WHERE session = ? AND server = ?"
            " AND waiter_node = ? AND blocker_node = ? AND stop IS NULL"
        )
        for (server, waiter, blocker), end, outcome in batch.waits_closed:
            self._db.execute(close, (ts(end), outcome, sid, server, waiter, blocker))
        for span in batch.waits_opened:
            self._insert_wait(sid, span)

    def _insert_wait(self, sid: int, span: WaitSpan) -> None:
        self._db.execute(
            self._sql(
                "INSERT INTO waits (session, host, source, server, resource, mode, waiter_node,"
                " blocker_node, waiter, blocker, start, stop, outcome, origin, cycle)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (sid, span.host, span.source, span.server, span.resource, span.mode,
             span.waiter.node, span.blocker.node, who_json(span.waiter), who_json(span.blocker),
             ts(span.start), None if span.end is None else ts(span.end), span.outcome,
             span.origin, int(span.cycle)),
        )

    def _insert_action(self, sid: int, mark: ActionMark) -> None:
        self._db.execute(
            self._sql(
                "INSERT INTO actions (session, host, at, lock_id, action, operator, audit_id,"
                " result) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            (sid, mark.host, ts(mark.at), mark.lock_id, mark.action, mark.operator,
             mark.audit_id, mark.result),
        )

    def _write_outages(self, sid: int, batch: Batch) -> None:
        close = self._sql(
            "UPDATE outages SET stop = ? WHERE session = ? AND source = ? AND name = ?"
            " AND stop IS NULL"
        )
        for (source, name), end in batch.outages_closed:
            self._db.execute(close, (ts(end), sid, source, name))
        for outage in batch.outages_opened:
            self._db.execute(
                self._sql(
                    "INSERT INTO outages (session, host, source, name, start, detail)"
                    " VALUES (?, ?, ?, ?, ?, ?)"
                ),
                (sid, outage.host, outage.source, outage.name, ts(outage.start), outage.detail),
            )

    def beat(self, at: datetime) -> None:
        if self._session is None:
            return
        try:
            self._db.execute(
                self._sql("UPDATE sessions SET beat = ? WHERE id = ?"), (ts(at), self._session)
            )
            self._commit()
        except Exception as exc:
            self._rollback()
            raise self._error(exc) from exc

    def add_waits(self, spans: Sequence[WaitSpan], *, poll_seconds: float = 0.0) -> int:
        added = 0
        try:
            sid = self._session
            if sid is None:
                sid = self._start_session(poll_seconds, time.time())
            for span in spans:
                if self._rows(
                    "SELECT 1 FROM waits WHERE host = ? AND server = ? AND waiter_node = ?"
                    " AND blocker_node = ? AND start = ? AND origin = ?",
                    (span.host, span.server, span.waiter.node, span.blocker.node,
                     ts(span.start), span.origin),
                ):
                    continue
                self._insert_wait(sid, span)
                added += 1
            self._commit()
        except HistoryError:
            self._rollback()
            raise
        except Exception as exc:
            self._rollback()
            raise self._error(exc) from exc
        return added

    def record_action(self, mark: ActionMark) -> None:
        try:
            sid = self._session if self._session is not None else self._start_session(
                0.0, ts(mark.at)
            )
            self._insert_action(sid, mark)
            self._commit()
        except Exception as exc:
            self._rollback()
            raise self._error(exc) from exc

    def prune(self, before: datetime, *, most: int = 5000) -> int:
        gone = 0
        cut = ts(before)
        try:
            for table in PRUNED:
                cursor = self._db.execute(
                    self._sql(
                        f"DELETE FROM {table} WHERE id IN"  # noqa: S608 - our own table names
                        f" (SELECT id FROM {table} WHERE stop < ? LIMIT ?)"
                    ),
                    (cut, most),
                )
                gone += max(cursor.rowcount, 0)
            cursor = self._db.execute(
                self._sql("DELETE FROM actions WHERE id IN (SELECT id FROM actions WHERE at < ? LIMIT ?)"),
                (cut, most),
            )
            gone += max(cursor.rowcount, 0)
            self._commit()
        except Exception as exc:
            self._rollback()
            raise self._error(exc) from exc
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

    # --- reading --------------------------------------------------------------

    def _host_clause(self, host: str | None) -> tuple[str, list[Any]]:
        return ("", []) if host is None else (" AND host = ?", [host])

    def entries_at(self, at: datetime, *, host: str | None = None) -> list[Entry]:
        from lockwatch.model.codec import CodecError, loads_line
        from lockwatch.sources.recording import know_sources

        know_sources()
        when = ts(at)
        where, args = self._host_clause(host)
        rows = self._rows(
            "SELECT session, host, lock_id, start, stop, entry FROM locks"
            " WHERE start <= ? AND (stop IS NULL OR stop > ?)" + where,
            [when, when, *args],
        )
        latest: dict[tuple[str, str], tuple[float, bytes]] = {}
        for session, row_host, lock_id, start, stop, blob in rows:
            stop = self._stop(session, stop)
            if stop is not None and stop <= when:
                continue
            key = (row_host, lock_id)
            kept = latest.get(key)
            if kept is None or start > kept[0]:
                latest[key] = (start, bytes(blob))
        found: list[Entry] = []
        for _, blob in latest.values():
            if len(blob) > MAX_ENTRY_BYTES:
                continue
            try:
                entry = loads_line(blob)
            except CodecError:
                continue
            if isinstance(entry, Entry):
                found.append(entry)
        found.sort(key=lambda entry: entry.lock.id)
        return found

    def locks_at(self, at: datetime, *, host: str | None = None) -> list[Lock]:
        return [entry.lock for entry in self.entries_at(at, host=host)]

    def change_times(
        self, since: datetime, until: datetime, *, host: str | None = None
    ) -> list[datetime]:
        low, high = ts(since), ts(until)
        where, args = self._host_clause(host)
        found: set[float] = set()
        for table in ("locks", "waits"):
            for column in ("start", "stop"):
                rows = self._rows(
                    f"SELECT DISTINCT {column} FROM {table}"  # noqa: S608 - our own names
                    f" WHERE {column} >= ? AND {column} <= ?" + where,
                    [low, high, *args],
                )
                found.update(row[0] for row in rows)
        return [dt(value) for value in sorted(found)]

    def _span_rows(
        self, table: str, columns: str, since: datetime | None, until: datetime | None,
        extra: str = "", extra_args: Iterable[Any] = (),
    ) -> list[Any]:
        clauses, args = [], []
        if until is not None:
            clauses.append("start <= ?")
            args.append(ts(until))
        if since is not None:
            clauses.append("(stop IS NULL OR stop >= ?)")
            args.append(ts(since))
        text = f"SELECT {columns} FROM {table}"  # noqa: S608 - our own names
        if clauses or extra:
            text += " WHERE " + " AND ".join([*clauses, *([extra] if extra else [])])
        return self._rows(text + " ORDER BY start", [*args, *extra_args])

    def waits(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[WaitSpan]:
        extra, extra_args = ("host = ?", [host]) if host is not None else ("", [])
        rows = self._span_rows(
            "waits",
            "session, host, source, server, resource, mode, waiter, blocker, start, stop,"
            " outcome, origin, cycle",
            since, until, extra, extra_args,
        )
        spans = []
        for (session, row_host, source, server, resource, mode, waiter, blocker, start, stop,
             outcome, origin, cycle) in rows:
            end = self._stop(session, stop)
            if since is not None and end is not None and end < ts(since):
                continue
            spans.append(
                WaitSpan(row_host, source, server, resource, mode, who_of(waiter),
                         who_of(blocker), dt(start), _opt_dt(end), outcome, origin, bool(cycle))
            )
        return spans

    def lock_spans(
        self,
        since: datetime | None,
        until: datetime | None,
        *,
        lock_id: str | None = None,
        host: str | None = None,
    ) -> list[LockSpan]:
        parts, extra_args = [], []
        if lock_id is not None:
            parts.append("lock_id = ?")
            extra_args.append(lock_id)
        if host is not None:
            parts.append("host = ?")
            extra_args.append(host)
        rows = self._span_rows(
            "locks", "session, host, lock_id, source, name, place, state, reasons, holder,"
            " start, stop", since, until, " AND ".join(parts), extra_args,
        )
        spans = []
        for session, row_host, lid, source, name, place, state, reasons, holder, start, stop in rows:
            end = self._stop(session, stop)
            if since is not None and end is not None and end < ts(since):
                continue
            spans.append(LockSpan(row_host, lid, source, name, place, state,
                                  tuple(reasons.split()), holder, dt(start), _opt_dt(end)))
        return spans

    def actions(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[ActionMark]:
        clauses, args = [], []
        if since is not None:
            clauses.append("at >= ?")
            args.append(ts(since))
        if until is not None:
            clauses.append("at <= ?")
            args.append(ts(until))
        if host is not None:
            clauses.append("host = ?")
            args.append(host)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._rows(
            "SELECT host, at, lock_id, action, operator, audit_id, result FROM actions"
            + where + " ORDER BY at",
            args,
        )
        return [ActionMark(h, dt(at), lid, act, op, aid, res) for h, at, lid, act, op, aid, res in rows]

    def outages(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[Outage]:
        extra, extra_args = ("host = ?", [host]) if host is not None else ("", [])
        rows = self._span_rows(
            "outages", "session, host, source, name, start, stop, detail", since, until,
            extra, extra_args,
        )
        return [
            Outage(h, source, name, dt(start), _opt_dt(self._stop(sid, stop)), detail)
            for sid, h, source, name, start, stop, detail in rows
        ]

    def hosts(self) -> list[str]:
        return sorted({row[0] for row in self._rows("SELECT DISTINCT host FROM sessions")})

    def _polls(self) -> dict[str, float]:
        polls: dict[str, float] = {}
        for host, poll in self._rows("SELECT host, poll FROM sessions"):
            polls[host] = max(polls.get(host, 0.0), float(poll))
        return polls

    def episodes(
        self,
        since: datetime | None = None,
        until: datetime | None = None,
        source: str | None = None,
        *,
        host: str | None = None,
    ) -> list[Episode]:
        waits = self.waits(since, until, host=host)
        problems = [
            span
            for span in self.lock_spans(since, until, host=host)
            if span.state in folding.TRAIL_STATES
        ]
        found = folding.fold(waits, problems, self.actions(since, None, host=host), self._polls())
        if source is not None:
            found = [episode for episode in found if episode.source == source]
        return folding.worst_first(found)

    def episode(self, episode_id: str) -> Episode | None:
        for found in self.episodes():
            if found.id == episode_id or found.id.startswith(episode_id):
                return found
        return None
