"""etcd lock ids, built and parsed here and nowhere else: `etcd:<host:port>:<key>`.

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the etcd source's `id_prefix` (the registry's vocabulary of prefixes).
"""

from __future__ import annotations

from lockwatch.model.lazyre import lazy_compile
from lockwatch.sources.stores.ids import StoreId

ETCD = "etcd"

_ETCD = lazy_compile(r"etcd:(?P<server>(?:\[[0-9A-Fa-f:.]+\]|[^:/\[\]]+):\d+):(?P<key>.*)")


def etcd_id(server: str, key: str) -> str:
    return f"{ETCD}:{server}:{key}"


def parse_etcd(lock_id: str) -> StoreId | None:
    match = _ETCD.fullmatch(lock_id)
    return None if match is None else StoreId(match["server"], match["key"])
