"""What every view screen shares: the sources line on top, the view tabs, the
footer, and one way to be brought up to date (`show`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, cast

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Tab, Tabs

from lockwatch.actions.plan import Kind, provider
from lockwatch.model.board import Applied
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.ui.keys import Group, View, action_kinds, action_names, view_keys
from lockwatch.ui.panels import SourcesBar
from lockwatch.ui.past import banner

if TYPE_CHECKING:
    from lockwatch.ui.app import LockwatchApp

TITLES = {View.LOCKS: "Locks", View.CONTENTION: "Contention", View.EVENTS: "Events"}


@dataclass(frozen=True, slots=True)
class Refresh:
    """What changed since a view was last drawn."""

    # The locks a change set touched; None: anything may have changed (the view
    # came back on screen, the filter, sort or theme changed).
    applied: Applied | None = None
    # The table's order or membership changed (not only cells).
    reorder: bool = True
    # A second went by: ages move, deadlines pass.
    ticked: bool = False

    @property
    def everything(self) -> bool:
        return self.applied is None


EVERYTHING = Refresh()


def view_bindings(view: View) -> list[BindingType]:
    return [
        Binding(key.keys, key.action, key.label, show=key.footer, priority=key.priority)
        for key in view_keys(view, Group.VIEW, Group.ACTION)
        if key.action is not None
    ]


class Movable(Protocol):
    """A view's list or tree, as the movement keys (ui/keys.py's MOVES) move in it."""

    @property
    def position(self) -> int: ...

    @property
    def positions(self) -> int: ...

    @property
    def page(self) -> int: ...

    def action_move(self, move: str) -> None: ...


def offered(lock: Lock, verdict: Verdict) -> frozenset[Kind]:
    """The actions `lock`'s source provides on it (another host's lock: none).
    One it provides but refuses now (a steal of a live lock) stays offered: the
    refusal says why."""
    actions = provider(lock)
    if actions is None:
        return frozenset()
    return frozenset(kind for kind in actions.kinds if actions.screen(kind, lock, verdict) is None)


class ViewTabs(Tabs, can_focus=False):
    """The views, the one on screen lit; clicking one goes there."""


class ViewScreen(Screen[None]):
    """One view of the board. Subclasses compose `body` and draw it in `show_body`."""

    VIEW: ClassVar[View]

    def __init__(self) -> None:
        super().__init__(id=f"{self.VIEW.value}-view")
        self.sources = SourcesBar(id="sources")
        # What the selected lock's source provides, as the footer last showed it.
        self._offered: dict[str, bool] | None = None
        # The keys that change something (absent in read-only mode and in replays),
        # and those that act on the selected lock, with what each asks of it: read
        # from the key table now, so a kind added to model/kinds.py is among them.
        self._action_names = frozenset(action_names(Group.ACTION))
        self._kinds = {action: Kind(kind) for action, kind in action_kinds().items()}
        self._bind_new_kinds()
        # This view's keys that ask an action of the selected lock (not mark: it
        # asks nothing of the lock yet), by key name.
        self._action_keys = {
            name: key.action
            for key in view_keys(self.VIEW, Group.ACTION)
            if key.action in self._kinds and key.action != "mark"
            for name in key.keys.split(",")
        }
        self._all_action_keys = frozenset(
            name for key in view_keys(self.VIEW, Group.ACTION) for name in key.keys.split(",")
        )

    def _bind_new_kinds(self) -> None:
        """Bind the keys of action kinds added to their table since this class was
        made (its BINDINGS are the table's at import): each in this view's keys."""
        bound = {binding.action for _, binding in self._bindings}
        for key in view_keys(self.VIEW, Group.ACTION):
            if key.action is not None and key.kind and key.action not in bound:
                self._bindings.bind(key.keys, key.action, key.label, show=key.footer)

    def action_act(self, kind: str) -> None:
        """An action kind's key with no action of this view's own (model/kinds.py):
        the flow asks it of the selected lock."""
        if self.dash.flow is not None:
            self.dash.flow.act(Kind(kind), self.selected_lock())

    @property
    def dash(self) -> LockwatchApp:
        return cast("LockwatchApp", self.app)

    def compose(self) -> ComposeResult:
        yield self.sources
        yield ViewTabs(
            *(Tab(title, id=f"tab-{view.value}") for view, title in TITLES.items()),
            active=f"tab-{self.VIEW.value}",
            id="view-tabs",
        )
        yield from self.body()
        yield Footer(compact=True, show_command_palette=False)

    def body(self) -> ComposeResult:
        raise NotImplementedError

    def show(self, refresh: Refresh = EVERYTHING) -> None:
        """Bring the header and the view up to date with the board."""
        if not self.is_mounted:
            return
        self.show_header()
        self.show_body(refresh)
        self.offers_changed()

    def show_header(self) -> None:
        dash = self.dash
        self.sources.show(
            dash.board,
            dash.now,
            shown=len(dash.rows),
            sort=dash.rows.sort,
            filter_text=dash.rows.query.text,
            mode=dash.mode(),
            past=None if dash.past is None else banner(dash.past),
        )

    def show_body(self, refresh: Refresh) -> None:
        raise NotImplementedError

    def escape(self) -> None:
        """Escape on this view: elsewhere than the locks, back to the locks."""
        self.dash.show_view(View.LOCKS)

    def action_details(self) -> None:
        """Enter: the selected lock's details (each view says where)."""

    def selected_lock(self) -> str | None:
        """The lock the action keys act on here."""
        return None

    def act_on_selected(self, kind: Kind) -> None:
        """A view's own action key: ask `kind` of the selected lock, unless it is
        gone (then `_refuse_gone` says so and nothing is done)."""
        if self.dash.flow is not None and not self._refuse_gone(kind):
            self.dash.flow.act(kind, self.selected_lock())

    def _refuse_gone(self, kind: Kind | str) -> bool:
        """True (and says why) when the selected lock is gone; a view whose
        selection cannot outlive its lock has none to refuse."""
        return False

    @property
    def movable(self) -> Movable:
        """The list or tree the movement keys move in, in this view."""
        raise NotImplementedError

    def selected_kinds(self) -> frozenset[Kind]:
        """The actions the selected lock's source provides on it."""
        dash = self.dash
        lock_id = self.selected_lock()
        entry = None if lock_id is None else dash.board.entries.get(lock_id)
        if lock_id is None or entry is None:
            return frozenset()
        return offered(entry.lock, dash.board.verdict(lock_id))

    def offers(self, action: str) -> bool:
        """Whether `action` works here now: the footer and the palette offer
        only those (a remote row's break is done on its host, not here)."""
        if action not in self._action_names:
            return True
        if self._offered is None:
            self._offered = self._offer_map()
        return self._offered.get(action, True)

    def _offer_map(self) -> dict[str, bool]:
        if self.dash.flow is None or self.dash.past is not None:
            # Read-only: the action keys are gone, not merely disabled; in the
            # past they are not offered either (pressed, they say why).
            return dict.fromkeys(self._action_names, False)
        kinds = self.selected_kinds()
        return {action: self.offered_here(action, kinds) for action in self._action_names}

    def offered_here(self, action: str, kinds: frozenset[Kind]) -> bool:
        """Whether the action key `action` works on this view's selection, which
        `kinds` are offered on (a view may offer more: b with marked rows)."""
        kind = self._kinds.get(action)
        return kind is None or kind in kinds

    def offers_changed(self) -> None:
        """The selection, or what it offers, may have changed: the footer shows
        the action keys anew when they differ."""
        before = self._offered
        self._offered = self._offer_map()
        if self.is_mounted and self._offered != before:
            self.refresh_bindings()

    def on_key(self, event: events.Key) -> None:
        """An action key the selected row's source does not provide: not offered
        (footer, palette), yet pressed it says why, as its refusal (another
        host's lock: the command to run there), never silence."""
        if self._past_refusal(event):
            return
        action = self._action_keys.get(event.key)
        if action is None or self.dash.flow is None or self.app.screen is not self:
            return
        lock_id = self.selected_lock()
        if lock_id is None or self.offers(action):
            return  # nothing selected, or the binding acts
        event.stop()
        event.prevent_default()
        self.dash.flow.act(self._kinds[action], lock_id)

    def _past_refusal(self, event: events.Key) -> bool:
        """An action key pressed while the board shown is the past: says why
        nothing is done (actions compare against the live lock)."""
        dash = self.dash
        if dash.past is None or dash.flow is None or self.app.screen is not self:
            return False
        if event.key not in self._all_action_keys:
            return False
        event.stop()
        event.prevent_default()
        dash.notify(
            "actions act on the live board, not the past: L returns live",
            title="in the past",
            severity="warning",
            timeout=5,
        )
        return True

    def on_mount(self) -> None:
        self.show()

    def on_screen_resume(self) -> None:
        # Views off screen are not kept current: drawn whole when shown again.
        self.show()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.app.screen is not self:
            return False  # behind a dialog, the help or the palette: not offered
        if parameters:  # `act('renew')`: offered as the key table names it
            action = f"{action}({', '.join(repr(p) for p in parameters)})"
        return self.offers(action)

    def on_tabs_tab_activated(self, message: Tabs.TabActivated) -> None:
        message.stop()
        tab = message.tab.id or ""
        view = View(tab.removeprefix("tab-")) if tab.startswith("tab-") else self.VIEW
        if view is not self.VIEW:
            self.dash.show_view(view)
