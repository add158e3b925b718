"""What the history's API and its stores share (re-exported by api.py, where
the other engineers' code imports them from): the schema version, the one-line
error, and the batch a recorder hands a store."""

from __future__ import annotations

from datetime import datetime

from lockwatch.model.changes import Entry
from lockwatch.model.history import ActionMark, LockSpan, Outage, WaitSpan

# The schema version this lockwatch writes and reads; a file with a higher
# version is refused (one line), a lower one is migrated on open for writing.
SCHEMA_VERSION = 4


class HistoryError(Exception):
    """The history cannot be read or written: one line for the operator."""


class Batch:
    """What one writer flush hands the store (the recorder builds it; the store
    applies it in one transaction). Times are aware datetimes.

    - `opened`: new lock spans, each with its board entry (Lock, verdict,
      process facts), kept encoded with the recording codec so `locks_at` and
      `entries_at` give back real objects;
    - `closed`: (lock id, end) for spans that ended (a state change closes one
      span and opens the next at the same instant);
    - `waits_opened`, `waits_closed` ((server, waiter node, blocker node), end,
      outcome);
    - `actions`, `outages_opened`, `outages_closed` ((source, name), end).
    """

    __slots__ = (
        "actions",
        "closed",
        "opened",
        "outages_closed",
        "outages_opened",
        "waits_closed",
        "waits_opened",
    )

    def __init__(self) -> None:
        self.opened: list[tuple[LockSpan, Entry]] = []
        self.closed: list[tuple[str, datetime]] = []
        self.waits_opened: list[WaitSpan] = []
        self.waits_closed: list[tuple[tuple[str, str, str], datetime, str | None]] = []
        self.actions: list[ActionMark] = []
        self.outages_opened: list[Outage] = []
        self.outages_closed: list[tuple[tuple[str, str], datetime]] = []

    def __bool__(self) -> bool:
        return bool(
            self.opened
            or self.closed
            or self.waits_opened
            or self.waits_closed
            or self.actions
            or self.outages_opened
            or self.outages_closed
        )
