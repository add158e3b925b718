"""What every run asks of the mysql source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import click

from lockwatch.sources.declaring import ServerDeclared, TargetOption, idle_after_option
from lockwatch.sources.secrets import InArguments, url_passwords

if TYPE_CHECKING:
    from lockwatch.sources.contract import Decorator

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


# The option naming its servers, in its listing and the action commands.
SERVERS = TargetOption("--mysql", "mysql_dsns", IN_ARGUMENTS, "DSN")


class MysqlDeclared(ServerDeclared):
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
    # A connection whose client process is gone: what it held went with it.
    holder_gone = frozenset({"client_dead"})
    # --mysql-idle-after alone still loads the plugin: its select refuses a nan.
    loading = ("mysql_idle_after",)
    target_option = SERVERS
    target_help = "The server a MySQL TARGET lives on (repeatable)."

    def options(self) -> Sequence[Decorator]:
        return [
            SERVERS.option(
                "A MySQL or MariaDB server: mysql://user@host:port/db or a unix socket's"
                " path (repeatable; password from MYSQL_PWD, ~/.my.cnf or mysql.password_file)."
            ),
            idle_after_option("--mysql-idle-after", DEFAULT_IDLE_AFTER),
            click.option(
                "--mysql-lock",
                "mysql_locks",
                multiple=True,
                metavar="NAME",
                help="A GET_LOCK name to ask IS_USED_LOCK about (repeatable; MariaDB"
                " without the metadata_lock_info plugin).",
            ),
        ]


DECLARED = MysqlDeclared()
