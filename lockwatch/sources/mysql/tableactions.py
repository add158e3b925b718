"""The mysql source's actions with lock rows' breaks in front (locktables.py does
the UPDATE): apart from locktables.py, which the poll imports, so that the poll
never reaches the actions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lockwatch.model.action import ActionRefused
from lockwatch.sources.contract import ActionProvider
from lockwatch.sources.locktables.facts import TableLock


def _unlock(reach: Mapping[str, Any], facts: TableLock) -> int:
    find = reach.get("mysql_endpoint")
    endpoint = find(facts.server) if find is not None else None
    if endpoint is None:
        raise ActionRefused("no_dsn", f"no DSN for {facts.server}: name the server with --mysql")
    from lockwatch.sources.mysql.locktables import unlock_row

    return unlock_row(endpoint, facts)


def actions() -> ActionProvider:
    """The mysql source's actions, lock rows' breaks included."""
    from lockwatch.sources.locktables.actions import WithTables
    from lockwatch.sources.mysql.actions import ACTIONS

    return WithTables(ACTIONS, _unlock)
