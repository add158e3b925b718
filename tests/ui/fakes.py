"""Fakes for the dashboard's tests: feeds that say what they are told, a frozen clock,
and ready-made scenarios, so a UI test needs no filesystem, no server and no real time.

    app = make_app(mixed_scenario())              # or make_app({"files": [...], ...})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)                       # every feed has emitted its change sets
        ...
        app.feeds[0].push(more)                   # a StaticFeed emits more on demand

Everything is judged at `NOW` (tests/conftest.py) on host `LOCAL_HOST`; the app's clock
is frozen there and its tick is an hour away, so what a test sees never depends on when
or where it runs. Scenarios are built from bytes with the real decoders (file locks)
and from `PgLock` records (PostgreSQL), then judged with `lockwatch.model.board.judge`,
exactly as the real feeds do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from textual.pilot import Pilot

from lockwatch.clock import FrozenClock
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import ProcessFacts, StaticProcesses
from lockwatch.model.status import SourceStatus
from lockwatch.sources.feed import Emit
from lockwatch.sources.filelocks import FileKey, KernelEvidence, KernelLock
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.files.decoders.base import LockFile
from lockwatch.sources.files.evidence import with_evidence
from lockwatch.sources.files.users import with_users
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.kernel.ids import kernel_lock_id
from lockwatch.sources.postgres.facts import AdvisoryKey, PgBackend, PgLock
from lockwatch.sources.postgres.settings import DEFAULT_IDLE_AFTER
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.flow import ActionFlow
from lockwatch.ui.keys import View
from lockwatch.ui.screens.contention import ContentionScreen
from lockwatch.ui.screens.events import EventsScreen
from lockwatch.ui.table import LockTable
from lockwatch.ui.themes import LoadedTheme, builtin_dir, load_file
from tests.conftest import LOCAL_HOST, NOW, lock_file

__all__ = [
    "FILES_FEED",
    "KERNEL_FEED",
    "KERNEL_FREE_ID",
    "LOCAL_HOST",
    "NOW",
    "PG_DOWN_REASON",
    "PG_FEED",
    "PG_ROOT_ID",
    "PG_SERVER",
    "TOWER",
    "FailingFeed",
    "StaticFeed",
    "builtin_themes",
    "by_feed",
    "empty_scenario",
    "error_scenario",
    "formats_scenario",
    "frozen_clock",
    "kernel_scenario",
    "lock_count",
    "make_app",
    "mixed_scenario",
    "row_text",
    "settle",
    "until",
]

FILES_FEED = "files"
KERNEL_FEED = "kernel"
PG_SERVER = "monitor@db1:5432/app"
PG_FEED = f"pg:{PG_SERVER}"
# Far beyond any test: no tick (which would sample the board and re-judge) happens.
NO_TICK_SECONDS = 3600.0


# --- feeds -----------------------------------------------------------------------------------


class StaticFeed:
    """A `Feed` that emits the change sets it was given, in order, as soon as it runs,
    then waits until it is cancelled. `push` emits more later, from a test.

    `delivered` says whether the initial change sets went out; `emitted` is everything
    emitted so far; `closed` whether the app closed the feed.
    """

    def __init__(self, name: str, change_sets: Iterable[ChangeSet] = ()) -> None:
        self.name = name
        self.change_sets = list(change_sets)
        for change in self.change_sets:
            if change.feed != name:
                raise ValueError(f"change set for {change.feed!r} given to feed {name!r}")
        self.emitted: list[ChangeSet] = []
        self.delivered = False
        self.closed = False
        self._emit: Emit | None = None

    async def run(self, emit: Emit) -> None:
        self._emit = emit
        for change in self.change_sets:
            self._send(change)
        self.delivered = True
        await asyncio.Event().wait()  # until cancelled, like a real feed

    def push(self, change: ChangeSet) -> None:
        """Emit `change` now (call it on the app's event loop, e.g. from a pilot test)."""
        if self._emit is None:
            raise RuntimeError(f"feed {self.name!r} is not running yet: await settle(pilot)")
        if change.feed != self.name:
            raise ValueError(f"change set for {change.feed!r} pushed to feed {self.name!r}")
        self._send(change)

    async def close(self) -> None:
        self.closed = True

    def _send(self, change: ChangeSet) -> None:
        assert self._emit is not None
        self.emitted.append(change)
        self._emit(change)


class FailingFeed:
    """A `Feed` with a bug: `run` raises at once. The app must say so and carry on."""

    def __init__(self, name: str = "broken", error: Exception | None = None) -> None:
        self.name = name
        self.error = error or RuntimeError("simulated feed failure")
        self.delivered = True  # nothing to wait for: `settle` does not hang on it
        self.closed = False

    async def run(self, emit: Emit) -> None:
        raise self.error

    async def close(self) -> None:
        self.closed = True


# --- the app ---------------------------------------------------------------------------------


def frozen_clock() -> FrozenClock:
    """A fresh clock stopped at NOW (a fresh one: tests may `advance` it)."""
    return FrozenClock(NOW)


def builtin_themes() -> dict[str, LoadedTheme]:
    """The themes shipped with lockwatch, and only those: a developer's own theme
    files under ~/.config must not change what a snapshot looks like."""
    found = {}
    for path in sorted(builtin_dir().glob("*.toml")):
        loaded = load_file(path)
        found[loaded.theme.name] = loaded
    return found


def by_feed(change_sets: Iterable[ChangeSet]) -> dict[str, list[ChangeSet]]:
    """Change sets grouped by the feed that emits them, in order of first appearance."""
    grouped: dict[str, list[ChangeSet]] = {}
    for change in change_sets:
        grouped.setdefault(change.feed, []).append(change)
    return grouped


def lock_count(change_sets: Iterable[ChangeSet]) -> int:
    """How many distinct locks the change sets leave on the board (removals included)."""
    by: dict[str, set[str]] = {}
    for change in change_sets:
        ids = by.setdefault(change.feed, set())
        fresh = {entry.lock.id for entry in change.upserts}
        if change.full:
            ids.clear()
        ids.difference_update(change.removed)
        ids.update(fresh)
    return len(set().union(*by.values())) if by else 0


def make_app(
    change_sets: Mapping[str, Sequence[ChangeSet]] | Iterable[ChangeSet] = (),
    **kwargs: Any,
) -> LockwatchApp:
    """A dashboard fed by one `StaticFeed` per feed name, with the frozen clock, host
    LOCAL_HOST, only the built-in themes, no tick during a test, and no animations.

    `change_sets` is either {feed name: its change sets} or a flat list (grouped by
    `ChangeSet.feed`). Keyword arguments go to `LockwatchApp` and override these.
    """
    grouped = (
        {name: list(sets) for name, sets in change_sets.items()}
        if isinstance(change_sets, Mapping)
        else by_feed(change_sets)
    )
    options: dict[str, Any] = {
        "clock": frozen_clock(),
        "host": LOCAL_HOST,
        "themes": builtin_themes(),
        "tick_seconds": NO_TICK_SECONDS,
    }
    options.update(kwargs)
    feeds = options.pop("feeds", None) or [StaticFeed(name, sets) for name, sets in grouped.items()]
    app = LockwatchApp(feeds, **options)
    # TEXTUAL_ANIMATIONS is read when textual is imported: too early for an env fixture.
    app.animation_level = "none"
    return app


async def settle(pilot: Pilot[Any], timeout: float = 5.0) -> None:
    """Wait until every feed has emitted its initial change sets and the app has drawn
    them. Raises AssertionError after `timeout` seconds rather than hanging."""
    feeds: list[Any] = list(getattr(pilot.app, "feeds", []))
    steps = max(1, int(timeout / 0.05))
    for _ in range(steps):
        if all(getattr(feed, "delivered", True) for feed in feeds):
            break
        await pilot.pause(0.05)
    else:
        waiting = [feed.name for feed in feeds if not getattr(feed, "delivered", True)]
        raise AssertionError(f"feeds never delivered their change sets: {waiting}")
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def until(
    pilot: Pilot[Any], condition: Callable[[], bool], what: str, seconds: float = 5.0
) -> None:
    """Poll until `condition()` holds; fail (not hang) after `seconds` (a bound
    for waiting, never a timing assertion)."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    assert condition(), f"never happened within {seconds} s: {what}"


def flow_of(app: LockwatchApp) -> ActionFlow:
    """The app's action flow (there is one unless read-only)."""
    assert app.flow is not None
    return app.flow


def view_of(app: LockwatchApp) -> View | None:
    """The view on screen (a call: each check looks afresh)."""
    return app.current


def events_view(app: LockwatchApp) -> EventsScreen:
    screen = app.views[View.EVENTS]
    assert isinstance(screen, EventsScreen)
    return screen


def contention_view(app: LockwatchApp) -> ContentionScreen:
    screen = app.views[View.CONTENTION]
    assert isinstance(screen, ContentionScreen)
    return screen


def row_text(app: LockwatchApp, lock_id: str) -> str:
    """The table's line for `lock_id`, as drawn now (the row must be on screen)."""
    table = app.query_one("#table", LockTable)
    index = app.rows.index_of(lock_id)
    assert index is not None, f"{lock_id} is not a row"
    y = index - table.scroll_offset.y
    assert 0 <= y < table.size.height, f"{lock_id} is not on screen"
    return table.render_line(y).text


# --- scenarios -------------------------------------------------------------------------------


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _date_u(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _js(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _running(pid: int, cmdline: str, started_seconds_ago: float = 86400.0) -> ProcessFacts:
    return ProcessFacts(
        pid=pid,
        alive=True,
        started_at=ago(started_seconds_ago),
        cmdline=tuple(cmdline.split()),
        user="deploy",
    )


# Holders that are running on LOCAL_HOST; every other pid is dead.
PROCESSES = StaticProcesses(
    _running(2201, "python3 lock_manager.py --session main"),
    _running(2077, "node dist/GITCLAW-LOCK.js --issue 42"),
    _running(2188, "node dist/GITCLAW-LOCK.js --issue 17"),
    _running(4711, "bash lock-manager.sh heartbeat money-tracker-production"),
    _running(4790, "bash lock-manager.sh acquire tower-sync"),
    _running(3001, "ll-loop run fix-bugs"),
    _running(3002, "ll-loop run refactor-api"),
    _running(812, "/usr/sbin/sshd -D", started_seconds_ago=30 * 86400.0),
    _running(6120, "restic backup /srv", started_seconds_ago=3600.0),
)

AGENTS = "/srv/agents"
TOWER = "/srv/tower-fleet/logs/locks"
GITCLAW = "/home/runner/work/agent/agent/.GITCLAW/state/locks"
PROJECT = "/home/dev/proj"
RUNNING = f"{PROJECT}/.loops/.running"
FILE_ROOTS = ("/srv", "/home", "/run")


def _tower(
    name: str,
    *,
    created: float,
    heartbeat: float,
    pid: int,
    intent: str,
    actor: str = "claude-code",
    ttl: int = 900,
) -> str:
    """tower-fleet/v1 as lock-manager.sh writes it with jq."""
    doc = {
        "lock_version": "v1",
        "lock_name": name,
        "request_id": f"req_{name.replace('-', '')[:8].lower()}0420",
        "actor": actor,
        "intent": intent,
        "intent_version": "1.2.0",
        "host_id": LOCAL_HOST,
        "pid": pid,
        "created_at": _date_u(ago(created)),
        "last_heartbeat_at": _date_u(ago(heartbeat)),
        "ttl_seconds": ttl,
        "metadata": {"ticket": "OPS-1187"},
    }
    return json.dumps(doc, indent=2) + "\n"


def _file_contents() -> list[tuple[str, str | bytes, datetime]]:
    """(path, content, mtime) of every lock file in the incident."""
    return [
        # clawdbot: active, and a lock from another host (its pid is not checked here).
        (
            f"{AGENTS}/main/memory/.lock",
            json.dumps(
                {
                    "pid": 2201,
                    "session_id": "main",
                    "acquired_at": ago(4).isoformat(),
                    "hostname": LOCAL_HOST,
                    "operation": "write:tasks.json",
                },
                indent=2,
            ),
            ago(4),
        ),
        (
            f"{AGENTS}/research/memory/.lock",
            json.dumps(
                {
                    "pid": 9120,
                    "session_id": "research",
                    "acquired_at": _iso(ago(3)),
                    "hostname": "tower-02",
                    "operation": "append:notes.md",
                }
            ),
            ago(3),
        ),
        # clawdbot: stale, written by a session that died.
        (
            f"{AGENTS}/nightly/memory/.lock",
            json.dumps(
                {
                    "pid": 2260,
                    "session_id": "nightly",
                    "acquired_at": _iso(ago(25)),
                    "hostname": LOCAL_HOST,
                    "operation": "compact:memory",
                }
            ),
            ago(25),
        ),
        # clawdbot: invalid, a write cut short (not JSON any more).
        (
            f"{AGENTS}/triage/memory/.lock",
            '{\n  "pid": 2311,\n  "session_id": "tri',
            ago(600),
        ),
        # gitclaw: active, and stale (too old: over 10 minutes).
        (
            f"{GITCLAW}/42.lock",
            json.dumps(
                {
                    "issueNumber": 42,
                    "runId": "12873640211",
                    "acquiredAt": _js(ago(95)),
                    "pid": 2077,
                },
                indent=2,
            )
            + "\n",
            ago(95),
        ),
        (
            f"{GITCLAW}/17.lock",
            json.dumps(
                {
                    "issueNumber": 17,
                    "runId": "12873599020",
                    "acquiredAt": _js(ago(47 * 60 + 12)),
                    "pid": 2188,
                },
                indent=2,
            )
            + "\n",
            ago(47 * 60 + 12),
        ),
        # tower-fleet/v1: active, active but late, stale (heartbeat expired), invalid.
        (
            f"{TOWER}/money-tracker-production.lock",
            _tower(
                "money-tracker-production",
                created=25 * 60,
                heartbeat=20,
                pid=4711,
                intent="deploy-app",
            ),
            ago(20),
        ),
        (
            f"{TOWER}/tower-sync.lock",
            _tower("tower-sync", created=14 * 60, heartbeat=6 * 60 + 40, pid=4790, intent="sync"),
            ago(6 * 60 + 40),
        ),
        (
            f"{TOWER}/home-portal-staging.lock",
            _tower(
                "home-portal-staging",
                created=58 * 60,
                heartbeat=22 * 60 + 5,
                pid=4702,
                intent="migrate-db",
                actor="ops-bot",
            ),
            ago(22 * 60 + 5),
        ),
        (
            f"{TOWER}/Bad_Name.lock",
            _tower("Bad_Name", created=300, heartbeat=30, pid=4799, intent="deploy-app"),
            ago(30),
        ),
        # little-loops: two live loops whose scopes overlap, and one whose loop died.
        (
            f"{RUNNING}/fix-bugs.lock",
            json.dumps(
                {
                    "loop_name": "fix-bugs",
                    "scope": [f"{PROJECT}/src"],
                    "pid": 3001,
                    "started_at": ago(18 * 60).isoformat(),
                }
            ),
            ago(18 * 60),
        ),
        (
            f"{RUNNING}/refactor-api.lock",
            json.dumps(
                {
                    "loop_name": "refactor-api",
                    "scope": [f"{PROJECT}/src/api"],
                    "pid": 3002,
                    "started_at": ago(7 * 60).isoformat(),
                }
            ),
            ago(7 * 60),
        ),
        (
            f"{RUNNING}/docs-sweep.lock",
            json.dumps(
                {
                    "loop_name": "docs-sweep",
                    "scope": [f"{PROJECT}/docs"],
                    "pid": 31338,
                    "started_at": ago(3 * 3600 + 5 * 60).isoformat(),
                }
            ),
            ago(3 * 3600 + 5 * 60),
        ),
        # generic: JSON with familiar keys, a pid file, a dead daemon's pid file.
        (
            "/run/lock/backup.lock",
            json.dumps(
                {
                    "pid": 6120,
                    "host": LOCAL_HOST,
                    "created_at": _iso(ago(41 * 60)),
                    "owner": "restic",
                }
            ),
            ago(41 * 60),
        ),
        ("/run/sshd.pid", "812\n", ago(30 * 86400)),
        ("/run/report-gen.pid", "31999\n", ago(2 * 86400 + 3600)),
    ]


def _file_entries() -> list[Entry]:
    locks = [
        decode_file(lock_file(path, content, mtime)) for path, content, mtime in _file_contents()
    ]
    return judge(locks, PROCESSES, NOW, LOCAL_HOST)


def _pg_lock(
    *,
    backend: PgBackend,
    locktype: str,
    mode: str,
    target: str,
    name: str,
    granted: bool = True,
    key: AdvisoryKey | None = None,
    wait_start: datetime | None = None,
    blocked_by: tuple[int, ...] = (),
    blocking: tuple[int, ...] = (),
    blocking_here: tuple[int, ...] = (),
) -> Lock:
    """A pg_locks record as lockwatch.sources.postgres.records.to_locks builds it: no
    grant time, only bounds (held at least since its session went idle, or since the
    poll at NOW; no older than its transaction, or its session for an advisory lock)."""
    idle = backend.state in ("idle", "idle in transaction") and backend.state_since is not None
    level: Literal["session", "transaction"] | None = (
        "transaction" if locktype != "advisory" else "session" if backend.state == "idle" else None
    )
    pg = PgLock(
        server=PG_SERVER,
        locktype=locktype,
        mode=mode,
        granted=granted,
        database="app",
        backend=backend,
        advisory_key=key,
        wait_start=wait_start,
        blocked_by=blocked_by,
        blocking=blocking,
        blocking_here=blocking_here,
        known_held_at=(backend.state_since if idle else NOW) if granted else None,
        acquired_after=(backend.xact_start if level == "transaction" else backend.backend_start)
        if granted
        else None,
        level=level if granted else None,
    )
    holder = Holder(
        pid=backend.pid,
        host=backend.client,
        actor=backend.user,
        session=backend.application,
        operation=backend.query,
    )
    state = "held" if granted else "wait"
    return Lock(
        id=f"pg:{PG_SERVER}:{backend.pid}:{target}:{mode}:{state}",
        source="postgres",
        format="pg_locks",
        name=name,
        path=None,
        holder=holder,
        acquired_at=wait_start,
        content={"locktype": locktype, "mode": mode, "granted": granted, "pid": backend.pid},
        facts=dataclasses.replace(pg, idle_after=DEFAULT_IDLE_AFTER),
    )


def _backend(
    pid: int,
    *,
    user: str,
    application: str,
    client: str,
    state: str,
    query: str,
    state_for: float,
    xact_for: float | None = None,
    waiting: bool = False,
) -> PgBackend:
    return PgBackend(
        pid=pid,
        user=user,
        application=application,
        client=client,
        state=state,
        query=query,
        backend_type="client backend",
        xact_start=ago(xact_for) if xact_for is not None else None,
        query_start=ago(state_for),
        state_since=ago(state_for),
        wait_event_type="Lock" if waiting else None,
        wait_event=("transactionid" if waiting else None),
        backend_start=ago((xact_for or state_for) + 3 * 3600),
    )


XID_TARGET = "transactionid/////90211///"
TUPLE_TARGET = "tuple/16384/16402/12/7/////"
INVOICES_XID = "xid 90211"
INVOICES_TUPLE = "public.invoices (12,7)"
# The root blocker: idle in transaction for over seven minutes, holding a row lock.
PG_ROOT_ID = f"pg:{PG_SERVER}:4242:{XID_TARGET}:ExclusiveLock:held"


def _pg_locks() -> list[Lock]:
    """A row-lock pile-up behind a session left idle in transaction:

        pid 4242 (idle in transaction 7m12s) ─┬─ pid 5101 waits for its xid, holds the tuple
                                               │   └─ pid 5300 waits for the tuple
                                               └─ pid 5102 waits for its xid

    plus advisory locks: a running job's, a pooled connection's, and a leaked one.
    """
    root = _backend(
        4242,
        user="billing",
        application="billing-api",
        client="10.0.3.17",
        state="idle in transaction",
        query="UPDATE invoices SET status = 'paid' WHERE id = 1207",
        state_for=7 * 60 + 12,
        xact_for=7 * 60 + 15,
    )
    first = _backend(
        5101,
        user="billing",
        application="billing-worker",
        client="10.0.3.21",
        state="active",
        query="UPDATE invoices SET status = 'void' WHERE id = 1207",
        state_for=6 * 60 + 58,
        xact_for=6 * 60 + 58,
        waiting=True,
    )
    second = _backend(
        5102,
        user="reports",
        application="month-end",
        client="10.0.4.9",
        state="active",
        query="SELECT * FROM invoices WHERE id = 1207 FOR UPDATE",
        state_for=5 * 60 + 31,
        xact_for=5 * 60 + 31,
        waiting=True,
    )
    third = _backend(
        5300,
        user="billing",
        application="billing-worker",
        client="10.0.3.22",
        state="active",
        query="UPDATE invoices SET reminder_sent = now() WHERE id = 1207",
        state_for=2 * 60 + 4,
        xact_for=2 * 60 + 4,
        waiting=True,
    )
    job = _backend(
        3100,
        user="scheduler",
        application="cron-runner",
        client="10.0.2.4",
        state="active",
        query="SELECT reindex_nightly()",
        state_for=12 * 60 + 40,
        xact_for=12 * 60 + 40,
    )
    pooled = _backend(
        3377,
        user="agent",
        application="agent-pool",
        client="10.0.5.30",
        state="idle",
        query="SELECT pg_try_advisory_lock(1, 42)",
        state_for=18,
    )
    leaked = _backend(
        3410,
        user="agent",
        application="agent-pool",
        client="10.0.5.31",
        state="idle",
        query="SELECT pg_try_advisory_lock(1, 7)",
        state_for=26 * 60 + 3,
    )
    return [
        _pg_lock(
            backend=root,
            locktype="transactionid",
            mode="ExclusiveLock",
            target=XID_TARGET,
            name=INVOICES_XID,
            blocking=(5101, 5102),
            blocking_here=(5101, 5102),
        ),
        _pg_lock(
            backend=first,
            locktype="transactionid",
            mode="ShareLock",
            target=XID_TARGET,
            name=INVOICES_XID,
            granted=False,
            wait_start=ago(6 * 60 + 57),
            blocked_by=(4242,),
            blocking=(5300,),
        ),
        _pg_lock(
            backend=first,
            locktype="tuple",
            mode="ExclusiveLock",
            target=TUPLE_TARGET,
            name=INVOICES_TUPLE,
            blocking=(5300,),
            blocking_here=(5300,),
        ),
        _pg_lock(
            backend=second,
            locktype="transactionid",
            mode="ShareLock",
            target=XID_TARGET,
            name=INVOICES_XID,
            granted=False,
            wait_start=ago(5 * 60 + 30),
            blocked_by=(4242,),
        ),
        _pg_lock(
            backend=third,
            locktype="tuple",
            mode="ExclusiveLock",
            target=TUPLE_TARGET,
            name=INVOICES_TUPLE,
            granted=False,
            wait_start=ago(2 * 60 + 3),
            blocked_by=(5101,),
        ),
        _pg_lock(
            backend=job,
            locktype="advisory",
            mode="ExclusiveLock",
            target="advisory/16384/////1/3926036652/1",
            name="nightly-reindex",
            key=AdvisoryKey("bigint", key=8121971372),
        ),
        _pg_lock(
            backend=pooled,
            locktype="advisory",
            mode="ExclusiveLock",
            target="advisory/16384/////1/42/2",
            name="agent:42",
            key=AdvisoryKey("pair", key1=1, key2=42),
        ),
        _pg_lock(
            backend=leaked,
            locktype="advisory",
            mode="ExclusiveLock",
            target="advisory/16384/////1/7/2",
            name="agent:7",
            key=AdvisoryKey("pair", key1=1, key2=7),
        ),
    ]


def _watching(*roots: str) -> tuple[SourceStatus, ...]:
    return tuple(SourceStatus("file", root, "watching", updated_at=NOW) for root in roots)


def mixed_scenario() -> list[ChangeSet]:
    """An incident in full: every file format in every state (active, late, foreign,
    stale for each reason, invalid, a scope conflict) and a PostgreSQL server with a
    three-deep blocking chain under a session idle in transaction, and advisory locks.

    One change set per feed: FILES_FEED (roots /srv, /home, /run, watching) and
    PG_FEED (connected), both at NOW.
    """
    # A session's liveness is the server's word: no local process facts for pg.
    pg_entries = judge(_pg_locks(), StaticProcesses(), NOW, LOCAL_HOST)
    return [
        ChangeSet(
            FILES_FEED, NOW, _watching(*FILE_ROOTS), full=True, upserts=tuple(_file_entries())
        ),
        ChangeSet(
            PG_FEED,
            NOW,
            (SourceStatus("postgres", PG_SERVER, "connected", updated_at=NOW),),
            full=True,
            upserts=tuple(pg_entries),
        ),
    ]


def empty_scenario() -> list[ChangeSet]:
    """A files root that is watched and holds no lock."""
    return [ChangeSet(FILES_FEED, NOW, _watching("/srv/locks"), full=True)]


PG_DOWN_REASON = 'connection to server at "db1" (10.0.3.5), port 5432 failed: Connection refused'


def error_scenario(last_locks: bool = True) -> list[ChangeSet]:
    """Sources in trouble: a files root that does not exist (next to one that works)
    and a server that went away, retry in 8 s.

    With `last_locks` the server was polled two minutes ago and its locks stay on screen
    (as PgFeed leaves them); the working root holds two locks. Without it, only the
    broken sources are there: the empty state must say why.
    """
    missing = SourceStatus("file", "/srv/missing", "error", reason="does not exist")
    down = SourceStatus(
        "postgres",
        PG_SERVER,
        "disconnected",
        reason=PG_DOWN_REASON,
        updated_at=ago(120) if last_locks else None,
        next_retry_at=NOW + timedelta(seconds=8),
    )
    if not last_locks:
        return [
            ChangeSet(FILES_FEED, NOW, (missing,), full=True),
            ChangeSet(PG_FEED, NOW, (down,)),
        ]
    files = [e for e in _file_entries() if e.lock.path and e.lock.path.startswith(TOWER)]
    polled = ago(120)
    # The last good poll, two minutes ago: judged then, as the feed did.
    earlier = [
        lock
        for lock in _pg_locks()
        if isinstance(lock.facts, PgLock) and lock.facts.locktype != "advisory"
    ]
    pg_entries = judge(earlier, StaticProcesses(), polled, LOCAL_HOST)
    return [
        ChangeSet(FILES_FEED, NOW, (missing, *_watching(TOWER)), full=True, upserts=tuple(files)),
        ChangeSet(
            PG_FEED,
            polled,
            (SourceStatus("postgres", PG_SERVER, "connected", updated_at=polled),),
            full=True,
            upserts=tuple(pg_entries),
        ),
        ChangeSet(PG_FEED, NOW, (down,)),
    ]


# --- the kernel's locks ----------------------------------------------------------------------

BUILDS = "/srv/builds"
KERNEL_FREE_ID = f"file:{BUILDS}/cache.lock"  # held by nobody now (judged unknown)
KERNEL_PROCESSES = StaticProcesses(
    _running(5501, "python3 -m pip wheel . --lock build.lock", started_seconds_ago=300.0),
    _running(5502, "python3 worker.py --queue builds", started_seconds_ago=120.0),
    _running(5503, "flock build.lock make release", started_seconds_ago=40.0),
    _running(5504, "terraform apply -auto-approve", started_seconds_ago=900.0),
)


def _held(
    ordinal: int,
    path: str,
    inode: int,
    pid: int,
    *,
    kind: str = "FLOCK",
    blocking: tuple[int, ...] = (),
    waiting: bool = False,
    blocked_by: tuple[int, ...] = (),
) -> KernelLock:
    return KernelLock(
        ordinal=ordinal,
        type=kind,
        mode="WRITE",
        file=FileKey("253:1", inode),
        start=0,
        end=None,
        pid=pid,
        waiting=waiting,
        owners=(pid,),
        path=path,
        blocking=blocking,
        blocked_by=blocked_by,
    )


def kernel_scenario() -> list[ChangeSet]:
    """Lock files that real libraries hold with flock/fcntl (empty sentinels),
    judged with the kernel's evidence, and the kernel's own records:

        build.lock   held with flock by pid 5501, pid 5503 (flock(1)) waits for it
        cache.lock   nobody holds it, an empty file: unknown (existence_unknown) until the
                     kernel is seen holding it (npm's lockfile is never free)
        queue.lock   no kernel lock, but pid 5502 has it open: open_by
        .terraform.tfstate.lock.info  a POSIX lock held by terraform

    One change set per feed: FILES_FEED (root /srv/builds) and KERNEL_FEED.
    """
    build = _held(1, f"{BUILDS}/build.lock", 1001, 5501, blocking=(5503,))
    waiter = _held(1, build.path or "", 1001, 5503, waiting=True, blocked_by=(5501,))
    terraform = _held(2, f"{BUILDS}/infra/.terraform.tfstate.lock.info", 1004, 5504, kind="POSIX")
    evidence = {
        f"{BUILDS}/build.lock": KernelEvidence(holds=(build,), waiters=1),
        f"{BUILDS}/cache.lock": KernelEvidence(),
        f"{BUILDS}/queue.lock": KernelEvidence(open_by=(5502,)),
    }
    files = [
        with_evidence(decode_file(lock_file(path, "", ago(age))), evidence[path])
        for path, age in (
            (f"{BUILDS}/build.lock", 300),
            (f"{BUILDS}/cache.lock", 3 * 3600),
            (f"{BUILDS}/queue.lock", 120),
        )
    ]
    records = [
        Lock(
            id=kernel_lock_id(kernel),
            source="kernel",
            format=kernel.format,
            name=(kernel.path or "").rsplit("/", 1)[-1],
            path=kernel.path,
            holder=Holder(pid=kernel.holder_pid),
            facts=KernelFacts.of(kernel),
        )
        for kernel in (build, waiter, terraform)
    ]
    return [
        ChangeSet(
            FILES_FEED,
            NOW,
            _watching(BUILDS),
            full=True,
            upserts=tuple(judge(files, KERNEL_PROCESSES, NOW, LOCAL_HOST)),
        ),
        ChangeSet(
            KERNEL_FEED,
            NOW,
            (SourceStatus("kernel", "/proc/locks", "ok", updated_at=NOW),),
            full=True,
            upserts=tuple(judge(records, KERNEL_PROCESSES, NOW, LOCAL_HOST)),
        ),
    ]


SENTINELS_FEED = "builds"
SENTINEL_FREE_ID = f"file:{BUILDS}/pool.lock"


def sentinels_scenario(*, free: bool = True) -> ChangeSet:
    """Beside the mixed scenario, for the header's counts: empty lock files under
    /srv/builds that only a kernel lock would make held. cache.lock was never seen
    held (unknown); pool.lock was, and is no longer (free), unless `free` is False."""
    evidence = {
        f"{BUILDS}/cache.lock": KernelEvidence(),
        f"{BUILDS}/pool.lock": KernelEvidence(was_held=True),
    }
    files = [
        with_evidence(decode_file(lock_file(path, "", ago(3600))), evidence[path])
        for path in evidence
        if free or path != SENTINEL_FREE_ID.removeprefix("file:")
    ]
    return ChangeSet(
        SENTINELS_FEED,
        NOW,
        _watching(BUILDS),
        full=True,
        upserts=tuple(judge(files, KERNEL_PROCESSES, NOW, LOCAL_HOST)),
    )


# --- the tools' own lock files -----------------------------------------------------------------

REPO = "/home/dev/shop"


def _entry(path: str, age: float, *, raw: bytes = b"", **facts: Any) -> LockFile:
    """A directory entry as the scanner hands it to the decoders: a file, a
    symlink (`kind="symlink", target=...`) or a lock directory."""
    return LockFile(path=path, raw=raw, mtime=ago(age).timestamp(), sha256="0" * 64, **facts)


def formats_scenario() -> list[ChangeSet]:
    """Lock files as real tools leave them, read by the real decoders: git's
    index.lock (one left by a killed commit: stale; one a running commit holds:
    active once lockwatch saw git at work), a flufl.lock past its expiry, a
    SoftFileLock written in a container (unknown), an Emacs lock, a lock
    directory and a LibreOffice lock."""
    held = with_users(
        decode_file(_entry(f"{REPO}/.git/refs/heads/main.lock", 2, raw=b"9f2c" * 10 + b"\n")),
        (2201,),
    )
    left = with_users(
        decode_file(_entry(f"{REPO}/.git/index.lock", 3 * 3600, raw=b"DIRC\x00\x00\x00\x02")),
        (),
    )
    claim = f"{REPO}/var/queue.lock|{LOCAL_HOST}|2077|8121971372"
    locks = [
        held,
        left,
        decode_file(
            _entry(
                f"{REPO}/var/queue.lock",
                -60,  # flufl's mtime is the expiry: a minute from now
                raw=claim.encode(),
                nlink=2,
                links=(claim.rsplit("/", 1)[1],),
            )
        ),
        decode_file(
            _entry(f"{REPO}/var/build.lock", 40, raw=f"1\n{LOCAL_HOST}?pidns-f0000152\n".encode())
        ),
        decode_file(
            _entry(
                f"{REPO}/src/.#cart.py", 300, kind="symlink", target=f"dev@{LOCAL_HOST}.31999:1764"
            )
        ),
        decode_file(_entry(f"{REPO}/deploy.lock", 95, kind="dir", entries=())),
        decode_file(
            _entry(
                f"{REPO}/docs/.~lock.pricing.ods#",
                600,
                raw=b"Dana Ops,dana,ws-14,24.11.2026 01:12,file:///home/dana/.config/libreoffice/4;",
            )
        ),
    ]
    return [
        ChangeSet(
            FILES_FEED,
            NOW,
            _watching(REPO),
            full=True,
            upserts=tuple(judge(locks, PROCESSES, NOW, LOCAL_HOST)),
        )
    ]
