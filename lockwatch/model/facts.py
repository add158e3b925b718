"""What a source knows about one of its locks, and everything the rest of
lockwatch asks of it.

A `Lock` carries its source's facts as one value (`Lock.facts`): pg_locks rows
for PostgreSQL, a /proc/locks line for the kernel, a key for Redis or etcd, a
record judged on another host. Generic code (the verdict, the JSON contract,
blocking trees, filters, the table, the detail pane, metrics, actions) never
names a source: it asks the facts. Each source defines its facts type in its
own package (`lockwatch/sources/<name>/facts.py`, pure: no client library, no
I/O, no Textual) as a frozen dataclass subclassing `Facts`, and overrides what
its locks need; the defaults here say nothing more.

A lock file's facts are the file source's (`sources/files/facts.py`): its
format's rules, its identity on disk, the kernel's word on it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from lockwatch.model.clues import ClueKind, Match, Sureness, names_lock
from lockwatch.model.slots import lean_dataclass

if TYPE_CHECKING:
    from lockwatch.model.action import Kind
    from lockwatch.model.clues import Clue
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup
    from lockwatch.model.verdict import Verdict

# One row of a detail-pane section or a confirmation's facts: (label, value).
Row = tuple[str, str]


@lean_dataclass(frozen=True, slots=True)
class Section:
    """A titled block of the detail pane ("Session", "Redis", "Kernel lock")."""

    title: str
    rows: tuple[Row, ...]
    # Labels of rows shown whole, folded onto as many lines as they take, never
    # cut: what the operator copies (an id to act on).
    whole: tuple[str, ...] = ()


@lean_dataclass(frozen=True, slots=True)
class Party:
    """A holder or waiter in a wait-for graph, as the contention view lines it up."""

    node: Hashable  # its node in its group's graph: a pid, `prepared:<gid>`, a token
    granted: bool  # it holds the lock (else it waits for it)
    wants: str  # what it holds or waits for, in words: "ExclusiveLock on jobs"
    # When it began to wait, where known.
    waiting_since: datetime | None = None
    # A session of its own (a PostgreSQL backend), described by who, state and
    # since when; else its process's command line stands for it.
    session: bool = False
    who: str = ""  # the session's user and application
    state: str = ""  # the session's state ("idle in transaction")
    state_since: datetime | None = None


@lean_dataclass(frozen=True, slots=True)
class Series:
    """One gauge of a source's own in `serve`'s /metrics for one lock (a Lease's
    holder age, its leadership transitions), labelled {server, name}: the lock's
    server and name. Its value is `value`, or the seconds since `since` at each
    scrape. Bounded: at most --max-lock-series of each metric."""

    metric: str  # the whole name, lockwatch_<source>_...: "lockwatch_k8s_lease_transitions"
    help: str
    server: str
    value: float | None = None
    since: datetime | None = None


class Facts:
    """The base of every source's facts type: the questions generic code asks.

    Subclasses are frozen, slotted dataclasses registered with the recording
    codec through their source's `record_types`.
    """

    __slots__ = ()

    # Locks with these facts are other hosts' (judged and exported there): a
    # source whose facts these are has no locks of its own to count here.
    foreign: ClassVar[bool] = False
    # Its lock is a file lockwatch may write anew (take, hand over, refresh):
    # a server's, the kernel's or another host's lock is its source's.
    rewritable: ClassVar[bool] = False

    # --- the verdict ----------------------------------------------------------

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict | None:
        """This lock's verdict by its source's own rules; None: it has none
        (nobody here can tell: unknown)."""
        return None

    def share_key(self, lock: Lock) -> Hashable | None:
        """Locks of one poll with equal keys get one shared verdict (a session's
        80 granted, uncontended advisory locks); None: judge this one alone."""
        return None

    # --- the JSON contract ----------------------------------------------------

    def record(
        self, lock: Lock, verdict: Verdict, now: datetime | None, memo: dict[Any, Any]
    ) -> dict[str, Any] | None:
        """The whole `lockwatch.ls/1` record of this lock, when the source builds
        it itself (None: the generic record, then `extend_record`)."""
        return None

    def extend_record(self, record: dict[str, Any]) -> None:
        """Add this source's fields to the generic record (`record`, in place)."""

    # --- how it reads ---------------------------------------------------------

    def holder_text(self, lock: Lock) -> str | None:
        """Who holds it, in the dashboard's HOLDER column, events and confirmations
        (None: the generic pid@host actor)."""
        return None

    def holders_label(self) -> str | None:
        """Who holds it by command where its source knows more than a pid (a
        kernel lock held on a lock file: `sqlite3 (pid 4242)`, `flock (pid 7472)
        + 2 more`), as lslocks names them; None: nothing more."""
        return None

    def waits_said(self) -> str | None:
        """Who waits on it, in its source's words, where no wait-for graph of
        its own says it ("2 waiting on it (kernel)")."""
        return None

    def refresh_every(self, lock: Lock) -> float | None:
        """How often lockwatch, holding this lock, rewrites it so that it never
        looks late or old (None: never)."""
        return None

    def singleton(self) -> str | None:
        """A name live locks of its format exclude each other by, whatever their
        scopes (little-loops' singleton loops); None: none."""
        return None

    def where(self, lock: Lock) -> str | None:
        """Where the lock is when it has no path: a server, a key, an inode."""
        return None

    def activity(self, lock: Lock, verdict: Verdict, now: datetime) -> str | None:
        """What its holder is doing now, in its source's words, said after its
        name ("idle in transaction for 1m19s (limit 1m00s)", "running its
        statement for 3s"); None: its process on this host says it, if any
        (`model/activity.py`)."""
        return None

    def holder_cell(self, lock: Lock) -> str | None:
        """The table's HOLDER cell where it says more than `holder_text`: a
        session's state and query, which change while the holder stays the same
        (so they are no holder change in the events). None: `holder_text`.
        Both tables, the dashboard's and `ls`'s, show it (`model/columns.py`)."""
        return None

    def holder_name(self, lock: Lock) -> str | None:
        """The name `holder_cell` starts with (a session's application): a cell
        cut to fit keeps both its ends, never only a prefix every row shares."""
        return None

    def confirm_title(self, lock: Lock, kind: Kind, now: datetime) -> str | None:
        """A confirmation's title for `kind` on this lock, naming what the action
        ends ("Terminate report-job (pid 8527, idle in transaction 32s)?"); None:
        the action and the lock's name."""
        return None

    def confirm_word(self, lock: Lock) -> str | None:
        """What the operator types to confirm acting on this lock where the action
        ends its holder (a session: its application as shown, else its pid);
        None: the lock's name."""
        return None

    def operation(self, lock: Lock) -> str | None:
        """The OPERATION column (None: the holder's operation, else its session)."""
        return None

    def place(self, lock: Lock) -> str | None:
        """What a bulk action names the lock's place by: a server (None: its path)."""
        return None

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:
        """The detail pane's sections for this source's facts."""
        return ()

    def content_title(self) -> str | None:
        """The detail pane's title over the lock's raw content (None: not shown);
        a lock file's is "Content"."""
        return None

    def waiting_since(self, lock: Lock) -> datetime | None:
        """When a waiter began waiting, where known: its AGE counts from then."""
        return None

    def ttl_to_expiry(self) -> bool:
        """Its TTL runs down to `Lock.expires_at` (a key its store drops), not
        from a heartbeat."""
        return False

    def since(self, lock: Lock) -> datetime | None:
        """When lockwatch knows it was already held, for the AGE column where
        the lock has no acquisition time (a bound: "≥ 3m")."""
        return None

    def age_bound(self, lock: Lock, now: datetime) -> str | None:
        """The AGE cell of a held lock that keeps no acquisition time: the bound
        lockwatch knows (`≥ 3m12s`), never a made-up age; None: nothing known."""
        return None

    def warning_codes(self) -> frozenset[str]:
        """Reason codes that are warnings about a live lock (its NOTE stands out)."""
        return frozenset()

    # --- filters --------------------------------------------------------------

    def matches_text(self, needle: str) -> bool:
        """Whether free text typed in the filter names this lock beyond its id,
        name and path (a session's application, a host)."""
        return False

    def matches_pid(self, pid: int) -> bool:
        """Whether `/pid:N` names this lock beyond its holder's pid."""
        return False

    def named_by(self, lock: Lock, clue: Clue) -> Match | None:
        """How surely a clue `lockwatch why` found in a text leads to this lock
        (None: it does not): a session the text names is it; a relation or name
        the text names, likely (the text says what was locked, not which of its
        locks); a hint ("lock wait timeout") only that it may be, when it blocks.
        Sources whose names say more (a row, a named lock) answer for themselves."""
        if clue.kind is ClueKind.PID and clue.value.isdigit():
            pid = int(clue.value)
            if lock.holder.pid == pid or self.matches_pid(pid):
                return Match(Sureness.CERTAIN, f"session {pid}, which the text names")
        elif clue.kind is ClueKind.NAME and names_lock(lock.name, clue.value):
            return Match(Sureness.LIKELY, f"a lock on {clue.value}, which the text names")
        elif clue.kind is ClueKind.HINT:
            return Match(Sureness.POSSIBLE, "it blocks others now; the text names nothing of it")
        return None

    # --- blocking trees -------------------------------------------------------

    def in_trees(self, lock: Lock) -> Facts | None:
        """What the wait-for graphs ask of this lock: these facts, or another's
        standing for them (a lock file's held kernel lock); None: in no graph."""
        return self

    def group(self) -> str | None:
        """Which wait-for graph the lock belongs to (a server); None: none."""
        return None

    def holds_as(self) -> Hashable | None:
        """Its node in that graph when it holds (a backend pid, a session)."""
        return None

    def waits(self) -> tuple[Hashable, tuple[Hashable, ...]] | None:
        """When it waits: its node and the nodes it waits on."""
        return None

    def waiter_count(self) -> int:
        """How many wait on this very lock (the WAIT column)."""
        return 0

    def party(self, lock: Lock) -> Party | None:
        """Its holder or waiter as the contention view lines it up (None: in no graph)."""
        return None

    def wait_metrics_server(self) -> str | None:
        """The server whose per-server wait metrics (lockwatch_pg_*) count this
        lock; None: it counts in none."""
        return None

    def session_key(self) -> Hashable | None:
        """The session this lock is one of, where one session holds or waits on
        many locks (a PostgreSQL backend: its server and pid); locks with equal
        keys are one session's. None: the lock is a session of its own."""
        return None

    def tree_node(self) -> tuple[Hashable, str] | None:
        """Its session as its group's blocking tree labels it: (node, label), such
        as (4242, "pid 4242 (alice, active)"). None: trees label its node plainly."""
        return None

    def series(self, lock: Lock) -> Sequence[Series]:
        """Gauges of its source's own for this lock in `serve`'s /metrics (none)."""
        return ()

    # --- where it lives -------------------------------------------------------

    def remote_host(self) -> str | None:
        """The host that judged it, when that is not this one (read-only here)."""
        return None

    def record_at(self, lock: Lock, now: datetime) -> dict[str, Any] | None:
        """Its lock's record as the host that judged it wrote it, aged to `now`,
        for a document that passes other hosts' locks on (a serve that merges
        them); None: a lock judged here, whose record is rendered here."""
        return None


class RuledFacts(Facts):
    """Facts whose source judges them by one rules function of (lock, facts, now),
    its `rules`, and whose `warnings` are the reason codes that warn about a live
    lock: a database server's (PostgreSQL's, MySQL's), which need no process
    table nor this host's name to judge."""

    __slots__ = ()

    rules: ClassVar[Callable[[Lock, Any, datetime], Verdict]]
    warnings: ClassVar[frozenset[str]] = frozenset()

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        # From the class: a function stored on it, not a method of the facts.
        return type(self).rules(lock, self, now)

    def warning_codes(self) -> frozenset[str]:
        return self.warnings
