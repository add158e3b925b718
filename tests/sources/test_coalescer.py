"""The Coalescer: a feed's change sets go out at most once per window, merged,
none lost. Time is a fake loop's: the test moves it and fires the timer itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta

from lockwatch.model.board import Board
from lockwatch.model.changes import ChangeSet
from lockwatch.model.status import SourceStatus
from lockwatch.sources.feed import Coalescer
from tests.conftest import LOCAL_HOST, NOW
from tests.unit.test_board_bounds import FEED, entry, lock_id

WINDOW = 0.25
WATCHING = (SourceStatus("file", "/srv/run", "watching"),)
POLLING = (SourceStatus("file", "/srv/run", "polling", reason="out of inotify watches"),)


@dataclass
class Handle:
    when: float
    callback: Callable[[], object]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeLoop:
    now: float = 100.0
    timers: list[Handle] = field(default_factory=list)

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], object], /) -> Handle:
        handle = Handle(when, callback)
        self.timers.append(handle)
        return handle

    def advance(self, seconds: float) -> None:
        """Time moves on; the timers due by then fire, in order."""
        self.now += seconds
        for handle in sorted(self.timers, key=lambda h: h.when):
            if handle.when <= self.now and not handle.cancelled:
                handle.cancelled = True
                handle.callback()


def change(
    step: int,
    *upserts: int,
    removed: tuple[int, ...] = (),
    statuses: tuple[SourceStatus, ...] = (),
) -> ChangeSet:
    return ChangeSet(
        FEED,
        NOW + timedelta(seconds=step),
        statuses,
        upserts=tuple(entry(n, step) for n in upserts),
        removed=tuple(lock_id(n) for n in removed),
    )


def waiting(emit: Coalescer) -> ChangeSet | None:
    return emit.waiting


def coalescer() -> tuple[Coalescer, FakeLoop, list[ChangeSet]]:
    loop = FakeLoop()
    sent: list[ChangeSet] = []
    return Coalescer(sent.append, WINDOW, loop=loop), loop, sent


def test_a_change_after_a_quiet_spell_goes_at_once() -> None:
    emit, loop, sent = coalescer()
    emit(change(1, 1))
    assert len(sent) == 1
    loop.advance(WINDOW)
    emit(change(2, 2))
    assert len(sent) == 2 and waiting(emit) is None


def test_a_burst_goes_as_one_change_set_when_the_window_ends() -> None:
    emit, loop, sent = coalescer()
    emit(change(1, 1))  # at once
    for step in range(2, 12):  # ten more within the window
        loop.advance(0.01)
        emit(change(step, step, removed=(step - 1,) if step % 3 == 0 else ()))
    assert len(sent) == 1 and waiting(emit) is not None
    loop.advance(WINDOW)
    assert len(sent) == 2 and waiting(emit) is None
    one_by_one, merged = Board(LOCAL_HOST), Board(LOCAL_HOST)
    one_by_one.apply(sent[0])
    merged.apply(sent[0])
    for step in range(2, 12):
        one_by_one.apply(change(step, step, removed=(step - 1,) if step % 3 == 0 else ()))
    merged.apply(sent[1])
    assert merged.entries == one_by_one.entries
    assert sent[1].at == NOW + timedelta(seconds=11)


def test_at_most_one_change_set_per_window_under_a_steady_stream() -> None:
    emit, loop, sent = coalescer()
    for step in range(100):  # one every 20 ms for two seconds
        emit(change(step, step % 7))
        loop.advance(0.02)
    loop.advance(WINDOW)
    assert 8 <= len(sent) <= 2.0 / WINDOW + 2
    assert {e.lock.id for c in sent for e in c.upserts} == {lock_id(n) for n in range(7)}


def test_a_status_change_is_never_merged_away() -> None:
    emit, loop, sent = coalescer()
    emit(change(1, 1, statuses=WATCHING))
    emit(change(2, 2, statuses=WATCHING))  # waits
    emit(change(3, 3, statuses=POLLING))  # what waited goes first, with its status
    assert [c.statuses for c in sent] == [WATCHING, WATCHING]
    assert [e.lock.id for e in sent[1].upserts] == [lock_id(2)]
    loop.advance(WINDOW)
    assert [c.statuses for c in sent] == [WATCHING, WATCHING, POLLING]


def test_statuses_that_differ_only_by_their_time_are_merged() -> None:
    emit, loop, sent = coalescer()
    for step in range(1, 6):
        stamped = (replace(WATCHING[0], updated_at=NOW + timedelta(seconds=step)),)
        emit(change(step, step, statuses=stamped))
    loop.advance(WINDOW)
    assert len(sent) == 2
    assert sent[1].statuses[0].updated_at == NOW + timedelta(seconds=5)


def test_flush_sends_what_waits_now() -> None:
    emit, loop, sent = coalescer()
    emit(change(1, 1))
    emit(change(2, 2))
    emit.flush()
    assert len(sent) == 2 and waiting(emit) is None
    assert all(handle.cancelled for handle in loop.timers)
    emit.flush()  # nothing waits: nothing sent
    assert len(sent) == 2


def test_cancel_drops_what_waits_and_sends_nothing_more() -> None:
    emit, loop, sent = coalescer()
    emit(change(0, 1))
    emit(change(1, 2))
    assert waiting(emit) is not None
    emit.cancel()
    loop.advance(WINDOW * 4)
    assert len(sent) == 1 and waiting(emit) is None
