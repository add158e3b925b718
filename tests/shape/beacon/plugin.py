"""The beacon source: its selection (a polled server each), lookup by
id, and the rest of the contract (sources/contract.py) its declaration lacks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from lockwatch.sources.contract import Found, LookupFailed, SourceError, Wanted
from lockwatch.sources.selection import StoreSelection

from .declared import NAME, BeaconDeclared
from .settings import DEFAULT_REFRESH, BeaconSettings, read_settings, settings_of, urls_of

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.contract import ActionProvider

    from .poller import BeaconPoller


@dataclass(frozen=True)
class SelectedBeacon(StoreSelection):
    """The beacon servers of one run, polled (sources/polled.py)."""

    kind: ClassVar[str] = NAME
    urls: tuple[str, ...]
    prefix: str | None
    refresh: float = DEFAULT_REFRESH

    def pollers(self, clock: Clock) -> Sequence[BeaconPoller]:
        from .poller import BeaconPoller

        return [BeaconPoller(url, self.prefix, clock) for url in self.urls]


class BeaconSource(BeaconDeclared):
    @property
    def record_types(self) -> tuple[type, ...]:
        from .facts import BeaconLease

        return (BeaconLease,)

    @property
    def actions(self) -> ActionProvider:
        # Loaded when an action is planned, not when the CLI starts.
        from .actions import ACTIONS

        return ACTIONS

    def read_config(self, tables: Mapping[str, Any], where: str) -> BeaconSettings:
        return read_settings(tables, where)

    def select(self, wanted: Wanted) -> SelectedBeacon | None:
        urls = urls_of(wanted)
        if not urls:
            return None
        prefix = wanted.values.get("beacon_prefix") or settings_of(wanted).prefix
        refresh = float(wanted.values.get("refresh") or DEFAULT_REFRESH)
        return SelectedBeacon(urls, prefix, refresh)

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        from lockwatch.clock import SystemClock
        from lockwatch.model.process import StaticProcesses
        from lockwatch.model.verdict import evaluate

        from .client import server_of
        from .poller import BeaconPoller, parse_id

        parsed = parse_id(target)
        if parsed is None:
            raise SourceError(f"{target!r} is not a beacon lease id (beacon:host:port:key)")
        server, key = parsed
        named = {server_of(url): url for url in urls_of(wanted)}
        clock = SystemClock()
        polled = BeaconPoller(named.get(server, f"http://{server}"), None, clock).poll()
        if polled.locks is None:
            raise LookupFailed(polled.statuses[0].reason or f"{server} did not answer")
        for lock in polled.locks:
            if lock.id == target:
                return lock, evaluate(lock, StaticProcesses(), clock, host), []
        return f"no beacon lease {key} on {server}"


SOURCE = BeaconSource()
