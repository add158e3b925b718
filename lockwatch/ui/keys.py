"""Every key of the dashboard, once. The bindings, the footer, the `?` help, the
command palette and `lockwatch watch --help` are all built from this table, so
they cannot disagree; the action kinds' keys come from their own table
(model/kinds.py).

Plain data, no Textual: the CLI builds its epilog from it without paying for
the UI.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from lockwatch.model.kinds import ActionKind, table


class View(StrEnum):
    """The dashboard's views, one screen each (ui/screens/)."""

    LOCKS = "locks"
    CONTENTION = "contention"
    EVENTS = "events"


EVERYWHERE = frozenset(View)


class Move(StrEnum):
    """Where a movement key takes the cursor of a view's list or tree."""

    UP = "up"
    DOWN = "down"
    PAGE_UP = "page_up"
    PAGE_DOWN = "page_down"
    FIRST = "first"
    LAST = "last"


# The movement keys, each with its vi twin: every view's list or tree binds
# these (`move_bindings`), so no view lacks one (the Contention tree once
# ignored j, k, g and G: `j` eight times then `b` aimed at the wrong session).
MOVES: tuple[tuple[str, Move], ...] = (
    ("up,k", Move.UP),
    ("down,j", Move.DOWN),
    ("pageup", Move.PAGE_UP),
    ("pagedown", Move.PAGE_DOWN),
    ("home,g", Move.FIRST),
    ("end,G", Move.LAST),
)


def move_bindings() -> list[tuple[str, str]]:
    """(keys, action) for a list widget's BINDINGS: its `action_move`."""
    return [(keys, f"move({move.value!r})") for keys, move in MOVES]


def moved(move: Move, position: int, count: int, page: int) -> int:
    """The position `move` goes to from `position`, among `count` positions,
    `page` of them in view at once (a page keeps one line of context)."""
    last = max(0, count - 1)
    step = max(1, page - 1)
    target = {
        Move.UP: position - 1,
        Move.DOWN: position + 1,
        Move.PAGE_UP: position - step,
        Move.PAGE_DOWN: position + step,
        Move.FIRST: 0,
        Move.LAST: last,
    }[move]
    return max(0, min(target, last))


class Group(StrEnum):
    VIEW = "view"  # looking: always there
    ACTION = "action"  # acting on locks: gone when read-only
    REPLAY = "replay"  # `lockwatch replay` only


@dataclass(frozen=True, slots=True)
class Key:
    keys: str  # Textual's key names, comma-separated ("question_mark")
    shown: str  # as the operator types it ("?")
    # The action: the App's `action_<name>` for keys that apply everywhere, the
    # view screen's for the others; None: a widget's own keys.
    action: str | None
    label: str  # the footer's word for it
    help: str  # one line for `?`, the palette and --help
    group: Group = Group.VIEW
    # In the footer: only what must stay in view at 80 columns (?, /, tab, the
    # action keys, p, q); the rest is one `?` or ctrl+p away.
    footer: bool = True
    priority: bool = False  # also while a widget (the filter box) has focus
    palette: str | None = None  # its title in the command palette; None: not there
    # Where it applies: the main screen only (the locks table and its views), or
    # also over the help screen and dialogs (quit, escape, help).
    main_only: bool = True
    # The views it works in: bound on the App when everywhere, else on those
    # views' screens, so a key is never offered where it does nothing.
    views: frozenset[View] = EVERYWHERE
    # The action (model/action.py's Kind) it asks of the selected lock: offered
    # in the footer and the palette only on rows whose source provides it.
    kind: str | None = None

    @property
    def everywhere(self) -> bool:
        return self.views == EVERYWHERE

    @property
    def where(self) -> str:
        """`locks, contention`: the views it works in, for the help; '' when all."""
        return "" if self.everywhere else ", ".join(v.value for v in View if v in self.views)


_LOCKS = frozenset({View.LOCKS})
_SELECTED = frozenset({View.LOCKS, View.CONTENTION})  # where a lock is selected

_BEFORE_KINDS: tuple[Key, ...] = (
    Key(
        "question_mark", "?", "help", "Help", "this help: keys, filter fields, states",
        palette="Help", main_only=False,
    ),
    Key(
        "slash", "/", "filter", "Filter",
        "filter: free text over name, holder, host, format; field:value terms; !term negates",
        palette="Filter",
    ),
    Key(
        "s", "s", "sort", "Sort", "cycle the sort: state, age, name, source", footer=False,
        palette="Sort", views=_LOCKS
    ),
    Key(
        "enter", "enter", "details", "Details",
        "show or hide the selected lock's details; from another view, open them in the locks",
        footer=False, palette="Details",
    ),
    Key(
        "tab", "tab", "next_view", "Views", "switch views: locks, contention, events",
        priority=True, palette="Switch view",
    ),
    Key(
        "p", "p", "pause", "Pause", "pause: freeze the view while collection goes on",
        palette="Pause or resume",
    ),
    Key(
        "t", "t", "next_theme", "Theme", "next theme (lockwatch's own)", footer=False,
        palette="Next theme",
    ),
    Key(
        "e", "e", "export", "Export",
        "export an incident snapshot (JSON and Markdown) to the state directory",
        footer=False, palette="Export incident",
    ),
    Key(
        "h", "h", "toggle_heartbeats", "Heartbeats",
        "events view: hide or show heartbeats (the events follow the newest until you scroll)",
        footer=False, palette="Hide or show heartbeats", views=frozenset({View.EVENTS})
    ),
    Key(
        "space", "space", "mark", "Mark",
        "mark or unmark the row (the cursor moves down); b then breaks every marked lock",
        group=Group.ACTION, palette="Mark or unmark", views=_LOCKS, kind="break"
    ),
    Key(
        "U", "U", "clear_marks", "Unmark all", "clear every mark", group=Group.ACTION,
        footer=False, palette="Clear marks", views=_LOCKS
    ),
)  # fmt: skip

# After the action kinds' keys (model/kinds.py's table, between these two).
_AFTER_KINDS: tuple[Key, ...] = (
    Key(
        "y", "y", "copy_id", "Copy id",
        "copy the selected lock's id (for lockwatch break/steal) to the clipboard, and show it",
        footer=False, palette="Copy lock id", views=_SELECTED,
    ),
    Key(
        "escape", "escape", "escape", "Back",
        "clear the filter, close the detail pane; from another view, back to the locks",
        footer=False, main_only=False,
    ),
    Key(
        ",".join(keys for keys, _ in MOVES), "↑ ↓ pgup pgdn home end", None, "",
        "move in the table, the contention tree or the events (also j k g G)", footer=False,
    ),
    Key("ctrl+p", "ctrl+p", None, "every action", "command palette: every action", footer=False),
    # Time travel (issue 44): the board as the lock history recorded it.
    Key(
        "left_square_bracket", "[", "step_back", "Back in time",
        "the past: step back to the previous recorded change (the board as it was then)",
        footer=False, palette="Step back in the history",
    ),
    Key(
        "right_square_bracket", "]", "step_forward", "Forward in time",
        "the past: step forward to the next recorded change (past the last: live again)",
        footer=False, palette="Step forward in the history",
    ),
    Key(
        "at", "@", "seek", "Seek", "the past: go to a time (RFC 3339, HH:MM[:SS], -15m/-2h/-1d)",
        footer=False, palette="Go to a time in the history",
    ),
    Key(
        "L", "L", "live", "Live", "back from the past to the live board", footer=False,
        palette="Back to the live board",
    ),
    Key(
        "q", "q", "quit", "Quit", "quit (asks what to do with locks you hold)", palette="Quit",
        main_only=False,
    ),
    Key(
        "ctrl+c", "ctrl+c", "quit", "", "quit, as q does", footer=False, priority=True,
        main_only=False,
    ),
    Key("n", "n", "step", "Step", "step: apply the next recorded snapshot", group=Group.REPLAY,
        palette="Step"),
    Key("plus", "+", "faster", "Faster", "play faster", group=Group.REPLAY, palette="Faster"),
    Key("minus", "-", "slower", "Slower", "play slower", group=Group.REPLAY, palette="Slower"),
)  # fmt: skip


def kind_key(kind: ActionKind) -> Key:
    """The key of an action kind, as its table entry says it."""
    return Key(
        kind.key,
        kind.key,
        kind.key_action,
        kind.label,
        kind.help,
        group=Group.ACTION,
        footer=kind.footer,
        palette=kind.palette,
        views=frozenset(View(view) for view in kind.views),
        kind=kind.kind.value,
    )


def all_keys() -> tuple[Key, ...]:
    """Every key, in the order help lists them: the action kinds' from their table."""
    return (*_BEFORE_KINDS, *(kind_key(kind) for kind in table()), *_AFTER_KINDS)


def keys_of(*groups: Group) -> list[Key]:
    return [key for key in all_keys() if key.group in groups]


def action_names(group: Group) -> tuple[str, ...]:
    """The App actions of `group` (the action keys that read-only mode removes)."""
    return tuple(dict.fromkeys(k.action for k in all_keys() if k.group is group and k.action))


def main_screen_actions() -> frozenset[str]:
    """Actions that do nothing behind the help screen, a dialog or the palette."""
    return frozenset(
        k.action for k in all_keys() if k.action and k.main_only and k.group is not Group.REPLAY
    )


def help_rows(groups: Iterable[Group]) -> list[tuple[str, str]]:
    """(keys as typed, what they do) for the `?` screen, ctrl+c folded into q;
    a key that works in some views only says which."""
    wanted = set(groups)
    return [
        (k.shown, f"{k.help} [{k.where}]" if k.where else k.help)
        for k in all_keys()
        if k.group in wanted and k.keys != "ctrl+c"
    ]


def action_kinds() -> dict[str, str]:
    """The actions that act on the selected lock, with the Kind each asks of it."""
    return {k.action: k.kind for k in all_keys() if k.action and k.kind}


def app_keys(*groups: Group) -> list[Key]:
    """The keys bound on the App: those that work in every view."""
    return [key for key in keys_of(*groups) if key.everywhere]


def view_keys(view: View, *groups: Group) -> list[Key]:
    """The keys bound on `view`'s screen: those that work there and not everywhere."""
    return [key for key in keys_of(*groups) if not key.everywhere and view in key.views]


def epilog() -> str:
    """The `Keys:` lines of `lockwatch watch --help`."""
    lines: list[str] = []
    for group, title in ((Group.VIEW, "Keys:"), (Group.ACTION, "Acting:")):
        words = [f"{k.shown} {k.label.lower()}" for k in all_keys() if k.group is group and k.label]
        line = f"{title:<8}"
        for word in words:
            if len(line) + len(word) + 3 > 78:
                lines.append(line.rstrip(" ·"))
                line = " " * 8
            line += word + " · "
        lines.append(line.rstrip(" ·"))
    return "\n".join(lines)
