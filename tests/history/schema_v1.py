"""A history file written by the first round's schema (version 1), kept in
`data/history-v1.sqlite3` with what that round's readers read from it
(`data/history-v1.json`), for the migration test (test_migrate.py).

Both were made by the version 1 code itself (the real writer, not an imitation
of its rows): with that code first on the path,

    git archive <v1 commit> lockwatch | tar -x -C /tmp/v1
    PYTHONPATH=/tmp/v1:. python -m tests.history.schema_v1

`readings` uses only the public reader API, so it reads any version alike.
A version 2 file (`data/history-v2.*`, for the migration from version 2) was
made the same way by version 2's code, with `2` after the command above, and a
version 3 file (`data/history-v3.*`) by version 3's, with `3`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
FILE = DATA / "history-v1.sqlite3"
READINGS = DATA / "history-v1.json"
FILE_V2 = DATA / "history-v2.sqlite3"
READINGS_V2 = DATA / "history-v2.json"
FILE_V3 = DATA / "history-v3.sqlite3"
READINGS_V3 = DATA / "history-v3.json"


# Version 1's tables, verbatim from its store.py: for a PostgreSQL database of
# version 1 (the migration test on the local server copies the file's rows in).
V1_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sessions (id {serial}, host TEXT NOT NULL, pid INTEGER,"
    " started DOUBLE PRECISION NOT NULL, beat DOUBLE PRECISION NOT NULL,"
    " ended DOUBLE PRECISION, poll DOUBLE PRECISION NOT NULL)",
    # A lock's name and place once (`lockrefs`), its spans by reference: a day of
    # churn is millions of spans. Each span's entry is zlib-compressed against the
    # lock's first (`base`, kept once): a change of pid or heartbeat costs tens of
    # bytes, not the whole lock again. `holder` is kept for trails (stale,
    # invalid): any other span's holder is in its entry.
    "CREATE TABLE IF NOT EXISTS lockrefs (id {serial}, host TEXT NOT NULL,"
    " lock_id TEXT NOT NULL, source TEXT NOT NULL, name TEXT NOT NULL, place TEXT NOT NULL,"
    " base {blob} NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS lockrefs_by_id ON lockrefs (host, lock_id)",
    "CREATE TABLE IF NOT EXISTS spans (id {serial}, session BIGINT NOT NULL, ref BIGINT NOT NULL,"
    " state TEXT NOT NULL, reasons TEXT NOT NULL, holder TEXT NOT NULL,"
    " start DOUBLE PRECISION NOT NULL, stop DOUBLE PRECISION, entry {blob})",
    "CREATE INDEX IF NOT EXISTS spans_stop ON spans (stop)",
    "CREATE INDEX IF NOT EXISTS spans_open ON spans (session, ref) WHERE stop IS NULL",
    # Trails (model/episodes.py TRAIL_STATES): found without reading every span.
    "CREATE INDEX IF NOT EXISTS spans_trails ON spans (stop) WHERE state IN ('invalid', 'stale')",
    "CREATE {view} locks AS SELECT s.id, s.session, r.host, r.lock_id, r.source, r.name,"
    " r.place, s.state, s.reasons, s.holder, s.start, s.stop, s.entry, r.base"
    " FROM spans AS s JOIN lockrefs AS r ON r.id = s.ref",
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


# Version 2's tables, verbatim from its schema.py (TABLES): for a PostgreSQL
# database of version 2 (the migration test on the local server copies the file's
# rows in).
V2_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sessions (id {serial}, host TEXT NOT NULL, pid INTEGER, "
    "started DOUBLE PRECISION NOT NULL, beat DOUBLE PRECISION NOT NULL, ended DOUBLE "
    "PRECISION, poll DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lockrefs (id {serial}, host TEXT NOT NULL, lock_id TEXT "
    "NOT NULL, source TEXT NOT NULL, name TEXT NOT NULL, place TEXT NOT NULL, base {blob}"
    " NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS lockrefs_by_id ON lockrefs (host, lock_id)",
    "CREATE TABLE IF NOT EXISTS kinds (id {serial}, state TEXT NOT NULL, reasons TEXT NOT NULL)",
    "CREATE UNIQUE INDEX IF NOT EXISTS kinds_by_words ON kinds (state, reasons)",
    "CREATE TABLE IF NOT EXISTS spans (session BIGINT NOT NULL, ref BIGINT NOT NULL, kind"
    " BIGINT NOT NULL, trail INTEGER NOT NULL, holder TEXT NOT NULL, start DOUBLE "
    "PRECISION NOT NULL, stop DOUBLE PRECISION NOT NULL, entry {blob}, PRIMARY KEY (stop,"
    " ref, session, start)){clustered}",
    "CREATE INDEX IF NOT EXISTS spans_trail ON spans (stop) WHERE trail = 1",
    "CREATE TABLE IF NOT EXISTS open_spans (id {serial}, session BIGINT NOT NULL, ref "
    "BIGINT NOT NULL, kind BIGINT NOT NULL, trail INTEGER NOT NULL, holder TEXT NOT NULL,"
    " start DOUBLE PRECISION NOT NULL, entry {blob})",
    "CREATE INDEX IF NOT EXISTS open_spans_by_ref ON open_spans (session, ref)",
    "CREATE {view} ended_locks AS SELECT s.session, r.host, r.lock_id, r.source, r.name, "
    "r.place, k.state, k.reasons, s.trail, s.holder, s.start, s.stop, s.entry, r.base "
    "FROM spans AS s JOIN lockrefs AS r ON r.id = s.ref JOIN kinds AS k ON k.id = s.kind",
    "CREATE {view} open_locks AS SELECT o.session, r.host, r.lock_id, r.source, r.name, "
    "r.place, k.state, k.reasons, o.trail, o.holder, o.start, CAST(NULL AS DOUBLE "
    "PRECISION) AS stop, o.entry, r.base FROM open_spans AS o JOIN lockrefs AS r ON r.id "
    "= o.ref JOIN kinds AS k ON k.id = o.kind",
    "CREATE {view} locks AS SELECT * FROM ended_locks UNION ALL SELECT * FROM open_locks",
    "CREATE TABLE IF NOT EXISTS waits (id {serial}, session BIGINT NOT NULL, host TEXT "
    "NOT NULL, source TEXT NOT NULL, server TEXT NOT NULL, resource TEXT NOT NULL, mode "
    "TEXT NOT NULL, waiter_node TEXT NOT NULL, blocker_node TEXT NOT NULL, waiter TEXT "
    "NOT NULL, blocker TEXT NOT NULL, start DOUBLE PRECISION NOT NULL, stop DOUBLE "
    "PRECISION, outcome TEXT, origin TEXT NOT NULL, cycle INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS waits_start ON waits (start)",
    "CREATE INDEX IF NOT EXISTS waits_stop ON waits (stop)",
    "CREATE INDEX IF NOT EXISTS waits_open ON waits (session, server, waiter_node) WHERE "
    "stop IS NULL",
    "CREATE TABLE IF NOT EXISTS actions (id {serial}, session BIGINT NOT NULL, host TEXT "
    "NOT NULL, at DOUBLE PRECISION NOT NULL, lock_id TEXT NOT NULL, action TEXT NOT NULL,"
    " operator TEXT NOT NULL, audit_id BIGINT, result TEXT NOT NULL, node TEXT)",
    "CREATE INDEX IF NOT EXISTS actions_at ON actions (at)",
    "CREATE TABLE IF NOT EXISTS outages (id {serial}, session BIGINT NOT NULL, host TEXT "
    "NOT NULL, source TEXT NOT NULL, name TEXT NOT NULL, start DOUBLE PRECISION NOT NULL,"
    " stop DOUBLE PRECISION, detail TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS outages_start ON outages (start)",
)

# Version 3's (the first six and the last eight as version 2's), verbatim from
# its schema.py.
V3_TABLES = (
    *V2_TABLES[:6],
    "CREATE TABLE IF NOT EXISTS spans (session BIGINT NOT NULL, ref BIGINT NOT NULL,"
    " kind BIGINT NOT NULL, holder TEXT NOT NULL, stop DOUBLE PRECISION NOT NULL,"
    " dur DOUBLE PRECISION NOT NULL, entry {blob},"
    " PRIMARY KEY (stop, ref, session, dur)){clustered}",
    "CREATE TABLE IF NOT EXISTS open_spans (id {serial}, session BIGINT NOT NULL,"
    " ref BIGINT NOT NULL, kind BIGINT NOT NULL, holder TEXT NOT NULL,"
    " start DOUBLE PRECISION NOT NULL, entry {blob})",
    "CREATE INDEX IF NOT EXISTS open_spans_by_ref ON open_spans (session, ref)",
    "CREATE {view} ended_locks AS SELECT s.session, r.host, r.lock_id, r.source, r.name,"
    " r.place, k.state, k.reasons, s.holder, s.stop - s.dur AS start, s.stop, s.entry, r.base"
    " FROM spans AS s JOIN lockrefs AS r ON r.id = s.ref JOIN kinds AS k ON k.id = s.kind",
    "CREATE {view} open_locks AS SELECT o.session, r.host, r.lock_id, r.source, r.name,"
    " r.place, k.state, k.reasons, o.holder, o.start,"
    " CAST(NULL AS DOUBLE PRECISION) AS stop, o.entry, r.base"
    " FROM open_spans AS o JOIN lockrefs AS r ON r.id = o.ref JOIN kinds AS k ON k.id = o.kind",
    "CREATE {view} locks AS SELECT * FROM ended_locks UNION ALL SELECT * FROM open_locks",
    *V2_TABLES[-8:],
)


def normal(found: dict[str, Any]) -> dict[str, Any]:
    """`readings` with spans that start at one instant, and episodes equally
    bad, in one order (the API orders them, nothing of ties)."""
    spans = sorted(found["lock_spans"], key=lambda s: (s[8], s[1]))
    return {**found, "lock_spans": spans, "episodes": sorted(found["episodes"])}


def readings(store: Any) -> dict[str, Any]:
    """What the readers give back, as plain JSON values."""
    from tests.conftest import NOW

    instants = [NOW - timedelta(minutes=m) for m in (11, 10, 7, 5, 1)]
    entries = {
        at.isoformat(): [
            [e.lock.id, e.verdict.state.value, list(e.verdict.codes), e.lock.holder.pid]
            for e in store.entries_at(at)
        ]
        for at in instants
    }
    return {
        "entries_at": entries,
        "lock_spans": [
            [
                s.host,
                s.lock_id,
                s.source,
                s.name,
                s.place,
                s.state,
                list(s.reasons),
                s.holder,
                s.start.isoformat(),
                None if s.end is None else s.end.isoformat(),
            ]
            for s in store.lock_spans(None, None)
        ],
        "waits": [repr(w) for w in store.waits(None, None)],
        "episodes": [repr(e) for e in store.episodes()],
        "actions": [repr(a) for a in store.actions(None, None)],
        "change_times": [t.isoformat() for t in store.change_times(NOW - timedelta(hours=1), NOW)],
        "hosts": store.hosts(),
    }


def write(file: Path = FILE, said: Path = READINGS) -> None:  # pragma: no cover - by hand
    from lockwatch.history.api import open_history
    from lockwatch.history.recorder import Recorder
    from lockwatch.model.board import Board
    from lockwatch.model.changes import ChangeSet
    from lockwatch.model.history import ActionMark
    from tests.conftest import LOCAL_HOST, NOW
    from tests.ui.fakes import FILES_FEED, mixed_scenario

    DATA.mkdir(exist_ok=True)
    file.unlink(missing_ok=True)

    def opener() -> Any:
        return open_history(str(file), host=LOCAL_HOST, write=True)

    recorder = Recorder(opener, poll_seconds=1.0)
    board = Board(LOCAL_HOST)
    first, second = NOW - timedelta(minutes=10), NOW - timedelta(minutes=5)
    for change in mixed_scenario():
        recorder.observe(board, board.apply(change), first)
    files = sorted(lock_id for lock_id in board.entries if lock_id.startswith("file:"))
    recorder.observe(board, board.apply(ChangeSet(FILES_FEED, second, removed=(files[0],))), second)
    recorder.action(ActionMark(LOCAL_HOST, second, files[1], "lock_broken", "ops", 41))
    recorder.observe(board, None, NOW - timedelta(minutes=2))
    recorder.close()
    assert recorder.failed is None, recorder.failed
    store = opener()
    said.write_text(json.dumps(readings(store), indent=1) + "\n")
    store.close()


if __name__ == "__main__":
    import sys

    older = {"2": (FILE_V2, READINGS_V2), "3": (FILE_V3, READINGS_V3)}
    write(*older.get(" ".join(sys.argv[1:]), ()))
