"""The Board as the `lockwatch.ls/1` document: what `lockwatch ls --json`
prints, rendered by the same code (model/report.py) from the locks the feeds
keep, with ages as of the request. Other hosts' locks (a serve that merges
remotes) go out as those hosts wrote them, with `host` and `remote`.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from lockwatch.model.blocking import BlockingTree
from lockwatch.model.lock import Lock
from lockwatch.model.report import lock_record, ls_json_bytes, records_json_array
from lockwatch.model.verdict import Verdict
from lockwatch.serve.watcher import Watcher
from lockwatch.sources import registry
from lockwatch.sources.remote.document import aged_record

_NO_TREE = BlockingTree((), ())


def document(watcher: Watcher, now: datetime, host: str) -> bytes:
    local: list[tuple[Lock, Verdict]] = []
    remote: list[dict[str, Any]] = []
    with watcher.reading(now) as board:
        for lock_id, entry in board.entries.items():
            facts = entry.lock.facts
            if facts is not None and facts.remote_host() is not None:
                # Another host's: its record as that host wrote it, aged to now.
                record = aged_record(entry.lock, now)
                if record is not None:
                    remote.append(record)
            else:
                local.append((entry.lock, board.verdict(lock_id)))
        statuses = watcher.statuses(board, now)
        errors = sorted(board.all_errors(), key=lambda error: error.path)
        trees = dict(board.blocking_trees())
    # Rendered outside the lock: the feeds need not wait for the bytes.
    local.sort(key=lambda pair: pair[0].id)
    memo: dict[int, dict[str, Any]] = {}
    records = []
    for lock, verdict in local:
        record = lock_record(lock, verdict, now, memo)
        if lock.acquired_at is not None:
            # The verdict's age is its judgement's; the document's is now.
            record["age_seconds"] = round(max(0.0, (now - lock.acquired_at).total_seconds()), 3)
        records.append(record)
    # As `ls --json` has it: a tree for every connected server, empty or not.
    for status in statuses:
        source = registry.by_name(status.kind)
        waits = source is not None and source.wait_metrics is not None
        if waits and status.state == "connected":
            trees.setdefault(status.name, _NO_TREE)
    arrays = [records_json_array(records), records_json_array(remote)]
    return b"".join(ls_json_bytes(now, host, arrays, errors, statuses, sorted(trees.items())))


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
        with self._guard:
            version = self._version(now)
            kept = self._kept
            if (
                kept is not None
                and kept[0] == version
                and 0 <= (now - kept[1]).total_seconds() < self.keep
            ):
                return kept[2]
            body = document(self.watcher, now, self.host)
            self._kept = (version, now, body)
            return body
