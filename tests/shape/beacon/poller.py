"""One beacon server, polled: its leases as locks (sources/polled.py runs it,
every --refresh seconds for the dashboard, once for `ls`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.lock import Holder, Lock
from lockwatch.model.status import SourceStatus
from lockwatch.sources.polled import Polled

from .client import Unreachable, leases, server_of
from .declared import NAME
from .facts import BeaconLease

if TYPE_CHECKING:
    from lockwatch.clock import Clock

FORMAT = "beacon-lease"


def lease_id(server: str, key: str) -> str:
    """A lease's lock id: `beacon:host:port:key` (a key may hold colons)."""
    return f"{NAME}:{server}:{key}"


def parse_id(lock_id: str) -> tuple[str, str] | None:
    """(server, key) of a beacon lock id; None: not one."""
    head, host, port, key = [*lock_id.split(":", 3), "", "", ""][:4]
    if head != NAME or not host or not port.isdigit() or not key:
        return None
    return f"{host}:{port}", key


def lock_of(server: str, listed: Mapping[str, Any]) -> Lock | None:
    """The lock one listed lease is; None for an entry that is not a lease."""
    key, owner, fence, lapses = (listed.get(k) for k in ("key", "owner", "fence", "lapses_at"))
    if not isinstance(key, str) or not isinstance(owner, str) or type(fence) is not int:
        return None
    if not isinstance(lapses, int | float):
        return None
    lapses_at = datetime.fromtimestamp(lapses, UTC)
    return Lock(
        id=lease_id(server, key),
        source=NAME,
        format=FORMAT,
        name=key,
        path=None,
        holder=Holder(actor=owner),
        expires_at=lapses_at,
        facts=BeaconLease(server, key, owner, fence, lapses_at),
    )


def locks_of(server: str, listed: Iterable[Mapping[str, Any]], prefix: str | None) -> list[Lock]:
    locks = (lock_of(server, lease) for lease in listed)
    return [lock for lock in locks if lock is not None and lock.name.startswith(prefix or "")]


class BeaconPoller:
    """A `ServerPoller` (sources/polled.py) of one beacon server."""

    def __init__(self, url: str, prefix: str | None, clock: Clock) -> None:
        self.url, self.prefix, self.clock = url, prefix, clock
        self.server = server_of(url)
        self.name = f"{NAME}:{self.server}"

    def poll(self) -> Polled:
        at = self.clock.now()
        try:
            listed = leases(self.url)
        except Unreachable as exc:
            # A server's trouble is a status, never an exception (Poller's contract).
            return Polled(at, (SourceStatus(NAME, self.server, "disconnected", str(exc)),), None)
        status = SourceStatus(NAME, self.server, "connected", updated_at=at)
        return Polled(at, (status,), locks_of(self.server, listed, self.prefix))

    def close(self) -> None:
        return None  # one connection per request: nothing kept open
