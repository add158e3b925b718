"""Time travel (issue 44, item 4): the dashboard showing the board as the lock
history recorded it at an instant, stepped back and forth through the recorded
changes (`[` `]`), sought to a typed time (`@`), and left for the live board
(`L`).

In the past the app's board and rows are a board rebuilt from the store
(`locks_at`, with each lock's verdict as recorded); the live board is put aside
and, as while paused, the feeds' change sets wait to be applied when the
operator comes back. Actions act on what the operator sees, so in the past
none is offered, and pressing one says why (ui/screens/base.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry
from lockwatch.model.events import Event
from lockwatch.model.rows import Rows
from lockwatch.ui.safe import clean

if TYPE_CHECKING:
    from lockwatch.history.api import HistoryStore
    from lockwatch.model.history import Episode
    from lockwatch.ui.app import LockwatchApp

# Where to look for the previous or next change: nearest first, so a step in a
# busy store reads one minute of change instants, not a day's.
STEP_WINDOWS = (
    timedelta(minutes=1),
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=400),
)
# The episodes the Events view lists in the past: those of the day before.
EPISODES_BEFORE = timedelta(days=1)
MAX_EPISODE_EVENTS = 500
# The feed name of a board rebuilt from the history.
PAST_FEED = "history"

# Opens a reader on the history the dashboard records into (None: no history).
ReaderFactory = Callable[[], "HistoryStore"]


def shown_time(at: datetime) -> str:
    """An instant as the banner says it: local time, to the second (the date
    when it is not today)."""
    local = at.astimezone()
    today = datetime.now().astimezone().date()
    if local.date() == today:
        return local.strftime("%H:%M:%S")
    return local.strftime("%Y-%m-%d %H:%M:%S")


def banner(at: datetime) -> str:
    """The header's mark of the past: it must not pass for the live board."""
    return f"PAST {shown_time(at)} · recorded · [ ] step  @ seek  L live"


def board_at(
    entries: Sequence[Entry], episodes: Sequence[Episode], host: str, at: datetime
) -> Board:
    """A board holding `entries` (the locks as they were at `at`) and, as its
    events, `episodes` (oldest first) for the Events view."""
    board = Board(host)
    board.apply(ChangeSet(PAST_FEED, at, full=True, upserts=tuple(entries)))
    board.events.clear()  # the "appeared" events of the rebuild are no history
    for event in episode_events(episodes):
        board.note(event)
    return board


def episode_events(episodes: Sequence[Episode]) -> list[Event]:
    """One event per recorded episode, oldest first: what the Events view lists."""
    chosen = sorted(episodes, key=lambda episode: episode.start)[-MAX_EPISODE_EVENTS:]
    return [_episode_event(episode) for episode in chosen]


def _episode_event(episode: Episode) -> Event:
    end = "lasting" if episode.end is None else f"to {shown_time(episode.end)}"
    if episode.state is not None:
        what = f"{episode.state} {end}"
    else:
        what = (
            f"{len(episode.waiters)} waited (peak {episode.peak_waiters},"
            f" longest {episode.longest_wait_seconds:.0f}s) {end}"
        )
    ended = ""
    if episode.ended_by:
        ended = f"; ended: {episode.ended_by}"
        if episode.audit_id is not None:
            ended += f" (audit #{episode.audit_id})"
    origin = "" if episode.origins == ("poll",) else f" [{', '.join(episode.origins)}]"
    return Event(
        at=episode.start,
        kind="episode",
        lock_id=None,
        name=clean(episode.resource),
        source=episode.source,
        detail=clean(f"episode {episode.id}: {what}{ended}{origin}"),
    )


def previous_change(store: HistoryStore, before: datetime) -> datetime | None:
    """The latest recorded change instant strictly before `before`."""
    for window in STEP_WINDOWS:
        times = [t for t in store.change_times(before - window, before) if t < before]
        if times:
            return times[-1]
    return None


def next_change(store: HistoryStore, after: datetime, until: datetime) -> datetime | None:
    """The earliest recorded change instant strictly after `after`, up to `until`."""
    for window in STEP_WINDOWS:
        high = min(after + window, until)
        times = [t for t in store.change_times(after, high) if t > after]
        if times:
            return times[0]
        if high >= until:
            return None
    return None


def last_change(store: HistoryStore, now: datetime) -> datetime | None:
    """The newest recorded change instant up to `now` (where a replay of a
    store opens)."""
    return previous_change(store, now + timedelta(microseconds=1))


class SeekScreen(ModalScreen[datetime | None]):
    """Asks for a time in the forms every `--at` takes; enter goes there,
    escape stays. A time that is no time says so and waits."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Stay")]
    DEFAULT_CSS = """
    SeekScreen { align: center middle; }
    #seek-box {
        width: 72; max-width: 100%; height: auto; padding: 1 2;
        border: thick $accent; background: $surface;
    }
    #seek-error { color: $error; height: auto; }
    """

    def __init__(self, now: Callable[[], datetime]) -> None:
        super().__init__()
        self._now = now

    def compose(self) -> ComposeResult:
        from lockwatch.model.when import FORMS

        with Vertical(id="seek-box"):
            yield Static(Text("Go to a time in the history", style="bold"), id="seek-title")
            yield Static(Text(f"{FORMS}. Enter goes there, escape stays."), id="seek-help")
            yield Input(placeholder="-15m", id="seek-input", max_length=64)
            yield Static("", id="seek-error")

    def on_mount(self) -> None:
        self.query_one("#seek-input", Input).focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        from lockwatch.model.when import BadTime, parse_when

        message.stop()
        now = self._now()
        try:
            at = parse_when(message.value, now, datetime.now().astimezone().tzinfo)
        except BadTime as exc:
            self.query_one("#seek-error", Static).update(Text(clean(str(exc))))
            return
        self.dismiss(at)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TimeTravel:
    """The App's time travel keys (a mixin of LockwatchApp: `self` is the app).

    The history is read in a worker thread (a step at 10,000 locks reads and
    judges them all: seconds, which must not freeze the screen), each time on
    a reader of its own (a store belongs to one thread); only the newest
    request's board is shown (a step pressed again before the first arrives
    steps from where the board shown is)."""

    past: datetime | None = None
    history_reader: ReaderFactory | None = None
    _live: tuple[Board, Rows] | None = None
    _asked = 0  # the newest request: an older one's answer is dropped
    _heading: datetime | None = None  # where the newest request goes (a step's start)

    def _app(self) -> LockwatchApp:
        return cast("LockwatchApp", self)

    def _live_now(self) -> datetime:
        return self._app().clock.now()

    def _has_history(self) -> bool:
        if self.history_reader is None:
            self._app().notify(
                "no lock history here (--no-history, or a replay)", severity="warning", timeout=5
            )
            return False
        return True

    def action_step_back(self) -> None:
        if self._has_history():
            self._ask(-1, self._heading or self.past or self._live_now())

    def action_step_forward(self) -> None:
        start = self._heading or self.past
        if start is None:
            self._app().notify("live: nothing after now ([ steps back)", timeout=3)
            return
        if self._has_history():
            self._ask(1, start)

    def action_seek(self) -> None:
        if not self._has_history():
            return

        def chosen(at: datetime | None) -> None:
            if at is not None:
                self.travel_to(at)

        self._app().push_screen(SeekScreen(self._live_now), chosen)

    def action_live(self) -> None:
        app = self._app()
        self._asked += 1  # whatever is being read is no longer wanted
        self._heading = None
        if self.past is None or self._live is None:
            return
        if not app.feeds:
            app.notify("a recorded history: there is no live board", timeout=4)
            return
        shown = app.rows
        app.board, app.rows = self._live
        self._live = None
        self.past = None
        # The sort and filter set in the past stay: the live rows take them.
        app.rows.sort = shown.sort
        app.rows.query = shown.query
        app.come_back()
        app.rows.rebuild()
        app.show(None)

    def travel_to(self, at: datetime) -> None:
        """Show the board as the history recorded it at `at` (a future time: the
        live board)."""
        if self._has_history():
            self._ask(0, at.astimezone(UTC))

    def _ask(self, direction: int, start: datetime) -> None:
        """Read, off the event loop, the board at `start` (`direction` 0) or at
        the recorded change before (-1) or after (1) it."""
        app = self._app()
        self._asked += 1
        asked = self._asked
        now = self._live_now()
        live = bool(app.feeds)
        reader = self.history_reader
        assert reader is not None
        self._heading = start if direction == 0 else None

        def read() -> None:
            from lockwatch.history.api import HistoryError

            try:
                store = reader()
                try:
                    found = _read_past(store, direction, start, now, app.host)
                finally:
                    store.close()
            except HistoryError as exc:
                app.call_from_thread(self._said, asked, clean(str(exc)))
                return
            app.call_from_thread(self._arrive, asked, direction, found, live)

        app.run_worker(read, thread=True, group="past", exit_on_error=False)

    def _said(self, asked: int, message: str) -> None:
        if asked == self._asked:
            self._heading = None
            self._app().notify(markup=False, message=message, title="history", timeout=10)

    def _arrive(
        self, asked: int, direction: int, found: tuple[datetime, Board] | None, live: bool
    ) -> None:
        if asked != self._asked:
            return
        app = self._app()
        self._heading = None
        if found is None:
            if direction < 0:
                app.notify("no recorded change before this", timeout=3)
            elif direction > 0 and live:
                self.action_live()
            elif direction > 0:
                app.notify("the last recorded change", timeout=3)
            return
        at, board = found
        if direction == 0 and at >= self._live_now() and live:
            self.action_live()
            return
        if self._live is None:
            self._live = (app.board, app.rows)
        shown = app.rows  # the sort and filter the operator has now, live or past
        app.board = board
        app.rows = Rows(board, shown.sort, shown.query)
        self.past = at
        app.now = at
        app.show(None)
        app.refresh_bindings()


def _read_past(
    store: HistoryStore, direction: int, start: datetime, now: datetime, host: str
) -> tuple[datetime, Board] | None:
    """In a worker thread: the instant asked for and the board then (None: no
    recorded change that way)."""
    if direction < 0:
        at = previous_change(store, start)
    elif direction > 0:
        at = next_change(store, start, now)
    else:
        at = start
    if at is None:
        return None
    if direction == 0 and at >= now:
        return at, Board(host)  # the live board is shown instead
    entries = store.entries_at(at)
    episodes = store.episodes(at - EPISODES_BEFORE, at)
    return at, board_at(entries, episodes, host, at)
