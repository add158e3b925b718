"""The ZooKeeper source: kazoo's and Curator's lock recipes — locks, read/write
locks, semaphores, elections and leader latches — read from their znodes, with
the queue in order and each contender's session and client.

Config table it owns:

    [zookeeper]
    servers = ["zk1:2181,zk2:2181,zk3:2181/app"]   # a string or a list
    paths = ["/locks", "/election"]                  # default: the whole tree
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from lockwatch.sources.contract import Found, Selected, SourceError, Wanted
from lockwatch.sources.selection import StoreSelection
from lockwatch.sources.servers import (
    DEFAULT_REFRESH,
    ServerPlugin,
    config_strings,
    config_table,
    found_in,
    polled_once,
    refresh,
)
from lockwatch.sources.zookeeper import ids
from lockwatch.sources.zookeeper.declared import ZooKeeperDeclared

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.polled import PolledFeed
    from lockwatch.sources.zookeeper.endpoint import ZkEndpoint
    from lockwatch.sources.zookeeper.poller import ZkPoller


@dataclass(frozen=True)
class ZooKeeperSettings:
    servers: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()


DEFAULTS = ZooKeeperSettings()


def read_settings(data: Mapping[str, Any], where: str) -> ZooKeeperSettings:
    table = config_table(data, "zookeeper", where)
    return ZooKeeperSettings(
        config_strings(table.get("servers", []), "zookeeper.servers", where),
        config_strings(table.get("paths", []), "zookeeper.paths", where),
    )


def _paths(given: Sequence[str]) -> tuple[str, ...]:
    for path in given:
        if not path.startswith("/"):
            raise SourceError(f"--zk-path {path}: a znode path starts with /")
    return tuple(dict.fromkeys(given))


class ZooKeeperSource(ServerPlugin, ZooKeeperDeclared):
    @property
    def record_types(self) -> tuple[type, ...]:
        from lockwatch.sources.zookeeper.facts import ZkLock

        return (ZkLock,)

    def read_config(self, tables: Mapping[str, Any], where: str) -> ZooKeeperSettings:
        return read_settings(tables, where)

    def select(self, wanted: Wanted) -> Selected | None:
        from lockwatch.sources.zookeeper.endpoint import given_strings, parse

        settings: ZooKeeperSettings = wanted.settings(self.name) or DEFAULTS
        given = given_strings(wanted)
        if not given:
            return None
        endpoints = tuple(parse(text) for text in dict.fromkeys(given))
        paths = _paths(tuple(wanted.values.get("zk_paths") or ()) or settings.paths)
        return SelectedZooKeeper(endpoints, paths, refresh(wanted))

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return find_zk(target, wanted, host)


@dataclass(frozen=True)
class SelectedZooKeeper(StoreSelection):
    kind: ClassVar[str] = "zookeeper"
    endpoints: tuple[ZkEndpoint, ...]
    paths: tuple[str, ...]
    refresh: float = DEFAULT_REFRESH

    def pollers(self, clock: Clock) -> list[ZkPoller]:
        from lockwatch.sources.zookeeper.poller import ZkPoller
        from lockwatch.sources.zookeeper.server import ZkServer

        return [
            # Its own deadline inside the feed's: its reason (which read did not
            # answer) is the one shown, not the feed's generic stall.
            ZkPoller(ZkServer(endpoint, self.paths, clock=clock, deadline=self.deadline * 0.8))
            for endpoint in self.endpoints
        ]

    def feeds(self, clock: Clock, host: str) -> Sequence[PolledFeed]:
        from lockwatch.sources.zookeeper.poller import ZkFeed

        return [
            ZkFeed(poller, host=host, interval=self.refresh, deadline=self.deadline, clock=clock)
            for poller in self.pollers(clock)
        ]


def find_zk(target: str, wanted: Wanted, host: str) -> Found | str:
    """The ZooKeeper lock `target` names, read and judged now; or why there is none."""
    from lockwatch.clock import SystemClock
    from lockwatch.sources.zookeeper.endpoint import reach_of
    from lockwatch.sources.zookeeper.poller import ZkPoller
    from lockwatch.sources.zookeeper.server import ZkServer

    parsed = ids.parse_zk(target)
    if parsed is None:
        raise SourceError(
            f"{target!r} is not a ZooKeeper lock id as `lockwatch ls --json` prints one"
        )
    server, path = parsed
    endpoint = reach_of(wanted)(server)
    if endpoint is None:
        raise SourceError(f"no ZooKeeper ensemble {server} among --zk/config")
    # The lock's path and its queue: the znode's parent (or the empty parent itself).
    parent = path.rpartition("/")[0] or "/"
    poller = ZkPoller(ZkServer(endpoint, (parent, path), clock=SystemClock()))
    found = found_in(polled_once(poller, f"ZooKeeper {server}"), target, host)
    return found or f"no lock {target} now: released, or its session ended"


SOURCE = ZooKeeperSource()
