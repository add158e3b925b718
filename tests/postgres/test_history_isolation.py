"""Lock history with real waits (issue 44): PostgreSQL's own isolation tester
(`isolationtester`, postgresql-client) drives this project's specs
(tests/postgres/specs/history_*.spec: a DDL queue behind an idle transaction, a
lock_timeout, a deadlock, a foreign-key wait) while lockwatch polls the server
and records; each episode's blocker, waiters, outcomes and times are then checked
against what the tester printed, within one poll."""

from __future__ import annotations

import os
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lockwatch.model.history import Episode
from tests.history.harness import poll_gap, reader, recording, wait_until

pytestmark = pytest.mark.postgres

TESTER = Path("/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/isolationtester")
SPECS = Path(__file__).parent / "specs"
POLL = 0.2
# What a poll's sample can be off by: one poll, its interval and the time it
# takes (measured: on a shared server with thousands of locks a poll takes seconds).
SLACK = timedelta(seconds=POLL)


def _tester() -> Path:
    if not TESTER.exists():
        if os.environ.get("LOCKWATCH_REQUIRE_PG") == "1":
            pytest.fail(
                f"{TESTER} is missing (apt-get install postgresql-client-15 / postgresql-15)"
            )
        pytest.skip(f"{TESTER} is missing")
    return TESTER


def _mine(dsn: str) -> str:
    from psycopg import conninfo

    return f"db={conninfo.conninfo_to_dict(dsn)['dbname']}"


def run_spec(
    name: str, dsn: str, tmp: Path, apps: set[str]
) -> tuple[list[Episode], dict[str, datetime], timedelta]:
    """Run spec `name` against `dsn` while recording; the episodes recorded in
    its time and when each line of the tester's output came (by its text)."""
    history = tmp / "history.sqlite3"
    mine = _mine(dsn)
    seen: dict[str, datetime] = {}
    with recording(["--pg", dsn], history, POLL) as watcher:
        wait_until(lambda: watcher.health()[0], "the PostgreSQL feed's first poll")
        started = datetime.now(UTC)
        tester = subprocess.Popen(
            ["stdbuf", "-oL", str(_tester()), dsn],
            stdin=(SPECS / f"{name}.spec").open("rb"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert tester.stdout is not None

        took = [0.0]

        def read() -> None:
            assert tester.stdout is not None
            for raw in tester.stdout:
                seen.setdefault(raw.decode(errors="replace").strip(), datetime.now(UTC))

        reading = threading.Thread(target=read)
        reading.start()
        assert tester.wait(120) == 0
        reading.join(30)
        done = datetime.now(UTC)
        # One poll as it really ran here: the longest gap between two of its
        # change sets, and the longest time one took to be applied.
        took[0] = poll_gap(watcher) + max(watcher.durations.values(), default=0.0)
        # The last poll after the tester ended has been recorded: every wait is over.
        wait_until(
            lambda: (
                not any(
                    e.verdict.state.value == "waiting"
                    and e.lock.facts is not None
                    and (e.lock.facts.where(e.lock) or "").endswith(mine)
                    for e in list(watcher.board.entries.values())
                )
            ),
            "no session left waiting on the board",
        )
    store = reader(history)
    # The server is shared: other tests' waits are recorded too; these are the spec's.
    episodes = [
        e
        for e in store.episodes(started, done + SLACK)
        if e.waiters and any(w.application in apps for w in e.waiters)
    ]
    return episodes, seen, SLACK + timedelta(seconds=took[0])


def line_at(seen: dict[str, datetime], start: str) -> datetime:
    found = [at for text, at in seen.items() if text.startswith(start)]
    assert found, f"no line {start!r} in {sorted(seen)}"
    return min(found)


def test_ddl_queue_behind_an_idle_transaction(pg_db: str, tmp_path: Path) -> None:
    episodes, seen, slack = run_spec("history_ddl_queue", pg_db, tmp_path, {"migrate", "report"})
    assert len(episodes) == 1, episodes
    episode = episodes[0]
    assert episode.source == "postgres"
    assert episode.blocker.application == "billing-api"
    assert episode.blocker.state is not None and "idle in transaction" in episode.blocker.state
    apps = sorted(w.application or "" for w in episode.waiters)
    assert apps == ["migrate", "report"]
    assert {w.outcome for w in episode.waiters} == {"acquired"}
    assert episode.ended_by == "released"
    assert episode.peak_waiters == 2
    blocked = line_at(seen, "step aa: ALTER")
    released = line_at(seen, "step hc: COMMIT")
    assert blocked - slack <= episode.start <= blocked + slack
    assert episode.end is not None
    assert released - slack <= episode.end <= released + 2 * slack


def test_lock_timeout(pg_db: str, tmp_path: Path) -> None:
    episodes, seen, slack = run_spec("history_lock_timeout", pg_db, tmp_path, {"web"})
    assert len(episodes) == 1, episodes
    episode = episodes[0]
    assert episode.blocker.application == "batch"
    waiters = {w.application or "": w for w in episode.waiters}
    assert sorted(waiters) == ["cron", "web"]
    assert waiters["web"].outcome == "timeout"
    assert waiters["cron"].outcome == "acquired"
    assert episode.ended_by == "released"
    gave_up = line_at(seen, "ERROR:  canceling statement due to lock timeout")
    web = waiters["web"]
    assert web.end is not None
    # The tester prints the error when it looks again (after its clock step):
    # the wait ended before; it lasted lock_timeout, within a poll.
    assert web.end <= gave_up + slack
    assert abs((web.end - web.start).total_seconds() - 5.0) <= slack.total_seconds()
    # The patient one waited until batch committed: the longest wait, past web's.
    assert episode.longest_wait_seconds >= (web.end - web.start).total_seconds() + 1


def test_deadlock(pg_db: str, tmp_path: Path) -> None:
    episodes, seen, slack = run_spec("history_deadlock", pg_db, tmp_path, {"left", "right"})
    assert len(episodes) == 1, episodes
    episode = episodes[0]
    assert episode.ended_by == "deadlock"
    assert sorted(w.application or "" for w in episode.waiters) == ["left", "right"]
    assert {w.outcome for w in episode.waiters} == {"deadlock"}
    detected = line_at(seen, "ERROR:  deadlock detected")
    assert episode.end is not None
    assert detected - 2 * slack <= episode.end <= detected + slack


def test_foreign_key_wait(pg_db: str, tmp_path: Path) -> None:
    episodes, seen, slack = run_spec("history_foreign_key", pg_db, tmp_path, {"orders"})
    assert len(episodes) == 1, episodes
    episode = episodes[0]
    assert episode.blocker.application == "cleanup"
    assert [w.application for w in episode.waiters] == ["orders"]
    assert episode.waiters[0].outcome == "acquired"
    assert episode.ended_by == "released"
    blocked = line_at(seen, "step ci: INSERT")
    assert blocked - slack <= episode.start <= blocked + slack
