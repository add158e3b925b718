"""One etcd server polled for `ls`, the dashboard's feed and actions' lookups:
its snapshot (server.py) made lock records (records.py)."""

from __future__ import annotations

from lockwatch.sources.etcd.records import Records
from lockwatch.sources.etcd.server import EtcdServer
from lockwatch.sources.polled import Polled


class EtcdPoller:
    """One etcd server, for `ls`, the dashboard's feed and actions' lookups."""

    def __init__(self, server: EtcdServer) -> None:
        self.servers = [server]
        self.server = server.name
        self.name = f"etcd:{server.name}"
        self._server = server
        self._records = Records()

    def poll(self) -> Polled:
        server = self._server
        snapshot = server.poll()
        if snapshot is None:
            return Polled(server.clock.now(), (server.status,), None, retry_in=server.retry_in)
        return Polled(snapshot.polled_at, (server.status,), self._records.to_locks(snapshot))

    def close(self) -> None:
        self._server.close()
