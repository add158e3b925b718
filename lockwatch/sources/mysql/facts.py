"""MySQL and MariaDB lock facts as plain data: a session (a server thread), the
process at its client end, and one lock (`MyLock`, the source's `Facts`): a
named lock (GET_LOCK), an InnoDB row lock someone waits on, or a table's
metadata lock with its queue.

Pure: no PyMySQL here. The poller fills these in; verdicts and views read them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.clues import ClueKind, Match, Sureness
from lockwatch.model.facts import Facts, Party, RuledFacts, Section
from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.text import scrub_secrets
from lockwatch.sources.mysql.display import activity, held_cell, holder_cell, sections
from lockwatch.sources.mysql.report import my_record
from lockwatch.sources.mysql.rules import WARNINGS, evaluate_my

if TYPE_CHECKING:
    from lockwatch.model.clues import Clue
    from lockwatch.model.lock import Lock
    from lockwatch.model.verdict import Verdict

# The three kinds of lock (the JSON's `format`, the ids' kind).
GET_LOCK = "get_lock"
INNODB_ROW = "innodb_row"
METADATA_LOCK = "metadata_lock"

# What MySQL statements carry passwords in: IDENTIFIED BY '…', PASSWORD('…'),
# MASTER_PASSWORD = '…' (the generic scrubber knows URLs and key=value forms).
_SQL_SECRETS = lazy_compile(
    r"((?:IDENTIFIED\s+(?:WITH\s+\S+\s+)?(?:BY|AS)|PASSWORD\s*\(|PASSWORD\s*=|"
    r"MASTER_PASSWORD\s*=|SOURCE_PASSWORD\s*=)\s*)('(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\")",
    re.IGNORECASE,
)


def scrub_statement(text: str) -> str:
    """A session's statement with any password in it masked."""
    return scrub_secrets(_SQL_SECRETS.sub(r"\1'***'", text))


@dataclass(frozen=True, slots=True)
class MyClient:
    """The process at the client end of a session on this host; `alive` False when
    that end is gone while the server's thread still holds its locks (`pid` None
    when nobody can tell which process it was)."""

    pid: int | None
    cmdline: tuple[str, ...] = ()
    alive: bool = True

    @property
    def label(self) -> str:
        if self.pid is None:
            return "(its process is gone)"
        command = " ".join(self.cmdline[:3])
        return f"pid {self.pid} ({command})" if command else f"pid {self.pid}"


@dataclass(frozen=True, slots=True)
class MySession:
    """One server thread as PROCESSLIST and INNODB_TRX show it."""

    thread_id: int
    user: str | None = None
    host: str | None = None  # PROCESSLIST.HOST: `ip:port` over TCP, `localhost` on a socket
    database: str | None = None
    command: str | None = None  # Sleep, Query, ...
    state: str | None = None  # PROCESSLIST.STATE ("User lock", "Waiting for table metadata lock")
    query: str | None = None
    # When its current command (or its idling) began: the poll's time less TIME_MS.
    state_since: datetime | None = None
    query_id: int | None = None  # MariaDB: the id of its last statement (KILL QUERY ID)
    trx_started: datetime | None = None  # INNODB_TRX.trx_started (1 s resolution)
    trx_state: str | None = None
    client_process: MyClient | None = None
    # Not in PROCESSLIST: lockwatch's user lacks PROCESS, so only its thread id is known.
    hidden: bool = False
    monitor_user: str | None = None

    def __post_init__(self) -> None:
        # Another session's statement can carry a password (ALTER USER … IDENTIFIED BY).
        if self.query:
            object.__setattr__(self, "query", scrub_statement(self.query))

    @property
    def label(self) -> str:
        return f"thread {self.thread_id}"

    @property
    def node(self) -> str:
        """Its node in its server's blocking tree."""
        return f"thread {self.thread_id}"

    @property
    def idle(self) -> bool:
        return self.command == "Sleep"

    @property
    def idle_in_transaction(self) -> bool:
        return self.idle and self.trx_started is not None

    @property
    def client(self) -> str | None:
        """The client's address (without the port), or `localhost` for a socket."""
        if not self.host:
            return None
        address, sep, port = self.host.rpartition(":")
        return address if sep and port.isdigit() else self.host

    @property
    def client_port(self) -> int | None:
        if not self.host:
            return None
        _, sep, port = self.host.rpartition(":")
        return int(port) if sep and port.isdigit() else None

    @property
    def state_text(self) -> str:
        """`idle in transaction`, `idle`, or the command and its state."""
        if self.hidden:
            return "hidden"
        if self.idle:
            return "idle in transaction" if self.trx_started is not None else "idle"
        return " ".join(part for part in (self.command, self.state) if part) or ""


@dataclass(frozen=True, slots=True)
class MyLock(RuledFacts):
    """One lock of a MySQL or MariaDB server: held (`granted`) or waited for."""

    server: str  # the server's display name: user@host:port, never a password
    kind: str  # GET_LOCK, INNODB_ROW or METADATA_LOCK
    mode: str  # X, S, MDL_SHARED_READ, ...
    granted: bool
    session: MySession
    target: str  # a lock's name, a table, a table's row
    table: str | None = None
    index: str | None = None
    lock_data: str | None = None
    wait_start: datetime | None = None
    blocked_by: tuple[int, ...] = ()  # threads this one waits on
    blocking: tuple[int, ...] = ()  # threads waiting on this very lock
    # How lockwatch found it: metadata_lock_info, is_used_lock, processlist,
    # innodb_lock_waits, data_lock_waits, metadata_locks, or suspect.
    found_by: str = ""
    # Bounds on how long a held lock has been held, where the server keeps no
    # grant time: held at `known_held_at` (first seen, or idle since), and taken
    # no earlier than `acquired_after` (its transaction's start).
    known_held_at: datetime | None = None
    acquired_after: datetime | None = None
    # A DDL statement at the head of a table's metadata-lock queue: how many
    # statements are queued behind it. A statement queued behind such a DDL: its thread.
    queued_behind: int = 0
    queue_head: int | None = None
    # The blockers (or, held, this holder) are suspects only: no metadata_lock_info.
    suspected: bool = False
    # A GET_LOCK waiter whose name its statement does not tell: why (its verdict is
    # `unknown`, and it is put behind no holder).
    name_unread: str | None = None
    # The source's idle limit: a holder idle (or idle in a transaction) longer
    # than this many seconds is stale (None: no limit).
    idle_after: float | None = None

    # --- the verdict ----------------------------------------------------------

    rules = evaluate_my
    warnings = WARNINGS

    # --- the JSON contract ----------------------------------------------------

    def record(
        self, lock: Lock, verdict: Verdict, now: datetime | None, memo: dict[Any, Any]
    ) -> dict[str, Any]:
        return my_record(lock, self, verdict, now, memo)

    # --- how it reads ---------------------------------------------------------

    def holder_text(self, lock: Lock) -> str:
        session = self.session
        return f"{session.label} ({session.user})" if session.user else session.label

    def holder_cell(self, lock: Lock) -> str:
        # The thread alone tells the operator nothing they can act on: what it
        # is doing and whose it is, as the tree and the JSON say.
        return holder_cell(self.session)

    def holder_name(self, lock: Lock) -> str:
        return self.session.label

    def where(self, lock: Lock) -> str:
        database = f" db={self.session.database}" if self.session.database else ""
        return f"{self.server}{database}"

    def place(self, lock: Lock) -> str:
        return self.server

    def activity(self, lock: Lock, verdict: Verdict, now: datetime) -> str:
        return activity(lock, self, now)

    def operation(self, lock: Lock) -> str:
        return self.mode if self.granted else f"wants {self.mode}"

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:
        return sections(lock, self, now)

    def waiting_since(self, lock: Lock) -> datetime | None:
        return None if self.granted else self.wait_start

    def since(self, lock: Lock) -> datetime | None:
        return self.known_held_at if self.granted else None

    def age_bound(self, lock: Lock, now: datetime) -> str | None:
        return held_cell(self, now) if self.granted and lock.acquired_at is None else None

    # --- filters --------------------------------------------------------------

    def matches_text(self, needle: str) -> bool:
        session = self.session
        if needle in str(session.thread_id):
            return True
        return any(
            text is not None and needle in text.lower()
            for text in (session.user, session.host, session.database, self.server)
        )

    def matches_pid(self, pid: int) -> bool:
        client = self.session.client_process
        return self.session.thread_id == pid or (client is not None and client.pid == pid)

    def named_by(self, lock: Lock, clue: Clue) -> Match | None:
        # A table names its row and metadata locks, never a GET_LOCK name (and a
        # GET_LOCK name no table); the row a statement's WHERE picks is InnoDB's
        # lock_data (the index's key values). A GET_LOCK that times out returns 0,
        # no error: no 1205, 1213 or 3572 is ever about one.
        kind = clue.said("is")
        if clue.kind is ClueKind.NAME and kind == "table":
            return self._table_named(clue)
        if clue.kind is ClueKind.NAME and kind == "lock":
            if self.kind == GET_LOCK and self.target == clue.value:
                return Match(Sureness.CERTAIN, f"named lock {clue.value}, which the text names")
            return None
        if clue.kind is ClueKind.HINT and self.kind == GET_LOCK:
            return None
        return Facts.named_by(self, lock, clue)

    def _table_named(self, clue: Clue) -> Match | None:
        table = self.table
        if self.kind == GET_LOCK or table is None:
            return None
        if clue.value not in (table, table.partition(".")[2]):
            return None
        row, key = clue.said("row"), clue.said("key")
        keys = [part.strip().strip("'") for part in (self.lock_data or "").split(",")]
        if self.kind == INNODB_ROW and key is not None and key in keys:
            return Match(Sureness.CERTAIN, f"table {table}, row {row}, which the text names")
        if self.kind == INNODB_ROW and row:
            said = f"table {table}, which the text names; {row} is not this lock's key"
            return Match(Sureness.LIKELY, f"{said} ({self.lock_data})")
        return Match(Sureness.LIKELY, f"table {table}, which the text names")

    # --- blocking trees -------------------------------------------------------

    def group(self) -> str:
        return f"mysql:{self.server}"

    def holds_as(self) -> str | None:
        return self.session.node if self.granted else None

    def waits(self) -> tuple[str, tuple[str, ...]] | None:
        if self.granted:
            return None
        if self.suspected:  # suspects only: the server did not say who blocks it
            return self.session.node, ()
        return self.session.node, tuple(f"thread {t}" for t in self.blocked_by)

    def waiter_count(self) -> int:
        return len(self.blocking) or self.queued_behind

    def party(self, lock: Lock) -> Party:
        session = self.session
        what = {GET_LOCK: "named lock", INNODB_ROW: "row lock", METADATA_LOCK: "metadata lock"}
        wants = f"{self.mode} {what.get(self.kind, self.kind)} on {self.target}"
        if self.queued_behind:
            wants += f" (DDL queue head: {self.queued_behind} queued behind it)"
        return Party(
            session.node,
            self.granted,
            wants,
            waiting_since=self.waiting_since(lock),
            session=True,
            who=", ".join(x for x in (session.user, session.host) if x),
            state=session.state_text,
            state_since=session.state_since,
        )

    def wait_metrics_server(self) -> str:
        return self.group()

    def session_key(self) -> tuple[str, int]:
        return self.server, self.session.thread_id

    def tree_node(self) -> tuple[str, str]:
        session = self.session
        about = [part for part in (session.user, session.state_text) if part]
        label = session.label
        return session.node, f"{label} ({', '.join(about)})" if about else label
