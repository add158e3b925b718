"""A writer flush that holds a lock's whole life (it appeared and went between
two flushes), or several state changes of one lock, is stored in time order:
each close ends the span opened before it, and no span is left open."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from lockwatch.history.api import HistoryStore, open_history
from lockwatch.history.recorder import Recorder
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet
from tests.conftest import LOCAL_HOST, NOW
from tests.ui.fakes import FILES_FEED, mixed_scenario


def test_a_lock_opened_and_closed_in_one_flush_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"

    def opener() -> HistoryStore:
        return open_history(str(path), host=LOCAL_HOST, write=True)

    # One flush for everything: the writer waits a minute unless woken, and
    # observations queued before it looks are written together.
    recorder = Recorder(opener, poll_seconds=1.0)
    board = Board(LOCAL_HOST)
    first, second = NOW - timedelta(minutes=10), NOW - timedelta(minutes=5)
    for change in mixed_scenario():
        recorder.observe(board, board.apply(change), first)
    gone = sorted(lock_id for lock_id in board.entries if lock_id.startswith("file:"))[0]
    recorder.observe(board, board.apply(ChangeSet(FILES_FEED, second, removed=(gone,))), second)
    recorder.observe(board, None, NOW)
    recorder.close()
    assert recorder.failed is None, recorder.failed
    store = open_history(str(path))
    spans = store.lock_spans(None, None, lock_id=gone)
    assert [(span.start, span.end) for span in spans] == [(first, second)]
    assert gone not in {entry.lock.id for entry in store.entries_at(second)}
    assert gone in {entry.lock.id for entry in store.entries_at(first)}
