"""The dashboard in a real terminal (tmux) that goes away: it must exit, not
draw into nothing for ever (as it did at 75 % CPU when SIGHUP was ignored)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(
    TMUX is None and not os.environ.get("CI"), reason="needs tmux (a real terminal)"
)
# Generous against a loaded CI machine (at a load of 20 on 2 cores, a Python start
# alone takes seconds); the dashboard itself takes well under 2 s. These bound the
# waits, they time nothing: a dashboard that never exits still fails.
START_S = 60.0
DEADLINE_S = 30.0


def _tmux(*args: str) -> str:
    assert TMUX is not None, "tmux is needed for the real-terminal tests"
    done = subprocess.run([TMUX, *args], capture_output=True, text=True, timeout=10)
    return done.stdout


@pytest.fixture
def session() -> Iterator[str]:
    name = f"lw-hangup-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run([TMUX or "tmux", "kill-session", "-t", name], capture_output=True)


def _wait(condition: object, what: str, within: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _gone(process: psutil.Process) -> bool:
    """Exited (a zombie too). It may exit between two looks at it: asking its
    status then finds no process, which is an answer, not an error."""
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("ignores_sighup", [False, True], ids=["sighup", "nohup"])
def test_the_dashboard_exits_when_its_terminal_goes_away(
    session: str, tmp_path: Path, ignores_sighup: bool
) -> None:
    (tmp_path / "app.lock").write_text('{"pid": 1}')
    command = " ".join(
        shlex.quote(part) for part in (sys.executable, "-m", "lockwatch", str(tmp_path))
    )
    trap = "trap '' HUP; " if ignores_sighup else ""
    # This checkout's lockwatch, whatever the current directory.
    here = shlex.quote(str(Path(__file__).resolve().parents[2]))
    _tmux(
        "new-session", "-d", "-s", session, "-x", "80", "-y", "24",
        f"cd {shlex.quote(str(tmp_path))}; {trap}PYTHONPATH={here} exec {command}",
    )  # fmt: skip
    pid = int(_tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())
    process = psutil.Process(pid)
    _wait(lambda: "app" in _tmux("capture-pane", "-p", "-t", session), "the dashboard", START_S)

    _tmux("kill-session", "-t", session)
    _wait(lambda: _gone(process), "exit")
