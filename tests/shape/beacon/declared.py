"""What every run asks of the beacon source, without loading its plugin
(`sources/lazy.py`): its names, options, config table, and whether it may run.
The rest is the base's (`sources/declaring.py`): its id prefix and config
table are its name, `asked` and `may_run` come from its servers' option, and
that option is made for its listing and the action commands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from lockwatch.sources.declaring import ServerDeclared, TargetOption

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator

NAME = "beacon"


class BeaconDeclared(ServerDeclared):
    name = NAME
    label = "bcn"
    summary = "Beacon leases (a made-up lease service, the worked example): owners, fences"
    title = "Beacon"
    status_word = "beacon "
    # The option naming its servers: its listing's and the action commands'.
    target_option = TargetOption("--beacon", "beacon_urls", None, "URL")
    # Every action command takes --beacon too: how it reaches the lease's server.
    servers_help = target_help = (
        "A beacon server to read leases from, http://host:port (repeatable;"
        " its token from BEACON_TOKEN or beacon.token_file)."
    )

    def own_options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--beacon-prefix",
                "beacon_prefix",
                default=None,
                metavar="KEY",
                help="Only the leases whose key starts with KEY [default: beacon.prefix, or all].",
            ),
        ]


DECLARED = BeaconDeclared()
