"""The Events view: counts over ten minutes and what happened, newest last,
the operator's own actions among them."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType

from lockwatch.ui.keys import View
from lockwatch.ui.panels import Activity, EventLog
from lockwatch.ui.screens.base import Movable, Refresh, ViewScreen, view_bindings


class EventsScreen(ViewScreen):
    VIEW = View.EVENTS
    BINDINGS: ClassVar[list[BindingType]] = view_bindings(View.EVENTS)

    def __init__(self) -> None:
        super().__init__()
        self.activity = Activity(id="activity")

    def body(self) -> ComposeResult:
        yield self.activity

    def show_body(self, refresh: Refresh) -> None:
        board = self.dash.board
        if refresh.applied is None:
            self.activity.show_all(list(board.events))
        elif refresh.applied.events:
            self.activity.add_events(refresh.applied.events)
        if refresh.everything or refresh.ticked:
            self.activity.update_counts(board)

    @property
    def movable(self) -> Movable:
        return self.query_one("#events", EventLog)

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        log = self.query_one("#events", EventLog)
        log.catch_up()
        self.set_focus(log)

    def action_details(self) -> None:
        """The selected lock's details, in the Locks view."""
        self.dash.show_view(View.LOCKS)
        selected = self.dash.locks.selected_lock()
        if selected is not None:
            self.dash.locks.reveal(selected)

    def action_toggle_heartbeats(self) -> None:
        self.activity.hide_heartbeats = not self.activity.hide_heartbeats
        self.activity.show_all(list(self.dash.board.events))
