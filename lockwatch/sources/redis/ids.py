"""Redis lock ids, built and parsed here and nowhere else:

    redis:<host:port/db>[,<host:port/db>...]:<key>[#client=<id>]
    redis:<host:port/db>:<key>#holder=<member>      one holder of a semaphore
    redis:<host:port/db>:<key>#waiter=<uuid:thread> a Redisson fair lock's queued waiter
    redis:<host:port/db>:<channel>#pubsub=<id>      a subscription lock's connection

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the redis source's `id_prefix` (the registry's vocabulary of prefixes).
"""

from __future__ import annotations

from lockwatch.model.lazyre import lazy_compile
from lockwatch.sources.stores.ids import StoreId

REDIS = "redis"

# A Redis server is `host:port/db` (`[v6]:port/db`, or `unix:<socket path>/db`);
# a Redlock group is its servers joined by commas.
_REDIS_SERVER = r"(?:\[[0-9A-Fa-f:.]+\]|[^:/,\[\]]+):\d+/\d+|unix:/[^:,]*/\d+"
_REDIS = lazy_compile(
    rf"redis:(?P<server>(?:{_REDIS_SERVER})(?:,(?:{_REDIS_SERVER}))*):(?P<key>.*)"
)


# What follows a key in an id that names one party of it, not the key's lock.
_PARTY = lazy_compile(r"#(?:client|holder|waiter|pubsub)=[^#]*\Z")


def redis_id(
    server: str,
    key: str,
    client: int | None = None,
    *,
    holder: str | None = None,
    waiter: str | None = None,
    pubsub: int | None = None,
) -> str:
    """`client`: a client waiting for the lock at `key`, not the lock itself;
    `holder`: one holder (a sorted set's member) of the semaphore at `key`;
    `waiter`: a waiter queued for the Redisson fair lock at `key`;
    `pubsub`: the connection holding the subscription lock on channel `key`."""
    base = f"{REDIS}:{server}:{key}"
    if client is not None:
        return f"{base}#client={client}"
    if holder is not None:
        return f"{base}#holder={holder}"
    if waiter is not None:
        return f"{base}#waiter={waiter}"
    if pubsub is not None:
        return f"{base}#pubsub={pubsub}"
    return base


def key_of(key: str) -> tuple[str, str | None]:
    """A parsed id's key without its party, and the party's kind (`client`,
    `holder`, `waiter`, `pubsub`) if it names one."""
    match = _PARTY.search(key)
    if match is None:
        return key, None
    return key[: match.start()], match.group(0)[1:].partition("=")[0]


def parse_redis(lock_id: str) -> StoreId | None:
    match = _REDIS.fullmatch(lock_id)
    return None if match is None else StoreId(match["server"], match["key"])
