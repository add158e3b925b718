"""A history file written by the first round's schema (version 1), kept in
`data/history-v1.sqlite3` with what that round's readers read from it
(`data/history-v1.json`), for the migration test (test_migrate.py).

Both were made by the version 1 code itself (the real writer, not an imitation
of its rows): with that code first on the path,

    git archive <v1 commit> lockwatch | tar -x -C /tmp/v1
    PYTHONPATH=/tmp/v1:. python -m tests.history.schema_v1

`readings` uses only the public reader API, so it reads any version alike.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
FILE = DATA / "history-v1.sqlite3"
READINGS = DATA / "history-v1.json"


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


def write() -> None:  # pragma: no cover - run by hand with the version 1 code
    from lockwatch.history.api import open_history
    from lockwatch.history.recorder import Recorder
    from lockwatch.model.board import Board
    from lockwatch.model.changes import ChangeSet
    from lockwatch.model.history import ActionMark
    from tests.conftest import LOCAL_HOST, NOW
    from tests.ui.fakes import FILES_FEED, mixed_scenario

    DATA.mkdir(exist_ok=True)
    FILE.unlink(missing_ok=True)

    def opener() -> Any:
        return open_history(str(FILE), host=LOCAL_HOST, write=True)

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
    READINGS.write_text(json.dumps(readings(store), indent=1) + "\n")
    store.close()


if __name__ == "__main__":
    write()
