"""Confirmations: what an action will do, in words, before it does it.

The effect comes first and stays in view whatever the terminal (80x24
included): the facts behind it (the lock, where, the holder, its state and
reasons) scroll below it. The reason field has the focus when a confirmation
opens; enter there moves to the next field (the name to type, where there is
one) and enter on the last field confirms once what it asks is given. A stray
enter confirms nothing: with no reason it says one is needed.

Where the focus is shows in words, not only in colour (a theme, NO_COLOR, a
plain text capture): the focused field's label starts with ▶, the focused
button reads `[ Break ]`, and a line says what enter does now. Tab, shift+tab
and enter move the focus the moment they are read, before the keys typed after
them are handed out, so keys typed ahead (a paste of `reason`, tab, `name`)
land in the field that had the focus when they were typed. What the dialog
shows is computed again every second while it is open: ages tick, and a
verdict that changes is said.
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
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Button, Input, Static

from lockwatch.ui.fold import Folded, fold_lines
from lockwatch.ui.safe import clean

# The facts as of now, and what changed since the dialog opened (None: nothing).
Refresh = Callable[[], tuple[Sequence[tuple[str, str]], str | None]]
REFRESH_SECONDS = 1.0
# Rows for the facts: at least one, whatever the terminal (the effect comes
# first); at most what reads well.
MIN_FACT_ROWS = 1
MAX_FACT_ROWS = 20
DISMISS_LABEL = "Do nothing"
# The row of `lines` that is the effect: shown first, never scrolled away.
EFFECT = "effect"
# The focus, in characters: what a plain text capture shows.
FOCUS_MARK = "▶"
# The cells the box keeps around the effect's text: border and padding each
# side, and the effect's scrollbar gutter (kept, so its text never reflows).
BOX_GUTTER = 5
MORE_FACTS = "↓ more facts below: pgdn/pgup scroll them"


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
        if label != EFFECT:
            grid.add_row(clean(label), Folded(value))
    return grid


def _effect(lines: Sequence[tuple[str, str]]) -> Folded:
    said = [value for label, value in lines if label == EFFECT]
    return Folded("\n".join(said) or "nothing", lead="Effect: ")


def button_label(text: str, focused: bool) -> str:
    """A button's words with the focus marked around them: `[ Break ]`."""
    return f"[ {text} ]" if focused else f"  {text}  "


def _plain(text: str) -> Content:
    # Plain content: a label's brackets are the focus mark, never markup.
    return Content(text)


@dataclass(frozen=True)
class Choosing:
    """The ways an action may be carried out, picked in the dialog (a kernel
    break's signal): `what` is chosen, among `labels` (the first is the
    default); `chosen(index)` plans the action that way, before the dialog's
    facts are computed again."""

    what: str
    labels: tuple[str, ...]
    chosen: Callable[[int], None]


class ChoiceRow(Static, can_focus=True):
    """One line of options, the chosen one marked `(•)` (in characters, as the
    focus is): ←/→ (or space, or its number) choose while it has the focus."""

    class Chosen(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, choosing: Choosing, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.choosing = choosing
        self.index = 0

    def on_mount(self) -> None:
        self._show()

    def _show(self) -> None:
        parts = [
            f"({'•' if at == self.index else ' '}) {label}"
            for at, label in enumerate(self.choosing.labels)
        ]
        self.update(Text("  ".join(parts)))

    def choose(self, index: int) -> None:
        index %= len(self.choosing.labels)
        if index != self.index:
            self.index = index
            self._show()
            self.post_message(self.Chosen(index))

    def on_key(self, event: events.Key) -> None:
        # Its keys are its own: a printable key here is no reason typed ahead.
        step = {"left": -1, "right": 1, "space": 1}.get(event.key)
        number = event.character.isdigit() if event.character else False
        if step is not None:
            self.choose(self.index + step)
        elif number and 1 <= int(event.key) <= len(self.choosing.labels):
            self.choose(int(event.key) - 1)
        else:
            return
        event.stop()
        event.prevent_default()


class EnterHint(Widget):
    """What enter does, with more after it where the line has room: chosen when
    drawn, at the width the line has then (a width read earlier, before the
    layout settled, could drop what fits)."""

    DEFAULT_CSS = "EnterHint { height: 1; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._long = self._short = ""
        self._loud = False

    def say(self, long: str, short: str, *, loud: bool = False) -> None:
        """`loud`: why enter did nothing, said in bold where the hint was."""
        if (long, short, loud) != (self._long, self._short, self._loud):
            self._long, self._short, self._loud = long, short, loud
            self.refresh()

    def render(self) -> Text:
        width = self.size.width
        said = self._short if width and len(self._long) > width else self._long
        if self._loud:
            # Folded onto the line's width: its words, never cut mid-word.
            return Text(fold_lines(said, width)[0] if width else said, style="bold")
        return Text(said, style="dim italic")


class ConfirmScreen(ModalScreen[Confirmed | None]):
    """One action on one lock, or one action on several (bulk)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Do nothing"),
        Binding("pageup", "facts(-1)", "Scroll the facts up", show=False),
        Binding("pagedown", "facts(1)", "Scroll the facts down", show=False),
        # Priority: acted on when read, before the keys typed after them are
        # given to whichever widget has the focus (see the module's docstring).
        Binding("enter", "enter", "Next / confirm", show=False, priority=True),
        Binding("tab", "move(1)", "Next field", show=False, priority=True),
        Binding("shift+tab", "move(-1)", "Previous field", show=False, priority=True),
    ]
    AUTO_FOCUS = "#reason"

    def __init__(
        self,
        title: str,
        lines: Sequence[tuple[str, str]],
        *,
        verb: str,
        must_type: str | None = None,
        must_type_what: str = "the lock's name to confirm",
        warning: str | None = None,
        refresh: Refresh | None = None,
        choice: Choosing | None = None,
    ) -> None:
        super().__init__()
        self._refresh = refresh
        self._choice = choice
        self._title = title
        self._lines = list(lines)
        self._verb = verb
        self._must_type = must_type
        self._must_type_what = must_type_what
        self._warning = warning
        # Why enter did nothing, said on the hint line until the next key (None: nothing).
        self._said: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(Folded(self._title, style="bold"), id="confirm-title")
            effect = VerticalScroll(id="confirm-effect", can_focus=False)
            with effect:
                yield Static(_effect(self._lines), id="confirm-effect-text")
            yield Static("", id="confirm-changed")
            if self._warning:
                yield Static(Folded(self._warning), id="confirm-warning")
            # Not a Tab stop: Tab goes between the fields and the buttons.
            facts = VerticalScroll(id="confirm-facts", can_focus=False)
            with facts:
                yield Static(_facts(self._lines), id="confirm-lines")
            # In words, not a scrollbar: the facts go on below (`_fit` shows it).
            yield Static(Text(MORE_FACTS, style="dim italic"), id="confirm-more")
            if self._choice is not None:
                with Horizontal(id="choice-row", classes="confirm-field"):
                    yield Static("", id="choice-label", classes="field-label")
                    yield ChoiceRow(self._choice, id="choice")
            with Horizontal(classes="confirm-field"):
                yield Static("", id="reason-label", classes="field-label")
                # No select-on-focus: what was typed stays typed when the focus returns.
                yield Input(
                    placeholder="why (required, goes to the audit log)",
                    id="reason",
                    select_on_focus=False,
                )
            if self._must_type is not None:
                yield Static(
                    Folded(f"Type {self._must_type_what}: {self._must_type}"),
                    id="confirm-prompt",
                )
                with Horizontal(id="must-type-row", classes="confirm-field"):
                    yield Static("", id="must-type-label", classes="field-label")
                    yield Input(
                        placeholder=f"type {clean(self._must_type)} here, exactly",
                        id="must-type",
                        select_on_focus=False,
                    )
            with Horizontal(id="confirm-buttons"):
                yield EnterHint(id="confirm-hint")
                yield Button(
                    _plain(button_label(DISMISS_LABEL, False)), id="cancel", variant="primary"
                )
                yield Button(
                    _plain(button_label(self._verb, False)),
                    id="confirm",
                    variant="error",
                    disabled=True,
                )

    def on_mount(self) -> None:
        for field in self.query(Input):
            field.cursor_blink = False
        self.query_one("#confirm-changed", Static).display = False
        self.query_one("#confirm-more", Static).display = False
        # A toast left from before (`cancelled — nothing done`) would lie over the
        # fields and buttons: this dialog says its own news on its hint line.
        # Warnings and errors (a source failed, the audit key) stay: they matter here.
        for notification in list(self.app._notifications):
            if notification.severity == "information":
                self.app._unnotify(notification, refresh=False)
        self.app._refresh_notifications()
        self._mark_focus()
        if self._refresh is not None:
            self.set_interval(REFRESH_SECONDS, self.refresh_facts)

    # -- the layout: the effect always in view, the facts in what is left ------------

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """The effect gets the rows it needs (all but one for the facts, on a very
        small terminal); the facts get the rest and scroll, so the effect,
        the reason, the name and the buttons are always in view (80x24 included)."""
        box = self.query_one("#confirm-box")
        effect = self.query_one("#confirm-effect")
        facts = self.query_one("#confirm-facts")
        more = self.query_one("#confirm-more")
        others = sum(
            w.outer_size.height + w.styles.margin.height
            for w in box.children
            if w not in (facts, effect, more) and w.display
        )
        room = self.size.height - others - box.styles.gutter.height
        width = max(1, min(box.outer_size.width, self.size.width) - BOX_GUTTER)
        wanted = len(_effect(self._lines).lines(width))
        given = max(1, min(wanted, room - MIN_FACT_ROWS))
        effect.styles.height = given
        rows = max(MIN_FACT_ROWS, min(MAX_FACT_ROWS, room - given - 1))
        # Facts longer than their rows: one row says so, in place of a scrollbar.
        over = self.query_one("#confirm-lines").outer_size.height > rows
        if more.display != over:
            more.display = over
        facts.styles.max_height = max(MIN_FACT_ROWS, rows - 1) if over else rows
        self._mark_focus()  # the hint, to the width it now has

    def action_facts(self, pages: int) -> None:
        facts = self.query_one("#confirm-facts", VerticalScroll)
        step = pages * max(1, facts.size.height - 1)
        y = max(0.0, min(facts.max_scroll_y, facts.scroll_y + step))
        facts.scroll_to(y=y, animate=False, immediate=True)
        more = MORE_FACTS if y < facts.max_scroll_y else "↑ the last facts: pgup scrolls back up"
        self.query_one("#confirm-more", Static).update(Text(more, style="dim italic"))

    def set_title(self, title: str) -> None:
        """The title as of the facts' clock: an age in it moves with theirs."""
        if title != self._title:
            self._title = title
            if self.is_mounted:
                self.query_one("#confirm-title", Static).update(Folded(title, style="bold"))

    def refresh_facts(self) -> None:
        """The facts as of now; a change of verdict since opening is said."""
        if self._refresh is None:
            return
        lines, changed = self._refresh()
        self._lines = list(lines)
        self.query_one("#confirm-lines", Static).update(_facts(self._lines))
        self.query_one("#confirm-effect-text", Static).update(_effect(self._lines))
        note = self.query_one("#confirm-changed", Static)
        shown = changed is not None
        if note.display != shown:
            note.display = shown
        if changed is not None:
            note.update(Text(f"⚠ {clean(changed)}", style="bold"))
        self.call_after_refresh(self._fit)

    # -- the focus, in words -------------------------------------------------------

    def _stops(self) -> list[Widget]:
        """Where tab goes, in order: the fields, then the buttons that can be pressed."""
        stops: list[Widget] = [self.query_one(ChoiceRow)] if self._choice is not None else []
        stops.append(self.query_one("#reason", Input))
        if self._must_type is not None:
            stops.append(self.query_one("#must-type", Input))
        stops.append(self.query_one("#cancel", Button))
        confirm = self.query_one("#confirm", Button)
        if not confirm.disabled:
            stops.append(confirm)
        return stops

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._mark_focus()

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        self._mark_focus()

    def _mark_focus(self) -> None:
        focused = self.focused
        labels = {"reason": "reason", "must-type": "name"}
        if self._choice is not None:
            labels["choice"] = self._choice.what
        for field, word in labels.items():
            found = self.query(f"#{field}-label")
            if not found:
                continue
            here = focused is not None and focused.id == field
            found.first(Static).update(
                Text(f"{FOCUS_MARK} {word}", style="bold") if here else Text(f"  {word}")
            )
        for button_id, words in (("cancel", DISMISS_LABEL), ("confirm", self._verb)):
            button = self.query_one(f"#{button_id}", Button)
            button.label = _plain(button_label(words, focused is button))
        hint = self.query_one("#confirm-hint", EnterHint)
        if self._said is not None:
            hint.say(self._said, self._said, loud=True)
            return
        # What enter does matters most: it alone, whole, where both do not fit.
        hint.say(self._hint(" · esc: do nothing"), self._hint(""))

    def _hint(self, then: str) -> str:
        """What enter does now, in words; `then`: what else to say after it."""
        focused = self.focused
        if focused is None:
            return then.lstrip(" ·")
        if focused.id == "cancel":
            return "enter: do nothing"
        if isinstance(focused, ChoiceRow):
            return f"←/→: choose the {focused.choosing.what}" + then
        if focused.id == "confirm":
            return f"enter: {self._verb.lower()}" + then
        missing = self._missing()
        if focused.id == "reason":
            if not self._reason():
                return "type why, for the audit log" + then
            if self._must_type is not None and not self._name_typed():
                return "enter: on to the name" + then
        if focused.id == "must-type" and not self._name_typed():
            return f"type {clean(self._must_type or '')} exactly" + then
        if missing:
            return f"needs {missing}" + then
        return f"enter: {self._verb.lower()}" + then

    # -- fields and keys -----------------------------------------------------------

    def _reason(self) -> str:
        return " ".join(self.query_one("#reason", Input).value.split())

    def _typed(self) -> str | None:
        if self._must_type is None:
            return None
        return self.query_one("#must-type", Input).value

    def _name_typed(self) -> bool:
        """Whether the name was typed: as it is, or as the dialog shows it. A name
        holding escapes (`esc\\x1b]0;…`) is shown sanitised, and that is all the
        operator can read and type; the raw characters are no more exact a proof."""
        typed, wanted = self._typed(), self._must_type
        return wanted is None or typed in (wanted, clean(wanted))

    def _missing(self) -> str | None:
        """What the action still needs before it may go ahead (None: nothing)."""
        if not self._reason():
            return "a reason"
        if self._must_type is not None and not self._name_typed():
            return clean(self._must_type) + " typed"
        return None

    def _ready(self) -> bool:
        return self._missing() is None

    def on_key(self, event: events.Key) -> None:
        # Inputs consume what they type, so a printable key that reaches the screen
        # was typed on a button: it means the reason (the field enter never skips).
        if event.is_printable and event.character:
            event.stop()
            event.prevent_default()
            reason = self.query_one("#reason", Input)
            # At once, not later (Widget.focus defers): keys typed fast must follow it.
            self.set_focus(reason)
            reason.insert_text_at_cursor(event.character)

    def on_input_changed(self, message: Input.Changed) -> None:
        message.stop()
        self._said = None  # typed: what enter does now is news again
        self.query_one("#confirm", Button).disabled = not self._ready()
        self._mark_focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        # Enter is the screen's (action_enter); a submit from elsewhere does the same.
        message.stop()
        self.action_enter()

    def action_move(self, step: int) -> None:
        self._said = None
        stops = self._stops()
        focused = self.focused
        at = stops.index(focused) if focused in stops else (-1 if step > 0 else 0)
        self.set_focus(stops[(at + step) % len(stops)])

    def action_enter(self) -> None:
        """Enter: on a button, press it; in a field, move to the next field, or
        confirm from the last one once everything is given.

        Keys typed before this enter may still be on their way into the field
        (a paste is read faster than the field takes it): the move to the name
        is made now, so what is typed next lands there, and what depends on the
        field's text is decided once the field has taken those keys."""
        focused = self.focused
        if isinstance(focused, ChoiceRow):
            self.set_focus(self.query_one("#reason", Input))
            return
        if isinstance(focused, Button):
            if focused.id == "confirm" and self._ready():
                self._confirm()
            elif focused.id == "cancel":
                self.dismiss(None)
            return
        reason = self.query_one("#reason", Input)
        if focused is reason and self._must_type is not None:
            self.set_focus(self.query_one("#must-type", Input), scroll_visible=False)
        if focused is None:
            self._entered(None)
        else:
            focused.call_later(self._entered, focused)

    def _entered(self, field: Widget | None) -> None:
        if not self.is_attached or self.app.screen is not self:
            return  # already answered
        reason = self.query_one("#reason", Input)
        if not self._reason():
            self.set_focus(reason)
            self._say("a reason is required (for the audit log)")
        elif field is reason and self._must_type is not None:
            return  # on to the name, already
        elif self._ready():
            self._confirm()
        else:
            self._say(f"type {clean(self._must_type or '')} exactly to confirm")

    def _say(self, words: str) -> None:
        """Why enter did nothing, on the hint line, until the next key: a toast
        would lie over the field or button being used."""
        self.app.bell()
        self._said = words
        self._mark_focus()

    def set_verb(self, verb: str) -> None:
        """What the confirm button says, when the way chosen changes the action."""
        if verb != self._verb:
            self._verb = verb
            if self.is_mounted:
                self._mark_focus()

    def on_choice_row_chosen(self, message: ChoiceRow.Chosen) -> None:
        """Another way chosen: planned again, the effect says what it now does."""
        message.stop()
        if self._choice is not None:
            self._choice.chosen(message.index)
        self.refresh_facts()

    def _confirm(self) -> None:
        self.dismiss(Confirmed(self._reason(), forced=self._must_type is not None))

    def on_button_pressed(self, message: Button.Pressed) -> None:
        message.stop()
        if message.button.id == "confirm" and self._ready():
            self._confirm()
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
