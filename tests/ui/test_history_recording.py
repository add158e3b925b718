"""The dashboard records the lock history (issue 44, item 1): each change set it
applies reaches the recorder, which writes it in its own thread; a history that
stops (a full disk) says so in the header and once in a notification, and the
dashboard goes on."""

from __future__ import annotations

from pathlib import Path

from lockwatch.history.api import HistoryStore, open_history
from lockwatch.history.recorder import Recorder
from tests.ui.fakes import make_app, mixed_scenario, settle
from tests.ui.test_pilot import header_text


async def test_the_dashboard_records_what_it_shows(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite3"

    def opener() -> HistoryStore:
        return open_history(str(history), host="testhost", write=True)

    recorder = Recorder(opener, poll_seconds=1.0)
    app = make_app(mixed_scenario(), history=recorder)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        shown = set(app.board.entries)
        assert shown
        assert recorder.wait_written(1)
        assert "HISTORY STOPPED" not in header_text(app)
    recorder.close()
    store = open_history(str(history))
    recorded = {span.lock_id for span in store.lock_spans(None, None)}
    assert shown <= recorded


class StoppedHistory:
    failed: str | None = None

    def observe(self, *args: object) -> None:
        pass

    def close(self) -> None:
        pass


async def test_a_stopped_history_is_in_the_header_and_said_once() -> None:
    history = StoppedHistory()
    app = make_app(mixed_scenario(), history=history)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        history.failed = "history: recording stopped: history.sqlite3: disk full"
        app.tick()
        app.tick()
        await pilot.pause()
        assert "HISTORY STOPPED" in header_text(app)
        said = [n for n in app._notifications if n.title == "history"]
        assert len(said) == 1 and "disk full" in said[0].message
