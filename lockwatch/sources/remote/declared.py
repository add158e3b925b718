"""What every run asks of the remote source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from lockwatch.sources.declaring import Declaring, Repeatable
from lockwatch.sources.remote import ids
from lockwatch.sources.remote.ids import REMOTE as REMOTE_KIND

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator


class RemoteDeclared(Declaring):
    # Its title and config table are its name; remotes come from --remote or the
    # [remote] table only (a token file alone names none); its ids are the
    # registry's to recognise.
    name = REMOTE_KIND
    label = "rmt"
    id_prefix = ids.REMOTE
    summary = "other hosts' locks, from their `lockwatch serve` (/v1/locks): read-only here"
    # Nothing is done to another host's lock from here (no action options): the
    # refusal names the command to run there (sources/remote/actions.py).
    status_word = "remote "
    asking = ("remotes",)
    messages = None
    repeatable = (
        Repeatable(
            "--remote",
            "remotes",
            "URL",
            "Another host's `lockwatch serve` whose locks to show too, with their"
            " host, read-only (repeatable) [config: remote.urls].",
        ),
    )

    def own_options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--remote-token-file",
                metavar="FILE",
                default=None,
                help="A file holding the bearer token for the --remote URLs [config:"
                " remote.token_file, remote.token_files].",
            ),
        ]


DECLARED = RemoteDeclared()
