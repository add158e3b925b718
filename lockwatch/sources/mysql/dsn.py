"""Where a MySQL or MariaDB server is, how to log in, and what to call it
without ever showing a password.

A DSN is `mysql://user[:password]@host[:port][/db]` (`mariadb://` alike), a
socket as `mysql://user@/db?socket=/run/mysqld/mysqld.sock`, or a socket's
absolute path alone. The password comes from the DSN, else MYSQL_PWD, else the
config's `password_file`, else an option file (the config's `option_file`, or
~/.my.cnf where it exists: its [client] group, as the mysql client reads it).

A server is named `user@host:port` (`user@unix:<socket>` for a socket): in lock
ids, the JSON, the screen and the audit log.
"""

from __future__ import annotations

import getpass
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from lockwatch.sources.contract import SourceError
from lockwatch.sources.mysql.declared import IN_ARGUMENTS
from lockwatch.sources.secrets import hide_from_arguments
from lockwatch.sources.urls import host_port, scrub

DEFAULT_PORT = 3306
SCHEMES = ("mysql", "mariadb")
PASSWORD_ENV = "MYSQL_PWD"
DEFAULT_OPTION_FILE = "~/.my.cnf"


@dataclass(frozen=True)
class Endpoint:
    dsn: str = field(repr=False)  # as given: it may carry a password, so never shown
    name: str  # user@host:port or user@unix:/path
    user: str
    host: str | None
    port: int
    socket: str | None
    database: str | None
    password: str | None = field(default=None, repr=False)
    password_from: str | None = None  # "dsn", MYSQL_PWD, "password_file", or None
    option_file: str | None = None

    def secrets(self) -> tuple[str, ...]:
        found = [self.password] if self.password else []
        try:
            parts = urlsplit(self.dsn)
            if parts.password:
                found.append(parts.password)
        except ValueError:
            pass
        return tuple(found)

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets())

    def connect_args(self, timeout: float) -> dict[str, Any]:
        """PyMySQL's connect() arguments: every network read has its deadline."""
        args: dict[str, Any] = {
            "user": self.user,
            "connect_timeout": max(1, int(timeout)),
            "read_timeout": max(1, int(timeout)),
            "write_timeout": max(1, int(timeout)),
            "autocommit": True,
            "charset": "utf8mb4",
            "program_name": "lockwatch",
        }
        if self.socket:
            args["unix_socket"] = self.socket
        else:
            args["host"] = self.host
            args["port"] = self.port
        if self.database:
            args["database"] = self.database
        if self.password is not None:
            args["password"] = self.password
        elif self.option_file:
            args["read_default_file"] = self.option_file
        return args


def parse(
    dsn: str,
    environ: Mapping[str, str],
    password_file: str | None = None,
    option_file: str | None = None,
) -> Endpoint:
    """`dsn` as an endpoint; SourceError when it cannot be one (never repeating a password)."""
    shown = scrub(dsn)
    if dsn.startswith("/"):
        user = environ.get("USER") or getpass.getuser()
        return _with_password(
            Endpoint(dsn, f"{user}@unix:{dsn}", user, None, DEFAULT_PORT, dsn, None),
            environ,
            password_file,
            option_file,
        )
    try:
        parts = urlsplit(dsn)
        port = parts.port
    except ValueError as exc:
        raise SourceError(f"--mysql {shown}: not a usable DSN ({scrub(str(exc))})") from None
    if parts.scheme.lower() not in SCHEMES:
        raise SourceError(
            f"--mysql {shown}: write mysql://user@host:port/db, or a unix socket's path"
        )
    if "@" in parts.netloc and parts.netloc.count("@") > 1:
        raise SourceError(f"--mysql {shown}: write an '@' in the password as %40")
    query = parse_qs(parts.query)
    sockets = query.get("socket") or query.get("unix_socket") or []
    socket = sockets[0] if sockets else None
    user = unquote(parts.username) if parts.username else environ.get("USER") or getpass.getuser()
    database = parts.path.strip("/") or None
    if socket:
        if not socket.startswith("/"):
            raise SourceError(f"--mysql {shown}: the socket must be an absolute path")
        endpoint = Endpoint(
            dsn, f"{user}@unix:{socket}", user, None, DEFAULT_PORT, socket, database
        )
    else:
        host = parts.hostname or "localhost"
        where = host_port(host, port or DEFAULT_PORT)
        endpoint = Endpoint(
            dsn, f"{user}@{where}", user, host, port or DEFAULT_PORT, None, database
        )
    if parts.password:
        return _replace(endpoint, unquote(parts.password), "dsn", None)
    return _with_password(endpoint, environ, password_file, option_file)


def _replace(
    endpoint: Endpoint, password: str | None, source: str | None, option_file: str | None
) -> Endpoint:
    from dataclasses import replace

    return replace(endpoint, password=password, password_from=source, option_file=option_file)


def _with_password(
    endpoint: Endpoint,
    environ: Mapping[str, str],
    password_file: str | None,
    option_file: str | None,
) -> Endpoint:
    if environ.get(PASSWORD_ENV):
        return _replace(endpoint, environ[PASSWORD_ENV], PASSWORD_ENV, None)
    if password_file is not None:
        return _replace(endpoint, read_password_file(password_file), "password_file", None)
    found = option_file or os.path.expanduser(DEFAULT_OPTION_FILE)
    return _replace(endpoint, None, None, found if os.path.isfile(found) else None)


def read_password_file(path: str) -> str:
    """Its first line; refused when group or others may read it."""
    from lockwatch.sources.secrets import PasswordFileError
    from lockwatch.sources.secrets import read_password_file as read

    try:
        return read(os.path.expanduser(path))
    except PasswordFileError as exc:
        raise SourceError(f"mysql.{exc}") from None


def server_for(name: str) -> str | None:
    """A DSN for a display name (a lock id's server), when nobody gave one."""
    user, sep, where = name.partition("@")
    if not sep:
        return None
    if where.startswith("unix:"):
        return f"mysql://{user}@/?socket={where[len('unix:') :]}"
    return f"mysql://{user}@{where}"


# -- a password on the command line ------------------------------------------------


def note_command_line(dsns: Sequence[str]) -> None:
    """For DSNs given as flags: hide their passwords from the process's arguments
    (`ps`, /proc/<pid>/cmdline), and say once on stderr that they were seen."""
    hide_from_arguments(dsns, IN_ARGUMENTS)


# Servers this run was told about: actions reconnect to them as listed.
_KNOWN: dict[str, Endpoint] = {}
_KNOWN_LOCK = threading.Lock()


def remember(endpoints: Sequence[Endpoint]) -> None:
    with _KNOWN_LOCK:
        for endpoint in endpoints:
            _KNOWN[endpoint.name] = endpoint


def endpoint_for(
    name: str, environ: Mapping[str, str], password_file: str | None = None
) -> Endpoint | None:
    with _KNOWN_LOCK:
        known = _KNOWN.get(name)
    if known is not None:
        return known
    dsn = server_for(name)
    return None if dsn is None else parse(dsn, environ, password_file)
