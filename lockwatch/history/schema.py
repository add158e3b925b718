"""The history store's tables (shared by SQLite and PostgreSQL, `?` placeholders
and `{serial}`/`{blob}`/`{view}` spelt per store) and the migration from each
older schema version. Times are float seconds since the epoch (UTC).

Version 2 (issue 44's size target): a day of churn at 1,000 lock changes a
minute is 1.4 million spans, so a span row holds only what differs per change:

- a lock's name and place once (`lockrefs`), its state and reason codes once
  per distinct pair (`kinds`): a span names both by integer;
- open spans apart (`open_spans`, one row per lock being watched): a span is
  written to `spans` once, when it ends, with its end. Rows of `spans` never
  grow after they are written (an UPDATE that adds the end to a full page
  splits it), and its indexes are appended to in time order;
- each entry raw-deflated against the lock's first (`lockrefs.base`): no zlib
  header and checksum per row (unpack.py).

Version 3 (the same target, met): a span row keeps its end and its length
(`dur`, exact: the start is `stop - dur`, both IEEE doubles of one epoch's
times), not its start (a whole number of seconds is stored in a byte or two);
no `trail` flag or index of trails (a day's spans are found by their end, the
table's key, and told trails by their kind); each entry said by the numbers
that changed from its base (unpack.py) where only numbers, times and digests
did.

Version 4 (the target with a real clock's times): a span's end and length,
and an open span's start, are integer milliseconds (since the epoch, UTC): a
time with a fraction of a second is 8 bytes as a double, 6 as an integer of
milliseconds, and a length 1-4. Readers show seconds and compare times within
a poll: milliseconds keep more than they use. The views say them as seconds
again, and `ended_locks.stop_ms` is the key readers filter on (a filter on a
computed `stop` does not reach the table's order).

The `locks` view joins them back into version 1's columns, so readers ask one
thing of every version.
"""

from __future__ import annotations

import zlib
from typing import Any

# The trail states (model/episodes.py TRAIL_STATES), spelt here as SQL: a
# version 1 span's holder is kept for these only.
TRAIL_SQL = "('invalid', 'stale')"

# Integer milliseconds as float seconds (PostgreSQL divides an integer by
# `1000.0` into a numeric: a float, as the other times, is asked for).
SECONDS = "CAST({} AS DOUBLE PRECISION) / 1000"

HEAD = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sessions (id {serial}, host TEXT NOT NULL, pid INTEGER,"
    " started DOUBLE PRECISION NOT NULL, beat DOUBLE PRECISION NOT NULL,"
    " ended DOUBLE PRECISION, poll DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lockrefs (id {serial}, host TEXT NOT NULL,"
    " lock_id TEXT NOT NULL, source TEXT NOT NULL, name TEXT NOT NULL, place TEXT NOT NULL,"
    " base {blob} NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS lockrefs_by_id ON lockrefs (host, lock_id)",
)

SPANS = (
    "CREATE TABLE IF NOT EXISTS kinds (id {serial}, state TEXT NOT NULL, reasons TEXT NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS kinds_by_words ON kinds (state, reasons)",
    # Ended spans: written once, never updated (pruning deletes them), kept in
    # the order of their ends (SQLite: WITHOUT ROWID, no rowid and no index of
    # `stop` beside the table: the table is that index). `holder`: a trail's
    # (stale, invalid) only; any other span's holder is in its entry.
    "CREATE TABLE IF NOT EXISTS spans (session BIGINT NOT NULL, ref BIGINT NOT NULL,"
    " kind BIGINT NOT NULL, holder TEXT NOT NULL, stop BIGINT NOT NULL,"
    " dur BIGINT NOT NULL, entry {blob},"
    " PRIMARY KEY (stop, ref, session, dur)){clustered}",
    # Spans still going on: one row per lock a recorder watches.
    "CREATE TABLE IF NOT EXISTS open_spans (id {serial}, session BIGINT NOT NULL,"
    " ref BIGINT NOT NULL, kind BIGINT NOT NULL, holder TEXT NOT NULL,"
    " start BIGINT NOT NULL, entry {blob})",
    "CREATE INDEX IF NOT EXISTS open_spans_by_ref ON open_spans (session, ref)",
    # Readers ask `ended_locks` for spans by their end and `open_locks` for those
    # going on (a filter on `stop` does not reach through the union to an index).
    "CREATE {view} ended_locks AS SELECT s.session, r.host, r.lock_id, r.source, r.name,"
    " r.place, k.state, k.reasons, s.holder, " + SECONDS.format("s.stop - s.dur") + " AS start,"
    " " + SECONDS.format("s.stop") + " AS stop, s.entry, r.base, s.stop AS stop_ms"
    " FROM spans AS s JOIN lockrefs AS r ON r.id = s.ref JOIN kinds AS k ON k.id = s.kind",
    "CREATE {view} open_locks AS SELECT o.session, r.host, r.lock_id, r.source, r.name,"
    " r.place, k.state, k.reasons, o.holder, " + SECONDS.format("o.start") + " AS start,"
    " CAST(NULL AS DOUBLE PRECISION) AS stop, o.entry, r.base, CAST(NULL AS BIGINT) AS stop_ms"
    " FROM open_spans AS o JOIN lockrefs AS r ON r.id = o.ref JOIN kinds AS k ON k.id = o.kind",
    "CREATE {view} locks AS SELECT * FROM ended_locks UNION ALL SELECT * FROM open_locks",
)

TAIL = (
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
    " action TEXT NOT NULL, operator TEXT NOT NULL, audit_id BIGINT, result TEXT NOT NULL,"
    " node TEXT)",
    "CREATE INDEX IF NOT EXISTS actions_at ON actions (at)",
    "CREATE TABLE IF NOT EXISTS outages (id {serial}, session BIGINT NOT NULL,"
    " host TEXT NOT NULL, source TEXT NOT NULL, name TEXT NOT NULL,"
    " start DOUBLE PRECISION NOT NULL, stop DOUBLE PRECISION, detail TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS outages_start ON outages (start)",
)

TABLES = HEAD + SPANS + TAIL

# Float seconds as integer milliseconds, in SQL both stores speak (a cast
# alone truncates in SQLite).
MS = "CAST(round(({}) * 1000) AS BIGINT)"

# Version 1's spans put aside before version 2's are made (its indexes go with
# it: their names are free again), moved over, then dropped.
V1_ASIDE = (
    "DROP VIEW IF EXISTS locks",
    "DROP INDEX IF EXISTS spans_stop",
    "DROP INDEX IF EXISTS spans_open",
    "DROP INDEX IF EXISTS spans_trails",
    "ALTER TABLE spans RENAME TO spans_v1",
)
V1_MOVE = (
    "INSERT INTO kinds (state, reasons) SELECT DISTINCT state, reasons FROM spans_v1"
    " WHERE NOT EXISTS (SELECT 1 FROM kinds AS k"
    " WHERE k.state = spans_v1.state AND k.reasons = spans_v1.reasons)",
    "INSERT INTO spans (session, ref, kind, holder, stop, dur, entry)"
    " SELECT s.session, s.ref, k.id, s.holder, "
    + MS.format("s.stop")
    + ", "
    + MS.format("s.stop")
    + " - "
    + MS.format("s.start")
    + ", s.entry"
    " FROM spans_v1 AS s JOIN kinds AS k ON k.state = s.state AND k.reasons = s.reasons"
    " WHERE s.stop IS NOT NULL ORDER BY s.stop, s.id ON CONFLICT DO NOTHING",
    "INSERT INTO open_spans (session, ref, kind, holder, start, entry)"
    " SELECT s.session, s.ref, k.id, s.holder, " + MS.format("s.start") + ", s.entry"
    " FROM spans_v1 AS s"
    " JOIN kinds AS k ON k.state = s.state AND k.reasons = s.reasons"
    " WHERE s.stop IS NULL ORDER BY s.id",
    "DROP TABLE spans_v1",
)

# Version 2's and 3's spans, ended and open, put aside the same way (the views
# go first: they name columns that go; the index of open spans too: its name
# would stay taken), moved over with their times in milliseconds (version 2's
# with their length for their start).
LATER_ASIDE = (
    "DROP VIEW IF EXISTS locks",
    "DROP VIEW IF EXISTS ended_locks",
    "DROP VIEW IF EXISTS open_locks",
    "DROP INDEX IF EXISTS spans_trail",
    "DROP INDEX IF EXISTS open_spans_by_ref",
    "ALTER TABLE spans RENAME TO spans_old",
    "ALTER TABLE open_spans RENAME TO open_spans_old",
)


def _spans_moved(start: str, last_key: str) -> tuple[str]:
    """Ended spans moved over from `spans_old`, whose start is `start` (an
    expression of its columns) and whose key ends with `last_key`."""
    stop_ms, start_ms = MS.format("stop"), MS.format(start)
    return (
        "INSERT INTO spans (session, ref, kind, holder, stop, dur, entry)"
        f" SELECT session, ref, kind, holder, {stop_ms}, {stop_ms} - {start_ms}, entry"
        f" FROM spans_old ORDER BY stop, ref, session, {last_key} ON CONFLICT DO NOTHING",
    )


V2_MOVE = _spans_moved("start", "start")
V3_MOVE = _spans_moved("stop - dur", "dur")
OPEN_MOVE = (
    "INSERT INTO open_spans (session, ref, kind, holder, start, entry)"
    " SELECT session, ref, kind, holder, " + MS.format("start") + ", entry"
    " FROM open_spans_old ORDER BY id",
    "DROP TABLE spans_old",
    "DROP TABLE open_spans_old",
)


def migrate(store: Any, version: int, formats: dict[str, str]) -> None:
    """Bring `store` (a SqlStore, in its open transaction) from `version` up to
    the current schema; the caller then makes any table still missing."""
    if version >= 4:
        return
    aside: tuple[str, ...]
    move: tuple[str, ...]
    if version < 2:
        aside, move = V1_ASIDE, V1_MOVE
    else:
        aside, move = LATER_ASIDE, (V2_MOVE if version == 2 else V3_MOVE) + OPEN_MOVE
    for statement in aside:
        store._db.execute(statement)
    for statement in TABLES:
        store._db.execute(statement.format(**formats))
    if version < 2:
        _repack_v1(store)
    for statement in move:
        store._db.execute(statement)
    if version == 2:
        _repack_v2(store)


def _repack_v1(store: Any) -> None:
    """Version 1's entries were zlib streams of the whole entry; they are
    packed as unpack.py says now (before the rows move)."""
    rows = store._db.execute(
        "SELECT t.id, t.entry, r.base FROM spans_v1 AS t JOIN lockrefs AS r ON r.id = t.ref"
        " WHERE t.entry IS NOT NULL"
    ).fetchall()
    _repack(store, rows, "UPDATE spans_v1 SET entry = ? WHERE id = ?", 1)


def _repack_v2(store: Any) -> None:
    """Version 2's entries are read as they are, but for one whose count of
    digests was 0x80 or more (its first byte is the numbers layout's mark):
    packed again (none in practice; unpack.py)."""
    mark = store._blob(b"\x80")
    ended = store._db.execute(
        store._sql(
            "SELECT s.stop, s.ref, s.session, s.dur, s.entry, r.base FROM spans AS s"
            " JOIN lockrefs AS r ON r.id = s.ref WHERE s.entry >= ?"
        ),
        (mark,),
    ).fetchall()
    update = "UPDATE spans SET entry = ? WHERE stop = ? AND ref = ? AND session = ? AND dur = ?"
    _repack(store, [(key, entry, base) for *key, entry, base in ended], update, 2)
    going = store._db.execute(
        store._sql(
            "SELECT o.id, o.entry, r.base FROM open_spans AS o JOIN lockrefs AS r"
            " ON r.id = o.ref WHERE o.entry >= ?"
        ),
        (mark,),
    ).fetchall()
    _repack(store, going, "UPDATE open_spans SET entry = ? WHERE id = ?", 2)


def _repack(store: Any, rows: list[Any], update: str, version: int) -> None:
    """Each (key, entry, base) of `rows`, unpacked as `version` packed it and
    packed as now, written back by `update` (the new entry, then the key)."""
    from lockwatch.history.reading import MAX_ENTRY_BYTES
    from lockwatch.history.unpack import pack, unpack

    statement = store._sql(update)
    for key, packed, base in rows:
        try:
            whole = unpack(bytes(packed), bytes(base), MAX_ENTRY_BYTES, version=version)
        except (ValueError, zlib.error):
            continue  # unreadable before as after: readers skip it
        keys = tuple(key) if isinstance(key, list) else (key,)
        store._db.execute(statement, (store._blob(pack(whole, bytes(base))), *keys))
