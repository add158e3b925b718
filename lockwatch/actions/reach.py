"""How actions reach their servers: one way, for the CLI's action commands and
the dashboard's session alike.

Each source's provider builds its part from the run's options and config
(`ActionProvider.reach`; `ActionsBase` gives a source that needs nothing the
empty default), and the executor hands the whole to every action (`Doing.reach`).
A source whose servers the dashboard was told of (--redis, [[etcd]]) is reached
as the CLI reaches it, with nothing remembered between runs or modules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lockwatch.sources.contract import Source, Wanted


def reach(wanted: Wanted, sources: Iterable[Source] | None = None) -> dict[str, Any]:
    """What every provider of `sources` (None: every registered source, as an
    action command's TARGET may be any source's) needs to reach its servers, by
    the names the providers read. Raises SourceError for an unusable value."""
    from lockwatch.sources.registry import SOURCES

    built: dict[str, Any] = {}
    for source in SOURCES if sources is None else sources:
        actions = source.actions
        if actions is not None:
            built.update(actions.reach(wanted))
    return built
