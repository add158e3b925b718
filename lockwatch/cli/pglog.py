"""`--pg-log FILE` on `lockwatch history` (issue 44, item 7): PostgreSQL's own
log of its lock waits folded into the history before it is asked, as waits
marked from the log. Folding the same file again adds nothing twice."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

# `lockwatch history`'s exit for a history it cannot use (cli/history.py, which
# imports this module: not imported back).
_EXIT = 2

PG_LOG_OPTION = click.option(
    "--pg-log",
    "pg_logs",
    metavar="FILE",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Fold this PostgreSQL server log's lock waits (log_lock_waits = on) into the history:"
    " waits shorter than a poll, marked as from the log. `history` folds it once before it"
    " answers; the dashboard and `serve` follow it as it grows (and its rotations) while"
    " they record. Repeatable.",
)
PG_SERVER_OPTION = click.option(
    "--pg-server",
    metavar="NAME",
    default=None,
    help="The server a --pg-log is of, as lockwatch names it (user@host:port/db), so its"
    " waits fold with the polled ones [default: the log file's name].",
)


def fold_logs(target: str | None, logs: Sequence[Path], server: str | None) -> int:
    """Fold `logs` into the history at `target`; returns how many waits were
    added. A file that cannot be read, or a history that cannot be written, is
    one line (exit 2)."""
    from lockwatch.cli.ending import fail
    from lockwatch.history.api import HistoryError, open_history
    from lockwatch.sources.logtail import read_lines
    from lockwatch.sources.registry import log_folding

    added = 0
    try:
        store = open_history(target, write=True)
    except HistoryError as exc:
        fail(str(exc), _EXIT)
    try:
        for log in logs:
            folding = log_folding(store.host, server or log.name)
            if folding is None:
                fail("--pg-log: no source of this build reads a server's log", _EXIT)
            try:
                for line in read_lines(log):
                    folding.feed(line)
                spans = folding.done()
            except OSError as exc:
                fail(f"--pg-log: {log}: {exc.strerror or exc}", _EXIT)
            added += store.add_waits(spans)
    except HistoryError as exc:
        fail(str(exc), _EXIT)
    finally:
        store.close()
    return added
