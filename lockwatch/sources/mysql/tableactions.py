"""The mysql source's actions with lock rows' breaks in front (locktables.py does
the UPDATE): apart from locktables.py, which the poll imports, so that the poll
never reaches the actions."""

from __future__ import annotations

from typing import Any

from lockwatch.sources.contract import ActionProvider
from lockwatch.sources.locktables.actions import WithTables, unlocker
from lockwatch.sources.locktables.facts import TableLock
from lockwatch.sources.mysql.actions import ACTIONS as MY_ACTIONS


def _unlock_row(endpoint: Any, facts: TableLock) -> int:
    # Loaded when a row is broken: PyMySQL with it.
    from lockwatch.sources.mysql.locktables import unlock_row

    return unlock_row(endpoint, facts)


# The mysql source's actions, lock rows' breaks included (ServerPlugin.actions).
ACTIONS: ActionProvider = WithTables(MY_ACTIONS, unlocker("mysql_endpoint", "--mysql", _unlock_row))
