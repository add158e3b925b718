"""The seam for waits learnt elsewhere than by polling (issue 44, item 7: the
PostgreSQL log fold): `add_waits` stores them marked with their origin, once
however often the same log is folded, and they fold into episodes with the
polled ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from lockwatch.history.api import open_history
from lockwatch.model.history import ORIGIN_LOG, WaitSpan, Who

T0 = datetime(2026, 12, 7, 3, 11, tzinfo=UTC)


def test_log_waits_are_added_once_and_fold_into_episodes(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    store = open_history(str(path), host="db1", write=True)
    blocker = Who("4242", pid=4242, application="billing-api", state="idle in transaction")
    spans = [
        WaitSpan(
            "db1",
            "postgres",
            "pg-main",
            "public.jobs",
            "ShareLock",
            Who(str(pid), pid=pid),
            blocker,
            T0 + timedelta(seconds=n),
            T0 + timedelta(seconds=5),  # queued together behind one holder
            "acquired",
            ORIGIN_LOG,
        )
        for n, pid in enumerate((5001, 5002, 5003))
    ]
    assert store.add_waits(spans) == 3
    assert store.add_waits(spans) == 0  # the same log folded again
    store.close()
    [episode] = open_history(str(path)).episodes(T0 - timedelta(minutes=1))
    assert episode.origins == (ORIGIN_LOG,)
    assert episode.blocker.application == "billing-api"
    assert [w.pid for w in episode.waiters] == [5001, 5002, 5003]
    assert {w.outcome for w in episode.waiters} == {"acquired"}
