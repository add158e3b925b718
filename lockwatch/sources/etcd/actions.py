"""Breaking an etcd lock: delete the holder's key in a transaction that
compares it with what the operator saw, then revoke its lease.

Compare-and-swap is etcd's own transaction: the key is deleted only if its
create and mod revisions and its lease are still those the operator saw; a key
written again (a new holder, a new value) or gone is left alone and the action
refused. Then the holder's lease is revoked: its session ends, so a holder that
keeps its session alive (etcdctl lock, concurrency.Mutex) learns that it lost
the lock, and etcd deletes every key on that lease. The next waiter in the
queue then holds the lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lockwatch.model.action import (
    ActionFailed,
    ActionRefused,
    Doing,
    Kind,
    Plan,
    refused,
)
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.stores.actions import StoreActions, unchanged
from lockwatch.sources.stores.facts import StoreLock


def plan_action(kind: Kind, lock: Lock, verdict: Verdict, peers: Sequence[Lock]) -> Plan:
    store = lock.facts
    assert isinstance(store, StoreLock)
    if kind is not Kind.BREAK:
        why = (
            "an etcd lock can only be broken (its key deleted, its lease revoked),"
            f" not {kind.value}"
        )
        return refused(kind, lock, verdict, "unsupported", why)
    if store.waiting:
        why = (
            f"lease {store.session} waits for {lock.name} (position {store.position}); it holds"
            " nothing"
        )
        return refused(kind, lock, verdict, "not_held", why)
    compare = f"its mod revision is still {store.mod_revision}" + (
        f" and its lease {store.lease_hex}" if store.lease else " and it has no lease"
    )
    effect = f"delete {store.key} on {store.server} in one transaction, only if {compare}"
    if store.lease:
        effect += (
            f"; then revoke lease {store.lease_hex}: the holder's session ends (its keep-alive"
            " fails, so it learns it lost the lock) and etcd deletes every key on that lease"
        )
    if store.blocking:
        effect += f"; lease {store.blocking[0]}, next in the queue, then holds {lock.name}"
    return Plan(
        kind, lock, verdict, "lock_broken", effect, needs_name=verdict.state is not State.STALE
    )


def execute(
    plan: Plan, expect_sha256: str | None, reach: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    """Carry out a break planned by `plan_action`: (audit details, message)."""
    import httpx

    from lockwatch.sources.etcd.endpoint import endpoint_for
    from lockwatch.sources.etcd.gateway import Gateway, GatewayError, KeyValue

    said = "{key} is not the key you saw (sha256 {sha256})"
    store = unchanged(plan.lock, StoreLock, expect_sha256, said)
    assert store.create_revision is not None and store.mod_revision is not None
    endpoint = endpoint_for(store.server, reach)
    if endpoint is None:
        raise ActionFailed("unreachable", f"no URL for etcd {store.server}: name it with --etcd")
    seen = KeyValue(
        store.key,
        store.value or "",
        store.create_revision,
        store.mod_revision,
        store.version or 0,
        store.lease or 0,
    )
    gateway = Gateway(endpoint)
    try:
        try:
            deleted = gateway.delete_if_unchanged(seen)
        except (httpx.HTTPError, GatewayError, OSError) as exc:
            raise ActionFailed(
                "unreachable", f"etcd {store.server}: {endpoint.scrub(str(exc))}; nothing done"
            ) from None
        if deleted is None:
            now = _quietly(gateway.get, store.key)
            if now is None:
                raise ActionRefused(
                    "gone", f"{store.key} is gone (released, or its lease expired); nothing done"
                )
            raise ActionRefused(
                "changed",
                f"{store.key} changed since you saw it (mod revision {now.mod_revision}, lease"
                f" {format(now.lease, 'x') if now.lease else 'none'}; you saw"
                f" {store.mod_revision}, {store.lease_hex or 'none'}): nothing done",
            )
        details: dict[str, Any] = {
            "key": store.key,
            "previous_value": deleted["previous_value"],
            "lease": store.lease_hex,
            "ttl_left_seconds": store.ttl_left,
            "create_revision": store.create_revision,
            "mod_revision": store.mod_revision,
            "deleted_at_revision": deleted["revision"],
        }
        message = f"deleted {store.key} on {store.server} (mod revision {store.mod_revision})"
        if store.lease:
            try:
                revoked = gateway.revoke(store.lease)
            except (httpx.HTTPError, GatewayError, OSError) as exc:
                details["lease_revoked"] = False
                message += (
                    f"; revoking lease {store.lease_hex} failed ({endpoint.scrub(str(exc))}):"
                    " its holder was not told"
                )
            else:
                details["lease_revoked"] = revoked
                message += (
                    f" and revoked lease {store.lease_hex}"
                    if revoked
                    else f"; lease {store.lease_hex} was already gone"
                )
        return details, message
    finally:
        gateway.close()


def _quietly(read: Any, key: str) -> Any:
    """What `read(key)` says, or None when etcd cannot say any more."""
    import httpx

    from lockwatch.sources.etcd.gateway import GatewayError

    try:
        return read(key)
    except (httpx.HTTPError, GatewayError, OSError):
        return None


class EtcdActions(StoreActions):
    name = "etcd"

    def plan_break(self, kind: Kind, lock: Lock, verdict: Verdict, peers: Sequence[Lock]) -> Plan:
        return plan_action(kind, lock, verdict, peers)

    def execute(self, plan: Plan, doing: Doing) -> tuple[dict[str, Any], str]:
        return execute(plan, doing.expect_sha256, doing.reach)


ACTIONS = EtcdActions()
