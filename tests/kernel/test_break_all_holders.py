"""A kernel lock's holders are every process sharing its open file, and a break
signals all of them: the real util-linux `flock LOCK sh -c 'sleep 900 & wait'`,
whose lock flock(1), sh and sleep all hold (issue 37, item 1).

/proc/locks names only flock(1). Signalling it alone leaves the lock with sh
and sleep, which the old break reported as success. Here a break counts as
done only once /proc/locks no longer lists the lock; a holder that ignores
SIGTERM gets SIGKILL after the grace, or (with --no-kill) the break fails
naming it, and the audit log says exactly that.

Every process is real and started by the test (its own session, SIGKILLed and
reaped at teardown); the test reads the shell's and sleep's pids from the
shell, once the lock is held, with a deadline: nothing waits on a guess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lockwatch.model.action import ActionRefused, Asked, Kind
from lockwatch.model.blocking import from_locks
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.filelocks import FileKey
from lockwatch.sources.holders import Describer
from lockwatch.sources.kernel.actions import ACTIONS
from lockwatch.sources.kernel.breaking import Breaker
from lockwatch.sources.kernel.current import locks_now
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.procfs import read_table
from tests.kernel.flock_tree import DEADLINE_S, SCRIPT, STUBBORN, FlockTree, listed, start
from tests.kernel.holders import Holders, locks_on
from tests.kernel.test_kernel_break import audit, lockwatch

pytestmark = pytest.mark.skipif(
    shutil.which("flock") is None or not os.path.exists("/proc/locks"),
    reason="needs util-linux flock(1) and Linux /proc/locks",
)


def record_of(tmp_path: Path, path: Path) -> dict[str, Any]:
    # No PATHs: the host's kernel locks, each a row (with PATHs, the file's row
    # carries its held lock: one row per file).
    done = lockwatch("ls", "--json", "--kernel", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    locks = json.loads(done.stdout)["locks"]
    [record] = [
        lock
        for lock in locks
        if lock["source"] == "kernel" and lock["path"] == str(path) and lock["state"] != "waiting"
    ]
    assert isinstance(record, dict)
    return record


def break_(tmp_path: Path, lock_id: str, *options: str) -> subprocess.CompletedProcess[str]:
    return lockwatch(
        "break", lock_id, "--reason", "INC-7 hung deploy", "--yes", "--force", "--json",
        "--audit-log", str(tmp_path / "audit.jsonl"), *options, cwd=tmp_path,
    )  # fmt: skip


def kernel_lock(path: Path) -> Lock:
    st = path.stat()
    key = FileKey(f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", st.st_ino)
    _, locks = locks_now([])
    [lock] = [
        lock
        for lock in locks
        if isinstance(lock.facts, KernelFacts) and lock.facts.file == key and not lock.facts.waiting
    ]
    return lock


# -- the holders, all of them --------------------------------------------------------------


def test_every_process_sharing_the_open_file_is_a_holder(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK")
    [lock] = [lock for lock in read_table().locks if lock.path == str(tree.path)]
    # /proc/locks names flock(1) only; its fdinfo-sharing children hold it as much.
    assert lock.pid == tree.flock
    assert set(lock.owners) == tree.pids and lock.owners[0] == tree.flock
    assert {(h.pid, h.name) for h in lock.holders} == {
        (tree.flock, "flock"),
        (tree.sh, "sh"),
        (tree.sleep, "sleep"),
    }
    record = record_of(tmp_path, tree.path)
    assert {(h["pid"], h["command"]) for h in record["holders"]} == {
        (tree.flock, "flock"),
        (tree.sh, "sh"),
        (tree.sleep, "sleep"),
    }
    assert all(h["user"] and h["started_at"] for h in record["holders"])
    # The table names the file and the holder's command, as lslocks does.
    table = lockwatch("ls", "--kernel", str(tmp_path), cwd=tmp_path)
    # The file's own row (a file of any name the kernel holds a lock on is a lock,
    # the kernel's facts in it) names them so.
    rows = [line for line in table.stdout.splitlines() if f"(pid {tree.flock})" in line]
    assert rows, table.stdout
    for row in rows:
        assert f"flock (pid {tree.flock}) + 2 more" in row and "LOCK" in row, row


def test_the_detail_lists_each_holder_with_command_user_and_start(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK")
    lock = kernel_lock(tree.path)
    facts = lock.facts
    assert isinstance(facts, KernelFacts)
    assert facts.holder_text(lock) == f"flock (pid {tree.flock}) + 2 more"
    [section] = facts.sections(lock, datetime.now(UTC))
    assert "3 processes share its open file" in section.title
    rows = dict(section.rows)
    assert rows[f"sleep (pid {tree.sleep})"].startswith("sleep 900; user root, started ")
    assert rows[f"sh (pid {tree.sh})"].startswith(f"sh -c {SCRIPT}; user root")
    assert facts.matches_text("sleep") and facts.matches_pid(tree.sleep)


# -- the plan says what will be sent, to whom, and when --------------------------------------


def test_the_effect_names_every_holder_the_signal_and_the_grace(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK")
    lock = kernel_lock(tree.path)
    verdict = Verdict(State.ACTIVE)
    holders = f"flock (pid {tree.flock}), sh (pid {tree.sh}), sleep (pid {tree.sleep})"

    plan = ACTIONS.plan(Kind.BREAK, lock, verdict, Asked())  # the dashboard's: no options
    assert (plan.signal, plan.grace, plan.then_signal) == ("TERM", 10.0, "KILL")
    assert plan.needs_name
    assert plan.effect == (
        f"send SIGTERM (asks to exit) to the 3 processes that share its open file: {holders};"
        " SIGKILL (no clean-up) to any still holding it after 10 s; done only once the kernel"
        " no longer lists LOCK"
    )
    term_only = ACTIONS.plan(
        Kind.BREAK, lock, verdict, Asked(given={"signal": "TERM", "grace": 2.5, "kill": False})
    )
    assert term_only.then_signal is None
    assert "no SIGKILL: if it is still held after 2.5 s, the break fails" in term_only.effect
    kill = ACTIONS.plan(Kind.BREAK, lock, verdict, Asked(given={"signal": "KILL"}))
    assert kill.effect.startswith(
        f"send SIGKILL (no clean-up) to the 3 processes that share its open file: {holders};"
    )
    assert (kill.signal, kill.then_signal) == ("KILL", None)


# -- the break, from the CLI ------------------------------------------------------------------


def test_a_break_signals_every_holder_and_is_done_once_the_kernel_lets_go(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK")
    lock_id = record_of(tmp_path, tree.path)["id"]
    assert lock_id.startswith("kernel:") and lock_id.endswith(f":FLOCK:0-EOF:{tree.flock}")

    done = break_(tmp_path, lock_id, "--grace", "60")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["ok"] is True and outcome["event"] == "holder_signalled"
    # Done means the kernel lists the lock no more: at once, not eventually.
    assert not listed(tree.path)
    assert tree.running() == set()
    last = audit(tmp_path)[-1]
    assert last["event"] == "holder_signalled" and last["result"] == "success"
    assert last["signal"] == "SIGTERM"
    # sh and sleep were signalled, not only the pid /proc/locks names.
    assert {h["pid"] for h in last["signalled"]} == tree.pids
    assert "killed" not in last  # SIGTERM was enough
    assert {h["pid"] for h in last["target"]["holders"]} == tree.pids


def test_a_holder_that_ignores_sigterm_is_killed_after_the_grace(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK", STUBBORN)
    lock_id = record_of(tmp_path, tree.path)["id"]

    done = break_(tmp_path, lock_id, "--grace", "0.5")
    assert done.returncode == 0, done.stderr
    assert not listed(tree.path)
    assert tree.running() == set()
    records = audit(tmp_path)
    steps = [(r["event"], r.get("signal")) for r in records if r["event"] != "action_intent"]
    assert steps == [
        ("kernel_holders_signalled", "SIGTERM"),
        ("kernel_holders_signalled", "SIGKILL"),
        ("holder_signalled", "SIGTERM"),
    ]
    last = records[-1]
    assert {h["pid"] for h in last["killed"]} == {tree.sh, tree.sleep}
    assert last["message"].endswith("the kernel no longer lists LOCK")


def test_sigterm_only_fails_naming_who_still_holds_it(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK", STUBBORN)
    lock_id = record_of(tmp_path, tree.path)["id"]

    done = break_(tmp_path, lock_id, "--grace", "0.5", "--no-kill")
    assert done.returncode == 3, done.stderr  # failed part-way, never "done"
    outcome = json.loads(done.stdout)
    assert outcome["ok"] is False and outcome["code"] == "still_held"
    survivors = f"sh (pid {tree.sh}), sleep (pid {tree.sleep})"
    assert f"LOCK is still held by {survivors}" in outcome["message"]
    assert listed(tree.path)
    assert tree.running() == {tree.sh, tree.sleep}  # flock(1) took SIGTERM

    records = audit(tmp_path)
    note, last = records[-2], records[-1]
    assert (note["event"], note["result"]) == ("kernel_lock_still_held", "partial")
    assert {h["pid"] for h in note["still_held_by"]} == {tree.sh, tree.sleep}
    assert [h["pid"] for h in note["exited"]] == [tree.flock]
    assert (last["event"], last["result"], last["code"]) == (
        "action_failed",
        "failed",
        "still_held",
    )
    assert survivors in last["message"]


# -- compare-and-swap ------------------------------------------------------------------------


def test_a_holder_that_is_another_process_now_is_never_signalled(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK")
    lock = kernel_lock(tree.path)
    facts = lock.facts
    assert isinstance(facts, KernelFacts)
    # As if sleep's pid had been reused since the listing: another start time.
    recycled = tuple(
        replace(h, start_ticks=(h.start_ticks or 0) + 1) if h.pid == tree.sleep else h
        for h in facts.holders
    )
    seen = replace(facts, holders=recycled)
    notes: list[tuple[str, dict[str, Any]]] = []
    with pytest.raises(ActionRefused) as refused:
        Breaker("LOCK", seen, lambda event, fields: notes.append((event, fields))).run(
            "TERM", 60.0, "KILL"
        )
    assert refused.value.code == "changed"
    assert f"pid {tree.sleep} is another process now" in refused.value.message
    assert notes == []  # nothing sent to anybody
    assert tree.running() == tree.pids and listed(tree.path)


# -- describing holders from procfs ---------------------------------------------------------


def test_a_holder_is_described_from_its_procfs_files(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "stat").write_text("cpu 1 2 3\nbtime 1700000000\n")
    # The command may hold spaces and parentheses: fields count from the last ")".
    fields = ["S", *["0"] * 18, "250"]  # field 22, starttime: 2.5 s after boot
    (proc / "42" / "stat").write_text(f"42 (we(ird) name) {' '.join(fields)} 0 0\n")
    (proc / "42" / "cmdline").write_bytes(b"/usr/bin/we(ird)\0--flag\0")
    (proc / "42" / "status").write_text("Name:\tx\nUid:\t0\t0\t0\t0\n")
    (proc / "43").mkdir()
    (proc / "43" / "stat").write_text(f"43 (zombie) Z {' '.join(fields[1:])}\n")
    describe = Describer(str(proc))
    holder = describe(42)
    assert holder is not None
    assert (holder.name, holder.cmdline, holder.user) == (
        "we(ird) name",
        ("/usr/bin/we(ird)", "--flag"),
        "root",
    )
    assert holder.start_ticks == 250
    assert holder.started_at is not None
    ticks = os.sysconf("SC_CLK_TCK")
    assert holder.started_at.timestamp() == pytest.approx(1_700_000_000 + 250 / ticks)
    assert holder.label == "we(ird) name (pid 42)"
    assert describe(43) is None  # a zombie's files are closed: it holds nothing
    assert describe(44) is None  # gone


# -- a waiter behind the tree -----------------------------------------------------------------


def test_a_waiter_waits_on_the_lock_and_may_take_it_once_broken(
    trees: list[FlockTree], tmp_path: Path
) -> None:
    tree = start(trees, tmp_path / "LOCK")
    # A second `flock LOCK …` blocks in the kernel until the tree lets go.
    waiter = start(trees, tmp_path / "LOCK", blocks=True)
    lock = kernel_lock(tree.path)
    facts = lock.facts
    assert isinstance(facts, KernelFacts)
    assert facts.blocking == (waiter.flock,)
    _, locks = locks_now([])
    [waiting] = [
        other
        for other in locks
        if isinstance(other.facts, KernelFacts) and other.facts.waiting
        and other.facts.file == facts.file
    ]  # fmt: skip
    assert isinstance(waiting.facts, KernelFacts)
    assert set(waiting.facts.blocked_by) == tree.pids  # all three hold what it waits for
    # In the wait-for graph it waits on the lock's node, not on three roots.
    [root] = [node for node in from_locks(locks).roots if node.id in tree.pids]
    assert root.id == tree.flock and [w.id for w in root.waiters] == [waiter.flock]
    assert (
        "and then 1 waiting process may take it"
        in ACTIONS.plan(Kind.BREAK, lock, Verdict(State.ACTIVE), Asked()).effect
    )

    lock_id = record_of(tmp_path, tree.path)["id"]
    done = break_(tmp_path, lock_id, "--grace", "60")
    assert done.returncode == 0, done.stderr
    # The waiter has it now: a new lock on the same file, never the broken one.
    waiter.wait_held()
    now = [held for held in locks_on(tree.path) if not held.waiting]
    assert [held.pid for held in now] == [waiter.flock]
    assert tree.running() == set()


# -- every kind of kernel lock ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["lockf", "lockf_range", "ofd", "flock_fd", "flock_shared"])
def test_each_kind_of_lock_is_broken_and_gone(kind: str, holders: Holders, tmp_path: Path) -> None:
    """POSIX (its owner only), OFD (pid -1 in /proc/locks: its holders from
    fdinfo), and a shell's flock taken by a flock(1) that exited (a dead pid in
    /proc/locks): each holder found, signalled, and the lock gone."""
    holder = holders.start(kind, tmp_path / f"{kind}.lock")
    lock = kernel_lock(holder.lock_path)
    facts = lock.facts
    assert isinstance(facts, KernelFacts)
    assert facts.pids == (holder.pid,), facts.pids
    notes: list[tuple[str, dict[str, Any]]] = []
    done = Breaker(lock.name, facts, lambda event, fields: notes.append((event, fields))).run(
        "TERM", 60.0, "KILL"
    )
    assert [h["pid"] for h in done.details["signalled"]] == [holder.pid]
    assert not listed(holder.lock_path)
    assert notes == [("kernel_holders_signalled", notes[0][1])]
    holder.proc.wait(timeout=DEADLINE_S)
