"""Which znodes are lock recipes' and who holds them, as each library decides.

Pure: the server module reads the tree; this reads the children of one parent
the way the library that wrote them does.

- kazoo (`kazoo/recipe/lock.py`): `Lock`, `WriteLock` and `Election` create
  `<uuid hex>__lock__<10-digit sequence>`, `ReadLock` `<uuid hex>__rlock__<seq>`,
  ephemeral and sequential, under the lock path. A contender holds when no
  contender it counts has a smaller sequence: `Lock` counts `__lock__` nodes,
  `WriteLock` both kinds, `ReadLock` `__lock__` nodes only (so readers share).
  `Semaphore(path)` keeps one ephemeral `<uuid hex>` child per lease under
  `path` (whose data is the maximum), queued by a kazoo lock at `path-__lock__`.
- Curator (`LockInternals`, `StandardLockInternalsDriver`): protected nodes
  `_c_<uuid>-<lock name><sequence>`, all children sorted by what follows the
  lock name. `InterProcessMutex` (and `LeaderSelector`): `lock-`, the first
  holds. `InterProcessReadWriteLock`: `__READ__`/`__WRIT__`, a writer holds
  when first, a reader when no writer is before it. `LeaderLatch`: `latch-`, the
  first leads. `InterProcessSemaphoreV2`: each lease a `lease-` node under
  `<path>/leases` (all hold), queued by a mutex at `<path>/locks`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from lockwatch.model.lazyre import lazy_compile

KAZOO_LOCK = "kazoo-lock"
KAZOO_RWLOCK = "kazoo-rwlock"
KAZOO_SEMAPHORE = "kazoo-semaphore"
KAZOO_LEASE = "kazoo-lease"
CURATOR_MUTEX = "curator-mutex"
CURATOR_RWLOCK = "curator-rwlock"
CURATOR_SEMAPHORE = "curator-semaphore"
CURATOR_LATCH = "curator-latch"
ORPHANED = "zk-orphaned-parent"
FORMATS = (
    KAZOO_LOCK,
    KAZOO_RWLOCK,
    KAZOO_SEMAPHORE,
    KAZOO_LEASE,
    CURATOR_MUTEX,
    CURATOR_RWLOCK,
    CURATOR_SEMAPHORE,
    CURATOR_LATCH,
    ORPHANED,
)
LIBRARY = {
    KAZOO_LOCK: "kazoo",
    KAZOO_RWLOCK: "kazoo",
    KAZOO_SEMAPHORE: "kazoo",
    KAZOO_LEASE: "kazoo",
    CURATOR_MUTEX: "Curator",
    CURATOR_RWLOCK: "Curator",
    CURATOR_SEMAPHORE: "Curator",
    CURATOR_LATCH: "Curator",
    ORPHANED: "",
}

EXCLUSIVE = "exclusive"
READ = "read"
WRITE = "write"
LEASE = "lease"
LEADER = "leadership"

# kazoo: uuid4().hex + node name + the server's 10-digit sequence (negative past 2^31).
_KAZOO = lazy_compile(r"[0-9a-f]{32}(__lock__|__rlock__)(-?\d{10})")
# Curator: the protection prefix (`_c_` + a UUID + `-`), the lock name, the sequence.
_CURATOR = lazy_compile(r"(?:_c_[0-9a-fA-F-]{36}-)?(lock-|__READ__|__WRIT__|lease-|latch-)(\d{10})")
# A kazoo semaphore's lease: its uuid4().hex alone.
_KAZOO_LEASE = lazy_compile(r"[0-9a-f]{32}")
# Names of znodes that hold locks, for telling an empty lock parent from any empty znode.
_LOCKISH = lazy_compile(r"(?i).*(lock|latch|leader|elect|mutex|semaphore|lease).*")

CURATOR_NAMES = ("lock-", "__READ__", "__WRIT__", "lease-", "latch-")


@dataclass(frozen=True, slots=True)
class Node:
    """One znode as read: its name under its parent and its stat."""

    name: str
    czxid: int
    ctime_ms: int
    version: int
    owner: int  # ephemeralOwner: the session; 0: a persistent node
    data: str = ""  # its data as text (the contender's identifier), cut to DATA_SHOWN
    children: int = 0
    cversion: int = 0


DATA_SHOWN = 256
# kazoo's NonBlockingLease: its one node, and how much of its data is read (its
# JSON ends with the lease's end, after the holder's identifier).
LEASE_HOLDER = "lease_holder"
LEASE_DATA_READ = 4096
# `NonBlockingLease._date_format`, in UTC.
_LEASE_END = "%Y-%m-%dT%H:%M:%S"


@dataclass(frozen=True, slots=True)
class Contender:
    node: Node
    recipe: str
    mode: str
    sequence: str  # as in its name ("" for a kazoo lease)
    position: int  # in the queue's order: 0 first
    holds: bool
    blocked_by: tuple[str, ...] = ()  # the node names it waits for
    conflict: tuple[str, ...] = ()  # other nodes that hold it too, where only one may


def is_contender(name: str) -> bool:
    """A name a lock recipe writes for a contender (ephemeral, never a parent)."""
    return _KAZOO.fullmatch(name) is not None or _CURATOR.fullmatch(name) is not None


def is_kazoo_lease(name: str) -> bool:
    return _KAZOO_LEASE.fullmatch(name) is not None


def kazoo_lease(data: str) -> tuple[str, datetime] | None:
    """(holder, end) of a NonBlockingLease's `lease_holder` data; None: not one
    kazoo wrote (or a version it would not read either)."""
    try:
        record = json.loads(data)
        if not isinstance(record, dict) or record.get("version") != 1:
            return None
        end = datetime.strptime(str(record["end"]), _LEASE_END).replace(tzinfo=UTC)
        return str(record["holder"]), end
    except (ValueError, KeyError, TypeError):
        return None


def lockish(name: str) -> bool:
    return _LOCKISH.fullmatch(name) is not None


def _curator_key(name: str, lock_names: Sequence[str]) -> str:
    # StandardLockInternalsDriver.fixForSorting: what follows the lock name's last occurrence.
    for lock_name in lock_names:
        index = name.rfind(lock_name)
        if index >= 0:
            name = name[index + len(lock_name) :]
    return name


def _kazoo(nodes: Sequence[Node]) -> list[Contender]:
    matched = [(node, _KAZOO.fullmatch(node.name)) for node in nodes]
    found = [(node, m[1], m[2]) for node, m in matched if m is not None]
    found.sort(key=lambda each: each[2])  # kazoo compares the sequences as strings
    readers = any(kind == "__rlock__" for _, kind, _ in found)
    recipe = KAZOO_RWLOCK if readers else KAZOO_LOCK
    out: list[Contender] = []
    holders: list[str] = []
    for position, (node, kind, sequence) in enumerate(found):
        before = found[:position]
        if kind == "__rlock__":
            counted = [n.name for n, k, _ in before if k == "__lock__"]
            mode = READ
        else:
            # A WriteLock counts readers too; with none about, Lock and WriteLock agree.
            counted = [n.name for n, _, _ in before]
            mode = WRITE if readers else EXCLUSIVE
        holds = not counted
        if holds:
            holders.append(node.name)
        blocked = tuple(name for name in holders if name in counted) or tuple(counted[:1])
        out.append(Contender(node, recipe, mode, sequence, position, holds, blocked))
    return out


def _curator(nodes: Sequence[Node]) -> list[Contender]:
    matched = [(node, _CURATOR.fullmatch(node.name)) for node in nodes]
    found = [(node, m[1], m[2]) for node, m in matched if m is not None]
    if not found:
        return []
    kinds = {kind for _, kind, _ in found}
    if kinds & {"__READ__", "__WRIT__"}:
        return _curator_rw(nodes, found)
    kind = "lock-" if "lock-" in kinds else found[0][1]
    if kind == "lease-":
        ordered = sorted(found, key=lambda each: each[2])
        return [
            Contender(node, CURATOR_SEMAPHORE, LEASE, seq, position, True)
            for position, (node, _, seq) in enumerate(ordered)
        ]
    recipe, mode = (CURATOR_LATCH, LEADER) if kind == "latch-" else (CURATOR_MUTEX, EXCLUSIVE)
    # The driver sorts every child of the lock path, its own or not (LockInternals).
    everyone = sorted(nodes, key=lambda node: _curator_key(node.name, (kind,)))
    first = everyone[0].name if everyone else ""
    ours = {node.name: seq for node, k, seq in found if k == kind}
    out = []
    for position, node in enumerate(n for n in everyone if n.name in ours):
        holds = node.name == first
        blocked = () if holds else (first,)
        out.append(Contender(node, recipe, mode, ours[node.name], position, holds, blocked))
    return out


def _curator_rw(nodes: Sequence[Node], found: list[tuple[Node, str, str]]) -> list[Contender]:
    names = ("__READ__", "__WRIT__")
    everyone = sorted(nodes, key=lambda node: _curator_key(node.name, names))
    kind_of = {node.name: (kind, seq) for node, kind, seq in found if kind in names}
    first_writer = next(
        (i for i, node in enumerate(everyone) if "__WRIT__" in node.name), len(everyone)
    )
    out: list[Contender] = []
    holders: list[str] = []
    for index, node in enumerate(everyone):
        if node.name not in kind_of:
            continue
        kind, seq = kind_of[node.name]
        if kind == "__WRIT__":
            holds, mode = index == 0, WRITE
        else:
            holds, mode = index < first_writer, READ
        if holds:
            holders.append(node.name)
        blocked: tuple[str, ...] = ()
        if not holds:
            blocked = tuple(holders) or (everyone[0].name,)
            if mode == READ:
                blocked = (everyone[first_writer].name,)
        out.append(Contender(node, CURATOR_RWLOCK, mode, seq, len(out), holds, blocked))
    return out


def kazoo_leases(nodes: Sequence[Node]) -> list[Contender]:
    """A kazoo semaphore's leases: every child holds one."""
    ordered = sorted(nodes, key=lambda node: node.czxid)
    return [
        Contender(node, KAZOO_SEMAPHORE, LEASE, "", position, True)
        for position, node in enumerate(ordered)
    ]


def contenders(nodes: Sequence[Node]) -> list[Contender]:
    """The lock contenders among one parent's children, in queue order, each
    judged by the library that wrote it; where two libraries' rules each give a
    holder of what only one may hold, both say so (`conflict`)."""
    found = _kazoo(nodes) + _curator(nodes)
    holders = [c for c in found if c.holds]
    exclusive = [c for c in holders if c.mode in (EXCLUSIVE, WRITE, LEADER)]
    if exclusive and len(holders) > 1:
        names = tuple(c.node.name for c in holders)
        found = [
            _with_conflict(c, tuple(n for n in names if n != c.node.name)) if c.holds else c
            for c in found
        ]
    if len({c.recipe for c in found}) > 1:
        # Two libraries in one parent: one queue, in the order the server made them.
        found.sort(key=lambda c: c.node.czxid)
        found = [_at(c, position) for position, c in enumerate(found)]
    return found


def _with_conflict(contender: Contender, others: tuple[str, ...]) -> Contender:
    c = contender
    return Contender(c.node, c.recipe, c.mode, c.sequence, c.position, c.holds, (), others)


def _at(contender: Contender, position: int) -> Contender:
    c = contender
    return Contender(
        c.node, c.recipe, c.mode, c.sequence, position, c.holds, c.blocked_by, c.conflict
    )
