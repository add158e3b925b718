"""The history on PostgreSQL for a fleet (issue 44, item 6), on the local
server: two hosts record real flock waits into one database (a private one,
dropped at the end), and `lockwatch history --history postgresql://…` answers
for both; a reader of a database without the tables is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import psycopg
import pytest
from psycopg import conninfo

from lockwatch.history.api import HistoryError, open_history
from tests.history.flock_wait import record_a_flock_wait

pytestmark = pytest.mark.postgres


def _url(dsn: str) -> str:
    parts = conninfo.conninfo_to_dict(dsn)
    return (
        f"postgresql://{parts.get('user', 'postgres')}@{parts.get('host', '127.0.0.1')}:"
        f"{parts.get('port', 5432)}/{parts['dbname']}"
    )


def test_two_hosts_record_into_one_database(pg_db: str, tmp_path: Path) -> None:
    url = _url(pg_db)
    with psycopg.connect(pg_db, autocommit=True) as admin:
        admin.execute("CREATE SCHEMA history_test")
    target = url + "?options=-csearch_path%3Dhistory_test"
    try:
        with pytest.raises(HistoryError, match="no history recorded here"):
            open_history(target)
        waits = {}
        for host in ("web-1", "web-2"):
            place = tmp_path / host
            place.mkdir()
            waits[host] = record_a_flock_wait(place, target, host=host)
        store = open_history(target)
        assert store.hosts() == ["web-1", "web-2"]
        out = subprocess.run(
            [sys.executable, "-m", "lockwatch", "history", "--history", target, "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        episodes = [e for e in orjson.loads(out.stdout)["episodes"] if e["waiters"]]
        assert sorted(e["host"] for e in episodes) == ["web-1", "web-2"]
        for episode in episodes:
            waited = waits[episode["host"]]
            assert episode["blocker"]["pid"] == waited.holder_pid
            assert episode["waiters"][0]["pid"] == waited.waiter_pid
            assert episode["ended_by"] == "released"
        mine = [lock for lock in store.locks_at(waits["web-1"].during, host="web-1")]
        assert any(lock.path == str(waits["web-1"].lock) for lock in mine)
        store.close()
    finally:
        with psycopg.connect(pg_db, autocommit=True) as admin:
            admin.execute("DROP SCHEMA history_test CASCADE")
