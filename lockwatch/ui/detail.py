"""The selected lock, whole: fields, reasons in words, the holder's process, the
raw content, conflicts, and what lockwatch has seen happen to it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from lockwatch.model.blocking import Radius
from lockwatch.model.board import Board
from lockwatch.model.compact import plain
from lockwatch.model.events import Event
from lockwatch.model.holder import pid_here
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.ui.safe import clean, safe

if TYPE_CHECKING:
    from lockwatch.ui.table import Gone

CONTENT_LINES = 200
CONTENT_CHARS = 20_000


def _when(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "—"
    delta = (now - at).total_seconds()
    stamp = at.strftime("%Y-%m-%d %H:%M:%S UTC")
    if delta >= 0:
        return f"{stamp} ({duration(delta)} ago)"
    return f"{stamp} (in {duration(-delta)})"


def _fields(rows: Iterable[tuple[str, Any]]) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for label, value in rows:
        if value is None or value == "" or value == ():
            continue
        grid.add_row(label, value if isinstance(value, Text) else safe(value))
    return grid


def _whole(value: str | None) -> Text | None:
    """An id or a path, folded onto as many lines as it takes, never cut: the
    operator copies it into `lockwatch break`."""
    if value is None:
        return None
    text = safe(value)
    text.overflow = "fold"
    return text


def _heading(title: str) -> Text:
    return Text(f"\n{title}", style="bold underline")


_CONTENT_CACHE: dict[tuple[str, str | None], Text] = {}


def _content(lock: Lock) -> Text:
    """The raw content, pretty-printed once per version of the lock: the pane is
    drawn again every second and a 64 KiB document must not cost that often."""
    key = (lock.id, lock.sha256)
    cached = _CONTENT_CACHE.get(key)
    if cached is None or lock.sha256 is None:
        if len(_CONTENT_CACHE) > 64:
            _CONTENT_CACHE.clear()
        cached = _CONTENT_CACHE[key] = _render_content(lock)
    return cached


def _render_content(lock: Lock) -> Text:
    content = plain(lock.content)
    if content is None:
        return Text("(nothing readable)", style="dim")
    if isinstance(content, str):
        text = content if content else "(empty file)"
    else:
        try:
            text = json.dumps(content, indent=2, ensure_ascii=False, sort_keys=False)
        except (TypeError, ValueError, RecursionError):
            text = repr(content)[:CONTENT_CHARS]
    lines = text.splitlines()
    if len(lines) > CONTENT_LINES:
        text = "\n".join(lines[:CONTENT_LINES]) + f"\n… {len(lines) - CONTENT_LINES} more lines"
    return safe(text, keep_newlines=True)


def describe(
    lock: Lock,
    verdict: Verdict,
    history: Iterable[Event],
    now: datetime,
    state_style: str = "",
    radius: Radius | None = None,
) -> RenderableType:
    """Everything about one lock, as Rich text that never interprets markup in
    what the lock file says."""
    parts: list[RenderableType] = [*_headline(lock, verdict, state_style)]
    parts.append(_heading("Lock"))
    parts.append(_lock_fields(lock, verdict, now))
    parts.append(_heading("Holder"))
    parts.append(_holder_fields(lock, verdict, now))
    parts += _fact_sections(lock, now)
    if radius is not None:
        parts.append(_heading("Blast radius"))
        parts.append(_radius_fields(radius))
    parts.append(_heading("History (since lockwatch started watching)"))
    parts.append(_history(history))
    return Group(*parts)


def _headline(lock: Lock, verdict: Verdict, state_style: str) -> list[RenderableType]:
    """The verdict and the lock's name, then the verdict's reasons."""
    title = Text()
    title.append(f" {verdict.state.value.upper()} ", style=f"reverse {state_style}".strip())
    title.append(" ")
    title.append(clean(lock.name), style="bold")
    reasons = Table.grid(padding=(0, 1))
    reasons.add_column(no_wrap=True, style="bold")
    reasons.add_column()
    for reason in verdict.reasons:
        reasons.add_row(safe(reason.code), safe(reason.message))
    if not verdict.reasons:
        reasons.add_row(Text("ok"), Text("nothing wrong with this lock by its format's rules"))
    return [title, reasons]


def _lock_fields(lock: Lock, verdict: Verdict, now: datetime) -> RenderableType:
    return _fields(
        [
            ("id", _whole(lock.id)),
            ("source", lock.source),
            ("format", lock.format),
            ("path", _whole(lock.path)),
            ("acquired", _when(lock.acquired_at, now) if lock.acquired_at else None),
            ("heartbeat", _when(lock.heartbeat_at, now) if lock.heartbeat_at else None),
            ("ttl", None if lock.ttl_seconds is None else duration(lock.ttl_seconds)),
            (
                "stale at",
                _when(verdict.next_change_at, now) if verdict.next_change_at else None,
            ),
            ("scope", ", ".join(lock.scope)),
            ("conflicts", ", ".join(verdict.conflicts_with)),
            ("sha256", lock.sha256),
        ]
    )


def _holder_fields(lock: Lock, verdict: Verdict, now: datetime) -> RenderableType:
    holder = lock.holder
    process = verdict.process
    alive = {True: "alive", False: "not running", None: "unknown here"}[verdict.alive]
    return _fields(
        [
            ("pid", pid_here(lock, verdict)),
            ("host", holder.host),
            ("actor", holder.actor),
            ("session", holder.session),
            ("operation", holder.operation),
            ("process", alive if holder.pid is not None else None),
            ("command", " ".join(process.cmdline) if process else None),
            ("user", process.user if process else None),
            (
                "started",
                _when(process.started_at, now) if process and process.started_at else None,
            ),
        ]
    )


def _fact_sections(lock: Lock, now: datetime) -> list[RenderableType]:
    """The lock's source's own sections, then its raw content."""
    parts: list[RenderableType] = []
    facts = lock.facts
    if facts is not None:
        for section in facts.sections(lock, now):
            parts.append(_heading(section.title))
            parts.append(
                _fields(
                    (label, _whole(value) if label in section.whole else value)
                    for label, value in section.rows
                )
            )
    # The raw content: a lock file's, or the record another host wrote.
    content = "Content" if facts is None else facts.content_title()
    if content is not None:
        parts.append(_heading(content))
        parts.append(_content(lock))
    return parts


def _radius_fields(radius: Radius) -> RenderableType:
    where = (
        "the root of its chain: ending it frees all of them"
        if radius.root
        else "itself waiting on another session"
    )
    return _fields(
        [
            ("blocks", f"{radius.direct} directly, {radius.total} in total"),
            ("it is", where),
        ]
    )


def _history(history: Iterable[Event]) -> RenderableType:
    """The lock's last 50 events."""
    events = list(history)
    if not events:
        return Text("nothing seen yet", style="dim")
    log = Table.grid(padding=(0, 1))
    log.add_column(no_wrap=True, style="dim")
    log.add_column(no_wrap=True, style="bold")
    log.add_column()
    for event in events[-50:]:
        log.add_row(event.at.strftime("%H:%M:%S"), str(event.kind), safe(event.detail))
    return log


class DetailPane(VerticalScroll):
    """Shows one lock; `show` draws it again (on selection, change, or tick)."""

    DEFAULT_CSS = """
    DetailPane { border-top: solid $primary; padding: 0 1; background: $surface; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._body = Static("", expand=True)
        self.lock_id: str | None = None

    def compose(self):  # type: ignore[no-untyped-def]
        yield self._body

    def show(
        self,
        board: Board,
        lock_id: str | None,
        now: datetime,
        state_style: str = "",
        held: bool = False,
    ) -> None:
        """`held`: lockwatch holds this lock for the operator (a steal)."""
        self.lock_id = lock_id
        if lock_id is None or lock_id not in board:
            self._body.update(Text("No lock selected.", style="dim"))
            return
        lock = board.entries[lock_id].lock
        verdict = board.verdict_at(lock_id, now)
        body = describe(
            lock,
            verdict,
            board.history.get(lock_id, ()),
            now,
            state_style,
            radius=board.blast_radius(lock_id),
        )
        if held:
            body = Group(
                Text(
                    "★ held by you: lockwatch keeps it alive while it runs; r releases it",
                    style="bold",
                ),
                body,
            )
        self._body.update(body)

    def show_gone(
        self, gone: Gone, words: str, board: Board, now: datetime, state_style: str = ""
    ) -> None:
        """The selected lock is gone: it says so, then its last facts (never
        another lock's, which took its row)."""
        self.lock_id = gone.lock_id
        lock = gone.entry.lock
        body = describe(lock, gone.verdict, board.history.get(gone.lock_id, ()), now, state_style)
        heading = Text(f"✖ {words}", style="bold")
        heading.append(
            "\nIts last facts, as seen then; move to pick another lock.", style="not bold"
        )
        self._body.update(Group(heading, Text(""), body))
