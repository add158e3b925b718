"""What every run asks of the remote source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from lockwatch.sources.remote import ids
from lockwatch.sources.remote.ids import REMOTE as REMOTE_KIND

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted


class RemoteDeclared:
    name = REMOTE_KIND
    label = "rmt"
    id_prefix = ids.REMOTE
    summary = "other hosts' locks, from their `lockwatch serve` (/v1/locks): read-only here"
    config_tables: tuple[str, ...] = ("remote",)
    # Nothing is done to another host's lock from here: the refusal names the
    # command to run there (sources/remote/actions.py).
    title = "remote"
    status_word = "remote "
    sees_waits = False
    wait_metrics: str | None = None

    def options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--remote",
                "remotes",
                multiple=True,
                metavar="URL",
                help="Another host's `lockwatch serve` whose locks to show too, with their"
                " host, read-only (repeatable) [config: remote.urls].",
            ),
            click.option(
                "--remote-token-file",
                metavar="FILE",
                default=None,
                help="A file holding the bearer token for the --remote URLs [config:"
                " remote.token_file, remote.token_files].",
            ),
        ]

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        return ()

    def asked(self, values: Mapping[str, Any]) -> bool:
        return bool(values.get("remotes"))

    def clues(self, text: str) -> Sequence[Clue]:
        # Its ids are the registry's to recognise.
        return ()

    def may_run(self, wanted: Wanted) -> bool:
        # Remotes come from --remote or the [remote] table only (a token file alone names none).
        return self.asked(wanted.values) or wanted.settings(self.name) is not None


DECLARED = RemoteDeclared()
