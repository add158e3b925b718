"""Locks kept in a distributed store (Redis, etcd), as plain data.

Pure: the redis and etcd sources fill these in from their servers' answers;
verdicts (sources/stores/rules.py), views and the JSON contract read them. Times
are on this host's clock: the poll's instant plus the server's TTLs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lockwatch.model.facts import Facts, Party, Section
from lockwatch.model.jsonfields import json_fields
from lockwatch.model.report import texts
from lockwatch.model.slots import fast_init
from lockwatch.sources.stores.rules import evaluate_store

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup
    from lockwatch.model.verdict import Verdict

REDIS = "redis"
ETCD = "etcd"

# Reason codes that are warnings about a live lock: its row's NOTE stands out.
WARNING_CODES = frozenset({"no_expiry"})
# What each store is called where it is named to the operator (the detail pane).
TITLES = {REDIS: "Redis", ETCD: "etcd"}


@dataclass(frozen=True, slots=True)
class QuorumMember:
    """One server of a Redlock group, as it answered for one lock key."""

    server: str
    # True: holds the key with the lock's token; False: does not (absent, or
    # another token); None: the server could not be asked.
    holds: bool | None
    token: str | None = None  # what it holds there, if anything
    ttl_seconds: float | None = None  # left at the poll; None: no expiry, or absent
    error: str | None = None  # why it could not be asked

    as_json = json_fields("server", "holds", "token", "ttl_seconds", "error")


@dataclass(frozen=True, slots=True)
class Quorum:
    """How many servers of a Redlock group hold a lock with the same token."""

    servers: int
    holding: int
    unknown: int  # servers that could not be asked
    members: tuple[QuorumMember, ...] = ()

    @property
    def needed(self) -> int:
        return self.servers // 2 + 1

    as_json = json_fields(
        "servers",
        "holding",
        "needed",
        "unknown",
        ("members", lambda quorum: [member.as_json() for member in quorum.members]),
    )


@dataclass(frozen=True, slots=True)
class StoreClient:
    """A Redis client blocked waiting for a lock (CLIENT LIST)."""

    id: int
    addr: str
    name: str | None = None
    command: str = "blpop"
    blocked_seconds: float | None = None  # the command's idle time at the poll

    as_json = json_fields("id", "addr", "name", "command", "blocked_seconds")


# One per key a poll reads (10,000 on a busy etcd): dataclass's own __init__ was
# a quarter of making its lock records (bench_etcd.py).
@fast_init
@dataclass(frozen=True, slots=True)
class StoreLock(Facts):
    """One lock key (or one waiter for one) in Redis or etcd, at one poll.

    Keys and values are text; bytes that are not UTF-8 are carried as lone
    surrogates (surrogateescape), so what an action compares is exactly what
    the server holds.
    """

    store: str  # REDIS or ETCD
    server: str  # the server's display name (never a password); a Redlock group's members
    key: str
    polled_at: datetime
    # The key's value: the holder's token (Redis), the key's value (etcd).
    value: str | None = None
    # Seconds left before the store drops the key, at the poll; None: it never
    # will (no TTL, no lease), or a waiter's.
    ttl_left: float | None = None
    # etcd: the key's lease (0/None: none) and what it was granted.
    lease: int | None = None
    granted_ttl: float | None = None
    create_revision: int | None = None
    mod_revision: int | None = None
    version: int | None = None
    revision: int | None = None  # the store's revision when polled
    # Place in the mutex's queue: 0 holds it, 1 is next, ...
    position: int = 0
    waiting: bool = False
    # This holder's or waiter's node in the server's wait-for graph (a token, a
    # lease in hex, `client:<id>`), whom it waits on, and who waits on it.
    session: str = ""
    blocked_by: tuple[str, ...] = ()
    blocking: tuple[str, ...] = ()
    quorum: Quorum | None = None
    client: StoreClient | None = None
    # The whole value's length when only its start was read (`value` is that start).
    value_bytes: int | None = None

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        return evaluate_store(lock, self, now)

    @property
    def expiry_word(self) -> str:
        """What lets the store drop the key by itself: an etcd lease, a Redis TTL."""
        return "lease" if self.store == ETCD else "TTL"

    def group(self) -> str:
        """Whose wait-for graph this belongs to: the store and its server."""
        return f"{self.store}:{self.server}"

    def holds_as(self) -> str | None:
        return None if self.waiting else self.session

    def waits(self) -> tuple[str, tuple[str, ...]] | None:
        # A waiter's session (client, lease) waits on its holder's.
        return (self.session, self.blocked_by) if self.waiting else None

    def waiter_count(self) -> int:
        return len(self.blocking)

    def tree_node(self) -> tuple[str, str] | None:
        # Its node in the server's wait-for graph is a bare token, lease or
        # `client:<id>`: the blocking tree says which kind it is.
        if not self.session:
            return None
        if self.client is not None:
            return self.session, f"client {self.client.id}"
        if self.store == ETCD and self.session == self.lease_hex:
            return self.session, f"lease {self.session}"
        return self.session, f"{'token' if self.store == REDIS else 'value'} {self.session}"

    def extend_record(self, record: dict[str, Any]) -> None:
        # Keys and tokens are the store's bytes: odd ones as `\xff` escapes.
        record.update(texts(self.as_json()))
        record["holder"]["session"] = texts(record["holder"]["session"])

    @property
    def expires_at(self) -> datetime | None:
        if self.ttl_left is None:
            return None
        return self.polled_at + timedelta(seconds=self.ttl_left)

    @property
    def lease_hex(self) -> str | None:
        return None if not self.lease else format(self.lease, "x")

    @property
    def title(self) -> str:
        """The store's name, as the operator knows it: "Redis", "etcd"."""
        return TITLES.get(self.store, self.store)

    # --- the views ----------------------------------------------------------------

    def where(self, lock: Lock) -> str:
        return f"{self.store}:{self.server} {self.key}"

    def sections(self, lock: Lock, now: datetime) -> tuple[Section, ...]:
        rows = tuple((label, value) for label, value in self.fields() if value)
        return (Section(self.title, rows),)

    def warning_codes(self) -> frozenset[str]:
        return WARNING_CODES

    def ttl_to_expiry(self) -> bool:
        # A key's TTL (or lease) counts down to when the store drops it.
        return True

    def waiting_since(self, lock: Lock) -> datetime | None:
        return lock.acquired_at if self.waiting else None

    def party(self, lock: Lock) -> Party:
        # A holder's token or lease, a waiting client or lease.
        return Party(
            self.session, not self.waiting, lock.name, waiting_since=self.waiting_since(lock)
        )

    def holder_text(self, lock: Lock) -> str:
        """Who holds (or waits), as the HOLDER column says it."""
        if self.client is not None:
            return f"client {self.client.id} {self.client.addr}"
        if self.store == ETCD:
            return f"lease {self.lease_hex}" if self.lease else "no lease"
        token = f"token {self.value}" if self.value is not None else "no token"
        if self.quorum is not None:
            return f"{token} on {self.quorum.holding}/{self.quorum.servers}"
        return token

    def as_json(self) -> dict[str, Any]:
        """The fields a store lock adds to the `lockwatch.ls/1` record."""
        record: dict[str, Any] = {
            "server": self.server,
            "key": self.key,
            "ttl_left_seconds": self.ttl_left,
            "blocked_by": list(self.blocked_by),
            "blocking": list(self.blocking),
        }
        if self.value_bytes is not None:
            record["value_bytes"] = self.value_bytes  # the token or value is its start only
        if self.store == REDIS:
            record["token"] = self.value
            record["quorum"] = None if self.quorum is None else self.quorum.as_json()
            record["client"] = None if self.client is None else self.client.as_json()
        else:
            record.update(
                value=self.value,
                lease=self.lease_hex,
                lease_id=self.lease or None,
                granted_ttl_seconds=self.granted_ttl,
                create_revision=self.create_revision,
                mod_revision=self.mod_revision,
                version=self.version,
                revision=self.revision,
                queue_position=self.position,
            )
        return record

    def _value_shown(self) -> str | None:
        if self.value_bytes is None or self.value is None:
            return self.value
        return f"{self.value} … (cut: {self.value_bytes:,} bytes, only the start read)"

    def fields(self) -> list[tuple[str, str | None]]:
        """Labelled facts for the detail pane (None: not shown)."""
        rows: list[tuple[str, str | None]] = [
            ("server", self.server),
            ("key", self.key),
            ("token" if self.store == REDIS else "value", self._value_shown()),
            ("ttl left", "no expiry" if self.ttl_left is None else f"{self.ttl_left:g} s"),
        ]
        if self.store == ETCD:
            rows += [
                ("lease", self.lease_hex),
                ("granted ttl", None if self.granted_ttl is None else f"{self.granted_ttl:g} s"),
                ("create rev", _text(self.create_revision)),
                ("mod rev", _text(self.mod_revision)),
                ("queue", f"position {self.position}" if self.position else "holds it"),
            ]
        if self.quorum is not None:
            quorum = self.quorum
            rows.append(
                (
                    "quorum",
                    f"{quorum.holding} of {quorum.servers} hold it ({quorum.needed} needed"
                    + (f", {quorum.unknown} unreachable)" if quorum.unknown else ")"),
                )
            )
            for member in quorum.members:
                held = {True: "holds it", False: "does not", None: "unreachable"}[member.holds]
                rows.append(("  " + member.server, held))
        if self.client is not None:
            rows.append(("client", f"{self.client.id} {self.client.addr} ({self.client.command})"))
        rows.append(("blocked by", ", ".join(self.blocked_by) or None))
        rows.append(("blocking", ", ".join(self.blocking) or None))
        return rows


def _text(value: int | None) -> str | None:
    return None if value is None else str(value)
