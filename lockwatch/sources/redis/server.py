"""One Redis server: one quiet connection, polled.

A poll finds the lock keys with SCAN over the patterns (never KEYS: it would
stop the server on a large keyspace; patterns that share a literal run are
walked once, see patterns.py), reads each key's value and TTL in
pipelined batches, and asks CLIENT LIST for clients blocked waiting (for
python-redis-lock's signal lists) and for connections named as portalocker's
subscription locks name theirs. Matching keys that are hashes or sorted sets
(Redisson's locks, redis-semaphore's semaphores) are read too, at most
MAX_MEMBERS entries each. It writes nothing.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.clock import Clock
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.status import SourceStatus
from lockwatch.sources.backoff import ServerState, failed
from lockwatch.sources.contract import DEFAULT_DEADLINE
from lockwatch.sources.deadline import DeadlineMissed, SocketLike, whole_answer
from lockwatch.sources.redis.endpoint import RedisEndpoint
from lockwatch.sources.redis.patterns import scan_plan

if TYPE_CHECKING:
    import redis

# Keys asked for per SCAN call, and per pipelined batch of GETRANGE, STRLEN and PTTL.
SCAN_COUNT = 1000
BATCH = 1000
# A pattern that matches far more than locks (`*` on a big keyspace) must not
# make lockwatch hold the whole keyspace in memory: stop there and say so.
MAX_KEYS = 100_000
# Commands a client waits in when it blocks on a list (python-redis-lock: BLPOP).
BLOCKING_COMMANDS = frozenset({"blpop", "brpop", "blmove", "brpoplpush", "blmpop"})
# Entries read of a matching hash or sorted set: a lock has one (Redisson) or a
# semaphore's limit of them; a huge collection a pattern happens to match must
# not cost a poll its size.
MAX_MEMBERS = 100
# And at most this many entries in all, per poll (a semaphore's holder is a lock
# record each): past it, the remaining collections are not read, and the status says so.
MAX_ENTRIES = 100_000
# What is read of a string key's value, as of a lock file (scanner.MAX_LOCK_BYTES):
# a token is a few dozen bytes; a 50 MiB value must not cost a poll (or `ls
# --json`, which prints it twice) its size. GETRANGE reads the start, STRLEN says
# how long the whole is.
MAX_VALUE_BYTES = 64 * 1024
# portalocker's RedisLock names its subscription connection `<channel>-lock-<holder
# id, uuid4 hex>` (`<channel>-lock` up to portalocker 3.2).
SUBSCRIBER_NAME = lazy_compile(r"(?P<channel>.+)-lock(?:-(?P<holder>[0-9a-f]{32}))?", re.DOTALL)


@dataclass(frozen=True, slots=True)
class RedisKey:
    key: str  # surrogateescape text: exactly the server's bytes
    value: str  # the same for the value (its first MAX_VALUE_BYTES)
    pttl: int  # milliseconds left; -1: no expiry
    size: int | None = None  # the whole value's length, when it was longer than read


@dataclass(frozen=True, slots=True)
class BlockedClient:
    id: int
    addr: str
    name: str
    db: int
    command: str
    argv_bytes: int | None  # CLIENT LIST's argv-mem: the summed length of its arguments
    idle: int | None  # seconds since its last command: how long it has been blocked


@dataclass(frozen=True, slots=True)
class RedisCollection:
    """A matching key that is a hash or a sorted set: its first entries."""

    key: str
    kind: str  # "hash" or "zset"
    pttl: int
    size: int  # HLEN / ZCARD
    # (field, value) of a hash; (member, score as Redis prints it) of a sorted
    # set, lowest score first. At most MAX_MEMBERS.
    entries: tuple[tuple[str, str], ...]
    # A hash's Redisson fair-lock queue, in order: (entry, its timeout score or
    # None), from `redisson_lock_queue:{key}` and `redisson_lock_timeout:{key}`.
    queue: tuple[tuple[str, str | None], ...] = ()


def redisson_names(key: str) -> tuple[str, str]:
    """A Redisson fair lock's queue and timeout-set names (its prefixName: the
    lock's name in braces, unless it has a hash tag already)."""
    tagged = key if "{" in key else "{" + key + "}"
    return f"redisson_lock_queue:{tagged}", f"redisson_lock_timeout:{tagged}"


@dataclass(frozen=True, slots=True)
class Subscriber:
    """A connection in subscribe mode whose name is a subscription lock's."""

    id: int
    addr: str
    name: str
    channel: str
    holder: str | None  # portalocker's holder id (None: a pre-4.0 holder)
    age: int | None  # seconds since the connection was opened
    idle: int | None  # seconds since its last command
    channels: int | None  # how many channels it subscribes to (CLIENT LIST's sub)


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
    collections: tuple[RedisCollection, ...] = ()
    subscribers: tuple[Subscriber, ...] = ()
    # PUBSUB NUMSUB of each subscriber's channel: how many connections Redis
    # counts on it (portalocker's own test of whether the lock is free).
    numsub: tuple[tuple[str, int], ...] = ()
    # Whether MAX_ENTRIES stopped the reading of hashes and sorted sets.
    entries_truncated: bool = False


def text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def raw(value: str) -> bytes:
    return value.encode("utf-8", "surrogateescape")


class RedisServer(ServerState):
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
        super().__init__("redis", endpoint.name, clock, deadline)
        self.endpoint = endpoint
        self.patterns = patterns
        self._walks = scan_plan(patterns)
        self.exact = exact
        self._timeout = timeout
        self._client: redis.Redis | None = None
        self._pool: redis.ConnectionPool | None = None
        self.last: RedisSnapshot | None = None

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
                keys, collections, capped = self._read(client, names)
                blocked, subscribers, problem = self._clients(client)
                numsub = self._numsub(client, subscribers)
        except (redis.RedisError, OSError, DeadlineMissed) as exc:
            self._fail(exc)
            return None
        self.failures = 0
        self.retry_in = 0.0
        self.last = RedisSnapshot(
            self.name,
            self.endpoint.db,
            polled_at,
            keys,
            blocked,
            problem,
            truncated,
            tuple(collections),
            tuple(subscribers),
            numsub,
            capped,
        )
        notes = [note for note in (problem,) if note]
        if truncated:
            notes.append(f"over {MAX_KEYS} keys match the patterns: only the first are listed")
        if capped:
            notes.append(
                f"over {MAX_ENTRIES} entries in matching hashes and sorted sets: only the"
                " first are read"
            )
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

    def _read(
        self, client: redis.Redis, names: list[bytes]
    ) -> tuple[list[RedisKey], list[RedisCollection], bool]:
        """Each key's value and TTL. Hashes and sorted sets are read as
        collections; other keys that are not strings (lists such as
        python-redis-lock's signal lists) are not locks; keys gone since the SCAN
        are gone."""
        import redis

        keys: list[RedisKey] = []
        others: list[tuple[bytes, int]] = []
        for start in range(0, len(names), BATCH):
            chunk = names[start : start + BATCH]
            pipe = client.pipeline(transaction=False)
            for name in chunk:
                pipe.getrange(name, 0, MAX_VALUE_BYTES - 1)
                pipe.strlen(name)
                pipe.pttl(name)
            answers = pipe.execute(raise_on_error=False)
            for number, name in enumerate(chunk):
                value, size, pttl = answers[3 * number : 3 * number + 3]
                if not isinstance(pttl, int) or pttl == -2:
                    continue
                if isinstance(value, redis.ResponseError) and "WRONGTYPE" in str(value):
                    others.append((name, pttl))
                elif isinstance(value, bytes):
                    cut = size if isinstance(size, int) and size > len(value) else None
                    keys.append(RedisKey(text(name), text(value), pttl, cut))
        collections, capped = self._collections(client, others)
        return keys, collections, capped

    def _collections(
        self, client: redis.Redis, others: list[tuple[bytes, int]]
    ) -> tuple[list[RedisCollection], bool]:
        """Hashes' and sorted sets' first MAX_MEMBERS entries, in pipelined
        batches: TYPE; then HSCAN (a hash's whole, when it is small: its size is
        then what came back) and the LRANGE of a Redisson fair lock's queue, or
        ZCARD and ZRANGE; then, only for queues that are not empty, their timeouts.
        A hash costs five commands with its GET and PTTL, a string lock two.
        Stops at MAX_ENTRIES entries in all (True: it did)."""
        found: list[RedisCollection] = []
        total = 0
        for start in range(0, len(others), BATCH):
            if total >= MAX_ENTRIES:
                return found, True
            chunk = others[start : start + BATCH]
            pipe = client.pipeline(transaction=False)
            for name, _ in chunk:
                pipe.type(name)
            types = pipe.execute(raise_on_error=False)
            wanted = [
                (name, pttl, kind)
                for (name, pttl), kind in zip(chunk, types, strict=True)
                if kind in (b"hash", b"zset")
            ]
            if not wanted:
                continue
            pipe = client.pipeline(transaction=False)
            for name, _, kind in wanted:
                if kind == b"hash":
                    pipe.hscan(name, 0, count=MAX_MEMBERS)
                    pipe.lrange(raw(redisson_names(text(name))[0]), 0, MAX_MEMBERS - 1)
                else:
                    pipe.zcard(name)
                    pipe.zrange(name, 0, MAX_MEMBERS - 1, withscores=True, score_cast_func=bytes)
            answers = pipe.execute(raise_on_error=False)
            read: list[tuple[bytes, int, str, int, list[Any], list[bytes]]] = []
            for number, (name, pttl, kind) in enumerate(wanted):
                first, second = answers[2 * number], answers[2 * number + 1]
                if kind == b"hash" and isinstance(first, tuple | list) and len(first) == 2:
                    cursor, fields = first
                    pairs = list(fields.items()) if isinstance(fields, dict) else []
                    # A hash HSCAN did not return whole is no lock's: say it is bigger.
                    size = len(pairs) if cursor == 0 else max(len(pairs), MAX_MEMBERS) + 1
                    queue = (
                        [e for e in second if isinstance(e, bytes)]
                        if isinstance(second, list)
                        else []
                    )
                    read.append((name, pttl, "hash", size, pairs, queue))
                elif kind == b"zset" and isinstance(first, int) and isinstance(second, list):
                    read.append((name, pttl, "zset", first, list(second), []))
            timeouts = self._timeouts(client, [name for name, *_, queue in read if queue])
            for name, pttl, kind, size, pairs, queue in read:
                if size == 0:
                    continue  # gone since
                entries = tuple(
                    (text(field), text(value))
                    for field, value in pairs[:MAX_MEMBERS]
                    if isinstance(field, bytes) and isinstance(value, bytes)
                )
                scores = timeouts.get(name, {})
                queued = tuple(
                    (text(entry), None if entry not in scores else text(scores[entry]))
                    for entry in queue
                )
                found.append(RedisCollection(text(name), kind, pttl, size, entries, queued))
                total += len(entries) + len(queued)
        return found, False

    def _timeouts(self, client: redis.Redis, names: list[bytes]) -> dict[bytes, dict[bytes, bytes]]:
        """Each Redisson fair lock's waiters' timeouts, for the locks with a queue."""
        if not names:
            return {}
        pipe = client.pipeline(transaction=False)
        for name in names:
            timeouts = raw(redisson_names(text(name))[1])
            pipe.zrange(timeouts, 0, MAX_MEMBERS - 1, withscores=True, score_cast_func=bytes)
        answers = pipe.execute(raise_on_error=False)
        return {
            name: {m: v for m, v in answer if isinstance(m, bytes) and isinstance(v, bytes)}
            for name, answer in zip(names, answers, strict=True)
            if isinstance(answer, list)
        }

    def _clients(
        self, client: redis.Redis
    ) -> tuple[list[BlockedClient], list[Subscriber], str | None]:
        """One CLIENT LIST: clients blocked on a list, and subscription locks'
        connections (in subscribe mode, named `<channel>-lock-<id>`)."""
        import redis

        try:
            listed = client.client_list()
        except redis.ResponseError as exc:
            reason = self.endpoint.scrub(str(exc).splitlines()[0] if str(exc) else "refused")
            return [], [], f"CLIENT LIST refused ({reason}): waiters cannot be shown"
        blocked = []
        subscribers = []
        for entry in listed:
            command = str(entry.get("cmd", ""))
            flags = str(entry.get("flags", ""))
            if "P" in flags and (_int(entry.get("sub")) or 0) > 0:
                named = SUBSCRIBER_NAME.fullmatch(str(entry.get("name", "")))
                if named is not None:
                    subscribers.append(
                        Subscriber(
                            id=_int(entry.get("id")) or 0,
                            addr=str(entry.get("addr", "")),
                            name=named.group(0),
                            channel=named["channel"],
                            holder=named["holder"],
                            age=_int(entry.get("age")),
                            idle=_int(entry.get("idle")),
                            channels=_int(entry.get("sub")),
                        )
                    )
                continue
            if "b" not in flags or command not in BLOCKING_COMMANDS:
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
        return blocked, subscribers, None

    def _numsub(
        self, client: redis.Redis, subscribers: list[Subscriber]
    ) -> tuple[tuple[str, int], ...]:
        channels = list(dict.fromkeys(subscriber.channel for subscriber in subscribers))
        if not channels:
            return ()
        import redis

        try:
            answer = client.pubsub_numsub(*[raw(channel) for channel in channels])
        except redis.ResponseError:
            return ()  # PUBSUB refused (an ACL): the holders are still CLIENT LIST's
        return tuple(
            (text(channel), int(count))
            for channel, count in answer
            if isinstance(channel, bytes) and isinstance(count, int)
        )

    def _updated_at(self) -> datetime | None:
        return self.last.polled_at if self.last else None

    def _fail(self, exc: BaseException) -> None:
        import redis

        away = isinstance(
            exc, redis.ConnectionError | redis.TimeoutError | OSError | DeadlineMissed
        ) and not isinstance(exc, redis.AuthenticationError)
        reason = describe(exc, self.endpoint)
        failed(self, "redis", reason, away=away, updated_at=self._updated_at())

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
        first = (
            f"{first} — lockwatch needs SCAN, GET, PTTL, TYPE, HSCAN, LRANGE, ZCARD, ZRANGE,"
            " CLIENT LIST and PUBSUB"
        )
    return endpoint.scrub(first)


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None
