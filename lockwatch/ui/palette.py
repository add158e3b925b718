"""The command palette: every action the keys offer on the view it was opened
from (from the one key table), as the footer offers them (an action the selected
row's source does not provide is not there), and lockwatch's own themes only:
Textual's lack their state colours."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from textual.app import SystemCommand
from textual.screen import Screen

from lockwatch.ui.keys import Group, all_keys
from lockwatch.ui.screens.base import ViewScreen

if TYPE_CHECKING:
    from lockwatch.ui.app import LockwatchApp


def palette_commands(app: LockwatchApp, screen: Screen[object]) -> Iterable[SystemCommand]:
    groups = {Group.VIEW}
    if app.flow is not None:
        groups.add(Group.ACTION)
    if app.replay is not None:
        groups.add(Group.REPLAY)
    view = screen if isinstance(screen, ViewScreen) else app.view()
    for key in all_keys():
        if key.palette is None or key.action is None or key.group not in groups:
            continue
        if key.everywhere:
            run = getattr(app, f"action_{key.action}")
        elif view is not None and view.VIEW in key.views and view.offers(key.action):
            run = getattr(view, f"action_{key.action}")
        else:
            continue
        yield SystemCommand(key.palette, f"{key.help} ({key.shown})", run)
    for name in sorted(app.lock_themes):
        yield SystemCommand(
            f"Theme: {name}", "lockwatch's colours for the states", partial(_use, app, name)
        )


def _use(app: LockwatchApp, theme: str) -> None:
    app.theme = theme
