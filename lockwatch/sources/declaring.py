"""The base of a server source's declaration (its `declared.py` class, what
every run asks of it: sources/lazy.py): it is asked for by its servers' option
(`target_option`) and any other flags (`asking`), may run when asked or
configured, recognises in pasted text what its `messages` module does, and
gives the action commands its `target_option` (the option its listing names its
servers by, with `target_help`); and its `--x-idle-after` option. Every run
loads it: it builds nothing (its plugin's base is servers.py, loaded with the
plugin).
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
    """The option naming a source's servers: its listing's (`ls`, the dashboard)
    and, with other help, the action commands' (the server a TARGET lives on)."""

    flag: str  # "--pg"
    dest: str  # "pg_dsns"
    # Its values may carry a password: hidden from `ps` (None: they never do).
    carries: InArguments | None
    metavar: str
    multiple: bool = True

    def option(self, help: str) -> Decorator:
        """The option, saying `help`."""
        if self.carries is None:
            import click

            return click.option(
                self.flag, self.dest, multiple=self.multiple, metavar=self.metavar, help=help
            )
        from lockwatch.sources.secrets import secret_option

        return secret_option(
            self.flag,
            self.dest,
            carries=self.carries,
            multiple=self.multiple,
            metavar=self.metavar,
            help=help,
        )


class ServerDeclared:
    """Defaults for a server source's declaration (`contract.Declared`)."""

    name: str
    status_word = ""
    sees_waits = False
    wait_metrics: str | None = None
    # The CLI values (click parameter names) that ask for it by name besides its
    # servers' option (`target_option`'s).
    asking: tuple[str, ...] = ()
    # Values that load its plugin without asking for it (an --x-idle-after its
    # select checks: a nan is refused there).
    loading: tuple[str, ...] = ()
    # The option naming its servers: its listing's, and the action commands'
    # naming a TARGET's server (None: none).
    target_option: TargetOption | None = None
    target_help = ""
    # The module whose `clues` recognise its tools' messages in pasted text
    # (None: its package's `messages` where it has one; its ids are the
    # registry's to recognise).
    messages: str | None = None

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        # Declared, so that --help loads no plugin for them.
        if kind is not None or self.target_option is None:
            return ()
        return [self.target_option.option(self.target_help)]

    def asked(self, values: Mapping[str, Any]) -> bool:
        servers = self.target_option
        if servers is not None and values.get(servers.dest):
            return True
        return any(values.get(name) for name in self.asking)

    def clues(self, text: str) -> Sequence[Clue]:
        from importlib import import_module
        from importlib.util import find_spec

        module = self.messages
        if module is None:
            # A source's messages.py is found, not named again in its declaration.
            module = type(self).__module__.rpartition(".")[0] + ".messages"
            if find_spec(module) is None:
                return ()
        found: Sequence[Clue] = import_module(module).clues(text)
        return found

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
