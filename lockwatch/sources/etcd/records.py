"""etcd keys as lock records.

The v3 concurrency mutex and election (`etcdctl lock`/`elect`, the Go
client's concurrency.Mutex and Election and the clients modelled on them) put
one key per contender at `<name>/<lease id in hex>`, attached to the
contender's session lease; the etcd3 npm client's Election writes
`election/<name>/<lease id in decimal>`. Either way the key with the lowest
create revision holds the lock (leads), the others wait in that order. Any
other key under the prefixes (python-etcd3's `Lock` writes `<prefix><name>`
with a token as its value) is a lock of its own, held while the key exists.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.etcd import ids
from lockwatch.sources.etcd.gateway import KeyValue
from lockwatch.sources.etcd.server import EtcdSnapshot
from lockwatch.sources.stores.facts import ETCD, StoreLock

MUTEX = "etcd-mutex"
GENERIC = "etcd"
FORMATS = (MUTEX, GENERIC)


def digest(kv: KeyValue) -> str:
    """What an action compares: the key, its revisions, its lease and its value."""
    seen = f"{kv.key}\0{kv.create_revision}\0{kv.mod_revision}\0{kv.lease}\0{kv.value}"
    return hashlib.sha256(seen.encode("utf-8", "surrogateescape")).hexdigest()


def mutex_name(kv: KeyValue) -> str | None:
    """The mutex or election `kv` contends for, when it is a contender's key:
    `<name>/<its lease>`, the lease in hex (Go's concurrency package, etcdctl)
    or in decimal (the etcd3 npm client)."""
    parent, sep, last = kv.key.rpartition("/")
    if sep and kv.lease and last in (format(kv.lease, "x"), str(kv.lease)):
        return parent
    return None


def to_locks(snapshot: EtcdSnapshot) -> list[Lock]:
    mutexes: dict[str, list[KeyValue]] = {}
    locks: list[Lock] = []
    for kv in snapshot.keys:
        name = mutex_name(kv)
        if name is None:
            session = kv.value or (format(kv.lease, "x") if kv.lease else "")
            locks.append(_lock(snapshot, kv, GENERIC, kv.key, session))
        else:
            mutexes.setdefault(name, []).append(kv)
    for name in sorted(mutexes):
        queue = sorted(mutexes[name], key=lambda kv: kv.create_revision)
        holder = format(queue[0].lease, "x")
        waiters = tuple(format(kv.lease, "x") for kv in queue[1:])
        for position, kv in enumerate(queue):
            locks.append(
                _lock(
                    snapshot,
                    kv,
                    MUTEX,
                    name,
                    format(kv.lease, "x"),
                    position=position,
                    blocked_by=(holder,) if position else (),
                    blocking=() if position else waiters,
                )
            )
    return locks


def _lock(
    snapshot: EtcdSnapshot,
    kv: KeyValue,
    fmt: str,
    name: str,
    session: str,
    *,
    position: int = 0,
    blocked_by: tuple[str, ...] = (),
    blocking: tuple[str, ...] = (),
) -> Lock:
    left: float | None = None
    granted: float | None = None
    if kv.lease:
        ttl, granted_ttl = snapshot.leases.get(kv.lease, (-1, 0))
        # -1: the lease is gone, and the key with it; None: alive, not read lately.
        left = None if ttl is None else float(max(ttl, 0))
        granted = float(granted_ttl) if granted_ttl > 0 else None
    store = StoreLock(
        ETCD,
        snapshot.server,
        kv.key,
        snapshot.polled_at,
        value=kv.value,
        ttl_left=left,
        lease=kv.lease or None,
        granted_ttl=granted,
        create_revision=kv.create_revision,
        mod_revision=kv.mod_revision,
        version=kv.version,
        revision=snapshot.revision,
        position=position,
        waiting=position > 0,
        session=session,
        blocked_by=blocked_by,
        blocking=blocking,
    )
    return Lock(
        id=ids.etcd_id(snapshot.server, kv.key),
        source=ETCD,
        format=fmt,
        name=name,
        path=None,
        holder=Holder(session=session or None),
        ttl_seconds=granted,
        expires_at=None if left is None else snapshot.polled_at + timedelta(seconds=left),
        content={
            "server": snapshot.server,
            "key": kv.key,
            "value": kv.value,
            "lease": store.lease_hex,
            "create_revision": kv.create_revision,
            "mod_revision": kv.mod_revision,
            "version": kv.version,
            "ttl_left_seconds": left,
            "granted_ttl_seconds": granted,
        },
        sha256=digest(kv),
        facts=store,
    )
