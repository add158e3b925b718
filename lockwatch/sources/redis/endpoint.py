"""Where a Redis server is, how to log in, and what to call it without ever
showing a password.

A server is named `host:port/db` (`unix:<socket>/db` for a socket): in lock
ids, the JSON, the screen and the audit log. Its password comes from the URL,
else REDISCLI_AUTH (as redis-cli takes it), else the config's `password_file`.

An action reconnects to a server as the run was told of it (flags, config),
with the URL and password it was listed with: the provider's `reach` (`Reach`)
hands those on, by name, to the CLI's commands and the dashboard alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

from lockwatch.sources.contract import SourceError
from lockwatch.sources.urls import host_port, scrub

if TYPE_CHECKING:
    from collections.abc import Mapping

    import redis

    from lockwatch.sources.contract import Wanted
    from lockwatch.sources.redis.plugin import RedisSettings

DEFAULT_PORT = 6379
SCHEMES = ("redis", "rediss", "unix")
PASSWORD_ENV = "REDISCLI_AUTH"


@dataclass(frozen=True)
class RedisEndpoint:
    # As given: it may carry a password, so it is never shown.
    url: str = field(repr=False)
    name: str  # host:port/db
    db: int
    password: str | None = field(default=None, repr=False)
    # Where the password came from, for messages: "url", REDISCLI_AUTH, "password_file".
    password_from: str | None = None

    def secrets(self) -> tuple[str, ...]:
        found = [self.password] if self.password else []
        parts = urlsplit(self.url)
        if parts.password:
            found.append(parts.password)
        found.extend(parse_qs(parts.query).get("password", []))
        return tuple(found)

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets())

    def connect(
        self, timeout: float = 2.0, pool: redis.ConnectionPool | None = None
    ) -> redis.Redis:
        """A client on one connection, opened now (redis-py connects a single
        connection client as it is made): `pool`'s, where the caller wants to see
        its sockets while it connects (a deadline's watchdog). No retries inside
        redis-py: a server that is away is the poller's backoff's business."""
        import redis

        return redis.Redis(
            connection_pool=pool or self.pool(timeout), single_connection_client=True
        )

    def pool(self, timeout: float = 2.0) -> redis.ConnectionPool:
        """The connection pool a client is made on: its connections' settings,
        `timeout` for connecting and for each read; nothing opened yet."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        options: dict[str, object] = {
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
            "client_name": "lockwatch",
            "retry": Retry(NoBackoff(), 0),
            # RESP2: every server speaks it, and a missing password is then
            # "NOAUTH", not a puzzle about HELLO.
            "protocol": 2,
        }
        if self.password_from != "url" and self.password is not None:
            options["password"] = self.password
        return redis.ConnectionPool.from_url(self.url, **options)


def parse(url: str, environ: Mapping[str, str], password_file: str | None = None) -> RedisEndpoint:
    """`url` (redis://, rediss://, unix://) as an endpoint; SourceError when it
    cannot be one (the message never repeats a password)."""
    shown = scrub(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise SourceError(f"--redis {shown}: not a usable URL ({scrub(str(exc))})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise SourceError(
            f"--redis {shown}: the URL must start with redis://, rediss:// or unix://"
        )
    query = parse_qs(parts.query)
    db_text = (query.get("db") or [""])[0] or (parts.path.strip("/") if scheme != "unix" else "")
    try:
        db = int(db_text or 0)
    except ValueError:
        raise SourceError(f"--redis {shown}: the database must be a number") from None
    if db < 0:
        raise SourceError(f"--redis {shown}: the database must be a number >= 0")
    if scheme == "unix":
        if not parts.path.startswith("/"):
            raise SourceError(f"--redis {shown}: a unix:// URL needs an absolute socket path")
        name = f"unix:{parts.path}/{db}"
    else:
        if not parts.hostname:
            raise SourceError(f"--redis {shown}: no host in the URL")
        name = f"{host_port(parts.hostname, port or DEFAULT_PORT)}/{db}"
    in_url = unquote(parts.password) if parts.password else (query.get("password") or [""])[0]
    if in_url:
        return RedisEndpoint(url, name, db, in_url, "url")
    if environ.get(PASSWORD_ENV):
        return RedisEndpoint(url, name, db, environ[PASSWORD_ENV], PASSWORD_ENV)
    if password_file is not None:
        return RedisEndpoint(url, name, db, read_password(password_file), "password_file")
    return RedisEndpoint(url, name, db)


def read_password(path: str) -> str:
    """The first line of the config's password_file."""
    import os

    try:
        from lockwatch.trusted import read_file  # bounded; a file only you or root wrote

        return read_file(os.path.expanduser(path), 4096).decode().partition("\n")[0].rstrip("\r")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise SourceError(f"redis.password_file {path}: cannot read it: {reason}") from None


def url_for(name: str) -> str | None:
    """A URL for a display name (a lock id's server), when nobody gave one."""
    if name.startswith("unix:"):
        path, _, db = name[len("unix:") :].rpartition("/")
        return f"unix://{path}?db={db}" if path and db.isdigit() else None
    where, _, db = name.rpartition("/")
    if not where or not db.isdigit() or ":" not in where:
        return None
    return f"redis://{where}/{db}"


# The name the provider's reach goes by in `Doing.reach`.
REACH = "redis_endpoint"


@dataclass(frozen=True)
class Reach:
    """The servers a run was told of (flags, config), by name; any other name is
    reached as it reads (with REDISCLI_AUTH or the password file for a password)."""

    known: Mapping[str, RedisEndpoint]
    environ: Mapping[str, str] = field(repr=False)
    password_file: str | None = None

    def __call__(self, name: str) -> RedisEndpoint | None:
        known = self.known.get(name)
        if known is not None:
            return known
        url = url_for(name)
        return None if url is None else parse(url, self.environ, self.password_file)


def named(
    wanted: Wanted, settings: RedisSettings | None
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """The servers' URLs a run names: --redis (else the config's), and the Redlock
    groups of --redlock (else the config's), each a tuple of URLs."""
    urls = tuple(wanted.values.get("redis_urls") or ())
    flagged = tuple(
        tuple(url.strip() for url in group.split(",") if url.strip())
        for group in wanted.values.get("redlock_groups") or ()
    )
    if settings is None:
        return urls, flagged
    return urls or settings.urls, flagged or settings.redlock


def reach_of(wanted: Wanted) -> Reach:
    """How actions reach the servers `wanted` names, with their URLs and
    passwords (the provider's reach); other names as they read."""
    settings: RedisSettings | None = wanted.settings("redis")
    password_file = settings.password_file if settings is not None else None
    urls, groups = named(wanted, settings)
    every = (*urls, *(url for group in groups for url in group))
    known = [parse(url, wanted.environ, password_file) for url in dict.fromkeys(every)]
    by_name = {endpoint.name: endpoint for endpoint in known}
    return Reach(by_name, wanted.environ, password_file)


def endpoint_for(name: str, reach: Mapping[str, Any]) -> RedisEndpoint | None:
    """The server `name` stands for, as the run's reach has it (none handed on: as
    the name reads, with this process's environment)."""
    import os

    found = reach.get(REACH) or Reach({}, os.environ)
    endpoint: RedisEndpoint | None = found(name)
    return endpoint


def endpoint_to_act_on(name: str, reach: Mapping[str, Any]) -> RedisEndpoint:
    """`endpoint_for` for an action: the server it must reach, or the failure
    that says how to name it."""
    from lockwatch.model.action import ActionFailed

    endpoint = endpoint_for(name, reach)
    if endpoint is None:
        raise ActionFailed("unreachable", f"{name}: no URL for it (name it with --redis)")
    return endpoint
