"""How long a granted PostgreSQL lock has been held, as far as anyone can know:
pg_locks keeps no grant time, so bounds (`at least`, `at most`), in numbers for
the JSON contract and in words for the table, the detail pane and dialogs."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.held import ceil_text, floor_text
from lockwatch.model.held import held_bounds as bounds
from lockwatch.model.held import held_cell as cell

if TYPE_CHECKING:
    from lockwatch.sources.postgres.facts import PgLock


def held_bounds(pg: PgLock, now: datetime) -> tuple[float | None, float | None]:
    """(held at least, held at most) seconds, as far as they are known."""
    return bounds(pg.known_held_at, pg.acquired_after, now)


def held_text(pg: PgLock, now: datetime) -> str:
    """A granted lock's bounds in words, for the detail pane and confirmations:
    `at least 3m12s, at most 2h05m (since its session began); session-level`."""
    least, most = held_bounds(pg, now)
    parts = []
    if least is not None:
        parts.append(f"at least {floor_text(least)}")
    if most is not None:
        since = "its transaction began" if pg.level == "transaction" else "its session began"
        parts.append(f"at most {ceil_text(most)} (since {since})")
    text = ", ".join(parts)
    if pg.level is not None and text:
        text += f"; {pg.level}-level"
    return text


def held_cell(pg: PgLock, now: datetime) -> str:
    """A granted lock's age as the table's AGE says it (bounds, never an age)."""
    return cell(*held_bounds(pg, now))
