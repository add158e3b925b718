"""What every run asks of the postgres source, without loading its plugin
(`sources/lazy.py`): its names, options and config tables, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from lockwatch.sources.declaring import ServerDeclared, TargetOption
from lockwatch.sources.postgres import ids
from lockwatch.sources.postgres.dsn import IN_ARGUMENTS, LIBPQ_SERVER_VARS

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator, LogFolding, Wanted

DEFAULT_IDLE_AFTER = 60.0


class PostgresDeclared(ServerDeclared):
    # It recognises its messages.py's; its locks wait (wait_metrics).
    name = "postgres"
    label = "pg"
    id_prefix = ids.PG
    summary = "PostgreSQL's pg_locks: advisory locks, waiters, blockers, blocking trees"
    config_tables: tuple[str, ...] = ("postgres", "advisory", "locktables")
    title = "PostgreSQL"
    status_word = "pg "
    wait_metrics: str | None = "pg"
    # A backend whose client process is gone: what it held went with it.
    holder_gone = frozenset({"client_dead"})

    @staticmethod
    def fold_log(host: str, server: str) -> LogFolding:
        """The server's log of its lock waits (log_lock_waits), folded as read."""
        from lockwatch.sources.postgres.logfold import Folding

        return Folding(host, server)

    # --pg-idle-after: alone, it still loads the plugin (its select refuses a nan).
    idle_after = DEFAULT_IDLE_AFTER
    # The option naming its servers: its listing's and the action commands'.
    target_option = TargetOption("--pg", "pg_dsns", IN_ARGUMENTS, "DSN")
    servers_help = "A PostgreSQL server to read pg_locks from (repeatable)."
    target_help = "The server a Postgres TARGET lives on (repeatable)."

    def own_options(self) -> Sequence[Decorator]:
        return [
            click.option(
                "--pg-all",
                is_flag=True,
                help="Every pg_locks row, not only contended and advisory ones.",
            ),
        ]

    def may_run(self, wanted: Wanted) -> bool:
        # Where dsn.resolve_dsns finds servers: flags, the config, LOCKWATCH_PG, libpq's PG*.
        environ = wanted.environ
        return (
            super().may_run(wanted)
            or bool(environ.get("LOCKWATCH_PG"))
            or any(environ.get(name) for name in LIBPQ_SERVER_VARS)
        )


DECLARED = PostgresDeclared()
