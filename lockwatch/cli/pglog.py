"""`--pg-log FILE` on `lockwatch history` (issue 44, item 7): PostgreSQL's own
log of its lock waits folded into the history before it is asked, as waits
marked from the log. Folding the same file again adds nothing twice."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import click

PG_LOG_OPTION = click.option(
    "--pg-log",
    "pg_logs",
    metavar="FILE",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Fold this PostgreSQL server log's lock waits (log_lock_waits = on) into the history"
    " first: waits shorter than a poll, marked as from the log. Repeatable.",
)
PG_SERVER_OPTION = click.option(
    "--pg-server",
    metavar="NAME",
    default=None,
    help="The server a --pg-log is of, as lockwatch names it (user@host:port/db), so its"
    " waits fold with the polled ones [default: the log file's name].",
)


def fail(message: str) -> NoReturn:
    """One line, exit 2, as `lockwatch history` says its errors."""
    from lockwatch.cli.ending import finish
    from lockwatch.model.text import terminal_safe

    click.echo(f"lockwatch: {terminal_safe(message)}", err=True)
    finish(2)
    raise AssertionError  # finish() does not return


def fold_logs(target: str | None, logs: Sequence[Path], server: str | None) -> int:
    """Fold `logs` into the history at `target`; returns how many waits were
    added. A file that cannot be read, or a history that cannot be written, is
    one line (exit 2)."""
    from lockwatch.history.api import HistoryError, open_history
    from lockwatch.sources.contract import LogFolding
    from lockwatch.sources.registry import by_name

    # PostgreSQL's source reads its server's log (contract.LogFolding).
    source: object = by_name("postgres")
    if not isinstance(source, LogFolding):
        fail("--pg-log: this build has no PostgreSQL source")

    added = 0
    try:
        store = open_history(target, write=True)
    except HistoryError as exc:
        fail(str(exc))
    try:
        for log in logs:
            try:
                spans = source.fold_log(log, host=store.host, server=server or log.name)
            except OSError as exc:
                fail(f"--pg-log: {log}: {exc.strerror or exc}")
            added += store.add_waits(spans)
    except HistoryError as exc:
        fail(str(exc))
    finally:
        store.close()
    return added
