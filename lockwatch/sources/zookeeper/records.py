"""A ZooKeeper snapshot's lock records: one per contender (holder or waiter)
and one per empty lock parent, judged by rules.py."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from lockwatch.model.lock import Holder, Lock
from lockwatch.sources.zookeeper import ids
from lockwatch.sources.zookeeper.facts import ZOOKEEPER, ZkLock
from lockwatch.sources.zookeeper.ids import SEMAPHORE_QUEUE
from lockwatch.sources.zookeeper.recipes import (
    DATA_SHOWN,
    KAZOO_LEASE,
    KAZOO_SEMAPHORE,
    LEASE,
    LEASE_HOLDER,
    LIBRARY,
    ORPHANED,
    Contender,
    Node,
    contenders,
    kazoo_lease,
    kazoo_leases,
    lockish,
)
from lockwatch.sources.zookeeper.rules import CONNECTED, DISCONNECTED, NO_SESSION, UNKNOWN
from lockwatch.sources.zookeeper.server import Parent, ZkSnapshot


def digest(path: str, node: Node) -> str:
    """What an action compares: the znode, its creation, its session and its version."""
    seen = f"{path}\0{node.czxid}\0{node.owner}\0{node.version}\0{node.cversion}"
    return hashlib.sha256(seen.encode("utf-8", "surrogateescape")).hexdigest()


def _session(node: Node, snapshot: ZkSnapshot) -> tuple[str, str | None, str | None]:
    """(its session's state, its client, why that is unknown)."""
    if not node.owner:
        return NO_SESSION, None, None
    client = snapshot.sessions.get(node.owner)
    if client is not None:
        return CONNECTED, client, None
    if snapshot.sessions_why is None:
        return DISCONNECTED, None, None
    return UNKNOWN, None, snapshot.sessions_why


def _ctime(node: Node) -> datetime | None:
    return datetime.fromtimestamp(node.ctime_ms / 1000, UTC) if node.ctime_ms else None


def _semaphore_of(parent: Parent, by_path: dict[str, Parent]) -> Parent | None:
    """The kazoo semaphore whose queue `parent` is (`<semaphore>-__lock__`), if any."""
    if not parent.path.endswith(SEMAPHORE_QUEUE):
        return None
    semaphore = by_path.get(parent.path[: -len(SEMAPHORE_QUEUE)])
    return semaphore if semaphore is not None and semaphore.kazoo_semaphore else None


def _full(semaphore: Parent) -> bool:
    return len(semaphore.children) >= (semaphore.max_leases or 1)


def _node_session(node: Node) -> str:
    return f"0x{node.owner:x}" if node.owner else f"node {node.name}"


def to_locks(snapshot: ZkSnapshot) -> list[Lock]:
    locks: list[Lock] = []
    by_path = {parent.path: parent for parent in snapshot.parents}
    # A full kazoo semaphore's queue waits on its leases' holders (and they block it).
    queued_for: dict[str, tuple[str, ...]] = {}
    for parent in snapshot.parents:
        semaphore = _semaphore_of(parent, by_path)
        if semaphore is not None and _full(semaphore):
            queued_for[semaphore.path] = tuple(_node_session(n) for n in parent.children)
    for parent in snapshot.parents:
        semaphore = _semaphore_of(parent, by_path)
        if parent.kazoo_semaphore:
            found = kazoo_leases(parent.children)
            queue = Queue(parent.path, waiters=queued_for.get(parent.path, ()))
        else:
            found = contenders(parent.children)
            queue = Queue(parent.path)
            if semaphore is not None:
                holders = tuple(_node_session(n) for n in semaphore.children)
                queue = Queue(semaphore.path, holders if _full(semaphore) else ())
        locks.extend(_queue(snapshot, parent, queue, found))
        lease = _lease_lock(snapshot, parent)
        if lease is not None:
            locks.append(lease)
    siblings = {p.path.rpartition("/")[0] for p in snapshot.parents}
    for empty in snapshot.empties:
        if _orphan(empty, snapshot, siblings):
            locks.append(_orphan_lock(snapshot, empty))
    return locks


@dataclass(frozen=True)
class Queue:
    """What a parent's contenders queue for: its name, and, for a kazoo
    semaphore, whom its queue waits on (the leases' holders, when all are taken)
    or who waits on its leases."""

    name: str
    lease_holders: tuple[str, ...] = ()
    waiters: tuple[str, ...] = ()


def _orphan(empty: Parent, snapshot: ZkSnapshot, siblings: set[str]) -> bool:
    """An empty znode that was a lock path: named like one, beside lock paths,
    or named by --zk-path (any empty znode whose children came and went could be
    a queue or a directory; these are the ones that are locks')."""
    above, _, own = empty.path.rpartition("/")
    return (
        lockish(own)
        or lockish(above.rpartition("/")[2])
        or (above or "/") in siblings
        or empty.path in snapshot.roots
    )


def _queue(
    snapshot: ZkSnapshot, parent: Parent, queue: Queue, found: list[Contender]
) -> list[Lock]:
    server = snapshot.server
    by_name = {c.node.name: c.node for c in found}
    waiting_on: dict[str, list[str]] = {}
    for c in found:
        for holder in c.blocked_by:
            waiting_on.setdefault(holder, []).append(_node_session(c.node))
    queued = bool(queue.lease_holders)
    # Who waits in this queue: a kazoo semaphore's leases count its queue's.
    waiting = len(queue.waiters) + sum(not c.holds or queued for c in found)
    locks = []
    for c in found:
        state, client, why = _session(c.node, snapshot)
        holds = c.holds and not queued
        if queued:
            blocked = queue.lease_holders
        else:
            blocked = tuple(_node_session(by_name[n]) for n in c.blocked_by if n in by_name)
        blocking = tuple(waiting_on.get(c.node.name, ())) or queue.waiters
        facts = ZkLock(
            server,
            parent.path,
            c.node.name,
            c.recipe,
            LIBRARY[c.recipe],
            c.mode,
            snapshot.polled_at,
            czxid=c.node.czxid,
            version=c.node.version,
            owner=c.node.owner,
            identifier=c.node.data,
            position=c.position,
            holds=holds,
            blocked_by=blocked if not holds else (),
            blocking=blocking if holds else (),
            conflict=c.conflict,
            session_state=state,
            client=client,
            session_why=why,
            max_leases=parent.max_leases if c.recipe == KAZOO_SEMAPHORE else None,
            queue_length=waiting,
        )
        path = f"{parent.path.rstrip('/')}/{c.node.name}"
        locks.append(_lock(server, path, queue.name, c.recipe, c.node, facts))
    return locks


def _lease_lock(snapshot: ZkSnapshot, parent: Parent) -> Lock | None:
    """A kazoo NonBlockingLease: its `lease_holder` node, held by whom its data
    names until the end it gives (no session: the node is persistent)."""
    node = next((n for n in parent.children if n.name == LEASE_HOLDER), None)
    lease = kazoo_lease(node.data) if node is not None else None
    if node is None or lease is None:
        return None
    holder, end = lease
    state, client, why = _session(node, snapshot)
    facts = ZkLock(
        snapshot.server,
        parent.path,
        node.name,
        KAZOO_LEASE,
        LIBRARY[KAZOO_LEASE],
        LEASE,
        snapshot.polled_at,
        czxid=node.czxid,
        version=node.version,
        owner=node.owner,
        identifier=holder[:DATA_SHOWN],
        session_state=state,
        client=client,
        session_why=why,
        lease_end=end,
    )
    path = f"{parent.path.rstrip('/')}/{node.name}"
    return _lock(snapshot.server, path, parent.path, KAZOO_LEASE, node, facts, end)


def _orphan_lock(snapshot: ZkSnapshot, empty: Parent) -> Lock:
    node = empty.stat
    facts = ZkLock(
        snapshot.server,
        empty.path,
        "",
        ORPHANED,
        "",
        "",
        snapshot.polled_at,
        czxid=node.czxid,
        version=node.version,
        orphan=True,
        cversion=node.cversion,
    )
    return _lock(snapshot.server, empty.path, empty.path, ORPHANED, node, facts)


def _lock(
    server: str,
    path: str,
    name: str,
    recipe: str,
    node: Node,
    facts: ZkLock,
    expires_at: datetime | None = None,
) -> Lock:
    return Lock(
        id=ids.zk_id(server, path),
        source=ZOOKEEPER,
        format=recipe,
        name=name,
        path=None,
        holder=Holder(
            session=facts.session if not facts.orphan else None,
            actor=facts.identifier or None,
        ),
        acquired_at=_ctime(node) if not facts.orphan else None,
        expires_at=expires_at,
        content=facts.as_json(),
        sha256=digest(path, node),
        facts=facts,
    )
