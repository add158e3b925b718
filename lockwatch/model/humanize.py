"""Durations as people read them in a table."""

from __future__ import annotations

import math


def duration(seconds: float) -> str:
    """`0s`, `45s`, `2m05s`, `3h07m`, `4d02h`; sub-second values as `0.3s`.

    Never negative: a time in the future (another host's clock, a server's) is
    `0s` here; the verdicts say `clock_skew` where it matters."""
    if not math.isfinite(seconds):
        return "∞"
    sign = ""
    s = max(0.0, seconds)
    if s < 1 and s != 0:
        return f"{sign}{s:.1f}s"
    whole = int(s)
    if whole < 60:
        return f"{sign}{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{sign}{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{sign}{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{sign}{days}d{hours:02d}h"


def counted(count: int, noun: str, many: str | None = None) -> str:
    """`1 thread`, `2 threads` (`many`: an irregular plural)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def named(noun: str, items: list[str] | tuple[str, ...], most: int = 5) -> str:
    """`thread 143`, `threads 143, 150 and 2 more`: a noun said once, in the
    number its items need."""
    shown = ", ".join(items[:most])
    more = f" and {len(items) - most} more" if len(items) > most else ""
    return f"{noun if len(items) == 1 else noun + 's'} {shown}{more}"
