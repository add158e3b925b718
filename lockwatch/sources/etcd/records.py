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


# What a key's lock record carries that the key alone decides (one per key a
# poll reads): the key as read, the mutex it contends for (None: a lock of its
# own), its session (holder or waiter), its holder, lock id, digest and lease
# in hex (None: no lease).
Derived = tuple[KeyValue, str | None, str, Holder, str, str, str | None]


def derive(server: str, kv: KeyValue) -> Derived:
    name = mutex_name(kv)
    lease_hex = format(kv.lease, "x") if kv.lease else None
    session = (kv.value or lease_hex or "") if name is None else format(kv.lease, "x")
    holder = Holder(session=session or None)
    return kv, name, session, holder, ids.etcd_id(server, kv.key), digest(kv), lease_hex


class Records:
    """A poller's lock records, poll after poll: what each key decides alone is
    kept from the last poll while the key is unchanged (most keys, most polls:
    10,000 of them took a third of a poll's time to derive again each time)."""

    def __init__(self) -> None:
        self._seen: dict[str, Derived] = {}

    def to_locks(self, snapshot: EtcdSnapshot) -> list[Lock]:
        seen, kept = self._seen, {}
        server = snapshot.server
        mutexes: dict[str, list[Derived]] = {}
        locks: list[Lock] = []
        for kv in snapshot.keys:
            derived = seen.get(kv.key)
            if derived is None or (derived[0] is not kv and derived[0] != kv):
                derived = derive(server, kv)
            kept[kv.key] = derived
            name = derived[1]
            if name is None:
                locks.append(_lock(snapshot, derived, GENERIC, kv.key, 0, (), ()))
            else:
                mutexes.setdefault(name, []).append(derived)
        for name in sorted(mutexes):
            queue = mutexes[name]
            if len(queue) > 1:
                queue.sort(key=lambda derived: derived[0].create_revision)
            holder = queue[0][2]
            waiters = tuple(derived[2] for derived in queue[1:])
            locks.append(_lock(snapshot, queue[0], MUTEX, name, 0, (), waiters))
            for position in range(1, len(queue)):
                locks.append(_lock(snapshot, queue[position], MUTEX, name, position, (holder,), ()))
        self._seen = kept
        return locks


def to_locks(snapshot: EtcdSnapshot) -> list[Lock]:
    """One snapshot's lock records, from nothing kept."""
    return Records().to_locks(snapshot)


def _lock(
    snapshot: EtcdSnapshot,
    derived: Derived,
    fmt: str,
    name: str,
    position: int,
    blocked_by: tuple[str, ...],
    blocking: tuple[str, ...],
) -> Lock:
    # Positional: 10,000 calls a poll, where keywords cost a tenth of the records' time.
    kv, _, session, holder, lock_id, sha, lease_hex = derived
    left: float | None = None
    granted: float | None = None
    if kv.lease:
        ttl, granted_ttl = snapshot.leases.get(kv.lease, (-1, 0))
        # -1: the lease is gone, and the key with it; None: alive, not read lately.
        left = None if ttl is None else float(max(ttl, 0))
        granted = float(granted_ttl) if granted_ttl > 0 else None
    polled_at, server = snapshot.polled_at, snapshot.server
    store = StoreLock(
        ETCD,
        server,
        kv.key,
        polled_at,
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
        id=lock_id,
        source=ETCD,
        format=fmt,
        name=name,
        path=None,
        holder=holder,
        ttl_seconds=granted,
        expires_at=None if left is None else polled_at + timedelta(seconds=left),
        content={
            "server": server,
            "key": kv.key,
            "value": kv.value,
            "lease": lease_hex,
            "create_revision": kv.create_revision,
            "mod_revision": kv.mod_revision,
            "version": kv.version,
            "ttl_left_seconds": left,
            "granted_ttl_seconds": granted,
        },
        sha256=sha,
        facts=store,
    )
