"""Starting the demo's children and making sure none outlives the demo.

Each child is `python -m lockwatch.demo.children KIND ...`, in a process group of its
own (a Ctrl+C at the terminal is the demo's to handle, not theirs), with its output in
the workspace's `logs/`. Stopping is SIGTERM to each group, then SIGKILL to whatever is
left after a grace period, and every child is reaped. Children also stop by themselves
when the demo's process goes away (see children.py), and the guardian cleans up what a
demo killed with SIGKILL could not.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import lockwatch
from lockwatch.demo.workspace import Workspace

CHILD_MODULE = "lockwatch.demo.children"
TERM_GRACE_S = 2.0
REAP_S = 5.0


@dataclass(frozen=True, slots=True)
class Role:
    """One child of the demo: a unique name (its log file), what kind of program it is,
    that program's options, and in a few words what it shows."""

    name: str
    kind: str
    args: tuple[str, ...]
    about: str


@dataclass(frozen=True, slots=True)
class Child:
    role: Role
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid


def _environment() -> dict[str, str]:
    """The children must import this very lockwatch, also when it runs from a checkout
    rather than an installed package."""
    env = dict(os.environ)
    package_root = str(Path(lockwatch.__file__).resolve().parent.parent)
    installed = {
        str(Path(path).resolve())
        for path in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])
    }
    if package_root not in installed:
        # Not prepended when installed: site-packages ahead of the stdlib could shadow it.
        env["PYTHONPATH"] = os.pathsep.join(
            part for part in (package_root, env.get("PYTHONPATH", "")) if part
        )
    return env


def command(kind: str, args: Sequence[str], *, label: str, pdeathsig: bool) -> list[str]:
    cmd = [sys.executable, "-m", CHILD_MODULE, kind, "--label", label]
    if kind != "guardian":
        cmd += ["--parent", str(os.getpid())]
        if pdeathsig:
            cmd.append("--pdeathsig")
    return [*cmd, *args]


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    # Only a child not yet reaped: its pid (and group id) cannot have been reused.
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:
        with contextlib.suppress(OSError):
            process.send_signal(signum)


class Supervisor:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.children: list[Child] = []
        self._env = _environment()
        # PR_SET_PDEATHSIG fires when the *thread* that started a child ends: only
        # asked for when that thread is the main one, which lives as long as the demo.
        self._pdeathsig = threading.current_thread() is threading.main_thread()
        self._lock = threading.Lock()

    def _log(self, name: str) -> IO[bytes]:
        return (self.workspace.logs / f"{name}.log").open("ab")

    def popen(
        self, kind: str, args: Sequence[str], *, label: str, stdin: int
    ) -> subprocess.Popen[bytes]:
        with self._log(label) as log:
            return subprocess.Popen(
                command(kind, args, label=label, pdeathsig=self._pdeathsig),
                stdout=log,
                stderr=log,
                cwd=self.workspace.root,
                env=self._env,
                process_group=0,
                close_fds=True,
                stdin=stdin,
            )

    def start(self, role: Role) -> Child:
        process = self.popen(role.kind, role.args, label=role.name, stdin=subprocess.DEVNULL)
        child = Child(role, process)
        with self._lock:
            self.children.append(child)
        return child

    def find(self, name: str) -> Child | None:
        return next((child for child in self.children if child.role.name == name), None)

    def kill(self, name: str) -> int | None:
        """SIGKILL one child (and reap it): its lock stays behind. Its pid, or None."""
        child = self.find(name)
        if child is None or child.process.poll() is not None:
            return None
        _signal_group(child.process, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.process.wait(REAP_S)
        return child.pid

    def stop(self, grace: float = TERM_GRACE_S) -> list[str]:
        """Stop every child: SIGTERM, `grace` seconds, SIGKILL; all reaped. Problems
        (a child that would not die) are returned, not raised."""
        with self._lock:
            children = list(self.children)
        alive = [child for child in children if child.process.poll() is None]
        for child in alive:
            _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for child in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(max(0.0, deadline - time.monotonic()))
        problems = []
        for child in alive:
            if child.process.poll() is None:
                _signal_group(child.process, signal.SIGKILL)
                try:
                    child.process.wait(REAP_S)
                except subprocess.TimeoutExpired:
                    problems.append(f"{child.role.name} (pid {child.pid}) would not die")
        return problems


class Guardian:
    """The parent's end of the guardian child: tell it what was started; on a clean
    exit say so, and it leaves without touching anything."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.process: subprocess.Popen[bytes] = supervisor.popen(
            "guardian", (), label="guardian", stdin=subprocess.PIPE
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def tell(self, **message: object) -> None:
        pipe = self.process.stdin
        if pipe is None or pipe.closed:
            return
        with contextlib.suppress(OSError, ValueError):
            pipe.write(json.dumps(message).encode() + b"\n")
            pipe.flush()

    def dismiss(self) -> list[str]:
        """Everything is cleaned up: the guardian may go."""
        self.tell(done=True)
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(REAP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(REAP_S)
            return [f"the guardian (pid {self.pid}) had to be killed"]
        return []
