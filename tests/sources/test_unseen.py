"""A lock that cannot be read again is kept as last seen and judged unknown: which
errors hide a lock (not a file gone), which locks they hide, and that judging it
again (a deadline, the clock stepping back, a detail view) keeps it unknown.

The feed end to end, as an unprivileged user whose directories are closed to it,
is tests/sources/test_watch_hostile.py's."""

from __future__ import annotations

from datetime import timedelta

from lockwatch.clock import FrozenClock
from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet, Entry, judge
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.status import ScanError
from lockwatch.model.verdict import State, evaluate
from lockwatch.sources.files.facts import FileFacts
from lockwatch.sources.files.policy import StalenessPolicy
from lockwatch.sources.files.unseen import unreadable
from tests.conftest import LOCAL_HOST, NOW, alive

PID = 100
PROCESSES = StaticProcesses(alive(PID))
# Stale 60 s after it was taken: a verdict with a deadline.
POLICY = StalenessPolicy(pid_liveness=True, max_age=60.0)


def lock(path: str, **changes: object) -> Lock:
    fields: dict[str, object] = {
        "id": f"file:{path}",
        "source": "file",
        "format": "test",
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "holder": Holder(pid=PID),
        "acquired_at": NOW - timedelta(seconds=10),
        "facts": FileFacts(POLICY),
        "sha256": "ab" * 32,
    }
    fields.update(changes)
    return Lock(**fields)  # type: ignore[arg-type]


def known(*paths: str) -> dict[str, Entry]:
    entries = judge([lock(p) for p in paths], PROCESSES, NOW, LOCAL_HOST)
    return {entry.lock.id: entry for entry in entries}


def denied(path: str, code: str = "permission_denied") -> ScanError:
    return ScanError(path, "Permission denied", code)


def kept(entries: dict[str, Entry], gone: list[str], errors: list[ScanError]) -> dict[str, Entry]:
    return unreadable(entries, gone, errors, PROCESSES, NOW, LOCAL_HOST)


def test_locks_under_a_closed_directory_are_kept_unknown() -> None:
    entries = known("/r/sub/a.lock", "/r/sub/deep/b.lock", "/r/other/c.lock")
    out = kept(entries, list(entries), [denied("/r/sub")])
    assert sorted(out) == ["file:/r/sub/a.lock", "file:/r/sub/deep/b.lock"]
    for entry in out.values():
        assert entry.verdict.state is State.UNKNOWN
        assert [r.code for r in entry.verdict.reasons] == ["unreadable"]
        assert "/r/sub" in entry.verdict.reasons[0].message
        assert entry.verdict.age_seconds == 10.0
    # All else as it was read: the lock is its last sighting, with the reason added.
    entry = out["file:/r/sub/a.lock"]
    assert entry.lock.sha256 == "ab" * 32 and entry.lock.holder.pid == PID


def test_a_sibling_whose_name_starts_alike_is_not_under_it() -> None:
    entries = known("/r/sub/a.lock", "/r/subway/b.lock")
    assert sorted(kept(entries, list(entries), [denied("/r/sub")])) == ["file:/r/sub/a.lock"]


def test_a_lock_file_that_cannot_be_read_is_kept_though_not_told_gone() -> None:
    entries = known("/r/a.lock", "/r/b.lock")
    out = kept(entries, [], [denied("/r/a.lock")])
    assert list(out) == ["file:/r/a.lock"]
    assert "cannot read it now" in out["file:/r/a.lock"].verdict.reasons[0].message


def test_an_input_output_error_cannot_tell_either() -> None:
    entries = known("/r/a.lock")
    assert list(kept(entries, list(entries), [denied("/r", "unreadable")])) == ["file:/r/a.lock"]


def test_a_place_gone_or_a_root_not_followed_hides_nothing() -> None:
    entries = known("/r/a.lock")
    for code in ("not_found", "moved"):
        assert kept(entries, list(entries), [denied("/r", code)]) == {}
    # Nor does an error elsewhere, nor a lock nobody knew.
    assert kept(entries, list(entries), [denied("/elsewhere")]) == {}
    assert kept({}, ["file:/r/a.lock"], [denied("/r")]) == {}


def test_a_lock_kept_already_is_the_same_entry_again() -> None:
    entries = known("/r/a.lock")
    first = kept(entries, list(entries), [denied("/r")])
    again = kept(first, list(first), [denied("/r")])
    assert again["file:/r/a.lock"] is first["file:/r/a.lock"]


def test_judged_again_it_stays_unknown() -> None:
    entries = known("/r/a.lock")
    unseen = kept(entries, list(entries), [denied("/r")])["file:/r/a.lock"]
    board = Board(LOCAL_HOST)
    board.apply(ChangeSet("files", NOW, upserts=tuple(entries.values())))
    assert board.verdict("file:/r/a.lock").next_change_at is not None  # stale at 60 s
    board.apply(ChangeSet("files", NOW, upserts=(unseen,)))
    later = NOW + timedelta(minutes=5)
    board.tick(later)  # past the deadline the readable lock had
    assert board.verdict("file:/r/a.lock").state is State.UNKNOWN
    board.tick(NOW - timedelta(hours=1))  # the clock stepped back: all judged again
    assert board.verdict("file:/r/a.lock").state is State.UNKNOWN
    shown = board.verdict_at("file:/r/a.lock", later)
    assert shown.state is State.UNKNOWN and shown.age_seconds == 310.0
    # Its holder's death says nothing either: the file may name another by now.
    dead = evaluate(unseen.lock, StaticProcesses(), FrozenClock(later), LOCAL_HOST)
    assert dead.state is State.UNKNOWN and dead.alive is None
