"""Time travel from the command line (issue 44, item 4): `lockwatch --at T`
opens the dashboard on the board as the history recorded it at T, and
`lockwatch replay HISTORY` plays a history store (a SQLite file) through the
dashboard, opened on its last recorded change. Imported only by those paths."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from lockwatch.history.api import HistoryStore
    from lockwatch.ui.app import LockwatchApp

# What every SQLite database file starts with: a replay FILE that does is a
# history store, anything else a --record recording (JSON Lines).
SQLITE_MAGIC = b"SQLite format 3\x00"


def parse_at(text: str, option: str) -> datetime:
    """`text` in the forms every --at takes; a bad one is a usage error (exit 2)."""
    from lockwatch.model.when import BadTime, parse_when

    now = datetime.now().astimezone()
    try:
        return parse_when(text, now, now.tzinfo)
    except BadTime as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc


def configured(given: str | None, tables: Mapping[str, Any]) -> str | None:
    """The history the dashboard records into: --history, else [history] path
    in the config, else None (the default file), as `start_recorder` picks it."""
    if given:
        return given
    table = tables.get("history")
    path = table.get("path") if isinstance(table, Mapping) else None
    return path if isinstance(path, str) and path.strip() else None


def reader_for(target: str | None) -> Callable[[], HistoryStore]:
    """Opens a reader on the history at `target` (None: the default file)."""

    def opener() -> HistoryStore:
        from lockwatch.history.api import open_history

        return open_history(target)

    return opener


def check_readable(target: str | None, option: str) -> None:
    """Open the history once, so a missing, corrupt or untrusted one is one
    line before the dashboard starts (exit 2)."""
    from lockwatch.history.api import HistoryError

    try:
        reader_for(target)().close()
    except HistoryError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc


def is_history_file(path: Path) -> bool:
    """Whether `path` is a SQLite file (a history store), not a recording. Only a
    regular file is opened to look: a FIFO or a device would block the open (the
    replay's own checks refuse those in one line)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False
    finally:
        os.close(fd)


def history_replay(path: Path, at_text: str | None, **view: Any) -> LockwatchApp:
    """The dashboard on the history store at `path`, read-only and with no
    live feeds, opened at `at_text` (default: its last recorded change)."""
    from lockwatch.clock import SystemClock
    from lockwatch.history.api import HistoryError
    from lockwatch.ui.app import LockwatchApp
    from lockwatch.ui.past import last_change

    opener = reader_for(str(path))
    try:
        store = opener()
        try:
            at = parse_at(at_text, "--at") if at_text else last_change(store, SystemClock().now())
            host = store.host
        finally:
            store.close()
    except HistoryError as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from exc
    if at is None:
        from lockwatch.model.text import terminal_safe

        said = terminal_safe(f"{path}: nothing recorded there yet")
        raise click.BadParameter(said, param_hint="FILE")
    return LockwatchApp([], host=host, readonly=True, history_reader=opener, at=at, **view)
