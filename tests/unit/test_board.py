"""The dashboard's state: change sets in, rows to redraw and events out.

Locks are decoded from lock files and judged with `judge()` against the fixed
process table (pid 100 alive, every other pid dead), as the file feed does;
Postgres locks come from pg_locks rows, as the pg feed builds them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from lockwatch.model import board as board_module
from lockwatch.model.board import Applied, Board
from lockwatch.model.changes import ChangeSet, Entry, judge, merge, same
from lockwatch.model.events import Event, EventKind
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import ScanError, SourceStatus
from lockwatch.model.verdict import State
from lockwatch.sources.files.decoders import decode_file
from lockwatch.sources.files.facts import refiled
from lockwatch.sources.files.policy import StalenessPolicy
from lockwatch.sources.postgres.records import to_locks
from tests.conftest import LOCAL_HOST, NOW, ago, alive, iso, lock_file
from tests.facts_of import PgLock
from tests.sources.test_pg_records import SERVER, row, sessions_of
from tests.unit.test_incident import DEAD, LIVE, PROJECT, generic, loop, tower

FILES = "files"
PG = f"pg:{SERVER}"


def later(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def judged(
    *locks: Lock, at: datetime = NOW, living: tuple[int, ...] = (LIVE,)
) -> tuple[Entry, ...]:
    table = StaticProcesses(*(alive(pid) for pid in living))
    return tuple(judge(list(locks), table, at, LOCAL_HOST))


def full(
    feed: str, *upserts: Entry, at: datetime = NOW, errors: tuple[ScanError, ...] = ()
) -> ChangeSet:
    return ChangeSet(feed, at, full=True, upserts=upserts, errors=errors)


def delta(
    feed: str,
    *upserts: Entry,
    removed: tuple[str, ...] = (),
    at: datetime = NOW,
    errors: tuple[ScanError, ...] = (),
    all_errors: bool = False,
    looked: tuple[str, ...] = (),
) -> ChangeSet:
    return ChangeSet(
        feed,
        at,
        upserts=upserts,
        removed=removed,
        errors=errors,
        all_errors=all_errors,
        looked=looked,
    )


def kinds(events: list[Event]) -> list[tuple[str, str]]:
    return [(event.kind, event.name) for event in events]


def pg(*rows: dict[str, object]) -> list[Lock]:
    listed = [dict(r) for r in rows]
    return to_locks(listed, sessions_of(listed), server=SERVER, polled_at=NOW, idle_after=60.0)


HOLDER_ROW = row(pid=4242, usename="app")


def waiter_row(pid: int) -> dict[str, object]:
    return row(pid=pid, granted=False, wait_age=3.0, blocked_by=[4242], usename="batch")


DEPLOY = tower("deploy-app")
FIX = loop("fix-bugs", [f"{PROJECT}/src"], file="fix-bugs")
REFACTOR = loop("refactor", [f"{PROJECT}/src/lib"], file="refactor")
DOCS = loop("docs", [f"{PROJECT}/docs"], file="docs")
QUIET = generic("/srv/run/quiet.lock", {"pid": LIVE})


# -- apply: full pictures and deltas ---------------------------------------------------


def test_first_sighting_adds_every_lock() -> None:
    board = Board(LOCAL_HOST)
    applied = board.apply(full(FILES, *judged(DEPLOY, QUIET)))
    assert sorted(applied.added) == sorted([DEPLOY.id, QUIET.id])
    assert applied.changed == applied.removed == []
    assert len(board) == 2 and DEPLOY.id in board and "file:/nope" not in board
    assert kinds(applied.events) == [
        (EventKind.APPEARED, "deploy-app"),
        (EventKind.APPEARED, "quiet"),
    ]
    assert applied.events[0].detail == f"active; {LIVE}@{LOCAL_HOST} deployer"
    assert not applied.empty


def test_full_picture_removes_what_it_no_longer_has() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(DEPLOY, QUIET)))
    applied = board.apply(full(FILES, *judged(QUIET), at=later(5)))
    assert applied.removed == [DEPLOY.id]
    assert applied.added == applied.changed == []
    assert DEPLOY.id not in board
    (released,) = applied.events
    assert (released.kind, released.at) == (EventKind.RELEASED, later(5))
    assert released.detail == f"held by {LIVE}@{LOCAL_HOST} deployer"


def test_delta_keeps_what_it_does_not_mention() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(DEPLOY)))
    applied = board.apply(delta(FILES, *judged(QUIET)))
    assert applied.added == [QUIET.id] and applied.removed == []
    assert len(board) == 2


def test_delta_removes_what_it_names() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(DEPLOY, QUIET)))
    applied = board.apply(delta(FILES, removed=(QUIET.id, "file:/never/seen.lock")))
    assert applied.removed == [QUIET.id]
    assert kinds(applied.events) == [(EventKind.RELEASED, "quiet")]
    assert list(board.entries) == [DEPLOY.id]


def test_an_upsert_wins_over_a_removal_in_the_same_delta() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(DEPLOY)))
    applied = board.apply(delta(FILES, *judged(DEPLOY), removed=(DEPLOY.id,)))
    assert DEPLOY.id in board
    assert applied.empty


def test_a_feed_never_removes_another_feeds_locks() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(DEPLOY)))
    board.apply(full(PG, *judged(*pg(HOLDER_ROW))))
    assert DEPLOY.id not in board.apply(full(PG)).removed
    assert board.apply(delta("other", removed=(DEPLOY.id,))).empty
    assert DEPLOY.id in board and len(board) == 1


def test_unchanged_upserts_change_nothing() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(DEPLOY, QUIET, FIX)))
    events = len(board.events)
    # Judged again a minute on: ages moved, nothing a row shows did.
    again = judged(DEPLOY, QUIET, FIX, at=later(60))
    assert all(same(a, b) for a, b in zip(judged(DEPLOY, QUIET, FIX), again, strict=True))
    assert board.apply(delta(FILES, *again, at=later(60))).empty
    assert board.apply(full(FILES, *again, at=later(60))).empty
    assert len(board.events) == events


def test_a_changed_sighting_is_redrawn() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(FIX)))
    applied = board.apply(delta(FILES, *judged(FIX, living=())))
    assert applied.changed == [FIX.id] and applied.added == applied.removed == []
    assert board.verdict(FIX.id).state is State.STALE


def test_an_id_moves_to_the_feed_that_reports_it_changed() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full("a", *judged(FIX)))
    applied = board.apply(full("b", *judged(FIX, living=())))
    assert applied.changed == [FIX.id]
    # Feed a no longer has it, but it is b's now: it stays.
    assert board.apply(full("a")).empty
    assert FIX.id in board
    # And b can remove it.
    assert board.apply(full("b")).removed == [FIX.id]
    assert FIX.id not in board


def test_an_id_moves_to_the_feed_that_reports_it_unchanged() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full("a", *judged(FIX)))
    assert board.apply(full("b", *judged(FIX))).empty  # the same lock, seen from b too
    board.apply(full("a"))  # a no longer sees it; b does
    assert FIX.id in board


# -- events ----------------------------------------------------------------------------


def test_heartbeat_event() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(tower("deploy-app", heartbeat_ago=70.0))))
    applied = board.apply(delta(FILES, *judged(tower("deploy-app", heartbeat_ago=10.0))))
    assert applied.changed == [DEPLOY.id]
    ((kind, detail),) = [(e.kind, e.detail) for e in applied.events]
    assert (kind, detail) == (EventKind.HEARTBEAT, "1m00s after the last")


def test_holder_died_event() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(FIX)))
    applied = board.apply(delta(FILES, *judged(FIX, living=()), at=later(3)))
    assert kinds(applied.events) == [
        (EventKind.HOLDER_DIED, "fix-bugs"),
        (EventKind.BECAME_STALE, "fix-bugs"),
    ]
    assert all(e.detail == f"holder pid {LIVE} is not running on this host" for e in applied.events)
    assert all(e.at == later(3) and e.lock_id == FIX.id for e in applied.events)


def test_holder_changed_event() -> None:
    path = "/srv/run/job.lock"
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(generic(path, {"pid": LIVE}))))
    applied = board.apply(delta(FILES, *judged(generic(path, {"pid": DEAD}))))
    assert kinds(applied.events) == [
        (EventKind.HOLDER_CHANGED, "job"),
        (EventKind.BECAME_STALE, "job"),
    ]
    assert applied.events[0].detail == f"{LIVE} → {DEAD}"


def test_became_active_and_invalid_events() -> None:
    path = "/srv/run/job.lock"
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(generic(path, {"pid": DEAD}))))
    back = board.apply(delta(FILES, *judged(generic(path, {"pid": DEAD}), living=(DEAD,))))
    assert (EventKind.BECAME_ACTIVE, "job") in kinds(back.events)
    broken = board.apply(delta(FILES, *judged(generic(path, b"\x00garbage"))))
    assert (EventKind.BECAME_INVALID, "job") in kinds(broken.events)


def test_waiting_and_waiters_changed_events() -> None:
    board = Board(LOCAL_HOST)
    first = board.apply(full(PG, *judged(*pg(HOLDER_ROW, waiter_row(4243)))))
    assert kinds(first.events)[-1][0] is EventKind.STARTED_WAITING
    assert "blocked by pid 4242" in first.events[-1].detail
    (holder_id,) = [lock.id for lock in pg(HOLDER_ROW) if isinstance(lock.facts, PgLock)]
    applied = board.apply(full(PG, *judged(*pg(HOLDER_ROW, waiter_row(4243), waiter_row(4244)))))
    changed = [e for e in applied.events if e.kind is EventKind.WAITERS_CHANGED]
    assert [(e.lock_id, e.detail) for e in changed] == [(holder_id, "1 → 2")]
    assert holder_id in applied.changed


def test_source_status_events() -> None:
    board = Board(LOCAL_HOST)
    up = SourceStatus("postgres", SERVER, "connected", updated_at=NOW)
    first = board.apply(ChangeSet(PG, NOW, (up,)))
    assert first.statuses_changed and first.events == []  # fine from the start: no news
    assert not first.empty

    polled = SourceStatus("postgres", SERVER, "connected", updated_at=later(2))
    again = board.apply(ChangeSet(PG, later(2), (polled,)))
    assert again.statuses_changed and again.events == []  # only its age moved
    assert board.apply(ChangeSet(PG, later(2), (polled,))).empty  # nothing at all

    down = SourceStatus("postgres", SERVER, "disconnected", "connection refused", later(2))
    lost = board.apply(ChangeSet(PG, later(4), (down,)))
    (event,) = lost.events
    assert (event.kind, event.lock_id, event.name, event.source) == (
        EventKind.SOURCE, None, SERVER, "postgres",
    )  # fmt: skip
    assert (event.at, event.detail) == (later(4), "disconnected: connection refused")
    back = board.apply(ChangeSet(PG, later(6), (polled,)))
    assert [e.detail for e in back.events] == ["connected"]
    assert board.all_statuses() == [polled]
    assert [e.kind for e in board.events] == [EventKind.SOURCE, EventKind.SOURCE]
    assert board.history == {}  # source events belong to no lock


def test_a_source_that_starts_in_trouble_says_so() -> None:
    board = Board(LOCAL_HOST)
    trying = SourceStatus("postgres", SERVER, "connecting")
    (event,) = board.apply(ChangeSet(PG, NOW, (trying,))).events
    assert event.detail == "connecting"


def test_change_sets_without_statuses_keep_the_old_ones() -> None:
    board = Board(LOCAL_HOST)
    watching = SourceStatus("file", "/srv", "watching")
    board.apply(ChangeSet(FILES, NOW, (watching,)))
    assert not board.apply(delta(FILES, *judged(QUIET))).statuses_changed
    assert board.all_statuses() == [watching]


def test_events_are_kept_in_order_and_capped() -> None:
    board = Board(LOCAL_HOST)
    for i in range(board_module.EVENTS_KEPT + 10):
        board.note(Event(later(i), EventKind.BROKEN, None, f"n{i}", "file"))
    assert len(board.events) == board_module.EVENTS_KEPT
    assert board.events[0].name == "n10" and board.events[-1].name.endswith("9")


# -- history ---------------------------------------------------------------------------


def test_each_lock_keeps_its_own_history() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(tower("deploy-app", heartbeat_ago=70.0), QUIET)))
    board.apply(delta(FILES, *judged(tower("deploy-app", heartbeat_ago=10.0)), at=later(1)))
    broken = Event(later(2), EventKind.BROKEN, DEPLOY.id, "deploy-app", "file", "by op")
    board.note(broken)
    board.apply(delta(FILES, removed=(DEPLOY.id,), at=later(3)))
    assert [e.kind for e in board.history[DEPLOY.id]] == [
        EventKind.APPEARED,
        EventKind.HEARTBEAT,
        EventKind.BROKEN,
        EventKind.RELEASED,
    ]
    assert board.history[DEPLOY.id][2] is broken
    assert [e.kind for e in board.history[QUIET.id]] == [EventKind.APPEARED]
    # Back again: the story goes on.
    board.apply(delta(FILES, *judged(DEPLOY), at=later(4)))
    assert board.history[DEPLOY.id][-1].kind is EventKind.APPEARED
    assert len(board.history[DEPLOY.id]) == 5


def test_history_is_capped_per_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(board_module, "HISTORY_KEPT", 3)
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(QUIET)))
    for i in range(5):
        board.note(Event(later(i), EventKind.BROKEN, QUIET.id, "quiet", "file", str(i)))
    assert [e.detail for e in board.history[QUIET.id]] == ["2", "3", "4"]


def test_histories_of_released_locks_are_forgotten_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(board_module, "RELEASED_HISTORIES_KEPT", 2)
    board = Board(LOCAL_HOST)
    locks = [generic(f"/srv/run/{n}.lock", {"pid": LIVE}) for n in ("a", "b", "c")]
    board.apply(full(FILES, *judged(*locks, QUIET)))
    for lock in locks:
        board.apply(delta(FILES, removed=(lock.id,)))
    assert locks[0].id not in board.history
    assert locks[1].id in board.history and locks[2].id in board.history
    assert QUIET.id in board.history  # still there: never forgotten


def test_a_lock_released_twice_keeps_its_history_from_the_last_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(board_module, "RELEASED_HISTORIES_KEPT", 2)
    board = Board(LOCAL_HOST)
    x, y = generic("/srv/run/x.lock", {"pid": LIVE}), generic("/srv/run/y.lock", {"pid": LIVE})
    for _ in range(2):
        board.apply(delta(FILES, *judged(x)))
        board.apply(delta(FILES, removed=(x.id,)))
    board.apply(delta(FILES, *judged(y)))
    board.apply(delta(FILES, removed=(y.id,)))
    # x's last release and y's are the two most recent: both histories are kept.
    assert x.id in board.history and y.id in board.history


# -- time: deadlines, tick, verdict_at -------------------------------------------------

LATE = tower("deploy-app", heartbeat_ago=400.0, ttl=900)  # late; stale 500 s from now
DEADLINE = NOW + timedelta(seconds=500)


def late_board() -> Board:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(LATE, QUIET)))
    assert board.verdict(LATE.id).codes == ("heartbeat_late",)
    assert board.entries[LATE.id].verdict.next_change_at == DEADLINE
    return board


def test_nothing_happens_before_the_deadline() -> None:
    board = late_board()
    generation = board.generation
    assert not board.due(DEADLINE - timedelta(seconds=1))
    applied = board.tick(DEADLINE - timedelta(seconds=1))
    assert applied.empty and applied.events == []
    assert board.verdict(LATE.id).state is State.ACTIVE
    assert board.generation == generation


def test_tick_after_the_deadline_makes_the_lock_stale() -> None:
    board = late_board()
    events = len(board.events)
    after = DEADLINE + timedelta(seconds=1)
    assert board.due(after)
    applied = board.tick(after)
    assert applied.changed == [LATE.id] and applied.added == applied.removed == []
    verdict = board.verdict(LATE.id)
    assert verdict.state is State.STALE
    assert verdict.codes == ("heartbeat_expired",)
    assert verdict.next_change_at is None
    (event,) = applied.events
    assert (event.kind, event.lock_id, event.at) == (EventKind.BECAME_STALE, LATE.id, after)
    assert event.detail == "last heartbeat 15m01s ago, over the 15m00s ttl"
    assert list(board.events)[events:] == [event]
    assert board.history[LATE.id][-1] is event
    assert board.counts[State.STALE] == 1 and board.counts[State.ACTIVE] == 1
    # Judged once: nothing more is due.
    assert not board.due(after + timedelta(hours=1))
    assert board.tick(after + timedelta(hours=1)).empty


def test_tick_judges_with_the_facts_the_feed_saw() -> None:
    """Re-judging on a deadline never asks a process table (the board has none)."""
    doc = {"issueNumber": 7, "runId": 1, "acquiredAt": iso(ago(590.0)), "pid": LIVE}
    git = decode_file(lock_file("/r/.GITCLAW/state/locks/7.lock", doc))
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(git)))
    seen = board.entries[git.id].facts
    assert seen is not None and seen.alive
    applied = board.tick(later(10))  # gitclaw: stale at 600 s, inclusive
    assert applied.changed == [git.id]
    verdict = board.verdict(git.id)
    assert verdict.codes == ("too_old",)
    assert (verdict.alive, verdict.process) == (True, seen)
    assert board.entries[git.id].facts is seen


def test_a_dead_holders_bare_facts_are_not_kept_and_judge_the_same() -> None:
    """A pid that is not running leaves facts that say only that: the entry keeps
    none (the verdict tells it), and a deadline's re-judging reaches what judging
    with them would."""
    git = generic("/r/run/daemon.pid", DEAD)
    (entry,) = judge([git], StaticProcesses(), NOW, LOCAL_HOST)
    assert entry.verdict.codes == ("holder_dead",) and entry.verdict.alive is False
    assert entry.facts is None
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, entry))
    board.tick(later(10))
    back = NOW - timedelta(seconds=30)  # the clock stepped back: every lock judged again
    board.tick(back)
    (again,) = judge([git], StaticProcesses(), back, LOCAL_HOST)
    assert same(board.entries[git.id], again)
    assert board.verdict(git.id).process == again.verdict.process
    # Facts that say more than "not running" are kept.
    (live,) = judge([git], StaticProcesses(alive(DEAD)), NOW, LOCAL_HOST)
    assert live.facts == alive(DEAD)


def test_a_newer_sighting_replaces_the_deadline() -> None:
    board = late_board()
    beat = later(300)
    board.apply(delta(FILES, *judged(tower("deploy-app", heartbeat_ago=0.0, at=beat), at=beat)))
    assert board.entries[LATE.id].verdict.next_change_at == later(600)  # late then
    # The old deadline passes: the lock beat since, nothing changes.
    assert board.due(DEADLINE + timedelta(seconds=1))  # the old one is still queued...
    applied = board.tick(DEADLINE + timedelta(seconds=1))
    assert applied.empty  # ...and skipped
    assert board.verdict(LATE.id).codes == ()
    assert board.tick(later(601)).changed == [LATE.id]
    assert board.verdict(LATE.id).codes == ("heartbeat_late",)


def test_a_removed_lock_has_no_deadline() -> None:
    board = late_board()
    board.apply(delta(FILES, removed=(LATE.id,)))
    assert board.tick(DEADLINE + timedelta(seconds=1)).empty


def test_tick_at_the_very_deadline() -> None:
    board = late_board()
    applied = board.tick(DEADLINE)
    assert board.verdict(LATE.id).state is State.ACTIVE  # stale only past the ttl
    assert applied.empty
    assert not board.due(DEADLINE)


def test_verdict_at_judges_again_from_the_seen_facts() -> None:
    board = late_board()
    shown = board.verdict(LATE.id)
    fresh = board.verdict_at(LATE.id, DEADLINE + timedelta(seconds=60))
    assert fresh.state is State.STALE and fresh.codes == ("heartbeat_expired",)
    assert fresh.age_seconds == pytest.approx(shown.age_seconds + 560)  # type: ignore[operator]
    assert board.verdict(LATE.id) is shown  # the board itself is untouched
    now_again = board.verdict_at(LATE.id, NOW)
    assert now_again == board.entries[LATE.id].verdict


def test_verdict_at_keeps_scope_conflicts_of_live_locks() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(FIX, REFACTOR)))
    fresh = board.verdict_at(FIX.id, later(60))
    assert fresh.codes == ("scope_conflict",)
    assert fresh.conflicts_with == (REFACTOR.id,)
    assert fresh.age_seconds == pytest.approx(180.0)


def test_verdict_at_drops_conflicts_of_a_lock_no_longer_live() -> None:
    # A scoped lock that time alone makes stale (no shipped format has one yet).
    aging = refiled(FIX, {"policy": StalenessPolicy(pid_liveness=True, max_age=300.0)})
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(aging, REFACTOR)))
    assert board.verdict(FIX.id).codes == ("scope_conflict",)
    fresh = board.verdict_at(FIX.id, later(200))  # 320 s old
    assert fresh.state is State.STALE
    assert fresh.codes == ("too_old",) and fresh.conflicts_with == ()


# -- scope conflicts -------------------------------------------------------------------


def test_scope_conflicts_appear_and_go_with_their_locks() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(FIX, DOCS)))
    assert board.conflicts() == []
    applied = board.apply(delta(FILES, *judged(REFACTOR)))
    assert applied.added == [REFACTOR.id] and applied.changed == [FIX.id]
    assert applied.events == [e for e in applied.events if e.kind is EventKind.APPEARED]
    assert board.conflicts() == [(FIX.id, (REFACTOR.id,)), (REFACTOR.id, (FIX.id,))]
    assert board.verdict(FIX.id).codes == ("scope_conflict",)
    assert "refactor" in board.verdict(FIX.id).reasons[0].message
    assert board.entries[FIX.id].verdict.codes == ()  # the feed's verdict is left alone
    assert board.verdict(DOCS.id).codes == ()

    gone = board.apply(delta(FILES, removed=(REFACTOR.id,)))
    assert gone.removed == [REFACTOR.id] and gone.changed == [FIX.id]
    assert board.conflicts() == []
    assert board.verdict(FIX.id).codes == ()


def test_a_lock_that_dies_leaves_its_conflict() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(FIX, REFACTOR)))
    applied = board.apply(delta(FILES, *judged(REFACTOR, living=())))
    assert sorted(applied.changed) == sorted([FIX.id, REFACTOR.id])
    assert board.conflicts() == []
    assert board.verdict(REFACTOR.id).codes == ("holder_dead",)


def test_scope_conflicts_span_feeds() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full("a", *judged(FIX)))
    board.apply(full("b", *judged(REFACTOR)))
    assert [lock_id for lock_id, _ in board.conflicts()] == [FIX.id, REFACTOR.id]
    board.apply(full("b"))
    assert board.conflicts() == []


def test_counts_follow_scope_conflicts_without_double_counting() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(FIX, REFACTOR, DOCS)))
    board.apply(delta(FILES, removed=(REFACTOR.id,)))
    assert board.counts[State.ACTIVE] == 2
    assert sum(board.counts.values()) == len(board)


# -- counts and samples ----------------------------------------------------------------


def test_counts_and_samples() -> None:
    board = Board(LOCAL_HOST)
    stale = loop("dead-loop", [f"{PROJECT}/x"], pid=DEAD, file="dead")
    broken = generic("/srv/run/broken.lock", b"\x00")
    board.apply(full(FILES, *judged(DEPLOY, QUIET, stale, broken)))
    board.apply(full(PG, *judged(*pg(HOLDER_ROW, waiter_row(4243)))))
    expected = dict.fromkeys(State, 0) | {
        State.ACTIVE: 3,
        State.STALE: 1,
        State.INVALID: 1,
        State.WAITING: 1,
    }
    assert board.counts == expected
    taken = board.sample(NOW)
    assert (taken.at, taken.active, taken.stale, taken.waiting, taken.invalid) == (
        NOW, 3, 1, 1, 1,
    )  # fmt: skip
    board.apply(full(PG))
    board.apply(delta(FILES, removed=(stale.id,)))
    assert board.counts == {
        State.ACTIVE: 2,
        State.STALE: 0,
        State.INVALID: 1,
        State.WAITING: 0,
        State.FREE: 0,
        State.UNKNOWN: 0,
    }
    board.sample(later(1))
    assert [s.active for s in board.samples] == [3, 2]


def test_samples_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(board_module, "SAMPLES_KEPT", 3)
    board = Board(LOCAL_HOST)
    for i in range(5):
        board.sample(later(i))
    assert [s.at for s in board.samples] == [later(2), later(3), later(4)]


# -- blocking trees --------------------------------------------------------------------


def test_blocking_trees_are_built_again_only_after_a_postgres_change() -> None:
    board = Board(LOCAL_HOST)
    assert board.blocking_trees() == {}
    board.apply(full(PG, *judged(*pg(HOLDER_ROW, waiter_row(4243)))))
    generation = board.waits_generation
    trees = board.blocking_trees()
    (root,) = trees[SERVER].roots
    assert (root.id, root.direct) == (4242, 1)
    assert board.blocking_trees() is trees

    board.apply(full(FILES, *judged(DEPLOY, FIX)))  # files only
    board.apply(full(PG, *judged(*pg(HOLDER_ROW, waiter_row(4243)))))  # the same picture
    assert board.waits_generation == generation
    assert board.blocking_trees() is trees

    board.apply(full(PG, *judged(*pg(HOLDER_ROW, waiter_row(4243), waiter_row(4244)))))
    assert board.waits_generation > generation
    grown = board.blocking_trees()
    assert grown is not trees and grown[SERVER].roots[0].direct == 2

    board.apply(full(PG))
    assert board.blocking_trees() == {}


# -- errors ----------------------------------------------------------------------------


def error(path: str, message: str = "permission denied") -> ScanError:
    return ScanError(path, message)


def test_a_full_picture_replaces_the_feeds_errors() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, errors=(error("/a"), error("/b"))))
    board.apply(full("other", errors=(error("/elsewhere"),)))
    board.apply(full(FILES, errors=(error("/c"),)))
    assert board.errors == {FILES: (error("/c"),), "other": (error("/elsewhere"),)}
    assert board.all_errors() == [error("/c"), error("/elsewhere")]


def test_a_rescan_delta_replaces_the_feeds_errors() -> None:
    board = Board(LOCAL_HOST)
    board.apply(delta(FILES, errors=(error("/a"),)))
    board.apply(delta(FILES, errors=(error("/b"),), all_errors=True))
    assert board.all_errors() == [error("/b")]
    board.apply(delta(FILES, all_errors=True))
    assert board.all_errors() == []


def test_a_delta_settles_the_paths_it_names() -> None:
    quiet_path = "/srv/run/quiet.lock"
    board = Board(LOCAL_HOST)
    errors = (error(quiet_path), error("/srv/run/gone.lock"), error("/srv/run/other.lock"))
    board.apply(full(FILES, errors=errors))
    board.apply(delta(FILES, *judged(QUIET)))  # read at last
    assert [e.path for e in board.all_errors()] == ["/srv/run/gone.lock", "/srv/run/other.lock"]
    board.apply(delta(FILES, removed=("file:/srv/run/gone.lock",)))  # gone
    assert [e.path for e in board.all_errors()] == ["/srv/run/other.lock"]
    board.apply(delta(FILES, errors=(error("/srv/run/other.lock", "I/O error"),)))  # anew
    assert board.all_errors() == [error("/srv/run/other.lock", "I/O error")]
    board.apply(delta(FILES))  # says nothing about it
    assert board.all_errors() == [error("/srv/run/other.lock", "I/O error")]


def test_a_directory_looked_at_again_settles_its_error() -> None:
    board = Board(LOCAL_HOST)
    errors = (error("/srv/run/sub"), error("/srv/run/sub/a.lock"), error("/srv/run/subway"))
    board.apply(full(FILES, errors=(*errors, error("/srv/other"))))
    board.apply(delta(FILES, looked=("/srv/run/sub",)))  # listed again, fine now
    # What was under it too (a file that failed: read now, or gone with its error).
    assert board.all_errors() == [error("/srv/run/subway"), error("/srv/other")]
    # Looked at and failing again in the same look: the error stays.
    board.apply(delta(FILES, errors=(error("/srv/other"),), looked=("/srv/other",)))
    assert board.all_errors() == [error("/srv/run/subway"), error("/srv/other")]


@pytest.mark.parametrize("fine_last", [True, False])
def test_merged_looks_settle_as_applied_one_by_one(fine_last: bool) -> None:
    failed = delta(FILES, errors=(error("/srv/run/sub"),))
    fine = delta(FILES, looked=("/srv/run/sub",))
    first, then = (failed, fine) if fine_last else (fine, failed)
    one_by_one, merged = Board(LOCAL_HOST), Board(LOCAL_HOST)
    for board in (one_by_one, merged):
        board.apply(full(FILES, errors=(error("/srv/run/sub", "old"),)))
    one_by_one.apply(first)
    one_by_one.apply(then)
    merged.apply(merge(first, then))
    assert merged.all_errors() == one_by_one.all_errors()
    assert merged.all_errors() == ([] if fine_last else [error("/srv/run/sub")])


# -- Applied ---------------------------------------------------------------------------


def test_applied_empty_and_merge() -> None:
    assert Applied().empty
    only_events = Applied(events=[Event(NOW, EventKind.BROKEN, None, "x", "file")])
    assert only_events.empty  # events alone redraw no row
    for field in ("added", "changed", "removed"):
        assert not Applied(**{field: ["id"]}).empty  # type: ignore[arg-type]
    assert not Applied(statuses_changed=True).empty

    merged = Applied(added=["a"], events=only_events.events[:])
    merged.merge(Applied(changed=["b"], removed=["c"], statuses_changed=True))
    merged.merge(Applied(added=["d"]))
    assert (merged.added, merged.changed, merged.removed) == (["a", "d"], ["b"], ["c"])
    assert merged.statuses_changed and len(merged.events) == 1


def test_generation_moves_with_changes() -> None:
    board = Board(LOCAL_HOST)
    before = board.generation
    board.apply(full(FILES, *judged(DEPLOY)))
    assert board.generation > before


def test_generation_stays_when_nothing_changes() -> None:
    board = Board(LOCAL_HOST)
    board.apply(full(FILES, *judged(DEPLOY)))
    before = board.generation
    assert board.apply(delta(FILES, *judged(DEPLOY))).empty
    assert board.generation == before


def test_tick_just_past_the_deadline_turns_the_lock_stale() -> None:
    board = late_board()
    board.tick(DEADLINE)
    applied = board.tick(DEADLINE + timedelta(microseconds=1))
    assert applied.changed == [LATE.id]
    assert board.verdict(LATE.id).state is State.STALE
    assert [str(e.kind) for e in applied.events] == ["became_stale"]


def test_the_clock_going_back_judges_every_lock_again() -> None:
    """NTP or an operator steps the clock back: a lock judged stale at the later
    time is active again at the earlier one, with its deadline ahead once more."""
    board = late_board()
    after = DEADLINE + timedelta(hours=2)
    board.tick(after)
    assert board.verdict(LATE.id).state is State.STALE
    before = DEADLINE - timedelta(minutes=1)
    assert board.due(before)
    applied = board.tick(before)
    assert applied.changed == [LATE.id]
    verdict = board.verdict(LATE.id)
    assert verdict.state is State.ACTIVE
    assert verdict.next_change_at == DEADLINE
    # And forward again: the deadline passes as it did the first time.
    assert board.tick(DEADLINE + timedelta(seconds=1)).changed == [LATE.id]
    assert board.verdict(LATE.id).state is State.STALE


def test_a_tick_a_little_earlier_than_the_last_is_no_clock_step() -> None:
    board = late_board()
    board.tick(DEADLINE - timedelta(seconds=10))
    assert not board.due(DEADLINE - timedelta(seconds=10.5))
