"""The smaller pieces around the lock table: the sources line, the events
timeline with its sparklines, the empty state and the help screen."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from time import monotonic
from typing import TYPE_CHECKING, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import RichLog, Sparkline, Static

from lockwatch.model.board import Board
from lockwatch.model.events import Event, EventKind
from lockwatch.model.humanize import duration
from lockwatch.model.query import fields
from lockwatch.model.status import LIVE_STATES, SourceStatus
from lockwatch.model.verdict import State
from lockwatch.sources import registry
from lockwatch.sources.contract import Hint
from lockwatch.ui.keys import Group, Move, help_rows, move_bindings, moved
from lockwatch.ui.safe import clean

_STATUS_MARK = {
    "ok": "●",
    "watching": "●",
    "polling": "●",
    "connected": "●",
    "connecting": "◌",
    "disconnected": "✖",
    "error": "✖",
}


def _status_word(kind: str) -> str:
    """Sources polled over a network: named by kind, and the age of what they showed."""
    source = registry.by_name(kind)
    return source.status_word if source is not None else ""


def status_text(status: SourceStatus, now: datetime) -> Text:
    """`pg app@db:5432/app connected 1s ago`, with the reason when it is unwell."""
    text = Text()
    good = status.state in LIVE_STATES
    mark = _STATUS_MARK.get(status.state, "?")
    text.append(f"{mark} ", style="bold green" if good else "bold red")
    word = _status_word(status.kind)
    text.append(word)
    text.append(clean(status.name), style="bold")
    text.append(f" {status.state}", style="" if good else "bold red")
    if status.partial:
        text.append(" (partial view)", style="bold yellow")
    if status.updated_at is not None and word:
        age = duration(max(0.0, (now - status.updated_at).total_seconds()))
        # When unwell, what is on screen is that old: say so, not when it broke.
        text.append(f" {age} ago" if good else f", showing data from {age} ago")
    if status.reason:
        text.append(f" ({clean(status.reason)})", style="" if good else "red")
    if status.next_retry_at is not None and not good:
        wait = max(0.0, (status.next_retry_at - now).total_seconds())
        text.append(f", retry in {duration(wait)}")
    return text


class SourcesBar(Static):
    """Every source and how it is doing, the counts, and the view's mode."""

    _shown: Text | None = None
    _lines = -1

    DEFAULT_CSS = """
    SourcesBar { height: auto; max-height: 6; background: $panel; padding: 0 1; }
    """

    def show(
        self,
        board: Board,
        now: datetime,
        *,
        shown: int,
        sort: str,
        filter_text: str,
        mode: str | None,
        past: str | None = None,
    ) -> None:
        """`past`: the board is the recorded past; said in place of the sources
        (whose state now is not the board's), so it cannot pass for live."""
        line = Text(no_wrap=False)
        line.append("lockwatch ", style="bold")
        statuses = () if past else board.all_statuses()
        for index, status in enumerate(statuses):
            if index:
                line.append("  ")
            line.append_text(status_text(status, now))
        if past:
            line.append(f" {past} ", style="bold reverse")
        elif not statuses:
            line.append("starting…", style="dim")
        errors = board.all_errors()
        if errors:
            line.append(f"  {len(errors)} unreadable", style="bold red")
        width = self.size.width - self.styles.gutter.width
        counts = _counts_line(board, shown=shown, sort=sort, filter_text=filter_text, mode=mode)
        line.append("\n")
        line.append_text(_fitted(counts, width))
        if line == self._shown:
            return
        # A new height needs a new layout; the same height only a repaint, which
        # keeps the once-a-second update from re-laying out the whole screen. The
        # height is counted as drawn: a status that grows can wrap onto a line of
        # its own (80 columns), and the counts must not be pushed out of view.
        lines = len(line.wrap(self.app.console, width)) if width > 0 else -1
        self.update(line, layout=lines != self._lines)
        self._shown, self._lines = line, lines


# A piece of the counts line, and whether a narrow line may drop it.
_Piece = tuple[Text, bool]


def _counts_line(
    board: Board, *, shown: int, sort: str, filter_text: str, mode: str | None
) -> list[_Piece]:
    """The counts line's pieces, in order; only the sort may be dropped (the
    table's column title marks it too, ▼)."""
    counts = board.counts
    pieces = [(Text(f"{len(board)} lock" if len(board) == 1 else f"{len(board)} locks"), False)]
    for state in (
        State.STALE,
        State.INVALID,
        State.UNKNOWN,
        State.WAITING,
        State.ACTIVE,
        State.FREE,
    ):
        if counts[state]:
            pieces.append((Text(f"{counts[state]} {state.value}"), False))
    if shown != len(board):
        pieces.append((Text(f"({shown} shown)"), False))
    pieces.append((Text(f"sort: {sort}"), True))
    if filter_text:
        pieces.append((Text.assemble("filter: ", (clean(filter_text), "bold")), False))
    if mode:
        pieces.append((Text(mode, style="bold reverse"), False))
    return pieces


def _fitted(pieces: list[_Piece], width: int) -> Text:
    """The pieces two spaces apart, on one line where they fit in `width`: what
    may be dropped is, before the line would wrap, so a count that comes and
    goes ("1 free") never splits `sort: state` nor moves the table a line."""
    line = Text("  ").join(text for text, _ in pieces)
    if width <= 0 or line.cell_len <= width:
        return line
    kept = [text for text, droppable in pieces if not droppable]
    # Still too wide (a filter, a mode): lines break between pieces, never in one.
    lines: list[Text] = [Text()]
    for text in kept:
        if lines[-1].plain and lines[-1].cell_len + 2 + text.cell_len > width:
            lines.append(Text())
        lines[-1] = Text("  ").join([lines[-1], text]) if lines[-1].plain else text.copy()
    return Text("\n").join(lines)


# What the sources tell an empty dashboard is asked again at most this often
# (seconds; /proc is read for it, off the event loop).
HINT_SECONDS = 5.0


class EmptyState(Static):
    """No row to show: why (a filter), or what was looked for and where, each
    watched place's state, and what the sources say they could show that is
    not shown (kernel locks under the roots, a local server), with the flag
    that shows it (contract.Hint)."""

    DEFAULT_CSS = """
    EmptyState {
        height: 1fr; content-align: center middle; text-align: center; color: $text-muted;
        padding: 0 2;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._hints: Sequence[Hint] = ()
        self._asked_at: float | None = None
        self._asking = False
        self._last: tuple[Board, str] | None = None

    def explain(self, board: Board, filter_text: str) -> None:
        self._last = (board, filter_text)
        if len(board) and filter_text:
            self.update(
                Text(
                    f"No lock matches the filter {clean(filter_text)!r} ({len(board)} hidden).\n"
                    "Press / to change it, or escape to clear it."
                )
            )
            return
        self._ask()
        watched = [s for s in board.all_statuses()]
        if not watched:
            self.update("Looking for locks…")
            return
        # Nothing could be read: the news is the failure, not "no locks" (the
        # reasons follow, one line each).
        live = any(status.state in LIVE_STATES for status in watched)
        first = "No locks right now." if live else "Could not look for locks:"
        if any(status.partial for status in watched):
            # Part of what was asked for could not be seen: "no locks" would be a guess.
            first = "No locks that lockwatch may see right now: a source shows only part (below)."
        lines = [first, ""]
        looked = [hint.looked_for for hint in self._hints if hint.looked_for]
        lines += [clean(f"Looked for {what}.") for what in looked]
        if looked:
            lines.append("")
        for status in watched:
            source = registry.by_name(status.kind)
            where = source.title if source is not None else status.kind
            extra = f": {status.reason}" if status.reason else ""
            lines.append(clean(f"{where} {status.name} — {status.state}{extra}"))
        more = [hint.could_show for hint in self._hints if hint.could_show]
        if more:
            lines.append("")
            lines += [clean(f"• {what}") for what in more]
        lines += ["", "New locks appear here as soon as they are written."]
        self.update(Text("\n".join(lines)))

    def _ask(self) -> None:
        """What the sources tell an empty dashboard, asked off the event loop
        (they read /proc), at most every HINT_SECONDS; shown once answered."""
        hints = getattr(self.app, "hints", None)
        now = monotonic()
        if hints is None or self._asking:
            return
        if self._asked_at is not None and now - self._asked_at < HINT_SECONDS:
            return
        self._asking, self._asked_at = True, now

        def ask() -> None:
            try:
                said = tuple(hints())
            except Exception:  # noqa: BLE001 - a hint is a courtesy: never the dashboard's end
                said = ()
            self.app.call_from_thread(self._answered, said)

        self.run_worker(ask, thread=True, group="hints", exit_on_error=False)

    def _answered(self, hints: Sequence[Hint]) -> None:
        self._asking = False
        if tuple(hints) != tuple(self._hints):
            self._hints = hints
            if self._last is not None and self.display:
                self.explain(*self._last)


# A widget to mypy; at run time a plain mixin, since Textual takes a widget's CSS
# (RichLog's, VerticalScroll's) from the chain of its first widget bases.
if TYPE_CHECKING:
    _Scrolling = Widget
else:
    _Scrolling = object


class ScrolledByMoves(_Scrolling):
    """What the movement keys (ui/keys.py's MOVES, bound by each widget: Textual
    reads bindings from widget classes only) move in a scrolling widget: the
    position is its top line. The event log and the help scroll alike."""

    @property
    def position(self) -> int:
        return round(self.scroll_y)

    @property
    def positions(self) -> int:
        return round(self.max_scroll_y) + 1

    @property
    def page(self) -> int:
        return max(1, self.scrollable_content_region.height)

    def action_move(self, move: str) -> None:
        target = moved(Move(move), self.position, self.positions, self.page)
        self.scroll_to(y=target, animate=False, immediate=True)


class EventLog(ScrolledByMoves, RichLog):
    """The events, newest last: followed until the operator scrolls up, and
    followed again once they are back at the end."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(keys, action, show=False) for keys, action in move_bindings()
    ]

    # Whether the newest event is kept in view: until the operator scrolls up,
    # and again once they are back at the end.
    following = True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value < old_value:
            self.following = False
        if new_value >= self.max_scroll_y:
            self.following = True

    def catch_up(self) -> None:
        """Shown again: at the newest event, if it was following."""
        if self.following:
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)


class Activity(Vertical):
    """Counts over the last ten minutes, and what lockwatch saw happen."""

    # Heartbeats are most of the events of a busy fleet: `h` hides them.
    hide_heartbeats = False

    DEFAULT_CSS = """
    Activity { height: 1fr; }
    Activity .sparks { height: 3; }
    Activity .spark { width: 1fr; height: 3; padding: 0 1; }
    Activity .spark Static { height: 1; }
    Activity Sparkline { height: 2; }
    Activity RichLog { height: 1fr; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with Horizontal(classes="sparks"):
            for state in ("active", "stale", "waiting"):
                with Vertical(classes="spark"):
                    yield Static(state, id=f"label-{state}")
                    yield Sparkline([], id=f"spark-{state}", summary_function=max)
        yield Static("", id="events-filter")
        yield EventLog(id="events", max_lines=2000, wrap=False, markup=False, auto_scroll=False)

    def on_mount(self) -> None:
        self.query_one("#events-filter", Static).display = False

    def show_all(self, events: Sequence[Event]) -> None:
        """Write the log again from `events` (the filter changed)."""
        log = self.query_one("#events", EventLog)
        # Emptied, the log is at its end, which would make it follow: as it was.
        follow, top = log.following, log.scroll_y
        log.clear()
        note = self.query_one("#events-filter", Static)
        note.display = self.hide_heartbeats
        note.update(Text("heartbeats hidden (h shows them)", style="dim"))
        log.following = follow
        self.add_events(events)
        if not follow:
            log.call_after_refresh(log.scroll_to, y=top, animate=False, immediate=True)

    def add_events(self, events: Sequence[Event]) -> None:
        log = self.query_one("#events", EventLog)
        follow = log.following
        # Lines dropped from the top past max_lines move the rest up under a
        # reader scrolled up: the view moves back with them (RichLog counts them).
        dropped = log._start_line
        for event in events[-500:]:
            if self.hide_heartbeats and event.kind is EventKind.HEARTBEAT:
                continue
            line = Text()
            line.append(event.at.strftime("%H:%M:%S "), style="dim")
            line.append(f"{event.kind!s:<16}", style="bold")
            line.append(f"{clean(event.name)} ")
            if event.detail:
                line.append(clean(event.detail), style="dim")
            log.write(line, scroll_end=follow)
        dropped = log._start_line - dropped
        if dropped and not follow:
            log.scroll_to(y=max(0.0, log.scroll_y - dropped), animate=False, immediate=True)

    def update_counts(self, board: Board) -> None:
        samples = list(board.samples)
        for state in ("active", "stale", "waiting"):
            values = [float(getattr(sample, state)) for sample in samples]
            self.query_one(f"#spark-{state}", Sparkline).data = values
            now = board.counts[State(state)]
            peak = max(now, int(max(values)) if values else 0)
            self.query_one(f"#label-{state}", Static).update(
                f"{state}: {now} now, {peak} at most (10 min)", layout=False
            )


class HelpScroll(ScrolledByMoves, VerticalScroll):
    """The help's keys, moved in with the movement keys of every list."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(keys, action, show=False) for keys, action in move_bindings()
    ]


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-width: 100%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, replay: bool = False, actions: bool = False) -> None:
        super().__init__()
        self._replay = replay
        self._actions = actions

    def compose(self) -> ComposeResult:
        with HelpScroll():
            yield Static(self._text())

    @property
    def movable(self) -> HelpScroll:
        """What the movement keys move in here."""
        return self.query_one(HelpScroll)

    def _text(self) -> Table:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        grid.add_row(Text("lockwatch keys", style="bold underline"), "")
        groups = [Group.VIEW]
        if self._replay:
            groups.append(Group.REPLAY)
        if self._actions:
            groups.append(Group.ACTION)
        for key, what in help_rows(groups):
            # Text, not markup: "[locks]" says where a key works.
            grid.add_row(Text(key), Text(what))
        grid.add_row("", "")
        grid.add_row(Text("filter fields", style="bold underline"), "")
        for name, what in fields(registry.source_names()).items():
            grid.add_row(f"{name}:", what)
        grid.add_row("", "")
        grid.add_row(
            "states",
            "active, stale, invalid, waiting, free, unknown: written as words, colour is a"
            " second cue",
        )
        grid.add_row("", "escape closes this help")
        return grid
