"""The history store's readers (what `HistoryStore` promises in api.py), over
the SQL of `store.py`: spans overlapping a time range, locks as they were at an
instant, the instants where something changed, and episodes folded from waits.
Open spans of a recorder that died end at its last heartbeat (`_stop`)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from lockwatch.history.rows import dt, opt_dt, ts, undigested, who_of
from lockwatch.history.unpack import unpack
from lockwatch.model import episodes as folding
from lockwatch.model.changes import Entry
from lockwatch.model.history import ActionMark, Episode, LockSpan, Outage, WaitSpan
from lockwatch.model.lock import Lock

MAX_ENTRY_BYTES = 16 * 1024 * 1024


def _bound(seconds: float, in_ms: bool, *, up: bool) -> float | int:
    """A bound of a filter by end, in what the column holds: integer
    milliseconds as an integer (PostgreSQL compares a bigint column with a
    float through neither's index), rounded up for `>=` and down for `>` and
    `<=` (the same rows as the float bound)."""
    if not in_ms:
        return seconds
    return math.ceil(seconds * 1000) if up else math.floor(seconds * 1000)


class Reader:
    """Reading; `SqlStore` supplies `_rows` (bounded), `_stop` and the schema
    `version` of what it reads (1 as well as the current: see schema.py)."""

    version: int

    def _rows(self, text: str, args: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _stop(self, session: int, stop: float | None) -> float | None:
        raise NotImplementedError

    # --- reading --------------------------------------------------------------

    def _halves(self, table: str) -> tuple[str, str]:
        """Where the spans of `table` going on and those ended are (schema
        version 2 keeps lock spans in two tables; anything else is one)."""
        if table == "locks" and self.version >= 2:
            return "open_locks", "ended_locks"
        return table, table

    def _ended_key(self, ended: str) -> tuple[str, bool]:
        """The column a filter of ended spans by their end names, and whether it
        is in milliseconds: schema version 4's lock spans are filtered by their
        integer milliseconds (`stop` is computed from them: a filter on it does
        not reach the table's order)."""
        if ended == "ended_locks" and self.version >= 4:
            return "stop_ms", True
        return "stop", False

    def _host_clause(self, host: str | None) -> tuple[str, list[Any]]:
        return ("", []) if host is None else (" AND host = ?", [host])

    def entries_at(self, at: datetime, *, host: str | None = None) -> list[Entry]:
        from lockwatch.model.codec import CodecError, loads_line
        from lockwatch.sources.recording import know_sources

        know_sources()
        when = ts(at)
        where, args = self._host_clause(host)
        # Two halves, so each uses an index: the open spans (few: the locks of
        # now) and the spans that ended after `at` (by their end).
        columns = "SELECT session, host, lock_id, start, stop, entry, base FROM "
        going, ended = self._halves("locks")
        by_end, in_ms = self._ended_key(ended)
        rows = self._rows(
            f"{columns}{going} WHERE stop IS NULL AND start <= ?{where}"
            f" UNION ALL {columns}{ended} WHERE {by_end} > ? AND start <= ?{where}",
            [when, *args, _bound(when, in_ms, up=False), when, *args],
        )
        latest: dict[tuple[str, str], tuple[float, bytes | None, bytes]] = {}
        for session, row_host, lock_id, start, stop, packed, base in rows:
            stop = self._stop(session, stop)
            if stop is not None and stop <= when:
                continue
            key = (row_host, lock_id)
            kept = latest.get(key)
            if kept is None or start > kept[0]:
                latest[key] = (start, None if packed is None else bytes(packed), bytes(base))
        found: list[Entry] = []
        for _, packed, base in latest.values():
            try:
                entry = loads_line(unpack(packed, base, MAX_ENTRY_BYTES, version=self.version))
            except (CodecError, ValueError, zlib.error):
                continue
            if isinstance(entry, Entry):
                found.append(undigested(entry))
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
                # Lock spans' ends are in the ended ones (by the table's key).
                source = self._halves(table)[1] if column == "stop" else table
                key, in_ms = self._ended_key(source) if column == "stop" else (column, False)
                rows = self._rows(
                    f"SELECT DISTINCT {column} FROM {source}"
                    f" WHERE {key} >= ? AND {key} <= ?" + where,
                    [_bound(low, in_ms, up=True), _bound(high, in_ms, up=False), *args],
                )
                found.update(row[0] for row in rows)
        return [dt(value) for value in sorted(found)]

    def _span_rows(
        self,
        table: str,
        columns: str,
        since: datetime | None,
        until: datetime | None,
        extra: str = "",
        extra_args: Iterable[Any] = (),
    ) -> list[Any]:
        # Spans overlapping [since, until]: the open ones, and those that ended
        # since `since` (two halves, so each uses an index).
        tail = (" AND " + extra) if extra else ""
        bound = [] if until is None else [ts(until)]
        before = "" if until is None else " AND start <= ?"
        if since is None:
            text = f"SELECT {columns} FROM {table} WHERE 1 = 1" + before + tail
            return self._rows(text + " ORDER BY start", [*bound, *extra_args])
        going, ended = self._halves(table)
        key, in_ms = self._ended_key(ended)
        text = (
            f"SELECT {columns} FROM {going} WHERE stop IS NULL{before}{tail} UNION ALL"
            f" SELECT {columns} FROM {ended} WHERE {key} >= ?{before}{tail} ORDER BY start"
        )
        args = [*bound, *extra_args, _bound(ts(since), in_ms, up=True), *bound, *extra_args]
        return self._rows(text, args)

    def _host_spans(
        self,
        table: str,
        columns: str,
        since: datetime | None,
        until: datetime | None,
        host: str | None,
    ) -> list[Any]:
        """`_span_rows` of one host's spans, or every host's (None)."""
        if host is None:
            return self._span_rows(table, columns, since, until)
        return self._span_rows(table, columns, since, until, "host = ?", [host])

    def _overlapping(
        self, rows: list[Any], since: datetime | None, stop_at: int
    ) -> Iterator[tuple[Any, float | None]]:
        """Each row (its session first, its stop at `stop_at`) with where it
        ends, but those that ended before `since` (a dead recorder's open rows
        end at its last heartbeat: `_stop`)."""
        low = None if since is None else ts(since)
        stop = self._stop
        for row in rows:
            end = stop(row[0], row[stop_at])
            if low is None or end is None or end >= low:
                yield row, end

    def waits(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[WaitSpan]:
        rows = self._host_spans(
            "waits",
            "session, host, source, server, resource, mode, waiter, blocker, start, stop,"
            " outcome, origin, cycle",
            since,
            until,
            host,
        )
        return [
            WaitSpan(
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                who_of(row[6]),
                who_of(row[7]),
                dt(row[8]),
                opt_dt(end),
                row[10],
                row[11],
                bool(row[12]),
            )
            for row, end in self._overlapping(rows, since, 9)
        ]

    def lock_spans(
        self,
        since: datetime | None,
        until: datetime | None,
        *,
        lock_id: str | None = None,
        host: str | None = None,
        states: Iterable[str] | None = None,
    ) -> list[LockSpan]:
        parts, extra_args = [], []
        if states is not None:
            # Literal (our own words, quotes doubled): a partial index matches them.
            said = ", ".join("'" + state.replace("'", "''") + "'" for state in sorted(states))
            parts.append(f"state IN ({said})")
            if self.version == 2 and set(states) <= set(folding.TRAIL_STATES):
                parts.append("trail = 1")  # what version 2's partial index `spans_trail` covers
        if lock_id is not None:
            parts.append("lock_id = ?")
            extra_args.append(lock_id)
        if host is not None:
            parts.append("host = ?")
            extra_args.append(host)
        rows = self._span_rows(
            "locks",
            "session, host, lock_id, source, name, place, state, reasons, holder, start, stop",
            since,
            until,
            " AND ".join(parts),
            extra_args,
        )
        return [
            LockSpan(
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                row[6],
                tuple(row[7].split()),
                row[8],
                dt(row[9]),
                opt_dt(end),
            )
            for row, end in self._overlapping(rows, since, 10)
        ]

    def actions(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[ActionMark]:
        clauses: list[str] = []
        args: list[Any] = []
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
            "SELECT host, at, lock_id, action, operator, audit_id, result, node FROM actions"
            + where
            + " ORDER BY at",
            args,
        )
        return [
            ActionMark(h, dt(at), lid, act, op, aid, res, node)
            for h, at, lid, act, op, aid, res, node in rows
        ]

    def outages(
        self, since: datetime | None, until: datetime | None, *, host: str | None = None
    ) -> list[Outage]:
        rows = self._host_spans(
            "outages", "session, host, source, name, start, stop, detail", since, until, host
        )
        return [
            Outage(h, source, name, dt(start), opt_dt(self._stop(sid, stop)), detail)
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
        problems = self.lock_spans(since, until, host=host, states=folding.TRAIL_STATES)
        from lockwatch.sources.registry import holder_gone_codes

        actions = self.actions(since, None, host=host)
        found = folding.fold(
            waits, problems, actions, self._polls(), holder_gone=holder_gone_codes()
        )
        if source is not None:
            found = [episode for episode in found if episode.source == source]
        return folding.worst_first(found)

    def episode(self, episode_id: str) -> Episode | None:
        for found in self.episodes():
            if found.id == episode_id or found.id.startswith(episode_id):
                return found
        return None
