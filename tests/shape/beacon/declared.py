"""What every run asks of the beacon source, without loading its plugin
(`sources/lazy.py`): its names, options, config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted

NAME = "beacon"


class BeaconDeclared:
    name = NAME
    label = "bcn"
    id_prefix = NAME
    summary = "Beacon leases (a made-up lease service, the worked example): owners, fences"
    config_tables: tuple[str, ...] = (NAME,)
    title = "Beacon"
    status_word = "beacon "
    sees_waits = False
    wait_metrics: str | None = None

    def options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--beacon",
                "beacon_urls",
                multiple=True,
                metavar="URL",
                help="A beacon server to read leases from, http://host:port (repeatable;"
                " its token from BEACON_TOKEN or beacon.token_file).",
            ),
            click.option(
                "--beacon-prefix",
                "beacon_prefix",
                default=None,
                metavar="KEY",
                help="Only the leases whose key starts with KEY [default: beacon.prefix, or all].",
            ),
        ]

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        # Every action command takes --beacon: how it reaches the lease's server.
        return [] if kind is not None else self.options()[:1]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return bool(values.get("beacon_urls"))

    def may_run(self, wanted: Wanted) -> bool:
        # Servers come from --beacon or the [beacon] table only.
        return self.asked(wanted.values) or wanted.settings(self.name) is not None

    def clues(self, text: str) -> Sequence[Clue]:
        return ()  # its ids (beacon:...) are the registry's to recognise


DECLARED = BeaconDeclared()
