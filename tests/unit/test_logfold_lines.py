"""The log fold's rules on a few lines (an imitation, in the real stderr format
PostgreSQL writes: tests/postgres/test_logfold.py folds a log the server
really wrote): several holders, a cancel, a wait the log never ends, lines
that are no log lines, and an overlong line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from lockwatch.model.history import CANCELLED, ORIGIN_LOG
from lockwatch.sources.postgres.logfold import MAX_LINE, fold, parse_line

LINES = [
    "2026-12-07 03:12:07.310 UTC [300] LOG:  process 300 still waiting for"
    " AccessExclusiveLock on relation 16384 of database 5 after 1000.000 ms",
    "2026-12-07 03:12:07.310 UTC [300] DETAIL:  Processes holding the lock: 100, 200."
    " Wait queue: 300.",
    "2026-12-07 03:12:07.310 UTC [300] STATEMENT:  ALTER TABLE t ADD COLUMN c int;",
    "\tnot a line of its own",
    "garbage",
    "2026-12-07 03:12:09.000 UTC [300] ERROR:  canceling statement due to user request",
    "2026-12-07 03:12:10.000 UTC [400] LOG:  process 400 still waiting for ShareLock on"
    " transaction 9 after 500.0 ms",
    "2026-12-07 03:12:10.000 UTC [400] DETAIL:  Process holding the lock: 100. Wait queue: 400.",
    "2026-12-07 03:12:12.000 +01 [1] LOG:  checkpoint complete",
]


def test_holders_cancel_and_an_unended_wait() -> None:
    spans = fold(LINES, host="h", server="db")
    at = datetime(2026, 12, 7, 3, 12, 7, 310000, tzinfo=UTC)
    cancelled = [s for s in spans if s.waiter.pid == 300]
    assert [s.blocker.pid for s in cancelled] == [100, 200]
    assert all(s.outcome == CANCELLED and s.origin == ORIGIN_LOG for s in cancelled)
    assert cancelled[0].start == at - timedelta(seconds=1)
    assert cancelled[0].end == datetime(2026, 12, 7, 3, 12, 9, tzinfo=UTC)
    assert cancelled[0].resource == "relation 16384 of database 5"
    (unended,) = [s for s in spans if s.waiter.pid == 400]
    # Never ended in the log: ends at its last line (02:12:12 UTC is before the
    # wait's start, so the last line read is what it ends at), outcome unknown.
    assert unended.outcome is None and unended.end is not None


def test_lines_are_bounded_and_offsets_read() -> None:
    assert parse_line("x" * (MAX_LINE * 4)) is None
    line = parse_line("2026-12-07 03:12:12.000 +01 [1] LOG:  checkpoint complete")
    assert line is not None and line.at == datetime(2026, 12, 7, 2, 12, 12, tzinfo=UTC)


def test_followed_a_line_at_a_time_a_wait_is_handed_over_once_it_ended() -> None:
    """The fold as `serve --pg-log` drives it (through the registry, as generic
    code reaches it): `take` gives the waits ended so far, never one still going."""
    from lockwatch.sources.registry import log_folding

    folding = log_folding("h", "db")
    assert folding is not None
    taken = []
    for line in LINES[:6]:
        folding.feed(line)
        taken.append(len(folding.take()))
    # The cancel (line 6) ends pid 300's wait on both holders: taken then, not before.
    assert taken == [0, 0, 0, 0, 0, 2]
    for line in LINES[6:]:
        folding.feed(line)
    assert folding.take() == []  # pid 400 still waits as far as the log says
    assert [s.waiter.pid for s in folding.done()] == [400]


def test_every_source_says_which_codes_mean_its_holder_is_gone() -> None:
    from lockwatch.sources.registry import holder_gone_codes

    assert {"holder_dead", "session_gone", "k8s_past_due", "client_dead"} <= holder_gone_codes()
