"""What breaking a lock in a store (Redis, etcd) has in common: a break is the
only action, its key is deleted only if it still holds what the operator saw,
and the audit log names the server and the key. Each store says how it plans
and carries out that compare-and-delete (`plan_break`, `execute`); its actions
reach the servers the run names through its package's `endpoint` (`reach`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from lockwatch.model.action import ActionRefused, Asked, Doing, Done, Kind, Plan
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.sources.contract import ActionsBase
from lockwatch.sources.stores.facts import StoreLock

if TYPE_CHECKING:
    from lockwatch.sources.contract import Wanted

F = TypeVar("F", bound=StoreLock)


def unchanged(lock: Lock, kind: type[F], expect_sha256: str | None, changed: str) -> F:
    """The facts (a `kind`) of the lock a break was planned on; refused, "changed",
    when it is no longer the one the operator saw (their sha256 is another's):
    `changed` says so of its `{key}`, its `{id}` and the `{sha256}` they saw."""
    facts = lock.facts
    assert isinstance(facts, kind)
    if expect_sha256 is not None and expect_sha256 != lock.sha256:
        said = changed.format(key=facts.key, id=lock.id, sha256=expect_sha256)
        raise ActionRefused("changed", f"{said}; nothing done")
    return facts


class StoreActions(ActionsBase):
    kinds = frozenset({Kind.BREAK})

    def plan_break(self, kind: Kind, lock: Lock, verdict: Verdict, peers: Sequence[Lock]) -> Plan:
        raise NotImplementedError

    def execute(self, plan: Plan, doing: Doing) -> tuple[dict[str, Any], str]:
        """Carry out a planned break (its server found through `doing.reach`):
        (audit details, message)."""
        raise NotImplementedError

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        """Its package's `endpoint.reach_of(wanted)`, under that module's `REACH`:
        loaded when an action runs, not when the CLI starts."""
        from importlib import import_module

        package = type(self).__module__.rpartition(".")[0]
        endpoint = import_module(f"{package}.endpoint")
        return {endpoint.REACH: endpoint.reach_of(wanted)}

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        return self.plan_break(kind, lock, verdict, asked.peers)

    def run(self, plan: Plan, doing: Doing) -> Done:
        details, message = self.execute(plan, doing)
        return Done(details, message)

    def target(self, lock: Lock) -> dict[str, Any]:
        store = lock.facts
        if not isinstance(store, StoreLock):
            return {}
        return {"server": store.server, "key": store.key}
