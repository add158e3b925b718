"""Postgres for the headless commands: which servers, with which settings, polled once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from lockwatch.clock import FrozenClock
from lockwatch.cpus import spread
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.report import lock_record, records_json_array, shared_parts
from lockwatch.model.verdict import State, evaluate_all
from lockwatch.sources.postgres.facts import NO_NAMES
from lockwatch.sources.postgres.rowread import Entry, Follower
from lockwatch.sources.postgres.settings import PgSettings
from lockwatch.sources.postgres.source import PgSnapshot, PgSource


def make_sources(dsns: Sequence[str], settings: PgSettings) -> list[PgSource]:
    return [
        PgSource(
            dsn,
            idle_after=settings.idle_after,
            all_rows=settings.all_rows,
            names=NO_NAMES if settings.advisory is None else settings.advisory,
            locktables=settings.locktables,
        )
        for dsn in dsns
    ]


def poll_once(sources: Sequence[PgSource]) -> None:
    """Poll every server at once; each source keeps its snapshot and status."""

    async def run() -> None:
        try:
            await asyncio.gather(*(source.poll() for source in sources))
        finally:
            await asyncio.gather(*(source.close() for source in sources))

    if sources:
        asyncio.run(run())


# Below this many rows per worker, forking costs more than it saves. A forked
# worker pays for the pages it copies on write (every shared row and session it
# reads moves a refcount) and its records come back pickled: at 4,800 rows on 2
# cores (bench_postgres) the forked run took 620 ms of CPU against 490 ms in
# one process, for a render that itself takes about 100 ms. Past 20,000 rows the
# render is long enough for a second core to win back its cost.
MIN_ROWS_PER_JOB = 10_000


class Rendered(NamedTuple):
    """One server's locks as a JSON array of records, and what the summary needs."""

    array: bytes
    stale: int
    waiting: list[Lock]  # the few waiting locks, for the blocking tree


def render(snapshot: PgSnapshot, now: datetime, host: str, jobs: int) -> Rendered:
    """Judge and render a poll's rows, shared among `jobs` processes when there are
    many: building thousands of records is the costly part, and it splits cleanly
    once who-waits-on-whom is known from all the rows."""
    rows = snapshot.rows
    waits = snapshot.waits()
    jobs = max(1, min(jobs, len(rows) // MIN_ROWS_PER_JOB))
    size = max(1, -(-len(rows) // jobs))  # ceiling division
    bounds = [(start, start + size) for start in range(0, len(rows), size)] or [(0, 0)]

    def work(bound: tuple[int, int]) -> Rendered:
        # A session's alike locks (80 advisory locks of a pooled connection) are
        # built, judged and rendered once: the others' records are that one's with
        # their own id, name, mode, database and key (records.Follower).
        entries: list[Entry] = []
        locks = snapshot.to_locks(rows[bound[0] : bound[1]], waits, entries)
        memo: dict[int, dict[str, Any]] = {}
        built: list[dict[str, Any]] = []
        waiting: list[Lock] = []
        # A session's liveness is the server's word, not this host's process table.
        verdicts = evaluate_all(locks, StaticProcesses(), FrozenClock(now), host)
        stale = [verdict.state is State.STALE for verdict in verdicts]
        for lock, verdict in zip(locks, verdicts, strict=True):
            built.append(lock_record(lock, verdict, now, memo))
            if verdict.state is State.WAITING:
                waiting.append(lock)
        records: list[dict[str, Any]] = []
        shared: dict[int, dict[str, Any]] = {}  # a leader's, its parts written once
        stales = 0
        for entry in entries:
            if type(entry) is int:
                records.append(built[entry])
                stales += stale[entry]
                continue
            assert isinstance(entry, Follower)
            key = entry.advisory_key
            base = shared.get(entry.leader)
            if base is None:
                base = shared[entry.leader] = shared_parts(built[entry.leader])
            records.append(
                {
                    **base,
                    "id": entry.id,
                    "name": entry.name,
                    "mode": entry.mode,
                    "database": entry.database,
                    "advisory_key": None if key is None else key.as_json(),
                }
            )
            stales += stale[entry.leader]
        return Rendered(records_json_array(records), stales, waiting)

    parts = spread(bounds, work)
    if len(parts) == 1:
        return parts[0]
    inner = b",".join(part.array[1:-1] for part in parts if len(part.array) > 2)
    return Rendered(
        b"[" + inner + b"]",
        sum(part.stale for part in parts),
        [lock for part in parts for lock in part.waiting],
    )
