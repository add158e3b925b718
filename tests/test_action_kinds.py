"""Every action kind is complete (issue 43 item 2): one table (model/kinds.py)
gives each kind its verb, key, command, views, events and help, and everything
else is built from it. An entry that lacks a piece fails here, not silently in
a worker: its key bound in its views, its command, its done event, a source
whose provider offers it, and its row in the README's key table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click
import pytest

from lockwatch.cli import cli
from lockwatch.model.action import Kind
from lockwatch.model.kinds import ActionKind, entry, table
from lockwatch.sources.registry import SOURCES
from lockwatch.ui.keys import Group, View, all_keys, view_keys
from lockwatch.ui.screens.base import ViewScreen

README = Path(__file__).resolve().parent.parent / "README.md"


def screen_of(view: View) -> type[ViewScreen]:
    from lockwatch.ui.app import SCREENS

    return SCREENS[view]


def problems(kind: ActionKind) -> list[str]:
    """What `kind`'s entry lacks, in words; [] when it is complete."""
    found: list[str] = []
    for word, value in (("verb", kind.verb), ("help", kind.help), ("done event", kind.done)):
        if not value.strip():
            found.append(f"no {word}")
    if not kind.views or not kind.views <= {view.value for view in View}:
        found.append(f"views {sorted(kind.views)} are not the dashboard's")
    found += _key_problems(kind)
    with click.Context(cli) as ctx:
        made = cli.get_command(ctx, kind.command)
    if made is None or made.name != kind.command:
        found.append(f"no command {kind.command!r}")
    if not any(s.actions is not None and kind.kind in s.actions.kinds for s in SOURCES):
        found.append("no source's provider offers it")
    if not any(line.startswith(f"| `{kind.key}` |") for line in README.read_text().splitlines()):
        found.append(f"no row for `{kind.key}` in the README's key table")
    return found


def _key_problems(kind: ActionKind) -> list[str]:
    found: list[str] = []
    others = [
        key.label or key.shown
        for key in all_keys()
        if kind.key in key.keys.split(",") and key.kind != kind.kind.value
    ]
    if others:
        found.append(f"key {kind.key!r} is also {', '.join(others)}")
    for view in kind.views & {view.value for view in View}:
        bound = [k for k in view_keys(View(view), Group.ACTION) if k.kind == kind.kind.value]
        if not bound:
            found.append(f"no key in the {view} view")
        if kind.action is not None and not hasattr(screen_of(View(view)), f"action_{kind.action}"):
            found.append(f"the {view} view has no action_{kind.action}")
    return found


@pytest.mark.parametrize("kind", [found.kind for found in table()], ids=str)
def test_every_kind_in_the_table_is_complete(kind: Kind) -> None:
    assert problems(entry(kind)) == []


def test_an_incomplete_kind_is_caught() -> None:
    """An entry added with pieces missing: each one is named."""
    lacking = replace(
        entry(Kind.BREAK),
        kind=Kind("bless"),
        key="b",  # break's already
        verb="",
        command="bless",
        views=frozenset({"locks", "nowhere"}),
    )
    said = " | ".join(problems(lacking))
    for missing in (
        "no verb",
        "views ['locks', 'nowhere']",
        "key 'b' is also Break",
        "no source's provider offers it",
    ):
        assert missing in said, said
    # Its command is built from the table the CLI reads, and it is not there.
    assert "no command 'bless'" in said
    alone = replace(entry(Kind.RELEASE), kind=Kind("bless"), key="Z", command="release")
    assert "no row for `Z` in the README's key table" in " | ".join(problems(alone))
