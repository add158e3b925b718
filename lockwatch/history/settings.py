"""Where the dashboard and `serve` record: `--history PATH|DSN`, `--no-history`,
and `[history]` in the config (`path`, `retention_days` = 14, `max_mb` = 512)."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from lockwatch.history.api import HistoryError, HistoryStore, open_history
from lockwatch.history.recorder import Recorder

RETENTION_DAYS = 14.0
MAX_MB = 512.0


def _number(table: Mapping[str, Any], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise HistoryError(f"history.{key} must be a positive number")
    return float(value)


def start_recorder(
    given: str | None,
    off: bool,
    tables: Mapping[str, Any],
    *,
    poll_seconds: float,
    host: str | None = None,
) -> Recorder | None:
    """The recorder the flags and the config ask for, started; None: --no-history.
    Raises HistoryError for a bad [history] table (a store that cannot be opened
    is the recorder's `failed`, said once: watching goes on)."""
    if off:
        return None
    found: Any = tables.get("history") if hasattr(tables, "get") else None
    table: Mapping[str, Any] = found if found is not None and hasattr(found, "get") else {}
    path = given or table.get("path")
    if path is not None and (not isinstance(path, str) or not path.strip()):
        raise HistoryError("history.path must be a path or a postgresql:// DSN")
    retention = _number(table, "retention_days", RETENTION_DAYS)
    max_mb = _number(table, "max_mb", MAX_MB)
    me = host or socket.gethostname()

    def opener() -> HistoryStore:
        return open_history(path, host=me, write=True, max_mb=max_mb)

    return Recorder(opener, poll_seconds=poll_seconds, retention_days=retention, target=path)
