"""One etcd server polled for `ls`, the dashboard's feed and actions' lookups:
its snapshot (server.py) made lock records (records.py)."""

from __future__ import annotations

from lockwatch.model.lock import Lock
from lockwatch.sources.etcd.records import Records
from lockwatch.sources.etcd.server import EtcdServer, EtcdSnapshot
from lockwatch.sources.polled import SnapshotPoller


class EtcdPoller(SnapshotPoller[EtcdSnapshot]):
    """One etcd server, for `ls`, the dashboard's feed and actions' lookups."""

    def __init__(self, server: EtcdServer) -> None:
        super().__init__("etcd", server)
        self._records = Records()

    def to_locks(self, snapshot: EtcdSnapshot) -> list[Lock]:
        return self._records.to_locks(snapshot)
