"""Recordings: every change set the sources produce, as JSON Lines, and a feed
that plays them back with their own times so an incident can be reviewed.

Line 1 (and the first line of every later session appending to the file) is a
header: `{"lockwatch": "recording/1", "host": …, "started_at": …}`. Every other
line is one change set, encoded by `lockwatch.model.codec`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from lockwatch.model import codec
from lockwatch.model.changes import ChangeSet, Entry
from lockwatch.model.facts import Facts
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.status import SourceStatus
from lockwatch.sources.feed import Emit
from lockwatch.sources.filelocks import KernelLock
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.ids import FILE as FILES
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.registry import record_types

FORMAT = "recording/1"
MIB = 1024 * 1024
# Bounds on what replay reads (it keeps every line in memory): a day of a
# 10,000-lock dashboard's change sets fits many times over; /dev/zero does not.
MAX_BYTES = 1024 * MIB
MAX_LINE_BYTES = 256 * MIB  # one change set (a full 50,000-lock snapshot is ~30 MiB)
MAX_HEADER_BYTES = 64 * 1024
# A change set line is a JSON object, and the shortest lockwatch writes is longer
# than this: a line that is neither is no change set. Past MAX_BAD_LINES of them
# the file is no recording (a 40 MB file of `x` lines was 20 million of them).
MIN_LINE_BYTES = 24
MAX_BAD_LINES = 1000
NOT_A_RECORDING = "not a lockwatch recording (write one with `lockwatch --record FILE`)"
# Every source's own facts on its locks (pg_locks rows, /proc/locks lines) travel
# in recordings: the registry says which types those are.
codec.register(Entry, ChangeSet)
_registered: list[tuple[type, ...]] = [()]


def know_sources() -> None:
    """Make every source's own facts types (pg_locks rows, /proc/locks lines, …)
    known to the codec, as the registry has them now: a recording carries them."""
    kinds = record_types()
    if kinds != _registered[0]:
        codec.register(*kinds)
        _registered[0] = kinds


know_sources()


# Recordings made before a lock carried its source's facts as one value kept
# each family's in a field of its own (`pg`, `kernel`, `store`, `remote`): they
# read as that lock's facts. A kernel lock's line becomes the kernel's facts.
def _as_facts(value: Any) -> Facts | None:
    if value is None or isinstance(value, Facts):
        return value
    if isinstance(value, KernelLock):
        return KernelFacts.of(value)
    raise TypeError(f"not a lock's facts: {type(value).__name__}")


codec.legacy_fields(
    Lock, {old: ("facts", _as_facts) for old in ("pg", "kernel", "store", "remote")}
)

# Recordings made before a lock file's own fields moved into its facts
# (`FileFacts`) kept them on the lock: they read as that lock's file facts.
_FILE_FIELDS = {
    "policy": "policy",
    "file_key": "file_key",
    "entry": "entry",
    "evidence": "evidence",
    "kernel_file": "kernel_file",
    "users": "users",
    "singleton": "singleton_name",
    "unseen": "unseen",
    "unread": "unread",
    "modified_at": "modified_at",
}


def _file_facts(fields: dict[str, Any], old: dict[str, Any], raw: dict[str, Any]) -> None:
    if fields.get("source") != FILES:
        _idle_limit(fields, raw.get("policy"))
    elif "facts" not in fields:
        fields["facts"] = FileFacts(**{_FILE_FIELDS[name]: value for name, value in old.items()})


# A server's idle limit was its lock's policy's `idle_after` in those recordings:
# it is its facts' own now (PostgreSQL's, MySQL's).
def _idle_limit(fields: dict[str, Any], policy: Any) -> None:
    facts = fields.get("facts")
    if not isinstance(policy, dict) or facts is None or not hasattr(facts, "idle_after"):
        return
    limit = policy.get("idle_after")
    if isinstance(limit, int | float) and not isinstance(limit, bool):
        fields["facts"] = dataclasses.replace(facts, idle_after=float(limit))


codec.legacy_regroup(Lock, tuple(_FILE_FIELDS), _file_facts)


class RecordingError(ValueError):
    """A recording that cannot be written or read; the message says which and why."""


class Recorder:
    """Appends change sets to a file from a thread of its own: encoding a 10,000
    lock snapshot must not stall the dashboard."""

    def __init__(self, path: Path, *, host: str, now: datetime | None = None) -> None:
        know_sources()
        self.path = path
        from lockwatch.trusted import Refused, open_own

        try:
            # Yours alone: a new file made 0600 exclusively; one already there only if
            # it is your regular file nobody else can write. Never through a symlink,
            # never another user's 0666 file (root's data appended where they read
            # it), never a FIFO (the dashboard would wait on its reader for ever).
            fd, _ = open_own(path, os.O_WRONLY | os.O_APPEND)
        except Refused as exc:
            raise RecordingError(f"{path}: refused: {exc.why}") from exc
        except OSError as exc:
            raise RecordingError(f"{path}: cannot write: {exc.strerror or exc}") from exc
        self._file = os.fdopen(fd, "ab")
        header = {
            "lockwatch": FORMAT,
            "host": host,
            "started_at": (now or datetime.now(UTC)).isoformat(),
        }
        self._file.write(orjson.dumps(header) + b"\n")
        self._file.flush()
        self._queue: queue.SimpleQueue[ChangeSet | None] = queue.SimpleQueue()
        self.failed: str | None = None
        self._thread = threading.Thread(target=self._drain, name="lockwatch-recorder", daemon=True)
        self._thread.start()

    def write(self, change: ChangeSet) -> None:
        self._queue.put(change)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)
        with contextlib.suppress(OSError):
            self._file.close()

    def _drain(self) -> None:
        while True:
            change = self._queue.get()
            if change is None:
                return
            if self.failed is not None:
                continue
            try:
                self._file.write(codec.dumps_line(change))
                self._file.flush()
            except OSError as exc:
                self.failed = f"{self.path}: recording stopped: {exc.strerror or exc}"
            except codec.CodecError as exc:
                # Stop rather than leave a gap a replay would not show; and keep
                # this thread draining: were it to die, every later change set
                # would pile up in the queue for the dashboard's whole life.
                self.failed = f"{self.path}: recording stopped: cannot encode a change set: {exc}"


class ReplayClock:
    """The recording's time: it moves with the wall clock times `speed`, stops
    while paused, and jumps when stepping."""

    def __init__(self, start: datetime, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._at = start
        self._since = monotonic()
        self.speed = 1.0
        self.paused = False

    def now(self) -> datetime:
        if self.paused:
            return self._at
        elapsed = (self._monotonic() - self._since) * self.speed
        return self._at + timedelta(seconds=elapsed)

    def _rebase(self) -> None:
        self._at = self.now()
        self._since = self._monotonic()

    def set_speed(self, speed: float) -> None:
        self._rebase()
        self.speed = speed

    def set_paused(self, paused: bool) -> None:
        self._rebase()
        self.paused = paused

    def jump(self, to: datetime) -> None:
        if to > self.now():
            self._at = to
            self._since = self._monotonic()


def read_lines(path: Path) -> list[bytes]:
    """The recording's non-blank lines, read line by line from a regular file: a
    device, a FIFO or a directory is refused by name before it is read, a file
    over MAX_BYTES or a line over MAX_LINE_BYTES (a header over MAX_HEADER_BYTES)
    is refused once that much has been read, and so is a file with over
    MAX_BAD_LINES lines that are no change set. Replay keeps every line (it counts
    and steps through them), so the whole is bounded, not only each line."""
    from lockwatch.trusted import Refused, open_file

    try:
        handle = open_file(path, MAX_BYTES)
    except Refused as exc:
        raise RecordingError(f"{path}: not read: {exc.why}") from None
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    lines: list[bytes] = []
    total = bad = 0
    with handle:
        while True:
            bound = MAX_LINE_BYTES if lines else MAX_HEADER_BYTES
            try:
                line = handle.readline(bound + 1)
            except OSError as exc:
                raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from exc
            if not line:
                return lines
            total += len(line)
            if len(line) > bound and not lines:
                raise RecordingError(f"{path}: {NOT_A_RECORDING}")
            if len(line) > bound:
                raise RecordingError(
                    f"{path}: line {len(lines) + 1} is over {bound // MIB} MiB: not a change"
                    " set lockwatch writes"
                )
            if total > MAX_BYTES:
                raise RecordingError(f"{path}: grew past {MAX_BYTES // MIB} MiB while read")
            line = line.rstrip(b"\r\n")
            if not line.strip():
                continue
            if lines and not _shaped(line):
                bad += 1
                if bad > MAX_BAD_LINES:
                    raise RecordingError(
                        f"{path}: over {MAX_BAD_LINES:,} lines are no change set (line"
                        f" {len(lines) + 1:,} the last): not a lockwatch recording; stopped reading"
                    )
            lines.append(line)


def _shaped(line: bytes) -> bool:
    """Whether `line` could be a change set (or a later session's header): a
    JSON object at least MIN_LINE_BYTES long. Only its ends are looked at; the
    line is decoded when it is played."""
    line = line.strip()
    return len(line) >= MIN_LINE_BYTES and line[:1] == b"{" and line[-1:] == b"}"


def _header(line: bytes) -> dict[str, object] | None:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, dict) and value.get("lockwatch") == FORMAT:
        return value
    return None


class ReplayFeed:
    """Plays a recording back as a feed; the dashboard's replay keys drive it."""

    SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)

    def __init__(
        self,
        lines: list[bytes],
        *,
        host: str,
        start: datetime,
        speed: float = 1.0,
        paused: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
        name: str = "replay",
    ) -> None:
        know_sources()
        self.name = name
        self.host = host
        self._lines = lines
        self.clock = ReplayClock(start, monotonic)
        self.clock.set_speed(speed)
        self.clock.set_paused(paused)
        self.position = 0  # lines done, session headers included
        self.played = 0  # change set lines done
        self._records = sum(1 for line in lines if _header(line) is None)
        self.bad_lines = 0
        self._wake = asyncio.Event()
        self._steps = 0

    @classmethod
    def open(cls, path: Path, *, speed: float = 1.0, paused: bool = False) -> ReplayFeed:
        lines = read_lines(path)
        header = _header(lines[0]) if lines else None
        if header is None:
            raise RecordingError(f"{path}: {NOT_A_RECORDING}")
        # Later headers stay: each starts a new session, whose first rescan
        # would otherwise leave the previous session's locks on screen.
        records = lines[1:]
        start = _first_time(records) or _parse_time(header.get("started_at"))
        return cls(
            records,
            host=str(header.get("host") or "unknown"),
            start=start or datetime.now(UTC),
            speed=speed,
            paused=paused,
            name=f"replay:{path.name}",
        )

    # -- the replay keys -------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self.clock.paused

    @property
    def speed(self) -> float:
        return self.clock.speed

    def toggle_pause(self) -> None:
        self.clock.set_paused(not self.clock.paused)
        self._wake.set()

    def step(self) -> None:
        if not self.clock.paused:
            self.clock.set_paused(True)
        self._steps += 1
        self._wake.set()

    def faster(self) -> None:
        self.clock.set_speed(next((s for s in self.SPEEDS if s > self.speed), self.SPEEDS[-1]))
        self._wake.set()

    def slower(self) -> None:
        lower = [s for s in self.SPEEDS if s < self.speed]
        self.clock.set_speed(lower[-1] if lower else self.SPEEDS[0])
        self._wake.set()

    def describe(self) -> str:
        state = "PAUSED" if self.paused else f"{self.speed:g}x"
        at = self.clock.now().strftime("%Y-%m-%d %H:%M:%S UTC")
        done = " — end of recording" if self.position >= len(self._lines) else ""
        bad = f", {self.bad_lines} unreadable line(s) skipped" if self.bad_lines else ""
        return f"REPLAY {state} {at} ({self.played}/{self._records}){done}{bad}"

    # -- playing ---------------------------------------------------------------------

    async def run(self, emit: Emit) -> None:
        feeds: set[str] = set()
        while self.position < len(self._lines):
            if _header(self._lines[self.position]) is not None:
                self.position += 1
                for name in sorted(feeds):  # a new session: what the last one showed is gone
                    emit(ChangeSet(name, self.clock.now(), full=True))
                continue
            # Decoding a 10,000-lock snapshot takes a while: not on the event loop.
            change = await asyncio.to_thread(self._decode, self._lines[self.position])
            if change is None:
                self.position += 1
                self.played += 1
                continue
            while not self._due(change):
                self._wake.clear()
                wait = self._seconds_until(change.at)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
            if self._steps:
                self._steps -= 1
                self.clock.jump(change.at)
            self.position += 1
            self.played += 1
            feeds.add(change.feed)
            emit(change)
            await asyncio.sleep(0)  # let the dashboard draw between snapshots
        emit(
            ChangeSet(
                self.name,
                self.clock.now(),
                (
                    SourceStatus(
                        "file",
                        self.name,
                        "ok",
                        reason=f"end of recording ({duration(self._length())} recorded)",
                    ),
                ),
            )
        )

    async def close(self) -> None:
        self._wake.set()

    def _due(self, change: ChangeSet) -> bool:
        return self._steps > 0 or self.clock.now() >= change.at

    def _seconds_until(self, at: datetime) -> float | None:
        if self.clock.paused:
            return None
        ahead = (at - self.clock.now()).total_seconds() / self.clock.speed
        return min(max(ahead, 0.01), 1.0)

    def _decode(self, line: bytes) -> ChangeSet | None:
        try:
            value = codec.loads_line(line)
        except (codec.CodecError, orjson.JSONDecodeError, ValueError):
            self.bad_lines += 1
            return None
        if not isinstance(value, ChangeSet) or value.at.tzinfo is None:
            self.bad_lines += 1
            return None
        return value

    def _length(self) -> float:
        first = _first_time(self._lines)
        last = _first_time(self._lines[-1:])
        if first is None or last is None:
            return 0.0
        return max(0.0, (last - first).total_seconds())


def _first_time(lines: list[bytes]) -> datetime | None:
    # The first change set that decodes: looked for among the first lines only,
    # or a file of lines that never decode would be decoded whole before a frame.
    for line in lines[: MAX_BAD_LINES + 1]:
        try:
            value = codec.loads_line(line)
        except (codec.CodecError, orjson.JSONDecodeError, ValueError):
            continue
        if isinstance(value, ChangeSet):
            return value.at
    return None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
