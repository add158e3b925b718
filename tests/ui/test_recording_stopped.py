"""A recording that stops (a full disk, a change set it cannot write) says so in
the header and once in a notification: it must not pass for one going on."""

from __future__ import annotations

from lockwatch.model.changes import ChangeSet
from tests.ui.fakes import make_app, mixed_scenario, settle
from tests.ui.test_pilot import header_text


class FailingRecorder:
    """Records until told to fail, as lockwatch's Recorder does when its disk fills."""

    def __init__(self) -> None:
        self.failed: str | None = None
        self.written: list[ChangeSet] = []

    def write(self, change: ChangeSet) -> None:
        self.written.append(change)

    def close(self) -> None:
        pass


async def test_a_stopped_recording_is_in_the_header_and_said_once() -> None:
    recorder = FailingRecorder()
    app = make_app(mixed_scenario(), recorder=recorder)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert recorder.written
        assert "RECORDING STOPPED" not in header_text(app)
        recorder.failed = "/var/tmp/incident.jsonl: recording stopped: No space left on device"
        app.tick()
        app.tick()
        await pilot.pause()
        assert "RECORDING STOPPED" in header_text(app)
        said = [n for n in app._notifications if n.title == "recording stopped"]
        assert len(said) == 1
        assert "No space left on device" in said[0].message
