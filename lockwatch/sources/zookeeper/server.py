"""One ZooKeeper ensemble, read with kazoo: the lock recipes' znodes under the
chroot (or the paths given), each contender's stat and data, and which client
each session is connected from (`cons`, fourletter.py).

A poll writes nothing. It walks the tree a level at a time, every level's reads
pipelined on kazoo's one connection, and stops at MAX_NODES znodes; every read
waits at most what is left of the poll's deadline. It leaves child watches on
the lock paths it found and on the znodes holding them: a change there wakes
the dashboard's feed at once (`changed`), rather than at its next interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lockwatch.clock import Clock
from lockwatch.model.status import SourceStatus
from lockwatch.sources.backoff import ServerState, failed, first_line
from lockwatch.sources.contract import DEFAULT_DEADLINE
from lockwatch.sources.zookeeper.endpoint import ZkEndpoint
from lockwatch.sources.zookeeper.fourletter import connections
from lockwatch.sources.zookeeper.ids import SEMAPHORE_QUEUE
from lockwatch.sources.zookeeper.recipes import (
    DATA_SHOWN,
    LEASE_DATA_READ,
    LEASE_HOLDER,
    Node,
    is_contender,
    is_kazoo_lease,
)

# Znodes a poll reads at most: a tree that holds far more than locks must not
# make lockwatch read it all; past it, the status says so (narrow it with --zk-path).
# One read a znode: 5,250 znodes with 200 lock paths took 2.2 s a poll on a loaded
# 2-core machine, so this many stays within the poll's deadline (8 s).
MAX_NODES = 10_000
# ZooKeeper's own znodes (quotas, config): never a lock.
SYSTEM = "/zookeeper"
# The ensemble's dynamic config (3.5+): a `server.N=` line per server; empty standalone.
CONFIG = "/zookeeper/config"
SESSION_TIMEOUT = 10.0
# Connecting (kazoo's handshake) waits at most this much of a poll's deadline: a
# server that takes TCP connections and answers nothing (stopped) is said to be so.
CONNECT_TIMEOUT = 4.0
# Once connecting failed, each server's TCP port is tried this long to say why,
# all of them within the budget (a poll's deadline has room for it after CONNECT_TIMEOUT).
PROBE_TIMEOUT = 0.5
PROBE_BUDGET = 1.5
KIND = "zookeeper"


class PollTimeout(Exception):
    """The ensemble did not answer within the poll's deadline."""


@dataclass(frozen=True)
class Parent:
    """A znode whose children are lock contenders (or leases), or that has
    none left: its own stat, and its children's."""

    path: str
    stat: Node
    children: tuple[Node, ...] = ()
    kazoo_semaphore: bool = False
    max_leases: int | None = None


@dataclass(frozen=True)
class ZkSnapshot:
    server: str
    polled_at: datetime
    parents: list[Parent]
    empties: list[Parent]
    # Session id → client address, from every server that answered cons.
    sessions: dict[int, str] = field(default_factory=dict)
    # Why a session missing from `sessions` may still have a client (a server
    # that did not answer cons); None: every server answered.
    sessions_why: str | None = None
    truncated: bool = False
    roots: tuple[str, ...] = ("/",)


def _logger() -> logging.Logger:
    # kazoo logs every reconnection attempt at WARNING: the status says it once.
    logger = logging.getLogger("lockwatch.zookeeper.kazoo")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


def _node(name: str, stat: Any, data: bytes | None = None) -> Node:
    text = ""
    # A lease's JSON is read whole (up to a bound): its end follows the identifier.
    shown = LEASE_DATA_READ if name == LEASE_HOLDER else DATA_SHOWN
    if data:
        text = data[: shown * 4].decode("utf-8", "replace")[:shown]
    return Node(
        name,
        stat.czxid,
        stat.ctime,
        stat.version,
        stat.ephemeralOwner,
        text,
        stat.numChildren,
        stat.cversion,
    )


def ensemble(config: str) -> list[str]:
    """The servers a dynamic config (`server.1=zk1:2888:3888:participant;0.0.0.0:2181`)
    names."""
    return [
        line.split("=", 1)[1]
        for line in config.splitlines()
        if line.startswith("server.") and "=" in line
    ]


def _with_semaphores(roots: tuple[str, ...]) -> list[str]:
    out = []
    for root in roots:
        semaphore = root.removesuffix(SEMAPHORE_QUEUE)
        out += [semaphore, root] if semaphore != root else [root]
    return out


def _join(parent: str, child: str) -> str:
    return f"{parent.rstrip('/')}/{child}"


class ZkServer(ServerState):
    def __init__(
        self,
        endpoint: ZkEndpoint,
        roots: tuple[str, ...] = (),
        *,
        clock: Clock | None = None,
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        super().__init__(KIND, endpoint.name, clock, deadline)
        self.endpoint = endpoint
        self.roots = tuple(dict.fromkeys(root.rstrip("/") or "/" for root in roots)) or ("/",)
        # What is walked: a kazoo semaphore's queue is read with its semaphore,
        # whose leases it waits on (alone, its first caller would seem to hold).
        self.walked = tuple(dict.fromkeys(_with_semaphores(self.roots)))
        self._client: Any = None
        self.last: ZkSnapshot | None = None
        # Set when a watch fires: a lock path's children changed since it was read.
        self.changed = threading.Event()
        self.on_change: Callable[[], None] | None = None

    # --- connection --------------------------------------------------------------

    def client(self, timeout: float) -> Any:
        """kazoo's client, connected (within `timeout` seconds)."""
        if self._client is None:
            from kazoo.client import KazooClient
            from kazoo.retry import KazooRetry

            client = KazooClient(
                hosts=self.endpoint.connect,
                timeout=SESSION_TIMEOUT,
                connection_retry=KazooRetry(max_tries=-1, max_delay=5),
                command_retry=None,
                read_only=True,
                logger=_logger(),
            )
            # start_async, not start(timeout): start stops the client itself on a
            # timeout and waits for its handshake, which a stopped server never answers.
            connected = client.start_async()
            connected.wait(max(timeout, 0.1))
            if not client.connected:
                _stop(client)
                unreached = _unreached(self.endpoint.hosts)
                if unreached is not None:
                    raise PollTimeout(f"not connected within {timeout:.1f}s: {unreached}")
                raise PollTimeout(
                    f"no answer within {timeout:.1f}s: not connected (a server took the"
                    " connection and did not answer as ZooKeeper does: stopped, or not ZooKeeper)"
                )
            self._client = client
        return self._client

    def _watch(self, event: Any) -> None:
        self.changed.set()
        callback = self.on_change
        if callback is not None:
            callback()

    # --- a poll ------------------------------------------------------------------

    def poll(self) -> ZkSnapshot | None:
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        ends = time.monotonic() + self.deadline
        self.changed.clear()
        try:
            if self._client is None:
                self.status = SourceStatus(
                    KIND, self.name, "connecting", updated_at=self._updated_at()
                )
            client = self.client(min(CONNECT_TIMEOUT, ends - time.monotonic()))
            walk = Walk(client, ends, self._watch)
            parents, empties, truncated = walk.run(self.walked)
            sessions, why = self._sessions(ends)
            unseen = self._unlisted(client, ends)
            if unseen is not None:
                why = f"{why}; {unseen}" if why else unseen
        except (KazooException, KazooTimeoutError, OSError, PollTimeout, ValueError) as exc:
            self._fail(exc)
            return None
        polled_at = self.clock.now()
        self.failures, self.retry_in = 0, 0.0
        self.last = ZkSnapshot(
            self.name, polled_at, parents, empties, sessions, why, truncated, self.roots
        )
        missing = [root for root in self.roots if root not in walk.seen]
        reason = self._partly(truncated, missing)
        self.status = SourceStatus(
            KIND, self.name, "connected", reason=reason, updated_at=polled_at, partial=bool(reason)
        )
        return self.last

    def _partly(self, truncated: bool, missing: list[str]) -> str | None:
        """Why the poll saw less than it was asked to: a typo'd chroot or
        --zk-path is said, never shown as a tree with no locks in it."""
        said = []
        if truncated:
            said.append(
                f"over {MAX_NODES} znodes: only the first were read (narrow with --zk-path)"
            )
        if missing == ["/"] and self.endpoint.chroot:
            said.append(f"its chroot {self.endpoint.chroot} does not exist")
        elif missing:
            said.append(f"no znode {', '.join(missing)}: nothing read there")
        return "; ".join(said) or None

    def _sessions(self, ends: float) -> tuple[dict[int, str], str | None]:
        sessions: dict[int, str] = {}
        why: list[str] = []
        for host, port in self.endpoint.hosts:
            left = min(2.0, ends - time.monotonic())
            if left <= 0:
                why.append(f"{host}:{port} was not asked cons (the poll's deadline)")
                continue
            answer = connections(host, port, left)
            sessions.update(answer.sessions)
            if answer.why is not None:
                why.append(answer.why)
        return sessions, "; ".join(why) or None

    def _unlisted(self, client: Any, ends: float) -> str | None:
        """Why a session missing from cons may be connected all the same: the
        ensemble (its dynamic config, /zookeeper/config) has servers --zk does not
        name, whose connections were not asked. None: every server was."""
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = client.get_async(CONFIG).get(timeout=max(ends - time.monotonic(), 0.01))
        except NoNodeError:
            return None
        except client.handler.timeout_exception:
            raise PollTimeout("no answer within the poll's deadline") from None
        members = ensemble(data.decode("utf-8", "replace") if data else "")
        asked = len(self.endpoint.hosts)
        if len(members) <= asked:
            return None
        return (
            f"the ensemble has {len(members)} servers ({CONFIG}) and --zk names {asked}: a"
            " session connected to another was not asked about; name them all"
        )

    def _updated_at(self) -> datetime | None:
        return self.last.polled_at if self.last else None

    def _fail(self, exc: BaseException) -> None:
        text = first_line(exc)
        if type(exc).__name__ == "KazooTimeoutError":
            text = f"no answer within the poll's deadline: {text}"
        failed(self, KIND, text, away=True, updated_at=self._updated_at())

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            _stop(client)


def _unreached(hosts: tuple[tuple[str, int], ...]) -> str | None:
    """Why no server of the ensemble took a TCP connection, each (`refused`,
    a name that does not resolve), when none did: kazoo retries quietly, so
    its failing to connect says nothing of why. None: one took it (a server
    that does not answer, or not ZooKeeper)."""
    import socket

    said = []
    ends = time.monotonic() + PROBE_BUDGET
    for host, port in hosts:
        left = min(PROBE_TIMEOUT, ends - time.monotonic())
        if left <= 0:
            said.append(f"{host}:{port}: not tried (no time left)")
            continue
        try:
            socket.create_connection((host, port), timeout=left).close()
            return None
        except OSError as exc:
            said.append(f"{host}:{port}: {getattr(exc, 'strerror', None) or exc}")
    return "; ".join(said)


def _stop(client: Any) -> None:
    """Stop kazoo's client without waiting on a server that does not answer:
    its close request is left to a daemon thread."""

    def stop() -> None:
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001 - closing a connection that is gone anyway
            pass

    thread = threading.Thread(target=stop, name="zk-close", daemon=True)
    thread.start()
    thread.join(0.2)


class Walk:
    """One poll's walk of the tree, a level at a time."""

    def __init__(self, client: Any, ends: float, watch: Callable[[Any], None]) -> None:
        self.client = client
        self.ends = ends
        self.watch = watch
        self.read = 0
        self.truncated = False
        # Each znode's children as the walk read them: what its watch is armed against.
        self.seen: dict[str, frozenset[str]] = {}

    def _get(self, pending: Any) -> Any:
        from kazoo.exceptions import NoNodeError

        left = self.ends - time.monotonic()
        if left <= 0:
            raise PollTimeout("no answer within the poll's deadline")
        try:
            return pending.get(timeout=left)
        except NoNodeError:
            return None
        except self.client.handler.timeout_exception:
            raise PollTimeout("no answer within the poll's deadline") from None

    def run(self, roots: tuple[str, ...]) -> tuple[list[Parent], list[Parent], bool]:
        parents: list[Parent] = []
        empties: list[Parent] = []
        frontier = list(roots)
        while frontier:
            if self.read + len(frontier) > MAX_NODES:
                frontier = frontier[: max(MAX_NODES - self.read, 0)]
                self.truncated = True
            asked = [(p, self.client.get_children_async(p, include_data=True)) for p in frontier]
            self.read += len(asked)
            frontier = []
            for path, pending in asked:
                answer = self._get(pending)
                if answer is None:
                    continue
                children, stat = answer
                self.seen[path] = frozenset(children)
                found = self._parent(path, children, stat)
                read = set()
                if found is not None:
                    (parents if found.children else empties).append(found)
                    read = {node.name for node in found.children}
                # Below a lock path too (its contenders are ephemeral: they have no children).
                frontier.extend(
                    _join(path, c) for c in children if c not in read and _join(path, c) != SYSTEM
                )
        self._arm(parents, empties)
        return parents, empties, self.truncated

    def _parent(self, path: str, children: list[str], stat: Any) -> Parent | None:
        own = _node(path.rpartition("/")[2] or "/", stat)
        if not children:
            if stat.cversion > 0 and stat.ephemeralOwner == 0 and path != "/":
                return Parent(path, own)
            return None
        contenders = [c for c in children if is_contender(c)]
        # kazoo's NonBlockingLease (its data tells a lease from any other such name).
        lease = [LEASE_HOLDER] if LEASE_HOLDER in children else []
        semaphore = not contenders and not lease and all(is_kazoo_lease(c) for c in children)
        if not contenders and not semaphore and not lease:
            return None
        max_leases = None
        if semaphore:
            answer = self._get(self.client.get_async(path))
            data = answer[0] if answer else b""
            try:
                max_leases = int(data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                return None  # 32-hex names alone, and no lease count: not kazoo's semaphore
        names = contenders + lease if not semaphore else children
        room = max(MAX_NODES - self.read, 0)
        if len(names) > room:
            # A queue's head is what holds: the lowest sequences (every recipe's
            # names end with theirs) are read, and the status says the rest were not.
            names = sorted(names, key=lambda name: name[-10:])[:room]
            self.truncated = True
        pending = [(c, self.client.get_async(_join(path, c))) for c in names]
        self.read += len(pending)
        nodes = []
        for name, each in pending:
            answer = self._get(each)
            if answer is not None:
                nodes.append(_node(name, answer[1], answer[0]))
        return Parent(path, own, tuple(nodes), semaphore, max_leases)

    def _arm(self, parents: list[Parent], empties: list[Parent]) -> None:
        """Child watches on the lock paths and the znodes above them (where new
        lock paths appear); kazoo keeps one per path for a watcher, however often set."""
        paths = {p.path for p in (*parents, *empties)}
        paths |= {p.path.rpartition("/")[0] or "/" for p in (*parents, *empties)}
        armed = [(p, self.client.get_children_async(p, watch=self.watch)) for p in sorted(paths)]
        for path, pending in armed:
            # A change between the walk's read and the watch set is no watch event:
            # children that differ from those read ask for the next poll at once.
            children = self._get(pending)
            if children is not None and frozenset(children) != self.seen.get(path):
                self.watch(None)
