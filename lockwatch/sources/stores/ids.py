"""What a Redis id and an etcd id parse to: a server and a key. Each store's
ids are built and parsed in its own package (sources/redis/ids.py,
sources/etcd/ids.py); this is only the shape both parsers return.
"""

from __future__ import annotations

from lockwatch.model.slots import lean_dataclass


@lean_dataclass(frozen=True, slots=True)
class StoreId:
    server: str  # a server's (or a Redlock group's) display name
    key: str  # the key, and for a Redis waiter `#client=<id>` after it
