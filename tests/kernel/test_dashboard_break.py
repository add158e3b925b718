"""The dashboard's break (b) of a real `flock LOCK sh -c 'sleep 900 & wait'`:
the real kernel feed in the app, the real confirmation, the real action
session and audit log (issue 37, item 1).

The dialog shows every holder, the signal and the grace before anything is
sent; the break is reported done only once /proc/locks no longer lists the
lock, and flock(1), sh and sleep were all signalled. Every wait is bounded,
never a sleep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from lockwatch.actions.session import ActionSession
from lockwatch.clock import SystemClock
from lockwatch.model.verdict import State
from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.files.watch import FileFeed
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.kernel.feed import KernelFeed
from lockwatch.ui.app import LockwatchApp
from lockwatch.ui.confirm import ChoiceRow
from tests.conftest import LOCAL_HOST
from tests.kernel.flock_tree import STUBBORN, FlockTree, listed, start
from tests.ui.fakes import make_app
from tests.ui.fakes import until as until_within
from tests.ui.test_actions_ui import (
    confirm_screen,
    notes,
    open_action,
    press_confirm,
    screen_text,
    type_into,
)

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/locks"), reason="kernel locks are read from /proc/locks"
)

SIZE = (160, 45)
WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion
FAST = 0.2
REASON = "INC-7: deploy hung holding LOCK"


def dashboard(root: Path, audit_log: Path, feed: str) -> LockwatchApp:
    """The live dashboard on `root` with a real action session: its kernel feed
    (`--kernel`) or its files feed (the default, a lock file's own row)."""
    session = ActionSession(
        clock=SystemClock(),
        host=LOCAL_HOST,
        roots=[str(root)],
        audit_log=audit_log,
        operator="alice",
    )
    watched = (
        KernelFeed([str(root)], host=LOCAL_HOST, interval=FAST)
        if feed == "kernel"
        else FileFeed([str(root)], host=LOCAL_HOST, rescan_seconds=3600.0, liveness_seconds=FAST)
    )
    return make_app(feeds=[watched], clock=SystemClock(), actions=session)


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    await until_within(pilot, condition, what, WAIT_S)


def kernel_row(app: LockwatchApp, path: Path) -> str | None:
    """The id of the kernel's lock on `path` on the board, if it is there."""
    st = path.stat()
    key = FileKey(f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", st.st_ino)
    for lock_id, entry in app.board.entries.items():
        facts = entry.lock.facts
        if isinstance(facts, KernelFacts) and facts.file == key and not facts.waiting:
            return lock_id
    return None


async def test_a_flock_tree_broken_from_the_dashboard(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK")
    audit_log = tmp_path / "audit.jsonl"
    app = dashboard(tmp_path, audit_log, "kernel")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: kernel_row(app, tree.path) is not None, "the kernel's row")
        lock_id = kernel_row(app, tree.path)
        assert lock_id is not None
        await open_action(pilot, lock_id)
        text = " ".join(screen_text(confirm_screen(app)).split())
        # Who is signalled, with what, and when SIGKILL follows: before anything is sent.
        for holder in (f"flock (pid {tree.flock})", f"sh (pid {tree.sh})"):
            assert holder in text, text
        assert f"sleep (pid {tree.sleep})" in text, text
        assert "SIGTERM" in text and "SIGKILL" in text and "after 10 s" in text, text
        assert "done only once the kernel no longer lists LOCK" in text, text
        await type_into(pilot, "#reason", REASON)
        await type_into(pilot, "#must-type", "LOCK")
        await press_confirm(pilot)
        await until(
            pilot,
            lambda: any("the kernel no longer lists LOCK" in note for note in notes(app)),
            "the break's report",
        )

    assert not listed(tree.path)
    assert tree.running() == set()
    records = [json.loads(line) for line in audit_log.read_text().splitlines()]
    last = records[-1]
    assert (last["event"], last["result"], last["reason"]) == (
        "holder_signalled",
        "success",
        REASON,
    )
    assert {holder["pid"] for holder in last["signalled"]} == tree.pids
    assert last["forced"] is True  # the typed name


async def test_term_only_chosen_in_the_dialog_says_who_still_holds_it(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    """The signal chosen in the dialog (shift+tab to it, → to TERM only) against a
    tree whose shell traps SIGTERM (sleep inherits that): flock(1) exits, sh and
    sleep hold on, and the outcome names them, never "done"."""
    tree = start(trees, tmp_path / "LOCK", STUBBORN)
    audit_log = tmp_path / "audit.jsonl"
    app = dashboard(tmp_path, audit_log, "kernel")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: kernel_row(app, tree.path) is not None, "the kernel's row")
        lock_id = kernel_row(app, tree.path)
        assert lock_id is not None
        await open_action(pilot, lock_id)
        await pilot.press("shift+tab", "right")
        await pilot.pause()
        text = " ".join(screen_text(confirm_screen(app)).split())
        assert "(•) TERM only" in text, text
        assert "no SIGKILL: if it is still held after 10 s, the break fails naming who" in text
        await type_into(pilot, "#reason", REASON)
        await type_into(pilot, "#must-type", "LOCK")
        await press_confirm(pilot)
        survivors = f"sh (pid {tree.sh}), sleep (pid {tree.sleep})"
        # The grace (10 s) passes before the outcome: bounded well beyond it.
        await until_within(
            pilot,
            lambda: any(f"LOCK is still held by {survivors}" in note for note in notes(app)),
            "the break's report naming who still holds it",
            WAIT_S + 30.0,
        )
        (said,) = [note for note in notes(app) if "still held by" in note]
        assert "no SIGKILL asked for" in said and not said.startswith("done:"), said

    assert listed(tree.path)
    assert tree.running() == {tree.sh, tree.sleep}  # flock(1) took SIGTERM
    records = [json.loads(line) for line in audit_log.read_text().splitlines()]
    last = records[-1]
    assert (last["event"], last["result"], last["code"]) == (
        "action_failed",
        "failed",
        "still_held",
    )
    assert survivors in last["message"]
    assert not any(record.get("signal") == "SIGKILL" for record in records)


async def test_a_lock_files_own_row_breaks_its_kernel_lock(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    """The default dashboard (no --kernel): the file's row is its kernel lock's
    (one row per file), and its break is the kernel's: the signal chosen, every
    holder signalled, the file never moved aside under them."""
    tree = start(trees, tmp_path / "LOCK")
    audit_log = tmp_path / "audit.jsonl"
    app = dashboard(tmp_path, audit_log, "files")
    file_row = f"file:{tree.path}"

    def held() -> bool:
        return file_row in app.board and app.board.verdict(file_row).state is State.ACTIVE

    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, held, "the lock file's row, held")
        assert kernel_row(app, tree.path) is None  # one row: the file's
        await open_action(pilot, file_row)
        screen = confirm_screen(app)
        assert "TERM, then KILL after 10 s" in str(screen.query_one(ChoiceRow).content)
        text = " ".join(screen_text(screen).split())
        assert f"flock (pid {tree.flock})" in text and "SIGTERM" in text, text
        assert "rename" not in text, text  # never moved aside
        await type_into(pilot, "#reason", REASON)
        await type_into(pilot, "#must-type", "LOCK")
        await press_confirm(pilot)
        await until(
            pilot,
            lambda: any("the kernel no longer lists LOCK" in note for note in notes(app)),
            "the break's report",
        )

    assert not listed(tree.path)
    assert tree.running() == set()
    assert tree.path.exists()
    last = [json.loads(line) for line in audit_log.read_text().splitlines()][-1]
    assert (last["event"], last["result"]) == ("holder_signalled", "success")
    assert {holder["pid"] for holder in last["signalled"]} == tree.pids


async def test_a_new_holder_while_the_dialog_is_open_is_never_signalled(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    """The dialog on a lock file's row names its holder; that holder exits and
    another process takes the lock while it is open. The plan would now signal
    the new holder: the dialog says it changed, and confirming does nothing."""
    first = start(trees, tmp_path / "LOCK")
    audit_log = tmp_path / "audit.jsonl"
    app = dashboard(tmp_path, audit_log, "files")
    file_row = f"file:{first.path}"

    def held_by(tree: FlockTree) -> bool:
        entry = app.board.entries.get(file_row)
        return entry is not None and entry.lock.holder.pid == tree.flock

    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: held_by(first), "the first holder's row")
        await open_action(pilot, file_row)
        screen = confirm_screen(app)
        await type_into(pilot, "#reason", REASON)
        await type_into(pilot, "#must-type", "LOCK")
        first.close()
        second = start(trees, first.path)
        await until(pilot, lambda: held_by(second), "the second holder on the row")
        screen.refresh_facts()
        await pilot.pause()
        assert "changed while open" in " ".join(screen_text(screen).split())
        await press_confirm(pilot)
        await until(
            pilot,
            lambda: any("changed while open — nothing done" in note for note in notes(app)),
            "the dialog to refuse",
        )

    assert second.running() == second.pids  # never signalled
    assert not audit_log.exists() or "holder_signalled" not in audit_log.read_text()
