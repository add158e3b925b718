"""A source's outage is recorded from the board's statuses (issue 44, item 1),
even when it began and ended between two of the writer's flushes. The change
sets are built by hand (a feed's statuses only: no server is needed to say one
went away); the recorder and the store are the real ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from lockwatch.history.api import HistoryStore, open_history
from lockwatch.history.recorder import Recorder
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceState, SourceStatus

T0 = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)


def test_an_outage_within_one_flush_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"

    def opener() -> HistoryStore:
        return open_history(str(path), host="h", write=True)

    # A flush interval longer than the test: everything lands in one batch.
    recorder = Recorder(opener, poll_seconds=2.0, flush_seconds=3600.0)
    board = Board("h")
    steps: tuple[tuple[int, SourceState], ...] = (
        (0, "connected"),
        (2, "error"),
        (4, "error"),
        (6, "connected"),
    )
    for seconds, state in steps:
        status = SourceStatus(
            "postgres", "db1", state, reason="refused" if state == "error" else None
        )
        at = T0 + timedelta(seconds=seconds)
        recorder.observe(board, board.apply(ChangeSet("pg", at, (status,))), at)
    recorder.close()
    assert recorder.failed is None
    outages = open_history(str(path)).outages(None, None)
    assert [(o.source, o.name, o.start, o.end) for o in outages] == [
        ("postgres", "db1", T0 + timedelta(seconds=2), T0 + timedelta(seconds=6))
    ]
    assert outages[0].detail == "error: refused"
