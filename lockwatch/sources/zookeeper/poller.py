"""One ZooKeeper ensemble polled for `ls`, the dashboard's feed and actions'
lookups; the dashboard's feed also wakes when a watch fires."""

from __future__ import annotations

from lockwatch.sources.polled import Polled, PolledFeed
from lockwatch.sources.zookeeper.records import to_locks
from lockwatch.sources.zookeeper.server import ZkServer


class ZkPoller:
    def __init__(self, server: ZkServer) -> None:
        self.server = server.name
        self.name = f"zookeeper:{server.name}"
        self.zk = server

    def poll(self) -> Polled:
        server = self.zk
        snapshot = server.poll()
        if snapshot is None:
            return Polled(server.clock.now(), (server.status,), None, retry_in=server.retry_in)
        return Polled(snapshot.polled_at, (server.status,), to_locks(snapshot))

    def close(self) -> None:
        self.zk.close()


class ZkFeed(PolledFeed):
    """A polled feed whose wait between polls ends early when a ZooKeeper
    watch fires (a contender came or went): changes show at once, and the
    interval only finds new lock paths elsewhere in the tree. (`serve` paces its
    feeds itself, replacing `sleep`: there it polls at its pace.)"""

    def __init__(self, poller: ZkPoller, **options: object) -> None:
        super().__init__(poller, **options)  # type: ignore[arg-type]
        self.zk = poller.zk
        self.sleep = self._sleep_or_change

    async def _sleep_or_change(self, seconds: float) -> bool | None:
        import asyncio

        loop = asyncio.get_running_loop()
        woke = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(woke.set)

        self.zk.on_change = wake
        if self.zk.changed.is_set():
            return None
        try:
            await asyncio.wait_for(woke.wait(), seconds)
        except TimeoutError:
            pass
        finally:
            self.zk.on_change = None
        return None
