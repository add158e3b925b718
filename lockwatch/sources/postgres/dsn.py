"""Where the servers are, and how to name them without ever showing a password."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

# Any of these in the environment means "libpq knows a server": the empty DSN uses them.
LIBPQ_SERVER_VARS = ("PGHOST", "PGHOSTADDR", "PGSERVICE", "PGDATABASE", "PGPORT")

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*):[^@\s]*@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def resolve_dsns(
    flags: Sequence[str], configured: Sequence[str], environ: Mapping[str, str]
) -> list[str]:
    """Flags win over LOCKWATCH_PG, which wins over the config file, which wins over
    libpq's own PG* variables (used through an empty DSN)."""
    if flags:
        return list(dict.fromkeys(flags))
    if environ.get("LOCKWATCH_PG"):
        return [environ["LOCKWATCH_PG"]]
    if configured:
        return list(dict.fromkeys(configured))
    if any(environ.get(name) for name in LIBPQ_SERVER_VARS):
        return [""]
    return []


def scrub(text: str, dsn: str = "") -> str:
    """`text` with any password taken out: the DSN's own, and anything that looks
    like one in a URL or a key=value conninfo."""
    from psycopg import conninfo  # only once a server is in play: `ls` alone stays light

    password = ""
    if dsn:
        try:
            password = str(conninfo.conninfo_to_dict(dsn).get("password") or "")
        except Exception:  # noqa: BLE001 - an unparseable DSN still gets the regexes below
            password = ""
    cleaned = _URL_PASSWORD.sub(r"\1:***@", text)
    cleaned = _KV_PASSWORD.sub(r"\1***", cleaned)
    if password:
        cleaned = cleaned.replace(password, "***")
    return cleaned


def display_name(dsn: str) -> str:
    """`user@host:port/dbname`: what the screen, JSON and audit call a server."""
    from psycopg import conninfo

    try:
        params = conninfo.conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - psycopg raises ProgrammingError for bad syntax
        return scrub(dsn) or "(invalid DSN)"
    environ = os.environ
    host = str(params.get("host") or params.get("hostaddr") or environ.get("PGHOST") or "local")
    port = str(params.get("port") or environ.get("PGPORT") or "5432")
    user = str(params.get("user") or environ.get("PGUSER") or "")
    dbname = str(params.get("dbname") or environ.get("PGDATABASE") or user or "")
    if host.startswith("/"):
        host = "local"
    return f"{user + '@' if user else ''}{host}:{port}/{dbname}"
