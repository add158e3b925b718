"""One API server polled for `ls`, the dashboard's feed and actions' lookups:
its snapshot (server.py) made lock records (records.py)."""

from __future__ import annotations

from lockwatch.sources.k8s.records import to_locks
from lockwatch.sources.k8s.server import LeaseServer
from lockwatch.sources.polled import Polled


class K8sPoller:
    def __init__(self, server: LeaseServer) -> None:
        self.servers = [server]
        self.server = server.name
        self.name = f"k8s:{server.name}"
        self._server = server

    def poll(self) -> Polled:
        server = self._server
        snapshot = server.poll()
        if snapshot is None:
            return Polled(server.clock.now(), (server.status,), None, retry_in=server.retry_in)
        return Polled(snapshot.polled_at, (server.status,), to_locks(snapshot))

    def close(self) -> None:
        self._server.close()
