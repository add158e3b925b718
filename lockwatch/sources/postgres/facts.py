"""PostgreSQL lock facts as plain data: advisory keys, backends, pg_locks rows,
and what the rest of lockwatch asks of them (`PgLock` is the source's `Facts`).

Pure: no psycopg here. The source fills these in; verdicts and views read them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from lockwatch.model.facts import Party, RuledFacts, Section
from lockwatch.model.slots import fast_init, lean_dataclass
from lockwatch.model.text import scrub_arguments, scrub_secrets
from lockwatch.sources.postgres import display
from lockwatch.sources.postgres.display import activity, sections
from lockwatch.sources.postgres.held import held_cell
from lockwatch.sources.postgres.report import pg_record
from lockwatch.sources.postgres.rules import WARNINGS, evaluate_pg

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict

_2_31, _2_32, _2_63, _2_64 = 2**31, 2**32, 2**63, 2**64

INSUFFICIENT_PRIVILEGE = "<insufficient privilege>"
# Seconds a holder may sit idle (in a transaction) before its locks count as stale.


# fast_init: one is made per advisory lock of a poll (thousands).
@fast_init
@lean_dataclass(frozen=True, slots=True)
class AdvisoryKey:
    """An advisory lock key as the application passed it.

    pg_advisory_lock(bigint) shows in pg_locks as objsubid 1 with the key split over
    classid (high half) and objid (low half); pg_advisory_lock(int4, int4) as
    objsubid 2 with key1 in classid and key2 in objid. The OID columns are
    unsigned, so negative keys come back as large numbers and must be folded back.
    """

    form: Literal["bigint", "pair"]
    key: int | None = None  # bigint form
    key1: int | None = None  # pair form
    key2: int | None = None

    @staticmethod
    def from_pg_locks(classid: int, objid: int, objsubid: int) -> AdvisoryKey | None:
        # Arguments by position: a poll makes thousands, and keywords cost more.
        if objsubid == 1:
            key = (classid << 32) | objid
            return AdvisoryKey("bigint", key - _2_64 if key >= _2_63 else key)
        if objsubid == 2:
            return AdvisoryKey(
                "pair",
                None,
                classid - _2_32 if classid >= _2_31 else classid,  # key1
                objid - _2_32 if objid >= _2_31 else objid,  # key2
            )
        return None

    def __str__(self) -> str:
        if self.form == "bigint":
            return str(self.key)
        return f"{self.key1}:{self.key2}"

    def as_json(self) -> dict[str, object]:
        if self.form == "bigint":
            return {"form": "bigint", "key": self.key}
        return {"form": "pair", "key1": self.key1, "key2": self.key2}


def string_key(name: str) -> int:
    """The bigint key seed 003's design derives from a string: BLAKE2b, 8 bytes,
    signed, native (little-endian) byte order, as struct.unpack("q", ...) reads it."""
    import hashlib  # only when the config names string keys

    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def string_key_int32(name: str) -> int:
    """The int4 key seed 003's shipped code derives from a string, for the second
    key of a pair: BLAKE2b with a 4-byte digest (not the first 4 bytes of an
    8-byte one), signed, big-endian, as struct.unpack(">i", ...) reads it."""
    import hashlib

    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


@lean_dataclass(frozen=True)
class AdvisoryNames:
    """What the operator's config calls advisory keys.

    `namespaces` names the first int of the pair form: {1: "agent"} shows (1, 42) as
    `agent:42`. `keys` names single bigint keys, including those hashed from
    strings with `string_key`; `pairs` names (key1, key2) pairs whose second key
    was hashed from a string with `string_key_int32`.
    """

    namespaces: Mapping[int, str]
    keys: Mapping[int, str]
    pairs: Mapping[tuple[int, int], str] = field(default_factory=lambda: MappingProxyType({}))

    def name(self, key: AdvisoryKey) -> str:
        if key.form == "pair":
            namespace = self.namespaces.get(key.key1) if key.key1 is not None else None
            if key.key1 is not None and key.key2 is not None:
                text = self.pairs.get((key.key1, key.key2))
                if text is not None:
                    return f"{namespace or key.key1}:{text}"
            return f"{namespace}:{key.key2}" if namespace else str(key)
        assert key.key is not None
        return self.keys.get(key.key, str(key.key))

    @staticmethod
    def build(
        namespaces: dict[int, str] | None = None,
        keys: dict[int, str] | None = None,
        strings: list[str] | tuple[str, ...] = (),
        pair_strings: Mapping[int, Sequence[str]] | None = None,
    ) -> AdvisoryNames:
        """`strings` are hashed to bigint keys (`string_key`); `pair_strings` maps a
        first key (a namespace) to strings hashed to the second (`string_key_int32`)."""
        named = {string_key(text): text for text in strings}
        named.update(keys or {})
        pairs = {
            (namespace, string_key_int32(text)): text
            for namespace, texts in (pair_strings or {}).items()
            for text in texts
        }
        return AdvisoryNames(
            MappingProxyType(dict(namespaces or {})),
            MappingProxyType(named),
            MappingProxyType(pairs),
        )


NO_NAMES = AdvisoryNames.build()


Autovacuum = Literal["wraparound", "plain", "hidden"]


def autovacuum_kind(backend_type: str | None, query: str | None) -> Autovacuum | None:
    """An autovacuum worker (pg_stat_activity's backend_type and query): `wraparound`
    when it vacuums to prevent transaction ID wraparound (its query ends `(to prevent
    wraparound)`), which a conflicting lock request does not cancel as it cancels a
    `plain` one; `hidden` when its query is hidden from lockwatch's role."""
    text = query or ""
    # Any client may write `autovacuum:` in a query: the backend's type decides,
    # and only where it is not known (before PostgreSQL 10) does the query.
    if backend_type is not None and backend_type != "autovacuum worker":
        return None
    if backend_type is None and not text.startswith("autovacuum:"):
        return None
    if not text.startswith("autovacuum:"):
        return "hidden"  # its query hidden from our role: which kind is not known
    return "wraparound" if "(to prevent wraparound)" in text else "plain"


@lean_dataclass(frozen=True, slots=True)
class PgClient:
    """The process at the client end of a session, found on this host (through the
    kernel's socket tables); `alive` False when that end is gone while the server's
    backend still holds its locks. `pid` is None when the client end is gone and
    lockwatch never saw who had it."""

    pid: int | None
    cmdline: tuple[str, ...] = ()
    alive: bool = True

    def __post_init__(self) -> None:
        # A client started with its password in its arguments (`psql
        # 'postgresql://u:pw@h/db'`, `password=…`, `--password pw`): scrubbed as
        # query text is, so no view shows it.
        if self.cmdline:
            object.__setattr__(self, "cmdline", scrub_arguments(self.cmdline))

    @property
    def label(self) -> str:
        command = " ".join(self.cmdline)
        if len(command) > 80:
            command = command[:79] + "…"
        who = "an unknown process" if self.pid is None else f"pid {self.pid}"
        return f"{who} ({command})" if command else who


@lean_dataclass(frozen=True, slots=True)
class PgBackend:
    """The session behind a pg_locks row (pg_stat_activity), or a prepared
    transaction, which holds locks with no session at all."""

    pid: int | None
    user: str | None = None
    application: str | None = None
    client: str | None = None
    state: str | None = None
    query: str | None = None
    backend_type: str | None = None
    # Times are on this host's clock: the server's ages added to when we asked.
    xact_start: datetime | None = None
    query_start: datetime | None = None
    state_since: datetime | None = None
    wait_event_type: str | None = None
    wait_event: str | None = None
    prepared_gid: str | None = None
    backend_start: datetime | None = None
    # The client's TCP port (pg_stat_activity.client_port; -1 for a unix socket).
    client_port: int | None = None
    # The client process on this host, when lockwatch could find it (or its end
    # of the connection is gone): None when it cannot be found (another host).
    client_process: PgClient | None = None
    # Every granted pg_locks row this backend holds, counted by lock type: all of
    # them, not only the rows lockwatch lists.
    held: tuple[tuple[str, int], ...] = ()
    # A prepared transaction: when it was prepared (pg_prepared_xacts.prepared).
    prepared_at: datetime | None = None
    # The role lockwatch polls as: a hidden session names it in the grant to give.
    monitor_role: str | None = None
    # pg_stat_activity's backend_start and state_change as the server wrote them,
    # on its clock (the times above are ages moved onto this host's, off by however
    # long the poll's answer took to be stamped): an action's compare-and-swap reads
    # them again and compares them exactly. A session is (pid, backend_started).
    backend_started: datetime | None = None
    state_changed: datetime | None = None

    def __post_init__(self) -> None:
        # Another session's query text can carry a password (ALTER ROLE … PASSWORD,
        # dblink's conninfo): scrubbed here, every backend however it was built
        # (a poll, a recording, a test), so no view can show it raw.
        if self.query:
            object.__setattr__(self, "query", scrub_secrets(self.query))
        if self.application:
            # Any client may name itself anything, its connection string included.
            object.__setattr__(self, "application", scrub_secrets(self.application))

    @property
    def label(self) -> str:
        if self.prepared_gid is not None:
            return f"prepared transaction {self.prepared_gid}"
        return f"pid {self.pid}"

    @property
    def autovacuum(self) -> Autovacuum | None:
        return autovacuum_kind(self.backend_type, self.query)

    @property
    def hidden(self) -> bool:
        """Stats hidden from us: we lack pg_read_all_stats (or are not the same user)."""
        return self.query == INSUFFICIENT_PRIVILEGE

    @property
    def held_count(self) -> int | None:
        """How many locks it holds in all, when the poll counted them."""
        return sum(count for _, count in self.held) if self.held else None


@lean_dataclass(frozen=True, slots=True)
class PgLock(RuledFacts):
    """One pg_locks row of interest."""

    server: str  # the source's name: a DSN with its password removed
    locktype: str
    mode: str
    granted: bool
    database: str | None
    backend: PgBackend
    advisory_key: AdvisoryKey | None = None
    wait_start: datetime | None = None
    blocked_by: tuple[int, ...] = ()  # pids this session waits on (0: a prepared transaction)
    blocking: tuple[int, ...] = ()  # pids waiting on this session, whatever for
    blocking_here: tuple[int, ...] = ()  # pids waiting on this very lock
    # Prepared transactions among the blockers, named: pg_blocking_pids says only 0.
    blocked_by_prepared: tuple[str, ...] = ()
    # PostgreSQL keeps no time for a granted lock: only bounds are known. It was
    # held at `known_held_at` (when lockwatch first saw this session hold it, or
    # earlier when the session has idled since), and acquired no earlier than
    # `acquired_after` (its transaction's start, or its session's for a lock that
    # may be session-level).
    known_held_at: datetime | None = None
    acquired_after: datetime | None = None
    # "session" or "transaction" when that can be told (a lock that outlives its
    # session's transaction is session-level), else None.
    level: Literal["session", "transaction"] | None = None
    # A waiter's blockers that hold nothing it needs but are queued ahead of it for
    # the same lock (an ALTER TABLE waiting for its AccessExclusiveLock), with the
    # first one's query: it waits on that request, not on a holder.
    queue_heads: tuple[int, ...] = ()
    queue_head_query: str | None = None
    # A waiting request's queue: the sessions that wait on nothing but it (and
    # other requests queued ahead), which its going lets through.
    queued_here: tuple[int, ...] = ()
    # A waiter's blockers that are autovacuum workers, with what kind (they differ
    # in whether they yield to its request).
    blocked_by_autovacuum: tuple[tuple[int, Autovacuum], ...] = ()
    # The source's idle limit: a holder idle (or idle in a transaction) longer
    # than this many seconds is stale (None: no limit).
    idle_after: float | None = None

    @property
    def queued_behind(self) -> int:
        """A waiter that others queue behind for the same lock (a queue head): how
        many; 0 for a holder or a waiter nobody queues behind."""
        return 0 if self.granted else len(self.queued_here)

    def waits_on(self) -> tuple[int | str, ...]:
        """Whom this session waits on: pids, and `prepared:<gid>` for prepared
        transactions (`prepared:?` when the server did not say which)."""
        prepared = [f"prepared:{gid}" for gid in self.blocked_by_prepared]
        if 0 in self.blocked_by and not prepared:
            prepared.append("prepared:?")
        return (*(pid for pid in self.blocked_by if pid), *prepared)

    rules = evaluate_pg
    warnings = WARNINGS

    def share_key(self, lock: Lock) -> tuple[int, str, float | None, datetime | None] | None:
        # Everything a granted, uncontended row's verdict reads: its session, its
        # lock type (idle_holder is for advisory locks), the threshold, its age.
        if not self.granted or self.blocking_here:
            return None
        return (id(self.backend), self.locktype, self.idle_after, lock.acquired_at)

    def matches_text(self, needle: str) -> bool:
        # The source copies these into the holder today; asking the backend too
        # keeps `holder:` honest for a pg lock built any other way.
        backend = self.backend
        if backend.pid is not None and needle in str(backend.pid):
            return True
        return any(
            text is not None and needle in text.lower()
            for text in (backend.user, backend.application)
        )

    def matches_pid(self, pid: int) -> bool:
        return self.backend.pid == pid

    # --- the JSON contract, blocking trees, the incident report ---------------

    def record(
        self, lock: Lock, verdict: Verdict, now: datetime | None, memo: dict[Any, Any]
    ) -> dict[str, Any]:
        return pg_record(lock, self, verdict, now, memo)

    def holder_text(self, lock: Lock) -> str:
        # By name, pid and user: steady while the session works (events compare it).
        return display.holder_text(self.backend)

    def holder_cell(self, lock: Lock) -> str:
        # The role alone is the same on every row: the application, the state
        # and the start of the query tell the sessions apart.
        return display.holder_cell(self.backend)

    def confirm_title(self, lock: Lock, kind: Kind, now: datetime) -> str | None:
        return display.confirm_title(lock, self.backend, kind, now, self.queued_behind)

    def confirm_word(self, lock: Lock) -> str | None:
        if self.backend.pid is None:
            return None
        return display.confirm_word(self.backend)

    def holder_name(self, lock: Lock) -> str:
        return display.session_name(self.backend)

    def since(self, lock: Lock) -> datetime | None:
        # No grant time is kept: it is at least as old as lockwatch saw it held.
        return self.known_held_at

    def age_bound(self, lock: Lock, now: datetime) -> str | None:
        return held_cell(self, now) if self.granted else None

    def place(self, lock: Lock) -> str:
        return self.server

    def group(self) -> str:
        return self.server

    def holds_as(self) -> int | None:
        return self.backend.pid if self.granted else None

    def waits(self) -> tuple[int, tuple[int | str, ...]] | None:
        if self.granted or self.backend.pid is None:
            return None
        return self.backend.pid, self.waits_on()

    def waiter_count(self) -> int:
        return len(self.blocking_here)

    def session_key(self) -> tuple[str, int | None]:
        return self.server, self.backend.pid

    def tree_node(self) -> tuple[int, str] | None:
        backend = self.backend
        if backend.pid is None:
            return None
        # Its application first: the role is often the same on every line.
        about = [part for part in (backend.application, backend.user, backend.state) if part]
        label = f"pid {backend.pid}"
        return backend.pid, f"{label} ({', '.join(about)})" if about else label

    # --- the views ----------------------------------------------------------------

    def where(self, lock: Lock) -> str:
        database = f" db={self.database}" if self.database else ""
        return f"{self.server}{database}"

    def activity(self, lock: Lock, verdict: Verdict, now: datetime) -> str:
        return activity(lock, self, now)

    def operation(self, lock: Lock) -> str:
        return self.mode if self.granted else f"wants {self.mode}"

    def waiting_since(self, lock: Lock) -> datetime | None:
        return None if self.granted else self.wait_start

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:

        return sections(lock, self, now)

    def party(self, lock: Lock) -> Party:
        backend = self.backend
        node = backend.pid if backend.pid is not None else f"prepared:{backend.prepared_gid}"
        wants = f"{self.mode} on {lock.name}"
        if self.queued_behind:
            wants += f" (queue head: {self.queued_behind} queued behind it)"
        return Party(
            node,
            self.granted,
            wants,
            waiting_since=self.waiting_since(lock),
            session=True,
            # Its application (its user where it has none): at 80 columns the
            # tree keeps the name and "idle in transaction 32s"; the role, often the
            # same on every line, is in the table and the detail pane.
            who=backend.application or backend.user or "",
            state=backend.state or "",
            state_since=backend.state_since,
        )

    def wait_metrics_server(self) -> str:
        return self.server
