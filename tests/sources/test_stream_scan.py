"""The first scan, streamed: the scanner's chunks, forked workers handing back
pieces as they go (`fanout.Streamed`), and the file feed emitting change sets in
batches as its first scan proceeds, with the scanner `ls` uses.

Feeds run with their rescans an hour apart, so what comes is the first scan's.
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from lockwatch import fanout
from lockwatch.fanout import Streamed
from lockwatch.model.board import Board
from lockwatch.sources.feed import Coalescer, Differ
from lockwatch.sources.files import watch
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.pieces import CHUNK_FIRST
from lockwatch.sources.files.scanner import Candidate, partition, scan, scan_chunks
from lockwatch.sources.files.watch import FileFeed
from tests.sources.test_file_feed import ME, Seen, body, feed_on, never_running_pid, until, write
from tests.unit.test_board_bounds import entry

T = TypeVar("T")


def tree(root: Path, count: int) -> set[str]:
    """`count` lock files, ten to a directory; their ids."""
    ids = set()
    for n in range(count):
        path = root / f"d{n // 10:03d}" / f"{n}.lock"
        write(path, body(f"op-{n}"))
        ids.add(f"file:{path}")
    return ids


def all_of(pieces: list[list[T]]) -> list[T]:
    return [item for piece in pieces for item in piece]


# -- the scanner's chunks --------------------------------------------------------------------


def test_chunks_grow_from_first_to_most_and_hold_every_lock_once(tmp_path: Path) -> None:
    ids = tree(tmp_path, 200)
    write(tmp_path / "notes.txt", "not a lock")
    chunks = list(scan_chunks([str(tmp_path)], first=8, most=32))
    sizes = [len(chunk.locks) for chunk in chunks]
    # A chunk closes at the first directory that fills it (ten locks a directory).
    assert sizes[0] >= 8 and sizes[0] < 8 + 10
    assert all(size < 32 + 10 for size in sizes)
    assert max(sizes) >= 32
    found = [lock.id for chunk in chunks for lock in chunk.locks]
    assert sorted(found) == sorted(ids)
    assert sorted(found) == [lock.id for lock in scan([str(tmp_path)]).locks]


def test_chunks_take_named_files_and_report_errors(tmp_path: Path) -> None:
    named = tmp_path / "named.pid"
    write(named, str(ME))
    missing = str(tmp_path / "gone")
    areas, errors = partition([str(named), missing], 1)
    assert [e.path for e in errors] == [missing]
    (chunk,) = scan_chunks(areas[0], first=1, most=1)
    assert [lock.path for lock in chunk.locks] == [str(named)]
    (alone,) = scan_chunks([Candidate(str(named), False)], first=4, most=4)
    assert [lock.path for lock in alone.locks] == [str(named)]


def test_an_empty_tree_gives_no_chunk(tmp_path: Path) -> None:
    assert list(scan_chunks([str(tmp_path)], first=4, most=4)) == []


# -- Streamed: pieces as each worker makes them -----------------------------------------


def pieces_of(n: int) -> Iterator[list[str]]:
    for i in range(3):
        yield [f"{n}.{i}"]


def drain(stream: Streamed[T]) -> list[T]:
    out: list[T] = []
    while (taken := stream.take(5.0)) is not None:
        out.extend(taken)
    return out


def test_every_piece_of_every_slice_comes_from_the_children() -> None:
    parent = os.getpid()

    def work(n: int) -> Iterator[list[str]]:
        for i in range(3):
            yield [f"{n}.{i}", str(os.getpid() != parent)]

    stream = Streamed([0, 1, 2], work)
    got = drain(stream)
    assert stream.done
    assert sorted(piece[0] for piece in got) == [f"{n}.{i}" for n in range(3) for i in range(3)]
    assert all(piece[1] == "True" for piece in got)  # made in children, taken here
    # Each slice's pieces come in the order its worker made them.
    for n in range(3):
        assert [p[0] for p in got if p[0].startswith(f"{n}.")] == [f"{n}.{i}" for i in range(3)]


def test_workers_run_without_the_cyclic_collector_and_the_parent_keeps_it() -> None:
    # A forked worker makes and drops acyclic objects and exits soon; a collection
    # there only walks (and copies) the heap it inherited.
    def work(n: int) -> Iterator[bool]:
        yield gc.isenabled()

    was = gc.isenabled()
    gc.enable()  # whatever an earlier in-process `ls` in this worker left
    try:
        assert drain(Streamed([0, 1], work)) == [False, False]
        assert gc.isenabled()
    finally:
        if not was:
            gc.disable()


def test_without_fork_the_slices_are_worked_here_a_piece_per_take() -> None:
    stream = Streamed([0, 1], pieces_of, fork=False)
    assert stream.take() == [["0.0"]]
    assert stream.take() == [["0.1"]]
    assert all_of(drain(stream)) == ["0.2", "1.0", "1.1", "1.2"]
    assert stream.take() is None


def test_a_child_that_dies_mid_way_has_its_slice_done_here() -> None:
    parent = os.getpid()

    def dies(n: int) -> Iterator[list[str]]:
        yield [f"{n}.first"]
        if os.getpid() != parent and n == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        yield [f"{n}.last"]

    got = all_of(drain(Streamed([0, 1], dies)))
    # At least once: slice 1's first piece may come twice (from the child, then here).
    assert set(got) == {"0.first", "0.last", "1.first", "1.last"}
    assert got.count("1.last") == 1


def test_an_error_in_the_work_surfaces_in_the_parent() -> None:
    def broken(n: int) -> Iterator[list[str]]:
        yield [str(n)]
        raise ValueError(f"bad slice {n}")

    stream = Streamed([0], broken)
    with pytest.raises(ValueError, match="bad slice 0"):
        drain(stream)
    stream.close()


def test_close_stops_and_reaps_children_still_at_work(forked: list[int]) -> None:
    def endless(n: int) -> Iterator[list[str]]:
        while True:
            yield ["x" * 100_000]  # more than a pipe holds: blocked until read

    stream = Streamed([0, 1], endless)
    assert stream.take(5.0)
    stream.close()
    assert stream.done and stream.take() is None
    assert len(forked) == 2
    for pid in forked:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def exited(pid: int, within: float) -> bool:
    """Whether child `pid` exits within `within` seconds, left unreaped (the
    stream reaps it): a bound for what, without the fix, never happens."""
    done = threading.Event()

    def wait() -> None:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done.wait(within)


def test_read_ahead_lets_children_finish_while_the_parent_takes_nothing(
    forked: list[int],
) -> None:
    def big(n: int) -> Iterator[list[str]]:
        for i in range(40):
            yield [f"{n}.{i}", "x" * 100_000]  # 4 MB in all: four pipes' worth

    stream = Streamed([0, 1], big)
    stream.read_ahead()
    # Without the read-ahead, a child blocks on its full pipe until take().
    assert all(exited(pid, 30.0) for pid in forked)
    got = drain(stream)
    assert stream.done
    for n in range(2):
        assert [p[0] for p in got if p[0].startswith(f"{n}.")] == [f"{n}.{i}" for i in range(40)]
    assert all(p[1] == "x" * 100_000 for p in got)


def test_pieces_read_ahead_are_handed_over_about_most_bytes_at_a_time(
    forked: list[int],
) -> None:
    def big(n: int) -> Iterator[list[str]]:
        for i in range(20):
            yield [f"{n}.{i}", "x" * 100_000]

    stream = Streamed([0], big)
    stream.read_ahead()
    assert exited(forked[0], 30.0)
    first = stream.take(5.0, most=1)
    assert first is not None
    assert all_of(first) == ["0.0", "x" * 100_000]  # the first piece alone
    rest = drain(stream)
    assert [p[0] for p in rest] == [f"0.{i}" for i in range(1, 20)]


def test_the_read_ahead_keeps_a_bounded_amount(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fanout, "_AHEAD_BYTES", 300_000)

    def big(n: int) -> Iterator[list[str]]:
        for i in range(40):
            yield [f"{n}.{i}", "x" * 100_000]

    stream = Streamed([0], big)
    stream.read_ahead()
    assert stream.ahead is not None
    stream.ahead.join(30.0)
    assert not stream.ahead.is_alive()  # it stopped at the bound, the child waits
    assert 300_000 <= sum(len(b) for b in stream._buffers.values()) < 300_000 + (1 << 20)
    got = drain(stream)  # and goes on once taken from
    assert [p[0] for p in got] == [f"0.{i}" for i in range(40)]


def test_a_child_that_dies_after_its_pipe_was_read_ahead_has_its_slice_done_here(
    forked: list[int],
) -> None:
    parent = os.getpid()

    def dies(n: int) -> Iterator[list[str]]:
        yield [f"{n}.first"]
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        yield [f"{n}.last"]

    stream = Streamed([0], dies)
    stream.read_ahead()
    assert exited(forked[0], 30.0)
    got = all_of(drain(stream))
    assert got.count("0.last") == 1 and "0.first" in got
    assert stream.done


def test_frozen_slotted_dataclasses_travel_as_constructor_arguments() -> None:
    original = entry(3)  # an Entry: a Lock, a Verdict, process facts, all slotted
    (copy,) = all_of(drain(Streamed([0], lambda _: iter([[original]]))))
    assert copy == original and copy is not original
    assert copy.lock.content == original.lock.content  # not compared by ==
    assert fanout._arguments(type(original)) is not None
    assert fanout._arguments(Seen) is None  # not a dataclass: pickled the usual way


# -- the feed's first scan ----------------------------------------------------------------


async def first_scan(feed: FileFeed) -> Seen:
    seen = Seen()
    task = asyncio.create_task(feed.run(seen))
    try:
        await until(lambda: any(c.statuses for c in seen.changes), "the first scan's end")
    finally:
        await feed.close()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return seen


async def test_the_first_scan_comes_in_batches_and_ends_with_the_statuses(
    tmp_path: Path,
) -> None:
    ids = tree(tmp_path, 400)
    seen = await first_scan(feed_on(tmp_path))
    changes = seen.changes
    assert len(changes) >= 2
    first, last = changes[0], changes[-1]
    # The first batch goes once CHUNK_FIRST locks are read, not after the whole tree.
    assert len(first.upserts) >= CHUNK_FIRST and len(first.upserts) < len(ids)
    assert first.statuses == () and not first.all_errors
    assert [s.state for s in last.statuses] == ["watching"] and last.all_errors
    assert all(not c.statuses for c in changes[:-1])
    assert set(seen.current) == ids
    upserted = [e.lock.id for c in changes for e in c.upserts]
    assert len(upserted) == len(set(upserted))  # each lock sent once


async def test_a_prefetched_scan_forks_and_finds_what_a_thread_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forked: list[int]
) -> None:
    ids = tree(tmp_path, 300)
    monkeypatch.setattr(watch, "_single_threaded", lambda: True)
    prefetching = feed_on(tmp_path, jobs=2)
    prefetching.prefetch()
    assert forked  # the workers run from here, before the feed does
    by_fork = await first_scan(prefetching)
    by_thread = await first_scan(feed_on(tmp_path))
    assert set(by_fork.current) == set(by_thread.current) == ids
    for lock_id, judged in by_thread.current.items():
        assert by_fork.current[lock_id].lock == judged.lock
        assert by_fork.current[lock_id].verdict.state is judged.verdict.state


def test_no_prefetch_while_other_threads_run(tmp_path: Path) -> None:
    tree(tmp_path, 3)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        feed = feed_on(tmp_path)
        feed.prefetch()  # a fork now would copy only this thread
        assert feed._first is None
    finally:
        stop.set()
        other.join()


async def test_the_feed_keeps_decoded_locks_only_where_the_kernel_changed_them(
    tmp_path: Path,
) -> None:
    """A lock file whose kernel lock is held by another process than the one it
    names: its decoded form is kept (to judge it again as the kernel's word
    changes); the others are rebuilt from what is shown, not kept twice."""
    tree(tmp_path, 20)
    held = tmp_path / "held.lock"
    write(held, json.dumps({"pid": never_running_pid()}))
    with held.open("rb") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        feed = feed_on(tmp_path)
        seen = await first_scan(feed)
        shown = seen.current[f"file:{held}"].lock
        if facts_of(shown).evidence is None:
            pytest.skip("/proc/locks cannot be read here")
        assert shown.holder.pid == os.getpid()
        assert set(feed.decoded.kept()) == {shown.id}
        assert feed.decoded.kept()[shown.id].holder.pid == never_running_pid()
        for judged in seen.current.values():
            assert facts_of(feed.decoded.of(judged.lock)).evidence is None


async def test_a_rescan_sends_only_what_changed(tmp_path: Path) -> None:
    ids = tree(tmp_path, 150)
    feed = feed_on(tmp_path)
    seen = await first_scan(feed)
    board = Board("h")
    for change in seen.changes:
        board.apply(change)
    write(tmp_path / "d000" / "0.lock", body("rewritten"))
    (tmp_path / "d001" / "10.lock").unlink()
    again = Seen()
    await feed.rescan(again)
    (change,) = again.changes
    assert [e.lock.id for e in change.upserts] == [f"file:{tmp_path}/d000/0.lock"]
    assert change.removed == (f"file:{tmp_path}/d001/10.lock",)
    board.apply(change)
    assert set(board.entries) == ids - {f"file:{tmp_path}/d001/10.lock"}


async def test_a_rescan_asked_for_from_outside_comes_after_what_the_feed_holds_back(
    tmp_path: Path,
) -> None:
    """A change set the running feed holds back (its window not over) goes before
    a rescan told another way: else that rescan's removal of a lock can come before
    the held-back upsert of it, which then stays on screen with nobody to remove it."""
    from tests.sources.test_coalescer import FakeLoop, change, waiting

    write(tmp_path / "a.lock", body("a"))
    feed = feed_on(tmp_path)
    board_seen = Seen()
    feed._coalescer = held_back = Coalescer(board_seen, 10.0, loop=FakeLoop())
    held_back(change(0, 1))  # goes at once
    held_back(change(1, 2))  # held back: within the window
    assert waiting(held_back) is not None and len(board_seen.changes) == 1
    await feed.rescan(board_seen)
    assert waiting(held_back) is None
    assert [c.upserts[0].lock.id for c in board_seen.changes[:2]] == [
        c.upserts[0].lock.id for c in (change(0, 1), change(1, 2))
    ]
    assert board_seen.changes[2].all_errors  # the rescan's, last


def test_differ_changed_leaves_the_picture_as_it_is() -> None:
    differ = Differ()
    differ.full([entry(1), entry(2)])
    before = dict(differ.entries)
    assert differ.changed([entry(1), entry(2, 1), entry(3)]) == [entry(2, 1), entry(3)]
    assert differ.entries == before


def test_streamed_wait_is_bounded() -> None:
    def slow(n: int) -> Iterator[list[str]]:
        time.sleep(0.5)
        yield [str(n)]

    stream = Streamed([0], slow)
    started = time.monotonic()
    assert stream.take(0.01) == []  # nothing yet: back without it
    assert time.monotonic() - started < 0.4
    assert all_of(drain(stream)) == ["0"]
