"""The Lock record every source produces and every view shows."""

from __future__ import annotations

import operator
from dataclasses import field, fields
from datetime import datetime
from typing import Any

from lockwatch.model.facts import Facts
from lockwatch.model.slots import fast_init, lean_dataclass

# A source's name in the registry (lockwatch/sources/registry.py): file, postgres, kernel, ...
SourceKind = str


@fast_init
@lean_dataclass(frozen=True, slots=True)
class Reason:
    """Why a lock has its state. `code` is a stable snake_case contract."""

    code: str
    message: str


@fast_init
@lean_dataclass(frozen=True, slots=True)
class Holder:
    """Who the lock says holds it; every field is optional because formats differ."""

    pid: int | None = None
    host: str | None = None
    actor: str | None = None
    session: str | None = None
    operation: str | None = None
    # The pid was recorded in another pid namespace (a container): it names no
    # process here, so its liveness cannot be checked on this host.
    other_pid_namespace: bool = False
    # That namespace's inode (`/proc/<pid>/ns/pid`), where the file records it
    # (filelock's `?pidns-<hex>`): from this host the namespace, and the holder's
    # pid here, can be looked up.
    pid_namespace: int | None = None
    # The holder's start time in clock ticks since boot, where the file records
    # it: a live pid with another start time is a recycled one.
    start_ticks: int | None = None
    # The boot time (seconds since the epoch) of the host that wrote the lock,
    # where the file records it (Emacs): a live pid on a host booted at another
    # time is not the writer.
    boot_time: int | None = None
    # Where the file's pid cannot be read for certain (lockfile's names run the
    # pid and a hash together): every pid it can be read as. `pid` is None then.
    pid_readings: tuple[int, ...] = ()


NO_HOLDER = Holder()


@fast_init
@lean_dataclass(frozen=True, slots=True)
class Lock:
    id: str
    source: SourceKind
    format: str
    name: str
    path: str | None
    holder: Holder = NO_HOLDER
    acquired_at: datetime | None = None
    heartbeat_at: datetime | None = None
    ttl_seconds: float | None = None
    # When the lock's lease runs out, where the format records it (flufl.lock's
    # mtime): stale `expiry_grace` seconds later, when its tool breaks it.
    expires_at: datetime | None = None
    scope: tuple[str, ...] = ()
    # The decoded content (JSON value or text), shown to operators as is.
    content: Any = field(default=None, compare=False, hash=False)
    # sha256 hex of the raw bytes: what an action compares before touching anything.
    sha256: str | None = None
    # Problems the decoder found in the content; any of them makes the lock invalid.
    defects: tuple[Reason, ...] = ()
    # Facts the decoder wants shown but that never change the state.
    notes: tuple[Reason, ...] = ()
    # What its source knows about it (a lock file's rules and the kernel's word on
    # it, a pg_locks row, a /proc/locks line, a key in a store, another host's
    # verdict): what every view asks about it, and what judges it.
    facts: Facts | None = None


_NAMES = tuple(f.name for f in fields(Lock))
_INDEX = {name: index for index, name in enumerate(_NAMES)}
_VALUES = operator.attrgetter(*_NAMES)


_FACTS_AT = _INDEX["facts"]


def with_facts(lock: Lock, facts: Facts | None) -> Lock:
    """`amended(lock, facts=facts)` without the loop over changes: the one change
    a lock file of a scan always gets (the kernel's word in its facts)."""
    values = _VALUES(lock)
    return Lock(*values[:_FACTS_AT], facts, *values[_FACTS_AT + 1 :])  # type: ignore[call-arg]


def amended(lock: Lock, **changes: Any) -> Lock:
    """`dataclasses.replace(lock, **changes)`, five times faster: every file lock of
    a scan is replaced once or twice (its content kept as read, the kernel's word
    added), which `replace`, going through `fields()` each call, made a tenth of a
    large scan's time."""
    values = list(_VALUES(lock))
    for name, value in changes.items():
        index = _INDEX.get(name)
        if index is None:
            raise TypeError(f"Lock has no field {name!r}")
        values[index] = value
    return Lock(*values)
