"""The remote source's actions: none. Another host's lock is acted on there;
every action on one is refused with the command to run on its host."""

from __future__ import annotations

from lockwatch.model.action import Asked, Kind, Plan, refused
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.sources.contract import ActionsBase
from lockwatch.sources.remote.facts import REMOTE_KIND, RemoteOrigin


class RemoteActions(ActionsBase):
    name = REMOTE_KIND

    def screen(self, kind: Kind, lock: Lock, verdict: Verdict) -> Plan | None:
        origin = lock.facts
        if not isinstance(origin, RemoteOrigin):
            return None
        from lockwatch.sources.remote.document import advice

        return refused(kind, lock, verdict, "remote", advice(kind.value, lock, origin))

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        return self.screen(kind, lock, verdict) or super().plan(kind, lock, verdict, asked)


ACTIONS = RemoteActions()
