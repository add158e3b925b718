"""Confirmations: what an action will do, in words, before it does it.

"Do nothing" has the focus when a confirmation opens, so a stray enter does
nothing (and says so). The action's button stays disabled until a reason is
given and, where the action is risky (a lock that is not stale, many locks at
once), until the operator has typed the lock's name or the count. Enter in a
field moves on towards the action's button; it never confirms, and never
silently cancels. What the dialog shows is computed again every second while
it is open: ages tick, and a verdict that changes is said.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from lockwatch.ui.safe import clean

# The facts as of now, and what changed since the dialog opened (None: nothing).
Refresh = Callable[[], tuple[Sequence[tuple[str, str]], str | None]]
REFRESH_SECONDS = 1.0
# Rows for the facts: at least a few, whatever the terminal; at most what reads well.
MIN_FACT_ROWS = 3
MAX_FACT_ROWS = 20
DISMISS_LABEL = "Do nothing"


@dataclass(frozen=True, slots=True)
class Confirmed:
    reason: str
    # The operator typed the lock's name (or the count): a lock that is not
    # stale may be broken.
    forced: bool


def _facts(lines: Sequence[tuple[str, str]]) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True, justify="right")
    grid.add_column()
    for label, value in lines:
        grid.add_row(label, Text(clean(value)))
    return grid


class ConfirmScreen(ModalScreen[Confirmed | None]):
    """One action on one lock, or one action on several (bulk)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Do nothing"),
        Binding("pageup", "facts(-1)", "Scroll the facts up", show=False),
        Binding("pagedown", "facts(1)", "Scroll the facts down", show=False),
    ]
    # Not the first input: on_mount focuses Cancel, and leaves the box at its top.
    AUTO_FOCUS = ""

    def __init__(
        self,
        title: str,
        lines: Sequence[tuple[str, str]],
        *,
        verb: str,
        must_type: str | None = None,
        must_type_what: str = "the lock's name",
        warning: str | None = None,
        refresh: Refresh | None = None,
    ) -> None:
        super().__init__()
        self._refresh = refresh
        self._title = title
        self._lines = list(lines)
        self._verb = verb
        self._must_type = must_type
        self._must_type_what = must_type_what
        self._warning = warning

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(Text(clean(self._title), style="bold"), id="confirm-title")
            # Not a Tab stop: Tab goes from Cancel straight to the reason.
            facts = VerticalScroll(id="confirm-facts", can_focus=False)
            with facts:
                yield Static(_facts(self._lines), id="confirm-lines")
            yield Static("", id="confirm-changed")
            if self._warning:
                yield Static(Text(clean(self._warning)), id="confirm-warning")
            # No select-on-focus: the first letter typed on Cancel must stay typed.
            yield Input(
                placeholder="reason (required, goes to the audit log)",
                id="reason",
                select_on_focus=False,
            )
            if self._must_type is not None:
                yield Static(
                    Text(f"Type {self._must_type_what} to confirm: ")
                    + Text(clean(self._must_type), style="bold"),
                    id="confirm-prompt",
                )
                yield Input(
                    placeholder="type it here, exactly", id="must-type", select_on_focus=False
                )
            with Horizontal(id="confirm-buttons"):
                yield Button(DISMISS_LABEL, id="cancel", variant="primary")
                yield Button(self._verb, id="confirm", variant="error", disabled=True)

    def on_mount(self) -> None:
        for field in self.query(Input):
            field.cursor_blink = False
        # Without scrolling to it: on a small terminal the box opens at its top.
        self.query_one("#cancel", Button).focus(scroll_visible=False)
        self.query_one("#confirm-changed", Static).display = False
        if self._refresh is not None:
            self.set_interval(REFRESH_SECONDS, self.refresh_facts)

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """The facts get the rows the rest leaves, so the reason, the name and
        the buttons are always in view (80x24 included); the facts scroll."""
        box = self.query_one("#confirm-box")
        facts = self.query_one("#confirm-facts")
        others = sum(
            w.outer_size.height + w.styles.margin.height
            for w in box.children
            if w is not facts and w.display
        )
        room = self.size.height - others - box.styles.gutter.height
        facts.styles.max_height = max(MIN_FACT_ROWS, min(MAX_FACT_ROWS, room))

    def action_facts(self, pages: int) -> None:
        facts = self.query_one("#confirm-facts", VerticalScroll)
        facts.scroll_to(y=facts.scroll_y + pages * max(1, facts.size.height - 1), animate=False)

    def refresh_facts(self) -> None:
        """The facts as of now; a change of verdict since opening is said."""
        if self._refresh is None:
            return
        lines, changed = self._refresh()
        self.query_one("#confirm-lines", Static).update(_facts(lines))
        note = self.query_one("#confirm-changed", Static)
        shown = changed is not None
        if note.display != shown:
            note.display = shown
            self.call_after_refresh(self._fit)
        if changed is not None:
            note.update(Text(f"⚠ {clean(changed)}", style="bold"))

    def on_key(self, event: events.Key) -> None:
        # Cancel has the focus, yet an operator who starts typing means the reason:
        # the first printable key moves there (enter still presses the button).
        # Inputs consume what they type, so a printable key that reaches the screen was
        # typed elsewhere, e.g. on Cancel, or queued for it before the focus moved.
        if event.is_printable and event.character:
            event.stop()
            event.prevent_default()
            reason = self.query_one("#reason", Input)
            # At once, not later (Widget.focus defers): keys typed fast must follow it.
            self.set_focus(reason)
            reason.insert_text_at_cursor(event.character)

    def _ready(self) -> bool:
        if not self.query_one("#reason", Input).value.strip():
            return False
        if self._must_type is not None:
            return self.query_one("#must-type", Input).value == self._must_type
        return True

    def on_input_changed(self, message: Input.Changed) -> None:
        message.stop()
        self.query_one("#confirm", Button).disabled = not self._ready()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        message.stop()
        # Enter moves on towards the action's button: it never confirms by itself,
        # and never lands on "Do nothing" (which enter would then press).
        if self._ready():
            self.query_one("#confirm", Button).focus()
            return
        reason = self.query_one("#reason", Input)
        if not reason.value.strip():
            self.set_focus(reason)
            self.notify("a reason is required: it goes to the audit log", timeout=3)
        elif self._must_type is not None:
            self.set_focus(self.query_one("#must-type", Input))

    def on_button_pressed(self, message: Button.Pressed) -> None:
        message.stop()
        if message.button.id == "confirm" and self._ready():
            reason = " ".join(self.query_one("#reason", Input).value.split())
            self.dismiss(Confirmed(reason, forced=self._must_type is not None))
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class QuitScreen(ModalScreen[str | None]):
    """Quitting while lockwatch holds locks for the operator: release them, keep them,
    or stay."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "stay", "Stay")]

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__()
        self._names = list(names)

    def compose(self) -> ComposeResult:
        shown = ", ".join(self._names[:8]) + (" …" if len(self._names) > 8 else "")
        with Vertical(id="confirm-box"):
            yield Static(Text("You hold locks", style="bold"), id="confirm-title")
            yield Static(
                Text(
                    f"lockwatch holds {len(self._names)} lock(s) for you: {clean(shown)}.\n"
                    "Release them now, or keep them: kept lock files stop getting heartbeats"
                    " and go stale by their own rules; Postgres locks end with lockwatch's"
                    " session."
                )
            )
            with Horizontal(id="confirm-buttons"):
                yield Button("Stay", id="stay", variant="primary")
                yield Button("Release and quit", id="release", variant="warning")
                yield Button("Keep and quit", id="keep", variant="default")

    def on_mount(self) -> None:
        self.query_one("#stay", Button).focus()

    def on_button_pressed(self, message: Button.Pressed) -> None:
        message.stop()
        self.dismiss(None if message.button.id == "stay" else message.button.id)

    def action_stay(self) -> None:
        self.dismiss(None)
