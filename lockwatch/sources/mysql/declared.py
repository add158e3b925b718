"""What every run asks of the mysql source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import click

from lockwatch.sources.secrets import InArguments, secret_option, url_passwords

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.sources.contract import Decorator, Wanted

DEFAULT_IDLE_AFTER = 60.0


def _passwords(dsn: str) -> set[str]:
    found = url_passwords(dsn)
    try:
        password = urlsplit(dsn).password
    except ValueError:
        return found
    return found | {password, unquote(password)} if password else found


# --mysql's values may carry a password: hidden from `ps` as soon as they are parsed.
IN_ARGUMENTS = InArguments(
    "--mysql",
    _passwords,
    "an option file (~/.my.cnf, or option_file in the config's [mysql] table), password_file"
    " in the config's [mysql] table, or MYSQL_PWD (which MySQL calls insecure: some systems"
    " show a process's environment to other users; Linux shows it to its owner and root only)",
)


class MysqlDeclared:
    name = "mysql"
    label = "my"
    id_prefix = "mysql"
    summary = "MySQL/MariaDB: named locks, InnoDB lock waits, metadata-lock (DDL) queues"
    # [[locktables]] too: the lock tables it lists are in the one list both servers read.
    config_tables: tuple[str, ...] = ("mysql", "locktables")
    title = "MySQL"
    status_word = "my "
    sees_waits = True
    wait_metrics: str | None = "mysql"

    def options(self) -> Sequence[Decorator]:
        return [
            secret_option(
                "--mysql",
                "mysql_dsns",
                carries=IN_ARGUMENTS,
                multiple=True,
                metavar="DSN",
                help="A MySQL or MariaDB server: mysql://user@host:port/db or a unix socket's"
                " path (repeatable; password from MYSQL_PWD, ~/.my.cnf or mysql.password_file).",
            ),
            click.option(
                "--mysql-idle-after",
                type=click.FloatRange(min=0),
                default=None,
                metavar="SECONDS",
                help="Idle (in transaction) holders older than this are stale"
                f" [default: {DEFAULT_IDLE_AFTER:g}].",
            ),
            click.option(
                "--mysql-lock",
                "mysql_locks",
                multiple=True,
                metavar="NAME",
                help="A GET_LOCK name to ask IS_USED_LOCK about (repeatable; MariaDB"
                " without the metadata_lock_info plugin).",
            ),
        ]

    def action_options(self, kind: Kind | None) -> Sequence[Decorator]:
        if kind is not None:
            return ()
        return [
            secret_option(
                "--mysql",
                "mysql_dsns",
                carries=IN_ARGUMENTS,
                multiple=True,
                metavar="DSN",
                help="The server a MySQL TARGET lives on (repeatable).",
            )
        ]

    def asked(self, values: Mapping[str, Any]) -> bool:
        return bool(values.get("mysql_dsns"))

    def clues(self, text: str) -> Sequence[Clue]:
        from lockwatch.sources.mysql.messages import clues

        return clues(text)

    def may_run(self, wanted: Wanted) -> bool:
        # Servers come from the flags or the [mysql] table only (settings.resolve).
        # --mysql-idle-after alone still loads the plugin: its select refuses a nan.
        return (
            self.asked(wanted.values)
            or wanted.values.get("mysql_idle_after") is not None
            or wanted.settings(self.name) is not None
        )


DECLARED = MysqlDeclared()
