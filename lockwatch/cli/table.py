"""The plain-text lock table of `lockwatch ls`."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime

import click

from lockwatch.model import columns
from lockwatch.model.lock import Lock
from lockwatch.model.text import terminal_safe
from lockwatch.model.verdict import State, Verdict

STATE_COLOURS = {
    State.ACTIVE: "green",
    State.STALE: "red",
    State.INVALID: "magenta",
    State.WAITING: "yellow",
    State.FREE: "bright_black",
    State.UNKNOWN: "cyan",
}

# The one sanitiser, under the name the CLI's callers know: a lock file's name or
# content must never drive the operator's terminal.
printable = terminal_safe

# STATE to AGE say what the dashboard's table says (model/columns.py).
SHARED = ("state", "format", "name", "holder", "age")
HEADERS = (*(columns.TITLES[key] for key in SHARED), "REASONS", "WHERE")
HOLDER = SHARED.index("holder")
# The widest each column gets: one odd lock (a 10,000-character name or holder)
# never widens every other line. A cell cut to fit ends in "…" (WHERE keeps the
# file's own name: cut in the middle); `-l` prints it whole beneath its row, and
# `--json` always has it whole.
WIDTHS = (7, 24, 32, 40, 16, 48, 120)


def _path(path: str | None, cwd: str) -> str:
    if path is None:
        return "-"
    relative = os.path.relpath(path, cwd)
    return path if relative.startswith("..") else relative


def _where(lock: Lock, cwd: str) -> str:
    # A server, a key, an inode, another host's path: as its facts say it.
    said = None if lock.facts is None else lock.facts.where(lock)
    return said if said is not None else _path(lock.path, cwd)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _clip_middle(text: str, width: int) -> str:
    """`text` cut in its middle: a path keeps its start and its file's name."""
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


def _cells(
    lock: Lock, verdict: Verdict, cwd: str, now: datetime
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(each cell whole, each cut to its column's width), sanitised; a blank is "-"."""
    whole = tuple(
        printable(cell)
        for cell in (
            *(columns.text(key, lock, verdict, now) or "-" for key in SHARED),
            ",".join(dict.fromkeys(verdict.codes)) or "-",
            _where(lock, cwd),
        )
    )
    last = len(HEADERS) - 1
    cut = [(_clip_middle if i == last else _clip)(c, WIDTHS[i]) for i, c in enumerate(whole)]
    # HOLDER is cut as the dashboard cuts it: a session's name keeps both ends.
    said = columns.holder(lock, verdict)
    if said.text:
        cut[HOLDER] = said.fit(WIDTHS[HOLDER])
    return whole, tuple(cut)


def render_table(
    assessed: Sequence[tuple[Lock, Verdict]],
    *,
    long: bool,
    cwd: str,
    now: datetime,
) -> Iterator[str]:
    if not assessed:
        return
    both = [_cells(lock, verdict, cwd, now) for lock, verdict in assessed]
    whole = [cells for cells, _ in both]
    rows = [cut for _, cut in both]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADERS)]

    def line(cells: Sequence[str]) -> str:
        return (
            "  ".join(c.ljust(w) for c, w in zip(cells[:-1], widths, strict=False))
            + "  "
            + cells[-1]
        )

    yield line(HEADERS)
    for row, cells, (_, verdict) in zip(rows, whole, assessed, strict=True):
        state = click.style(
            row[0], fg=STATE_COLOURS[verdict.state], bold=verdict.state is State.STALE
        )
        # Style only the word, after padding, so escape codes cannot skew the columns.
        yield state + line(row)[len(row[0]) :]
        if long:
            for header, cut, cell in zip(HEADERS, row, cells, strict=True):
                if cut != cell:
                    yield f"    {header.lower()}: {cell}"
            for reason in verdict.reasons:
                yield f"    {reason.code}: {printable(reason.message)}"


def summary(
    assessed: Sequence[tuple[Lock, Verdict]],
    places: Sequence[str] = (),
    *,
    failed: bool = False,
    unread: int = 0,
) -> str | None:
    """The closing line: counts by state, or where nothing was found. `failed`:
    a source asked for could not be read (a server down), which its own line
    says; with nothing found anywhere else there is nothing more to say (never
    "Nothing to look at.", which reads as "no locks" when the news is "could
    not connect"). `unread`: places under the PATHs that could not be read (a
    directory lockwatch's user may not list): never "No locks" there."""
    if not assessed:
        if places and unread:
            where = " or ".join(places)
            some = "1 place" if unread == 1 else f"{unread} places"
            return printable(
                f"Nothing found {where} where lockwatch could read; {some} could not be"
                " read (below): locks there are not ruled out."
            )
        if places:
            return printable(f"No locks {' or '.join(places)}.")
        return None if failed else "Nothing to look at."
    counts = Counter(verdict.state for _, verdict in assessed)
    parts = [f"{counts[s]} {s.value}" for s in State if counts[s]]
    noun = "lock" if len(assessed) == 1 else "locks"
    return f"{len(assessed)} {noun}: " + ", ".join(parts)
