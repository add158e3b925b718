"""pg_locks rows (as the poll query returns them) to Lock records."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple

from lockwatch.model.lock import Holder, Lock
from lockwatch.model.slots import lean_dataclass
from lockwatch.model.text import scrub_secrets
from lockwatch.sources.postgres.facts import (
    NO_NAMES,
    AdvisoryKey,
    AdvisoryNames,
    Autovacuum,
    PgBackend,
    PgClient,
    PgLock,
    autovacuum_kind,
)
from lockwatch.sources.postgres.idlerows import stale_idle_rows
from lockwatch.sources.postgres.ids import pg_id
from lockwatch.sources.postgres.rowread import Entry, Follower, row_reader

FORMAT = "pg_locks"
QUERY_CHARS = 200
# Times derived from the server's ages move by the round trip's jitter between
# polls: a lock seen held before its transaction began by more than this
# outlived an earlier transaction (it is session-level).
JITTER = timedelta(milliseconds=500)
_IDLE_STATES = ("idle", "idle in transaction", "idle in transaction (aborted)")

Row = Mapping[str, Any]
# One session's hold on one lock, across polls: pid, the session's start (the
# server's own time: a later session may get the same pid), target, mode.
SeenKey = tuple[int, Any, str, str]


def holds_seen(locks: Sequence[Lock], sessions: Mapping[int, Row]) -> dict[SeenKey, datetime]:
    """When each granted hold in `locks` was known to exist, under the key a source
    remembers it by across polls (to_locks' `seen`)."""
    seen: dict[SeenKey, datetime] = {}
    for lock in locks:
        pg = lock.facts
        if not isinstance(pg, PgLock):
            continue
        pid = pg.backend.pid
        if pid is None or not pg.granted or pg.known_held_at is None:
            continue
        started = sessions.get(pid, _NO_SESSION).get("backend_started")
        seen[(pid, started, _target(lock.content), pg.mode)] = pg.known_held_at
    return seen


def held_since(row: Row, session: Row, polled_at: datetime) -> datetime:
    """When this poll shows the hold existed: now, or when its session last went
    idle (it has run nothing since, so it held the lock then already)."""
    if session.get("state") in _IDLE_STATES and row["pid"] is not None:
        idle_since = _ago(polled_at, session.get("state_age"))
        if idle_since is not None:
            return min(idle_since, polled_at)
    return polled_at


def held_counts(kinds: str | None) -> tuple[tuple[str, int], ...]:
    """`advisory=80,virtualxid=1` (the query's held_kinds) as pairs."""
    if not kinds:
        return ()
    counted: list[tuple[str, int]] = []
    for part in kinds.split(","):
        locktype, _, count = part.rpartition("=")
        if locktype and count.isdigit():
            counted.append((locktype, int(count)))
    return tuple(counted)


def _target(row: Row) -> str:
    """What the lock is on (the query's `target`): rows with the same target compete."""
    target: str = row["target"]
    return target


def _holder_key(row: Row) -> int | str:
    if row["pid"] is not None:
        return int(row["pid"])
    if row["prepared_gid"] is not None:
        return f"prepared:{row['prepared_gid']}"
    # A pid-less holder whose gid we could not find: its vxid still tells them apart.
    return f"vxid:{row['virtualtransaction']}"


def _session_database(sessions: Mapping[int, Row], row: Row) -> str | None:
    activity = sessions.get(row["pid"]) if row["pid"] is not None else None
    return None if activity is None else activity.get("datname")


def trim_query(query: str | None) -> str | None:
    if query is None:
        return None
    # Scrubbed before it is cut: a password cut in half is no longer recognisable.
    one_line = " ".join(scrub_secrets(query).split())
    return one_line if len(one_line) <= QUERY_CHARS else one_line[: QUERY_CHARS - 1] + "…"


def _ago(polled_at: datetime, seconds: float | None) -> datetime | None:
    if seconds is None:
        return None
    return polled_at - timedelta(seconds=max(0.0, float(seconds)))


def _name(row: Row, key: AdvisoryKey | None, names: AdvisoryNames) -> str:
    locktype = row["locktype"]
    relation = None
    if row["relation"] is not None:
        relation = (
            f"{row['schema_name']}.{row['relation_name']}"
            if row["relation_name"] is not None
            else f"relation {row['relation']}"
            + (f" in {row['database_name']}" if row["database_name"] else "")
        )
    if locktype == "advisory" and key is not None:
        return advisory_name(row, key, names)
    if locktype == "relation" and relation:
        return relation
    if locktype == "tuple" and relation:
        return f"{relation} ({row['page']},{row['tuple']})"
    if locktype == "page" and relation:
        return f"{relation} page {row['page']}"
    if locktype == "extend" and relation:
        return f"{relation} (extend)"
    if locktype == "transactionid":
        return f"xid {row['transactionid']}"
    if locktype == "virtualxid":
        return f"vxid {row['virtualxid']}"
    if locktype == "object" and row["object_name"]:
        return str(row["object_name"])
    return f"{locktype} {row['classid']}/{row['objid']}/{row['objsubid']}"


def advisory_name(row: Row, key: AdvisoryKey, names: AdvisoryNames) -> str:
    """An advisory lock's name: Terraform's pg backend's workspace when the poll
    found the key in its `states` table (query.py), else the configured name, else
    the key."""
    return _advisory_named(row.get("terraform_state"), key, names)


def _advisory_named(terraform: Any, key: AdvisoryKey, names: AdvisoryNames) -> str:
    """advisory_name, given the row's `terraform_state` (to_locks reads it with the rest)."""
    if terraform is not None and key.form == "bigint":
        return str(terraform)
    return names.name(key)


_NO_SESSION: Row = {}


def _vacuums(
    blocked_by: tuple[int, ...], sessions: Mapping[int, Row]
) -> tuple[tuple[int, Autovacuum], ...]:
    """The autovacuum workers among a waiter's blockers, with what kind."""
    found = []
    for pid in blocked_by:
        session = sessions.get(pid)
        if session is None:
            continue
        kind = autovacuum_kind(session.get("backend_type"), session.get("query"))
        if kind is not None:
            found.append((pid, kind))
    return tuple(found)


def _session(
    row: Row,
    session: Row,
    holder_key: int | str,
    polled_at: datetime,
    waiters_of: Mapping[int | str, set[int]],
    clients: Mapping[int, PgClient | None],
    monitor_role: str | None,
) -> tuple[PgBackend, Holder, tuple[int, ...], tuple[int, ...]]:
    """What a lock row's holder is: its session (pg_stat_activity), if it has one."""
    gid = row["prepared_gid"]
    get = session.get
    pid = row["pid"]
    client_port = get("client_port")
    backend = PgBackend(
        pid=pid,
        # A prepared transaction has no session: its owner is its user.
        user=get("usename") if gid is None else row.get("prepared_owner"),
        application=get("application_name"),
        client=get("client"),
        state=get("state"),
        query=trim_query(get("query")),
        backend_type=get("backend_type"),
        xact_start=_ago(polled_at, get("xact_age")),
        query_start=_ago(polled_at, get("query_age")),
        state_since=_ago(polled_at, get("state_age")),
        wait_event_type=get("wait_event_type"),
        wait_event=get("wait_event"),
        prepared_gid=None if gid is None else str(gid),
        backend_start=_ago(polled_at, get("backend_age")),
        client_port=None if client_port is None else int(client_port),
        client_process=clients.get(pid) if pid is not None else None,
        held=held_counts(row.get("held_kinds")),
        prepared_at=_ago(polled_at, row.get("prepared_age")) if gid is not None else None,
        monitor_role=monitor_role,
        backend_started=get("backend_started"),
        state_changed=get("state_changed"),
    )
    holder = Holder(
        pid=row["pid"],
        host=backend.client,
        actor=backend.user if row["pid"] is not None else backend.label,
        session=backend.application or None,
        operation=backend.query,
    )
    blocked_by = tuple(int(pid) for pid in row["blocked_by"] or ())
    return backend, holder, blocked_by, tuple(sorted(waiters_of.get(holder_key, ())))


class Waits(NamedTuple):
    """Who waits on whom, from every row of one poll: a slice of the rows needs it
    to know which of its locks someone waits on."""

    # (holder, target) -> sessions waiting on that holder for that very lock
    here: dict[tuple[int | str, str], list[int]]
    # holder -> every session waiting on it, whatever for
    of: dict[int | str, set[int]]
    # target -> gids of prepared transactions holding it
    prepared: dict[str, list[str]]
    # target -> sessions waiting for it (a blocker among them is queued ahead, not holding)
    queued: dict[str, set[int]] | None = None
    # (queue head, target) -> the sessions waiting for that lock on nobody but
    # that head's queued request: a SELECT behind an ALTER TABLE. One that also
    # waits on a holder or on another queued request is not let through by the
    # head's going alone, so it is not counted behind it.
    behind: dict[tuple[int, str], list[int]] | None = None


def index_waits(rows: Sequence[Row]) -> Waits:
    here: dict[tuple[int | str, str], list[int]] = defaultdict(list)
    of: dict[int | str, set[int]] = defaultdict(set)
    prepared: dict[str, list[str]] = defaultdict(list)
    queued: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        if row["pid"] is None and row["prepared_gid"] is not None:
            prepared[_target(row)].append(str(row["prepared_gid"]))
    waiting = [row for row in rows if not row["granted"] and row["pid"] is not None]
    for row in waiting:
        queued[_target(row)].add(int(row["pid"]))
    behind: dict[tuple[int, str], list[int]] = defaultdict(list)
    for row in waiting:
        waiter, target = int(row["pid"]), _target(row)
        blockers = [int(blocker) for blocker in row["blocked_by"] or ()]
        ahead = queued[target]
        # Behind one queued request alone: its cancel lets this waiter through.
        # Behind two (or a holder too), no single cancel does: counted behind none.
        if len(blockers) == 1 and blockers[0] != waiter and blockers[0] in ahead:
            behind[(blockers[0], target)].append(waiter)
        for blocker in row["blocked_by"] or ():
            holders: list[int | str] = [int(blocker)]
            if blocker == 0:  # a prepared transaction: pg_blocking_pids cannot say which
                holders = [f"prepared:{gid}" for gid in prepared.get(target, [])]
            for holder_id in holders:
                here[(holder_id, target)].append(waiter)
                of[holder_id].add(waiter)
    return Waits(dict(here), dict(of), dict(prepared), dict(queued), dict(behind))


def _bounds(
    row: Row, backend: PgBackend, first_seen: datetime
) -> tuple[datetime | None, datetime | None, Literal["session", "transaction"] | None]:
    """A granted lock's bounds: when it was certainly held already, when it was
    acquired at the earliest, and whether it is session- or transaction-level.

    PostgreSQL records no grant time. What is known: the hold existed at
    `first_seen` (what lockwatch saw: `held_since`, kept across polls); a
    transaction-level lock is no older than its transaction, a session-level one
    no older than its session.
    """
    if backend.prepared_gid is not None or (row["pid"] is None):
        return backend.prepared_at, None, "transaction"
    known = first_seen
    level: Literal["session", "transaction"] | None = None
    if row["locktype"] != "advisory":
        level = "transaction"  # every other lock a query takes ends with its transaction
    elif backend.state == "idle":
        level = "session"  # no transaction, and the lock is still held
    elif backend.xact_start is not None and known < backend.xact_start - JITTER:
        level = "session"  # held before this transaction began: it outlived another
    after = backend.backend_start
    if level == "transaction" and backend.xact_start is not None:
        after = backend.xact_start
    return known, after, level


def to_locks(
    rows: Sequence[Row],
    sessions: Mapping[int, Row],
    *,
    server: str,
    polled_at: datetime,
    idle_after: float,
    names: AdvisoryNames = NO_NAMES,
    all_rows: bool = False,
    waits: Waits | None = None,
    seen: Mapping[SeenKey, datetime] | None = None,
    clients: Mapping[int, PgClient | None] | None = None,
    monitor_role: str | None = None,
    entries: list[Entry] | None = None,
) -> list[Lock]:
    """One Lock per row of interest, in the rows' order.

    Kept: waiting rows, advisory locks, and the rows of blockers that someone
    actually waits on (same lock target); with `all_rows`, everything. `sessions`
    are the poll's pg_stat_activity rows by pid. `waits` must come from all the
    poll's rows when `rows` is only a slice of them. `seen`: when the source first
    saw each hold (earlier polls; `polled_at` for one it had not seen); `clients`:
    the client processes found on this host, by backend pid.

    `entries` (a listing's records): a granted lock that only its id, name, mode,
    database and key tell from an earlier one of its session (nobody waits on
    it; same lock type, same bounds: the same verdict, `evaluate_all`'s
    share_key) is not built; `entries` gets, for each row of interest in order,
    its lock's index in the answer, or a `Follower` of such a lock.
    """
    poll = _Poll(
        server, polled_at, sessions, names, seen or {},
        index_waits(rows) if waits is None else waits, idle_after, {}, {},
    )  # fmt: skip
    clients = clients or {}
    waits_here, waiters_of = poll.waits.here, poll.waits.of
    # A session often holds many locks (80 advisory locks on a pooled connection):
    # its backend, holder and blockers are built once and shared by its records.
    built: dict[int | str, _Session] = {}
    locks: list[Lock] = []
    leaders: dict[tuple[Any, ...], int] = {}
    read = row_reader()
    stale = () if all_rows else _stale_rows(rows, poll, clients)
    # With no earlier polls' sightings, a session's locks share its first one.
    since_of = None if poll.seen else poll.since_of
    for index, row in enumerate(rows):
        cols = read(row)
        pid, target, granted, locktype, mode, classid, objid, objsubid, _, database, tf = cols
        holder_key = pid if pid is not None else _holder_key(row)
        granted = bool(granted)
        found = waits_here.get((holder_key, target))
        here = tuple(sorted(set(found))) if found else ()
        if not (all_rows or not granted or locktype == "advisory" or here or index in stale):
            continue
        session = built.get(holder_key)
        activity = sessions.get(pid, _NO_SESSION) if pid is not None else _NO_SESSION
        if session is None:
            session = built[holder_key] = _session(
                row, activity, holder_key, polled_at, waiters_of, clients, monitor_role
            )
        key = None
        if locktype == "advisory" and classid is not None:
            key = AdvisoryKey.from_pg_locks(classid, objid, objsubid)
        first = None
        if granted:
            first = _first(poll, since_of, row, activity, holder_key, pid, target, mode)
        if entries is not None and granted and not here and 0 not in session[2]:
            alike = (holder_key, locktype, first)
            leader = leaders.get(alike)
            if leader is not None:
                name = _lock_name(row, key, names, tf)
                held = pg_id(server, holder_key, target, mode, "held")
                database = database or _session_database(sessions, row)
                entries.append(Follower(leader, held, name, mode, database, key))
                continue
            leaders[alike] = len(locks)
        if entries is not None:
            entries.append(len(locks))
        locks.append(_lock(poll, row, cols, session, here, key, first, holder_key))
    return locks


def _first(
    poll: _Poll,
    since_of: Mapping[int | str, datetime] | None,
    row: Row,
    activity: Row,
    holder_key: int | str,
    pid: Any,
    target: str,
    mode: str,
) -> datetime:
    """When a granted row's hold was first seen: its session's shared first sighting
    when no earlier poll counts (read from the memo), else worked out for the row."""
    first = since_of.get(holder_key) if since_of is not None else None
    if first is None:
        first = _first_seen(poll, row, activity, holder_key, pid, target, mode)
    return first


def _stale_rows(
    rows: Sequence[Row], poll: _Poll, clients: Mapping[int, PgClient | None]
) -> Container[int]:
    """The indexes of the rows a long-idle session holds (kept even when nobody waits)."""
    return stale_idle_rows(rows, poll.sessions, clients, poll.idle_after, poll.seen, poll.waits)


_Bounds = tuple[datetime | None, datetime | None, Literal["session", "transaction"] | None]
_Session = tuple[PgBackend, Holder, tuple[int, ...], tuple[int, ...]]
_NOT_QUEUED: tuple[tuple[int, ...], str | None, tuple[tuple[int, Autovacuum], ...], tuple[int, ...]]
_NOT_QUEUED = ((), None, (), ())


@lean_dataclass(frozen=True, slots=True)
class _Poll:
    """What every row of one to_locks call reads: the poll, and the memos its
    rows fill (a session's first sighting and bounds, worked out once)."""

    server: str
    polled_at: datetime
    sessions: Mapping[int, Row]
    names: AdvisoryNames
    seen: Mapping[SeenKey, datetime]
    waits: Waits
    idle_after: float
    since_of: dict[int | str, datetime]
    bounds_of: dict[tuple[int | str, bool, datetime], _Bounds]


def _lock_name(row: Row, key: AdvisoryKey | None, names: AdvisoryNames, terraform: Any) -> str:
    # An advisory lock is named by its key alone (and the row's `terraform_state`,
    # read with the rest: advisory_name would read the row again). _advisory_named's
    # lines, written out: a call less for each of thousands of advisory locks.
    if key is None:
        return _name(row, key, names)
    if terraform is not None and key.form == "bigint":
        return str(terraform)
    return names.name(key)


def _first_seen(
    poll: _Poll, row: Row, activity: Row, holder_key: int | str, pid: Any, target: str, mode: str
) -> datetime:
    """When a granted hold was first known to exist: what this poll shows is the
    session's (its many locks share it); an earlier poll may have seen it before."""
    first = poll.since_of.get(holder_key)
    if first is None:
        first = poll.since_of[holder_key] = held_since(row, activity, poll.polled_at)
    if poll.seen and pid is not None:
        earlier = poll.seen.get((pid, activity.get("backend_started"), target, mode))
        if earlier is not None and earlier < first:
            first = earlier
    return first


def _wait_start(poll: _Poll, pid: Any, wait_age: Any) -> tuple[datetime | None, datetime | None]:
    """A waiting lock's wait start, and its acquired_at (the same, when the server says)."""
    # Before PostgreSQL 14 there is no waitstart: the query's start bounds it.
    # waitstart is also NULL for a moment after a wait begins.
    if wait_age is not None:
        started = _ago(poll.polled_at, wait_age)
        return started, started
    if pid is not None:
        return _ago(poll.polled_at, poll.sessions.get(pid, _NO_SESSION).get("query_age")), None
    return None, None


def _queue(
    poll: _Poll, pid: Any, target: str, blocked_by: tuple[int, ...]
) -> tuple[tuple[int, ...], str | None, tuple[tuple[int, Autovacuum], ...], tuple[int, ...]]:
    """A waiting lock's queue: the heads it is queued behind (and the first's
    query), the autovacuum workers blocking it, and who is queued behind it."""
    heads: tuple[int, ...] = ()
    head_query = None
    vacuums: tuple[tuple[int, Autovacuum], ...] = ()
    if blocked_by:
        vacuums = _vacuums(blocked_by, poll.sessions)
    queued_for = poll.waits.queued
    if blocked_by and queued_for:
        # Its blockers all wait for this very lock themselves: it is queued
        # behind their requests alone, and waits on no holder.
        waiting_here = queued_for.get(target, ())
        if all(pid and pid in waiting_here for pid in blocked_by):
            heads = blocked_by
            head_query = trim_query(poll.sessions.get(heads[0], _NO_SESSION).get("query"))
    queued_here: tuple[int, ...] = ()
    if pid is not None:
        queued_here = tuple(sorted(set((poll.waits.behind or {}).get((pid, target), ()))))
    return heads, head_query, vacuums, queued_here


def _lock(
    poll: _Poll,
    row: Row,
    cols: tuple[Any, ...],
    session: _Session,
    here: tuple[int, ...],
    key: AdvisoryKey | None,
    first: datetime | None,
    holder_key: int | str,
) -> Lock:
    """A row's Lock: its PgLock facts from the row (`cols`, as read), its session and the poll."""
    pid, target, granted, locktype, mode, _, _, _, wait_age, database, _ = cols
    backend, holder, blocked_by, blocking = session
    known = after = level = None
    if granted:
        assert first is not None
        wait_start = None
        # Once per session, lock kind and first sighting (a call per row costs).
        bounds_key = (holder_key, locktype == "advisory", first)
        bounds = poll.bounds_of.get(bounds_key)
        if bounds is None:
            bounds = poll.bounds_of[bounds_key] = _bounds(row, backend, first)
        known, after, level = bounds
        # Only a prepared transaction's time is known exactly.
        acquired_at = backend.prepared_at
    else:
        wait_start, acquired_at = _wait_start(poll, pid, wait_age)
    heads, head_query, vacuums, queued_here = (
        _NOT_QUEUED if granted else _queue(poll, pid, target, blocked_by)
    )
    prepared = poll.waits.prepared.get(target, ()) if 0 in blocked_by else ()
    pg = PgLock(
        server=poll.server,
        locktype=locktype,
        mode=mode,
        granted=bool(granted),
        # pg_locks has no database for transaction ids: the holder's session has.
        database=database or _session_database(poll.sessions, row),
        backend=backend,
        advisory_key=key,
        wait_start=wait_start,
        blocked_by=blocked_by,
        blocking=blocking,
        blocking_here=here,
        blocked_by_prepared=tuple(prepared),
        known_held_at=known,
        acquired_after=after,
        level=level,
        queue_heads=heads,
        queue_head_query=head_query,
        queued_here=queued_here,
        blocked_by_autovacuum=vacuums,
        idle_after=poll.idle_after,
    )
    return Lock(
        id=pg_id(poll.server, holder_key, target, mode, "held" if granted else "wait"),
        source="postgres",
        format=FORMAT,
        # An advisory lock is named by its key alone: no other column to read.
        name=advisory_name(row, key, poll.names)
        if key is not None
        else _name(row, key, poll.names),
        path=None,
        holder=holder,
        acquired_at=acquired_at,
        content=row,
        facts=pg,
    )
