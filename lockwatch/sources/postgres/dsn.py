"""Where the servers are, and how to name them without ever showing a password."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.text import scrub_secrets
from lockwatch.sources.secrets import InArguments, hide_from_arguments, read_password_file

# Any of these in the environment means "libpq knows a server": the empty DSN uses them.
LIBPQ_SERVER_VARS = ("PGHOST", "PGHOSTADDR", "PGSERVICE", "PGDATABASE", "PGPORT")

_URL_USERINFO = lazy_compile(r"://[^:/@\s]*:([^@\s]*)@")
_KV_PASSWORD = lazy_compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def resolve_dsns(
    flags: Sequence[str],
    configured: Sequence[str],
    environ: Mapping[str, str],
    *,
    password_file: str | None = None,
) -> list[str]:
    """Flags win over LOCKWATCH_PG, which wins over the config file, which wins over
    libpq's own PG* variables (used through an empty DSN).

    Passwords: a DSN without one is left to libpq, which reads PGPASSWORD, then
    PGPASSFILE (default ~/.pgpass) itself; `password_file` (the config's
    [postgres] password_file) gives one to the DSNs that have none. A password
    in a flag is hidden from the process title and warned about."""
    if flags:
        note_command_line(flags)
        found = list(dict.fromkeys(flags))
    elif environ.get("LOCKWATCH_PG"):
        found = [environ["LOCKWATCH_PG"]]
    elif configured:
        found = list(dict.fromkeys(configured))
    elif any(environ.get(name) for name in LIBPQ_SERVER_VARS):
        found = [""]
    else:
        return []
    if password_file is None:
        return found
    password = read_password_file(password_file)
    return [with_password(dsn, password) for dsn in found]


def with_password(dsn: str, password: str) -> str:
    """`dsn` with `password`, unless it names one already."""
    import psycopg
    from psycopg import conninfo

    try:
        if conninfo.conninfo_to_dict(dsn).get("password"):
            return dsn
    except psycopg.ProgrammingError:
        return dsn  # unusable anyway: the connection says why
    return conninfo.make_conninfo(dsn, password=password)


def note_command_line(flags: Sequence[str]) -> None:
    """For DSNs given as command-line flags: hide their passwords from the
    process's arguments, and say once (one line on stderr) that they were seen.
    (The --pg option does it as it is parsed; this is for callers that were
    handed the flags some other way.)"""
    hide_from_arguments(flags, IN_ARGUMENTS)


def _secrets(dsn: str) -> set[str]:
    """Every form the DSN's password could take in a message: as parsed, and as
    written (percent-encoded, quoted) even when libpq rejects the DSN itself."""
    from urllib.parse import unquote

    import psycopg  # only once a server is in play: `ls` alone stays light
    from psycopg import conninfo

    found: set[str] = set()
    try:
        parsed = conninfo.conninfo_to_dict(dsn).get("password")
        if parsed:
            found.add(str(parsed))
    except psycopg.ProgrammingError:  # unparseable: still searched below
        pass
    match = _URL_USERINFO.search(dsn)
    if match:
        found.update({match.group(1), unquote(match.group(1))})
    for match in _KV_PASSWORD.finditer(dsn):
        raw = match.group(2)
        found.update({raw, raw.strip("'")})
    return {secret for secret in found if secret}


# --pg's values may carry a password: hidden from `ps` as soon as they are parsed.
IN_ARGUMENTS = InArguments(
    "--pg",
    _secrets,
    "PGPASSFILE or ~/.pgpass, PGPASSWORD, or password_file in the config's [postgres] table",
)


def scrub(text: str, dsn: str = "") -> str:
    """`text` with any password taken out: the DSN's own, and anything that looks
    like one in a URL or a key=value conninfo."""
    cleaned = text
    for secret in sorted(_secrets(dsn) if dsn else (), key=len, reverse=True):
        cleaned = cleaned.replace(secret, "***")
    return scrub_secrets(cleaned)


def problem(dsn: str) -> str | None:
    """What makes `dsn` unusable before any connection is tried, in words that do
    not repeat it. libpq would read `postgresql://u:p@ss@h/db` as host `ss@h` and
    print it: a password split by an unencoded @ must never get that far."""
    scheme, sep, rest = dsn.partition("://")
    if sep and scheme.lower() in ("postgres", "postgresql"):
        authority = re.split(r"[/?]", rest, maxsplit=1)[0]
        if authority.count("@") > 1:
            return (
                "the DSN has more than one '@' before the host: write an '@' in the password as %40"
            )
    return None


def malformed(dsn: str) -> str | None:
    """Why libpq cannot read `dsn` at all (a usage error, not a server that is
    away), in words that do not repeat it; None when it parses."""
    import psycopg
    from psycopg import conninfo

    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        return f"not a connection string libpq can read ({scrub(str(exc).strip(), dsn)})"
    for port in str(params.get("port") or "").split(","):
        if port and not port.strip().isdigit():
            return f"the port {scrub(port, dsn)!r} is not a number"
    return None


def display_name(dsn: str) -> str:
    """`user@host:port/dbname`: what the screen, JSON and audit call a server."""
    import psycopg
    from psycopg import conninfo

    if problem(dsn):
        return "(invalid DSN)"
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return scrub(dsn, dsn) or "(invalid DSN)"
    environ = os.environ
    host = str(params.get("host") or params.get("hostaddr") or environ.get("PGHOST") or "local")
    port = str(params.get("port") or environ.get("PGPORT") or "5432")
    user = str(params.get("user") or environ.get("PGUSER") or "")
    dbname = str(params.get("dbname") or environ.get("PGDATABASE") or user or "")
    if host.startswith("/"):
        host = "local"
    return f"{user + '@' if user else ''}{host}:{port}/{dbname}"


def dsn_from_name(server: str) -> str | None:
    """`user@host:port/db` (a lock id's server) as a DSN: libpq finds any password
    in PGPASSWORD or ~/.pgpass."""
    match = re.fullmatch(
        r"(?:(?P<user>[^@:/]+)@)?(?P<host>[^:/]+):(?P<port>\d+)/(?P<db>.*)", server
    )
    if match is None:
        return None
    from psycopg.conninfo import make_conninfo

    params = {"port": match["port"]}
    if match["host"] != "local":
        params["host"] = match["host"]
    if match["user"]:
        params["user"] = match["user"]
    if match["db"]:
        params["dbname"] = match["db"]
    return make_conninfo("", **params)
