"""One Redis server: one quiet connection, polled.

A poll finds the lock keys with SCAN over the patterns (never KEYS: it would
stop the server on a large keyspace; patterns that share a literal run are
walked once, see patterns.py), reads each key's value and TTL in
pipelined batches, and asks CLIENT LIST for clients blocked waiting (for
python-redis-lock's signal lists). It writes nothing.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lockwatch.clock import Clock, SystemClock
from lockwatch.model.status import SourceStatus, backoff_seconds
from lockwatch.sources.deadline import DeadlineMissed, SocketLike, whole_answer
from lockwatch.sources.polled import DEFAULT_DEADLINE
from lockwatch.sources.redis.endpoint import RedisEndpoint
from lockwatch.sources.redis.patterns import scan_plan

if TYPE_CHECKING:
    import redis

# Keys asked for per SCAN call, and per pipelined batch of GET + PTTL.
SCAN_COUNT = 1000
BATCH = 1000
# A pattern that matches far more than locks (`*` on a big keyspace) must not
# make lockwatch hold the whole keyspace in memory: stop there and say so.
MAX_KEYS = 100_000
# Commands a client waits in when it blocks on a list (python-redis-lock: BLPOP).
BLOCKING_COMMANDS = frozenset({"blpop", "brpop", "blmove", "brpoplpush", "blmpop"})


@dataclass(frozen=True, slots=True)
class RedisKey:
    key: str  # surrogateescape text: exactly the server's bytes
    value: str  # the same for the value
    pttl: int  # milliseconds left; -1: no expiry


@dataclass(frozen=True, slots=True)
class BlockedClient:
    id: int
    addr: str
    name: str
    db: int
    command: str
    argv_bytes: int | None  # CLIENT LIST's argv-mem: the summed length of its arguments
    idle: int | None  # seconds since its last command: how long it has been blocked


@dataclass(frozen=True)
class RedisSnapshot:
    server: str
    db: int
    polled_at: datetime
    keys: list[RedisKey]
    blocked: list[BlockedClient]
    # Why waiters cannot be shown (CLIENT LIST refused), if they cannot.
    clients_problem: str | None = None
    truncated: bool = False


def text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def raw(value: str) -> bytes:
    return value.encode("utf-8", "surrogateescape")


class RedisServer:
    def __init__(
        self,
        endpoint: RedisEndpoint,
        patterns: tuple[str, ...],
        *,
        clock: Clock | None = None,
        timeout: float = 2.0,
        exact: tuple[str, ...] = (),
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        """`exact`: read these keys instead of scanning (an action's lookup).
        `timeout`: for connecting and for each read; `deadline`: for a poll's
        whole answer (connect, SCAN, values, CLIENT LIST)."""
        self.endpoint = endpoint
        self.name = endpoint.name
        self.patterns = patterns
        self._walks = scan_plan(patterns)
        self.exact = exact
        self.clock = clock or SystemClock()
        self._timeout = timeout
        self.deadline = deadline
        self._client: redis.Redis | None = None
        self._pool: redis.ConnectionPool | None = None
        self.failures = 0
        self.retry_in = 0.0
        self.last: RedisSnapshot | None = None
        self.status = SourceStatus("redis", self.name, "connecting")

    def poll(self) -> RedisSnapshot | None:
        """One poll. On failure the status says why, the connection is dropped
        (the next poll reconnects) and `last` keeps the last good snapshot."""
        import redis

        try:
            if self._client is None:
                self.status = SourceStatus(
                    "redis", self.name, "connecting", updated_at=self._updated_at()
                )
                self._pool = self.endpoint.pool(self._timeout)
            with whole_answer(self.deadline, self._sockets):
                if self._client is None:
                    self._client = self.endpoint.connect(self._timeout, self._pool)
                client = self._client
                names, truncated = (
                    ([raw(key) for key in self.exact], False) if self.exact else self._scan(client)
                )
                polled_at = self.clock.now()
                keys = self._read(client, names)
                blocked, problem = self._blocked(client)
        except (redis.RedisError, OSError, DeadlineMissed) as exc:
            self._fail(exc)
            return None
        self.failures = 0
        self.retry_in = 0.0
        self.last = RedisSnapshot(
            self.name, self.endpoint.db, polled_at, keys, blocked, problem, truncated
        )
        notes = [note for note in (problem,) if note]
        if truncated:
            notes.append(f"over {MAX_KEYS} keys match the patterns: only the first are listed")
        self.status = SourceStatus(
            "redis",
            self.name,
            "connected",
            reason="; ".join(notes) or None,
            updated_at=polled_at,
        )
        return self.last

    def _sockets(self) -> list[SocketLike]:
        """Every socket of the pool: the client's own connection (connecting, too),
        and a pipeline's."""
        pool = self._pool
        if pool is None:
            return []
        connections = [
            *getattr(pool, "_in_use_connections", ()),
            *getattr(pool, "_available_connections", ()),
        ]
        return [getattr(connection, "_sock", None) for connection in connections]

    def _scan(self, client: redis.Redis) -> tuple[list[bytes], bool]:
        found: dict[bytes, None] = {}
        for pattern, check in self._walks:
            cursor = 0
            while True:
                cursor, batch = client.scan(cursor, match=pattern, count=SCAN_COUNT)
                found.update(
                    (name, None)
                    for name in batch
                    if isinstance(name, bytes) and (check is None or check(name))
                )
                if len(found) >= MAX_KEYS:
                    return list(found)[:MAX_KEYS], True
                if not cursor:
                    break
        return list(found), False

    def _read(self, client: redis.Redis, names: list[bytes]) -> list[RedisKey]:
        """Each key's value and TTL. Keys that are not strings (hashes, lists such
        as python-redis-lock's signal lists) are not locks; keys gone since the
        SCAN are gone."""
        keys: list[RedisKey] = []
        for start in range(0, len(names), BATCH):
            chunk = names[start : start + BATCH]
            pipe = client.pipeline(transaction=False)
            for name in chunk:
                pipe.get(name)
                pipe.pttl(name)
            answers = pipe.execute(raise_on_error=False)
            for number, name in enumerate(chunk):
                value, pttl = answers[2 * number], answers[2 * number + 1]
                if not isinstance(value, bytes) or not isinstance(pttl, int) or pttl == -2:
                    continue
                keys.append(RedisKey(text(name), text(value), pttl))
        return keys

    def _blocked(self, client: redis.Redis) -> tuple[list[BlockedClient], str | None]:
        import redis

        try:
            listed = client.client_list(_type="normal")
        except redis.ResponseError as exc:
            reason = self.endpoint.scrub(str(exc).splitlines()[0] if str(exc) else "refused")
            return [], f"CLIENT LIST refused ({reason}): waiters cannot be shown"
        blocked = []
        for entry in listed:
            command = str(entry.get("cmd", ""))
            if "b" not in str(entry.get("flags", "")) or command not in BLOCKING_COMMANDS:
                continue
            blocked.append(
                BlockedClient(
                    id=_int(entry.get("id")) or 0,
                    addr=str(entry.get("addr", "")),
                    name=str(entry.get("name", "")),
                    db=_int(entry.get("db")) or 0,
                    command=command,
                    argv_bytes=_int(entry.get("argv-mem")),
                    idle=_int(entry.get("idle")),
                )
            )
        return blocked, None

    def _updated_at(self) -> datetime | None:
        return self.last.polled_at if self.last else None

    def _fail(self, exc: BaseException) -> None:
        import redis

        self.failures += 1
        self.close()
        delay = backoff_seconds(self.failures, random.uniform(-1.0, 1.0))
        away = isinstance(
            exc, redis.ConnectionError | redis.TimeoutError | OSError | DeadlineMissed
        ) and not isinstance(exc, redis.AuthenticationError)
        self.status = SourceStatus(
            "redis",
            self.name,
            "disconnected" if away else "error",
            reason=describe(exc, self.endpoint),
            updated_at=self._updated_at(),
            next_retry_at=self.clock.now() + timedelta(seconds=delay),
        )
        self.retry_in = delay

    def close(self) -> None:
        client, self._client = self._client, None
        pool, self._pool = self._pool, None
        # A broken connection is gone either way.
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.disconnect()


def describe(exc: BaseException, endpoint: RedisEndpoint) -> str:
    """A one-line reason an operator can act on, never with a password in it."""
    import redis

    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, DeadlineMissed):
        return first
    if isinstance(exc, redis.AuthenticationError) or "WRONGPASS" in first or "NOAUTH" in first:
        hint = f" (the password came from {endpoint.password_from})" if endpoint.password else ""
        first = (
            f"{first} — a wrong or missing password: give it in the URL, REDISCLI_AUTH or"
            f" redis.password_file{hint}"
        )
    elif "NOPERM" in first:
        first = f"{first} — lockwatch needs SCAN, GET, PTTL and CLIENT LIST"
    return endpoint.scrub(first)


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None
