"""One ZooKeeper ensemble polled for `ls`, the dashboard's feed and actions'
lookups; the dashboard's feed also wakes when a watch fires."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from lockwatch.model.lock import Lock
from lockwatch.sources.polled import PolledFeed, SnapshotPoller
from lockwatch.sources.zookeeper.records import to_locks
from lockwatch.sources.zookeeper.server import ZkServer, ZkSnapshot

# A feed's wait between polls (PolledFeed.sleep).
Sleep = Callable[[float], Awaitable[bool | None]]


class ZkPoller(SnapshotPoller[ZkSnapshot]):
    def __init__(self, server: ZkServer) -> None:
        super().__init__("zookeeper", server)
        # Its feed waits on the server's watches as well as its interval.
        self.zk = server

    def to_locks(self, snapshot: ZkSnapshot) -> list[Lock]:
        return to_locks(snapshot)


class ZkFeed(PolledFeed):
    """A polled feed whose wait between polls ends early when a ZooKeeper
    watch fires (a contender came or went): changes show at once, and the
    interval only finds new lock paths elsewhere in the tree. `serve` paces its
    feeds by setting their `sleep`: that becomes the wait a watch cuts short, so
    its history hears of a change when it happens, not at its next poll."""

    def __init__(self, poller: ZkPoller, **options: object) -> None:
        self._pace: Sleep | None = None
        super().__init__(poller, **options)  # type: ignore[arg-type]
        self.zk = poller.zk

    @property
    def sleep(self) -> Sleep | None:
        return self._sleep_or_change

    @sleep.setter
    def sleep(self, pace: Sleep | None) -> None:
        self._pace = pace

    async def _sleep_or_change(self, seconds: float) -> bool | None:
        import asyncio

        loop = asyncio.get_running_loop()
        woke = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(woke.set)

        self.zk.on_change = wake
        if self.zk.changed.is_set():
            self.zk.on_change = None
            return None
        waits = [
            asyncio.ensure_future((self._pace or asyncio.sleep)(seconds)),
            asyncio.ensure_future(woke.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.zk.on_change = None
            for each in waits:
                each.cancel()
        return None
