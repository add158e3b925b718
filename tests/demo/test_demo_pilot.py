"""`lockwatch demo` headless: the Demo started as the command starts it, its dashboard
driven by Pilot, every lock state on the board within the demo's promise, and nothing
left behind once the app has exited: no process, no session, no workspace.

PostgreSQL comes from the embedded pgserver, as the command's default; where pgserver
is missing the test server is used the way `--pg DSN` uses one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from lockwatch.cli.demo import demo_app
from lockwatch.demo import Demo, DemoError, director
from lockwatch.demo.cast import KILLED
from lockwatch.demo.pg_server import pgserver_problem
from lockwatch.model.blocking import BlockNode
from lockwatch.model.verdict import State
from lockwatch.ui.app import LockwatchApp
from tests.demo.conftest import await_until, birth, gone
from tests.postgres.conftest import unavailable
from tests.ui.fakes import builtin_themes

# The README promises every state within 10 s on a fresh machine; a loaded CI runner
# gets some slack, and the time it took is printed either way.
STATES_S = 20.0
HOST = os.uname().nodename


def depth(node: BlockNode) -> int:
    return 1 + max((depth(waiter) for waiter in node.waiters), default=0)


@dataclass(frozen=True)
class Seen:
    """What the board shows of what the demo promises."""

    states: frozenset[State]
    codes: frozenset[str]
    waiting: frozenset[str]  # names of waiting locks
    conflicted: frozenset[str]  # names of locks with a scope conflict
    deepest_chain: int

    @property
    def complete(self) -> bool:
        return (
            self.states == set(State)
            and {"holder_dead", "heartbeat_expired", "too_old", "schema_violation"} <= self.codes
            and "not_held" in self.codes
            and "other_pid_namespace" in self.codes
            and {"billing-sync", "agent:42"} <= self.waiting
            and {"fix-bugs", "refactor-api"} <= self.conflicted
            and self.deepest_chain >= 3
        )


def seen(app: LockwatchApp) -> Seen:
    board = app.board
    verdicts = [(entry.lock, board.verdict(lock_id)) for lock_id, entry in board.entries.items()]
    trees = board.blocking_trees().values()
    return Seen(
        states=frozenset(state for state, count in board.counts.items() if count),
        codes=frozenset(code for _, verdict in verdicts for code in verdict.codes),
        waiting=frozenset(lock.name for lock, v in verdicts if v.state is State.WAITING),
        conflicted=frozenset(board.entries[lock_id].lock.name for lock_id, _ in board.conflicts()),
        deepest_chain=max((depth(root) for tree in trees for root in tree.roots), default=0),
    )


@pytest.mark.postgres
async def test_every_state_shows_and_nothing_survives_the_app(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    dsn = None if pgserver_problem() is None else request.getfixturevalue("pg_db")
    started = time.monotonic()
    demo = Demo(pg_dsn=dsn, base_dir=tmp_path)
    with demo:
        if demo.pg_info is None:
            unavailable(f"the demo has no PostgreSQL: {demo.pg_missing}")
        workspace = demo.workspace
        assert workspace is not None and workspace.root.is_relative_to(tmp_path)
        app = demo_app(demo, host=HOST, themes=builtin_themes())
        app.animation_level = "none"
        async with app.run_test(size=(160, 50)) as pilot:
            took = await await_until(
                lambda: seen(app).complete,
                "every state on the board",
                STATES_S,
                describe=lambda: repr(seen(app)),
                pause=lambda: pilot.pause(0.1),
            )
            print(f"every state on the board {time.monotonic() - started:.1f}s after start")
            assert took < STATES_S
            assert demo.killed is not None
            assert KILLED in {child.role.name for child in demo.children}
            processes = {pid: birth(pid) for pid in demo.pids}
            assert len(processes) >= len(demo.children) + 1  # and the guardian
        # The app has exited (the UI is gone), the demo not yet: its processes still run.
        hung = next(child for child in demo.children if child.role.name == "tower-sync-hung")
        assert not gone(hung.pid, processes[hung.pid])
    # Demo.__exit__ stopped and reaped them all, and removed the workspace.
    survivors = [pid for pid, created in processes.items() if not gone(pid, created)]
    assert survivors == [], [psutil.Process(pid).cmdline() for pid in survivors]
    assert not workspace.root.exists()
    if demo.pg_info.datadir is not None:
        assert not demo.pg_info.datadir.exists(), "the embedded server's data stays"
    assert any("stopped 17 processes" in line for line in demo.report), demo.report


def test_without_pgserver_it_runs_files_only_keeps_and_stops_on_an_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No pgserver and no --pg: files only, saying why; kept; and ended by an exception,
    as a crashing UI ends it."""
    monkeypatch.setattr(director, "pgserver_problem", lambda: "the pgserver package is gone")
    audit = tmp_path / "elsewhere" / "audit.jsonl"
    demo = Demo(keep=True, base_dir=tmp_path, audit_log=audit)
    with pytest.raises(RuntimeError, match="the UI crashed"), demo:
        assert demo.pg_info is None and demo.pg_missing == "the pgserver package is gone"
        assert demo.dsns == () and demo.audit_log == audit
        assert "files only" in demo.describe()
        processes = {pid: birth(pid) for pid in demo.pids}
        assert len(processes) == 18  # seventeen children and the guardian
        raise RuntimeError("the UI crashed")
    assert [pid for pid, created in processes.items() if not gone(pid, created)] == []
    assert demo.workspace is not None and demo.workspace.root.exists()
    assert len(list(demo.workspace.logs.glob("*.log"))) == 18
    assert "tower-sync-hung" in (demo.workspace.root / "README.txt").read_text()
    assert not (demo.workspace.root / "lockwatch.toml").exists()
    assert any("workspace kept" in line for line in demo.report), demo.report
    assert any(f"nothing audited in {audit}" in line for line in demo.report), demo.report


def test_a_workspace_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    demo = Demo(base_dir=tmp_path / "no-such-dir")
    with pytest.raises(DemoError, match=r"cannot start the demo: .*no-such-dir"):
        demo.start()
    assert demo.pids == []
