"""KILL with compare-and-swap, on a connection of its own (never the monitor's).

MariaDB: one anonymous block checks the thread and kills it in the same
statement, or SIGNALs (1644) and kills nothing. MySQL has no such block: the
same check runs just before the KILL, on the same connection.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pymysql

from lockwatch.model.action import ActionFailed, ActionRefused
from lockwatch.model.lock import Lock
from lockwatch.sources.mysql.dsn import Endpoint
from lockwatch.sources.mysql.facts import GET_LOCK, INNODB_ROW, MyLock

TIMEOUT_S = 5.0
REFUSED_MESSAGE = "lockwatch: target changed, not killed"


def conditions(lock: Lock, *, untouched: bool) -> tuple[str, list[Any]]:
    """The WHERE clause over PROCESSLIST `p` that holds only for the thread seen."""
    my = lock.facts
    assert isinstance(my, MyLock)
    session = my.session
    seen = lock.content if isinstance(lock.content, dict) else {}
    clauses = ["p.ID = %s", "p.USER = %s", "p.HOST = %s"]
    args: list[Any] = [session.thread_id, session.user or "", session.host or ""]
    started = seen.get("trx_started")
    if my.granted and my.kind == INNODB_ROW and started is not None:
        clauses.append(
            "EXISTS (SELECT 1 FROM information_schema.INNODB_TRX t"
            " WHERE t.trx_mysql_thread_id = p.ID AND t.trx_started = %s)"
        )
        args.append(started)
    if my.granted and my.kind == GET_LOCK:
        clauses.append("IS_USED_LOCK(%s) = p.ID")
        args.append(my.target)
    if untouched:
        clauses.append("p.COMMAND = 'Sleep'")
        if session.query_id is not None:
            clauses.append("p.QUERY_ID = %s")
            args.append(session.query_id)
    if not my.granted and session.query_id is not None:
        clauses.append("p.QUERY_ID = %s")  # the very statement that waits
        args.append(session.query_id)
    return " AND ".join(clauses), args


def kill(endpoint: Endpoint, lock: Lock, *, connection: bool, untouched: bool) -> None:
    my = lock.facts
    assert isinstance(my, MyLock)
    thread = my.session.thread_id
    where, args = conditions(lock, untouched=untouched)
    what = "CONNECTION" if connection else "QUERY"
    try:
        conn = pymysql.connect(**endpoint.connect_args(TIMEOUT_S))
    except (pymysql.Error, OSError) as exc:
        from lockwatch.sources.mysql.server import describe

        raise ActionFailed(
            "no_connection", f"cannot reach {my.server}: {describe(exc, endpoint)}"
        ) from None
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            version = str((cursor.fetchone() or ("",))[0])
            check = f"SELECT 1 FROM information_schema.PROCESSLIST p WHERE {where}"
            if "mariadb" in version.lower():
                block = (
                    f"BEGIN NOT ATOMIC IF EXISTS ({check}) THEN KILL {what} {int(thread)};"
                    f" ELSE SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{REFUSED_MESSAGE}';"
                    " END IF; END"
                )
                cursor.execute(block, args)
            else:
                cursor.execute(check, args)
                if cursor.fetchone() is None:
                    raise refusal(1644, REFUSED_MESSAGE, thread)
                cursor.execute(f"KILL {what} {int(thread)}")
    except pymysql.Error as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
        message = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        raise refusal(code, endpoint.scrub(message), thread) from None
    finally:
        with contextlib.suppress(pymysql.Error, OSError):
            conn.close()


def refusal(code: int, message: str, thread: int) -> ActionRefused | ActionFailed:
    """What the server's answer to a kill means."""
    if code == 1644 or REFUSED_MESSAGE in message:
        return ActionRefused(
            "changed",
            f"thread {thread} is not as it was seen (another connection, transaction or"
            " statement since): nothing killed",
        )
    if code in (1094, 1957):
        return ActionRefused("gone", f"thread {thread} is gone already: nothing killed")
    if code == 1095:
        return ActionRefused(
            "insufficient_privilege",
            f"lockwatch's user may not kill thread {thread}: GRANT CONNECTION ADMIN ON *.* TO it"
            f" (MySQL 8: CONNECTION_ADMIN). The server said: {message}",
        )
    return ActionFailed("kill_failed", f"KILL of thread {thread} failed: ({code}) {message}")
