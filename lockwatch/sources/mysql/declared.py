"""What every run asks of the mysql source, without loading its plugin
(`sources/lazy.py`): its names, options and config table, and whether it may run."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from lockwatch.sources.declaring import Repeatable, ServerDeclared, TargetOption
from lockwatch.sources.secrets import InArguments, url_passwords

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


class MysqlDeclared(ServerDeclared):
    # Its id prefix is its name; it recognises its messages.py's; its locks wait (wait_metrics).
    name = "mysql"
    label = "my"
    summary = "MySQL/MariaDB: named locks, InnoDB lock waits, metadata-lock (DDL) queues"
    # [[locktables]] too: the lock tables it lists are in the one list both servers read.
    config_tables: tuple[str, ...] = ("mysql", "locktables")
    title = "MySQL"
    status_word = "my "
    wait_metrics: str | None = "mysql"
    # ... labelled `mysql:<server>`, as its blocking trees and episodes are.
    wait_label_prefixed = True
    # A connection whose client process is gone: what it held went with it.
    holder_gone = frozenset({"client_dead"})
    # --mysql-idle-after: alone, it still loads the plugin (its select refuses a nan).
    idle_after = DEFAULT_IDLE_AFTER
    # The option naming its servers: its listing's and the action commands'.
    target_option = TargetOption("--mysql", "mysql_dsns", IN_ARGUMENTS, "DSN")
    servers_help = (
        "A MySQL or MariaDB server: mysql://user@host:port/db or a unix socket's"
        " path (repeatable; password from MYSQL_PWD, ~/.my.cnf or mysql.password_file)."
    )
    target_help = "The server a MySQL TARGET lives on (repeatable)."
    repeatable = (
        Repeatable(
            "--mysql-lock",
            "mysql_locks",
            "NAME",
            "A GET_LOCK name to ask IS_USED_LOCK about (repeatable; MariaDB"
            " without the metadata_lock_info plugin).",
        ),
    )


DECLARED = MysqlDeclared()
