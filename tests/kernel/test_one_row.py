"""One row per file (issue 33): with `--kernel` and PATHs, a file under them that
a kernel lock is held on is listed once, as the file's row with the kernel's
facts in it, never again as a kernel row of its own. A process blocked in flock
on it still shows as waiting on that one lock: in `ls` (its own row, and the
blocking tree) and in the dashboard's Contention view, where the file's row is
the holder's node. Without PATHs, `--kernel` lists the host's kernel locks.

The locks are the real util-linux flock(1)'s (tests/kernel/flock_tree.py): a
holder tree (flock, sh, sleep) and a second flock(1) blocked on the same file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets.tree import TreeNode

from lockwatch.cli.where import select_targets
from lockwatch.clock import SystemClock
from lockwatch.config import Config
from lockwatch.model.verdict import State
from lockwatch.sources.kernel.current import locks_now
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.contention import ContentionTree
from tests.conftest import LOCAL_HOST
from tests.kernel.flock_tree import FlockTree, start
from tests.kernel.holders import locks_on
from tests.kernel.test_kernel_break import lockwatch
from tests.ui.fakes import make_app
from tests.ui.fakes import until as until_within

pytestmark = pytest.mark.skipif(
    shutil.which("flock") is None or not os.path.exists("/proc/locks"),
    reason="needs util-linux flock(1) and Linux /proc/locks",
)

WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
SIZE = (160, 45)


def held_and_waiting(trees: list[FlockTree], path: Path) -> tuple[FlockTree, FlockTree]:
    path.parent.mkdir(exist_ok=True)
    path.write_text("")
    holder = start(trees, path)
    waiter = start(trees, path, blocks=True)
    return holder, waiter


def ls_json(cwd: Path, *args: str) -> dict[str, Any]:
    done = lockwatch("ls", "--json", "--kernel", *args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_ls_lists_the_file_once_and_its_waiter_waits_on_it(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    path = tmp_path / "tree" / "app.lock"
    holder, waiter = held_and_waiting(trees, path)
    document = ls_json(tmp_path, str(path.parent))
    on_file = [lock for lock in document["locks"] if lock["path"] == str(path)]
    held = [lock for lock in on_file if lock["state"] != "waiting"]
    waiting = [lock for lock in on_file if lock["state"] == "waiting"]
    # One row for the file: its own, the kernel's facts in it.
    assert [(lock["id"], lock["state"]) for lock in held] == [(f"file:{path}", "active")], on_file
    (row,) = held
    assert row["holder"]["pid"] == holder.flock
    assert row["kernel"]["type"] == "FLOCK" and row["kernel"]["inode"] == path.stat().st_ino
    # The kernel's facts joined: every process sharing the lock, and who waits on it.
    assert {(h["pid"], h["command"]) for h in row["holders"]} == {
        (holder.flock, "flock"),
        (holder.sh, "sh"),
        (holder.sleep, "sleep"),
    }, row["holders"]
    assert row["blocking"] == [waiter.flock], row
    # The waiter: its own row, blocked by the file's holder, and under it in the tree.
    (wait,) = waiting
    assert wait["source"] == "kernel" and wait["holder"]["pid"] == waiter.flock
    assert holder.flock in wait["blocked_by"]
    (kernel_tree,) = [tree for tree in document["blocking"] if tree["server"] == "kernel"]
    roots = {root["id"]: root for root in kernel_tree["roots"]}
    assert holder.flock in roots, kernel_tree
    assert [w["id"] for w in roots[holder.flock]["waiters"]] == [waiter.flock]

    # The table: the file's row and the waiter's, nothing more.
    table = lockwatch("ls", "--kernel", str(path.parent), cwd=tmp_path)
    rows = [line for line in table.stdout.splitlines() if line.endswith(" tree/app.lock")]
    assert len(rows) == 2, table.stdout
    assert sorted(row.split()[0] for row in rows) == ["active", "waiting"], rows


def test_without_paths_kernel_lists_the_hosts_kernel_locks(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    path = tmp_path / "tree" / "app.lock"
    holder, waiter = held_and_waiting(trees, path)
    document = ls_json(tmp_path)
    on_file = [lock for lock in document["locks"] if lock["path"] == str(path)]
    assert {(lock["source"], lock["state"], lock["holder"]["pid"]) for lock in on_file} == {
        ("kernel", "active", holder.flock),
        ("kernel", "waiting", waiter.flock),
    }, on_file


def test_kernel_from_the_config_without_paths_joins_the_current_directorys_files(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    """`[kernel] enabled = true` and no PATH: the file source looks at the current
    directory, and the locks it lists there are its rows alone; the host's other
    kernel locks are listed as ever."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    path, other = here / "app.lock", elsewhere / "other.lock"
    holder, waiter = held_and_waiting(trees, path)
    elsewhere.mkdir()
    other.write_text("")
    start(trees, other)
    (here / "lockwatch.toml").write_text("[kernel]\nenabled = true\n")
    done = lockwatch("ls", "--json", cwd=here)
    assert done.returncode == 0, done.stderr
    locks = json.loads(done.stdout)["locks"]
    on_file = {
        (lock["source"], lock["state"], lock["holder"]["pid"])
        for lock in locks
        if lock["path"] == str(path)
    }
    assert on_file == {
        ("file", "active", holder.flock),
        ("kernel", "waiting", waiter.flock),
    }, on_file
    on_other = {(lock["source"], lock["state"]) for lock in locks if lock["path"] == str(other)}
    assert ("kernel", "active") in on_other, on_other


# -- the dashboard -------------------------------------------------------------------


def dashboard(root: Path) -> LockwatchApp:
    """The dashboard `lockwatch --kernel ROOT` runs: the feeds its sources build."""
    targets = select_targets({"paths": (str(root),), "kernel": True}, Config(), {})
    clock = SystemClock()
    feeds = [feed for _, selected in targets.sources for feed in selected.feeds(clock, LOCAL_HOST)]
    return make_app(feeds=feeds, clock=clock)


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    await until_within(pilot, condition, what, WAIT_S)


def rows_on(app: LockwatchApp, path: Path) -> list[tuple[str, State, int | None]]:
    """(id, state, holder pid) of every row on `path`."""
    return [
        (lock_id, entry.verdict.state, entry.lock.holder.pid)
        for lock_id, entry in app.board.entries.items()
        if entry.lock.path == str(path)
    ]


def kernel_held(app: LockwatchApp, path: Path) -> list[str]:
    return [
        lock_id
        for lock_id, entry in app.board.entries.items()
        if isinstance(entry.lock.facts, KernelFacts)
        and not entry.lock.facts.waiting
        and entry.lock.path == str(path)
    ]


def kernel_polled(app: LockwatchApp) -> datetime:
    """When the kernel feed last read /proc/locks, as its status says."""
    (status,) = [status for status in app.board.all_statuses() if status.kind == "kernel"]
    assert status.updated_at is not None
    return status.updated_at


def nodes(tree: ContentionTree) -> Iterator[tuple[int, str, str | None]]:
    """(depth, text, the lock an action on it acts on) of every line, top to bottom."""
    stack: list[tuple[int, TreeNode[str | None]]] = [
        (0, node) for node in reversed(tree.root.children)
    ]
    while stack:
        depth, node = stack.pop()
        yield depth, str(node.label), node.data
        stack.extend((depth + 1, child) for child in reversed(node.children))


async def test_the_dashboard_shows_one_row_and_the_waiter_under_it(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    root = tmp_path / "tree"
    path = root / "app.lock"
    holder, waiter = held_and_waiting(trees, path)
    file_row = f"file:{path}"
    app = dashboard(root)
    async with app.run_test(size=SIZE) as pilot:

        def both() -> bool:
            states = {(state, pid) for _, state, pid in rows_on(app, path)}
            return (State.ACTIVE, holder.flock) in states and (
                State.WAITING,
                waiter.flock,
            ) in states

        await until(pilot, both, "the file's row and the waiter's")
        # The kernel feed has polled since both were there: its held lock joined the file's row.
        seen = kernel_polled(app)
        await until(pilot, lambda: kernel_polled(app) > seen, "the kernel feed's next poll")
        assert kernel_held(app, path) == [], rows_on(app, path)
        held = [row for row in rows_on(app, path) if row[1] is not State.WAITING]
        assert held == [(file_row, State.ACTIVE, holder.flock)], rows_on(app, path)

        await pilot.press("tab")
        tree = app.screen.query_one(ContentionTree)
        await until(
            pilot,
            lambda: any(f"pid {waiter.flock}" in text for _, text, _ in nodes(tree)),
            "the waiter in the Contention view",
        )
        lines = list(nodes(tree))
        (at,) = [i for i, (_, text, _) in enumerate(lines) if f"pid {waiter.flock}" in text]
        depth, text, _ = lines[at]
        parent = [line for line in lines[:at] if line[0] == depth - 1][-1]
        # The holder's node is the file's row: its command, what it blocks, and
        # the lock an action on it acts on.
        assert f"pid {holder.flock} " in parent[1] and "blocks 1 directly" in parent[1], lines
        assert "(flock " in parent[1], lines
        assert parent[2] == file_row, lines
        assert "waiting for WRITE flock on app.lock" in text, text
        radius = app.board.blast_radius(file_row)
        assert radius is not None and radius.direct == 1, radius

        # The holder goes: the waiter holds it, and it is the file's row that says so.
        holder.close()
        waiter.wait_held()
        await until(
            pilot,
            lambda: rows_on(app, path) == [(file_row, State.ACTIVE, waiter.flock)],
            "the file's row naming the waiter, alone",
        )
        assert kernel_held(app, path) == []


def test_shared_flocks_of_two_processes_each_keep_their_row(tmp_path: Path) -> None:
    """A file's row carries one held lock. Two processes each holding a shared
    flock on it (`flock -s`) are two kernel locks: neither is dropped unseen."""
    path = tmp_path / "tree" / "shared.lock"
    path.parent.mkdir()
    path.touch()
    procs = [
        subprocess.Popen(["flock", "-s", str(path), "sleep", "300"], start_new_session=True)
        for _ in range(2)
    ]
    try:
        # The kernel gives no event for a lock taken: /proc/locks, with a deadline.
        deadline = time.monotonic() + 30.0
        while len([lock for lock in locks_on(path) if not lock.waiting]) < 2:
            assert time.monotonic() < deadline, "the two shared flocks never showed"
            time.sleep(0.01)
        document = ls_json(tmp_path, str(path.parent))
        kernel_rows = [
            lock
            for lock in document["locks"]
            if lock["path"] == str(path) and lock["source"] == "kernel"
        ]
        assert {row["holder"]["pid"] for row in kernel_rows} == {p.pid for p in procs}, document
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_beside_the_files_feed_only_lock_named_files_are_joined(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    """The files feed lists a file named as a lock at once (its event), one of any
    other name (`jobs.state`) only at its next rescan: a live kernel feed joins only the
    first, so the second's lock is on a row meanwhile, never on none. A one-shot
    look joins both (its scan finds them through /proc/locks)."""
    root = tmp_path / "tree"
    root.mkdir()
    named, other = start(trees, root / "app.lock"), start(trees, root / "jobs.state")
    _, live = locks_now([str(root)], joined=[str(root)], live=True)
    held = {lock.path for lock in live if not getattr(lock.facts, "waiting", False)}
    assert held == {str(other.path)}, held
    _, once = locks_now([str(root)], joined=[str(root)])
    assert not [lock for lock in once if not getattr(lock.facts, "waiting", False)], once
    assert named.running() and other.running()
