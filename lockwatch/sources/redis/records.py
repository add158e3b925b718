"""Redis lock keys as lock records: which client library wrote each, who waits
for it, and for a Redlock group, how many servers hold it.

Formats, by what each library writes:

- python-redis-lock: `lock:<name>` = a random id (base64 of 18 bytes), its
  waiters blocked in BLPOP on the list `lock-signal:<name>`;
- pottery's Redlock: `redlock:<name>` = a uuid4, on every server of the group;
- redis-py's `Lock` (and its asyncio `Lock`): the name as given = a uuid's hex,
  `uuid1().hex` up to redis-py 8.1, `uuid4().hex` from 8.2.0 on;
- anything else a pattern matched: `redis`.

Keys that are not strings, and locks with no key, have format modules of
their own: redisson.py (hashes), semaphore.py (sorted sets), subscription.py
(portalocker's subscriptions, from CLIENT LIST).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.redis import ids, keyfacts, redisson, semaphore, subscription
from lockwatch.sources.redis.server import BlockedClient, RedisKey, RedisSnapshot, raw
from lockwatch.sources.stores.facts import REDIS, Quorum, QuorumMember, StoreClient, StoreLock

PY_REDIS_LOCK = "python-redis-lock"
REDLOCK = "redlock"
REDIS_PY = "redis-py"
GENERIC = "redis"
FORMATS = (
    REDIS_PY,
    PY_REDIS_LOCK,
    REDLOCK,
    GENERIC,
    *redisson.FORMATS,
    *semaphore.FORMATS,
    *subscription.FORMATS,
)
# Redisson's own bookkeeping beside a fair lock (its queue's timeouts): not a lock.
_REDISSON_INTERNAL = "redisson_"

PY_REDIS_LOCK_PREFIX = "lock:"
SIGNAL_PREFIX = "lock-signal:"
REDLOCK_PREFIX = "redlock:"
# redis-py's Lock token, as each release's redis/lock.py and redis/asyncio/lock.py
# write it: uuid.uuid1().hex from 5.0.0 (the oldest claimed) to 8.1.0,
# uuid.uuid4().hex from 8.2.0. Its 13th digit is the version (1 or 4) and its 17th
# the RFC 4122 variant (8, 9, a or b): a random 32-hex value has that shape 1 time
# in 32. No other library read here writes a bare hex uuid (pottery's and
# redis-semaphore's uuids are dashed, python-redis-lock's id base64), but a value
# set by hand as uuid4().hex cannot be told from redis-py 8.2's: it reads as
# redis-py, judged alike (`redis` has `redis-py`'s rules).
_REDIS_PY_TOKEN = lazy_compile(r"[0-9a-f]{12}[14][0-9a-f]{3}[89ab][0-9a-f]{15}")
# A BLPOP's timeout argument as python-redis-lock sends it (its `expire`, or 0):
# whole seconds, up to 999999.
_TIMEOUT_DIGITS = range(1, 7)


def detect(key: str, value: str) -> tuple[str, str]:
    """(format, name) of a lock key."""
    if key.startswith(PY_REDIS_LOCK_PREFIX):
        return PY_REDIS_LOCK, key[len(PY_REDIS_LOCK_PREFIX) :]
    if key.startswith(REDLOCK_PREFIX):
        return REDLOCK, key[len(REDLOCK_PREFIX) :]
    if _REDIS_PY_TOKEN.fullmatch(value):
        return REDIS_PY, key
    return GENERIC, key


def digest(value: str) -> str:
    """What an action compares: the sha256 of the value's bytes (the token)."""
    return hashlib.sha256(raw(value)).hexdigest()


def _ttl(pttl: int) -> float | None:
    return None if pttl < 0 else pttl / 1000


def to_locks(
    snapshot: RedisSnapshot,
    *,
    skip_redlock: bool = False,
    limits: Mapping[str, int] | None = None,
) -> list[Lock]:
    """One record per lock key, and one per client found waiting for one.
    `skip_redlock`: leave `redlock:` keys to the group this server is in;
    `limits`: redis-semaphore's limits by semaphore name, where known."""
    locks: list[Lock] = []
    waiting_for: list[tuple[int, str]] = []  # (index in locks, name) of python-redis-lock's
    for found in snapshot.keys:
        if skip_redlock and found.key.startswith(REDLOCK_PREFIX):
            continue
        fmt, name = detect(found.key, found.value)
        if fmt == PY_REDIS_LOCK:
            waiting_for.append((len(locks), name))
        locks.append(_lock(snapshot, found, fmt, name))
    if waiting_for and snapshot.blocked:
        locks.extend(_waiters(snapshot, locks, waiting_for))
    for collection in snapshot.collections:
        if collection.kind == "hash":
            locks.extend(redisson.to_locks(snapshot, collection))
        elif not collection.key.startswith(_REDISSON_INTERNAL):
            locks.extend(semaphore.to_locks(snapshot, collection, limits or {}))
    locks.extend(subscription.to_locks(snapshot))
    return locks


def _lock(snapshot: RedisSnapshot, found: RedisKey, fmt: str, name: str) -> Lock:
    ttl = _ttl(found.pttl)
    store = keyfacts.held(StoreLock, snapshot, found.key, found.value, ttl, value_bytes=found.size)
    content: dict[str, object] = {
        "server": snapshot.server,
        "key": found.key,
        "value": found.value,
        "pttl_ms": found.pttl,
    }
    if found.size is not None:
        content["value_bytes"] = found.size  # "value" is its start only
    return keyfacts.held_lock(
        store,
        ids.redis_id(snapshot.server, found.key),
        fmt,
        name,
        content=content,
        # The digest of a value read in part would be no value's: none, not a wrong one.
        sha256=digest(found.value) if found.size is None else None,
    )


def _fits(client: BlockedClient, signal: str) -> bool:
    """Whether `client`'s blocked command can be `BLPOP <signal> <timeout>`. Redis
    does not say which key a client waits on; CLIENT LIST's argv-mem is the summed
    length of its arguments, which rules out commands of any other size."""
    if client.command != "blpop" or client.argv_bytes is None:
        return False
    return client.argv_bytes - len("blpop") - len(raw(signal)) in _TIMEOUT_DIGITS


def _waiters(
    snapshot: RedisSnapshot, locks: list[Lock], waiting_for: list[tuple[int, str]]
) -> list[Lock]:
    """python-redis-lock's waiters: clients blocked in BLPOP on `lock-signal:<name>`
    in this database. A client is shown only where exactly one held lock fits it."""
    signals = [(index, SIGNAL_PREFIX + name) for index, name in waiting_for]
    by_lock: dict[int, list[BlockedClient]] = {}
    for client in snapshot.blocked:
        if client.db != snapshot.db:
            continue
        fitting = [index for index, signal in signals if _fits(client, signal)]
        if len(fitting) == 1:
            by_lock.setdefault(fitting[0], []).append(client)
    waiters: list[Lock] = []
    for index, clients in by_lock.items():
        holder = locks[index]
        held = holder.facts
        assert isinstance(held, StoreLock)
        clients.sort(key=lambda client: (-(client.idle or 0), client.id))
        sessions = tuple(f"client:{client.id}" for client in clients)
        locks[index] = replace(holder, facts=replace(held, blocking=sessions))
        for position, client in enumerate(clients, start=1):
            session = f"client:{client.id}"
            waited = client.idle
            store = keyfacts.waiting(
                StoreLock,
                snapshot,
                held.key,
                session,
                position,
                held.session,
                client=StoreClient(
                    client.id,
                    client.addr,
                    client.name or None,
                    client.command,
                    None if waited is None else float(waited),
                ),
            )
            host = client.addr.rpartition(":")[0].strip("[]") or None
            waiters.append(
                Lock(
                    id=ids.redis_id(snapshot.server, held.key, client.id),
                    source=REDIS,
                    format=holder.format,
                    name=holder.name,
                    path=None,
                    holder=Holder(host=host, session=session, operation="waiting"),
                    acquired_at=None
                    if waited is None
                    else snapshot.polled_at - timedelta(seconds=waited),
                    facts=store,
                )
            )
    return waiters


def group_name(servers: Sequence[str]) -> str:
    """A Redlock group's name: its servers' names, in the order configured."""
    return ",".join(servers)


def group_locks(
    group: str, members: Sequence[tuple[str, RedisSnapshot | None, str | None]]
) -> list[Lock]:
    """A Redlock group's `redlock:` keys, each once, with how many of the servers
    hold it with the same token. `members`: (server, its snapshot or None, why
    it could not be asked)."""
    answered = [snapshot for _, snapshot, _ in members if snapshot is not None]
    if not answered:
        return []
    polled_at = max(snapshot.polled_at for snapshot in answered)
    copies: dict[str, dict[str, RedisKey]] = {}
    for server, snapshot, _ in members:
        if snapshot is None:
            continue
        for found in snapshot.keys:
            if found.key.startswith(REDLOCK_PREFIX):
                copies.setdefault(found.key, {})[server] = found
    locks = []
    for key in sorted(copies):
        held = copies[key]
        counts = Counter(found.value for found in held.values())
        # The token most servers hold (ties: the smallest, so every poll agrees).
        token = min(counts, key=lambda value: (-counts[value], value))
        quorum_members = []
        for server, snapshot, problem in members:
            copy = held.get(server)
            if snapshot is None:
                quorum_members.append(QuorumMember(server, None, error=problem))
            elif copy is None:
                quorum_members.append(QuorumMember(server, False))
            else:
                quorum_members.append(
                    QuorumMember(server, copy.value == token, copy.value, _ttl(copy.pttl))
                )
        quorum = Quorum(
            servers=len(members),
            holding=counts[token],
            unknown=sum(1 for _, snapshot, _ in members if snapshot is None),
            members=tuple(quorum_members),
        )
        ttl = _quorum_ttl(
            [found.pttl for found in held.values() if found.value == token],
            [found.pttl for found in held.values()],
            quorum.needed,
        )
        store = StoreLock(
            REDIS,
            group,
            key,
            polled_at,
            value=token,
            ttl_left=ttl,
            session=token,
            quorum=quorum,
        )
        locks.append(
            Lock(
                id=ids.redis_id(group, key),
                source=REDIS,
                format=REDLOCK,
                name=key[len(REDLOCK_PREFIX) :],
                path=None,
                holder=Holder(session=token),
                ttl_seconds=ttl,
                expires_at=store.expires_at,
                content={
                    "server": group,
                    "key": key,
                    "value": token,
                    "copies": {server: [found.value, found.pttl] for server, found in held.items()},
                },
                sha256=digest(token),
                facts=store,
            )
        )
    return locks


def _quorum_ttl(holding: list[int], every: list[int], needed: int) -> float | None:
    """Seconds until the lock stops counting: while a majority holds it, until
    fewer than `needed` copies are left; without one, until the last copy (which
    still blocks acquirers) expires. None: some copies never expire."""
    never = float("inf")
    ttls = sorted((never if pttl < 0 else pttl for pttl in holding), reverse=True)
    if len(ttls) >= needed:
        left = ttls[needed - 1]
    else:
        left = max((never if pttl < 0 else pttl for pttl in every), default=never)
    return None if left == never else left / 1000
