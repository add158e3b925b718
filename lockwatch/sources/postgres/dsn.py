"""Where the servers are, and how to name them without ever showing a password."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

# Any of these in the environment means "libpq knows a server": the empty DSN uses them.
LIBPQ_SERVER_VARS = ("PGHOST", "PGHOSTADDR", "PGSERVICE", "PGDATABASE", "PGPORT")

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*):[^@\s]*@")
_URL_USERINFO = re.compile(r"://[^:/@\s]*:([^@\s]*)@")
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


def _secrets(dsn: str) -> set[str]:
    """Every form the DSN's password could take in a message: as parsed, and as
    written (percent-encoded, quoted) even when libpq rejects the DSN itself."""
    from urllib.parse import unquote

    from psycopg import conninfo  # only once a server is in play: `ls` alone stays light

    found: set[str] = set()
    try:
        parsed = conninfo.conninfo_to_dict(dsn).get("password")
        if parsed:
            found.add(str(parsed))
    except Exception:  # noqa: BLE001 - an unparseable DSN is still searched below
        pass
    match = _URL_USERINFO.search(dsn)
    if match:
        found.update({match.group(1), unquote(match.group(1))})
    for match in _KV_PASSWORD.finditer(dsn):
        raw = match.group(2)
        found.update({raw, raw.strip("'")})
    return {secret for secret in found if secret}


def scrub(text: str, dsn: str = "") -> str:
    """`text` with any password taken out: the DSN's own, and anything that looks
    like one in a URL or a key=value conninfo."""
    cleaned = text
    for secret in sorted(_secrets(dsn) if dsn else (), key=len, reverse=True):
        cleaned = cleaned.replace(secret, "***")
    cleaned = _URL_PASSWORD.sub(r"\1:***@", cleaned)
    return _KV_PASSWORD.sub(r"\1***", cleaned)


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
