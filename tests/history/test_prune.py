"""Retention: `prune` drops ended lock spans (oldest ends first, at most `most`
a call) and never a span still going on."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from lockwatch.history.api import Batch, open_history
from lockwatch.history.spans import span_key
from lockwatch.model.history import LockSpan
from tests.conftest import LOCAL_HOST, NOW
from tests.ui.fakes import mixed_scenario


def test_prune_drops_the_oldest_ended_spans_only(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    store = open_history(str(path), host=LOCAL_HOST, write=True)
    entry = mixed_scenario()[0].upserts[0]
    lock = entry.lock
    state, codes, holder = span_key(entry)
    batch = Batch()
    for minute in range(5):
        at = NOW + timedelta(minutes=minute)
        span = LockSpan(LOCAL_HOST, lock.id, lock.source, lock.name, "/x", state, codes, holder, at)
        if minute:
            batch.closed.append((lock.id, at))
        batch.opened.append((span, entry))
    store.record(batch, poll_seconds=1.0)
    ends = [s.end for s in store.lock_spans(None, None)]
    assert ends == [NOW + timedelta(minutes=m) for m in (1, 2, 3, 4)] + [None]
    assert store.prune(NOW + timedelta(minutes=10), most=2) == 2
    assert [s.end for s in store.lock_spans(None, None)] == ends[2:]
    assert store.prune(NOW + timedelta(minutes=10)) == 2
    assert [s.end for s in store.lock_spans(None, None)] == [None]
    assert [e.lock.id for e in store.entries_at(NOW + timedelta(hours=1))] == [lock.id]
    store.close()
