"""Where the dashboard and `serve` record: `--history PATH|DSN`, `--no-history`,
and `[history]` in the config (`path`, `retention_days` = 14, `max_mb` = 512)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lockwatch.history.api import HistoryError, HistoryStore, open_history
from lockwatch.history.recorder import Recorder
from lockwatch.model.lock import Lock

if TYPE_CHECKING:
    from lockwatch.history.logfollow import LogFollower

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
    logs: Sequence[Path] = (),
    log_server: str | None = None,
) -> Recorder | None:
    """The recorder the flags and the config ask for, started; None: --no-history.
    `logs` (`--pg-log`): server logs followed into the same history, their waits
    as the server `log_server` names (default: each file's name).
    Raises HistoryError for a bad [history] table or a log that cannot be read
    (a store that cannot be opened is the recorder's `failed`, said once:
    watching goes on)."""
    if off:
        if logs:
            raise HistoryError("--pg-log folds into the history: it cannot go with --no-history")
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

    follower = follow_logs(logs, log_server, opener, host=me, poll_seconds=poll_seconds)
    recorder = Recorder(opener, poll_seconds=poll_seconds, retention_days=retention, target=path)
    if follower is not None:
        recorder.companions.append(follower)
    return recorder


def follow_logs(
    logs: Sequence[Path],
    server: str | None,
    opener: Callable[[], HistoryStore],
    *,
    host: str,
    poll_seconds: float,
) -> LogFollower | None:
    """A follower of `logs` into the store `opener` opens (None: no logs).
    HistoryError (one line) when a log cannot be read now or no source folds logs."""
    if not logs:
        return None
    import os

    from lockwatch.history.logfollow import LogFollower
    from lockwatch.sources.logtail import LogTail, open_log
    from lockwatch.sources.registry import log_folding

    followed = []
    for log in logs:
        try:
            os.close(open_log(log))
        except OSError as exc:
            raise HistoryError(f"--pg-log: {log}: {exc.strerror or exc}") from exc
        folding = log_folding(host, server or log.name)
        if folding is None:
            raise HistoryError("--pg-log: no source of this build reads a server's log")
        followed.append((LogTail(log), folding))
    return LogFollower(followed, opener, poll_seconds=poll_seconds)


def note_action(
    tables: Mapping[str, Any],
    host: str,
    lock: Lock,
    event: str,
    operator: str,
    audit_seq: int | None,
) -> None:
    """An action the CLI took (`lockwatch break …`), into the history the
    recorders on this host write (the config's, else the default file), so the
    episode it ended says so; only where that history exists (an action never
    starts one), and never failing the action: its audit record is the proof."""
    from datetime import UTC, datetime
    from pathlib import Path

    from lockwatch.history.api import default_path, is_dsn
    from lockwatch.model.blocking import node_of
    from lockwatch.model.history import ActionMark

    found: Any = tables.get("history") if hasattr(tables, "get") else None
    path = found.get("path") if found is not None and hasattr(found, "get") else None
    target = path if isinstance(path, str) and path.strip() else None
    if target is None and not default_path().exists():
        return
    if target is not None and not is_dsn(target) and not Path(target).exists():
        return
    node = node_of(lock)
    mark = ActionMark(
        host,
        datetime.now(UTC),
        lock.id,
        event,
        operator,
        audit_seq,
        node=None if node is None else str(node),
    )
    try:
        store = open_history(target, host=host, write=True)
        try:
            store.record_action(mark)
        finally:
            store.close()
    except HistoryError:
        return
