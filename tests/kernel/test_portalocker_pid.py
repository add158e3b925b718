"""portalocker with its holder's pid written into the lock file (issue 31, item 2).

The real library in a real process: `portalocker.Lock(path, "w")`, the pid written
through the locked handle, then `release()` while the process lives on. The file
still names a live pid; no kernel lock is held; portalocker itself finds it free.

The dashboard saw the kernel lock on that file, so it knows the file for a kernel
lock's sentinel: once released, the kernel's answer (not held) outranks the pid
left in it, and the verdict is `free` like the library's. A one-shot `ls`, which
never saw the lock held, cannot tell this file from a lock whose rule is its
pid's life (an `echo $$ > x.lock` script): the pid decides there, and it says
`active` with the pid's live process (the file's own rule, not a guess of ours).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockwatch.model.verdict import State
from tests.kernel.test_dashboard import SIZE, file_id, live_app, state_of, until

portalocker = pytest.importorskip("portalocker")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="kernel locks are read from /proc/locks"
)

HOLDER = r"""
import os, sys, portalocker
lock = portalocker.Lock(sys.argv[1], mode="w", timeout=0, fail_when_locked=True)
handle = lock.acquire()
handle.write(str(os.getpid()))
handle.flush()
print("held", flush=True)
sys.stdin.readline()
lock.release()
print("released", flush=True)
sys.stdin.readline()
"""

LIBRARY_SAYS_HELD = r"""
import sys, portalocker
try:
    lock = portalocker.Lock(sys.argv[1], mode="a", timeout=0, fail_when_locked=True)
    lock.acquire()
except portalocker.AlreadyLocked:
    print("held")
else:
    lock.release()
    print("free")
"""


class Holder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.expect("held")

    def expect(self, word: str) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()  # the holder's own word: an event
        assert line == word, f"holder said {line!r}, expected {word!r}"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        self.expect("released")
        assert self.proc.poll() is None  # it lives on

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Holder]:
    root = tmp_path / "locks"
    root.mkdir()
    started = Holder(root / "app.lock")
    try:
        yield started
    finally:
        started.stop()


def library_says_held(path: Path) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", LIBRARY_SAYS_HELD, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip() == "held"


async def test_the_dashboard_follows_the_kernel_not_the_pid_left_in_the_file(
    holder: Holder,
) -> None:
    assert holder.path.read_text() == str(holder.proc.pid)
    lock = file_id(holder.path)
    app = live_app(holder.path.parent, kernel=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: state_of(app, lock) is not None, "the lock file's row")
        state, codes = state_of(app, lock) or (None, ())
        assert state is State.ACTIVE and "kernel_lock" in codes, (state, codes)
        assert library_says_held(holder.path)

        holder.release()
        await until(
            pilot,
            lambda: (state_of(app, lock) or (None,))[0] is State.FREE,
            "the released lock to show free although its file names a live pid",
        )
        assert "not_held" in app.board.verdict(lock).codes
        assert holder.path.read_text() == str(holder.proc.pid)  # the pid is still there
        assert not library_says_held(holder.path)
