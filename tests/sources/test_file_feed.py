"""FileFeed on a real filesystem: the initial scan, watched changes, rescans, liveness.

Each test runs the feed in an asyncio task with an `emit` that keeps every ChangeSet and
waits for conditions with a bounded polling loop (`eventually`): that is waiting for an
event, never a timing assertion. Tests about events run with a rescan period of an hour,
so whatever shows up came through the watcher; `barrier` writes a probe lock until the
watcher reports it, which proves it is up and that every earlier change was handled.

Also the Differ alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.process import ProcessFacts, ProcessLookup, StaticProcesses
from lockwatch.model.verdict import State
from lockwatch.sources.feed import Differ
from lockwatch.sources.files.changes import Change
from lockwatch.sources.files.collect import with_listing
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.files.roots import ARMING
from lockwatch.sources.files.watch import FileFeed
from tests.conftest import LOCAL_HOST, NOW, ago, lock_file, stop_feed
from tests.conftest import alive as alive_since_an_hour

# A bound on waiting for an event (fails rather than hangs), never a timing assertion:
# generous, as a loaded 2-core machine may take seconds to schedule the feed.
WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
STEP_S = 0.02
HOUR = 3600.0
PROBE = "zz-probe"


def started_an_hour_ago(pid: int) -> ProcessFacts:
    return ProcessFacts(
        pid=pid,
        alive=True,
        started_at=datetime.now(UTC) - timedelta(hours=1),
        cmdline=("worker",),
        user="op",
    )


ME = os.getpid()
# Built once: facts that differ between lookups (a new started_at) are a change to send.
ME_FACTS = started_an_hour_ago(ME)


def me_alive() -> ProcessLookup:
    """This test process, running since an hour ago (before any lock it writes)."""
    return StaticProcesses(ME_FACTS)


def never_running_pid() -> int:
    """A pid above the kernel's pid_max: no process can have it."""
    try:
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        pid_max = 4_194_304
    return pid_max + 1000


def body(operation: str, pid: int = ME) -> str:
    return json.dumps({"pid": pid, "operation": operation})


def write(path: Path, content: str) -> str:
    """Write `content` to `path` (parents made); its sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return hashlib.sha256(content.encode()).hexdigest()


def lock_id(path: Path) -> str:
    return f"file:{os.path.abspath(path)}"


class Seen:
    """The emit: every ChangeSet, and the picture they add up to."""

    def __init__(self) -> None:
        self.changes: list[ChangeSet] = []
        self.current: dict[str, Entry] = {}

    def __call__(self, change: ChangeSet) -> None:
        self.changes.append(change)
        for lock in change.removed:
            self.current.pop(lock, None)
        for entry in change.upserts:
            self.current[entry.lock.id] = entry

    def sha(self, lock: str) -> str | None:
        entry = self.current.get(lock)
        return None if entry is None else entry.lock.sha256

    def upserts_of(self, lock: str, since: int = 0) -> list[Entry]:
        return [e for c in self.changes[since:] for e in c.upserts if e.lock.id == lock]

    def removals_of(self, lock: str, since: int = 0) -> int:
        return sum(c.removed.count(lock) for c in self.changes[since:])

    def rescans(self) -> int:
        return sum(1 for c in self.changes if c.all_errors)

    def ids(self, since: int = 0) -> set[str]:
        """Every id upserted or removed since change `since`, probes left out."""
        out = {e.lock.id for c in self.changes[since:] for e in c.upserts}
        out.update(r for c in self.changes[since:] for r in c.removed)
        return {i for i in out if PROBE not in i}


async def eventually(predicate: Callable[[], object], timeout: float = WAIT_S) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(STEP_S)
    return True


async def until(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    if not await eventually(predicate, timeout):
        pytest.fail(f"timed out after {timeout:g}s waiting for {what}")


async def barrier(root: Path, seen: Seen, attempts: int = 20) -> None:
    """Write a probe lock until the watcher reports it, then delete it and wait for that.

    The first write may come before the watcher is set up (it starts after the initial
    scan), so each attempt writes new content. Batches are handled in order: once the
    probe's change is seen, every change made before it has been handled."""
    probe = root / f"{PROBE}.lock"
    for attempt in range(attempts):
        digest = write(probe, body(f"probe-{attempt}"))

        def reported(digest: str = digest) -> bool:
            return seen.sha(lock_id(probe)) == digest

        if await eventually(reported, timeout=0.5):
            break
    else:
        pytest.fail(f"the watcher never reported {probe}")
    probe.unlink()
    await until(lambda: lock_id(probe) not in seen.current, f"{probe} to be removed")


@contextlib.asynccontextmanager
async def running(feed: FileFeed) -> AsyncIterator[Seen]:
    """`feed.run` in a task, once its initial scan is in; cancelled on the way out."""
    seen = Seen()
    task = asyncio.create_task(feed.run(seen))
    try:
        await until(lambda: seen.changes or task.done(), "the initial scan")
        if task.done():
            task.result()  # raise what the feed raised
        yield seen
    finally:
        await stop_feed(feed, task)


def feed_on(*roots: Path, **options: object) -> FileFeed:
    settings: dict[str, object] = {
        "host": LOCAL_HOST,
        "processes": me_alive,
        "rescan_seconds": HOUR,
        "liveness_seconds": HOUR,
        "settle_seconds": None,
        "polling_rescan_seconds": HOUR,
    }
    settings.update(options)
    return FileFeed([str(r) for r in roots], **settings)  # type: ignore[arg-type]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


# --------------------------------------------------------------------------- initial scan


async def test_initial_scan_emits_every_lock_and_watching_statuses(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    a = write(one / "a.lock", body("a"))
    b = write(one / "deep" / "er" / "b.pid", body("b"))
    c = write(two / "c.lock", str(ME))
    write(one / "notes.txt", "not a lock")
    async with running(feed_on(one, two)) as seen:
        first = seen.changes[0]
        assert first.feed == "files"
        assert first.all_errors and first.errors == ()
        assert first.removed == ()
        by_id = {e.lock.id: e for e in first.upserts}
        assert set(by_id) == {
            lock_id(one / "a.lock"),
            lock_id(one / "deep" / "er" / "b.pid"),
            lock_id(two / "c.lock"),
        }
        assert by_id[lock_id(one / "a.lock")].lock.sha256 == a
        assert by_id[lock_id(one / "deep" / "er" / "b.pid")].lock.sha256 == b
        assert by_id[lock_id(two / "c.lock")].lock.sha256 == c
        for entry in first.upserts:
            assert entry.lock.source == "file"
            assert entry.lock.format == "generic"
            assert entry.verdict.state is State.ACTIVE
            assert entry.verdict.alive is True
            assert entry.facts is not None and entry.facts.pid == ME
        assert [(s.kind, s.name, s.state) for s in first.statuses] == [
            ("file", str(one), "watching"),
            ("file", str(two), "watching"),
        ]
        # The watches go in after the first scan: till they all are, the header
        # says so, and once they are, a change set with nothing but statuses does.
        assert all(s.reason == ARMING and s.updated_at == first.at for s in first.statuses)
        await until(lambda: len(seen.changes) > 1, "the statuses once armed")
        armed = seen.changes[1]
        assert armed.upserts == () and armed.removed == ()
        assert [(s.state, s.reason) for s in armed.statuses] == [("watching", None)] * 2


async def test_initial_scan_of_an_empty_root_emits_an_empty_full_picture(root: Path) -> None:
    async with running(feed_on(root)) as seen:
        (first,) = seen.changes
        assert first.upserts == () and first.removed == ()
        assert [s.state for s in first.statuses] == ["watching"]


# --------------------------------------------------------------------------- watched changes


async def test_created_changed_and_deleted_locks(root: Path) -> None:
    path = root / "app.lock"
    async with running(feed_on(root)) as seen:
        await barrier(root, seen)

        mark = len(seen.changes)
        created = write(path, body("first"))
        await until(lambda: seen.sha(lock_id(path)) == created, "the new lock")
        change = next(c for c in seen.changes[mark:] if seen.upserts_of(lock_id(path)))
        assert change.feed == "files" and not change.all_errors
        assert [s.state for s in change.statuses] == ["watching"]
        entry = seen.current[lock_id(path)]
        assert entry.lock.path == str(path)
        assert entry.lock.holder.operation == "first"
        assert entry.verdict.state is State.ACTIVE

        changed = write(path, body("second"))
        assert changed != created
        await until(lambda: seen.sha(lock_id(path)) == changed, "the changed lock")
        assert seen.current[lock_id(path)].lock.holder.operation == "second"

        mark = len(seen.changes)
        path.unlink()
        await until(lambda: seen.removals_of(lock_id(path), mark), "the removal")
        assert lock_id(path) not in seen.current
        assert seen.ids(mark) == {lock_id(path)}


async def test_atomic_write_shows_the_new_content_once(root: Path) -> None:
    path = root / "app.lock"
    old = write(path, body("old"))
    async with running(feed_on(root)) as seen:
        assert seen.sha(lock_id(path)) == old
        await barrier(root, seen)

        mark = len(seen.changes)
        temp = root / "app.lock.req_abc123.tmp"
        new = write(temp, body("new"))
        os.replace(temp, path)
        await until(lambda: seen.sha(lock_id(path)) == new, "the replaced content")
        await barrier(root, seen)  # anything the replace caused has been handled now

        shown = [e.lock.sha256 for e in seen.upserts_of(lock_id(path), mark)]
        assert shown == [new]
        assert seen.removals_of(lock_id(path), mark) == 0
        assert seen.ids(mark) == {lock_id(path)}  # never the temp file


async def test_a_new_directory_with_locks_appears(root: Path) -> None:
    async with running(feed_on(root)) as seen:
        await barrier(root, seen)
        new = root / "new"
        new.mkdir()
        made = {
            lock_id(new / "a.lock"): write(new / "a.lock", body("a")),
            lock_id(new / "nested" / "b.lock"): write(new / "nested" / "b.lock", body("b")),
        }
        await until(lambda: all(seen.sha(i) == sha for i, sha in made.items()), "both new locks")


async def test_a_removed_directory_removes_its_locks(root: Path) -> None:
    gone = root / "gone"
    moved = root / "moved"
    ids = [
        lock_id(gone / "a.lock"),
        lock_id(gone / "deep" / "b.lock"),
        lock_id(moved / "c.lock"),
        lock_id(moved / "deep" / "d.lock"),
    ]
    write(gone / "a.lock", body("a"))
    write(gone / "deep" / "b.lock", body("b"))
    write(moved / "c.lock", body("c"))
    write(moved / "deep" / "d.lock", body("d"))
    kept = write(root / "kept.lock", body("kept"))
    async with running(feed_on(root)) as seen:
        assert set(ids) <= set(seen.current)
        await barrier(root, seen)

        mark = len(seen.changes)
        shutil.rmtree(gone)
        # Renamed out of the tree: the only event is the directory's own.
        os.rename(moved, root.parent / "elsewhere")
        await until(lambda: not set(ids) & set(seen.current), "every lock under both dirs gone")
        await barrier(root, seen)
        assert seen.ids(mark) == set(ids)
        assert all(seen.removals_of(i, mark) == 1 for i in ids)
        assert seen.sha(lock_id(root / "kept.lock")) == kept


async def test_tombstones_and_temp_files_are_ignored(root: Path) -> None:
    write(root / ".lockwatch-broken" / "old.lock", body("tombstone"))
    write(root / "app.lock.tmp", body("temp"))
    real = write(root / "real.lock", body("real"))
    async with running(feed_on(root)) as seen:
        assert set(seen.current) == {lock_id(root / "real.lock")}
        await barrier(root, seen)

        mark = len(seen.changes)
        write(root / ".lockwatch-broken" / "old.lock", body("tombstone again"))
        write(root / ".lockwatch-broken" / "new" / "x.lock", body("tombstone"))
        write(root / "app.lock.tmp", body("temp again"))
        write(root / "sub" / ".lock.tmp", body("temp"))
        write(root / "sub" / "app-prod.lock.heartbeat.tmp", body("temp"))
        await barrier(root, seen)
        assert seen.ids(mark) == set()
        assert set(seen.current) == {lock_id(root / "real.lock")}
        assert seen.sha(lock_id(root / "real.lock")) == real


def replace_with_mtime(path: Path, content: str, mtime: float) -> str:
    """An atomic rewrite whose result carries `mtime` (a temp file, then os.replace)."""
    temp = path.with_name(path.name + ".w.tmp")
    digest = write(temp, content)
    os.utime(temp, (mtime, mtime))
    os.replace(temp, path)
    return digest


async def test_force_polling_sees_creation_change_and_removal(root: Path) -> None:
    path = root / "polled.lock"
    async with running(feed_on(root, force_polling=True)) as seen:
        await barrier(root, seen)
        created = write(path, body("first"))
        await until(lambda: seen.sha(lock_id(path)) == created, "the new lock (polling)")
        # The poller notices a file whose mtime moved forward by whole seconds, as
        # any rewrite a few seconds later would (same-second rewrites: see below).
        changed = replace_with_mtime(path, body("second"), path.stat().st_mtime + 3)
        await until(lambda: seen.sha(lock_id(path)) == changed, "the changed lock (polling)")
        mark = len(seen.changes)
        path.unlink()
        await until(lambda: seen.removals_of(lock_id(path), mark), "the removal (polling)")
        assert seen.rescans() == 1  # all of it came from polling, none from a rescan


async def test_force_polling_sees_a_rewrite_within_the_same_second(root: Path) -> None:
    path = root / "polled.lock"
    second = float(int(path.parent.stat().st_mtime)) - 60
    feed = feed_on(root, force_polling=True, polling_rescan_seconds=0.5)
    async with running(feed) as seen:
        await barrier(root, seen)
        first = replace_with_mtime(path, body("first"), second + 0.1)
        await until(lambda: seen.sha(lock_id(path)) == first, "the new lock (polling)")
        changed = replace_with_mtime(path, body("second, longer"), second + 0.6)
        # A poller that compares whole-second mtimes would miss it; lockwatch's
        # compares nanoseconds, sizes and inodes, and rescans while polling.
        await until(
            lambda: seen.sha(lock_id(path)) == changed, "the same-second rewrite", timeout=5.0
        )


async def test_polling_removes_a_lock_only_a_rescan_saw(root: Path) -> None:
    """A lock a rescan shows that goes before the poller's next pass was never seen by
    the poller: compared with its own pass before alone, nothing changed. Each pass is
    held against what the feed shows too."""
    path = root / "brief.lock"
    feed = feed_on(root, force_polling=True, poll_seconds=1.0)
    async with running(feed) as seen:
        await barrier(root, seen)
        created = write(path, body("brief"))
        await feed.rescan(seen)  # at once: before the poller's next pass, nearly always
        assert seen.sha(lock_id(path)) == created
        assert feed.poller is not None and str(path) not in feed.poller.seen
        mark = len(seen.changes)
        path.unlink()
        await until(lambda: seen.removals_of(lock_id(path), mark), "the removal", timeout=5.0)


def test_a_poll_is_held_against_the_feed_s_picture() -> None:
    changes = {"/r/a.lock": {Change.MODIFIED}}
    listed = frozenset({"/r/a.lock", "/r/new.lock"})
    known = ["file:/r/a.lock", "file:/r/gone.lock"]
    assert with_listing(changes, listed, known) == {
        "/r/a.lock": {Change.MODIFIED},
        "/r/gone.lock": {Change.DELETED},
        "/r/new.lock": {Change.ADDED},
    }
    # Agreeing, the changes are the poller's own.
    assert with_listing(changes, frozenset({"/r/a.lock"}), ["file:/r/a.lock"]) is changes


# --------------------------------------------------------------------------- rescans


async def test_unchanged_rescans_emit_no_upserts(root: Path) -> None:
    write(root / "a.lock", body("a"))
    write(root / "memory" / ".lock", str(ME))
    async with running(feed_on(root, rescan_seconds=0.05)) as seen:
        assert len(seen.changes[0].upserts) == 2
        await until(lambda: seen.rescans() >= 4, "three more rescans")
        # Besides the rescans, at most the header's "armed" (merged into a rescan's
        # when they come together; alone when the watches arm later, under load).
        others = [change for change in seen.changes[1:] if not change.all_errors]
        assert len(others) <= 1, others
        for change in seen.changes[1:]:
            assert change.upserts == () and change.removed == () and change.errors == ()
            assert [s.state for s in change.statuses] == ["watching"]


def test_a_rescan_keeps_the_ids_it_saw_as_the_feeds_own_strings() -> None:
    """What a rescan saw is kept till its end: as the strings the feed already holds
    where it knows the lock, not the rescan's fresh copies (which would pin the
    pages of all else it read and dropped); a lock it did not know, as read."""
    old = entry("a", {"pid": 1})
    differ = Differ()
    differ.full([old])
    fresh = [entry("a", {"pid": 1}), entry("b", {"pid": 2})]
    assert fresh[0].lock.id == old.lock.id and fresh[0].lock.id is not old.lock.id
    seen = list(differ.known_ids(fresh))
    assert seen == ["file:/locks/a.lock", "file:/locks/b.lock"]
    assert seen[0] is old.lock.id and seen[1] is fresh[1].lock.id


async def test_rescan_puts_right_what_the_events_missed(root: Path) -> None:
    """A feed driven by `rescan` alone (no watcher): what changed is upserted, what went
    is removed, and the rest is left alone."""
    feed = feed_on(root)
    seen = Seen()
    a = root / "a.lock"
    b = root / "b.lock"
    write(a, body("a"))
    write(b, body("b"))
    await feed.rescan(seen)
    assert len(seen.changes[-1].upserts) == 2
    changed = write(a, body("a2"))
    b.unlink()
    c = write(root / "c.lock", body("c"))
    await feed.rescan(seen)
    last = seen.changes[-1]
    assert {e.lock.id: e.lock.sha256 for e in last.upserts} == {
        lock_id(a): changed,
        lock_id(root / "c.lock"): c,
    }
    assert last.removed == (lock_id(b),)


async def test_missing_root_is_an_error_until_it_is_created(tmp_path: Path) -> None:
    root = tmp_path / "later"
    feed = feed_on(root, rescan_seconds=0.2)
    async with running(feed) as seen:
        first = seen.changes[0]
        (status,) = first.statuses
        assert (status.kind, status.name, status.state) == ("file", str(root), "error")
        assert status.reason
        assert first.upserts == ()

        made = write(root / "a.lock", body("a"))
        await until(lambda: seen.sha(lock_id(root / "a.lock")) == made, "the root's lock")
        await until(
            lambda: [s.state for s in seen.changes[-1].statuses] == ["watching"],
            "the root to be watched",
        )
        assert seen.changes[-1].statuses[0].reason is None

        # From now on only the watcher can report anything (after at most one more rescan).
        feed.rescan_seconds = HOUR
        count = seen.rescans()
        await until(lambda: seen.rescans() > count, "the last short rescan")
        await barrier(root, seen)
        changed = write(root / "a.lock", body("a2"))
        await until(lambda: seen.sha(lock_id(root / "a.lock")) == changed, "a watched change")


async def test_missing_root_reason_says_does_not_exist(tmp_path: Path) -> None:
    root = tmp_path / "later"
    async with running(feed_on(root)) as seen:
        (status,) = seen.changes[0].statuses
        assert (status.state, status.reason) == ("error", "does not exist")


# --------------------------------------------------------------------------- liveness


def loops_lock(root: Path, name: str, pid: int) -> Path:
    path = root / ".loops" / ".running" / f"{name}.lock"
    started = (datetime.now(UTC) - timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    write(path, json.dumps({"loop_name": name, "scope": [], "pid": pid, "started_at": started}))
    return path


async def test_liveness_recheck_notices_a_holder_that_died(root: Path) -> None:
    pid = never_running_pid()
    path = loops_lock(root, "nightly", pid)
    # Another holder the table keeps alive though psutil never lists it: every recheck
    # asks the table about it, so counting the table's uses counts the rechecks.
    keeper = pid + 1
    loops_lock(root, "keeper", keeper)
    table = {"alive": True}
    calls: list[bool] = []

    keeper_facts, holder_facts = started_an_hour_ago(keeper), started_an_hour_ago(pid)

    def processes() -> ProcessLookup:
        calls.append(table["alive"])
        if table["alive"]:
            return StaticProcesses(keeper_facts, holder_facts)
        return StaticProcesses(keeper_facts)

    async with running(feed_on(root, processes=processes, liveness_seconds=0.05)) as seen:
        entry = seen.current[lock_id(path)]
        assert entry.lock.format == "little-loops"
        assert entry.verdict.state is State.ACTIVE and entry.verdict.alive is True

        # Rechecks run while the table still says alive: nothing to send.
        await until(lambda: len(calls) >= 3, "a few liveness rechecks")
        assert len(seen.upserts_of(lock_id(path))) == 1

        mark = len(seen.changes)
        table["alive"] = False
        await until(
            lambda: seen.current[lock_id(path)].verdict.state is State.STALE, "the stale verdict"
        )
        change = next(c for c in seen.changes[mark:] if c.upserts)
        assert not change.all_errors and change.removed == ()
        assert [s.state for s in change.statuses] == ["watching"]
        (again,) = change.upserts
        assert again.lock.id == lock_id(path)
        assert again.verdict.codes == ("holder_dead",)
        assert again.verdict.alive is False
        assert again.lock.sha256 == entry.lock.sha256  # the file never changed

        count = len(calls)
        await until(lambda: len(calls) > count + 3, "more liveness rechecks")
        assert len(seen.upserts_of(lock_id(path), mark)) == 1  # sent once


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A real process that runs until its stdin closes; reaped at teardown."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        yield proc
    finally:
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.returncode is None:
            proc.kill()
            proc.wait()


async def test_liveness_recheck_with_real_processes(
    root: Path, child: subprocess.Popen[bytes]
) -> None:
    path = root / "worker.pid"
    write(path, str(child.pid))
    async with running(feed_on(root, processes=_host_processes, liveness_seconds=0.05)) as seen:
        entry = seen.current[lock_id(path)]
        assert entry.verdict.state is State.ACTIVE and entry.verdict.alive is True
        assert entry.facts is not None and entry.facts.cmdline[:1] == (sys.executable,)

        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=WAIT_S)  # exited and reaped: gone from the process table
        await until(
            lambda: seen.current[lock_id(path)].verdict.codes == ("holder_dead",),
            "the dead holder",
        )
        assert seen.current[lock_id(path)].verdict.state is State.STALE


async def test_liveness_recheck_notices_a_holder_turned_zombie(
    root: Path, child: subprocess.Popen[bytes]
) -> None:
    path = root / "worker.pid"
    write(path, str(child.pid))
    async with running(feed_on(root, processes=_host_processes, liveness_seconds=0.05)) as seen:
        assert seen.current[lock_id(path)].verdict.alive is True
        assert child.stdin is not None
        child.stdin.close()  # it exits; nobody reaps it yet
        await until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, "a zombie")
        await until(
            lambda: seen.current[lock_id(path)].verdict.codes == ("holder_dead",),
            "the zombie holder judged dead",
            timeout=1.0,
        )


def _host_processes() -> ProcessLookup:
    from lockwatch.sources.processes import HostProcesses

    return HostProcesses()


# --------------------------------------------------------------------------- the Differ


def entry(name: str, content: object, processes: ProcessLookup | None = None) -> Entry:
    lock = decode_file(lock_file(f"/locks/{name}.lock", content, mtime=ago(60)))
    (judged,) = judge([lock], processes or StaticProcesses(), NOW, LOCAL_HOST)
    return judged


def test_differ_full_sends_new_and_changed_and_removes_the_missing() -> None:
    differ = Differ()
    a, b = entry("a", {"pid": 1}), entry("b", {"pid": 2})
    upserts, removed = differ.full([a, b])
    assert upserts == [a, b] and removed == []
    assert differ.entries == {a.lock.id: a, b.lock.id: b}

    # The same picture again, even as fresh objects: nothing to send.
    assert differ.full([entry("a", {"pid": 1}), entry("b", {"pid": 2})]) == ([], [])

    a2, c = entry("a", {"pid": 11}), entry("c", {"pid": 3})
    upserts, removed = differ.full([a2, c])
    assert upserts == [a2, c]
    assert removed == [b.lock.id]
    assert set(differ.entries) == {a.lock.id, c.lock.id}
    assert differ.entries[a.lock.id] is a2

    assert differ.full([]) == ([], [a.lock.id, c.lock.id])
    assert differ.entries == {}


def test_differ_partial_upserts_and_removes_only_what_it_knew() -> None:
    differ = Differ()
    a, b = entry("a", {"pid": 1}), entry("b", {"pid": 2})
    differ.full([a, b])
    c = entry("c", {"pid": 3})
    upserts, removed = differ.partial([entry("a", {"pid": 1}), c], ["file:/locks/b.lock"])
    assert upserts == [c]
    assert removed == ["file:/locks/b.lock"]
    assert set(differ.entries) == {a.lock.id, c.lock.id}

    # Gone twice, or never known: removed once, and only what was there.
    upserts, removed = differ.partial([], ["file:/locks/b.lock", "file:/locks/nope.lock"])
    assert (upserts, removed) == ([], [])

    # A partial leaves everything it does not name alone.
    assert differ.full([a, c]) == ([], [])


def test_differ_partial_tells_a_lock_both_seen_and_gone_as_gone() -> None:
    """One look found the file, another did not: told as both, a board keeps the
    lock (an upsert wins there) while the picture has dropped it, and no later
    rescan would ever remove it. Told gone, as the picture keeps it."""
    differ = Differ()
    a, b = entry("a", {"pid": 1}), entry("b", {"pid": 2})
    differ.full([a])
    upserts, removed = differ.partial([entry("a", {"pid": 9}), b], [a.lock.id, b.lock.id])
    assert (upserts, removed) == ([], [a.lock.id, b.lock.id])
    assert differ.entries == {}
    board = Board("h")
    board.apply(ChangeSet("files", NOW, (), upserts=(a,)))
    board.apply(ChangeSet("files", NOW, (), upserts=tuple(upserts), removed=tuple(removed)))
    assert set(board.entries) == set(differ.entries)


def test_differ_ignores_what_only_time_changes_but_not_a_new_verdict() -> None:
    differ = Differ()
    dead = entry("a", {"pid": 100})
    differ.full([dead])
    # The same sighting judged later: only the age moved.
    assert dead.verdict.age_seconds is not None
    older = replace(dead, verdict=replace(dead.verdict, age_seconds=dead.verdict.age_seconds + 60))
    assert differ.partial([older], []) == ([], [])
    # The holder came back to life (say, a pid the table now lists): sent.
    alive = entry("a", {"pid": 100}, StaticProcesses(alive_since_an_hour(100)))
    assert alive.verdict.state is not dead.verdict.state
    assert differ.partial([alive], []) == ([alive], [])
    assert differ.entries[alive.lock.id] is alive


async def test_a_file_name_that_is_not_utf8_does_not_stop_the_feed(root: Path) -> None:
    """A name that is not UTF-8 once stopped the watcher; events go on past it."""
    async with running(feed_on(root, polling_rescan_seconds=0.2)) as seen:
        await barrier(root, seen)
        with open(os.path.join(os.fsencode(root), b"notes-\xff.txt"), "wb") as odd:
            odd.write(b"x")
        path = root / "after.lock"
        digest = write(path, body("after"))
        await until(lambda: seen.sha(lock_id(path)) == digest, "a lock written afterwards")


async def test_a_file_root_follows_atomic_replaces(tmp_path: Path) -> None:
    """A lock file named as the root, rewritten by rename over it again and again."""
    path = tmp_path / "app.lock"
    write(path, body("first"))
    write(tmp_path / "beside.lock", body("not asked for"))
    feed = feed_on(path)
    async with running(feed) as seen:
        await until(lambda: seen.sha(lock_id(path)) is not None, "the first scan")
        # A replace before the watches are in is the next rescan's (hourly here).
        await until(lambda: feed.watching is not None and feed.watching.armed, "the watches")
        for round_ in range(3):
            temp = tmp_path / "app.lock.tmp"
            digest = write(temp, body(f"round {round_}"))
            os.replace(temp, path)

            def replaced(digest: str = digest) -> bool:
                return seen.sha(lock_id(path)) == digest

            await until(replaced, f"replace {round_}")
        assert lock_id(tmp_path / "beside.lock") not in seen.ids()
