"""The postgres source's actions with lock rows' breaks in front (locktables.py
does the UPDATE): apart from locktables.py, which the poll imports, so that the
poll never reaches the actions."""

from __future__ import annotations

from lockwatch.sources.contract import ActionProvider
from lockwatch.sources.locktables.actions import WithTables, unlocker
from lockwatch.sources.postgres.actions import ACTIONS as PG_ACTIONS
from lockwatch.sources.postgres.locktables import unlock_row

# The postgres source's actions, lock rows' breaks included (ServerPlugin.actions).
ACTIONS: ActionProvider = WithTables(PG_ACTIONS, unlocker("dsn_for", "--pg", unlock_row))
