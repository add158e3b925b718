"""How long a granted PostgreSQL lock has been held, as far as anyone can know:
pg_locks keeps no grant time, so bounds (`at least`, `at most`), in numbers for
the JSON contract and in words for the table, the detail pane and dialogs."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lockwatch.sources.postgres.facts import PgLock


def held_bounds(pg: PgLock, now: datetime) -> tuple[float | None, float | None]:
    """(held at least, held at most) seconds, as far as they are known."""
    least = None if pg.known_held_at is None else max(0.0, (now - pg.known_held_at).total_seconds())
    most = (
        None if pg.acquired_after is None else max(0.0, (now - pg.acquired_after).total_seconds())
    )
    if least is not None and most is not None and most < least:
        most = least  # the two clocks behind them may disagree by the poll's jitter
    return least, most


def held_text(pg: PgLock, now: datetime) -> str:
    """A granted lock's bounds in words, for the detail pane and confirmations:
    `at least 3m12s, at most 2h05m (since its session began); session-level`."""
    least, most = held_bounds(pg, now)
    parts = []
    if least is not None:
        parts.append(f"at least {_floor_text(least)}")
    if most is not None:
        since = "its transaction began" if pg.level == "transaction" else "its session began"
        parts.append(f"at most {_ceil_text(most)} (since {since})")
    text = ", ".join(parts)
    if pg.level is not None and text:
        text += f"; {pg.level}-level"
    return text


def held_cell(pg: PgLock, now: datetime) -> str:
    """A granted lock's age as a 7-cell table column can say it: `≥ 3m12s` once
    lockwatch has seen it held for a second or more (or its session idle that
    long), else `≤ 2h05m` when an upper bound is known; never an exact age. A
    lower bound is rounded down and an upper one up, so both stay true."""
    least, most = held_bounds(pg, now)
    if least is not None and (least >= 1.0 or most is None):
        return f"≥ {_floor_text(least, short=True)}"
    if most is not None:
        return f"≤ {_ceil_text(most, short=True)}"
    return "?"


# A text form's largest unit, in seconds; the unit it is shown to; the unit's name.
_UNITS = ((86400, 3600, "d"), (3600, 60, "h"), (60, 1, "m"))


def _floor_text(seconds: float, short: bool = False) -> str:
    """`seconds` rounded down to what the text shows (duration() truncates)."""
    from lockwatch.model.humanize import duration

    text = duration(seconds)
    if short and len(text) > 5:
        # 26m03s -> 26m: fewer digits, still no more than it was.
        for unit, _, name in _UNITS:
            if seconds >= unit:
                return f"{int(seconds // unit)}{name}"
    return text


def _ceil_text(seconds: float, short: bool = False) -> str:
    """`seconds` rounded up to what the text shows: an upper bound stays one."""
    import math

    from lockwatch.model.humanize import duration

    whole = math.ceil(seconds)
    for unit, shown_to, name in _UNITS:
        if whole >= unit:
            text = duration(math.ceil(whole / shown_to) * shown_to)
            if short and len(text) > 5:
                return f"{math.ceil(whole / unit)}{name}"
            return text
    return duration(whole)
