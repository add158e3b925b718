"""Where the servers are, and how to name them without ever showing a password."""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Mapping, Sequence

from lockwatch.model.text import scrub_secrets

# Any of these in the environment means "libpq knows a server": the empty DSN uses them.
LIBPQ_SERVER_VARS = ("PGHOST", "PGHOSTADDR", "PGSERVICE", "PGDATABASE", "PGPORT")

_URL_USERINFO = re.compile(r"://[^:/@\s]*:([^@\s]*)@")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


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


class PasswordFileError(ValueError):
    """The config's password_file cannot be used; the message says why."""


def read_password_file(path: str) -> str:
    """The password in `path`: its first line. Refused when others may read it, as
    libpq refuses a ~/.pgpass that group or others can read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise PasswordFileError(f"password_file {path}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PasswordFileError(f"password_file {path}: not a regular file")
        if st.st_mode & 0o077:
            raise PasswordFileError(
                f"password_file {path}: group or others can read it (mode"
                f" {stat.S_IMODE(st.st_mode):o}); chmod 600 it"
            )
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    password = data.decode("utf-8", "replace").splitlines()[0] if data.strip() else ""
    if not password:
        raise PasswordFileError(f"password_file {path}: empty")
    return password


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


# -- a password on the command line ------------------------------------------------
#
# Every local user can read a process's arguments (`ps`, /proc/<pid>/cmdline)
# for as long as it runs. lockwatch overwrites the password in its own argument
# area once it has read it. Options weighed: `setproctitle` (a C extension: a
# dependency for one call), prctl(PR_SET_MM_ARG_START) (needs CAP_SYS_RESOURCE),
# or writing the bytes in place: the kernel shows /proc/<pid>/cmdline from the
# memory between the arg_start and arg_end that /proc/self/stat gives, and
# CPython works on its own copy of argv, so overwriting that memory (same
# length, ctypes) hides the password without a dependency. It is visible for
# the moment before (interpreter start, imports): the warning says so, and
# names the ways that never show it.

_noted = False


def note_command_line(flags: Sequence[str]) -> None:
    """For DSNs given as command-line flags: hide their passwords from the
    process title, and say once (one line on stderr) that they were seen."""
    global _noted
    secrets = {secret for dsn in flags for secret in _secrets(dsn)}
    if not secrets or _noted:
        return
    _noted = True
    hidden = hide_in_arguments(secrets)
    sys.stderr.write(
        "lockwatch: warning: a password in --pg is readable by every local user (ps) while"
        f" lockwatch starts{'' if hidden else ' and runs'}; use PGPASSFILE or ~/.pgpass,"
        " PGPASSWORD, or password_file in the config's [postgres] table\n"
    )
    sys.stderr.flush()


def hide_in_arguments(secrets: set[str]) -> bool:
    """Overwrite each of `secrets` with `*` in this process's argument memory, the
    bytes /proc/<pid>/cmdline (and so `ps`) shows. False where it cannot be done."""
    import ctypes

    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        # /proc/self/stat fields 48 and 49 (proc(5)); fields[0] is field 3.
        start, end = int(fields[45]), int(fields[46])
        with open("/proc/self/cmdline", "rb") as handle:
            shown = handle.read()
    except (OSError, ValueError, IndexError):
        return False
    if not 0 < start < end or end - start > 1 << 24:
        return False
    area = ctypes.string_at(start, end - start)
    if not shown or not area.startswith(shown.rstrip(b"\0")):
        return False  # not the bytes the kernel shows: touch nothing
    changed = area
    for secret in sorted(secrets, key=len, reverse=True):
        raw = os.fsencode(secret)
        changed = changed.replace(raw, b"*" * len(raw))
    if changed == area:
        return True
    for offset, (old, new) in enumerate(zip(area, changed, strict=True)):
        if old != new:
            ctypes.memset(start + offset, new, 1)
    return True


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
