"""How a PostgreSQL lock reads in the detail pane: its session, its lock and
what ends it, as labelled rows (`PgLock.sections`).

Pure text: the views render the rows through their one sanitiser.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.facts import Row, Section
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.sources.postgres.held import held_text
from lockwatch.sources.postgres.terms import prepared_commands

if TYPE_CHECKING:
    from lockwatch.sources.postgres.facts import PgClient, PgLock

TITLE = "PostgreSQL"


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


def _rows(rows: Iterable[tuple[str, str | None]]) -> tuple[Row, ...]:
    return tuple((label, value) for label, value in rows if value)


def sections(lock: Lock, pg: PgLock, now: datetime) -> tuple[Section, ...]:
    """The detail pane's PostgreSQL section: the session behind the row and the lock."""
    backend = pg.backend
    rows = _rows(
        [
            ("server", pg.server),
            ("lock", f"{pg.locktype} {pg.mode} ({'granted' if pg.granted else 'waiting'})"),
            ("database", pg.database),
            ("advisory key", None if pg.advisory_key is None else str(pg.advisory_key)),
            ("session", backend.label),
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
            ("blocking", ", ".join(str(p) for p in pg.blocking)),
            ("query", backend.query),
        ]
    )
    return (Section(TITLE, rows),)
