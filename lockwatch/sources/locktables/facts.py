"""A lock kept as a row of a table (knex's `knex_migrations_lock`, Liquibase's
`DATABASECHANGELOGLOCK`, a table the config names), as lockwatch saw it on a
PostgreSQL or MySQL server, and the rules its tool judges it by.

Pure: the servers' modules (sources/postgres/locktables.py,
sources/mysql/locktables.py) read the rows and build these facts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lockwatch.model.facts import Facts, Section
from lockwatch.model.humanize import named
from lockwatch.model.lock import Reason
from lockwatch.model.slots import lean_dataclass
from lockwatch.model.verdict import State, Verdict, same_host

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup

KNEX = "knex"
LIQUIBASE = "liquibase"
CONFIGURED = "table"

# How each tool's own unlock frees its row: what a break writes (column -> SQL value).
UNLOCKS: dict[str, tuple[tuple[str, str], ...]] = {
    # knex migrate:unlock: `update knex_migrations_lock set is_locked = 0`.
    KNEX: (("is_locked", "0"),),
    # liquibase releaseLocks: LOCKED = FALSE, LOCKGRANTED = NULL, LOCKEDBY = NULL.
    LIQUIBASE: (("locked", "false"), ("lockgranted", "null"), ("lockedby", "null")),
}
UNLOCK_COMMANDS = {KNEX: "knex migrate:unlock", LIQUIBASE: "liquibase releaseLocks"}


@lean_dataclass(frozen=True, slots=True)
class TableLock(Facts):
    engine: str  # "postgres" or "mysql": whose SQL a break speaks
    server: str  # the server's display name (never a DSN)
    database: str
    tool: str  # KNEX, LIQUIBASE or CONFIGURED
    table: str  # schema.table (PostgreSQL) or database.table (MySQL)
    key: str  # the row's key (knex's index, Liquibase's ID), "" where it has none
    # The whole row as read, canonical JSON: what a break compares before it writes.
    row: str
    # When it was read: not part of what it is (a row seen again is the same lock).
    polled_at: datetime = field(compare=False)
    # What a break sets (column, SQL value: a number, true/false, null).
    unlock: tuple[tuple[str, str], ...] = ()
    holder: str | None = None  # as the row records it (Liquibase's LOCKEDBY)
    holder_host: str | None = None
    holder_ip: str | None = None
    # Seconds from the row's own time (LOCKGRANTED) to the poll, where it keeps one.
    age: float | None = None
    # What shows its tool at work on the server now: "pid 4242 holds RowExclusiveLock
    # on knex_migrations_lock". Empty: nothing visible.
    at_work: tuple[str, ...] = ()
    # The session whose open transaction holds the lock (a knex run in one
    # transaction: its is_locked = 1 is not committed, so others read 0).
    in_transaction: int | None = None
    # Liquibase JVMs (java processes with liquibase in their command line) on this
    # host at the poll; None: nobody looked.
    jvms: tuple[int, ...] | None = None
    # The table's two names apart (`table` is them as text, quoted where needed):
    # what a break's UPDATE names. Empty in recordings made before they were kept.
    schema: str = ""
    relation: str = ""
    # What changes on every write of the row, whatever its values: a break compares
    # it as well, so a row unlocked and taken again by a new run since the look
    # (the same values) is refused. "xmin 936" (PostgreSQL's row version);
    # "update_time …" (MySQL keeps none per row: the table's last change, to the
    # second). None: none could be read that tells every write apart.
    version: str | None = None

    @property
    def names(self) -> tuple[str, str]:
        """(schema, table) as the server names them."""
        if self.relation:
            return self.schema, self.relation
        schema, _, table = self.table.partition(".")
        return schema, table

    @property
    def seen(self) -> dict[str, Any]:
        value = json.loads(self.row)
        return value if isinstance(value, dict) else {}

    # --- the verdict ----------------------------------------------------------

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        age = (
            None
            if self.age is None
            else max(0.0, self.age + (now - self.polled_at).total_seconds())
        )
        if self.at_work:
            reasons = [Reason("tool_running", "; ".join(self.at_work))]
            if self.tool == KNEX:
                reasons.append(_NO_HOLDER)
            return Verdict(State.ACTIVE, tuple(reasons), age_seconds=age)
        unlock = UNLOCK_COMMANDS.get(self.tool, "a break")
        if self.tool == LIQUIBASE and self.holder_host:
            since = f" since {self.age:.0f}s" if self.age is not None else ""
            who = self.holder or self.holder_host
            if not same_host(self.holder_host, local_host):
                return Verdict(
                    State.UNKNOWN,
                    (
                        Reason(
                            "other_host",
                            f"held by {who}{since}: another host, whose JVM lockwatch cannot see",
                        ),
                    ),
                    age_seconds=age,
                )
            if self.jvms:
                pids = named("pid", [str(pid) for pid in self.jvms], most=len(self.jvms))
                reason = Reason("holder_jvm_running", f"Liquibase runs on this host ({pids})")
                return Verdict(State.ACTIVE, (reason,), age_seconds=age, alive=True)
            if self.jvms is not None:
                reason = Reason(
                    "holder_jvm_gone",
                    f"held by {who}{since}, this host, where no Liquibase JVM runs: {unlock}"
                    " clears it",
                )
                return Verdict(State.STALE, (reason,), age_seconds=age, alive=False)
        if self.tool == KNEX:
            message = (
                "is_locked = 1 with nothing visibly running: a migration may be running from"
                f" a client lockwatch cannot see, or died: {unlock} clears it"
            )
            return Verdict(
                State.UNKNOWN, (Reason("nothing_running", message), _NO_HOLDER), age_seconds=age
            )
        message = (
            "set with nothing visibly running: its holder may be at work unseen, or gone"
            f" ({unlock} clears it)"
        )
        return Verdict(State.UNKNOWN, (Reason("nothing_running", message),), age_seconds=age)

    # --- the JSON contract ----------------------------------------------------

    def extend_record(self, record: dict[str, Any]) -> None:
        record.update(
            server=self.server,
            database=self.database,
            lock_table={
                "tool": self.tool,
                "table": self.table,
                "key": self.key,
                "row": self.seen,
                "holder": self.holder,
                "holder_host": self.holder_host,
                "holder_ip": self.holder_ip,
                "in_transaction": self.in_transaction,
                "at_work": list(self.at_work),
                "version": self.version,
            },
        )

    # --- how it reads ---------------------------------------------------------

    def holder_text(self, lock: Lock) -> str | None:
        if self.in_transaction is not None:
            return f"pid {self.in_transaction} (in a transaction)"
        if self.holder:
            return self.holder
        return "no holder recorded"

    def where(self, lock: Lock) -> str | None:
        return f"{self.server} {self.table}"

    def place(self, lock: Lock) -> str | None:
        return self.server

    def operation(self, lock: Lock) -> str | None:
        return f"{self.tool} lock table"

    def sections(self, lock: Lock, now: datetime) -> Sequence[Section]:
        rows: list[tuple[str, str]] = [
            ("tool", self.tool),
            ("server", self.server),
            ("table", self.table),
            ("row", ", ".join(f"{k}={v}" for k, v in self.seen.items())),
            ("holder", self.holder_text(lock) or ""),
        ]
        if self.age is not None:
            rows.append(("since", f"{self.age:.0f}s before the poll"))
        rows.extend(("at work", line) for line in self.at_work)
        if self.tool in UNLOCK_COMMANDS:
            rows.append(("its unlock", UNLOCK_COMMANDS[self.tool]))
        return (Section("Lock table", tuple(rows)),)

    def since_at(self) -> datetime | None:
        """When the row says it was taken (Liquibase's LOCKGRANTED), as of the poll."""
        return None if self.age is None else self.polled_at - timedelta(seconds=self.age)

    # --- filters --------------------------------------------------------------

    def matches_text(self, needle: str) -> bool:
        return any(
            needle in (text or "").lower()
            for text in (self.tool, self.table, self.server, self.holder)
        )


_NO_HOLDER = Reason("no_holder_recorded", "knex records no holder: only is_locked = 1")
