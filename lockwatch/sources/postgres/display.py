"""How a PostgreSQL lock reads: its session by name (its application, else its
pid) with its user, state and the start of its query, in the table's HOLDER,
a confirmation's title and the detail pane (its session, its lock and what
ends it, as labelled rows: `PgLock.sections`).

The role is the same on every row of a server more often than not: the
application and what the session is doing tell sessions apart. Pure text: the
views render it through their one sanitiser; query text is scrubbed of secrets
where the backend is built (`PgBackend`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.facts import Row, Section
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.text import one_line, terminal_safe
from lockwatch.model.timestamps import seconds_since
from lockwatch.model.verdict import limit_text
from lockwatch.sources.postgres.held import held_text
from lockwatch.sources.postgres.terms import prepared_commands, sessions

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.sources.postgres.facts import PgBackend, PgClient, PgLock

TITLE = "PostgreSQL"
# How much of a query the HOLDER cell keeps: its start says what it is.
QUERY_SHOWN = 60


def session_name(backend: PgBackend) -> str:
    """A session as the operator names it: its application, else its pid (a
    prepared transaction: its gid). What a confirmation asks to be typed."""
    if backend.prepared_gid is not None:
        return backend.label
    application = terminal_safe(" ".join((backend.application or "").split()))
    if not application and backend.autovacuum is not None:
        # Autovacuum names no application: what it is tells the operator most.
        wraparound = " (to prevent wraparound)" if backend.autovacuum == "wraparound" else ""
        return f"autovacuum{wraparound}"
    return application or f"pid {backend.pid}"


def confirm_word(backend: PgBackend) -> str:
    """What the operator types to confirm ending the session: its application as
    shown, else its pid (the number alone)."""
    name = session_name(backend)
    return name if backend.application and name.strip() else str(backend.pid)


def state_words(backend: PgBackend, now: datetime | None) -> str:
    """`idle in transaction 32s`: its state and for how long (when known)."""
    state = backend.state or ""
    if state and now is not None and backend.state_since is not None:
        return f"{state} {duration(max(0.0, (now - backend.state_since).total_seconds()))}"
    return state


def holder_text(backend: PgBackend) -> str:
    """Who holds it, as events and confirmations name the holder: its session by
    name, pid and user. Steady while the session works (no state, no query)."""
    if backend.prepared_gid is not None:
        return backend.label
    name = session_name(backend)
    about = [] if name.startswith("pid ") else [f"pid {backend.pid}"]
    about += [backend.user] if backend.user else []
    return f"{name} ({', '.join(about)})" if about else name


def holder_cell(backend: PgBackend) -> str:
    """The HOLDER cell: the session by name, its state and the start of its
    query, then its user (often the same on every row, so last, where a narrow
    column cuts): `report-job idle in transaction: UPDATE jobs SET … · reports`."""
    if backend.prepared_gid is not None:
        return backend.label
    state = backend.state or ""
    query = "" if backend.hidden else one_line(backend.query, QUERY_SHOWN)
    doing = f"{state}: {query}" if state and query else state or query
    said = " ".join(part for part in (session_name(backend), doing) if part)
    return f"{said} · {backend.user}" if backend.user else said


def session_title(backend: PgBackend, now: datetime) -> str:
    """`report-job (pid 8527, idle in transaction 32s)`: a session by name, with
    what it is doing."""
    name = session_name(backend)
    about = [] if name.startswith("pid ") else [f"pid {backend.pid}"]
    if name.startswith("pid ") and backend.user:
        about.append(backend.user)
    state = state_words(backend, now)
    about += [state] if state else []
    return f"{name} ({', '.join(about)})" if about else name


def confirm_title(
    lock: Lock, backend: PgBackend, kind: Kind, now: datetime, queued: int = 0
) -> str | None:
    """A confirmation's title: what ending the session does, to whom. `queued`:
    the sessions queued behind a waiting lock's request (a queue head)."""
    # Here, not at the top: listings load this module, and only actions need Kind.
    from lockwatch.model.action import Kind

    if backend.pid is None:
        return None
    session = session_title(backend, now)
    if kind is Kind.BREAK and queued:
        # A queue head's break offers cancelling its statement first (actions.py).
        return f"Unblock the {sessions(queued)} queued behind {session}?"
    if kind is Kind.BREAK:
        return f"Terminate {session}?"
    if kind is Kind.CANCEL:
        return f"Cancel the query of {session}?"
    if kind is Kind.STEAL:
        return f"Steal {lock.name} from {session}?"
    return None


_IDLE_IN_TRANSACTION = ("idle in transaction", "idle in transaction (aborted)")


def activity(lock: Lock, pg: PgLock, now: datetime) -> str:
    """What the session holding (or waiting for) the lock is doing now, said after
    its name in `why`'s next step: `idle in transaction for 1m19s (limit 1m00s),
    running nothing; its client pid 4242 (psql) is alive`."""
    backend = pg.backend
    if backend.prepared_gid is not None:
        return "a prepared transaction: no session works on it, and nothing ends it by itself"
    if backend.hidden:
        return "hidden from lockwatch's role: whether it is at work cannot be read"
    if not pg.granted:
        waited = seconds_since(pg.wait_start, now)
        how_long = f" for {duration(waited)}" if waited is not None else ""
        return f"waiting{how_long} for {pg.mode} on {lock.name}"
    state = backend.state or "in an unknown state"
    idle = seconds_since(backend.state_since, now)
    how_long = f" for {duration(idle)}" if idle is not None else ""
    if state in _IDLE_IN_TRANSACTION or state == "idle":
        limit = pg.idle_after
        against = f" (limit {limit_text(limit)})" if limit is not None else ""
        return f"{state}{how_long}{against}, running nothing; {_client_doing(backend)}"
    if state == "active":
        ran = seconds_since(backend.query_start, now)
        query = one_line(backend.query, QUERY_SHOWN) if backend.query else "a statement"
        return f"running {query}" + (f" for {duration(ran)}" if ran is not None else "")
    return f"{state}{how_long}"


def _client_doing(backend: PgBackend) -> str:
    client = backend.client_process
    if client is None:
        return "its client cannot be seen from this host"
    if not client.alive:
        return f"its client process {client.label} is gone"
    ends = "end its transaction" if backend.state != "idle" else "release it"
    return f"its client process {client.label} is alive and may still {ends}"


def when(at: datetime | None, now: datetime) -> str | None:
    """`2024-05-01 12:00:00 UTC (3m ago)`, as the detail pane says times."""
    if at is None:
        return None
    delta = (now - at).total_seconds()
    stamp = at.strftime("%Y-%m-%d %H:%M:%S UTC")
    if delta >= 0:
        return f"{stamp} ({duration(delta)} ago)"
    return f"{stamp} (in {duration(-delta)})"


def _client(client: PgClient | None) -> str | None:
    if client is None:
        return None
    return f"{client.label}: {'alive' if client.alive else 'gone'}"


def _held(held: tuple[tuple[str, int], ...]) -> str | None:
    if not held:
        return None
    total = sum(count for _, count in held)
    return f"{total} ({', '.join(f'{count} {kind}' for kind, count in held)})"


def _prepared(gid: str | None, database: str | None) -> list[tuple[str, str | None]]:
    """What ends a prepared transaction: the operator runs one of these."""
    if gid is None:
        return []
    commit, rollback = prepared_commands(gid)
    where = f" (in database {database})" if database else ""
    return [("to keep it", f"{commit}{where}"), ("to undo it", f"{rollback}{where}")]


def _autovacuum(backend: PgBackend) -> str | None:
    if backend.autovacuum == "wraparound":
        return "to prevent wraparound: will not yield; cancelling it only restarts it"
    if backend.autovacuum == "plain":
        return "yields: a conflicting lock request cancels it after deadlock_timeout"
    if backend.autovacuum == "hidden":
        return "its query is hidden: whether it is an anti-wraparound one is not known"
    return None


def _rows(rows: Iterable[tuple[str, str | None]]) -> tuple[Row, ...]:
    return tuple((label, value) for label, value in rows if value)


def sections(lock: Lock, pg: PgLock, now: datetime) -> tuple[Section, ...]:
    """The detail pane's PostgreSQL section: the session behind the row and the lock."""
    backend = pg.backend
    rows = _rows(
        [
            ("session", None if backend.pid is None else session_title(backend, now)),
            ("server", pg.server),
            ("lock", f"{pg.locktype} {pg.mode} ({'granted' if pg.granted else 'waiting'})"),
            ("database", pg.database),
            ("advisory key", None if pg.advisory_key is None else str(pg.advisory_key)),
            ("session", backend.label if backend.pid is None else None),
            ("user", backend.user),
            ("application", backend.application),
            ("client", backend.client),
            ("client process", _client(backend.client_process)),
            ("state", backend.state),
            ("in state", when(backend.state_since, now)),
            ("transaction", when(backend.xact_start, now)),
            ("session began", when(backend.backend_start, now)),
            # No grant time is kept for a lock: what is known, as bounds.
            ("held", held_text(pg, now) if pg.granted and not lock.acquired_at else None),
            ("prepared", when(backend.prepared_at, now)),
            *_prepared(backend.prepared_gid, pg.database),
            ("locks held", _held(backend.held)),
            ("waiting since", when(pg.wait_start, now)),
            ("blocked by", ", ".join(str(w) for w in pg.waits_on())),
            ("queued behind it", str(pg.queued_behind) if pg.queued_behind else None),
            ("queued behind", ", ".join(f"pid {pid}" for pid in pg.queue_heads)),
            ("autovacuum", _autovacuum(backend)),
            ("blocking", ", ".join(str(p) for p in pg.blocking)),
            ("query", backend.query),
        ]
    )
    return (Section(TITLE, rows),)
