"""The Locks view: the table of every lock, its details, the filter and marks."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Static

from lockwatch.actions.plan import Kind
from lockwatch.model.events import holder_text
from lockwatch.model.humanize import duration
from lockwatch.model.query import EVERYTHING, QueryError, parse
from lockwatch.sources import registry
from lockwatch.ui.detail import DetailPane
from lockwatch.ui.keys import View
from lockwatch.ui.panels import EmptyState
from lockwatch.ui.safe import clean
from lockwatch.ui.screens.base import Movable, Refresh, ViewScreen, offered, view_bindings
from lockwatch.ui.table import Gone, LockTable, TableHeader

WIDE = 150  # columns from which the detail pane sits beside the table
FILTER_HINT = "filter: text state:stale source:pg !term (enter keeps, esc clears)"


class LocksScreen(ViewScreen):
    VIEW = View.LOCKS
    BINDINGS: ClassVar[list[BindingType]] = view_bindings(View.LOCKS)

    def __init__(self) -> None:
        super().__init__()
        dash = self.dash
        self.table = LockTable(dash.board, dash.rows, dash.now, id="table")
        # One set each, the app's: the header counts them and the actions use them.
        self.table.marked = dash.marks
        self.table.held = dash.held
        self.header = TableHeader(id="table-header")
        # Says so while the selected lock is gone, detail pane open or not.
        self.gone_line = Static("", id="gone-line")
        self.detail = DetailPane(id="detail")
        self.empty = EmptyState(id="empty")
        # Made in `body`: an Input given a value asks for the screen at once.
        # Selected when `/` is typed (see the app's `_route_to_filter`), not when the
        # focus lands: keys typed ahead in a burst are in the box by then, and the
        # next key would replace them all.
        self.filter_input = Input(placeholder=FILTER_HINT, id="filter", select_on_focus=False)

    def body(self) -> ComposeResult:
        with Horizontal(id="locks-body"):
            with Vertical(id="table-area"):
                yield self.gone_line
                yield self.header
                yield self.table
                yield self.empty
            yield self.detail
        with Vertical(id="filter-bar"):
            self.filter_input.value = self.dash.rows.query.text
            yield self.filter_input
            yield Static("", id="filter-error")

    def on_mount(self) -> None:
        self.detail.display = False
        self.gone_line.display = False
        self.query_one("#filter-bar").display = bool(self.dash.rows.query.text)
        self.filter_input.cursor_blink = False
        self.table.focus()
        self._layout_detail()
        super().on_mount()

    def on_resize(self, event: events.Resize) -> None:
        self._layout_detail()

    def _layout_detail(self) -> None:
        self.query_one("#locks-body", Horizontal).set_class(self.size.width >= WIDE, "-wide")

    # -- drawing -------------------------------------------------------------------

    def show_body(self, refresh: Refresh) -> None:
        dash = self.dash
        table = self.table
        if dash.table_hosts and not table.hosts:
            # Other hosts' locks are (or are about to be) in view: say whose each row is.
            table.show_hosts()
            self.header.hosts = True
        applied = refresh.applied
        if applied is None or refresh.reorder:
            table.now = dash.now
            self.header.sort = dash.rows.sort
            table.reload()
        else:
            table.redraw([*applied.changed, *applied.added])
        if refresh.ticked:
            table.tick(dash.now)
        table.remember()
        selected = table.selected
        if (
            applied is None
            or refresh.ticked
            or selected is None
            or selected in {*applied.changed, *applied.added, *applied.removed}
        ):
            self.show_detail()
        empty = len(dash.rows) == 0
        self.empty.display = empty
        table.display = not empty
        self.header.display = not empty
        if empty:
            self.empty.explain(dash.board, dash.rows.query.text)

    def show_rows(self, lock_ids: list[str]) -> None:
        """Only these rows changed (a mark, a ★): redraw them, not the table."""
        self.table.redraw(lock_ids)
        self.show_header()
        self.show_detail()

    def show_detail(self) -> None:
        gone = self.table.gone
        self._show_gone(gone)
        if not self.detail.display:
            return
        dash = self.dash
        if gone is not None:
            state = gone.verdict.state.value
            style = dash.theme_variables.get(f"lw-{state}", "")
            self.detail.show_gone(
                gone, gone_words(gone, dash.rows.query.text, dash.now), dash.board, dash.now, style
            )
            return
        selected = self.table.selected
        state = (
            dash.board.verdict(selected).state.value
            if selected is not None and selected in dash.board
            else "active"
        )
        style = dash.theme_variables.get(f"lw-{state}", "")
        held = selected is not None and selected in dash.held
        self.detail.show(dash.board, selected, dash.now, style, held=held)

    def theme_changed(self) -> None:
        self.table.theme_changed()
        self.show_detail()

    def _show_gone(self, gone: Gone | None) -> None:
        line = self.gone_line
        if gone is None or self.detail.display:  # the open pane says it, first
            if line.display:
                line.display = False
            return
        words = gone_words(gone, self.dash.rows.query.text, self.dash.now)
        text = Text(f"✖ {words}", style="bold")
        text.append(" · move to pick another lock", style="not bold")
        line.update(text)
        line.display = True

    def on_lock_table_highlighted(self, message: LockTable.Highlighted) -> None:
        self.show_detail()
        self.offers_changed()

    def selected_lock(self) -> str | None:
        return self.table.selected

    @property
    def movable(self) -> Movable:
        return self.table

    def selected_kinds(self) -> frozenset[Kind]:
        gone = self.table.gone
        if gone is not None:
            # What it offered: its keys stay, and say it is gone when pressed.
            return offered(gone.entry.lock, gone.verdict)
        return super().selected_kinds()

    def offered_here(self, action: str, kinds: frozenset[Kind]) -> bool:
        if action == "break_lock" and self.dash.marks:
            return True  # b breaks the marked locks, whatever the cursor is on
        return super().offered_here(action, kinds)

    def _refuse_gone(self, kind: Kind | str) -> bool:
        """True (and says why) when the selected lock is gone: nothing is done to
        it, and nothing to the lock that took its row."""
        gone = self.table.gone
        if gone is None:
            return False
        words = gone_words(gone, self.dash.rows.query.text, self.dash.now)
        self.notify(
            markup=False,
            message=f"{words}. Nothing done; move to pick another lock.",
            title=f"cannot {kind}",
            severity="warning",
            timeout=8,
        )
        return True

    def reveal(self, lock_id: str) -> bool:
        """Select `lock_id` and open its details; False when the filter hides it."""
        if self.dash.rows.index_of(lock_id) is None:
            return False
        self.table.select(lock_id)
        self.detail.display = True
        self.table.focus()
        self.show_detail()
        return True

    # -- the filter ----------------------------------------------------------------

    def open_filter(self, *, select: bool = True) -> None:
        self.query_one("#filter-bar").display = True
        if select:
            # What is typed next replaces the filter shown (the cursor keys edit it).
            self.filter_input.select_all()
        # Focus now, not on the next turn (`focus()` is deferred): keys typed
        # ahead in the same burst are already queued and must reach the box.
        self.set_focus(self.filter_input)

    def on_input_changed(self, message: Input.Changed) -> None:
        if message.input is not self.filter_input:
            return
        error = self.query_one("#filter-error", Static)
        try:
            query = parse(message.value, registry.source_names())
        except QueryError as exc:
            error.update(Text(f"✖ {clean(str(exc))}"))
            error.display = True
            return
        error.update("")
        error.display = False
        self.dash.rows.set_query(query)
        self.show()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        if message.input is not self.filter_input:
            return
        if self.query_one("#filter-error", Static).display:
            # The table is filtered by the last filter that parsed, not by what the
            # box says: leaving now would hide that. Fix it, or escape clears it.
            self.app.bell()
            return
        self.query_one("#filter-bar").display = bool(self.dash.rows.query.text)
        self.table.focus()

    def escape(self) -> None:
        rows = self.dash.rows
        if self.filter_input.has_focus or (not self.detail.display and rows.query.text):
            self.filter_input.value = ""
            rows.set_query(EVERYTHING)
            self.query_one("#filter-error", Static).display = False
            self.query_one("#filter-bar").display = False
            self.table.focus()
            self.show()
        elif self.detail.display:
            self.detail.display = False
            self.show_detail()  # a lock gone: the line above the table says it now

    # -- keys ----------------------------------------------------------------------

    def action_sort(self) -> None:
        sort = self.dash.rows.next_sort()
        self.show()
        self.notify(markup=False, message=f"sorted by {sort}", timeout=2)

    def action_details(self) -> None:
        self.detail.display = not self.detail.display
        self.show_detail()

    def action_copy_id(self) -> None:
        gone = self.table.gone
        self.dash.copy_id(gone.lock_id if gone is not None else self.table.selected)

    def action_mark(self) -> None:
        if self._refuse_gone("mark"):
            return
        selected = self.table.selected
        if selected is None:
            return
        marks = self.dash.marks
        if selected in marks:
            marks.discard(selected)
        else:
            marks.add(selected)
        self.table.action_cursor(1)
        self.show_rows([selected])
        self.offers_changed()  # b now breaks the marked locks, or the selected one

    def action_clear_marks(self) -> None:
        marks = self.dash.marks
        if not marks:
            return
        cleared = list(marks)
        marks.clear()
        self.show_rows(cleared)
        self.notify(markup=False, message=f"{len(cleared)} mark(s) cleared", timeout=3)

    def action_break_lock(self) -> None:
        dash = self.dash
        if dash.flow is None:
            return
        # In the table's order (those the filter hides last), not the set's.
        order = {lock_id: index for index, lock_id in enumerate(dash.rows.ids)}
        marked = sorted(
            (lock_id for lock_id in dash.marks if lock_id in dash.board),
            key=lambda lock_id: (order.get(lock_id, len(order)), lock_id),
        )
        if not marked:
            if not self._refuse_gone(Kind.BREAK):
                dash.flow.act(Kind.BREAK, self.table.selected)
            return

        def done() -> None:
            dash.marks.clear()
            self.show()

        dash.flow.act_on_marked(marked, set(dash.rows.ids), done)

    def action_steal_lock(self) -> None:
        self.act_on_selected(Kind.STEAL)

    def action_cancel_query(self) -> None:
        self.act_on_selected(Kind.CANCEL)

    def action_release_lock(self) -> None:
        self.act_on_selected(Kind.RELEASE)


def gone_words(gone: Gone, filter_text: str, now: datetime) -> str:
    """`gone: deploy.lock — last seen 12:00:03 (5s ago), was stale held by 4242@db7`:
    what the selected lock was, since no row stands for it any more."""
    lock = gone.entry.lock
    name = clean(lock.name)
    ago = duration(max(0.0, (now - gone.at).total_seconds()))
    holder = holder_text(lock)
    held = f" held by {clean(holder)}" if holder else ""
    if gone.filtered:
        return (
            f"out of view: {name} no longer matches the filter {clean(filter_text)!r}"
            f" — now {gone.verdict.state.value}{held} (escape clears the filter)"
        )
    return (
        f"gone: {name} — last seen {gone.at.strftime('%H:%M:%S')} ({ago} ago),"
        f" was {gone.verdict.state.value}{held}"
    )
