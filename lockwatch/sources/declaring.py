"""The base of a server source's declaration (its `declared.py` class, what
every run asks of it: sources/lazy.py): it is asked for by its server flags
(`asking`), may run when asked or configured, and recognises nothing in pasted
text unless it says otherwise; and its `--x-idle-after` option. Every run loads
it: it builds nothing (its plugin's base is servers.py, loaded with the plugin).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted


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
