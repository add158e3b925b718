"""The Contention view: who waits on whom, root blockers first; the action keys
act on the selected session's lock."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Tree

from lockwatch.actions.plan import Kind
from lockwatch.ui.contention import ContentionTree
from lockwatch.ui.keys import View
from lockwatch.ui.screens.base import Movable, Refresh, ViewScreen, view_bindings


class ContentionScreen(ViewScreen):
    VIEW = View.CONTENTION
    BINDINGS: ClassVar[list[BindingType]] = view_bindings(View.CONTENTION)

    def __init__(self) -> None:
        super().__init__()
        self.sessions = ContentionTree(id="contention")

    def body(self) -> ComposeResult:
        yield self.sessions

    def show_body(self, refresh: Refresh) -> None:
        self.sessions.update_from(self.dash.board, self.dash.now, force=refresh.everything)

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.sessions.to_first_session()
        self.sessions.focus()

    def selected_lock(self) -> str | None:
        return self.sessions.selected_lock

    @property
    def movable(self) -> Movable:
        return self.sessions

    def offered_here(self, action: str, kinds: frozenset[Kind]) -> bool:
        if (
            self.sessions.gone is not None
            and self.sessions.selected_lock is None
            and action in ("break_lock", "cancel_query")
        ):
            return True  # pressed, they say the session is gone
        return super().offered_here(action, kinds)

    def on_tree_node_highlighted(self, message: Tree.NodeHighlighted[str | None]) -> None:
        self.offers_changed()

    def on_tree_node_selected(self, message: Tree.NodeSelected[str | None]) -> None:
        if message.node.data is None:
            message.node.toggle()
        else:
            self.action_details()

    def action_details(self) -> None:
        """Show the selected session's lock in the Locks view, details open."""
        lock_id = self.sessions.selected_lock
        if lock_id is None:
            return  # a heading: enter folds it (the tree's own key)
        if self.dash.rows.index_of(lock_id) is None:
            self.notify(
                markup=False,
                message="that session's lock is hidden by the filter (escape clears it)",
                severity="warning",
                timeout=4,
            )
            return
        self.dash.show_view(View.LOCKS)
        self.dash.locks.reveal(lock_id)

    def action_copy_id(self) -> None:
        self.dash.copy_id(self.sessions.selected_lock)

    def _refuse_gone(self, kind: Kind | str) -> bool:
        """True (and says why) when the cursor is on a session that left."""
        if self.sessions.gone is None or self.sessions.selected_lock is not None:
            return False
        self.notify(
            markup=False,
            message="that session is gone: nothing done; move to pick another session",
            title=f"cannot {kind}",
            severity="warning",
            timeout=8,
        )
        return True

    def action_break_lock(self) -> None:
        self.act_on_selected(Kind.BREAK)

    def action_cancel_query(self) -> None:
        self.act_on_selected(Kind.CANCEL)
