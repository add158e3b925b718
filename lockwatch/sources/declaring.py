"""The base of a server source's declaration (its `declared.py` class, what
every run asks of it: sources/lazy.py): it is asked for by its server flags
(`asking`), may run when asked or configured, recognises nothing in pasted text
unless it says otherwise, and gives the action commands its `target_option`;
and its `--x-idle-after` option. Every run loads
it: it builds nothing (its plugin's base is servers.py, loaded with the plugin).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted
    from lockwatch.sources.secrets import InArguments


class TargetOption(NamedTuple):
    """The option of the action commands naming the server a TARGET lives on."""

    flag: str  # "--pg"
    dest: str  # "pg_dsns", the same as its listing option's
    carries: InArguments  # its values may carry a password: hidden from `ps`
    metavar: str
    help: str


class ServerDeclared:
    """Defaults for a server source's declaration (`contract.Declared`)."""

    name: str
    status_word = ""
    sees_waits = False
    wait_metrics: str | None = None
    # The CLI values (click parameter names) that ask for it by name: its servers.
    asking: tuple[str, ...] = ()
    # Values that load its plugin without asking for it (an --x-idle-after its
    # select checks: a nan is refused there).
    loading: tuple[str, ...] = ()
    # The action commands' option naming a TARGET's server (None: none).
    target_option: TargetOption | None = None

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        # Declared, so that --help loads no plugin for them.
        if kind is not None or self.target_option is None:
            return ()
        from lockwatch.sources.secrets import secret_option

        option = self.target_option
        return [
            secret_option(
                option.flag,
                option.dest,
                carries=option.carries,
                multiple=True,
                metavar=option.metavar,
                help=option.help,
            )
        ]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return any(values.get(name) for name in self.asking)

    def clues(self, text: str) -> Sequence[Clue]:
        # Its ids are the registry's to recognise; its messages, none.
        return ()

    def may_run(self, wanted: Wanted) -> bool:
        # Servers come from its flags or its config table.
        return (
            self.asked(wanted.values)
            or any(wanted.values.get(name) is not None for name in self.loading)
            or wanted.settings(self.name) is not None
        )


def idle_after_option(flag: str, default: float) -> Decorator:
    """Its `--x-idle-after SECONDS` option (its listing's and the dashboard's)."""
    import click

    return click.option(
        flag,
        type=click.FloatRange(min=0),
        default=None,
        metavar="SECONDS",
        help=f"Idle (in transaction) holders older than this are stale [default: {default:g}].",
    )
