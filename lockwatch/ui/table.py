"""The lock table: a virtual list that draws only the rows on screen.

Rows are keyed by lock id and drawn from the board when they scroll into view,
so 10,000 locks cost what the 40 visible ones cost, a change set redraws only
what it touched, and the once-a-second tick re-renders only the visible rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from lockwatch.model.board import Board
from lockwatch.model.changes import Entry
from lockwatch.model.events import EventKind
from lockwatch.model.query import Query
from lockwatch.model.rows import Rows
from lockwatch.model.verdict import State, Verdict
from lockwatch.ui.cells import HELD, HELD_BY_YOU, MARKED, Column, cell, fit, layout
from lockwatch.ui.keys import Move, move_bindings, moved

STATES = ("active", "stale", "invalid", "waiting", "free", "unknown")
_TEXTS_KEPT = 1024  # rows' fixed cells kept: a few screens' worth
_NOT_BOLD = Style(bold=False)
_NO_WARNINGS: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Gone:
    """The selected lock left the table by itself (its holder let go, or it no
    longer matches the filter): the cursor stays on no lock until the operator
    moves, and the detail pane says what it was, never another lock's facts."""

    lock_id: str
    entry: Entry  # as last drawn
    verdict: Verdict
    at: datetime  # last seen
    # Still on the board, hidden by the filter (its state changed): not gone
    # from the host, only from the view.
    filtered: bool = False


# A row's marks: marked for a bulk action, held by you, root of a chain blocking N.
_Marks = tuple[bool, bool, int]


class TableHeader(Widget):
    """Column titles, with the sort column marked."""

    DEFAULT_CSS = """
    TableHeader {
        height: 1; background: $panel; color: $text; text-style: bold;
        padding-right: 2;  /* over the table's scrollbar gutter */
    }
    """

    sort: reactive[str] = reactive("state")
    # Other hosts' locks are in view: the HOST column is shown.
    hosts: reactive[bool] = reactive(False)

    def render(self) -> str:
        parts = []
        for column, width in layout(self.size.width, self.hosts):
            title = column.title + ("▼" if column.key == _SORT_COLUMN.get(self.sort) else "")
            parts.append(fit(title, width, column.right))
        return " ".join(parts)


_SORT_COLUMN = {"state": "state", "age": "age", "name": "name", "source": "source"}


class LockTable(ScrollView, can_focus=True):
    """Locks, one per row, in the order `rows` keeps."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(keys, action, show=False) for keys, action in move_bindings()
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lock-table--cursor",
        *(f"lock-table--{state}" for state in STATES),
    }
    # State colours come from the theme ($lw-*); the words carry the meaning.
    DEFAULT_CSS = """
    /* A gutter kept for the scrollbar: the columns never shift or hide under it. */
    LockTable {
        height: 1fr; background: $surface; overflow-x: hidden; scrollbar-gutter: stable;
    }
    LockTable > .lock-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    LockTable > .lock-table--active { color: $lw-active; }
    LockTable > .lock-table--stale { color: $lw-stale; text-style: bold; }
    LockTable > .lock-table--invalid { color: $lw-invalid; text-style: bold; }
    LockTable > .lock-table--waiting { color: $lw-waiting; text-style: bold; }
    LockTable > .lock-table--free { color: $lw-free; text-style: dim; }
    LockTable > .lock-table--unknown { color: $lw-unknown; text-style: bold italic; }
    """

    class Highlighted(Message):
        """The cursor moved to another lock (or to none)."""

        def __init__(self, lock_id: str | None) -> None:
            super().__init__()
            self.lock_id = lock_id

    cursor: reactive[int] = reactive(0, always_update=True)

    def __init__(
        self,
        board: Board,
        rows: Rows,
        now: datetime,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.board = board
        self.rows = rows
        self.now = now
        self.selected: str | None = None
        # The selected lock, left by itself (None: the cursor is on `selected`);
        # `cursor` is then where its row was.
        self.gone: Gone | None = None
        # The lock the operator's own action just ended (a break): when it leaves,
        # the cursor goes on to the row that takes its place, not a gone line.
        self._acted: str | None = None
        # The selected lock as last drawn, and the filter then: what `gone` says.
        self._last: tuple[Entry, Verdict] | None = None
        self._query: Query = rows.query
        # Rows marked for a bulk action, and locks lockwatch holds for the operator:
        # the app owns both sets and redraws the rows it changes.
        self.marked: set[str] = set()
        self.held: set[str] = set()
        self._palette: dict[str, Style] | None = None
        self._layout: tuple[int, list[tuple[Column, int]]] | None = None
        self.hosts = False  # with the HOST column (show_hosts)
        # Per lock on screen: its entry and verdict when drawn, and the cells they fix.
        self._texts: dict[
            str,
            tuple[
                Entry, Verdict, list[tuple[Column, int]], list[str | None], tuple[bool, bool, int]
            ],
        ] = {}

    # -- data in ---------------------------------------------------------------

    def reload(self) -> None:
        """The order or the set of rows changed: keep the cursor on its lock, by
        id; when that lock left by itself, on none (`gone`)."""
        rows = self.rows
        self.virtual_size = Size(self.scrollable_content_region.width, len(rows))
        operator_filtered = rows.query is not self._query
        self._query = rows.query
        if self.gone is not None and rows.index_of(self.gone.lock_id) is not None:
            # It came back (written again, matches the filter again): on it again.
            self.selected, self.gone = self.gone.lock_id, None
        index = rows.index_of(self.selected)
        if index is None and self.selected is not None and self.gone is None:
            gone = self._left(self.selected, operator_filtered)
            if gone is not None:
                self.gone, self.selected = gone, None
                self.post_message(self.Highlighted(None))
        if self.gone is not None:
            # Where its row was: the rows after it moved up into the gap.
            self.cursor = min(self.cursor, len(rows))
            self.refresh()
            return
        if index is None:
            index = min(self.cursor, max(0, len(rows) - 1))
        self._set_cursor(index, scroll=False)
        self.refresh()

    def _left(self, lock_id: str, operator_filtered: bool) -> Gone | None:
        """The lock `lock_id`, selected and no longer in the rows, as it was last
        seen, when it left by itself; None when the operator's filter hid it
        (the cursor then moves to the nearest row, as they asked)."""
        entry = self.board.entries.get(lock_id)
        if (entry is not None and operator_filtered) or lock_id == self._acted:
            return None
        last = self._last
        if last is None or last[0].lock.id != lock_id:
            if entry is None:
                return None  # never drawn: nothing to say of it
            last = (entry, self.board.verdict(lock_id))
        at = self.now
        if entry is None:
            # When its feed saw it go (the released event), not the last tick.
            released = [
                e.at for e in self.board.history.get(lock_id, ()) if e.kind is EventKind.RELEASED
            ]
            at = released[-1] if released else at
        else:
            last = (entry, self.board.verdict(lock_id))  # still known: as it is now
        return Gone(lock_id, last[0], last[1], at, filtered=entry is not None)

    def acted_on(self, lock_id: str) -> None:
        """The operator's action on `lock_id` was done: once it leaves (now, or
        already), the cursor is on the next row, where `b` acts again."""
        self._acted = lock_id
        if self.gone is not None and self.gone.lock_id == lock_id and not self.gone.filtered:
            self.gone = None
            self.selected = None
            self._set_cursor(min(self.cursor, max(0, len(self.rows) - 1)), scroll=False)
            self.refresh()

    def remember(self) -> None:
        """Keep the selected lock as drawn now: what the pane says once it is gone."""
        lock_id = self.selected
        entry = None if lock_id is None else self.board.entries.get(lock_id)
        if lock_id is not None and entry is not None:
            self._last = (entry, self.board.verdict(lock_id))

    def redraw(self, lock_ids: list[str]) -> None:
        """Draw again the visible rows among `lock_ids`, nothing else."""
        top = self.scroll_offset.y
        height = self.size.height
        for lock_id in lock_ids:
            index = self.rows.index_of(lock_id)
            if index is not None and top <= index < top + height:
                self.refresh(Region(0, index - top, self.size.width, 1))

    def tick(self, now: datetime) -> None:
        self.now = now
        self.refresh()  # only the visible lines are rendered again

    def theme_changed(self) -> None:
        # Component styles follow the new theme once the stylesheet is applied again.
        def forget() -> None:
            self._palette = None
            self.refresh()

        forget()
        self.call_after_refresh(forget)

    # -- cursor ----------------------------------------------------------------

    def _set_cursor(self, index: int, scroll: bool = True) -> None:
        count = len(self.rows)
        index = max(0, min(index, count - 1)) if count else 0
        selected = self.rows.ids[index] if count else None
        changed = selected != self.selected or self.gone is not None
        self.selected = selected
        self.gone = None
        self.cursor = index
        if scroll and count:
            self.scroll_to_region(Region(0, index, 1, 1), animate=False, immediate=True)
        elif count:
            top = self.scroll_offset.y
            if not top <= index < top + max(1, self.size.height):
                self.scroll_to_region(Region(0, index, 1, 1), animate=False, immediate=True)
        if changed:
            self.remember()
            self.post_message(self.Highlighted(selected))

    def action_cursor(self, delta: int) -> None:
        self._set_cursor(self.cursor + delta)
        self.refresh()

    # -- the movement keys (ui/keys.py's MOVES) --------------------------------

    @property
    def position(self) -> int:
        return self.cursor

    @property
    def positions(self) -> int:
        return len(self.rows)

    @property
    def page(self) -> int:
        return max(1, self.size.height)

    def action_move(self, move: str) -> None:
        self._acted = None  # moved on already
        step = Move(move)
        start = self.cursor
        if self.gone is not None and step in (Move.DOWN, Move.PAGE_DOWN):
            start -= 1  # from the gap its row left: down is the row now there
        self._set_cursor(moved(step, start, len(self.rows), self.page))
        self.refresh()

    def select(self, lock_id: str) -> None:
        index = self.rows.index_of(lock_id)
        if index is not None:
            self._set_cursor(index)
            self.refresh()

    def on_click(self, event: object) -> None:
        y = getattr(event, "y", None)
        if isinstance(y, int):
            self._set_cursor(self.scroll_offset.y + y, scroll=False)
            self.refresh()

    def on_resize(self) -> None:
        self.virtual_size = Size(self.scrollable_content_region.width, len(self.rows))

    # -- drawing ---------------------------------------------------------------

    def _styles(self) -> dict[str, Style]:
        if self._palette is None:
            styles = {
                state: self.get_component_rich_style(f"lock-table--{state}", partial=True)
                for state in STATES
            }
            styles["base"] = self.rich_style
            styles["cursor"] = self.get_component_rich_style("lock-table--cursor")
            self._palette = styles
        return self._palette

    def show_hosts(self) -> None:
        """Other hosts' locks came into view: from now on, a HOST column."""
        if not self.hosts:
            self.hosts = True
            self._layout = None
            self.refresh()

    def _columns(self, width: int) -> list[tuple[Column, int]]:
        if self._layout is None or self._layout[0] != width:
            self._layout = (width, layout(width, self.hosts))
        return self._layout[1]

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        styles = self._styles()
        if index >= len(self.rows) or index < 0:
            return Strip([Segment(" " * width, styles["base"])], width)
        lock_id = self.rows.ids[index]
        entry = self.board.entries.get(lock_id)
        if entry is None:
            return Strip([Segment(" " * width, styles["base"])], width)
        verdict = self.board.verdict(lock_id)
        lock = entry.lock
        state = verdict.state.value
        # Reason codes that are warnings about a live lock, as its facts say them.
        warnings = _NO_WARNINGS if lock.facts is None else lock.facts.warning_codes()
        columns = self._columns(width)
        texts = self._fixed_texts(lock_id, entry, verdict, columns)
        base = styles["base"]
        row_style = base
        if verdict.state is State.STALE or verdict.state is State.INVALID:
            row_style = base + _NOT_BOLD
        # Neighbours of one style travel as one segment: what the terminal shows
        # is the same, and every later step (styles, compositor, output) is per segment.
        segments: list[Segment] = []
        run: list[str] = []
        run_style = row_style
        for number, (column, col_width) in enumerate(columns):
            text = texts[number]
            if text is None:  # moves with time: drawn anew
                text = fit(
                    cell(column.key, lock, verdict, self.now, col_width), col_width, column.right
                )
            key = column.key
            if key == "state" or (key == "flags" and state != "active"):
                style = row_style + styles[state]
            elif key == "flags" and not warnings.isdisjoint(verdict.codes):
                # A live lock with a warning (no_expiry): the warning colour.
                style = row_style + styles["waiting"]
            elif key == "ttl" and state == "stale":
                style = row_style + styles["stale"]
            else:
                style = row_style
            if number:
                if run_style is not row_style and run_style != row_style:
                    segments.append(Segment("".join(run), run_style))
                    run, run_style = [], row_style
                run.append(" ")
            if style is not run_style and style != run_style:
                if run:
                    segments.append(Segment("".join(run), run_style))
                run, run_style = [], style
            run.append(text)
        if run:
            segments.append(Segment("".join(run), run_style))
        strip = Strip(segments).adjust_cell_length(width, row_style)
        if self.gone is not None:
            return strip  # the selected lock is gone: no row stands for it
        if index == self.cursor and self.has_focus_within_app():
            strip = Strip(Segment.apply_style(strip, post_style=styles["cursor"]), width)
        elif index == self.cursor:
            strip = strip.apply_style(Style(underline=True))
        return strip

    def _fixed_texts(
        self, lock_id: str, entry: Entry, verdict: Verdict, columns: list[tuple[Column, int]]
    ) -> list[str | None]:
        """The row's cells that only change with the lock or its verdict, fitted to
        their columns (None for those that move with time), kept while both stay."""
        radius = self.board.blast_radius(lock_id)
        root = radius.total if radius is not None and radius.root else 0
        marks = (lock_id in self.marked, lock_id in self.held, root)
        kept = self._texts.get(lock_id)
        if (
            kept is not None
            and kept[0] is entry
            and kept[1] is verdict
            and kept[2] is columns
            and kept[4] == marks
        ):
            return kept[3]
        lock = entry.lock
        texts: list[str | None] = []
        for column, width in columns:
            if column.timed:
                texts.append(None)
                continue
            if column.key == "mark":
                text = MARKED if marks[0] else HELD if marks[1] else ""
            elif column.key == "holder" and marks[1]:
                text = HELD_BY_YOU
            elif column.key == "flags" and marks[2]:
                # The root of a chain first: what to end to free everybody.
                rest = cell(column.key, lock, verdict, self.now, width)
                chain = f"root · blocks {marks[2]} in total"
                if len(chain) >= width:
                    chain = f"root · blocks {marks[2]}"  # the total, said shorter
                text = chain + (f" · {rest}" if rest else "")
            elif column.key == "host":
                text = cell("host", lock, verdict, self.now, width) or self.board.host
            else:
                text = cell(column.key, lock, verdict, self.now, width)
            texts.append(fit(text, width, column.right))
        if len(self._texts) >= _TEXTS_KEPT:
            self._texts.clear()
        self._texts[lock_id] = (entry, verdict, columns, texts, marks)
        return texts

    def has_focus_within_app(self) -> bool:
        return self.has_focus or not self.screen.focused or self.screen.focused is self
