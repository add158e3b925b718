"""How long a lock whose server keeps no grant time has been held: bounds, as
far as they are known. A server source (PostgreSQL's pg_locks, MySQL's
metadata locks) knows when it first saw the lock held (`known_held_at`) and
that it was taken no earlier than its transaction or session began
(`acquired_after`). Pure arithmetic and words, rounded so that they stay true:
a lower bound down, an upper bound up."""

from __future__ import annotations

import math
from datetime import datetime

from lockwatch.model.humanize import duration


def held_bounds(
    known_held_at: datetime | None, acquired_after: datetime | None, now: datetime
) -> tuple[float | None, float | None]:
    """(held at least, held at most) seconds, as far as they are known."""
    least = None if known_held_at is None else max(0.0, (now - known_held_at).total_seconds())
    most = None if acquired_after is None else max(0.0, (now - acquired_after).total_seconds())
    if least is not None and most is not None and most < least:
        most = least  # the two clocks behind them may disagree by the poll's jitter
    return least, most


def held_cell(least: float | None, most: float | None) -> str:
    """A granted lock's age as a 7-cell table column can say it: `≥ 3m12s` once
    lockwatch has seen it held for a second or more (or its session idle that
    long), else `≤ 2h05m` when an upper bound is known; never an exact age."""
    if least is not None and (least >= 1.0 or most is None):
        return f"≥ {floor_text(least, short=True)}"
    if most is not None:
        return f"≤ {ceil_text(most, short=True)}"
    return "?"


# A text form's largest unit, in seconds; the unit it is shown to; the unit's name.
_UNITS = ((86400, 3600, "d"), (3600, 60, "h"), (60, 1, "m"))


def floor_text(seconds: float, short: bool = False) -> str:
    """`seconds` rounded down to what the text shows (duration() truncates)."""
    text = duration(seconds)
    if short and len(text) > 5:
        # 26m03s -> 26m: fewer digits, still no more than it was.
        for unit, _, name in _UNITS:
            if seconds >= unit:
                return f"{int(seconds // unit)}{name}"
    return text


def ceil_text(seconds: float, short: bool = False) -> str:
    """`seconds` rounded up to what the text shows: an upper bound stays one."""
    whole = math.ceil(seconds)
    for unit, shown_to, name in _UNITS:
        if whole >= unit:
            text = duration(math.ceil(whole / shown_to) * shown_to)
            if short and len(text) > 5:
                return f"{math.ceil(whole / unit)}{name}"
            return text
    return duration(whole)
