"""The Board as the `lockwatch.ls/1` document: what `lockwatch ls --json`
prints, rendered by the same code (model/report.py) from the locks the feeds
keep, with ages as of the request. Other hosts' locks (a serve that merges
remotes) go out as those hosts wrote them, with `host` and `remote`. It is
rendered once for every reader of the same generation (Documents), a batch of
records at a time, and written by the listener in pieces with back-pressure.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lockwatch.model.blocking import BlockingTree
from lockwatch.model.lock import Lock
from lockwatch.model.report import lock_record, ls_json_bytes, records_json_array
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import Verdict
from lockwatch.serve.watcher import Watcher
from lockwatch.sources import registry

_NO_TREE = BlockingTree((), ())


# Records rendered at a time (their dicts let go batch by batch).
BATCH = 1_000


@dataclass(frozen=True)
class _Gathered:
    """What the document says, taken from the Board at one instant; the locks'
    records are rendered from it later, outside the Board's lock."""

    now: datetime
    host: str
    local: list[tuple[Lock, Verdict]]
    others: list[dict[str, Any]]  # other hosts' records, as they wrote them
    statuses: list[SourceStatus]
    errors: list[ScanError]
    trees: list[tuple[str, BlockingTree]]

    @property
    def count(self) -> int:
        return len(self.local) + len(self.others)


def _gather(watcher: Watcher, now: datetime, host: str) -> _Gathered:
    local: list[tuple[Lock, Verdict]] = []
    remote: list[dict[str, Any]] = []
    with watcher.reading(now) as board:
        for lock_id, entry in board.entries.items():
            facts = entry.lock.facts
            if facts is not None and facts.remote_host() is not None:
                # Another host's: its record as that host wrote it, aged to now.
                record = facts.record_at(entry.lock, now)
                if record is not None:
                    remote.append(record)
            else:
                local.append((entry.lock, board.verdict(lock_id)))
        statuses = watcher.statuses(board, now)
        errors = sorted(board.all_errors(), key=lambda error: error.path)
        trees = dict(board.blocking_trees())
    local.sort(key=lambda pair: pair[0].id)
    # As `ls --json` has it: a tree for every connected server, empty or not.
    for status in statuses:
        source = registry.by_name(status.kind)
        waits = source is not None and source.wait_metrics is not None
        if waits and status.state == "connected":
            trees.setdefault(status.name, _NO_TREE)
    return _Gathered(now, host, local, remote, statuses, errors, sorted(trees.items()))


def _arrays(gathered: _Gathered) -> Iterator[bytes]:
    now = gathered.now
    memo: dict[int, dict[str, Any]] = {}
    local = gathered.local
    for at in range(0, len(local), BATCH):
        records = []
        for lock, verdict in local[at : at + BATCH]:
            record = lock_record(lock, verdict, now, memo)
            if lock.acquired_at is not None:
                # The verdict's age is its judgement's; the document's is now.
                age = max(0.0, (now - lock.acquired_at).total_seconds())
                record["age_seconds"] = round(age, 3)
            records.append(record)
        yield records_json_array(records)
    for at in range(0, len(gathered.others), BATCH):
        yield records_json_array(gathered.others[at : at + BATCH])


def _render(gathered: _Gathered) -> Iterator[bytes | memoryview]:
    return ls_json_bytes(
        gathered.now,
        gathered.host,
        _arrays(gathered),
        gathered.errors,
        gathered.statuses,
        gathered.trees,
    )


def document(watcher: Watcher, now: datetime, host: str) -> bytes:
    # Rendered outside the Board's lock: the feeds need not wait for the bytes.
    return b"".join(_render(_gather(watcher, now, host)))


class Documents:
    """The document, kept for up to `keep` seconds while nothing in it changed:
    several dashboards polling one serve share one rendering (10,000 locks take
    a large part of a second of CPU to render), and a change shows at once."""

    def __init__(self, watcher: Watcher, host: str, keep: float = 1.0) -> None:
        self.watcher = watcher
        self.host = host
        self.keep = keep
        self._kept: tuple[object, datetime, bytes] | None = None
        self._guard = threading.Lock()

    def _version(self, now: datetime) -> object:
        with self.watcher.reading(now) as board:
            statuses = tuple(self.watcher.statuses(board, now))
            return (board.generation, statuses, len(board.all_errors()))

    def get(self, now: datetime) -> bytes:
        """The document whole: one rendering shared by every reader that asks
        while nothing in it changed (within `keep` seconds), however slowly
        each reads it. A rendering per reader, held while the reader stalls,
        made 300 stalled readers of 50,000 locks cost 1.5 GB (issue 47)."""
        with self._guard:
            version = self._version(now)
            kept = self._kept
            if (
                kept is not None
                and kept[0] == version
                and 0 <= (now - kept[1]).total_seconds() < self.keep
            ):
                return kept[2]
            # The last rendering is let go before the next is made: its readers
            # keep it as long as they write it, nothing here does.
            self._kept = None
            body = b"".join(_render(_gather(self.watcher, now, self.host)))
            self._kept = (version, now, body)
            return body
