"""`flock PATH sh -c 'sleep 900 & wait'`, the real util-linux flock(1): three
processes (flock(1), the shell, sleep) holding one flock through one open file,
which /proc/locks names by flock(1)'s pid alone.

The shell prints its pid and sleep's once both exist (flock(1) took the lock
before it ran the shell); the test reads them with a deadline, so "held" is
never a guess. Each tree has its own session and is SIGKILLed and reaped at
teardown (the `trees` fixture in conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from pathlib import Path

from tests.kernel.holders import locks_on, running

DEADLINE_S = 15.0

# The shell says its pid and sleep's once both exist (flock(1) took the lock
# before it ran the shell), then waits for sleep, as `sh -c 'sleep 900 & wait'`.
SCRIPT = "echo $$; sleep 900 & echo $!; wait"
STUBBORN = "trap '' TERM; " + SCRIPT  # ignores SIGTERM, and sleep inherits that


class FlockTree:
    """`flock PATH sh -c SCRIPT`: three processes holding one flock."""

    def __init__(self, path: Path, script: str = SCRIPT, *, blocks: bool = False) -> None:
        """`blocks`: the lock is held already, so flock(1) waits for it: returns
        once /proc/locks shows it waiting (`wait_held` then waits for the lock)."""
        self.path = path
        self.proc = subprocess.Popen(
            ["flock", str(path), "sh", "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # one killpg ends the tree at teardown
        )
        self.flock = self.proc.pid
        self.sh = self.sleep = -1
        if blocks:
            self._await_waiting()
        else:
            self.wait_held()

    def wait_held(self) -> None:
        """Until the shell says it runs (flock(1) holds the lock), with a deadline."""
        self.sh, self.sleep = int(self._line()), int(self._line())
        # `$!` is known once sleep is forked, before it has exec'd: until then it is
        # a copy of the shell, named sh. No event marks an exec: polled, with a deadline.
        deadline = time.monotonic() + DEADLINE_S
        while _command(self.sleep) not in ("sleep", None):
            assert time.monotonic() < deadline, "sleep never started"
            time.sleep(0.01)

    def _await_waiting(self) -> None:
        # The kernel gives no event for a process starting to wait: its `->`
        # line in /proc/locks is polled, with a deadline.
        deadline = time.monotonic() + DEADLINE_S
        while not any(lock.waiting and lock.pid == self.flock for lock in locks_on(self.path)):
            assert time.monotonic() < deadline, "the waiting flock never showed in /proc/locks"
            assert self.proc.poll() is None, "the waiting flock exited"
            time.sleep(0.01)

    @property
    def pids(self) -> set[int]:
        return {self.flock, self.sh, self.sleep}

    def _line(self) -> str:
        stdout = self.proc.stdout
        assert stdout is not None
        deadline = time.monotonic() + DEADLINE_S
        line = b""
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([stdout], [], [], deadline - time.monotonic())
            assert ready, "the flock tree did not start in time"
            byte = os.read(stdout.fileno(), 1)
            assert byte, "the flock tree exited before holding its lock"
            line += byte
        return line.decode().strip()

    def running(self) -> set[int]:
        """Which of the three still run (flock(1), the test's child, is reaped)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=0)
        return {pid for pid in self.pids if running(pid)}

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.flock, signal.SIGKILL)
        self.proc.wait(timeout=DEADLINE_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start(
    trees: list[FlockTree], path: Path, script: str = SCRIPT, *, blocks: bool = False
) -> FlockTree:
    tree = FlockTree(path, script, blocks=blocks)
    trees.append(tree)
    return tree


def listed(path: Path) -> bool:
    """Whether /proc/locks lists a granted lock on the file at `path`."""
    return any(not lock.waiting for lock in locks_on(path))


def _command(pid: int) -> str | None:
    """The command name of `pid` (/proc/PID/comm); None once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return None
