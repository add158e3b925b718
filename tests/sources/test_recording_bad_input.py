"""Recordings against bad input: hostile lines in a recording, and change sets the
codec cannot write. Either way a message, never a traceback or a dead thread."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import orjson

from lockwatch.model import codec
from lockwatch.model.changes import ChangeSet, Entry
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.status import SourceStatus
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.recording import FORMAT, Recorder, ReplayFeed
from tests.conftest import NOW

WAIT_S = 5.0


def change(seconds: float, *upserts: Entry) -> ChangeSet:
    at = NOW + timedelta(seconds=seconds)
    return ChangeSet("files", at, (SourceStatus("file", "/srv", "watching"),), upserts=upserts)


def lock_entry(pid: int) -> Entry:
    lock = Lock(
        "file:/srv/a.lock",
        "file",
        "generic",
        "a",
        "/srv/a.lock",
        Holder(pid=pid),
        facts=FileFacts(),
    )
    return Entry(lock, Verdict(State.ACTIVE))


async def test_a_line_nested_too_deeply_is_a_bad_line(tmp_path: Path) -> None:
    """It used to raise RecursionError out of the codec: `lockwatch replay` died
    with a traceback on opening such a file."""
    good = codec.dumps_line(change(0))
    path = tmp_path / "hostile.jsonl"
    header = orjson.dumps({"lockwatch": FORMAT, "host": "h", "started_at": NOW.isoformat()})
    path.write_bytes(header + b"\n" + b"[" * 900 + b"]" * 900 + b"\n" + good)
    feed = ReplayFeed.open(path)  # reads lines for the start time: must not raise
    emitted: list[ChangeSet] = []
    task = asyncio.create_task(feed.run(emitted.append))
    try:
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while len(emitted) < 2:  # the good change set, then the end
            assert asyncio.get_running_loop().time() < deadline, "the replay never ended"
            await asyncio.sleep(0.01)
    finally:
        await feed.close()
        await asyncio.wait_for(task, WAIT_S)
    assert emitted[0] == change(0)
    assert feed.bad_lines == 1
    assert "1 unreadable line(s) skipped" in feed.describe()


def test_a_change_set_the_codec_cannot_write_stops_the_recording_with_a_reason(
    tmp_path: Path,
) -> None:
    """JSON holds no integer past 64 bits. The recorder's thread used to die of the
    CodecError, unseen, and every later change set piled up in its queue."""
    path = tmp_path / "incident.jsonl"
    recorder = Recorder(path, host="h", now=NOW)
    recorder.write(change(0, lock_entry(100)))
    recorder.write(change(1, lock_entry(2**70)))
    recorder.write(change(2, lock_entry(101)))
    recorder.close()
    assert recorder.failed is not None
    assert "recording stopped: cannot encode a change set" in recorder.failed
    assert "64-bit" in recorder.failed
    assert not recorder._thread.is_alive()  # it ended at close, not before
    assert recorder._queue.empty()
    lines = path.read_bytes().splitlines()
    # The header and what came before; nothing after the gap.
    assert len(lines) == 2
    assert codec.loads_line(lines[1]) == change(0, lock_entry(100))
