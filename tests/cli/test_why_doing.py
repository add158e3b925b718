"""`lockwatch why` says what the holder is doing (issue 46, item 1), never "is at
work" for a holder that waits for someone: real processes on a real pty (an
`sqlite3` shell idle in a transaction, a prompt read with read(0) as apt's Y/n
is), and a process really running."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lockwatch.sources.processes import read_activity
from tests.conftest import run_cli

WAIT_S = 30.0  # a bound for waits under a loaded suite, never a timing assertion


@dataclass
class OnPty:
    """A process whose stdin, stdout and controlling terminal is a fresh pty."""

    pid: int
    fd: int
    seen: bytes = b""

    def read_until(self, text: bytes) -> None:
        deadline = time.monotonic() + WAIT_S
        while text not in self.seen:
            assert time.monotonic() < deadline, f"no {text!r} on the pty: {self.seen!r}"
            self.seen += os.read(self.fd, 4096)

    def write(self, text: bytes) -> None:
        os.write(self.fd, text)


@pytest.fixture
def on_pty() -> Iterator[list[OnPty]]:
    started: list[OnPty] = []
    yield started
    for process in started:
        try:
            os.kill(process.pid, 9)
            os.waitpid(process.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(process.fd)


def spawn(started: list[OnPty], *argv: str) -> OnPty:
    pid, fd = pty.fork()
    if pid == 0:  # the child: its own session, the pty its terminal
        try:
            os.execvp(argv[0], list(argv))
        finally:
            os._exit(127)
    process = OnPty(pid, fd)
    started.append(process)
    return process


def reading_its_terminal(pid: int) -> None:
    """Wait until /proc shows `pid` asleep in a read of its terminal alone."""
    deadline = time.monotonic() + WAIT_S
    while True:
        activity = read_activity(pid)
        if activity is not None and activity.reads_terminal and activity.foreground:
            return
        assert time.monotonic() < deadline, f"pid {pid} never read its terminal: {activity}"
        time.sleep(0.02)


def test_an_idle_sqlite3_shell_in_a_transaction_waits_for_input(
    tmp_path: Path, on_pty: list[OnPty]
) -> None:
    if shutil.which("sqlite3") is None:
        pytest.fail("no sqlite3 shell: apt-get install sqlite3 (.ci/run installs it)")
    db = tmp_path / "app.db"
    shell = spawn(on_pty, "sqlite3", str(db))
    shell.read_until(b"sqlite> ")
    shell.write(b"CREATE TABLE t (x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1);\n")
    shell.seen = b""
    shell.read_until(b"sqlite> ")
    reading_its_terminal(shell.pid)
    code, out, err = run_cli("why", str(db))
    assert code == 0, err
    assert "state:  active" in out and f"pid {shell.pid}" in out, out
    (next_line,) = [line for line in out.splitlines() if line.startswith("  next:")]
    activity = read_activity(shell.pid)
    assert activity is not None and activity.terminal is not None
    tty = activity.terminal
    assert next_line == (
        f"  next:   ask who is at its terminal: sqlite3 (pid {shell.pid}) is waiting for input"
        f" at its terminal ({tty}), not working; the lock stays held until they answer it or"
        " end it"
    ), out
    assert "at work" not in out
    code, out, _ = run_cli("why", "--json", str(db))
    (record,) = [lock for lock in json.loads(out)["locks"] if lock["path"] == str(db)]
    assert record["next_step"]["action"] == "wait"
    assert "waiting for input" in record["next_step"]["text"]


PROMPT = """
import fcntl, sys
handle = open(sys.argv[1], "r+")
fcntl.lockf(handle, fcntl.LOCK_EX)
input("Do you want to continue? [Y/n] ")
"""


def test_a_prompt_read_from_the_terminal_as_apt_asks_is_waiting_for_input(
    tmp_path: Path, on_pty: list[OnPty]
) -> None:
    # apt holds /var/lib/dpkg/lock-frontend (lockf) while its Y/n prompt reads
    # stdin: the same, on a lock file of this test's own.
    path = tmp_path / "lock-frontend"
    path.write_text("")
    prompt = spawn(on_pty, sys.executable, "-c", PROMPT, str(path))
    prompt.read_until(b"[Y/n] ")
    reading_its_terminal(prompt.pid)
    said = f"E: Could not get lock {path}. It is held by process {prompt.pid} (apt-get)"
    code, out, err = run_cli("why", said)
    assert code == 0, err
    (next_line,) = [line for line in out.splitlines() if line.startswith("  next:")]
    assert next_line.startswith("  next:   ask who is at its terminal: "), out
    assert f"(pid {prompt.pid}) is waiting for input at its terminal (/dev/" in next_line
    # Said once: the state's reason and the advice are not repeated under next.
    assert "held with fcntl/lockf" in out and "held with fcntl/lockf" not in next_line
    assert "dpkg --configure -a" in out and "dpkg" not in next_line
    prompt.write(b"n\n")


BUSY = """
import fcntl, sys
handle = open(sys.argv[1], "r+")
fcntl.flock(handle, fcntl.LOCK_EX)
print("held", flush=True)
while True:
    pass
"""


def test_a_holder_that_runs_is_said_to_be_running(tmp_path: Path) -> None:
    path = tmp_path / "busy.lock"
    path.write_text("")
    busy = subprocess.Popen(
        [sys.executable, "-c", BUSY, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert busy.stdout is not None and busy.stdout.readline().strip() == "held"
        code, out, err = run_cli("why", str(path))
    finally:
        busy.kill()
        busy.wait()
    assert code == 0, err
    assert "  next:   wait: python" in out and f"(pid {busy.pid}) is running" in out, out


def test_a_stale_holder_is_never_waited_on_and_an_inferred_one_is_broken_with_force() -> None:
    """The verdicts here are made up (the next step reads only the verdict): a
    stale holder gets the break, never "wait"; one stale by idle time alone (its
    client unseen, `inferred`) gets the --force a break of it needs."""
    from lockwatch.cli.why import next_step
    from lockwatch.cli.why_look import Finding
    from lockwatch.model.clues import Clue, ClueKind
    from lockwatch.model.lock import Lock, Reason
    from lockwatch.model.verdict import State, Verdict
    from tests.conftest import NOW

    lock = Lock(id="file:/srv/x.lock", source="file", format="plain", name="x.lock", path=None)
    clue = Clue(ClueKind.ID, lock.id, "file")
    idle = Reason("idle_in_transaction", "idle in transaction, holding locks, for 1m19s")
    for codes, force in (
        (("idle_in_transaction",), False),
        (("idle_in_transaction", "inferred"), True),
    ):
        reasons = tuple(Reason(code, idle.message) for code in codes)
        step = next_step(Finding(lock, Verdict(State.STALE, reasons), clue), NOW)
        assert step["action"] == "break" and step["text"].startswith("stale: lockwatch break ")
        assert "wait" not in step["text"]
        assert step["command"].endswith(" --force") is force
