"""What each column of the dashboard's lock table says about one lock, at one
instant, and how the columns share the terminal's width.

The columns `lockwatch ls` shows too (STATE, FORMAT, NAME, HOLDER, AGE) and
OPERATION say what `model/columns.py` says; this adds the dashboard's own (SRC,
HEARTBEAT/TTL, WAIT, NOTE). Ages, countdowns and bars are computed here when a
row is drawn, from the lock's own times, so they tick without anything being
collected or judged again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.cells import cell_len, set_cell_size

from lockwatch.model import columns
from lockwatch.model.events import waiters
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.text import terminal_safe
from lockwatch.model.verdict import Verdict
from lockwatch.sources import registry
from lockwatch.sources.contract import LABEL_WIDTH

BAR_BLOCKS = " ▏▎▍▌▋▊▉█"


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    width: int  # 0: takes what is left
    right: bool = False
    priority: int = 0  # dropped first when the terminal is narrow: higher numbers
    # Its text moves with time alone (the others follow the lock and its verdict):
    # the table draws it anew every time and keeps the others between draws.
    timed: bool = False


COLUMNS = (
    # Marked for a bulk action (●), or held by you (★): the table fills it in.
    Column("mark", "", 1),
    Column("state", columns.TITLES["state"], 8),
    Column("source", "SRC", LABEL_WIDTH, priority=4),
    Column("format", columns.TITLES["format"], 14, priority=6),
    Column("name", columns.TITLES["name"], 0),
    Column("holder", columns.TITLES["holder"], 22, priority=1),
    Column("operation", columns.TITLES["operation"], 18, priority=7),
    Column("age", columns.TITLES["age"], 7, right=True, timed=True),
    Column("ttl", "HEARTBEAT/TTL", 14, priority=3, timed=True),
    Column("waiters", "WAIT", 4, right=True, priority=5),
    Column("flags", "NOTE", 18, priority=2),
)
MIN_NAME_WIDTH = 16
# NAME gets at most this much before NOTE and OPERATION grow (to these widths).
NAME_ENOUGH = 24
# NOTE first to where a root blocker's "root · blocks N in total" reads, then
# HOLDER (a session's name, state and query tell its rows apart), then the rest.
GROWS = (("flags", 26), ("holder", 34), ("flags", 44), ("operation", 30))
# Only while other hosts' locks are in view (--remote): the host each row is on.
HOST_COLUMN = Column("host", "HOST", 12)


def layout(width: int, hosts: bool = False) -> list[tuple[Column, int]]:
    """The columns that fit `width` cells (one space between columns) and their widths;
    `hosts`: with the HOST column, after STATE."""
    chosen = list(COLUMNS)
    if hosts:
        chosen.insert(2, HOST_COLUMN)
    while True:
        fixed = sum(c.width for c in chosen if c.width) + len(chosen) - 1
        if width - fixed >= MIN_NAME_WIDTH or all(c.priority == 0 for c in chosen):
            break
        drop = max(chosen, key=lambda c: c.priority)
        chosen.remove(drop)
    widths = {c.key: c.width for c in chosen if c.width}
    fixed = sum(widths.values()) + len(chosen) - 1
    # Past what names need, width goes where text is cut (NOTE, OPERATION),
    # not to empty NAME space.
    spare = width - fixed - NAME_ENOUGH
    for key, most in GROWS:
        if spare <= 0:
            break
        if key in widths and most > widths[key]:
            grow = min(spare, most - widths[key])
            widths[key] += grow
            spare -= grow
    name_width = max(8, width - sum(widths.values()) - (len(chosen) - 1))
    return [(c, widths.get(c.key) or name_width) for c in chosen]


def ttl_left(lock: Lock, now: datetime) -> tuple[float, float] | None:
    """(seconds since the last heartbeat, ttl) when the lock has both."""
    if lock.ttl_seconds is None or lock.ttl_seconds <= 0:
        return None
    since = lock.heartbeat_at or lock.acquired_at
    facts = lock.facts
    if since is None and facts is not None and facts.ttl_to_expiry() and lock.expires_at:
        # A store's TTL (or lease) counts down to the key's expiry.
        left = (lock.expires_at - now).total_seconds()
        return max(0.0, lock.ttl_seconds - left), lock.ttl_seconds
    if since is None:
        return None
    return max(0.0, (now - since).total_seconds()), lock.ttl_seconds


def bar(fraction: float, width: int) -> str:
    """A left-to-right bar `width` cells wide, in eighths of a cell."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (BAR_BLOCKS[part] if part and full < width else "")
    return text.ljust(width)


def ttl_cell(lock: Lock, now: datetime, width: int) -> str:
    left = ttl_left(lock, now)
    if left is None:
        return "—".ljust(width)
    since, ttl = left
    remaining = ttl - since
    label = duration(remaining) if remaining > 0 else "expired"
    bar_width = max(1, width - len(label) - 1)
    # The bar empties as the ttl runs out: full right after a heartbeat.
    return f"{bar(remaining / ttl, bar_width)} {label}"


def waiting(lock: Lock) -> str:
    count = waiters(lock)
    return str(count) if count else ""


def flags(verdict: Verdict) -> str:
    """The reasons that matter most, as their codes: the row's second cue."""
    codes = [c for c in verdict.codes if c not in ("waiting", "heartbeat_late")]
    if "heartbeat_late" in verdict.codes:
        codes.append("late")
    return " ".join(codes)


MARKED = "●"
HELD = "★"
HELD_BY_YOU = "★ held by you"


def cell(key: str, lock: Lock, verdict: Verdict, now: datetime, width: int) -> str:
    if key == "mark":
        return ""
    if key == "source":
        return registry.label(lock.source)
    if key == "host":
        # Another host's lock names its host; the table fills in its own for the rest.
        facts = lock.facts
        return (facts.remote_host() if facts is not None else None) or ""
    if key == "holder":
        # Cut here, where its width is known: a session's name keeps both ends.
        return columns.holder(lock, verdict).fit(width) or "—"
    if key == "age":
        return columns.age(lock, verdict, now) or "?"
    if key in columns.TITLES:
        return columns.text(key, lock, verdict, now)
    if key == "ttl":
        return ttl_cell(lock, now, width)
    if key == "waiters":
        return waiting(lock)
    if key == "flags":
        return flags(verdict)
    raise KeyError(key)


def fit(text: str, width: int, right: bool = False) -> str:
    """Exactly `width` cells: cut with an ellipsis, padded otherwise. Control, bidi
    and invisible characters are spelled out, never sent to the terminal."""
    text = terminal_safe(text)
    size = cell_len(text)
    if size > width:
        return set_cell_size(text, width - 1) + "…" if width > 0 else ""
    pad = " " * (width - size)
    return pad + text if right else text + pad
