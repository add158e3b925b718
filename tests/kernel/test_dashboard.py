"""The dashboard against locks real libraries hold: the real file feed and the
real kernel feed inside the app (no fakes), and the table, the verdicts and the
Contention view checked against what the library itself says (its own
non-blocking acquire, in a fresh process: `library_says_held`).

Feeds poll fast here (0.2 s) so a change shows quickly; every wait is a bounded
poll (`until`), and no test asserts how long anything took.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets.tree import TreeNode

from lockwatch.clock import SystemClock
from lockwatch.model.verdict import State
from lockwatch.sources.files.watch import FileFeed
from lockwatch.sources.kernel.feed import KernelFeed
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.contention import ContentionTree
from tests.conftest import LOCAL_HOST
from tests.facts_of import KernelFacts
from tests.kernel.conftest import need
from tests.kernel.holders import Holder, Holders, library_says_held
from tests.ui.fakes import make_app, row_text
from tests.ui.fakes import until as until_within

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="kernel locks are read from /proc/locks"
)

SIZE = (120, 36)
WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
FAST = 0.2
HOUR = 3600.0
# Libraries and primitives whose release leaves the lock file behind.
KINDS = ["filelock", "portalocker", "fasteners", "flock_fd", "ofd", "zc_lockfile"]


def live_app(root: Path, *, kernel: bool) -> LockwatchApp:
    feeds: list[Any] = [
        FileFeed([str(root)], host=LOCAL_HOST, rescan_seconds=HOUR, liveness_seconds=FAST)
    ]
    if kernel:
        feeds.append(KernelFeed([str(root)], host=LOCAL_HOST, interval=FAST))
    return make_app(feeds=feeds, clock=SystemClock())


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    """Real processes and real feeds: a longer bound than the fakes need."""
    await until_within(pilot, condition, what, WAIT_S)


def mentions(text: str, pid: int) -> bool:
    """Whether a tree line names `pid` (not a longer pid it begins: the host's
    other waiters show in the tree too)."""
    return re.search(rf"\bpid {pid}\b", text) is not None


def file_id(path: Path) -> str:
    return f"file:{os.path.abspath(path)}"


def state_of(app: LockwatchApp, lock_id: str) -> tuple[State, tuple[str, ...]] | None:
    if lock_id not in app.board:
        return None
    verdict = app.board.verdict(lock_id)
    return verdict.state, verdict.codes


def kernel_rows(app: LockwatchApp, path: Path) -> list[tuple[str, State, int | None]]:
    """(id, state, holder pid) of the kernel's records on `path`."""
    st = path.stat()
    found = []
    for lock_id, entry in app.board.entries.items():
        kernel = entry.lock.facts
        if isinstance(kernel, KernelFacts) and kernel.file.inode == st.st_ino:
            found.append((lock_id, entry.verdict.state, entry.lock.holder.pid))
    return found


def tree_lines(tree: ContentionTree) -> Iterator[tuple[int, str]]:
    """(depth, text) of every line of the Contention view, top to bottom."""
    stack: list[tuple[int, TreeNode[str | None]]] = [
        (0, node) for node in reversed(tree.root.children)
    ]
    while stack:
        depth, node = stack.pop()
        yield depth, str(node.label)
        stack.extend((depth + 1, child) for child in reversed(node.children))


def agrees_with_library(app: LockwatchApp, holder: Holder) -> bool:
    found = state_of(app, file_id(holder.lock_path))
    held = library_says_held(holder.kind.name, holder.path)
    return found is not None and (found[0] is State.ACTIVE) == held


@pytest.mark.parametrize("kind", KINDS)
async def test_the_table_follows_the_kernel(kind: str, holders: Holders, tmp_path: Path) -> None:
    """Held: active, kernel_lock, the holder named. Released while the process
    lives on (or killed): free, dimmed in the table, and the library agrees."""
    need(kind)
    root = tmp_path / "locks"
    holder = holders.start(kind, root / f"{kind}.lock")
    lock = file_id(holder.lock_path)
    app = live_app(root, kernel=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: state_of(app, lock) is not None, "the lock file's row")
        state, codes = state_of(app, lock) or (None, ())
        assert state is State.ACTIVE and "kernel_lock" in codes, (state, codes)
        assert app.board.entries[lock].lock.holder.pid in holder.holder_pids
        assert agrees_with_library(app, holder)
        await pilot.pause()
        row = row_text(app, lock)
        assert row.startswith("  active") and "kernel_lock" in row, row

        if holder.kind.releasable:
            holder.release()
            assert holder.alive
        else:
            holder.kill()
        await until(
            pilot,
            lambda: (state_of(app, lock) or (None,))[0] is State.FREE,
            "the released lock to show free",
        )
        assert "not_held" in app.board.verdict(lock).codes
        assert agrees_with_library(app, holder)
        await pilot.pause()
        row = row_text(app, lock)
        assert row.startswith("  free") and "not_held" in row, row
        # Free is never counted as stale, and `state:free` finds it.
        assert app.board.counts[State.STALE] == 0
        assert app.board.counts[State.FREE] == 1


@pytest.mark.parametrize("kind", ["filelock", "flock_fd", "fasteners"])
async def test_a_blocked_waiter_in_the_table_and_the_contention_view(
    kind: str, holders: Holders, tmp_path: Path
) -> None:
    """--kernel: the holder's record blocks, the waiter's is waiting, and the
    Contention view puts the waiter under its holder. When the holder lets go,
    the waiter holds it, and the file names the waiter."""
    need(kind)
    root = tmp_path / "locks"
    holder = holders.start(kind, root / f"{kind}.lock")
    waiter = holders.start(holder.kind.waiter, holder.lock_path)
    lock = file_id(holder.lock_path)
    app = live_app(root, kernel=True)
    async with app.run_test(size=SIZE) as pilot:

        def waiting() -> list[tuple[str, State, int | None]]:
            return [row for row in kernel_rows(app, holder.lock_path) if row[1] is State.WAITING]

        await until(pilot, lambda: bool(waiting()), "the waiter's kernel record")
        ((waiting_id, _, waiting_pid),) = waiting()
        assert waiting_pid == waiter.pid
        held = [row for row in kernel_rows(app, holder.lock_path) if row[1] is State.ACTIVE]
        assert held and all(pid in holder.holder_pids for _, _, pid in held), held
        assert any("blocking" in app.board.verdict(row[0]).codes for row in held)
        await until(pilot, lambda: agrees_with_library(app, holder), "the file's verdict")

        await pilot.press("tab")
        tree = app.screen.query_one(ContentionTree)
        await until(
            pilot,
            lambda: any(mentions(text, waiter.pid) for _, text in tree_lines(tree)),
            "the waiter in the Contention view",
        )
        lines = list(tree_lines(tree))
        title = next(text for depth, text in lines if depth == 0 and "kernel" in text)
        # /proc/locks is the host's: other processes' waiters (other tests running at
        # the same time) count in the title too. Ours is checked under its holder.
        held_up = re.search(r"(\d+) process\(es\) held up", title)
        assert held_up is not None and int(held_up.group(1)) >= 1, lines
        (at,) = [i for i, (_, text) in enumerate(lines) if mentions(text, waiter.pid)]
        depth, text = lines[at]
        parents = [t for d, t in lines[:at] if d == depth - 1]
        assert parents and any(f"pid {pid} " in parents[-1] for pid in holder.holder_pids), lines
        assert "blocks 1 directly" in parents[-1], lines
        assert "waiting for WRITE" in text, text

        holder.release() if holder.kind.releasable else holder.kill()
        waiter.wait_acquired()
        await until(
            pilot,
            lambda: (
                app.board.entries.get(lock) is not None
                and app.board.entries[lock].lock.holder.pid == waiter.pid
            ),
            "the waiter to be named the holder",
        )
        assert app.board.verdict(lock).state is State.ACTIVE
        # The same record (its id names the waiter's pid) now holds the lock.
        await until(
            pilot,
            lambda: (state_of(app, waiting_id) or (None,))[0] is State.ACTIVE,
            "the waiter's record to hold",
        )
        # (A cursor left on the waiter's line says it is gone, naming it: no node.)
        await until(
            pilot,
            lambda: (
                not any(
                    mentions(text, waiter.pid) and not text.startswith("✖ gone")
                    for _, text in tree_lines(tree)
                )
            ),
            "nobody to wait any more",
        )
