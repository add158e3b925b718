"""The etcd source: locks kept in etcd v3 — the concurrency mutex behind
`etcdctl lock` and the Go and Python clients (holder, waiters in their order,
lease TTLs) and any other key under the lock prefixes — read through etcd's
JSON gateway.

Config table it owns:

    [etcd]
    url = ["http://etcd1:2379"]        # a string or a list
    prefixes = ["/app/mutex/", "/tooz/locks"]  # /locks/ always, plus these

A prefix is a key prefix, as etcd's ranges have them, not a directory:
`/tooz/locks` reads tooz's `/tooz/locks<name>` (and `/tooz/locksmith`); end it
with `/` to read one directory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from lockwatch.sources.contract import (
    Found,
    Selected,
    SourceError,
    Wanted,
)
from lockwatch.sources.etcd import ids
from lockwatch.sources.etcd.declared import EtcdDeclared
from lockwatch.sources.selection import StoreSelection
from lockwatch.sources.servers import (
    DEFAULT_REFRESH,
    ServerPlugin,
    config_strings,
    found_in,
    polled_once,
    refresh,
)

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.etcd.endpoint import EtcdEndpoint
    from lockwatch.sources.etcd.poller import EtcdPoller

DEFAULT_PREFIXES = ("/locks/",)


@dataclass(frozen=True)
class EtcdSettings:
    urls: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()  # beside DEFAULT_PREFIXES


DEFAULTS = EtcdSettings()


def read_settings(data: Mapping[str, Any], where: str) -> EtcdSettings:
    table = data.get("etcd", {})
    if not isinstance(table, dict):
        from lockwatch.config import ConfigError

        raise ConfigError(f"{where}: [etcd] must be a table")
    return EtcdSettings(
        config_strings(table.get("url", []), "etcd.url", where),
        config_strings(table.get("prefixes", []), "etcd.prefixes", where),
    )


def range_prefixes(given: Sequence[str]) -> tuple[str, ...]:
    """The key prefixes read: /locks/ and those given, as given: a prefix of
    keys, not a directory (tooz keeps its locks at `/tooz/locks<name>`)."""
    return tuple(dict.fromkeys((*DEFAULT_PREFIXES, *given)))


class EtcdSource(ServerPlugin, EtcdDeclared):
    @property
    def record_types(self) -> tuple[type, ...]:
        # Its facts' types, for recordings: loaded when asked, not at the CLI's start.
        from lockwatch.sources.stores.facts import StoreLock

        return (StoreLock,)

    def read_config(self, tables: Mapping[str, Any], where: str) -> EtcdSettings:
        return read_settings(tables, where)

    def select(self, wanted: Wanted) -> Selected | None:
        from lockwatch.sources.etcd.endpoint import parse

        settings: EtcdSettings = wanted.settings(self.name) or DEFAULTS
        urls = tuple(wanted.values.get("etcd_urls") or ()) or settings.urls
        if not urls:
            return None
        endpoints = tuple(parse(url) for url in dict.fromkeys(urls))
        given = (*settings.prefixes, *(wanted.values.get("etcd_prefixes") or ()))
        return SelectedEtcd(
            endpoints,
            range_prefixes(given),
            refresh(wanted),
        )

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return find_etcd(target, wanted, host)


@dataclass(frozen=True)
class SelectedEtcd(StoreSelection):
    kind: ClassVar[str] = "etcd"
    endpoints: tuple[EtcdEndpoint, ...]
    prefixes: tuple[str, ...]
    refresh: float = DEFAULT_REFRESH

    def pollers(self, clock: Clock) -> list[EtcdPoller]:
        from lockwatch.sources.etcd.poller import EtcdPoller
        from lockwatch.sources.etcd.server import EtcdServer

        return [
            EtcdPoller(EtcdServer(endpoint, self.prefixes, clock=clock))
            for endpoint in self.endpoints
        ]


def find_etcd(target: str, wanted: Wanted, host: str) -> Found | str:
    """The etcd lock `target` names, read and judged now; or why there is none."""
    from lockwatch.clock import SystemClock
    from lockwatch.sources.etcd.poller import EtcdPoller
    from lockwatch.sources.etcd.server import EtcdServer

    parsed = ids.parse_etcd(target)
    if parsed is None:
        raise SourceError(f"{target!r} is not an etcd lock id as `lockwatch ls --json` prints one")
    from lockwatch.sources.etcd.endpoint import reach_of

    endpoint = reach_of(wanted)(parsed.server)
    if endpoint is None:
        raise SourceError(f"no etcd server {parsed.server} among --etcd/config")
    poller = EtcdPoller(EtcdServer(endpoint, (), clock=SystemClock(), exact=parsed.key))
    locks = polled_once(poller, f"etcd {parsed.server}")
    return found_in(locks, target, host) or f"no lock {target} now: released, or its lease expired"


SOURCE = EtcdSource()
