"""How a MySQL lock reads in the detail pane, and how long a held lock has been
held where the server keeps no grant time (bounds, never a made-up age).

Pure text: the views render the rows through their one sanitiser.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.facts import Row, Section
from lockwatch.model.held import ceil_text, floor_text
from lockwatch.model.held import held_bounds as bounds
from lockwatch.model.held import held_cell as cell
from lockwatch.model.humanize import duration
from lockwatch.model.text import one_line

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.sources.mysql.facts import MyClient, MyLock, MySession

TITLE = "MySQL"
# How much of a statement the HOLDER cell keeps: its start says what it is.
QUERY_SHOWN = 60


def client_words(client: MyClient | None) -> str | None:
    """The process at the session's client end by its command: `mysql (pid 4242)`,
    `gone` where it exited while the thread still holds its locks."""
    if client is None:
        return None
    if client.pid is None:
        return "its client is gone"
    command = client.cmdline[0].rpartition("/")[2] if client.cmdline else ""
    gone = "" if client.alive else ", gone"
    return f"{command} (pid {client.pid}{gone})" if command else f"pid {client.pid}{gone}"


def holder_cell(session: MySession) -> str:
    """The HOLDER cell, as PostgreSQL's reads: the thread, what it is doing (idle
    in transaction, or its command, state and the start of its statement), then
    its account and its client process, which the tree and the JSON name too:
    `thread 142 idle in transaction · root@localhost · mysql (pid 4242)`."""
    query = "" if session.hidden else one_line(session.query, QUERY_SHOWN)
    state = session.state_text
    doing = f"{state}: {query}" if state and query else state or query
    account = "@".join(part for part in (session.user, session.client) if part)
    said = " ".join(part for part in (session.label, doing) if part)
    return " · ".join(
        part for part in (said, account, client_words(session.client_process)) if part
    )


def when(at: datetime | None, now: datetime) -> str | None:
    if at is None:
        return None
    delta = (now - at).total_seconds()
    stamp = at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({duration(delta)} ago)" if delta >= 0 else f"{stamp} (in {duration(-delta)})"


def held_bounds(my: MyLock, now: datetime) -> tuple[float | None, float | None]:
    """(held at least, held at most) seconds, as far as they are known."""
    return bounds(my.known_held_at, my.acquired_after, now)


def held_text(my: MyLock, now: datetime) -> str:
    least, most = held_bounds(my, now)
    parts = []
    if least is not None:
        parts.append(f"at least {floor_text(least)}")
    if most is not None:
        parts.append(f"at most {ceil_text(most)} (since its transaction began)")
    return ", ".join(parts)


def held_cell(my: MyLock, now: datetime) -> str:
    """`≥ 3m12s` once seen held a second or more, else `≤ 2h05m`; never an exact age."""
    return cell(*held_bounds(my, now))


def _rows(rows: Iterable[tuple[str, str | None]]) -> tuple[Row, ...]:
    return tuple((label, value) for label, value in rows if value)


def sections(lock: Lock, my: MyLock, now: datetime) -> tuple[Section, ...]:
    session = my.session
    client = session.client_process
    rows = _rows(
        [
            ("server", my.server),
            ("lock", f"{my.kind} {my.mode} ({'granted' if my.granted else 'waiting'})"),
            ("target", my.target),
            ("table", my.table),
            ("index", my.index),
            ("row", my.lock_data),
            ("found by", my.found_by),
            ("session", session.label),
            ("user", session.user),
            ("client", session.host),
            (
                "client process",
                None
                if client is None
                else f"{client.label}: {'alive' if client.alive else 'gone'}",
            ),
            ("database", session.database),
            ("state", session.state_text),
            ("in state", when(session.state_since, now)),
            ("transaction", when(session.trx_started, now)),
            ("held", held_text(my, now) if my.granted and lock.acquired_at is None else None),
            ("waiting since", when(my.wait_start, now)),
            ("blocked by", ", ".join(f"thread {t}" for t in my.blocked_by)),
            ("blocking", ", ".join(f"thread {t}" for t in my.blocking)),
            ("queued behind", str(my.queued_behind) if my.queued_behind else None),
            ("queue head", None if my.queue_head is None else f"thread {my.queue_head}"),
            ("query id", None if session.query_id is None else str(session.query_id)),
            ("query", session.query),
        ]
    )
    return (Section(TITLE, rows, whole=("session",)),)


def activity(lock: Lock, my: MyLock, now: datetime) -> str:
    """What the thread holding (or waiting for) the lock is doing now, said after
    its name in `why`'s next step: `idle in transaction for 1m19s (limit
    1m00s), running nothing; its client pid 4242 (mariadb) is alive`."""
    session = my.session
    if session.hidden:
        return "hidden from lockwatch's user: whether it is at work cannot be read"
    if not my.granted:
        waited = None if my.wait_start is None else (now - my.wait_start).total_seconds()
        how_long = f" for {duration(waited)}" if waited is not None else ""
        return f"waiting{how_long} for {my.mode} on {my.target}"
    since = session.state_since
    how_long = f" for {duration((now - since).total_seconds())}" if since is not None else ""
    if session.idle:
        limit = my.idle_after
        against = f" (limit {duration(limit)})" if limit is not None else ""
        return f"{session.state_text}{how_long}{against}, running nothing; {_client_doing(my)}"
    query = " ".join((session.query or "").split())
    query = query if len(query) <= 60 else query[:59] + "…"
    return f"running {query or session.state_text or 'a command'}{how_long}"


def _client_doing(my: MyLock) -> str:
    client = my.session.client_process
    if client is None:
        return "its client cannot be seen from this host"
    if not client.alive:
        return f"its client process {client.label} is gone"
    ends = "end its transaction" if my.session.trx_started is not None else "release it"
    return f"its client process {client.label} is alive and may still {ends}"
