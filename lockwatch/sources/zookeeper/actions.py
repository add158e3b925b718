"""Breaking a ZooKeeper lock: delete the holder's znode, only if it is the very
node the operator saw.

Compare-and-swap: the node is read again and deleted only if its `czxid` (which
creation of that path it is) and `ephemeralOwner` (its session) are those the
operator saw, and with `delete(path, version)`, so a node changed since is left
alone. Deleting it fires the next contender's watch: it then holds the lock.
The holder's client is told nothing: a live client (its session connected)
goes on believing it holds the lock, so that break needs --force (or the
typed name), and its effect says so. An empty lock parent is deleted only while
it is still empty (ZooKeeper refuses to delete a znode with children).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lockwatch.model.action import ActionFailed, ActionRefused, Done, Kind, Plan, refused
from lockwatch.model.lock import Lock
from lockwatch.model.timestamps import format_timestamp
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.contract import ActionsBase, Wanted
from lockwatch.sources.zookeeper.facts import ZOOKEEPER, ZkLock
from lockwatch.sources.zookeeper.rules import CONNECTED, DISCONNECTED, NO_SESSION

if TYPE_CHECKING:
    from lockwatch.model.action import Asked, Doing

# Connecting and each read of a break: a server that does not answer fails it, one line.
TIMEOUT = 5.0


def _facts(lock: Lock) -> ZkLock:
    zk = lock.facts
    assert isinstance(zk, ZkLock)
    return zk


def plan_break(kind: Kind, lock: Lock, verdict: Verdict) -> Plan:
    zk = _facts(lock)
    if kind is not Kind.BREAK:
        why = f"a ZooKeeper lock can only be broken (its znode deleted), not {kind.value}"
        return refused(kind, lock, verdict, "unsupported", why)
    if zk.orphan:
        effect = (
            f"delete the empty lock parent {zk.parent} on {zk.server}, only while it is still"
            f" empty and at version {zk.version}"
        )
        return Plan(kind, lock, verdict, "lock_broken", effect)
    gone = zk.session_state in (DISCONNECTED, NO_SESSION)
    if not zk.holds and not gone:
        why = (
            f"{zk.path} waits for {lock.name} (position {zk.position}) and its session"
            f" {zk.session} is connected: it holds nothing"
        )
        return refused(kind, lock, verdict, "not_held", why)
    effect = (
        f"delete {zk.path} on {zk.server}, only if it is still czxid 0x{zk.czxid:x} owned by"
        f" {'no session' if not zk.owner else 'session ' + zk.session}"
    )
    if zk.blocking:
        effect += f"; {zk.blocking[0]}, next in the queue, then holds {lock.name}"
    if zk.session_state == CONNECTED or zk.session_state == "unknown":
        client = f" at {zk.client}" if zk.client else ""
        effect += (
            f". Session {zk.session}{client} is"
            f" {'connected' if zk.session_state == CONNECTED else 'perhaps connected'}: its"
            f" {zk.library} client is not told and goes on believing it holds {lock.name},"
            " so two clients hold it until that one releases (kazoo and Curator both"
            " take the missing node as released, and say nothing)"
        )
    if zk.session_state == NO_SESSION and zk.holds:
        effect += (
            f". No session owns it, so nothing says whether its holder {zk.identifier} still"
            f" runs: if it does, it goes on believing it holds {lock.name}"
        )
    if zk.lease_end is not None and verdict.state is not State.STALE:
        end = format_timestamp(zk.lease_end, precise=False)
        effect += (
            f". Its holder {zk.identifier} is not told: it goes on believing its kazoo"
            f" lease runs to {end}, and any other identifier may take it at once"
        )
    return Plan(
        kind,
        lock,
        verdict,
        "lock_broken",
        effect,
        needs_name=verdict.state is not State.STALE and not zk.orphan,
    )


def execute(plan: Plan, expect_sha256: str | None, reach: Mapping[str, Any]) -> Done:
    from kazoo.exceptions import BadVersionError, KazooException, NoNodeError, NotEmptyError
    from kazoo.handlers.threading import KazooTimeoutError

    from lockwatch.sources.zookeeper.endpoint import endpoint_for
    from lockwatch.sources.zookeeper.server import PollTimeout, ZkServer

    lock = plan.lock
    zk = _facts(lock)
    path = zk.path
    if expect_sha256 is not None and expect_sha256 != lock.sha256:
        raise ActionRefused("changed", f"{path} is not the znode you saw; nothing done")
    endpoint = endpoint_for(zk.server, reach)
    if endpoint is None:
        raise ActionFailed("unreachable", f"no ensemble {zk.server}: name it with --zk")
    server = ZkServer(endpoint)
    deleting = False
    try:
        try:
            client = server.client(TIMEOUT)
            stat = client.exists_async(path).get(timeout=TIMEOUT)
            if stat is None:
                raise ActionRefused(
                    "gone", f"{path} is gone (released, or its session ended); nothing done"
                )
            if stat.czxid != zk.czxid or stat.ephemeralOwner != zk.owner:
                raise ActionRefused(
                    "changed",
                    f"{path} is not the node you saw (czxid 0x{stat.czxid:x}, session"
                    f" 0x{stat.ephemeralOwner:x}; you saw 0x{zk.czxid:x}, {zk.session}):"
                    " nothing done",
                )
            deleting = True
            client.delete_async(path, version=stat.version).get(timeout=TIMEOUT)
        except NoNodeError:
            raise ActionRefused("gone", f"{path} is gone; nothing done") from None
        except BadVersionError:
            raise ActionRefused(
                "changed", f"{path} changed as it was deleted; nothing done"
            ) from None
        except NotEmptyError:
            raise ActionRefused(
                "changed", f"{path} is no longer empty: a contender came; nothing done"
            ) from None
        except (KazooException, KazooTimeoutError, PollTimeout, OSError) as exc:
            text = str(exc).strip() or type(exc).__name__
            if isinstance(exc, KazooTimeoutError):
                text = f"no answer within {TIMEOUT:.0f}s"
            done = (
                f"whether {path} was deleted is unknown: look again with lockwatch ls"
                if deleting
                else "nothing done"
            )
            raise ActionFailed("unreachable", f"ZooKeeper {zk.server}: {text}; {done}") from None
    finally:
        server.close()
    details = {
        "znode": path,
        "czxid": f"0x{zk.czxid:x}",
        "ephemeral_owner": zk.session if zk.owner else None,
        "session_state": zk.session_state,
        "client": zk.client,
        "identifier": zk.identifier,
        "version": stat.version,
    }
    return Done(details, f"deleted {path} on {zk.server} (czxid 0x{zk.czxid:x})")


class ZooKeeperActions(ActionsBase):
    name = ZOOKEEPER
    kinds = frozenset({Kind.BREAK})

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        return plan_break(kind, lock, verdict)

    def reach(self, wanted: Wanted) -> Mapping[str, Any]:
        from lockwatch.sources.zookeeper.endpoint import REACH, reach_of

        return {REACH: reach_of(wanted)}

    def run(self, plan: Plan, doing: Doing) -> Done:
        return execute(plan, doing.expect_sha256, doing.reach)

    def target(self, lock: Lock) -> dict[str, Any]:
        zk = lock.facts
        if not isinstance(zk, ZkLock):
            return {}
        return {"server": zk.server, "znode": zk.path}


ACTIONS = ZooKeeperActions()
