"""One API server polled for `ls`, the dashboard's feed and actions' lookups:
its snapshot (server.py) made lock records (records.py)."""

from __future__ import annotations

from lockwatch.model.lock import Lock
from lockwatch.sources.k8s.records import to_locks
from lockwatch.sources.k8s.server import LeaseServer, LeaseSnapshot
from lockwatch.sources.polled import SnapshotPoller


class K8sPoller(SnapshotPoller[LeaseSnapshot]):
    def __init__(self, server: LeaseServer) -> None:
        super().__init__("k8s", server)

    def to_locks(self, snapshot: LeaseSnapshot) -> list[Lock]:
        return to_locks(snapshot)
