"""Acting on PostgreSQL sessions: terminate, cancel, and steal advisory locks.

Each action opens its own short connection (never the monitor's, which is
read-only), re-checks right before acting that the session still holds the
lock the operator saw (compare-and-swap for Postgres), and then signals it in
the same statement as a second check, so a lock released in between is never
acted on. A stolen advisory lock is held on a dedicated connection of
lockwatch's own until it is released or lockwatch exits.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import conninfo

from lockwatch.model.action import ActionFailed, ActionRefused
from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.postgres import ids
from lockwatch.sources.postgres.dsn import scrub
from lockwatch.sources.postgres.facts import AdvisoryKey, PgBackend, PgLock
from lockwatch.sources.postgres.query import TARGET

ACTION_APPLICATION = "lockwatch-action"
HOLD_APPLICATION = "lockwatch-steal"
TERMINATE_WAIT_MS = 5000

# TARGET's format() string holds literal `%s`: with query parameters psycopg would
# read them as placeholders, so they are doubled here.
_TARGET = TARGET.replace("%", "%%")

# The session's start and last state change as the server wrote them, compared
# exactly with the poll's (PgBackend.backend_started, .state_changed): ages turned
# into this host's time differ between two readings by however late each was
# stamped, seconds under load, and a tolerance for that would also take a later
# session that started within it for the one seen.
_HOLDS = f"""
SELECT l.granted, a.state, a.state_change, a.backend_start
FROM pg_catalog.pg_locks AS l
LEFT JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
WHERE l.pid = %(pid)s AND {_TARGET} = %(target)s AND l.mode = %(mode)s
"""
_SIGNAL = f"""
SELECT pg_catalog.{{function}}(l.pid{{extra}}) AS done FROM pg_catalog.pg_locks AS l
WHERE l.pid = %(pid)s AND {_TARGET} = %(target)s AND l.mode = %(mode)s
  AND l.granted = %(granted)s
LIMIT 1
"""
_ALIVE = "SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid = %(pid)s"
# Sessions queued for the lock: the server grants it to them, not to a steal.
_WAITERS = f"""
SELECT l.pid FROM pg_catalog.pg_locks AS l
WHERE NOT l.granted AND {_TARGET} = %(target)s
ORDER BY l.pid
"""
_HOLDER_OF = f"""
SELECT l.pid, a.application_name FROM pg_catalog.pg_locks AS l
LEFT JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
WHERE {_TARGET} = %(target)s AND l.granted
"""


def pg_of(lock: Lock) -> PgLock:
    """A Postgres lock's facts (the plan took only Postgres locks)."""
    assert isinstance(lock.facts, PgLock)
    return lock.facts


def _facts(lock: Lock) -> dict[str, Any]:
    pg = pg_of(lock)
    row = lock.content if isinstance(lock.content, Mapping) else {}
    return {
        "pid": pg.backend.pid,
        "target": row.get("target"),
        "mode": pg.mode,
        "granted": pg.granted,
    }


def hold_application(operator: str) -> str:
    """The application_name of a steal's session: whose lock it holds, for `release`."""
    return f"{HOLD_APPLICATION}:{operator}"[:63]


def held_by_steal(lock: Lock, operator: str | None = None) -> bool:
    """Whether a `lockwatch steal` session holds this lock (for `operator`, if given)."""
    pg = lock.facts
    application = pg.backend.application if isinstance(pg, PgLock) else None
    if not application or not application.startswith(HOLD_APPLICATION):
        return False
    return operator is None or application == hold_application(operator)


def privilege_message(exc: psycopg.Error, verb: str, pid: int | None) -> str:
    return (
        f"permission denied to {verb} pid {pid}: lockwatch's role needs the pg_signal_backend"
        " role (GRANT pg_signal_backend TO <role>), or must be a superuser to signal a"
        f" superuser's session. The server said: {_first_line(exc)}"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _advisory_call(key: AdvisoryKey, function: str) -> tuple[str, tuple[int, ...]]:
    if key.form == "bigint":
        assert key.key is not None
        return f"SELECT pg_catalog.{function}(%s::int8)", (key.key,)
    assert key.key1 is not None and key.key2 is not None
    return f"SELECT pg_catalog.{function}(%s::int4, %s::int4)", (key.key1, key.key2)


@dataclass
class HeldAdvisory:
    """An advisory lock lockwatch took on its own connection, held until released."""

    server: str
    key: AdvisoryKey
    shared: bool
    name: str
    target: str
    connection: psycopg.Connection[Any] = field(repr=False)
    # Read while the connection is open: the lock keeps its name once released.
    _pid: int = field(init=False, repr=False)
    _user: str = field(init=False, repr=False)
    _application: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._pid = int(self.connection.info.backend_pid)
        self._user = str(self.connection.info.user)
        self._application = (
            self.connection.info.parameter_status("application_name") or HOLD_APPLICATION
        )

    @property
    def backend_pid(self) -> int:
        return self._pid

    @property
    def lock_id(self) -> str:
        """The id the monitor gives this lock now that lockwatch's session holds it."""
        mode = "ShareLock" if self.shared else "ExclusiveLock"
        return ids.pg_id(self.server, self.backend_pid, self.target, mode, "held")

    def as_lock(self, seen: Lock) -> Lock:
        """`seen` (the lock as it was before the steal) as lockwatch's session holds it
        now: what releasing it acts on, and what the audit log names."""
        seen_pg = pg_of(seen)
        pid, user = self.backend_pid, self._user
        backend = PgBackend(pid=pid, user=user, application=self._application, state="idle")
        row = dict(seen.content) if isinstance(seen.content, Mapping) else {}
        row.update(
            pid=pid,
            target=self.target,
            mode="ShareLock" if self.shared else "ExclusiveLock",
            granted=True,
            virtualtransaction=None,
            wait_age=None,
            prepared_gid=None,
            blocked_by=None,
        )
        pg = replace(
            seen_pg,
            granted=True,
            mode=row["mode"],
            backend=backend,
            wait_start=None,
            blocked_by=(),
            blocking=(),
            blocking_here=(),
            blocked_by_prepared=(),
        )
        return replace(
            seen,
            id=self.lock_id,
            holder=Holder(pid=pid, actor=user, session=self._application),
            acquired_at=None,
            content=row,
            facts=pg,
        )

    def alive(self) -> bool:
        if self.connection.closed or self.connection.broken:
            return False
        try:
            self.connection.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def release(self) -> bool:
        """Unlock and close; True when the server confirmed the unlock."""
        function = "pg_advisory_unlock_shared" if self.shared else "pg_advisory_unlock"
        sql, args = _advisory_call(self.key, function)
        try:
            row = self.connection.execute(sql, args).fetchone()
            return bool(row and row[0])
        except psycopg.Error:
            return False
        finally:
            with contextlib.suppress(psycopg.Error):
                self.connection.close()


class PgActor:
    """Actions on one server, reached through `dsn` (never shown: it may hold a password)."""

    def __init__(self, dsn: str, *, connect_timeout_s: int = 5) -> None:
        self._dsn = dsn
        self._connect_timeout_s = connect_timeout_s

    def _connect(
        self, database: str | None = None, application: str = ACTION_APPLICATION
    ) -> psycopg.Connection[Any]:
        extra: dict[str, Any] = {
            "application_name": application,
            "connect_timeout": self._connect_timeout_s,
        }
        if database:
            extra["dbname"] = database
        try:
            return psycopg.connect(conninfo.make_conninfo(self._dsn, **extra), autocommit=True)
        except psycopg.Error as exc:
            message = scrub(_first_line(exc), self._dsn)
            raise ActionFailed("connect_failed", f"cannot connect: {message}") from exc

    def _recheck(
        self, conn: psycopg.Connection[Any], lock: Lock, still_idle: bool = False
    ) -> dict[str, Any]:
        """The lock's facts, if its holder still holds it as the operator saw; with
        `still_idle`, also still idle as it was (what made it stale)."""
        facts = _facts(lock)
        if facts["target"] is None or facts["pid"] is None:
            raise ActionRefused("unsupported", f"{lock.name}: lockwatch cannot tell what it is on")
        try:
            rows = conn.execute(_HOLDS, facts).fetchall()
        except psycopg.Error as exc:
            raise ActionFailed("server_error", scrub(_first_line(exc), self._dsn)) from exc
        if not rows:
            raise ActionRefused(
                "changed",
                f"pid {facts['pid']} no longer holds or waits for {lock.name}: it was released"
                " (or the session ended) since you saw it; nothing done",
            )
        if bool(rows[0][0]) != facts["granted"]:
            now = "holds" if rows[0][0] else "waits for"
            raise ActionRefused(
                "changed", f"pid {facts['pid']} now {now} {lock.name}; nothing done"
            )
        _same_session(lock, facts["pid"], rows[0][3])
        if still_idle and isinstance(lock.facts, PgLock):
            _still_idle(lock, facts["pid"], rows[0][1], rows[0][2])
        return facts

    def _no_waiters(self, conn: psycopg.Connection[Any], lock: Lock, facts: dict[str, Any]) -> None:
        """Refuse a steal while anyone queues for the lock: the server would grant it
        to them when its holder goes, and the holder would be ended for nothing."""
        try:
            rows = conn.execute(_WAITERS, {"target": facts["target"]}).fetchall()
        except psycopg.Error as exc:
            raise ActionFailed("server_error", scrub(_first_line(exc), self._dsn)) from exc
        if rows:
            waiting = ", ".join(str(row[0]) for row in rows)
            raise ActionRefused(
                "has_waiters",
                f"pid {waiting} queue{'s' if len(rows) == 1 else ''} for {lock.name}: PostgreSQL"
                " would grant it to them before lockwatch could take it; nothing done. Break it"
                " instead and let the waiter have it",
            )

    def _signal(
        self,
        lock: Lock,
        function: str,
        verb: str,
        still_idle: bool = False,
        no_waiters: bool = False,
    ) -> dict[str, Any]:
        with self._connect() as conn:
            facts = self._recheck(conn, lock, still_idle)
            if no_waiters:
                self._no_waiters(conn, lock, facts)
            extra = ""
            if function == "pg_terminate_backend" and conn.info.server_version >= 140000:
                extra = f", {TERMINATE_WAIT_MS}"  # wait until it has really gone
            sql = _SIGNAL.format(function=function, extra=extra)
            try:
                row = conn.execute(sql, {**facts}).fetchone()
            except psycopg.errors.InsufficientPrivilege as exc:
                raise ActionFailed(
                    "insufficient_privilege", privilege_message(exc, verb, facts["pid"])
                ) from exc
            except psycopg.Error as exc:
                raise ActionFailed("server_error", scrub(_first_line(exc), self._dsn)) from exc
            if row is None:
                raise ActionRefused(
                    "changed", f"pid {facts['pid']} let go of {lock.name} just now; nothing done"
                )
            if not row[0]:
                try:
                    gone = not conn.execute(_ALIVE, {"pid": facts["pid"]}).fetchone()
                except psycopg.Error:
                    gone = False
                if gone:
                    # It exited between the check and the signal (someone else ended it):
                    # lockwatch did nothing to it.
                    raise ActionRefused(
                        "changed",
                        f"pid {facts['pid']} ended just before lockwatch could {verb} it;"
                        " nothing done",
                    )
                raise ActionFailed(
                    "signal_failed",
                    f"the server could not {verb} pid {facts['pid']} (it may have exited, or"
                    " not ended within 5 s)",
                )
            return {"pid": facts["pid"], "server_version": conn.info.server_version}

    def terminate(
        self, lock: Lock, still_idle: bool = False, no_waiters: bool = False
    ) -> dict[str, Any]:
        """`still_idle`: the operator judged it stale for idling; refuse if it woke.
        `no_waiters`: refuse if anyone queues for the lock (a steal)."""
        return self._signal(lock, "pg_terminate_backend", "terminate", still_idle, no_waiters)

    def cancel(self, lock: Lock) -> dict[str, Any]:
        return self._signal(lock, "pg_cancel_backend", "cancel the query of")

    def steal(
        self, lock: Lock, operator: str = "", on_terminated: Callable[[int], None] | None = None
    ) -> HeldAdvisory:
        """Terminate the holder (only if still idle as seen: a steal is of stale locks
        only, and only while nobody queues for the lock, who would be served first),
        then take the same advisory key on a connection of lockwatch's own, to the
        lock's database (advisory keys are per database). `on_terminated` hears of
        the terminated backend at once, whatever happens next."""
        pg = pg_of(lock)
        assert pg.advisory_key is not None
        key = pg.advisory_key
        shared = pg.mode == "ShareLock"
        details = self.terminate(lock, still_idle=True, no_waiters=True)
        if on_terminated is not None:
            on_terminated(int(details["pid"]))
        application = hold_application(operator) if operator else HOLD_APPLICATION
        holder = self._connect(pg.database, application)
        function = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        sql, args = _advisory_call(key, function)
        try:
            got = False
            # Before PostgreSQL 14 terminate cannot wait: give the backend a moment to go.
            deadline = time.monotonic() + (0.0 if details["server_version"] >= 140000 else 5.0)
            while True:
                row = holder.execute(sql, args).fetchone()
                got = bool(row and row[0])
                if got or time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
            if not got:
                who = holder.execute(_HOLDER_OF, {"target": _facts(lock)["target"]}).fetchall()
                taker = (
                    ", ".join(f"pid {pid} ({app or 'no name'})" for pid, app in who)
                    or "another session"
                )
                raise ActionFailed(
                    "taken",
                    f"pid {details['pid']} was terminated, but {taker} took {lock.name} first"
                    " (a waiter is served before lockwatch can ask)",
                )
        except BaseException as exc:
            with contextlib.suppress(psycopg.Error):
                holder.close()
            if isinstance(exc, psycopg.Error):
                raise ActionFailed(
                    "server_error",
                    f"pid {details['pid']} was terminated, but taking {lock.name} failed:"
                    f" {scrub(_first_line(exc), self._dsn)}",
                ) from exc
            raise
        target = _facts(lock)["target"]
        return HeldAdvisory(pg.server, key, shared, lock.name, str(target), holder)

    def release_remote(
        self, lock: Lock, on_terminated: Callable[[int], None] | None = None
    ) -> dict[str, Any]:
        """Release an advisory lock another lockwatch process holds for its operator
        (a CLI steal in the foreground) by ending that lockwatch session."""
        if not held_by_steal(lock):
            raise ActionRefused("not_held", f"{lock.name} is not held by lockwatch")
        details = self.terminate(lock)
        if on_terminated is not None:
            on_terminated(int(details["pid"]))
        return details


def _same_session(lock: Lock, pid: int, started: datetime | None) -> None:
    """Refuse when `pid` now belongs to a later session than the one seen: its
    backend_start, as the server wrote it, is not the one the poll read."""
    seen = pg_of(lock).backend.backend_started
    # NULL when our role may not see the session's times (nor could the poll):
    # the pid, the lock and its mode are all there is to compare then.
    if seen is None or started is None:
        return
    if started != seen:
        raise ActionRefused(
            "changed",
            f"pid {pid} is another session now (started {started.astimezone(UTC):%H:%M:%S},"
            " not the one you saw): nothing done",
        )


def _still_idle(lock: Lock, pid: int, state: str | None, changed: datetime | None) -> None:
    """Refuse when the session seen idle has done anything since: another state,
    or the same one entered again (its state_change, as the server wrote it, moved)."""
    seen = pg_of(lock).backend
    if seen.state is None or not seen.state.startswith("idle"):
        return  # not judged stale for idling
    woke = state != seen.state
    if not woke and seen.state_changed is not None and changed is not None:
        woke = changed != seen.state_changed
    if woke:
        raise ActionRefused(
            "changed",
            f"pid {pid} is no longer the idle holder you saw (now {state or 'gone'}): it"
            f" did something since; nothing done",
        )
