"""Small pure helpers the PostgreSQL facts, rules and actions share: SQL string
literals, the commands that end a prepared transaction, and whether a client
address is on the server's own host."""

from __future__ import annotations

from lockwatch.model.humanize import counted

# Whether a client address is on the server's own host: every server source's
# question, answered where their client lookup is (re-exported for rules, records).
from lockwatch.sources.clients import local_client as local_client


def sql_literal(text: str) -> str:
    """`text` as an SQL string literal (standard_conforming_strings: quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def sessions(count: int) -> str:
    """ "1 session", "2 sessions"."""
    return counted(count, "session")


def prepared_commands(gid: str) -> tuple[str, str]:
    """What ends a prepared transaction, one way or the other."""
    return f"COMMIT PREPARED {sql_literal(gid)}", f"ROLLBACK PREPARED {sql_literal(gid)}"
