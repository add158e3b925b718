"""The dashboard: every source's locks, live, in three keyboard-first views.

Feeds collect in workers and hand change sets to `receive`, on the event loop;
this app applies them to the board and redraws only what they touched. A tick
once a second re-judges the locks whose deadline passed and redraws the rows
on screen, so ages move without anything being read again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events, work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.board import Applied, Board
from lockwatch.model.changes import ChangeSet
from lockwatch.model.events import Event
from lockwatch.model.query import EVERYTHING, QueryError, parse
from lockwatch.model.rows import Rows
from lockwatch.model.status import SourceStatus, failure_cause
from lockwatch.sources import registry
from lockwatch.sources.contract import Hint
from lockwatch.sources.feed import Feed
from lockwatch.tty import exit_soon
from lockwatch.ui.confirm import ConfirmScreen, QuitScreen
from lockwatch.ui.controls import Recorder, ReplayControl
from lockwatch.ui.flow import ActionFlow
from lockwatch.ui.hangup import watch_terminal
from lockwatch.ui.keys import Group, View, app_keys, main_screen_actions
from lockwatch.ui.palette import palette_commands
from lockwatch.ui.panels import HelpScreen
from lockwatch.ui.past import ReaderFactory, TimeTravel
from lockwatch.ui.safe import clean
from lockwatch.ui.screens.base import Refresh, ViewScreen
from lockwatch.ui.screens.contention import ContentionScreen
from lockwatch.ui.screens.events import EventsScreen
from lockwatch.ui.screens.locks import LocksScreen
from lockwatch.ui.themes import DEFAULT_THEME, LoadedTheme, load_all, variable_defaults

if TYPE_CHECKING:
    from lockwatch.actions.session import ActionSession
    from lockwatch.history.api import HistoryObserver

TICK_SECONDS = 1.0
# The exit status when the terminal went away: 128 + SIGHUP, as a shell reports it.
EXIT_HANGUP = 129
MAIN_SCREEN_ONLY = main_screen_actions()
# The keys the filter box acts on besides text (editing, moving the cursor).
_FILTER_KEYS = frozenset(
    key.strip()
    for binding in Input.BINDINGS
    if isinstance(binding, Binding)
    for key in binding.key.split(",")
)
SCREENS: dict[View, type[ViewScreen]] = {
    View.LOCKS: LocksScreen,
    View.CONTENTION: ContentionScreen,
    View.EVENTS: EventsScreen,
}


def _bindings(*groups: Group) -> list[BindingType]:
    return [
        Binding(key.keys, key.action, key.label, show=key.footer, priority=key.priority)
        for key in app_keys(*groups)
        if key.action is not None
    ]


class LockwatchApp(TimeTravel, App[None]):
    """Holds the board and what the operator set (filter, sort, marks, pause),
    runs the feeds and the clock, and draws through one path, `show`, into the
    view on screen. Each view is a screen (ui/screens/), switched with tab; the
    actions go through one flow (ui/flow.py)."""

    CSS_PATH = "app.tcss"
    TITLE = "lockwatch"
    ENABLE_COMMAND_PALETTE = True
    DEFAULT_MODE = View.LOCKS.value
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
        hints: Callable[[], Sequence[Hint]] | None = None,
        history: HistoryObserver | None = None,
        history_reader: ReaderFactory | None = None,
        at: datetime | None = None,
    ) -> None:
        """`hints`: what the sources tell an empty dashboard (asked off the loop).
        `history`: the lock history's recorder (None: --no-history, replays);
        `history_reader` opens the history time travel reads, `at` the instant
        the dashboard opens on (None: live)."""
        super().__init__()
        self.history = history
        self.history_reader = history_reader
        self._open_at = at
        self._stopped_said: set[str] = set()  # writers whose stop was said
        self.readonly = readonly
        self.hints = hints
        # Break, steal, release and cancel; None (read-only, replays): no action keys.
        self.actions = None if readonly else actions
        self.flow = None if self.actions is None else ActionFlow(self, self.actions)
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
            query = parse(filter_text, registry.source_names())
        except QueryError:
            query = EVERYTHING  # the CLI checks --filter before the app starts
        self.rows = Rows(self.board, sort, query)
        self.marks: set[str] = set()  # rows marked for a bulk break (space)
        self.held: set[str] = set()  # locks lockwatch holds for the operator (★)
        self.paused = False
        self._pending: list[ChangeSet] = []
        # Between `/` and enter/escape every key belongs to the filter box, even
        # keys typed ahead in the same burst (a paste, a busy app).
        self._typing_filter = False
        self._abandoned = False  # the terminal went away: leaving
        self.views: dict[View, ViewScreen] = {}
        for view, screen_class in SCREENS.items():
            self.add_mode(view.value, partial(self._make_view, view, screen_class))
        self.theme_warnings: list[str] = []
        if themes is None:
            themes, self.theme_warnings = load_all()
        self.lock_themes = themes
        for loaded in themes.values():
            self.register_theme(loaded.theme)
        # The theme is set before the stylesheet is read: it uses $lw-* variables.
        self.theme = theme if theme in themes else DEFAULT_THEME

    def _make_view(self, view: View, screen_class: type[ViewScreen]) -> ViewScreen:
        screen = self.views[view] = screen_class()
        return screen

    @property
    def locks(self) -> LocksScreen:
        """The Locks view (the first: it always exists once the app runs)."""
        screen = self.views[View.LOCKS]
        assert isinstance(screen, LocksScreen)
        return screen

    def view(self) -> ViewScreen | None:
        """The view on screen (under any dialog), or None before the first."""
        stack = self.screen_stack
        return stack[0] if stack and isinstance(stack[0], ViewScreen) else None

    @property
    def current(self) -> View | None:
        """Which view is on screen."""
        view = self.view()
        return None if view is None else view.VIEW

    def show_view(self, view: View) -> ViewScreen:
        """Put `view` on screen (drawn whole as it comes back) and return it."""
        self.switch_mode(view.value)
        self.refresh_bindings()
        return self.views[view]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "quit" and isinstance(self.screen, ConfirmScreen | QuitScreen):
            return False  # a confirmation is answered with its buttons, never by `q`
        if action in MAIN_SCREEN_ONLY:
            # Keys of the views do nothing behind the help screen, a dialog or the palette.
            return self.view() is self.screen
        return True

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # Textual's own themes lack lockwatch's state colours: lend them ours.
        return variable_defaults(self.current_theme.dark)

    # -- running -----------------------------------------------------------------

    def on_mount(self) -> None:
        for feed in self.feeds:
            self._run_feed(feed)
        self.set_interval(self.tick_seconds, self.tick)
        if self.flow is not None:
            self.set_interval(1.0, self.flow.keep_holdings)
        if not self.is_headless:
            watch_terminal(self, self._terminal_gone)
        if self._open_at is not None:
            self.travel_to(self._open_at)
        for warning in self.theme_warnings:
            self.notify(
                markup=False, message=warning, title="theme skipped", severity="warning", timeout=8
            )
        for warning in () if self.actions is None else self.actions.warnings:
            self.notify(
                markup=False, message=clean(warning), title="audit", severity="warning", timeout=20
            )

    @work(exclusive=False, group="feeds", exit_on_error=False)
    async def _run_feed(self, feed: Feed) -> None:
        try:
            await feed.run(self.receive)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a feed's bug must not take the dashboard down
            reason = clean(f"stopped: {failure_cause(exc)}")
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

    def _terminal_gone(self, why: str) -> None:
        """Nobody sees the screen any more: leave, keeping held locks as on a
        crash (audited as kept)."""
        if self._abandoned:
            return
        self._abandoned = True
        if self.flow is not None:
            with contextlib.suppress(Exception):
                self.flow.abandon(why)
        # Should putting the terminal back hang on the dead tty, the process
        # still ends within 2 s.
        if not self.is_headless:
            exit_soon(EXIT_HANGUP, 1.5)
        self.exit(return_code=EXIT_HANGUP)

    async def on_unmount(self) -> None:
        for feed in self.feeds:
            with contextlib.suppress(Exception):
                await feed.close()
        if self.recorder is not None:
            self.recorder.close()
        if self.history is not None:
            self.history.close()

    # -- data in, and the one way it is drawn ----------------------------------

    def receive(self, change: ChangeSet) -> None:
        """A feed's change set: recorded, then applied (or kept while paused)."""
        if self.recorder is not None:
            self.recorder.write(change)
            self._check_recording()
        if self.paused or self.past is not None:
            self._pending.append(change)
            self.show_header()
            return
        try:
            applied = self.board.apply(change)
            if self.history is not None:
                self.history.observe(self.board, applied, change.at)
            self.show(applied)
        except Exception as exc:  # noqa: BLE001 - one bad change set must not stop its feed
            self.log.error(f"could not apply a change set from {change.feed}: {exc!r}")
            self.notify(
                markup=False,
                message=clean(f"{change.feed}: a change could not be shown: {exc}"),
                severity="error",
                timeout=10,
            )

    def _check_recording(self) -> None:
        """Say once, loudly, that the recording (or the history) stopped (each
        writes in its own thread): it must not pass for one going on."""
        for writer, title in ((self.recorder, "recording stopped"), (self.history, "history")):
            if writer is None or not writer.failed or title in self._stopped_said:
                continue
            self._stopped_said.add(title)
            self.notify(markup=False, message=clean(writer.failed), title=title, timeout=30)
            self.show_header()

    def tick(self) -> None:
        """Once a second: re-judge the locks whose deadline passed, and let
        every age on screen move, without reading anything again."""
        self._check_recording()
        if self.paused or self.past is not None:
            return
        self.now = self.clock.now()
        # Every second, not only when a deadline is due: a clock gone back is seen.
        applied = self.board.tick(self.now)
        if self.history is not None:
            self.history.observe(self.board, applied, self.now)
        self.board.sample(self.now)
        self.show(applied, ticked=True)

    def show(self, applied: Applied | None = None, *, ticked: bool = False) -> None:
        """The one way the dashboard is brought up to date: `applied` (None:
        anything may have changed) goes into the rows, then the view on screen
        draws what it touched. Views off screen are drawn whole when shown."""
        reorder = True
        if applied is not None:
            if applied.empty and not applied.events and not ticked:
                return
            reorder = self.rows.update(applied)
            if applied.removed:
                self.marks.difference_update(applied.removed)
        view = self.view()
        if view is not None:
            view.show(Refresh(applied, reorder, ticked))

    def show_header(self) -> None:
        view = self.view()
        if view is not None and view.is_mounted:
            view.show_header()

    def show_rows(self, lock_ids: list[str]) -> None:
        """Marks or ★ changed on these rows only."""
        if View.LOCKS in self.views and self.view() is self.views[View.LOCKS]:
            self.locks.show_rows(lock_ids)
        else:
            self.show_header()

    def acted_on(self, lock_ids: Iterable[str]) -> None:
        """The operator's action on these locks was done: as each leaves, the
        cursor moves on to the next row, not a line saying it is gone."""
        for lock_id in lock_ids:
            if View.LOCKS in self.views:
                self.locks.table.acted_on(lock_id)
            contention = self.views.get(View.CONTENTION)
            if isinstance(contention, ContentionScreen):
                contention.sessions.acted_on(lock_id)
        self.show()

    def note(self, event: Event) -> None:
        """An event lockwatch itself caused (the operator's action, done or not)."""
        self.board.note(event)
        self.show(Applied(events=[event]))

    @property
    def table_hosts(self) -> bool:
        """Whether rows come from other hosts (lockwatch serve): a HOST column."""
        return any(registry.foreign(status.kind) for status in self.board.all_statuses())

    def mode(self) -> str | None:
        """The header's words for what is unusual: paused, read-only, marks, held."""
        if self.replay is not None:
            return self.replay.describe()
        parts = []
        if self.paused:
            parts.append(f"PAUSED — {len(self._pending)} update(s) held; p resumes")
        if self.readonly:
            parts.append("READ-ONLY")
        if self.recorder is not None and self.recorder.failed:
            parts.append("RECORDING STOPPED (see --record)")
        if self.history is not None and self.history.failed:
            parts.append("HISTORY STOPPED (watching goes on)")
        if self.marks:
            parts.append(f"{len(self.marks)} marked (space)")
        if self.held:
            parts.append(f"you hold {len(self.held)} lock(s) (r releases)")
        return " · ".join(parts) or None

    # -- keys typed into the filter ------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        if (
            isinstance(event, events.Key)
            and not event.is_forwarded
            and self._route_to_filter(event)
        ):
            return
        if isinstance(event, events.Paste) and self._typing_filter:
            # A bracketed paste right after `/`: text for the box, like typed keys
            # (it is no key, and would reach the box only once it has the focus).
            self.locks.filter_input._forward_event(event)
            return
        await super().on_event(event)

    def _route_to_filter(self, event: events.Key) -> bool:
        """Send `event` to the filter box (True) while the operator types a
        filter. Decided as keys arrive, before any is handled: the keys after
        `/` are already queued when `/` opens the box."""
        if event.key == "ctrl+c":
            return False  # quits, whatever is being typed
        if self._typing_filter:
            if event.key == "escape":
                self._typing_filter = False
                return False
            if event.key == "enter":
                # Submitted by the box itself, behind the keys before it: the focus
                # may not be there yet (a burst while the app is busy).
                self._typing_filter = False
                box = self.locks.filter_input
                box.call_later(box.action_submit)
                return True
            if not (event.is_printable or event.key in _FILTER_KEYS):
                return True  # tab, function keys: not the filter's, and no command either
            self.locks.filter_input._forward_event(event)
            return True
        if (
            event.key == "slash"
            and self.view() is self.screen
            and not isinstance(self.focused, Input)
        ):
            self._typing_filter = True
            # Now, before the keys behind it reach the box: what is typed replaces
            # the filter shown. (The box's own queue may take those keys before
            # this `/` has opened it.)
            self.locks.filter_input.select_all()
            if self.view() is self.locks:
                # Opened now too: its focus set before an enter in the same burst
                # moves it back to the table.
                self.locks.open_filter(select=False)
                return True
        return False

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        if event.widget.id == "filter":
            self._typing_filter = False  # left by a click, say: keys are commands again

    # -- the keys that work in every view ---------------------------------------------

    def action_filter(self) -> None:
        self.show_view(View.LOCKS)
        # Typed `/`: selected already, and maybe typed into since.
        self.locks.open_filter(select=not self._typing_filter)

    def action_details(self) -> None:
        view = self.view()
        if view is not None:
            view.action_details()

    def action_escape(self) -> None:
        view = self.view()
        if view is not None:
            view.escape()

    def action_next_view(self) -> None:
        current = self.view()
        order = list(View)
        index = order.index(current.VIEW) if current is not None else -1
        self.show_view(order[(index + 1) % len(order)])

    def action_pause(self) -> None:
        if self.replay is not None:
            self.replay.toggle_pause()
            self.show_header()
            return
        self.paused = not self.paused
        if self.paused or self.past is not None:
            self.show_header()
            return
        self.come_back()

    def come_back(self) -> None:
        """Back from a pause or the past: the change sets held meanwhile, applied."""
        self.refresh_bindings()
        if self.paused:
            self.show(None)
            return
        pending, self._pending = self._pending, []
        applied = Applied()
        for change in pending:
            applied.merge(self.board.apply(change))
        self.now = self.clock.now()
        if self.history is not None:
            self.history.observe(self.board, applied, self.now)
        self.show(applied, ticked=True)

    def action_next_theme(self) -> None:
        names = sorted(self.lock_themes)
        current = self.theme if self.theme in names else names[0]
        self.theme = names[(names.index(current) + 1) % len(names)]
        self.notify(markup=False, message=f"theme: {self.theme}", timeout=2)

    def watch_theme(self, theme: str) -> None:
        if View.LOCKS in self.views and self.locks.is_mounted:
            self.locks.theme_changed()

    def copy_id(self, lock_id: str | None) -> None:
        """Put `lock_id` on the clipboard (OSC 52, where the terminal allows) and
        show it, for `lockwatch break ID` and friends."""
        if lock_id is None:
            self.notify(markup=False, message="no lock selected", severity="warning", timeout=3)
            return
        self.copy_to_clipboard(lock_id)
        self.notify(markup=False, message=clean(lock_id), title="lock id copied", timeout=8)

    async def action_quit(self) -> None:
        if self.flow is None:
            self.exit()
        else:
            self.flow.quit()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(replay=self.replay is not None, actions=self.flow is not None))

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
        return palette_commands(self, screen)


class ReplayApp(LockwatchApp):
    """The dashboard playing a recording: the replay keys step and pace it."""

    BINDINGS: ClassVar[list[BindingType]] = _bindings(Group.REPLAY)

    def action_step(self) -> None:
        if self.replay is not None:
            self.replay.step()

    def action_faster(self) -> None:
        if self.replay is not None:
            self.replay.faster()
            self.show_header()

    def action_slower(self) -> None:
        if self.replay is not None:
            self.replay.slower()
            self.show_header()
