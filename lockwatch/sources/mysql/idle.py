"""Which threads sit idle in an open transaction past the idle limit: their
client processes are looked for (server.py), and each that is stale stays
listed whether or not anyone waits on it (records.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lockwatch.sources.mysql.facts import INNODB_ROW, METADATA_LOCK, MyLock

if TYPE_CHECKING:
    from lockwatch.sources.mysql.records import MyId, _Builder


def idle_in_transaction(
    processes: Sequence[Sequence[Any]], trx: Sequence[Sequence[Any]] | None, idle_after: float
) -> set[int]:
    """The threads idle (Sleep) in an open transaction for longer than `idle_after`."""
    open_trx = {int(row[0]) for row in trx or () if row[0]}
    return {
        int(row[0])
        for row in processes
        if row[4] == "Sleep"
        and row[5] is not None
        and float(row[5]) > idle_after * 1000
        and int(row[0]) in open_trx
    }


def stale_idle(b: _Builder) -> None:
    """One lock of each thread stale by idle time (idle in a transaction past the
    limit, its client not seen alive) that no lock above is of: a stale holder
    stays listed once nobody waits on it. Its lock is one listed before (its id
    kept), else the first table whose metadata lock it holds; MariaDB without
    metadata_lock_info lists no lock of a transaction nobody waits on."""
    poll = b.poll
    listed = {lock.facts.session.thread_id for lock in b.locks if isinstance(lock.facts, MyLock)}
    for thread in sorted(idle_in_transaction(poll.processes, poll.trx, poll.idle_after) - listed):
        client = poll.clients.get(thread)
        if client is not None and client.alive:
            continue
        before = b.listed_before(thread)
        if before:
            _again(b, *before[0])
            continue
        tables = sorted(
            (f"{row[4]}.{row[5]}", str(row[1]), row[2])
            for row in poll.mdl or ()
            if int(row[0]) == thread
            and row[3] == "Table metadata lock"
            and row[5]
            and not (poll.mdl_pending and len(row) > 6 and row[6] == "PENDING")
        )
        if tables:
            table, mode, ms = tables[0]
            b.add(
                METADATA_LOCK,
                thread,
                True,
                table,
                table,
                mode,
                acquired_ms=ms,
                table=table,
                found_by=poll.mdl_from,
            )


def _again(b: _Builder, seen: MyId, mode: str, found_by: str) -> None:
    """A lock listed before, as it was: nobody waits on it now."""
    if seen.kind == METADATA_LOCK:
        table = seen.target
        b.add(METADATA_LOCK, seen.thread, True, table, table, mode, table=table, found_by=found_by)
        return
    table, _, rest = seen.target.partition(":")
    index, _, data = rest.partition(":")
    name = f"{table}{f' {index}' if index else ''}{f' ({data})' if data else ''}"
    b.add(
        INNODB_ROW,
        seen.thread,
        True,
        seen.target,
        name,
        mode,
        table=table,
        index=index or None,
        lock_data=data or None,
        found_by=found_by,
    )
