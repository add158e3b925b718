"""Recordings: the Recorder's file, ReplayClock's time, ReplayFeed's playback.

Playback runs with an injected monotonic clock (a list-backed counter the test moves),
so which change sets are due is decided by the test, never by how fast the machine is.
Waiting for the feed to emit is a bounded polling loop; where a test checks that
nothing *more* was emitted it gives the feed a few scheduling rounds first.
"""

from __future__ import annotations

import asyncio
import contextlib
import stat
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from lockwatch.model import codec
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.process import ProcessLookup, StaticProcesses
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.recording import (
    FORMAT,
    Recorder,
    RecordingError,
    ReplayClock,
    ReplayFeed,
)
from tests.conftest import LOCAL_HOST, NOW, ago, alive, lock_file, stop_feed

WAIT_S = 5.0
STEP_S = 0.01


class FakeMonotonic:
    """time.monotonic as a list-backed counter: it moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.ticks = [start]

    def __call__(self) -> float:
        return self.ticks[-1]

    def advance(self, seconds: float) -> None:
        self.ticks.append(self.ticks[-1] + seconds)


def entry(name: str, pid: int) -> Entry:
    lock = decode_file(lock_file(f"/srv/locks/{name}.lock", {"pid": pid}, mtime=ago(30)))
    (judged,) = judge([lock], _processes(), NOW, LOCAL_HOST)
    return judged


def _processes() -> ProcessLookup:
    return StaticProcesses(alive(100))


def change_at(seconds: float, *upserts: Entry, removed: tuple[str, ...] = ()) -> ChangeSet:
    at = NOW + timedelta(seconds=seconds)
    return ChangeSet(
        "files",
        at,
        (SourceStatus("file", "/srv/locks", "watching", updated_at=at),),
        upserts=upserts,
        removed=removed,
        errors=(ScanError("/srv/locks/private", "Permission denied", "permission_denied"),),
        all_errors=True,
    )


def session() -> list[ChangeSet]:
    a, b = entry("a", 100), entry("b", 200)
    return [
        change_at(0, a, b),
        change_at(0.1, entry("a", 101)),
        change_at(0.4, removed=(b.lock.id,)),
        change_at(0.5),
    ]


def lines_of(changes: list[ChangeSet]) -> list[bytes]:
    return [codec.dumps_line(c).rstrip(b"\n") for c in changes]


async def eventually(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(STEP_S)


async def settle() -> None:
    """A few rounds of the loop (and the feed's shortest wait) for anything pending."""
    for _ in range(5):
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def playing(feed: ReplayFeed) -> AsyncIterator[list[ChangeSet]]:
    emitted: list[ChangeSet] = []
    task = asyncio.create_task(feed.run(emitted.append))
    try:
        yield emitted
    finally:
        await stop_feed(feed, task)


def is_end(change: ChangeSet) -> bool:
    return (
        change.upserts == ()
        and len(change.statuses) == 1
        and change.statuses[0].state == "ok"
        and (change.statuses[0].reason or "").startswith("end of recording")
    )


# --------------------------------------------------------------------------- Recorder


def test_recorder_writes_a_header_and_one_line_per_change_set(tmp_path: Path) -> None:
    path = tmp_path / "incident.jsonl"
    changes = session()
    recorder = Recorder(path, host="tower-01", now=NOW)
    for change in changes:
        recorder.write(change)
    recorder.close()
    assert recorder.failed is None

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = path.read_bytes()
    assert data.endswith(b"\n")
    lines = data.splitlines()
    assert len(lines) == 1 + len(changes)
    assert orjson.loads(lines[0]) == {
        "lockwatch": FORMAT,
        "host": "tower-01",
        "started_at": NOW.isoformat(),
    }
    assert [codec.loads_line(line) for line in lines[1:]] == changes


def test_a_second_session_appends_with_a_header_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "incident.jsonl"
    first, second = session()[:2], session()[2:]
    recorder = Recorder(path, host="tower-01", now=NOW)
    for change in first:
        recorder.write(change)
    recorder.close()
    later = NOW + timedelta(hours=1)
    recorder = Recorder(path, host="tower-02", now=later)
    for change in second:
        recorder.write(change)
    recorder.close()

    lines = path.read_bytes().splitlines()
    assert len(lines) == 2 + len(first) + len(second)
    assert orjson.loads(lines[0])["host"] == "tower-01"
    header = orjson.loads(lines[1 + len(first)])
    assert header == {"lockwatch": FORMAT, "host": "tower-02", "started_at": later.isoformat()}
    body = lines[1 : 1 + len(first)] + lines[2 + len(first) :]
    assert [codec.loads_line(line) for line in body] == first + second
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    # Played back as one recording: the later header is no change set, nor a bad line.
    feed = ReplayFeed.open(path, paused=True)
    assert feed.host == "tower-01"
    assert feed.describe().endswith(f"(0/{len(first) + len(second)})")


def test_recorder_cannot_write_is_a_recording_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="cannot write"):
        Recorder(tmp_path / "no" / "such" / "dir.jsonl", host="h")
    with pytest.raises(RecordingError, match="a directory, not a regular file"):
        Recorder(tmp_path, host="h")  # a directory


# --------------------------------------------------------------------------- ReplayClock


def test_replay_clock_moves_with_speed_stops_when_paused_and_jumps_forward() -> None:
    mono = FakeMonotonic()
    clock = ReplayClock(NOW, mono)
    assert clock.now() == NOW
    mono.advance(3)
    assert clock.now() == NOW + timedelta(seconds=3)

    clock.set_speed(4.0)  # from here on, four recorded seconds a second
    assert clock.now() == NOW + timedelta(seconds=3)
    mono.advance(1)
    assert clock.now() == NOW + timedelta(seconds=7)

    clock.set_paused(True)
    mono.advance(100)
    assert clock.now() == NOW + timedelta(seconds=7)
    clock.set_paused(False)
    assert clock.now() == NOW + timedelta(seconds=7)  # nothing lost, nothing gained
    mono.advance(0.5)
    assert clock.now() == NOW + timedelta(seconds=9)

    clock.set_speed(0.25)
    mono.advance(4)
    assert clock.now() == NOW + timedelta(seconds=10)

    clock.jump(NOW + timedelta(minutes=5))
    assert clock.now() == NOW + timedelta(minutes=5)
    mono.advance(4)
    assert clock.now() == NOW + timedelta(minutes=5, seconds=1)
    clock.jump(NOW)  # never backwards
    assert clock.now() == NOW + timedelta(minutes=5, seconds=1)

    clock.set_paused(True)
    clock.jump(NOW + timedelta(hours=1))  # a jump while paused stays paused there
    mono.advance(10)
    assert clock.now() == NOW + timedelta(hours=1)


# --------------------------------------------------------------------------- ReplayFeed


async def test_round_trip_plays_back_at_the_recorded_times_and_speed(tmp_path: Path) -> None:
    path = tmp_path / "incident.jsonl"
    changes = session()  # at +0, +0.1, +0.4, +0.5 s
    recorder = Recorder(path, host="tower-01", now=NOW - timedelta(seconds=5))
    for change in changes:
        recorder.write(change)
    recorder.close()

    opened = ReplayFeed.open(path, paused=True)
    assert opened.host == "tower-01"
    # From the first change set, not the header (the real monotonic clock runs a few
    # microseconds between building the clock and pausing it).
    assert abs(opened.clock.now() - NOW) < timedelta(seconds=1)
    assert opened.name == "replay:incident.jsonl"

    mono = FakeMonotonic()
    lines = path.read_bytes().splitlines()[1:]
    feed = ReplayFeed(lines, host=opened.host, start=NOW, speed=2.0, monotonic=mono)
    assert feed.speed == 2.0 and not feed.paused
    async with playing(feed) as emitted:
        await eventually(lambda: len(emitted) == 1, "the first change set")
        await settle()
        assert emitted == changes[:1]  # +0.1 s is not due while time stands still

        mono.advance(0.04)  # 0.08 recorded seconds at 2x: still not due
        await settle()
        assert len(emitted) == 1
        mono.advance(0.02)  # 0.12 recorded seconds
        await eventually(lambda: len(emitted) == 2, "the change set at +0.1 s")
        await settle()
        assert emitted == changes[:2]

        mono.advance(0.2)  # +0.52: both remaining change sets, then the end
        await eventually(lambda: len(emitted) == 5, "the rest and the end of the recording")
        assert emitted[:4] == changes
        end = emitted[4]
        assert is_end(end) and end.feed == feed.name
        assert end.statuses[0].reason == "end of recording (0.5s recorded)"
        assert feed.position == 4 and feed.bad_lines == 0
        assert feed.describe().endswith("(4/4) — end of recording")


async def test_step_while_paused_emits_exactly_one_change_set() -> None:
    mono = FakeMonotonic()
    changes = session()
    feed = ReplayFeed(lines_of(changes), host="h", start=NOW, paused=True, monotonic=mono)
    assert feed.paused
    async with playing(feed) as emitted:
        # Paused on the first snapshot (it lies at the start): shown, and nothing after it.
        await eventually(lambda: emitted, "the first change set")
        mono.advance(60)
        await settle()
        assert emitted == changes[:1]
        assert feed.clock.now() == changes[0].at

        feed.step()
        await eventually(lambda: len(emitted) == 2, "one step")
        await settle()
        assert emitted == changes[:2]
        assert feed.paused and feed.position == 2
        assert feed.clock.now() == changes[1].at  # jumped to the step's time
        assert feed.describe().startswith("REPLAY PAUSED")

        feed.toggle_pause()  # playing again from +0.1 s, at 1x
        assert not feed.clock.paused
        mono.advance(0.35)  # +0.45: one more
        await eventually(lambda: len(emitted) == 3, "the change set at +0.4 s")
        await settle()
        assert emitted == changes[:3]

        feed.step()  # stepping while playing pauses, and steps once: to the last one
        await eventually(lambda: len(emitted) >= 4, "the stepped change set")
        await settle()
        assert feed.paused
        assert emitted[:4] == changes
        assert len(emitted) == 5 and is_end(emitted[4])  # then the recording ends


async def test_faster_and_slower_walk_the_speeds() -> None:
    feed = ReplayFeed([], host="h", start=NOW, monotonic=FakeMonotonic())
    feed.faster()
    assert feed.speed == 2.0
    for _ in range(20):
        feed.faster()
    assert feed.speed == ReplayFeed.SPEEDS[-1]
    for _ in range(20):
        feed.slower()
    assert feed.speed == ReplayFeed.SPEEDS[0]
    assert feed.describe().startswith("REPLAY 0.25")


async def test_bad_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    changes = session()
    good = lines_of([changes[0], changes[1]])
    path = tmp_path / "damaged.jsonl"
    header = orjson.dumps({"lockwatch": FORMAT, "host": "tower-01", "started_at": "x"})
    path.write_bytes(
        b"\n".join(
            [
                header,
                b"not json at all",
                good[0],
                b"",  # blank lines are no lines
                codec.dumps_line(SourceStatus("file", "/x", "ok")).rstrip(b"\n"),  # no ChangeSet
                b'{"~": "NoSuchRecord", "x": 1}',
                good[1][: len(good[1]) // 2],  # cut short (a crash mid-write)
                good[1],
            ]
        )
        + b"\n"
    )
    feed = ReplayFeed.open(path)
    async with playing(feed) as emitted:
        # Both good change sets lie at or before the feed's start: due at once.
        await eventually(lambda: emitted and is_end(emitted[-1]), "the end of the recording")
    assert emitted[:-1] == changes[:2]
    assert feed.bad_lines == 4
    assert "4 unreadable line(s) skipped" in feed.describe()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\n\n",
        b'{"hello": "world"}\n',
        b'{"lockwatch": "recording/999", "host": "h"}\n',
        b"\xff\xfe garbage\n",
        None,  # a change set with no header before it
    ],
)
def test_not_a_recording_is_a_recording_error(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "other.jsonl"
    path.write_bytes(content if content is not None else codec.dumps_line(session()[0]))
    with pytest.raises(RecordingError, match="not a lockwatch recording") as raised:
        ReplayFeed.open(path)
    assert str(path) in str(raised.value)


def test_unreadable_file_is_a_recording_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="cannot read") as raised:
        ReplayFeed.open(tmp_path / "missing.jsonl")
    assert "missing.jsonl" in str(raised.value)
    with pytest.raises(RecordingError, match="not read: a directory, not a regular file"):
        ReplayFeed.open(tmp_path)


async def test_header_only_recording_starts_at_the_header_and_just_ends(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    path.write_bytes(
        orjson.dumps({"lockwatch": FORMAT, "host": "h", "started_at": started.isoformat()}) + b"\n"
    )
    feed = ReplayFeed.open(path, paused=True)
    assert abs(feed.clock.now() - started) < timedelta(seconds=1)
    async with playing(feed) as emitted:
        await eventually(lambda: emitted, "the end of the recording")
    assert len(emitted) == 1 and is_end(emitted[0])


def test_a_change_set_without_a_time_zone_is_a_bad_line() -> None:
    """A foreign or corrupt recording must not reach the dashboard with naive times."""
    naive = ChangeSet("files", datetime(2026, 1, 2, 3, 4, 5))
    feed = ReplayFeed([codec.dumps_line(naive)], host="h", start=datetime(2026, 1, 2, tzinfo=UTC))
    assert feed._decode(codec.dumps_line(naive)) is None
    assert feed.bad_lines == 1


async def test_a_later_session_starts_from_nothing(tmp_path: Path) -> None:
    """Two sessions appended to one file: the second's locks replace the first's."""
    path = tmp_path / "two.jsonl"
    header = orjson.dumps({"lockwatch": FORMAT, "host": "h"})
    first, second = entry("a", 100), entry("b", 200)
    path.write_bytes(
        b"\n".join([header, *lines_of([change_at(0, first)]), header])
        + b"\n"
        + b"\n".join(lines_of([change_at(1, second)]))
        + b"\n"
    )
    feed = ReplayFeed.open(path, speed=64)
    board = Board(LOCAL_HOST)
    async with playing(feed) as emitted:
        await eventually(lambda: any(is_end(c) for c in emitted), "the end of the replay")
    for change in emitted:
        board.apply(change)
    assert list(board.entries) == [second.lock.id]
