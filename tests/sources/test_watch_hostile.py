"""The file watcher against what broke it: names that are not UTF-8, a symlink to `/`,
roots replaced or made unreadable and back, running out of inotify watches, lost events,
and files read while their writer was still writing.

The feeds here rescan once an hour (and, when polling, rescan once an hour too), so
whatever shows up came through the watcher or the poller. Waits are bounded polls on a
condition (`until`), never a timing assertion; inotify failures are injected through the
feed's `inotify` factory rather than by shrinking the machine's limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest

import lockwatch
from lockwatch.model.status import SourceStatus
from lockwatch.sources.files.changes import pace
from lockwatch.sources.files.inotify_kernel import IN_Q_OVERFLOW, Event, Inotify
from lockwatch.ui.panels import status_text
from tests.sources.test_file_feed import (
    HOUR,
    Seen,
    barrier,
    body,
    eventually,
    feed_on,
    lock_id,
    running,
    until,
    write,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def states(seen: Seen) -> list[tuple[str, str | None]]:
    return [(s.state, s.reason) for s in seen.changes[-1].statuses]


def write_bytes_name(directory: Path, name: bytes, content: bytes) -> str:
    """A file whose name is raw bytes (maybe not UTF-8); its path as Python names it."""
    path = os.path.join(os.fsencode(directory), name)
    with open(path, "wb") as out:
        out.write(content)
    return os.fsdecode(path)


class Kernel(Inotify):
    """The real inotify, with every add_watch recorded, and failing with ENOSPC (out of
    watches) once `limit` watches were added; `lost` drops every event read while set,
    and `overflow` adds the kernel's queue-overflow event to the next read."""

    made: ClassVar[list[Kernel]] = []

    def __init__(self, limit: int | None = None) -> None:
        super().__init__()
        self.limit = limit
        self.added: list[str] = []
        self.wds: dict[str, int] = {}
        self.lost = False
        self.overflow = False
        Kernel.made.append(self)

    def add_watch(self, path: str, mask: int) -> int:
        if self.limit is not None and len(self.added) >= self.limit:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.added.append(path)
        wd = super().add_watch(path, mask)
        self.wds[path] = wd
        return wd

    def read(self) -> list[Event]:
        events = super().read()
        if self.lost:
            events = []
        if self.overflow:
            self.overflow = False
            events.append(Event(-1, IN_Q_OVERFLOW, 0, ""))
        return events


@pytest.fixture
def kernels() -> Iterator[list[Kernel]]:
    Kernel.made = []
    yield Kernel.made


# --------------------------------------------------------------------------- hostile names


async def test_a_name_that_is_not_utf8_keeps_events_flowing(root: Path) -> None:
    async with running(feed_on(root)) as seen:
        await barrier(root, seen)
        write_bytes_name(root, b"notes-\xff.txt", b"x")
        bad = write_bytes_name(root, b"bad\xfe.lock", json.dumps({"pid": os.getpid()}).encode())
        (root / b"sub\xfe".decode(errors="surrogateescape")).mkdir()
        inner = write_bytes_name(
            root / b"sub\xfe".decode(errors="surrogateescape"), b"in.lock", b"1"
        )
        path = root / "after.lock"
        digest = write(path, body("after"))
        await until(lambda: seen.sha(lock_id(path)) == digest, "a lock written afterwards")
        # The lock with the odd name is a lock like any other, and so is one in an
        # odd-named directory: both came through events, nothing fell back to polling.
        await until(lambda: f"file:{bad}" in seen.current, "the lock with the odd name")
        await until(lambda: f"file:{inner}" in seen.current, "the lock in the odd directory")
        assert states(seen) == [("watching", None)]
        assert seen.rescans() == 1
        # Still watching the odd directory after all that.
        changed = write(Path(inner), body("again"))
        await until(lambda: seen.sha(f"file:{inner}") == changed, "a change in the odd directory")


# --------------------------------------------------------------------------- symlinks


async def test_a_symlink_to_slash_is_never_followed(
    tmp_path: Path, root: Path, kernels: list[Kernel]
) -> None:
    (root / "rootlink").symlink_to("/")
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "outside.lock", body("outside"))
    (root / "sub").mkdir()
    (root / "sub" / "out").symlink_to(elsewhere)
    write(root / "sub" / "in.lock", body("in"))
    async with running(feed_on(root, inotify=Kernel)) as seen:
        await barrier(root, seen)
        (kernel,) = kernels
        # One watch per directory of the root, and none anywhere else.
        assert sorted(kernel.added) == [str(root), str(root / "sub")]
        write(elsewhere / "outside.lock", body("changed outside"))
        write(elsewhere / "new.lock", body("new outside"))
        await barrier(root, seen)
        assert {i for i in seen.ids() if "elsewhere" in i or "rootlink" in i} == set()
        assert set(seen.current) == {lock_id(root / "sub" / "in.lock")}
        assert states(seen) == [("watching", None)]
        # A directory made later through a symlink is not watched either.
        (root / "later").symlink_to(tmp_path)
        (root / "real").mkdir()
        await barrier(root, seen)
        await until(lambda: str(root / "real") in kernel.added, "the new directory watched")
        assert sorted(kernel.added) == [str(root), str(root / "real"), str(root / "sub")]


async def test_polling_never_follows_a_symlink_to_slash(tmp_path: Path, root: Path) -> None:
    (root / "rootlink").symlink_to("/")
    (root / "up").symlink_to(tmp_path)
    write(tmp_path / "beside.lock", body("beside"))
    write(root / "a" / "in.lock", body("in"))
    feed = feed_on(root, force_polling=True)
    async with running(feed) as seen:
        await until(lambda: feed.poller is not None and feed.poller.seen, "a polling pass")
        assert feed.poller is not None
        # The pass looked at the root's one lock file and nothing through the links.
        assert feed.poller.seen == {str(root / "a" / "in.lock")}
        path = root / "a" / "new.lock"
        digest = write(path, body("new"))
        await until(lambda: seen.sha(lock_id(path)) == digest, "a lock seen by polling")
        assert states(seen) == [("polling", "forced")]
        assert seen.rescans() == 1


# --------------------------------------------------------------------------- replaced roots


def rm_and_mkdir(root: Path) -> None:
    shutil.rmtree(root)
    root.mkdir()


def mv_and_mkdir(root: Path) -> None:
    root.rename(root.with_name(root.name + ".old"))
    root.mkdir()


@pytest.mark.parametrize("replace", [rm_and_mkdir, mv_and_mkdir], ids=["rm-rf", "mv"])
async def test_a_replaced_root_is_watched_again(
    root: Path, replace: Callable[[Path], None]
) -> None:
    old = root / "old.lock"
    write(old, body("old"))
    write(root / "deep" / "older.lock", body("older"))
    async with running(feed_on(root)) as seen:
        await barrier(root, seen)
        replace(root)
        path = root / "new.lock"
        digest = write(path, body("new"))
        await until(lambda: seen.sha(lock_id(path)) == digest, "a lock in the new directory")
        await until(lambda: lock_id(old) not in seen.current, "the old directory's locks gone")
        assert lock_id(root / "deep" / "older.lock") not in seen.current
        # Events flow from the new directory, and not from the old one any more.
        await barrier(root, seen)
        moved = root.with_name(root.name + ".old")
        if moved.exists():
            write(moved / "ghost.lock", body("ghost"))
        changed = write(path, body("changed"))
        await until(lambda: seen.sha(lock_id(path)) == changed, "a change in the new directory")
        await barrier(root, seen)
        assert set(seen.current) == {lock_id(path)}
        assert states(seen) == [("watching", None)]


def swap_for_symlink(root: Path, target: Path) -> None:
    root.rename(root.with_name(root.name + ".old"))
    root.symlink_to(target)


@pytest.mark.parametrize("polling", [False, True], ids=["watching", "polling"])
async def test_a_root_replaced_by_a_symlink_is_not_followed(
    tmp_path: Path, root: Path, kernels: list[Kernel], polling: bool
) -> None:
    """`mv d d.old && ln -s / d`: followed, the feed walked and watched all of `/`."""
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere / "outside.lock", body("outside"))
    write(elsewhere / "deeper" / "deep.lock", body("deep"))
    write(root / "in.lock", body("in"))
    options: dict[str, object] = {"force_polling": True} if polling else {"inotify": Kernel}
    async with running(feed_on(root, **options)) as seen:
        await barrier(root, seen)
        swap_for_symlink(root, elsewhere)
        await until(lambda: states(seen)[0][0] == "error", "the root reported")
        ((_, reason),) = states(seen)
        assert reason is not None and reason.startswith("replaced by a symlink: it leads to")
        assert str(elsewhere) in reason and "not followed" in reason
        write(elsewhere / "new.lock", body("new outside"))
        await asyncio.sleep(0.3)  # time for a watch or a polling pass to (wrongly) see it
        assert {i for i in seen.ids() if "outside" in i or "deep" in i} == set()
        assert lock_id(root / "in.lock") not in seen.current
        if not polling:
            (kernel,) = kernels
            assert all(not path.startswith(str(elsewhere)) for path in kernel.added)
            assert kernel.added.count(str(root)) == 1  # never watched through the link
        # A directory there again (the same path, a new directory): read and watched.
        root.unlink()
        root.mkdir()
        path = root / "back.lock"
        digest = write(path, body("back"))
        await until(lambda: seen.sha(lock_id(path)) == digest, "the lock in the new directory")
        await until(lambda: states(seen)[0][0] != "error", "the root's error cleared")
        assert states(seen) == [("polling", "forced") if polling else ("watching", None)]


async def test_a_root_whose_watch_went_is_watched_again(root: Path, kernels: list[Kernel]) -> None:
    """As when `rm -rf d && mkdir d` gives the new directory the old one's inode number:
    the root looks the same, but its watch is gone."""
    async with running(feed_on(root, inotify=Kernel)) as seen:
        await barrier(root, seen)
        (kernel,) = kernels
        kernel.rm_watch(kernel.wds[str(root)])  # the kernel drops it: IN_IGNORED
        await until(lambda: kernel.added.count(str(root)) == 2, "the root watched again")
        await barrier(root, seen)
        assert states(seen) == [("watching", None)]


async def test_a_root_made_after_start_is_watched(tmp_path: Path) -> None:
    root = tmp_path / "later"
    async with running(feed_on(root)) as seen:
        assert states(seen) == [("error", "does not exist")]
        root.mkdir()
        await until(lambda: states(seen) == [("watching", None)], "the root to be watched")
        await barrier(root, seen)


# --------------------------------------------------------------------------- permissions

# The feed in a process of its own, as user nobody (root reads any directory whatever
# its mode): one JSON line per change set.
NOBODY_FEED = """
import asyncio, json, sys
from lockwatch.sources.files.watch import FileFeed

def emit(change):
    print(json.dumps({
        "states": [s.state for s in change.statuses],
        "upserts": [e.lock.id for e in change.upserts],
        "verdicts": {
            e.lock.id: [e.verdict.state.value, [r.code for r in e.verdict.reasons]]
            for e in change.upserts
        },
        "removed": list(change.removed),
        "looked": list(change.looked),
    }), flush=True)

async def main():
    feed = FileFeed([sys.argv[1]], host="h", rescan_seconds=3600, liveness_seconds=3600,
                    settle_seconds=None, polling_rescan_seconds=3600)
    task = asyncio.create_task(feed.run(emit))
    while feed.watching is None or not feed.watching.armed:
        await asyncio.sleep(0.01)
    print(json.dumps({"armed": True}), flush=True)
    await task

asyncio.run(main())
"""


def unprivileged() -> list[str]:
    if os.geteuid() != 0:
        return []
    if setpriv := shutil.which("setpriv"):
        return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    if runuser := shutil.which("runuser"):
        return [runuser, "-u", "nobody", "--"]
    pytest.skip("neither setpriv nor runuser is installed")


class Lines:
    """What the feed in the other process printed, read as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids: set[str] = set()
        # Each lock's verdict as last told: [state, [reason codes]].
        self.verdicts: dict[str, list[Any]] = {}
        self.looked: set[str] = set()  # directories listed anew, as told
        self.states: list[str] = []
        self.lines: list[bytes] = []
        self.armed = False

    async def until(self, condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        assert self.process.stdout is not None
        while not condition():
            left = deadline - loop.time()
            if left <= 0:
                pytest.fail(f"timed out after {timeout:g}s waiting for {what}: {self.lines}")
            with contextlib.suppress(TimeoutError):
                line = await asyncio.wait_for(self.process.stdout.readline(), left)
                if not line:
                    err = await self.process.stderr.read() if self.process.stderr else b""
                    pytest.fail(f"the feed stopped: {err.decode(errors='replace')}")
                self.take(line)

    def take(self, line: bytes) -> None:
        """One line the feed printed: armed, or a change set."""
        self.lines.append(line)
        change = json.loads(line)
        if change.get("armed"):
            self.armed = True
            return
        self.states = change["states"]
        self.ids.update(change["upserts"])
        self.ids.difference_update(change["removed"])
        self.verdicts.update(change["verdicts"])
        self.looked.update(change["looked"])
        for removed in change["removed"]:
            self.verdicts.pop(removed, None)

    def state(self, lock_id: str) -> str | None:
        told = self.verdicts.get(lock_id)
        return None if told is None else str(told[0])


@contextlib.asynccontextmanager
async def feed_process(
    user: list[str], script: str, root: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`script` (a feed printing JSON lines) run on `root` as `user` (a command
    prefix), from this checkout; killed on the way out."""
    checkout = str(Path(lockwatch.__file__).resolve().parent.parent)
    process = await asyncio.create_subprocess_exec(
        *user,
        sys.executable,
        "-c",
        script,
        root,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": checkout, "PYTHONDONTWRITEBYTECODE": "1"},
        cwd="/",
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


@contextlib.asynccontextmanager
async def feed_as_nobody(root: str) -> AsyncIterator[Lines]:
    async with feed_process(unprivileged(), NOBODY_FEED, root) as process:
        yield Lines(process)


@pytest.mark.parametrize("where", ["root", "parent", "root-at-start"])
async def test_a_root_whose_permissions_come_back_is_read_again(open_dir: Path, where: str) -> None:
    parent = open_dir / "parent"
    root = parent / "locks"
    root.mkdir(parents=True)
    parent.chmod(0o755)
    root.chmod(0o755)
    (root / "sub").mkdir(mode=0o755)
    lock = root / "sub" / "a.lock"
    lock.write_text(body("a"))
    lock.chmod(0o644)
    closed = parent if where == "parent" else root
    if where == "root-at-start":
        closed.chmod(0)
    async with feed_as_nobody(str(root)) as feed:
        await feed.until(lambda: feed.armed, "the watches in place")
        seen = lock_id(lock)
        if where != "root-at-start":
            await feed.until(lambda: seen in feed.ids, "the first scan")
            assert feed.states == ["watching"]
            assert feed.verdicts[seen] == ["active", []]
            closed.chmod(0)
        await feed.until(lambda: feed.states == ["error"], "the root reported unreadable")
        if where == "root-at-start":
            assert seen not in feed.ids  # never read: nothing to show
        else:
            # Not released: nobody can tell, so it stays as last read, unknown.
            await feed.until(lambda: feed.state(seen) == "unknown", "the lock unknown")
            assert feed.verdicts[seen] == ["unknown", ["unreadable"]]
        closed.chmod(0o755)
        # Not the hourly rescan: the root is looked at again every half second.
        await feed.until(lambda: feed.state(seen) == "active", "the lock read again")
        assert feed.verdicts[seen] == ["active", []]
        assert feed.states == ["watching"]
        # And watched again, all the way down.
        later = root / "sub" / "b.lock"
        later.write_text(body("b"))
        await feed.until(lambda: lock_id(later) in feed.ids, "a lock written afterwards")


async def test_a_subdirectory_readable_again_is_watched_and_read(open_dir: Path) -> None:
    root = open_dir / "locks"
    (root / "sub").mkdir(parents=True)
    root.chmod(0o755)
    lock = root / "sub" / "a.lock"
    lock.write_text(body("a"))
    lock.chmod(0o644)
    (root / "sub").chmod(0)
    async with feed_as_nobody(str(root)) as feed:
        await feed.until(lambda: feed.armed, "the watches in place")
        assert feed.states == ["watching"] and lock_id(lock) not in feed.ids
        (root / "sub").chmod(0o755)
        await feed.until(lambda: lock_id(lock) in feed.ids, "the lock, readable again")
        later = root / "sub" / "b.lock"
        later.write_text(body("b"))
        await feed.until(lambda: lock_id(later) in feed.ids, "a lock written afterwards")


# The same feed polling (no inotify): what the poller does not find is looked at too.
POLLING_FEED = NOBODY_FEED.replace('host="h",', 'host="h", force_polling=True, poll_seconds=0.1,')
POLLING_FEED = POLLING_FEED.replace(
    "while feed.watching is None or not feed.watching.armed:", "while feed.poller is None:"
)


@pytest.mark.parametrize("how", ["watched", "polled"])
async def test_a_lock_behind_a_closed_directory_is_unknown_not_released(
    open_dir: Path, how: str
) -> None:
    assert "force_polling=True" in POLLING_FEED and "feed.poller is None" in POLLING_FEED
    root = open_dir / "locks"
    (root / "sub").mkdir(parents=True)
    root.chmod(0o755)
    (root / "sub").chmod(0o755)
    kept, removed = root / "sub" / "a.lock", root / "sub" / "b.lock"
    for lock in (kept, removed):
        lock.write_text(body(lock.stem))
        lock.chmod(0o644)
    script = NOBODY_FEED if how == "watched" else POLLING_FEED
    async with feed_process(unprivileged(), script, str(root)) as process:
        feed = Lines(process)
        await feed.until(lambda: feed.armed, "the feed started")
        await feed.until(
            lambda: feed.state(lock_id(kept)) == feed.state(lock_id(removed)) == "active",
            "the first scan",
        )
        (root / "sub").chmod(0)
        await feed.until(
            lambda: feed.state(lock_id(kept)) == feed.state(lock_id(removed)) == "unknown",
            "both locks unknown",
        )
        assert feed.verdicts[lock_id(kept)] == ["unknown", ["unreadable"]]
        removed.unlink()  # by root, while the feed cannot look
        feed.looked.clear()
        (root / "sub").chmod(0o755)
        await feed.until(lambda: lock_id(removed) not in feed.ids, "the removed lock gone")
        await feed.until(lambda: feed.state(lock_id(kept)) == "active", "the kept lock read")
        if how == "watched":
            # Its permissions' change is an event: the directory listed again, which
            # settles the error it had (the board drops it: test_board).
            assert str(root / "sub") in feed.looked


async def test_a_lock_file_made_unreadable_is_unknown_till_readable(open_dir: Path) -> None:
    root = open_dir / "locks"
    root.mkdir()
    root.chmod(0o755)
    lock = root / "a.lock"
    lock.write_text(body("a"))
    lock.chmod(0o644)
    async with feed_as_nobody(str(root)) as feed:
        await feed.until(lambda: feed.armed, "the watches in place")
        await feed.until(lambda: feed.state(lock_id(lock)) == "active", "the first scan")
        lock.chmod(0)
        await feed.until(lambda: feed.state(lock_id(lock)) == "unknown", "the lock unknown")
        assert feed.verdicts[lock_id(lock)] == ["unknown", ["unreadable"]]
        lock.chmod(0o644)
        await feed.until(lambda: feed.state(lock_id(lock)) == "active", "the lock read again")


async def test_a_lock_file_it_may_not_read_is_a_row_never_absent(open_dir: Path) -> None:
    """Issue 42: a lock file the feed's user may not read (root's, 0600) is on the
    board from the first scan, unknown (permission_denied), and so is one made
    while it watches; never left out as an error alone."""
    root = open_dir / "locks"
    root.mkdir()
    root.chmod(0o755)
    private, later = root / "a.lock", root / "b.lock"
    for lock in (private, later):
        lock.write_text(body(lock.stem))
        lock.chmod(0o600)
    later_body = later.read_bytes()
    later.unlink()
    async with feed_as_nobody(str(root)) as feed:
        await feed.until(lambda: feed.armed, "the watches in place")
        await feed.until(lambda: feed.state(lock_id(private)) == "unknown", "the private lock")
        assert feed.verdicts[lock_id(private)] == ["unknown", ["permission_denied"]]
        # Made 0600 at once: never readable to the feed, not even for a moment.
        fd = os.open(later, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with contextlib.closing(os.fdopen(fd, "wb")) as out:
            out.write(later_body)
        await feed.until(lambda: feed.state(lock_id(later)) == "unknown", "the lock made later")
        assert feed.verdicts[lock_id(later)] == ["unknown", ["permission_denied"]]


# --------------------------------------------------------------------------- out of watches


async def test_out_of_watches_at_start_polls_and_says_why(
    root: Path, kernels: list[Kernel]
) -> None:
    write(root / "sub" / "a.lock", body("a"))

    def no_watches() -> Kernel:
        return Kernel(limit=1)  # the root, not its subdirectory

    async with running(feed_on(root, inotify=no_watches)) as seen:
        await until(lambda: states(seen)[0][0] == "polling", "the fall back to polling")
        assert states(seen) == [("polling", "out of inotify watches")]
        text = status_text(seen.changes[-1].statuses[0], datetime.now(UTC)).plain
        assert text.endswith(f"{root} polling (out of inotify watches)")
        await changes_are_seen_by_polling(root, seen)


async def test_out_of_watches_later_polls_and_says_why(root: Path, kernels: list[Kernel]) -> None:
    def two_watches() -> Kernel:
        return Kernel(limit=2)

    async with running(feed_on(root, inotify=two_watches)) as seen:
        await barrier(root, seen)
        (root / "one").mkdir()
        await until(lambda: len(kernels[0].added) == 2, "the second watch")
        assert states(seen) == [("watching", None)]
        (root / "two").mkdir()  # one watch too many
        await until(lambda: states(seen)[0][0] == "polling", "the fall back to polling")
        assert states(seen) == [("polling", "out of inotify watches")]
        await changes_are_seen_by_polling(root, seen)


async def test_no_inotify_instance_polls_and_says_why(root: Path) -> None:
    def out_of_instances() -> Kernel:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    async with running(feed_on(root, inotify=out_of_instances)) as seen:
        await until(lambda: any(c.statuses for c in seen.changes), "the first statuses")
        # From the first word on the root: it never said "watching" without inotify.
        first = next(c for c in seen.changes if c.statuses)
        assert [(s.state, s.reason) for s in first.statuses] == [
            ("polling", "out of inotify instances")
        ]
        assert states(seen) == [("polling", "out of inotify instances")]
        await changes_are_seen_by_polling(root, seen)


async def changes_are_seen_by_polling(root: Path, seen: Seen) -> None:
    path = root / "deep" / "er" / "polled.lock"
    created = write(path, body("first"))
    await until(lambda: seen.sha(lock_id(path)) == created, "a new lock (polling)")
    changed = write(path, body("second"))
    await until(lambda: seen.sha(lock_id(path)) == changed, "a changed lock (polling)")
    mark = len(seen.changes)
    path.unlink()
    await until(lambda: seen.removals_of(lock_id(path), mark), "a removed lock (polling)")


def test_polling_is_paced_by_what_a_pass_costs() -> None:
    # A cheap pass: at the floor. A costly one: never more than the share of a core.
    assert pace(0.001, 0.1, 0.25) == 0.1
    assert pace(2.0, 0.1, 0.25) == pytest.approx(6.0)
    cost, share = 3.0, 0.25
    assert cost / (cost + pace(cost, 0.1, share)) == pytest.approx(share)


# --------------------------------------------------------------------------- lost events


async def test_a_queue_overflow_reads_everything_again(root: Path, kernels: list[Kernel]) -> None:
    async with running(feed_on(root, inotify=Kernel)) as seen:
        await barrier(root, seen)
        (kernel,) = kernels
        kernel.lost = True  # the kernel's queue overflowed: these events are gone
        lost = root / "lost" / "a.lock"
        digest = write(lost, body("lost"))
        assert not await eventually(lambda: lock_id(lost) in seen.current, timeout=0.3)
        kernel.lost = False
        kernel.overflow = True  # said with the next event read
        write(root / "wake.lock", body("wake"))
        await until(lambda: seen.sha(lock_id(lost)) == digest, "the lost lock, read again")
        # Watched again where the lost events made a directory.
        changed = write(lost, body("lost, changed"))
        await until(lambda: seen.sha(lock_id(lost)) == changed, "a change in the new directory")


# --------------------------------------------------------------------------- half-written files


async def test_a_lock_file_is_not_read_before_its_writer_closes_it(root: Path) -> None:
    """What made the live test flaky: a file read between its creation and its first
    write was shown empty (`free`) for a moment, and an in-place rewrite as empty."""
    path = root / "app.lock"
    async with running(feed_on(root, hold_seconds=HOUR)) as seen:
        await barrier(root, seen)
        with path.open("w") as writer:  # created, nothing written yet
            await barrier(root, seen)  # every event before the probe's was handled
            assert lock_id(path) not in seen.current
            writer.write(body("first"))
        first = sha(body("first"))
        await until(lambda: seen.sha(lock_id(path)) == first, "the lock, once closed")

        with path.open("w") as writer:  # truncated in place
            await barrier(root, seen)
            assert seen.sha(lock_id(path)) == first
            writer.write(body("second"))
        second = sha(body("second"))
        await until(lambda: seen.sha(lock_id(path)) == second, "the rewrite, once closed")
        assert [e.lock.sha256 for e in seen.upserts_of(lock_id(path))] == [first, second]


async def test_a_rescan_does_not_show_a_file_its_writer_has_open(root: Path) -> None:
    """The race behind the flaky live test: a rescan (the settle rescan a second after
    start) reading a lock file between its writer's truncating open and its write."""
    path = root / "app.lock"
    first = sha(body("first"))
    write(path, body("first"))
    async with running(feed_on(root, hold_seconds=HOUR, rescan_seconds=0.05)) as seen:
        await barrier(root, seen)
        with (root / "new.lock").open("w") as new, path.open("w") as rewritten:
            count = seen.rescans()
            await until(lambda: seen.rescans() >= count + 3, "rescans while both are open")
            assert lock_id(root / "new.lock") not in seen.current
            assert seen.sha(lock_id(path)) == first
            new.write(body("new"))
            rewritten.write(body("second"))
        second = sha(body("second"))
        await until(lambda: seen.sha(lock_id(path)) == second, "the rewrite, once closed")
        await until(lambda: seen.sha(lock_id(root / "new.lock")) == sha(body("new")), "the new")
        assert [e.lock.sha256 for e in seen.upserts_of(lock_id(path))] == [first, second]
        assert [e.lock.sha256 for e in seen.upserts_of(lock_id(root / "new.lock"))] == [
            sha(body("new"))
        ]


async def test_a_file_its_writer_keeps_open_is_read_after_the_hold(root: Path) -> None:
    path = root / "held.lock"
    async with running(feed_on(root, hold_seconds=0.05)) as seen:
        await barrier(root, seen)
        with path.open("w") as writer:
            writer.write(body("kept open"))
            writer.flush()
            digest = sha(body("kept open"))
            await until(lambda: seen.sha(lock_id(path)) == digest, "the lock, still open")


# --------------------------------------------------------------------------- the header


def test_the_header_says_why_it_polls() -> None:
    status = SourceStatus("file", "/srv/locks", "polling", reason="forced")
    text = status_text(status, datetime.now(UTC))
    assert text.plain == "● /srv/locks polling (forced)"


async def test_a_file_root_is_watched_through_its_directory_alone(
    tmp_path: Path, kernels: list[Kernel]
) -> None:
    path = tmp_path / "app.lock"
    write(path, body("first"))
    write(tmp_path / "sub" / "beside.lock", body("not asked for"))
    async with running(feed_on(path, inotify=Kernel)) as seen:
        await until(lambda: bool(kernels and kernels[0].added), "the watch")
        write(tmp_path / "sub" / "beside.lock", body("changed"))
        for round_ in range(3):
            temp = tmp_path / "app.lock.tmp"
            digest = write(temp, body(f"round {round_}"))
            os.replace(temp, path)

            def replaced(digest: str = digest) -> bool:
                return seen.sha(lock_id(path)) == digest

            await until(replaced, f"replace {round_}")
        assert kernels[0].added == [str(tmp_path)]  # not the directories beside it
        assert seen.ids() == {lock_id(path)}
        assert states(seen) == [("watching", None)]
