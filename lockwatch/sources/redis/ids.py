"""Redis lock ids, built and parsed here and nowhere else:

    redis:<host:port/db>[,<host:port/db>...]:<key>[#client=<id>]

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the redis source's `id_prefix` (the registry's vocabulary of prefixes).
"""

from __future__ import annotations

import re

from lockwatch.sources.stores.ids import StoreId

REDIS = "redis"

# A Redis server is `host:port/db` (`[v6]:port/db`, or `unix:<socket path>/db`);
# a Redlock group is its servers joined by commas.
_REDIS_SERVER = r"(?:\[[0-9A-Fa-f:.]+\]|[^:/,\[\]]+):\d+/\d+|unix:/[^:,]*/\d+"
_REDIS = re.compile(rf"redis:(?P<server>(?:{_REDIS_SERVER})(?:,(?:{_REDIS_SERVER}))*):(?P<key>.*)")


def redis_id(server: str, key: str, client: int | None = None) -> str:
    """`client`: a client waiting for the lock at `key`, not the lock itself."""
    return f"{REDIS}:{server}:{key}" + ("" if client is None else f"#client={client}")


def parse_redis(lock_id: str) -> StoreId | None:
    match = _REDIS.fullmatch(lock_id)
    return None if match is None else StoreId(match["server"], match["key"])
