"""One real flock wait recorded into a history (a SQLite file or a PostgreSQL
DSN): a util-linux `flock` holds a lock file, another waits on it until the
holder lets go. Shared by the CLI and the PostgreSQL store tests."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from lockwatch.history.api import HistoryStore, open_history
from lockwatch.history.recorder import Recorder
from lockwatch.serve.watcher import Watcher
from tests.history.harness import HOST, wait_until


@dataclass(frozen=True)
class Waited:
    lock: Path
    holder_pid: int
    waiter_pid: int
    during: datetime  # an instant the waiter was seen waiting


def _waiting(watcher: Watcher) -> bool:
    return any(e.verdict.state.value == "waiting" for e in list(watcher.board.entries.values()))


def _held_by(watcher: Watcher, pid: int) -> bool:
    return any(
        e.lock.holder.pid == pid and e.verdict.state.value != "waiting"
        for e in list(watcher.board.entries.values())
    )


def record_a_flock_wait(where: Path, target: str, host: str = HOST) -> Waited:
    from lockwatch.cli.serve import serve
    from lockwatch.cli.where import resolve_targets
    from lockwatch.clock import SystemClock

    lock = where / "deploy.lock"
    lock.touch()
    ctx = serve.make_context("serve", ["--kernel", str(where), "--refresh", "0.2"])
    targets = resolve_targets(ctx.params, None)
    clock = SystemClock()
    feeds = [(s.name, f) for s, sel in targets.sources for f in sel.feeds(clock, host)]

    def opener() -> HistoryStore:
        return open_history(target, host=host, write=True)

    recorder = Recorder(opener, poll_seconds=0.2, target=target)
    watcher = Watcher(feeds, host=host, clock=clock, recorder=recorder)
    holder = subprocess.Popen(["flock", str(lock), "cat"], stdin=subprocess.PIPE)
    waiter = None
    watcher.start()
    try:
        wait_until(
            lambda: (
                lock.name in {e.lock.name + ".lock" for e in list(watcher.board.entries.values())}
                or len(watcher.board) > 0
            ),
            "the lock seen",
        )
        # The waiter holds on once it has the lock, until the board has seen it
        # hold: the hand-over itself is recorded, not only its end.
        waiter = subprocess.Popen(["flock", "-w", "60", str(lock), "cat"], stdin=subprocess.PIPE)
        wait_until(lambda: _waiting(watcher), "the waiter seen waiting")
        during = clock.now()
        assert holder.stdin is not None
        holder.stdin.close()
        wait_until(lambda: _held_by(watcher, waiter.pid), "the waiter seen holding")
        assert waiter.stdin is not None
        waiter.stdin.close()
        assert waiter.wait(60) == 0
        wait_until(lambda: not _waiting(watcher), "the wait seen over")
    finally:
        watcher.stop()
        recorder.close()
        holder.kill()
        holder.wait()
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
    assert recorder.failed is None, recorder.failed
    assert waiter is not None
    return Waited(lock, holder.pid, waiter.pid, during)
