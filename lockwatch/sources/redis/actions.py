"""Breaking a Redis lock: delete its key only if it still holds the token the
operator saw.

Compare-and-swap is one Lua script, so nothing can come between the compare
and the delete: it reads the key, and deletes it only when its value is that
token, answering with the value and the TTL it had. Those go to the audit log
(previous value, token, TTL, and the SET that would put it back), so a break
can be undone by hand. For a Redlock group the script runs on every server of
the group: each copy with that token goes; any other holder's copy stays.

Redisson's hash locks and redis-semaphore's holders are broken as their
libraries' own unlocks do it (librarybreaks.py), each in one Lua script too.

A deleted lock's holder is not told: it may go on as if it held the lock,
which is why a lock that is not stale (`no_quorum`) needs its name typed.
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
from lockwatch.sources.redis.ids import cli_arg
from lockwatch.sources.redis.librarybreaks import (
    execute_redisson,
    execute_semaphore,
    plan_redisson,
    plan_semaphore,
)
from lockwatch.sources.redis.redisson import RedissonFacts
from lockwatch.sources.redis.semaphore import SemaphoreFacts
from lockwatch.sources.redis.subscription import SubscriptionFacts, digest
from lockwatch.sources.stores.actions import StoreActions, unchanged
from lockwatch.sources.stores.facts import StoreLock

# KEYS[1]: the lock key; ARGV[1]: the token the operator saw.
# Answers {deleted (1/0), the value it held (nil: none), its PTTL (-2: no key)}.
COMPARE_AND_DELETE = """
local value = redis.call('GET', KEYS[1])
if not value then
  return {0, false, -2}
end
local ttl = redis.call('PTTL', KEYS[1])
if value ~= ARGV[1] then
  return {0, value, ttl}
end
redis.call('DEL', KEYS[1])
return {1, value, ttl}
"""


def plan_action(kind: Kind, lock: Lock, verdict: Verdict, peers: Sequence[Lock]) -> Plan:
    store = lock.facts
    assert isinstance(store, StoreLock)
    if isinstance(store, SubscriptionFacts) and kind is Kind.BREAK:
        return plan_kill(kind, lock, verdict, store)
    # The libraries' own unlocks (librarybreaks.py): Redisson's forceUnlock, and
    # redis-semaphore's release of one holder.
    if isinstance(store, RedissonFacts):
        return plan_redisson(kind, lock, verdict, store)
    if isinstance(store, SemaphoreFacts):
        return plan_semaphore(kind, lock, verdict, store)
    if kind is not Kind.BREAK:
        why = (
            "a Redis lock can only be broken (its key deleted if it still holds the token"
            f" you saw), not {kind.value}"
        )
        return refused(kind, lock, verdict, "unsupported", why)
    if store.waiting or store.value is None:
        why = f"{store.session} waits for {lock.name}; it holds nothing"
        return refused(kind, lock, verdict, "not_held", why)
    if store.value_bytes is not None:
        why = (
            f"{store.key}'s value is {store.value_bytes:,} bytes, more than lockwatch reads:"
            " a break could not check that it still holds the token you saw; delete it with"
            " redis-cli if you know it is not held"
        )
        return refused(kind, lock, verdict, "value_cut", why)
    where = (
        f"on each server of Redlock group {store.server} still holding it"
        if store.quorum is not None
        else f"on {store.server}"
    )
    waiters = len(store.blocking)
    then = (
        f"; {waiters} waiting client{'s' if waiters != 1 else ''} may then take it"
        if waiters
        else ""
    )
    effect = (
        f"delete {store.key} {where} only if it still holds token {store.value} (one Lua"
        " script: compare, then delete); its value, token and TTL go to the audit log so it"
        f" can be put back by hand. Its holder is not told and may go on as if it held it{then}"
    )
    return Plan(
        kind, lock, verdict, "lock_broken", effect, needs_name=verdict.state is not State.STALE
    )


def plan_kill(kind: Kind, lock: Lock, verdict: Verdict, store: SubscriptionFacts) -> Plan:
    effect = (
        f"kill connection {store.client_id} ({store.addr}) on {store.server} with CLIENT KILL"
        f" ID, only if that id still names {store.name} (CLIENT LIST ID, read just before):"
        f" Redis drops its subscription to {store.channel}, which frees the lock. Its holder"
        " sees its connection lost (portalocker 4.2+: LockLostError); nothing to put back"
    )
    return Plan(
        kind, lock, verdict, "lock_broken", effect, needs_name=verdict.state is not State.STALE
    )


def kill(
    plan: Plan, expect_sha256: str | None, reach: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    """CLIENT KILL ID of the subscription lock's connection, compared first on its id
    and name. Client ids are never reused while a server runs, so the id is the
    connection; the name guards against it having become something else."""
    import redis

    from lockwatch.sources.redis.endpoint import endpoint_to_act_on
    from lockwatch.sources.redis.server import describe

    lock = plan.lock
    said = "{id} is not the connection you saw (sha256 differs)"
    store = unchanged(lock, SubscriptionFacts, expect_sha256, said)
    endpoint = endpoint_to_act_on(store.server, reach)
    client = endpoint.connect()
    try:
        listed = client.client_list(client_id=[store.client_id])
        now = listed[0] if listed else None
        if now is None:
            raise ActionRefused(
                "gone",
                f"connection {store.client_id} is gone (the lock was released); nothing done",
            )
        name = str(now.get("name", ""))
        if digest(store.client_id, name) != lock.sha256:
            raise ActionRefused(
                "changed",
                f"connection {store.client_id} is now named {name!r}, not {store.name!r};"
                " nothing done",
            )
        killed = client.client_kill_filter(_id=str(store.client_id))
    except (redis.RedisError, OSError) as exc:
        raise ActionFailed("unreachable", f"{store.server}: {describe(exc, endpoint)}") from None
    finally:
        client.close()
    if not killed:
        raise ActionRefused(
            "gone", f"connection {store.client_id} closed before the kill; nothing done"
        )
    details: dict[str, Any] = {
        "channel": store.channel,
        "client_id": store.client_id,
        "client_name": name,
        "addr": str(now.get("addr", "")),
        "age_seconds": now.get("age"),
        "idle_seconds": now.get("idle"),
        "killed": int(killed),
    }
    message = (
        f"killed connection {store.client_id} ({details['addr']}, {name}) on {store.server}:"
        f" its subscription to {store.channel} is gone, so the lock is free"
    )
    return details, message


def _restore(key: str, value: str, ttl_ms: int) -> str:
    expiry = f" PX {ttl_ms}" if ttl_ms > 0 else ""
    return f"SET {cli_arg(key)} {cli_arg(value)}{expiry} NX"


def execute(
    plan: Plan, expect_sha256: str | None, reach: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    """Carry out a break planned by `plan_action`: (audit details, message)."""
    said = "{key} holds another token than the one you saw (sha256 {sha256})"
    store = unchanged(plan.lock, StoreLock, expect_sha256, said)
    assert store.value is not None
    token = store.value
    servers = store.server.split(",")
    deleted: list[dict[str, Any]] = []
    untouched: list[dict[str, Any]] = []
    failed: list[str] = []
    for server in servers:
        _delete_on(server, store, token, reach, deleted, untouched, failed)
    return _outcome(store, token, servers, deleted, untouched, failed)


def _delete_on(
    server: str,
    store: StoreLock,
    token: str,
    reach: Mapping[str, Any],
    deleted: list[dict[str, Any]],
    untouched: list[dict[str, Any]],
    failed: list[str],
) -> None:
    """The compare-and-delete on one server of the lock's group: what it did goes
    into `deleted`, `untouched` or `failed`."""
    import redis

    from lockwatch.sources.redis.endpoint import endpoint_for
    from lockwatch.sources.redis.server import raw, text

    endpoint = endpoint_for(server, reach)
    if endpoint is None:
        failed.append(f"{server}: no URL for it (name it with --redis)")
        return
    client = endpoint.connect()
    try:
        done, value, ttl = client.eval(COMPARE_AND_DELETE, 1, raw(store.key), raw(token))
    except (redis.RedisError, OSError) as exc:
        from lockwatch.sources.redis.server import describe

        said = describe(exc, endpoint)
        if isinstance(exc, redis.TimeoutError | redis.ConnectionError | OSError):
            # The script may have run before the answer was lost.
            said += f" (whether {store.key} was deleted there is not known: look at it)"
        failed.append(f"{server}: {said}")
        return
    finally:
        client.close()
    held = None if value is None else text(value)
    if done:
        deleted.append(
            {
                "server": server,
                "key": store.key,
                "previous_value": held,
                "token": token,
                "ttl_ms": ttl,
                "restore": _restore(store.key, token, int(ttl)),
            }
        )
    else:
        untouched.append({"server": server, "key": store.key, "value": held, "ttl_ms": ttl})


def _outcome(
    store: StoreLock,
    token: str,
    servers: list[str],
    deleted: list[dict[str, Any]],
    untouched: list[dict[str, Any]],
    failed: list[str],
) -> tuple[dict[str, Any], str]:
    """The break's audit details and message; refused or failed where nothing
    was deleted."""
    details: dict[str, Any] = {"key": store.key, "token": token, "deleted": deleted}
    if untouched:
        details["untouched"] = untouched
    if failed:
        details["unreachable"] = failed
    if not deleted:
        if failed:
            raise ActionFailed("unreachable", "; ".join(failed) + "; nothing seen deleted")
        taken = [entry for entry in untouched if entry["value"] is not None]
        if taken:
            raise ActionRefused(
                "changed",
                f"{store.key} now holds another token ({taken[0]['value']}): someone took the"
                " lock since you saw it; nothing done",
            )
        raise ActionRefused("gone", f"{store.key} is gone (released or expired); nothing done")
    first = deleted[0]
    if len(servers) == 1:
        message = (
            f"deleted {store.key} on {store.server} (token {token}, {first['ttl_ms']} ms left);"
            f" to put it back: {first['restore']}"
        )
    else:
        message = (
            f"deleted {store.key} on {len(deleted)} of {len(servers)} servers of the group"
            f" (token {token})"
        )
        if failed:
            message += "; unreachable: " + "; ".join(failed) + " (their copies expire by TTL)"
    return details, message


class RedisActions(StoreActions):
    name = "redis"

    def plan_break(self, kind: Kind, lock: Lock, verdict: Verdict, peers: Sequence[Lock]) -> Plan:
        return plan_action(kind, lock, verdict, peers)

    def execute(self, plan: Plan, doing: Doing) -> tuple[dict[str, Any], str]:
        expect, reach = doing.expect_sha256, doing.reach
        if isinstance(plan.lock.facts, SubscriptionFacts):
            return kill(plan, expect, reach)
        if isinstance(plan.lock.facts, RedissonFacts):
            return execute_redisson(plan, expect, reach)
        if isinstance(plan.lock.facts, SemaphoreFacts):
            return execute_semaphore(plan, expect, reach)
        return execute(plan, expect, reach)


ACTIONS = RedisActions()
