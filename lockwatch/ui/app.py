"""The dashboard: every source's locks, live, in one keyboard-first screen.

Feeds collect in workers and hand change sets to `receive`, on the event loop;
this app applies them to the board and redraws only what they touched. A tick
once a second re-judges the locks whose deadline passed and redraws the rows
on screen, so ages move without anything being read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Input, Static, TabbedContent, TabPane, Tree

from lockwatch.actions.plan import Kind, Plan, describe, tombstone_place
from lockwatch.clock import Clock, SystemClock
from lockwatch.model.board import Applied, Board, ChangeSet
from lockwatch.model.events import Event, EventKind
from lockwatch.model.origin import REMOTE_KIND
from lockwatch.model.query import EVERYTHING, QueryError, parse
from lockwatch.model.rows import Rows
from lockwatch.model.status import SourceStatus
from lockwatch.sources.feed import Feed
from lockwatch.tty import CHECK_SECONDS, exit_soon, hung_up, tty_fd
from lockwatch.ui.confirm import Confirmed, ConfirmScreen, QuitScreen
from lockwatch.ui.contention import ContentionTree
from lockwatch.ui.detail import DetailPane
from lockwatch.ui.keys import KEYS, Group, action_names, keys_of, main_screen_actions
from lockwatch.ui.panels import Activity, EmptyState, EventLog, HelpScreen, SourcesBar
from lockwatch.ui.safe import clean
from lockwatch.ui.table import LockTable, TableHeader
from lockwatch.ui.themes import DEFAULT_THEME, LoadedTheme, load_all, variable_defaults

if TYPE_CHECKING:
    from lockwatch.actions.run import Outcome
    from lockwatch.actions.session import ActionSession

TICK_SECONDS = 1.0
# The exit status when the terminal went away: 128 + SIGHUP, as a shell reports it.
EXIT_HANGUP = 129
# The keys that change something: absent in read-only mode and in replays.
ACTION_KEYS = action_names(Group.ACTION)
# What the Contention view's selected session offers (its lock, its query).
CONTENTION_ACTIONS = ("break_lock", "cancel_query")
DONE_EVENTS = {
    Kind.BREAK: EventKind.BROKEN,
    Kind.STEAL: EventKind.STOLEN,
    Kind.CANCEL: EventKind.QUERY_CANCELLED,
    Kind.RELEASE: EventKind.LET_GO,
}
# The action button's words where the kind's name alone would be unclear.
VERBS = {Kind.CANCEL: "Cancel query"}
MAIN_SCREEN_ONLY = main_screen_actions()
WIDE = 150  # columns from which the detail pane sits beside the table


class Recorder(Protocol):
    def write(self, change: ChangeSet) -> None: ...

    def close(self) -> None: ...


class ReplayControl(Protocol):
    """What the replay keys drive (see sources/recording.py)."""

    @property
    def paused(self) -> bool: ...

    @property
    def speed(self) -> float: ...

    def toggle_pause(self) -> None: ...

    def step(self) -> None: ...

    def faster(self) -> None: ...

    def slower(self) -> None: ...

    def describe(self) -> str: ...


def _bindings(*groups: Group) -> list[BindingType]:
    return [
        Binding(key.keys, key.action, key.label, show=key.footer, priority=key.priority)
        for key in keys_of(*groups)
        if key.action is not None
    ]


class LockwatchApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "lockwatch"
    ENABLE_COMMAND_PALETTE = True

    BINDINGS: ClassVar[list[BindingType]] = _bindings(Group.VIEW, Group.ACTION)

    def __init__(
        self,
        feeds: Sequence[Feed],
        *,
        clock: Clock | None = None,
        host: str,
        theme: str | None = None,
        filter_text: str = "",
        sort: str = "state",
        recorder: Recorder | None = None,
        replay: ReplayControl | None = None,
        export_dir: Path | None = None,
        themes: dict[str, LoadedTheme] | None = None,
        tick_seconds: float = TICK_SECONDS,
        actions: ActionSession | None = None,
        readonly: bool = False,
    ) -> None:
        super().__init__()
        # Break, steal, release and cancel; None (read-only, replays): no action keys.
        self.actions = None if readonly else actions
        self.readonly = readonly
        self.feeds = list(feeds)
        self.clock = clock or SystemClock()
        self.host = host
        self.recorder = recorder
        self.replay = replay
        if export_dir is None:
            from lockwatch.actions.export import default_directory

            export_dir = default_directory()
        self.export_dir = export_dir
        self.tick_seconds = tick_seconds
        self.board = Board(host)
        self.now: datetime = self.clock.now()
        try:
            query = parse(filter_text)
        except QueryError:
            query = EVERYTHING  # the CLI checks --filter before the app starts
        self.rows = Rows(self.board, sort, query)
        self.paused = False
        # Between `/` and enter/escape every key belongs to the filter box, even
        # keys typed ahead in the same burst (a paste, a busy app).
        self._typing_filter = False
        self._abandoned = False  # the terminal went away: leaving
        self._pending: list[ChangeSet] = []
        self._table = LockTable(self.board, self.rows, self.now, id="table")
        self._header = TableHeader(id="table-header")
        self._detail = DetailPane(id="detail")
        self._sources = SourcesBar(id="sources")
        self._empty = EmptyState(id="empty")
        self._activity = Activity(id="activity")
        self._tree = ContentionTree(id="contention")
        self.theme_warnings: list[str] = []
        if themes is None:
            themes, self.theme_warnings = load_all()
        self.lock_themes = themes
        for loaded in themes.values():
            self.register_theme(loaded.theme)
        # The theme is set before the stylesheet is read: it uses $lw-* variables.
        self.theme = theme if theme in themes else DEFAULT_THEME

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "quit" and isinstance(self.screen, ConfirmScreen | QuitScreen):
            return False  # a confirmation is answered with its buttons, never by `q`
        if action in ACTION_KEYS and self.actions is None:
            return False  # read-only: the keys are gone, not merely disabled
        if action in ACTION_KEYS and not self._view_shown("locks"):
            # They act on the table's selection: never from a view that hides it;
            # break and cancel also on the Contention view's selected session.
            return action in CONTENTION_ACTIONS and self._view_shown("contention-tab")
        # Keys of the main screen do nothing behind the help screen or the palette.
        if action == "toggle_heartbeats" and not self._view_shown("events-tab"):
            return False
        if action in MAIN_SCREEN_ONLY:
            return self.screen is self.screen_stack[0]
        return True

    def _target(self) -> str | None:
        """The lock the action keys act on in the view on screen."""
        if self._view_shown("contention-tab"):
            return self._tree.selected_lock
        return self._table.selected

    def _view_shown(self, pane: str) -> bool:
        """Whether the main screen shows the view `pane` (locks, contention-tab, events-tab)."""
        if not self.screen_stack:
            return False
        views = self.screen_stack[0].query("#views").results(TabbedContent)
        return any(view.active == pane for view in views)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual's own themes lack lockwatch's state colours: lend them ours.
        return variable_defaults(self.current_theme.dark)

    # -- layout ------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self._sources
        with TabbedContent(id="views", initial="locks"):
            with TabPane("Locks", id="locks"), Horizontal(id="locks-body"):
                with Vertical(id="table-area"):
                    yield self._header
                    yield self._table
                    yield self._empty
                yield self._detail
            with TabPane("Contention", id="contention-tab"):
                yield self._tree
            with TabPane("Events", id="events-tab"):
                yield self._activity
        with Vertical(id="filter-bar"):
            yield Input(
                value=self.rows.query.text,
                placeholder="filter: text state:stale source:pg !term (enter keeps, esc clears)",
                id="filter",
            )
            yield Static("", id="filter-error")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._detail.display = False
        self.query_one("#filter-bar").display = bool(self.rows.query.text)
        self.query_one("#filter", Input).cursor_blink = False
        self._table.focus()
        self._layout_detail()
        self._redraw_all()
        for feed in self.feeds:
            self._run_feed(feed)
        self.set_interval(self.tick_seconds, self._tick)
        if self.actions is not None:
            self.set_interval(1.0, self._keep_holdings)
        if not self.is_headless:
            self._watch_terminal()
        for warning in self.theme_warnings:
            self.notify(
                markup=False, message=warning, title="theme skipped", severity="warning", timeout=8
            )

    @work(exclusive=False, group="feeds", exit_on_error=False)
    async def _run_feed(self, feed: Feed) -> None:
        try:
            await feed.run(self.receive)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a feed's bug must not take the dashboard down
            reason = clean(f"stopped: {type(exc).__name__}: {exc}")
            self.notify(
                markup=False,
                message=f"{feed.name}: {reason}",
                title="source failed",
                severity="error",
                timeout=15,
            )
            # The header must not go on saying "watching" for a source that stopped.
            statuses = tuple(
                SourceStatus(status.kind, status.name, "error", reason=reason)
                for status in self.board.statuses.get(feed.name, ())
            ) or (SourceStatus("file", feed.name, "error", reason=reason),)
            self.receive(ChangeSet(feed.name, self.clock.now(), statuses))

    def _watch_terminal(self) -> None:
        """Leave when the terminal goes away (SIGHUP, or EIO on the tty for a
        process that ignores SIGHUP), rather than drawing into nothing."""
        fd = tty_fd()
        if fd is not None:

            def check() -> None:
                if hung_up(fd):
                    self._terminal_gone("its tty answers EIO")

            self.set_interval(CHECK_SECONDS, check)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().add_signal_handler(
                signal.SIGHUP, self._terminal_gone, "SIGHUP"
            )

    def _terminal_gone(self, why: str) -> None:
        if self._abandoned:
            return
        self._abandoned = True
        if self.actions is not None:
            # Held locks stay as on a crash; the audit log says which.
            with contextlib.suppress(Exception):
                self.actions.abandon(f"lockwatch's terminal went away ({why})")
        # Nobody sees the screen any more: should putting the terminal back
        # hang on the dead tty, the process still ends within 2 s.
        if not self.is_headless:
            exit_soon(EXIT_HANGUP, 1.5)
        self.exit(return_code=EXIT_HANGUP)

    async def on_unmount(self) -> None:
        for feed in self.feeds:
            with contextlib.suppress(Exception):
                await feed.close()
        if self.recorder is not None:
            self.recorder.close()

    def on_resize(self) -> None:
        self._layout_detail()

    def _layout_detail(self) -> None:
        body = self.query_one("#locks-body", Horizontal)
        body.set_class(self.size.width >= WIDE, "-wide")

    # -- data in -----------------------------------------------------------------

    def receive(self, change: ChangeSet) -> None:
        """A feed's change set: recorded, then applied (or kept while paused)."""
        if self.recorder is not None:
            self.recorder.write(change)
        if self.paused:
            self._pending.append(change)
            self._show_sources()
            return
        try:
            self._show(self.board.apply(change))
        except Exception as exc:  # noqa: BLE001 - one bad change set must not stop its feed
            self.log.error(f"could not apply a change set from {change.feed}: {exc!r}")
            self.notify(
                markup=False,
                message=clean(f"{change.feed}: a change could not be shown: {exc}"),
                severity="error",
                timeout=10,
            )

    def _show(self, applied: Applied) -> None:
        if applied.empty and not applied.events:
            return
        if self.rows.update(applied):
            self._table.reload()
        else:
            self._table.redraw([*applied.changed, *applied.added])
        if applied.events:
            self._activity.add_events(applied.events)
        if applied.removed and self._table.marked:
            self._table.marked.difference_update(applied.removed)
        selected = self._table.selected
        touched = set(applied.changed) | set(applied.added) | set(applied.removed)
        if selected is None or selected in touched:
            self._show_detail()
        self._show_sources()
        self._show_empty()
        self._update_tree()

    def _tick(self) -> None:
        if self.paused:
            return
        self.now = self.clock.now()
        applied = self.board.tick(self.now) if self.board.due(self.now) else Applied()
        self.board.sample(self.now)
        self._show(applied)
        self._table.tick(self.now)
        self._show_sources()
        self._show_detail()
        self._update_tree()
        self._update_counts()

    def _update_counts(self) -> None:
        if self.query_one("#views", TabbedContent).active == "events-tab":
            self._activity.update_counts(self.board)

    def _update_tree(self, force: bool = False) -> None:
        # Only the view on screen is kept current; tab rebuilds it when shown.
        if self.query_one("#views", TabbedContent).active == "contention-tab":
            self._tree.update_from(self.board, self.now, force=force)

    # -- drawing -----------------------------------------------------------------

    def _redraw_all(self) -> None:
        self.now = self.clock.now()
        self._table.now = self.now
        self._header.sort = self.rows.sort
        self._table.reload()
        self._show_sources()
        self._show_empty()
        self._show_detail()
        self._tree.update_from(self.board, self.now, force=True)
        self._activity.update_counts(self.board)

    def _mode(self) -> str | None:
        if self.replay is not None:
            return self.replay.describe()
        parts = []
        if self.paused:
            waiting = len(self._pending)
            parts.append(f"PAUSED — {waiting} update(s) held; p resumes")
        if self.readonly:
            parts.append("READ-ONLY")
        if self._table.marked:
            parts.append(f"{len(self._table.marked)} marked (space)")
        if self._table.held:
            parts.append(f"you hold {len(self._table.held)} lock(s) (r releases)")
        return " · ".join(parts) or None

    def _show_sources(self) -> None:
        if not self._table.hosts and any(
            status.kind == REMOTE_KIND for status in self.board.all_statuses()
        ):
            # Other hosts' locks are (or are about to be) in view: say whose each row is.
            self._table.show_hosts()
            self._header.hosts = True
        self._sources.show(
            self.board,
            self.now,
            shown=len(self.rows),
            sort=self.rows.sort,
            filter_text=self.rows.query.text,
            mode=self._mode(),
        )

    def _show_empty(self) -> None:
        empty = len(self.rows) == 0
        self._empty.display = empty
        self._table.display = not empty
        self._header.display = not empty
        if empty:
            self._empty.explain(self.board, self.rows.query.text)

    def _show_detail(self) -> None:
        if self._detail.display:
            style = self.theme_variables.get(f"lw-{self._selected_state()}", "")
            selected = self._table.selected
            held = selected is not None and selected in self._table.held
            self._detail.show(self.board, selected, self.now, style, held=held)

    def _selected_state(self) -> str:
        selected = self._table.selected
        if selected is None or selected not in self.board:
            return "active"
        return self.board.verdict(selected).state.value

    def on_lock_table_highlighted(self, message: LockTable.Highlighted) -> None:
        self._show_detail()

    def on_tree_node_selected(self, message: Tree.NodeSelected[str | None]) -> None:
        if message.node.data is None:
            message.node.toggle()
        else:
            self.action_details()

    def on_tabbed_content_tab_activated(self, message: TabbedContent.TabActivated) -> None:
        self.refresh_bindings()  # the action keys come and go with the locks view
        if message.pane.id == "events-tab":
            self.query_one("#events", EventLog).catch_up()

    # -- actions -----------------------------------------------------------------

    def action_filter(self) -> None:
        bar = self.query_one("#filter-bar")
        bar.display = True
        # Focus now, not on the next turn (`focus()` is deferred): keys typed
        # ahead in the same burst are already queued and must reach the box.
        self.set_focus(self.query_one("#filter", Input))

    def on_input_changed(self, message: Input.Changed) -> None:
        if message.input.id != "filter":
            return
        error = self.query_one("#filter-error", Static)
        try:
            query = parse(message.value)
        except QueryError as exc:
            error.update(Text(f"✖ {clean(str(exc))}"))
            error.display = True
            return
        error.update("")
        error.display = False
        self.rows.set_query(query)
        self._table.reload()
        self._show_sources()
        self._show_empty()

    async def on_event(self, event: events.Event) -> None:
        if (
            isinstance(event, events.Key)
            and not event.is_forwarded
            and self._route_to_filter(event)
        ):
            return
        await super().on_event(event)

    def _route_to_filter(self, event: events.Key) -> bool:
        """Send `event` to the filter box (True) while the operator types a
        filter. Decided as keys arrive, before any is handled: the keys after
        `/` are already queued when `/` opens the box."""
        if event.key == "ctrl+c":
            return False  # quits, whatever is being typed
        if self._typing_filter:
            if event.key in ("enter", "escape"):
                self._typing_filter = False
                return False
            self.query_one("#filter", Input)._forward_event(event)
            return True
        if (
            event.key == "slash"
            and len(self.screen_stack) == 1
            and not isinstance(self.focused, Input)
        ):
            self._typing_filter = True
        return False

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        if event.widget.id == "filter":
            self._typing_filter = False  # left by a click, say: keys are commands again

    def on_input_submitted(self, message: Input.Submitted) -> None:
        if message.input.id == "filter":
            self.query_one("#filter-bar").display = bool(self.rows.query.text)
            self._table.focus()

    def action_escape(self) -> None:
        filter_input = self.query_one("#filter", Input)
        if filter_input.has_focus or (not self._detail.display and self.rows.query.text):
            filter_input.value = ""
            self.rows.set_query(EVERYTHING)
            self.query_one("#filter-error", Static).display = False
            self.query_one("#filter-bar").display = False
            self._table.focus()
            self._table.reload()
            self._show_sources()
            self._show_empty()
        elif self._detail.display:
            self._detail.display = False

    def action_sort(self) -> None:
        sort = self.rows.next_sort()
        self._header.sort = sort
        self._table.reload()
        self._show_sources()
        self.notify(markup=False, message=f"sorted by {sort}", timeout=2)

    def action_details(self) -> None:
        views = self.query_one("#views", TabbedContent)
        if views.active == "contention-tab":
            lock_id = self._tree.selected_lock
            if lock_id is None:
                return  # a heading: enter folds it (the tree's own key)
            if self.rows.index_of(lock_id) is None:
                self.notify(
                    markup=False,
                    message="that session's lock is hidden by the filter (escape clears it)",
                    severity="warning",
                    timeout=4,
                )
                return
            self._table.select(lock_id)
        if views.active != "locks":
            # From another view, enter means "show me that lock": open, not toggle.
            views.active = "locks"
            self._detail.display = True
            self._table.focus()
        else:
            self._detail.display = not self._detail.display
        self._show_detail()

    def action_next_view(self) -> None:
        views = self.query_one("#views", TabbedContent)
        order = ["locks", "contention-tab", "events-tab"]
        views.active = order[(order.index(views.active) + 1) % len(order)]
        if views.active == "locks":
            self._table.focus()
        elif views.active == "contention-tab":
            self._tree.update_from(self.board, self.now, force=True)
            self._tree.to_first_session()
            self._tree.focus()
        else:
            self._activity.update_counts(self.board)
            self.set_focus(self.query_one("#events"))

    def action_toggle_heartbeats(self) -> None:
        self._activity.hide_heartbeats = not self._activity.hide_heartbeats
        self._activity.show_all(list(self.board.events))

    def action_pause(self) -> None:
        if self.replay is not None:
            self.replay.toggle_pause()
            self._show_sources()
            return
        self.paused = not self.paused
        if not self.paused:
            pending, self._pending = self._pending, []
            applied = Applied()
            for change in pending:
                applied.merge(self.board.apply(change))
            self.now = self.clock.now()
            self._show(applied)
            self._table.tick(self.now)
        self._show_sources()

    def action_step(self) -> None:
        if self.replay is not None:
            self.replay.step()

    def action_faster(self) -> None:
        if self.replay is not None:
            self.replay.faster()
            self._show_sources()

    def action_slower(self) -> None:
        if self.replay is not None:
            self.replay.slower()
            self._show_sources()

    def action_next_theme(self) -> None:
        names = sorted(self.lock_themes)
        current = self.theme if self.theme in names else names[0]
        self.theme = names[(names.index(current) + 1) % len(names)]
        self.notify(markup=False, message=f"theme: {self.theme}", timeout=2)

    def watch_theme(self, theme: str) -> None:
        self._table.theme_changed()
        self._show_detail()

    # -- break, steal, release, cancel ---------------------------------------------

    def action_mark(self) -> None:
        selected = self._table.selected
        if selected is None:
            return
        marked = self._table.marked
        if selected in marked:
            marked.discard(selected)
        else:
            marked.add(selected)
        self._table.redraw([selected])
        self._table.action_cursor(1)
        self._show_sources()

    def action_clear_marks(self) -> None:
        if not self._table.marked:
            return
        cleared = list(self._table.marked)
        self._table.marked.clear()
        self._table.redraw(cleared)
        self._show_sources()
        self.notify(markup=False, message=f"{len(cleared)} mark(s) cleared", timeout=3)

    def action_break_lock(self) -> None:
        # In the table's order (those the filter hides last), not the set's.
        order = {lock_id: index for index, lock_id in enumerate(self.rows.ids)}
        marked = sorted(
            (lock_id for lock_id in self._table.marked if lock_id in self.board),
            key=lambda lock_id: (order.get(lock_id, len(order)), lock_id),
        )
        if marked and self._view_shown("locks"):
            self._confirm_bulk(marked)
        else:
            self._confirm(Kind.BREAK)

    def action_steal_lock(self) -> None:
        self._confirm(Kind.STEAL)

    def action_cancel_query(self) -> None:
        self._confirm(Kind.CANCEL)

    def action_release_lock(self) -> None:
        self._confirm(Kind.RELEASE)

    def _plan_for(self, kind: Kind, lock_id: str) -> Plan | None:
        if self.actions is None or lock_id not in self.board:
            return None
        lock = self.board.entries[lock_id].lock
        peers = []
        if lock.pg is not None:
            server = lock.pg.server
            peers = [
                entry.lock
                for entry in self.board.entries.values()
                if entry.lock.pg is not None and entry.lock.pg.server == server
            ]
        return self.actions.plan(kind, lock, self.board.verdict(lock_id), peers)

    def _confirm(self, kind: Kind) -> None:
        selected = self._target()
        if selected is None:
            self.notify(markup=False, message="no lock selected", severity="warning", timeout=3)
            return
        plan = self._plan_for(kind, selected)
        if plan is None:
            self.notify(markup=False, message="that lock is gone", severity="warning", timeout=3)
            return
        if plan.refusal is not None:
            self.notify(
                markup=False,
                message=clean(plan.refusal[1]),
                title=f"cannot {kind.value}",
                severity="error",
                timeout=8,
            )
            return
        lock = plan.lock
        warning = None
        must_type = None
        if plan.needs_name:
            must_type = lock.name
            warning = (
                f"{plan.why_name}. Type its name to {kind.value} it anyway."
                if plan.why_name
                else f"{lock.name} is {plan.verdict.state}, not stale: someone may be using it."
                f" Type its name to {kind.value} it anyway."
            )
        shown = [plan]  # what the dialog shows now: what confirming acts on

        def current() -> tuple[list[tuple[str, str]], str | None]:
            now = self.clock.now()
            if lock.id not in self.board:
                return describe(shown[0]), "the lock is gone since this opened"
            verdict = self.board.verdict_at(lock.id, now)
            if self.actions is not None:
                peers = [entry.lock for entry in self.board.entries.values()]
                shown[0] = self.actions.plan(kind, self.board.entries[lock.id].lock, verdict, peers)
            changed = None
            if verdict.state is not plan.verdict.state:
                changed = (
                    f"changed while open: now {verdict.state.value}, was"
                    f" {plan.verdict.state.value} when this opened"
                )
            return describe(shown[0]), changed

        screen = ConfirmScreen(
            f"{kind.value.capitalize()} {lock.name}?",
            describe(plan),
            verb=VERBS.get(kind, kind.value.capitalize()),
            must_type=must_type,
            warning=warning,
            refresh=current,
        )

        def done(result: Confirmed | None) -> None:
            if result is None:
                self._nothing_done()
                return
            if shown[0].refusal is not None:
                self.notify(
                    markup=False,
                    message=clean(shown[0].refusal[1]),
                    title=f"cannot {kind.value}",
                    severity="error",
                    timeout=8,
                )
                return
            self._execute([shown[0]], result.reason, result.forced)

        self.push_screen(screen, done)

    def _nothing_done(self) -> None:
        self.notify(markup=False, message="cancelled — nothing done", timeout=3)

    def _confirm_bulk(self, marked: list[str]) -> None:
        plans = [plan for lock_id in marked if (plan := self._plan_for(Kind.BREAK, lock_id))]
        if not plans:
            return
        shown = set(self.rows.ids)
        hidden = sum(1 for plan in plans if plan.lock.id not in shown)
        tombstones = tombstone_place(self.actions.tombstone_dir if self.actions else None)
        not_stale = sum(1 for plan in plans if plan.needs_name or plan.refusal)
        lines = [
            ("marked", f"{len(plans)} lock(s)"),
            ("hidden", f"{hidden} of them hidden by the current filter"),
        ]
        if not_stale:
            lines.append(
                (
                    "skipped",
                    f"{not_stale} of them {'is' if not_stale == 1 else 'are'} not stale (or"
                    " cannot be broken): refused and audited; break those one at a time",
                )
            )
        lines.append(
            (
                "effect",
                f"each lock file is renamed into {tombstones} (kept, never deleted); each"
                " Postgres holder is ended with pg_terminate_backend",
            )
        )
        # Marked rows the filter hides first: nobody may break them unawares.
        ordered = sorted(plans, key=lambda plan: plan.lock.id in shown)
        for plan in ordered[:20]:
            name = plan.lock.name + ("" if plan.lock.id in shown else " (hidden)")
            where = plan.lock.path or (plan.lock.pg.server if plan.lock.pg else plan.lock.id)
            lines.append((plan.verdict.state.value, f"{name}  {where}"))
        if len(plans) > 20:
            lines.append(("", f"… and {len(plans) - 20} more"))
        count = str(len(plans))
        screen = ConfirmScreen(
            f"Break {count} marked locks?",
            lines,
            verb="Break all",
            must_type=count,
            must_type_what="the number of marked locks",
            warning="Each lock is checked again (compare-and-swap) and audited on its own.",
        )

        def done(result: Confirmed | None) -> None:
            if result is None:
                self._nothing_done()
            else:
                # The count confirms the batch; it never stands for each lock's name.
                self._execute(plans, result.reason, False)
                self._table.marked.clear()
                self._table.reload()
                self._show_sources()

        self.push_screen(screen, done)

    @work(thread=True, group="actions", exit_on_error=False)
    def _execute(self, plans: list[Plan], reason: str, forced: bool) -> None:
        assert self.actions is not None
        outcomes = [self.actions.run(plan, reason, force=forced) for plan in plans]
        self.call_from_thread(self._report, plans, outcomes)

    def _report(self, plans: list[Plan], outcomes: list[Outcome]) -> None:
        self._sync_held()
        for plan, outcome in zip(plans, outcomes, strict=True):
            # The operator's actions are events too, done or not.
            if outcome.ok:
                self._note(DONE_EVENTS[plan.kind], plan, outcome.message)
            else:
                self._note(EventKind.ACTION_FAILED, plan, f"{plan.kind.value}: {outcome.message}")
        done = [o for o in outcomes if o.ok]
        failed = [o for o in outcomes if not o.ok]
        if len(outcomes) == 1:
            outcome = outcomes[0]
            self.notify(
                markup=False,
                message=clean(outcome.message),
                title="done" if outcome.ok else outcome.event.replace("_", " "),
                severity="information" if outcome.ok and outcome.audited else "error",
                timeout=10,
            )
            return
        summary = f"{len(done)} done, {len(failed)} refused or failed"
        detail = "\n".join(clean(o.message) for o in failed[:5])
        self.notify(
            markup=False,
            message=summary + ("\n" + detail if detail else ""),
            title="bulk break",
            severity="warning" if failed else "information",
            timeout=12,
        )

    def _note(self, kind: EventKind, plan: Plan, detail: str) -> None:
        lock = plan.lock
        event = Event(self.clock.now(), kind, lock.id, lock.name, lock.source, detail)
        self.board.note(event)
        self._activity.add_events([event])

    def _sync_held(self) -> None:
        if self.actions is None:
            return
        held = self.actions.held_ids()
        if held != self._table.held:
            changed = held ^ self._table.held
            self._table.held = held
            self._table.redraw(list(changed))
            self._show_sources()
            self._show_detail()

    def _keep_holdings(self) -> None:
        if self.actions is not None and self.actions.due(self.clock.now()):
            self._heartbeat()

    @work(thread=True, exclusive=True, group="heartbeat", exit_on_error=False)
    def _heartbeat(self) -> None:
        assert self.actions is not None
        lost = self.actions.heartbeat(self.clock.now())
        self.call_from_thread(self._lost, lost)

    def _lost(self, lost: list[str]) -> None:
        self._sync_held()
        for message in lost:
            self.notify(markup=False, message=clean(message), title="lock lost", severity="error")

    async def action_quit(self) -> None:
        if self.actions is None or not self.actions.held_ids():
            self.exit()
            return

        def done(choice: str | None) -> None:
            if choice in ("keep", "release"):
                self._release_and_quit(files=choice == "release")

        self.push_screen(QuitScreen(self.actions.held_names()), done)

    @work(thread=True, exclusive=True, group="actions", exit_on_error=False)
    def _release_and_quit(self, files: bool) -> None:
        """Release what is held (`files`: lock files too; Postgres locks always, as
        they end with lockwatch's sessions), audited, then leave."""
        assert self.actions is not None
        results = self.actions.release_all("released on quitting lockwatch", files=files)
        # Printed once the dashboard is gone: a release that was refused must not go unseen.
        said = "\n".join(clean(result) for result in results)
        self.call_from_thread(self.exit, message=Text(said) if said else None)

    def action_help(self) -> None:
        self.push_screen(
            HelpScreen(replay=self.replay is not None, actions=self.actions is not None)
        )

    def action_export(self) -> None:
        from lockwatch.model.incident import capture

        incident = capture(self.board, self.now, self.host, filter_text=self.rows.query.text)
        self._export(incident)

    @work(thread=True, exclusive=True, group="export")
    def _export(self, incident: object) -> None:
        from lockwatch.actions.export import write_incident
        from lockwatch.model.incident import Incident

        assert isinstance(incident, Incident)
        try:
            json_path, md_path = write_incident(incident, self.export_dir)
        except OSError as exc:
            self.call_from_thread(
                self.notify,
                clean(f"could not write the export: {exc}"),
                severity="error",
                timeout=10,
                markup=False,
            )
            return
        self.call_from_thread(
            self.notify,
            clean(f"{json_path}\n{md_path}", keep_newlines=True),
            title="incident exported",
            timeout=10,
            markup=False,
        )

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """Every action the keys offer here (from the one key table), and
        lockwatch's own themes: not Textual's, which lack its state colours."""
        groups = {Group.VIEW}
        if self.actions is not None:
            groups.add(Group.ACTION)
        if self.replay is not None:
            groups.add(Group.REPLAY)
        for key in KEYS:
            if key.palette is None or key.action is None or key.group not in groups:
                continue
            run = getattr(self, f"action_{key.action}")
            yield SystemCommand(key.palette, f"{key.help} ({key.shown})", run)
        for name in sorted(self.lock_themes):
            yield SystemCommand(
                f"Theme: {name}", "lockwatch's colours for the states", partial(self._use, name)
            )

    def _use(self, theme: str) -> None:
        self.theme = theme


class ReplayApp(LockwatchApp):
    BINDINGS: ClassVar[list[BindingType]] = _bindings(Group.REPLAY)
