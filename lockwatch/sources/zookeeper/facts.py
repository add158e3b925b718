"""A ZooKeeper lock recipe's contender (or an empty lock parent), as plain data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.facts import Facts, Party, Section, Series
from lockwatch.model.report import texts
from lockwatch.model.timestamps import format_timestamp
from lockwatch.sources.zookeeper.rules import NO_SESSION, evaluate_zk

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup
    from lockwatch.model.verdict import Verdict

ZOOKEEPER = "zookeeper"
WARNING_CODES = frozenset({"client_unknown"})


@dataclass(frozen=True, slots=True)
class ZkLock(Facts):
    server: str  # the ensemble's connect string (its name)
    # The znode the contender is a child of: the lock path, the lock's name (but
    # for a kazoo semaphore's queue, `<semaphore>-__lock__`: its name is the semaphore's).
    parent: str
    node: str  # the contender's znode name under it ("" for an empty parent)
    recipe: str
    library: str  # "kazoo", "Curator"
    mode: str  # exclusive, read, write, lease, leadership
    polled_at: datetime
    czxid: int = 0
    version: int = 0
    owner: int = 0  # ephemeralOwner: its session id; 0: a persistent node
    identifier: str = ""  # the node's data: kazoo's identifier, Curator's lock data
    position: int = 0
    holds: bool = True
    # This contender's node in the ensemble's wait-for graph (its session), whom
    # it waits on, and who waits on it.
    blocked_by: tuple[str, ...] = ()
    blocking: tuple[str, ...] = ()
    conflict: tuple[str, ...] = ()
    # Whether its session has a client now (rules.py) and, when known, which.
    session_state: str = NO_SESSION
    client: str | None = None
    session_why: str | None = None
    orphan: bool = False
    cversion: int = 0
    max_leases: int | None = None
    # A kazoo NonBlockingLease's end, by its holder's clock (UTC); None: not a lease.
    lease_end: datetime | None = None
    # How many contenders wait in its queue (serve's lockwatch_zk_queue_length).
    queue_length: int = 0

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        return evaluate_zk(lock, self, now)

    @property
    def path(self) -> str:
        if not self.node:
            return self.parent
        return f"{self.parent.rstrip('/')}/{self.node}"

    @property
    def session(self) -> str:
        """Its node in the wait-for graph: the session id in hex, as ZooKeeper
        prints it; a persistent node stands for itself."""
        return f"0x{self.owner:x}" if self.owner else f"node {self.node or self.parent}"

    # --- blocking trees ------------------------------------------------------

    def group(self) -> str:
        # As every polled server's wait-for graph is named (sources/polled.py).
        return f"{ZOOKEEPER}:{self.server}"

    def holds_as(self) -> str | None:
        return self.session if self.holds and not self.orphan else None

    def waits(self) -> tuple[str, tuple[str, ...]] | None:
        return (self.session, self.blocked_by) if not self.holds else None

    def waiter_count(self) -> int:
        return len(self.blocking)

    def party(self, lock: Lock) -> Party | None:
        if self.orphan:
            return None
        return Party(
            self.session,
            self.holds,
            f"{self.mode} {self.library} {self.recipe.split('-', 1)[1]} on {lock.name}",
            waiting_since=self.waiting_since(lock),
            who=self.client or "",
        )

    def wait_metrics_server(self) -> str | None:
        return None if self.orphan else self.group()

    def tree_node(self) -> tuple[str, str] | None:
        if self.orphan:
            return None
        client = f" ({self.client})" if self.client else ""
        label = f"session {self.session}" if self.owner else self.session
        return self.session, f"{label}{client}"

    def waiting_since(self, lock: Lock) -> datetime | None:
        return lock.acquired_at if not self.holds else None

    # --- how it reads ----------------------------------------------------------

    def holder_text(self, lock: Lock) -> str | None:
        if self.orphan:
            return "nobody (empty lock parent)"
        who = f"session {self.session}" if self.owner else "no session (persistent node)"
        if self.lease_end is not None:
            # A lease's node is persistent by design: its end, not a session, bounds it.
            who = f"kazoo lease until {format_timestamp(self.lease_end, precise=False)}"
        if self.client:
            who += f" from {self.client}"
        if self.identifier:
            who = f"{self.identifier} ({who})"
        return who

    def where(self, lock: Lock) -> str:
        return f"zk:{self.server} {self.path}"

    def place(self, lock: Lock) -> str:
        return self.server

    def operation(self, lock: Lock) -> str | None:
        if self.orphan:
            return None
        verb = "holds" if self.holds else "waits for"
        return f"{verb} {self.mode}"

    def warning_codes(self) -> frozenset[str]:
        return WARNING_CODES

    def matches_text(self, needle: str) -> bool:
        return any(
            needle in text.lower()
            for text in (self.identifier, self.client or "", self.session, self.server)
        )

    def fields(self) -> list[tuple[str, str]]:
        client = self.client or (
            "unknown" if self.session_state == "unknown" else self.session_state
        )
        return [
            ("ensemble", self.server),
            ("znode", self.path),
            ("recipe", f"{self.library} {self.recipe.split('-', 1)[1]}" if self.library else ""),
            ("mode", self.mode),
            ("identifier", self.identifier),
            ("session", self.session if not self.orphan else ""),
            ("client", client if not self.orphan else ""),
            ("why unknown", self.session_why or ""),
            ("queue position", str(self.position) if not self.orphan else ""),
            ("czxid", f"0x{self.czxid:x}" if self.czxid else ""),
            ("max leases", str(self.max_leases) if self.max_leases else ""),
            (
                "lease ends",
                format_timestamp(self.lease_end, precise=False) if self.lease_end else "",
            ),
            ("waits for", ", ".join(self.blocked_by)),
            ("waiters", ", ".join(self.blocking)),
            ("also holding", ", ".join(self.conflict)),
        ]

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:
        rows = tuple((label, value) for label, value in self.fields() if value)
        return (Section("ZooKeeper", rows, whole=("znode",)),)

    def as_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "parent": self.parent,
            "znode": self.path,
            "recipe": self.recipe,
            "library": self.library or None,
            "mode": self.mode or None,
            "czxid": self.czxid or None,
            "ephemeral_owner": f"0x{self.owner:x}" if self.owner else None,
            "identifier": self.identifier,
            "position": None if self.orphan else self.position,
            "waiting": not self.holds,
            "session_state": self.session_state,
            "client": self.client,
            "client_unknown_because": self.session_why,
            "blocked_by": list(self.blocked_by),
            "blocking": list(self.blocking),
            "also_holding": list(self.conflict),
            "max_leases": self.max_leases,
            "lease_end": format_timestamp(self.lease_end, precise=False)
            if self.lease_end
            else None,
        }

    def series(self, lock: Lock) -> Sequence[Series]:
        """serve's gauges of a lock path, from its first holder (one per name):
        how long it has held, how many wait; a kazoo lease's time past its end."""
        if self.orphan or not self.holds or self.position or self.parent != lock.name:
            return ()
        # Labelled as the ensemble's wait series are (zookeeper:<connect string>).
        server = self.group()
        out = [
            Series(
                "lockwatch_zk_queue_length",
                "Contenders waiting in a ZooKeeper lock recipe's queue.",
                server,
                value=float(self.queue_length),
            )
        ]
        if lock.acquired_at is not None:
            out.append(
                Series(
                    "lockwatch_zk_holder_age_seconds",
                    "Seconds since the first holder of a ZooKeeper lock recipe made its"
                    " node (ctime; a kazoo lease: since it was taken or renewed).",
                    server,
                    since=lock.acquired_at,
                )
            )
        if self.lease_end is not None:
            out.append(
                Series(
                    "lockwatch_zk_lease_overdue_seconds",
                    "Seconds a kazoo NonBlockingLease is past its end (0: not yet).",
                    server,
                    since=self.lease_end,
                )
            )
        return out

    def extend_record(self, record: dict[str, Any]) -> None:
        record.update(texts(self.as_json()))
