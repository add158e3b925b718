"""One poll's rows as locks: named locks, InnoDB row-lock waits and metadata-lock
queues, each with the session behind it and who waits on whom.

Pure: rows in (tuples, as PyMySQL returns them), `Lock`s out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.mysql.facts import (
    GET_LOCK,
    INNODB_ROW,
    METADATA_LOCK,
    MyClient,
    MyLock,
    MySession,
)
from lockwatch.sources.mysql.idle import stale_idle
from lockwatch.sources.mysql.lexer import Asked, waited_name
from lockwatch.sources.mysql.queries import MDL_STATES, USER_LOCK_STATE

SOURCE = "mysql"
PREFIX = "mysql"

# The table a statement names first after these words.
_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_TABLE = lazy_compile(
    rf"\b(?:TABLE|FROM|INTO|UPDATE|JOIN|ON)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?({_IDENT}(?:\s*\.\s*{_IDENT})?)",
    re.IGNORECASE,
)
# The tables a statement reads or writes: what a lock error's statement names.
_TABLES = lazy_compile(
    rf"\b(?:TABLES?|FROM|INTO|UPDATE|JOIN)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
    rf"({_IDENT}(?:\s*\.\s*{_IDENT})?)",
    re.IGNORECASE,
)
_DDL = lazy_compile(
    r"^\s*(?:/\*.*?\*/\s*)*(?:ALTER|RENAME|DROP|TRUNCATE|CREATE\s+(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX|OPTIMIZE|REPAIR|LOCK\s+TABLES?)\b",
    re.IGNORECASE | re.DOTALL,
)
# Granted modes a DDL statement holds on its table while it waits to upgrade.
_UPGRADABLE = ("MDL_SHARED_UPGRADABLE", "MDL_SHARED_NO_WRITE", "MDL_SHARED_NO_READ_WRITE")


def lock_id(server: str, kind: str, thread: int, held: bool, target: str) -> str:
    """`mysql:<server>:<kind>:<thread>:<held|wait>:<target>`: stable while the same
    thread holds (or waits for) the same lock, and unique in a server."""
    return f"{PREFIX}:{server}:{kind}:{thread}:{'held' if held else 'wait'}:{target}"


_ID = lazy_compile(
    r"mysql:(?P<server>(?:[^@:/]+@)?(?:unix:/[^:]*|(?:\[[0-9A-Fa-f:.]+\]|[^:/@\[\]]+):\d+))"
    r":(?P<kind>get_lock|innodb_row|metadata_lock|lock_table):(?P<thread>\d+):(?P<state>held|wait):(?P<target>.*)",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class MyId:
    server: str
    kind: str
    thread: int
    held: bool
    target: str


def parse_id(text: str) -> MyId | None:
    match = _ID.fullmatch(text)
    if match is None:
        return None
    return MyId(
        match["server"],
        match["kind"],
        int(match["thread"]),
        match["state"] == "held",
        match["target"],
    )


def _ident(text: str) -> str:
    text = text.strip()
    return text[1:-1].replace("``", "`") if text.startswith("`") else text


def table_of(statement: str | None, database: str | None) -> str | None:
    """`db.table`: the table a statement names first, in its session's database."""
    if not statement:
        return None
    match = _TABLE.search(statement)
    if match is None:
        return None
    parts = [_ident(part) for part in re.split(r"\s*\.\s*(?=[`A-Za-z0-9_$])", match.group(1))]
    if len(parts) == 1:
        return f"{database}.{parts[0]}" if database else None
    return f"{parts[0]}.{parts[1]}"


def tables_in(statement: str) -> list[str]:
    """Every table a statement names, as written (`t` or `db.t`), in order."""
    found = []
    for match in _TABLES.finditer(statement):
        parts = re.split(r"\s*\.\s*(?=[`A-Za-z0-9_$])", match.group(1))
        found.append(".".join(_ident(part) for part in parts))
    return list(dict.fromkeys(found))


def _table(locked: str | None) -> str:
    """`test`.`t` (INNODB_LOCKS's way) as test.t."""
    if not locked:
        return "?"
    return ".".join(_ident(part) for part in re.findall(r"`(?:[^`]|``)+`|[^.`]+", locked))


@dataclass
class Poll:
    """One poll's rows, as the poller read them."""

    server: str
    polled_at: datetime
    processes: Sequence[
        Sequence[Any]
    ]  # ID, USER, HOST, DB, COMMAND, TIME_MS, STATE, INFO, QUERY_ID
    trx: Sequence[Sequence[Any]] | None  # None: hidden (no PROCESS)
    waits: Sequence[Sequence[Any]] | None
    mdl: Sequence[Sequence[Any]] | None  # None: no metadata-lock table to read
    mdl_pending: bool = False  # MySQL 8's metadata_locks shows PENDING requests too
    mdl_from: str = "metadata_lock_info"
    waits_from: str = "innodb_lock_waits"
    used: Mapping[str, int | None] = field(default_factory=dict)  # IS_USED_LOCK by name
    monitor_user: str | None = None
    idle_after: float = 60.0
    seen: Mapping[str, datetime] = field(default_factory=dict)
    # Held locks listed by the last poll, by id: (mode, found_by), to list one
    # again as it was once nobody waits on it (its holder stale: _stale_idle).
    listed: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    clients: Mapping[int, MyClient | None] = field(default_factory=dict)
    # The server's clock less ours: its DATETIMEs are its local time.
    server_offset: timedelta = timedelta(0)


def _server_time(value: Any, offset: timedelta) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return (value - offset).replace(tzinfo=UTC) if value.tzinfo is None else value


class _Builder:
    def __init__(self, poll: Poll) -> None:
        self.poll = poll
        self.now = poll.polled_at
        self.rows = {int(row[0]): row for row in poll.processes}
        self.trx: dict[int, Sequence[Any]] = {int(t[0]): t for t in poll.trx or () if t[0]}
        self.sessions: dict[int, MySession] = {}
        # What an action's compare-and-swap checks, as the server wrote it, per thread.
        self.seen: dict[int, dict[str, Any]] = {}
        self.locks: list[Lock] = []

    def session(self, thread: int) -> MySession:
        found = self.sessions.get(thread)
        if found is not None:
            return found
        row = self.rows.get(thread)
        trx = self.trx.get(thread)
        offset = self.poll.server_offset
        started = _server_time(trx[1], offset) if trx is not None else None
        if row is None:
            session = MySession(
                thread, hidden=True, trx_started=started, monitor_user=self.poll.monitor_user
            )
        else:
            time_ms = row[5]
            since = None if time_ms is None else self.now - timedelta(milliseconds=float(time_ms))
            session = MySession(
                thread,
                user=row[1],
                host=row[2],
                database=row[3],
                command=row[4],
                state=row[6] or None,
                query=row[7],
                state_since=since,
                query_id=None if row[8] is None else int(row[8]),
                trx_started=started,
                trx_state=None if trx is None else trx[2],
                client_process=self.poll.clients.get(thread),
                monitor_user=self.poll.monitor_user,
            )
        self.sessions[thread] = session
        raw = trx[1] if trx is not None else None
        self.seen[thread] = {
            "thread_id": thread,
            "trx_started": raw.strftime("%Y-%m-%d %H:%M:%S") if isinstance(raw, datetime) else None,
            "query_id": session.query_id,
        }
        return session

    def listed_before(self, thread: int) -> list[tuple[MyId, str, str]]:
        """The held locks of `thread` the last poll listed (row and metadata
        locks): (its id, its mode, how it was found), by kind and target."""
        poll, found = self.poll, []
        for ident, (mode, found_by) in poll.listed.items():
            parsed = parse_id(ident)
            if (
                parsed is not None
                and (parsed.server, parsed.thread, parsed.held) == (poll.server, thread, True)
                and parsed.kind in (INNODB_ROW, METADATA_LOCK)
            ):
                found.append((parsed, mode, found_by))
        return sorted(found, key=lambda item: (item[0].kind, item[0].target))

    def add(
        self,
        kind: str,
        thread: int,
        granted: bool,
        target: str,
        name: str,
        mode: str,
        *,
        acquired_ms: float | None = None,
        **facts: Any,
    ) -> None:
        session = self.session(thread)
        ident = lock_id(self.poll.server, kind, thread, granted, target)
        acquired_at = None
        known = None
        if granted:
            if acquired_ms is not None:
                acquired_at = self.now - timedelta(milliseconds=float(acquired_ms))
            else:
                # Held since it was first seen, and since its session went idle.
                known = self.poll.seen.get(ident, self.now)
                if session.idle and session.state_since is not None:
                    known = min(known, session.state_since)
        else:
            # A waiter's age is its wait, where the server says when it began (as
            # PostgreSQL's waiters have it).
            acquired_at = facts.get("wait_start")
        my = MyLock(
            server=self.poll.server,
            kind=kind,
            mode=mode,
            granted=granted,
            session=session,
            target=target,
            known_held_at=known,
            idle_after=self.poll.idle_after,
            **facts,
        )
        holder = Holder(
            host=session.client,
            actor=session.user if not session.hidden else session.label,
            session=session.label,
            operation=session.query,
        )
        self.locks.append(
            Lock(
                id=ident,
                source=SOURCE,
                format=kind,
                name=name,
                path=None,
                holder=holder,
                acquired_at=acquired_at,
                content=self.seen[thread],
                facts=my,
            )
        )


def build(poll: Poll) -> list[Lock]:
    """Every lock of interest in one poll."""
    builder = _Builder(poll)
    _named(builder)
    _innodb(builder)
    _metadata(builder)
    stale_idle(builder)
    return builder.locks


def _waiting(builder: _Builder, states: Iterable[str]) -> list[Sequence[Any]]:
    wanted = set(states)
    rows = [row for row in builder.poll.processes if row[6] in wanted]
    return sorted(rows, key=lambda row: -float(row[5] or 0))  # longest waiter first


def _started(builder: _Builder, row: Sequence[Any]) -> datetime | None:
    return None if row[5] is None else builder.now - timedelta(milliseconds=float(row[5]))


def _named(b: _Builder) -> None:
    poll = b.poll
    holders: dict[str, tuple[int, float | None, str]] = {}
    pending: dict[int, str] = {}  # MySQL 8: the name a waiter asks for, the server's word
    for row in poll.mdl or ():
        if row[3] != "User lock":
            continue
        if poll.mdl_pending and len(row) > 6 and row[6] == "PENDING":
            pending[int(row[0])] = str(row[4])
            continue
        holders[str(row[4])] = (int(row[0]), row[2], poll.mdl_from)
    for name, thread in poll.used.items():
        if thread is not None and name not in holders:
            # metadata_lock_info cuts a name at its first NUL: that row is this lock.
            cut = holders.get(name.partition("\0")[0]) if "\0" in name else None
            if cut is not None and cut[0] == int(thread):
                del holders[name.partition("\0")[0]]
            holders[name] = (int(thread), None, "is_used_lock")
    waiters, unread = _named_waiters(b, holders, pending)
    for name, (thread, ms, found_by) in holders.items():
        b.add(
            GET_LOCK,
            thread,
            True,
            name,
            name,
            "X",
            acquired_ms=ms,
            blocking=tuple(waiters.get(name, ())),
            found_by=found_by,
        )
    for name, threads in waiters.items():
        holder = holders.get(name)
        for thread in threads:
            _named_waiter(b, thread, name, () if holder is None else (holder[0],))
    for thread, why in unread:
        _named_waiter(b, thread, UNREAD_NAME, (), why)


# A waiter whose name its statement does not tell: its id's target and its name.
UNREAD_NAME = "?"


def _named_waiters(
    b: _Builder, holders: Mapping[str, tuple[int, float | None, str]], pending: Mapping[int, str]
) -> tuple[dict[str, list[int]], list[tuple[int, str]]]:
    """Who waits for which name (the server's word, else the statement as MySQL's
    lexer reads it), and the waiters whose name cannot be told, with why."""
    held_by = {name: holder[0] for name, holder in holders.items()}
    waiters: dict[str, list[int]] = {}
    unread: list[tuple[int, str]] = []
    for row in _waiting(b, (USER_LOCK_STATE,)):
        thread = int(row[0])
        asked = pending[thread] if thread in pending else waited_name(row[7], held_by, thread)
        if isinstance(asked, Asked):
            unread.append((thread, asked.why or "its statement does not say"))
        else:
            waiters.setdefault(asked, []).append(thread)
    for thread, name in pending.items():
        if thread not in waiters.get(name, []):
            waiters.setdefault(name, []).append(thread)
    return waiters, unread


def _named_waiter(
    b: _Builder, thread: int, name: str, blockers: tuple[int, ...], unread: str | None = None
) -> None:
    process = b.rows.get(thread)
    b.add(
        GET_LOCK,
        thread,
        False,
        name,
        name,
        "X",
        wait_start=None if process is None else _started(b, process),
        blocked_by=blockers,
        found_by="processlist",
        name_unread=unread,
    )


def _innodb(b: _Builder) -> None:
    poll = b.poll
    if not poll.waits:
        return
    offset = poll.server_offset
    # waiting thread -> (its request, blockers); holder (thread, target) -> waiters
    waiting: dict[int, tuple[Sequence[Any], list[int]]] = {}
    held: dict[tuple[int, str], tuple[Sequence[Any], list[int]]] = {}
    for row in poll.waits:
        waiter, blocker = int(row[0]), int(row[7])
        entry = waiting.setdefault(waiter, (row, []))
        if blocker not in entry[1]:
            entry[1].append(blocker)
        if not row[10]:  # the blocker's lock is granted (not a request queued ahead)
            target = _row_target(row)
            slot = held.setdefault((blocker, target), (row, []))
            if waiter not in slot[1]:
                slot[1].append(waiter)
    for (thread, target), (row, waiters) in held.items():
        started = _server_time(row[8], offset)
        b.add(
            INNODB_ROW,
            thread,
            True,
            target,
            _row_name(row),
            str(row[9]),
            blocking=tuple(sorted(waiters)),
            table=_table(row[4]),
            index=row[5],
            lock_data=None if row[6] is None else str(row[6]),
            found_by=poll.waits_from,
            acquired_after=started,
        )
    for thread, (row, blockers) in waiting.items():
        since = _server_time(row[1], offset)
        process = b.rows.get(thread)
        statement = None if process is None else _started(b, process)
        if statement is not None and (since is None or statement > since):
            since = statement  # the statement began after the truncated wait start
        b.add(
            INNODB_ROW,
            thread,
            False,
            _row_target(row),
            _row_name(row),
            str(row[2]),
            wait_start=since,
            blocked_by=tuple(blockers),
            table=_table(row[4]),
            index=row[5],
            lock_data=None if row[6] is None else str(row[6]),
            found_by=poll.waits_from,
        )


def _row_target(row: Sequence[Any]) -> str:
    data = "" if row[6] is None else str(row[6])
    return f"{_table(row[4])}:{row[5] or ''}:{data}"


def _row_name(row: Sequence[Any]) -> str:
    data = f" ({row[6]})" if row[6] is not None else ""
    index = f" {row[5]}" if row[5] else ""
    return f"{_table(row[4])}{index}{data}"


def _metadata(b: _Builder) -> None:
    waiters = _waiting(b, MDL_STATES)
    granted, pending = _mdl_held_and_pending(b.poll)
    waiting_threads = {int(row[0]) for row in waiters}
    if not waiters and not pending:
        return
    queues = _mdl_queues(waiters, granted, pending)
    for table, queue in queues.items():
        _metadata_queue(b, table, queue, granted.get(table, ()), waiting_threads)


_Granted = dict[str, list[tuple[int, str, float | None]]]


def _mdl_held_and_pending(poll: Poll) -> tuple[_Granted, dict[int, str]]:
    """The table metadata locks granted, by table, and the pending requests
    (MySQL 8), by thread."""
    granted: _Granted = {}
    pending: dict[int, str] = {}
    for row in poll.mdl or ():
        if row[3] != "Table metadata lock" or not row[5]:
            continue
        named = f"{row[4]}.{row[5]}"
        if poll.mdl_pending and len(row) > 6 and row[6] == "PENDING":
            pending[int(row[0])] = named
            continue
        granted.setdefault(named, []).append((int(row[0]), str(row[1]), row[2]))
    return granted, pending


def _mdl_queues(
    waiters: Sequence[Sequence[Any]], granted: _Granted, pending: dict[int, str]
) -> dict[str, list[Sequence[Any]]]:
    """The waiters by the table each waits for: its pending request (MySQL 8), the
    table it holds an upgradable lock on (a DDL statement), or its statement's first."""
    queues: dict[str, list[Sequence[Any]]] = {}
    for row in waiters:
        thread = int(row[0])
        table: str | None = pending.get(thread)
        if table is None:
            table = next(
                (
                    t
                    for t, held in granted.items()
                    for owner, mode, _ in held
                    if owner == thread and mode in _UPGRADABLE
                ),
                None,
            )
        table = table or table_of(row[7], row[3]) or "?"
        queues.setdefault(table, []).append(row)
    return queues


def _metadata_queue(
    b: _Builder,
    table: str,
    queue: list[Sequence[Any]],
    granted: Sequence[tuple[int, str, float | None]],
    waiting_threads: set[int],
) -> None:
    """One table's metadata locks: its holders (`granted`, or suspects), the
    waiters ahead of a DDL head and those queued behind it."""
    head = next((row for row in queue if _DDL.match(row[7] or "")), None)
    holders = [(owner, mode, ms) for owner, mode, ms in granted if owner not in waiting_threads]
    suspected = b.poll.mdl is None and b.poll.trx is not None
    if suspected:
        holders = _suspects(b, queue, waiting_threads)
    holder_threads = tuple(sorted({owner for owner, _, _ in holders}))
    behind = [] if head is None else [r for r in queue if float(r[5] or 0) < float(head[5] or 0)]
    ahead = [r for r in queue if r not in behind]
    for owner, mode, ms in holders:
        b.add(
            METADATA_LOCK,
            owner,
            True,
            table,
            table,
            mode,
            acquired_ms=ms,
            # A suspect blocks nobody for sure: its edges stay out of the trees.
            blocking=() if suspected else tuple(int(r[0]) for r in ahead),
            found_by="suspect" if suspected else b.poll.mdl_from,
            suspected=suspected,
            table=table,
        )
    for row in ahead:
        thread = int(row[0])
        is_head = head is not None and thread == int(head[0])
        b.add(
            METADATA_LOCK,
            thread,
            False,
            table,
            table,
            "MDL_EXCLUSIVE" if is_head else "MDL_SHARED",
            wait_start=_started(b, row),
            blocked_by=holder_threads,
            queued_behind=len(behind) if is_head else 0,
            found_by="processlist",
            suspected=suspected,
            table=table,
        )
    for row in behind:
        assert head is not None
        b.add(
            METADATA_LOCK,
            int(row[0]),
            False,
            table,
            table,
            "MDL_SHARED",
            wait_start=_started(b, row),
            blocked_by=(int(head[0]),),
            queue_head=int(head[0]),
            found_by="processlist",
            table=table,
        )


def _suspects(
    b: _Builder, queue: Sequence[Sequence[Any]], waiting: set[int]
) -> list[tuple[int, str, float | None]]:
    """Without a metadata-lock table: sessions whose transaction began before the
    first waiter began waiting, and that wait for nothing themselves."""
    starts = [_started(b, row) for row in queue]
    first = min((at for at in starts if at is not None), default=None)
    found: list[tuple[int, str, float | None]] = []
    for thread, trx in b.trx.items():
        if thread in waiting or thread not in b.rows or trx[2] == "LOCK WAIT":
            continue
        started = _server_time(trx[1], b.poll.server_offset)
        if first is not None and started is not None and started > first:
            continue
        found.append((thread, "MDL_SHARED_READ?", None))
    return found
