"""Faults under load: the watched root replaced, its permissions flipped, inotify
run out of (for real: every instance the user may have taken by another process;
and its watches, injected), PostgreSQL restarted and lockwatch's own backend
killed, the disk under the audit log full, and the clock jumping.

Each runs while real writers churn (tests/soak/writers.py), and each ends the same
way: once the writers settle, lockwatch's view is the truth again (the disk, or
pg_locks), it never crashed or hung, and what it did is audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockwatch.actions.audit import INTENT, AuditLog, read_records, verify
from lockwatch.actions.plan import Kind
from lockwatch.actions.run import Executor
from lockwatch.clock import FrozenClock
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet
from lockwatch.model.verdict import evaluate
from lockwatch.sources.files.watch import POLLING_RESCAN_SECONDS
from lockwatch.sources.postgres.facts import AdvisoryKey
from lockwatch.sources.postgres.feed import PgFeed
from lockwatch.sources.postgres.source import PgSource
from lockwatch.sources.processes import HostProcesses
from tests.actions.test_executor import OPERATOR, STALE_PID, on_disk, planned
from tests.adversarial.test_audit_full_disk import free_bytes, tmpfs
from tests.conftest import LOCAL_HOST, NOW, stop_feed
from tests.facts_of import PgLock
from tests.postgres.conftest import Cluster, throwaway_cluster  # noqa: F401 - a fixture
from tests.soak.harness import disk_truth, fleet, report
from tests.soak.test_churn import churn
from tests.sources.test_file_feed import Seen, eventually, feed_on, until
from tests.sources.test_watch_hostile import NOBODY_FEED, Kernel, Lines, feed_process

# --------------------------------------------------------------------------- replaced root


async def test_a_root_replaced_under_churn_is_followed(tmp_path: Path) -> None:
    root = tmp_path / "churn"
    root.mkdir()

    def replace(strike: int) -> None:
        if strike % 2 == 0:
            shutil.rmtree(root, ignore_errors=True)  # rm -rf d && mkdir d
        else:
            root.rename(tmp_path / f"churn.old{strike}")  # mv d d.old && mkdir d
        root.mkdir(exist_ok=True)

    figures = await churn(
        root, 2.0, processes=2, per_process=50, rate=800, disturb=replace, disturbances=4
    )
    report("root-replaced-fast", **figures)
    assert figures["statuses"] == [("watching", None)]


# --------------------------------------------------------------------------- another user's feed

# The feed in a process of its own as an unprivileged user (root reads any directory
# whatever its mode, and its inotify limits are not a user's): one JSON line per
# change set (tests/sources/test_watch_hostile.py's).


def as_user(uid: int) -> list[str]:
    if os.geteuid() != 0:
        pytest.skip("another user's feed needs root to start it")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv is not installed")
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def a_user_of_our_own() -> int:
    """A uid no account has: inotify's limits are per user, so running this one
    out of instances touches nobody else (nor another xdist worker's test)."""
    return 61000 + os.getpid() % 3000


# tests/sources/test_watch_hostile.py's NOBODY_FEED, armed once polling began too.
# Polling is backed by rescans as often as the product's default: what a user gets
# (the poller alone can leave a ghost behind: test_polling_alone_leaves_no_ghost).
FEED_AS_USER = NOBODY_FEED.replace(
    "while feed.watching is None or not feed.watching.armed:",
    "while feed.poller is None and (feed.watching is None or not feed.watching.armed):",
).replace("polling_rescan_seconds=3600", f"polling_rescan_seconds={POLLING_RESCAN_SECONDS}")


class FeedLines(Lines):
    async def pump(self, seconds: float) -> None:
        """Read what the feed says for `seconds` (it says something at every change)."""
        assert self.process.stdout is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            try:
                line = await asyncio.wait_for(self.process.stdout.readline(), left)
            except TimeoutError:
                return
            if not line:
                pytest.fail("the feed stopped")
            self.take(line)


@contextlib.asynccontextmanager
async def feed_as(uid: int, root: Path) -> AsyncIterator[FeedLines]:
    assert "feed.poller is None" in FEED_AS_USER and "=3600)" not in FEED_AS_USER
    async with feed_process(as_user(uid), FEED_AS_USER, str(root)) as process:
        yield FeedLines(process)


async def churn_for_another_user(
    root: Path, uid: int, seconds: float, flip: Path | None = None
) -> dict[str, Any]:
    """Writers (root) churn while the feed runs as `uid`; `flip`'s permissions are
    taken away and given back every half second. The settled view is the disk's."""
    flips = 0
    async with feed_as(uid, root) as feed:
        await feed.until(lambda: feed.armed, "the feed's first scan", timeout=15)
        with fleet(root, processes=2, per_process=50, rate=800) as writers:
            loop = asyncio.get_running_loop()
            until_t = loop.time() + seconds
            while loop.time() < until_t:
                await feed.pump(0.25)
                if flip is not None and flip.exists():
                    flip.chmod(0 if flips % 2 == 0 else 0o755)
                    flips += 1
            if flip is not None:
                flip.chmod(0o755)
            figures = await asyncio.to_thread(writers.stop)
            truth = set(disk_truth(root))
            await feed.until(lambda: feed.ids == truth, "the feed's view settled", 30)
    figures.update(flips=flips, states=feed.states, locks_at_end=len(truth))
    return figures


async def test_permissions_flipped_under_churn(open_dir: Path) -> None:
    root = open_dir / "locks"
    root.mkdir(mode=0o755)
    os.umask(0o022)
    # One writer directory closed and opened again, then the root itself.
    figures = await churn_for_another_user(root, a_user_of_our_own(), 2.0, flip=root)
    report("permissions-flipped-fast", **figures)
    assert figures["flips"] >= 4
    assert figures["states"] == ["watching"]


def inotify_hog(uid: int) -> subprocess.Popen[str]:
    """A process as `uid` holding every inotify instance that user may have."""
    script = """
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
held = []
while True:
    fd = libc.inotify_init1(os.O_CLOEXEC)
    if fd < 0:
        break
    held.append(fd)
print(len(held), ctypes.get_errno(), flush=True)
sys.stdin.read()
"""
    hog = subprocess.Popen(
        [*as_user(uid), sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    assert hog.stdout is not None
    held, why = map(int, hog.stdout.readline().split())
    assert held > 0 and why == errno.EMFILE, (held, why)
    return hog


async def test_out_of_inotify_instances_for_real_under_churn(open_dir: Path) -> None:
    root = open_dir / "locks"
    root.mkdir(mode=0o755)
    uid = a_user_of_our_own()
    hog = inotify_hog(uid)
    try:
        figures = await churn_for_another_user(root, uid, 2.0)
    finally:
        hog.kill()
        hog.wait()
    report("inotify-instances-exhausted-fast", **figures)
    assert figures["states"] == ["polling"]


async def test_out_of_inotify_watches_mid_churn(tmp_path: Path) -> None:
    """The writers make directories as they go: the watches run out part way (the
    kernel's ENOSPC, injected at 60 watches), and polling takes over."""
    root = tmp_path / "churn"
    root.mkdir()

    def sixty_watches() -> Kernel:
        return Kernel(limit=60)

    figures = await churn(
        root,
        3.0,
        processes=2,
        per_process=50,
        rate=800,
        inotify=sixty_watches,
        polling_rescan_seconds=POLLING_RESCAN_SECONDS,
    )
    report("inotify-watches-exhausted-fast", **figures)
    assert figures["statuses"] == [("polling", "out of inotify watches")]


# --------------------------------------------------------------------------- PostgreSQL


def advisory_truth(dsn: str, pids: set[int]) -> set[tuple[int, bool, str]]:
    """(pid, granted, objid) of our sessions' advisory locks, from pg_locks itself."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, granted, classid::int8, objid::int8, objsubid FROM pg_locks"
            " WHERE locktype = 'advisory' AND pid = ANY(%s)",
            (list(pids),),
        ).fetchall()
    return {
        (int(pid), bool(granted), str(AdvisoryKey.from_pg_locks(classid, objid, subid)))
        for pid, granted, classid, objid, subid in rows
    }


def feed_view(seen: Seen, pids: set[int]) -> set[tuple[int, bool, str]]:
    out = set()
    for entry in seen.current.values():
        pg = entry.lock.facts
        if isinstance(pg, PgLock) and pg.locktype == "advisory" and pg.backend.pid in pids:
            out.add((pg.backend.pid, pg.granted, str(pg.advisory_key)))
    return out


class AdvisoryChurn:
    """Sessions taking and letting go of advisory locks in threads, reconnecting
    when the server goes away under them."""

    def __init__(self, dsn: str, sessions: int) -> None:
        self.dsn = dsn
        self.stop = threading.Event()
        self.ops = 0
        self.reconnects = 0
        self.threads = [
            threading.Thread(target=self.run, args=(n,), daemon=True) for n in range(sessions)
        ]

    def run(self, n: int) -> None:
        rng = random.Random(n)
        while not self.stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=3) as conn:
                    while not self.stop.is_set():
                        key = rng.randrange(1, 50)
                        conn.execute("SELECT pg_advisory_lock(%s, %s)", (n, key))
                        conn.execute("SELECT pg_advisory_unlock_all()")
                        self.ops += 2
            except psycopg.Error:
                self.reconnects += 1
                self.stop.wait(0.1)

    def __enter__(self) -> AdvisoryChurn:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


def recovered(seen: Seen, mark: int) -> bool:
    states = [c.statuses[0].state for c in seen.changes[mark:] if c.statuses]
    return "disconnected" in states and states[-1] == "connected"


async def pg_faults(cluster: Cluster, seconds: float, kills: int, restarts: int) -> dict[str, Any]:
    dsn = cluster.dsn
    source = PgSource(dsn)
    feed = PgFeed(source, host=LOCAL_HOST, interval=0.05)
    seen = Seen()
    task = asyncio.create_task(feed.run(seen))
    killed = 0
    restarted = 0
    try:
        with AdvisoryChurn(dsn, 8) as churning:
            strikes = kills + restarts
            for strike in range(strikes):
                await asyncio.sleep(seconds / (strikes + 1))  # churn between the faults
                assert not task.done(), task
                mark = len(seen.changes)
                if strike % (strikes // max(restarts, 1) or 1) == 0 and restarted < restarts:
                    await asyncio.to_thread(cluster.stop, "immediate")
                    await asyncio.to_thread(cluster.start)
                    restarted += 1
                else:
                    # lockwatch's own backend, ended under it (as an admin might).
                    with psycopg.connect(dsn, autocommit=True) as admin:
                        ended = admin.execute(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                            " WHERE application_name LIKE 'lockwatch%'"
                        ).fetchone()
                    killed += int(ended[0]) if ended else 0
                # Seen going away, and back: a poll failed, and a later one did not.

                def back(mark: int = mark) -> bool:
                    return recovered(seen, mark)

                await until(back, "lockwatch back on the server", 30)
            ops = churning.ops
            reconnects = churning.reconnects
        # Settled: sessions of our own hold and wait, and the feed shows exactly them.
        holders = [psycopg.connect(dsn, autocommit=True) for _ in range(3)]
        try:
            for n, conn in enumerate(holders):
                conn.execute("SELECT pg_advisory_lock(99, %s)", (n,))
            pids = {conn.info.backend_pid for conn in holders}
            truth = advisory_truth(dsn, pids)
            assert len(truth) == 3
            await until(lambda: feed_view(seen, pids) == truth, "the feed's settled view", 30)
        finally:
            for conn in holders:
                conn.close()
        assert not task.done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await feed.close()
    return {
        "seconds": seconds,
        "lock_ops": ops,
        "monitor_backends_killed": killed,
        "server_restarts": restarted,
        "churn_reconnects": reconnects,
        "polls": len(seen.changes),
    }


@pytest.mark.postgres
async def test_postgres_restarted_and_monitor_killed_under_churn(
    throwaway_cluster: Cluster,  # noqa: F811 - the fixture imported above
) -> None:
    figures = await pg_faults(throwaway_cluster, 2.0, kills=3, restarts=1)
    report("postgres-faults-fast", **figures)
    assert figures["monitor_backends_killed"] >= 3
    assert figures["server_restarts"] == 1


# --------------------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB filesystem of its own (a tmpfs: root only)."""
    with tmpfs(tmp_path / "small", "256k") as where:
        yield where


class DiskPressure:
    """Another writer on the audit log's filesystem, using up and giving back its
    free space at random (down to nothing at all) while breaks go on."""

    def __init__(self, where: Path, seed: int = 0) -> None:
        self.where = where
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            filler = self.where / f"filler{n % 4}"
            # From nothing left to more than an action needs (~22 KiB reserved).
            left = self.rng.choice((0, 8192, 49152, 98304, 196608, 1 << 20))
            with contextlib.suppress(OSError), open(filler, "ab") as out:
                while free_bytes(self.where) > left and not self.stop.is_set():
                    out.write(b"\0" * min(4096, max(free_bytes(self.where) - left, 1)))
                    out.flush()
            self.stop.wait(self.rng.uniform(0, 0.02))
            if self.rng.random() < 0.5:
                with contextlib.suppress(OSError):
                    (self.where / f"filler{self.rng.randrange(4)}").unlink()
            n += 1

    def __enter__(self) -> DiskPressure:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def breaks_on_a_filling_disk(disk: Path, locks: Path, rounds: int) -> dict[str, Any]:
    log = disk / "audit.jsonl"
    key = locks.parent / "audit.key"
    executor = Executor(
        AuditLog(log, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR, key_path=key)
    )
    outcomes: dict[str, int] = {}
    with DiskPressure(disk):
        for n in range(rounds):
            path = locks / f"r{n}" / "worker.pid"
            lock = on_disk(path, STALE_PID)
            outcome = executor.run(planned(Kind.BREAK, lock), "holder died, disk filling")
            name = outcome.event if outcome.ok else f"{outcome.event}:{outcome.code}"
            outcomes[name] = outcomes.get(name, 0) + 1
            if outcome.ok:
                # Done, and said so in the log: never an action without its record.
                assert outcome.audited, outcome
                assert not path.exists() and outcome.tombstone is not None
                assert Path(outcome.tombstone).read_bytes() == STALE_PID
            else:
                assert path.read_bytes() == STALE_PID, outcome  # refused: untouched
    records = [record for _, record, _ in read_records(log) if record is not None]
    intents = {r["action_id"] for r in records if r["event"] == INTENT}
    results = {r["action_id"]: r["event"] for r in records if r["event"] != INTENT}
    # Every intent has its result; every break done was intended first.
    assert intents <= results.keys(), intents - results.keys()
    broken = [a for a, event in results.items() if event == "lock_broken"]
    assert set(broken) <= intents
    assert len(broken) == outcomes.get("lock_broken", 0)
    verification = verify(log, key_file=key)
    assert verification.ok and verification.status == "intact", verification
    return {"rounds": rounds, "outcomes": outcomes, "records": verification.records}


def test_breaks_while_the_audit_disk_fills_and_empties(small_disk: Path, tmp_path: Path) -> None:
    figures = breaks_on_a_filling_disk(small_disk, tmp_path / "locks", 150)
    report("audit-disk-full-fast", **figures)
    assert figures["outcomes"].get("lock_broken", 0) > 0
    assert figures["outcomes"].get("action_refused:audit_unwritable", 0) > 0


# --------------------------------------------------------------------------- clock jumps


class Heartbeats:
    """A tower-fleet holder of this host heartbeating every 50 ms with real times
    (ttl 60 s), and a clawdbot lock held by this process that never changes."""

    def __init__(self, root: Path) -> None:
        self.tower = root / "logs" / "locks" / "deploy.lock"
        self.claw = root / "memory" / ".lock"
        self.tower.parent.mkdir(parents=True)
        self.claw.parent.mkdir(parents=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        at = datetime.now(UTC)
        self.claw.write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "session_id": "s",
                    "acquired_at": at.isoformat(),
                    "hostname": LOCAL_HOST,
                    "operation": "held",
                }
            )
        )

    def beat(self) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        doc = {
            "lock_version": "v1",
            "lock_name": "deploy",
            "request_id": "req_1",
            "actor": "ci",
            "intent": "deploy",
            "intent_version": "1",
            "host_id": LOCAL_HOST,
            "pid": os.getpid(),
            "created_at": now,
            "last_heartbeat_at": now,
            "ttl_seconds": 60,
        }
        temp = self.tower.with_name("deploy.lock.beat.tmp")
        temp.write_text(json.dumps(doc))
        os.replace(temp, self.tower)

    def run(self) -> None:
        while not self.stop.wait(0.05):
            self.beat()

    def __enter__(self) -> Heartbeats:
        self.beat()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


async def jumps(root: Path, steps: tuple[float, ...]) -> dict[str, list[str]]:
    """The clock steps by each of `steps` in turn while a holder heartbeats; after
    each step (and the dashboard's tick), every verdict on the board must be the
    verdict its lock has at that clock. Answers what was not, by step."""
    clock = FrozenClock(datetime.now(UTC))
    board = Board(LOCAL_HOST)
    feed = feed_on(root, host=LOCAL_HOST, clock=clock, processes=HostProcesses)

    def watched(change: ChangeSet) -> None:
        board.apply(change)

    task = asyncio.create_task(feed.run(watched))
    wrong_after: dict[str, list[str]] = {}

    def mismatches() -> list[str]:
        out = []
        for lock_id, entry in board.entries.items():
            fresh = evaluate(entry.lock, HostProcesses(), clock, LOCAL_HOST)
            shown = board.verdict(lock_id)
            if (shown.state, shown.codes) != (fresh.state, fresh.codes):
                out.append(f"{lock_id}: shown {shown.state} {shown.codes}, is {fresh.state}")
        return out

    offset = 0.0
    try:
        with Heartbeats(root):
            await until(lambda: len(board.entries) == 2, "both locks on the board")
            for step in steps:
                # The step, on top of the real time gone by since the last one.
                offset += step
                clock.advance((datetime.now(UTC) - clock.now()).total_seconds() + offset)
                board.tick(clock.now())
                if not await eventually(lambda: not mismatches(), timeout=1.0):
                    wrong_after[f"{step:+.0f}s"] = mismatches()
    finally:
        await stop_feed(feed, task)
    return wrong_after


async def test_verdicts_follow_the_clock_jumping_forward(tmp_path: Path) -> None:
    """Two hours on (the heartbeat expired, the held lock too old), then a day more."""
    assert await jumps(tmp_path, (2 * 3600.0, 86400.0)) == {}


async def test_verdicts_follow_the_clock_jumping_back(tmp_path: Path) -> None:
    """Two hours on, then back to the true time: the held lock is not too old any more."""
    assert await jumps(tmp_path, (2 * 3600.0, -2 * 3600.0)) == {}


@pytest.mark.soak
async def test_polling_alone_leaves_no_ghost(tmp_path: Path) -> None:
    """Two-second rounds of churn on a polled tree, its rescans off, for
    LOCKWATCH_SOAK_SECONDS: the poller's passes alone must keep the view true."""
    from tests.soak.harness import soak_seconds

    until_t = time.monotonic() + soak_seconds()
    n = 0
    while time.monotonic() < until_t:
        root = tmp_path / f"round{n}"
        root.mkdir()
        await churn(
            root, 2.0, processes=2, per_process=50, rate=800, force_polling=True, strict=True
        )
        n += 1
