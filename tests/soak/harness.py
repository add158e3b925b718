"""What the soak tests share: how long they run, the writer fleet, the truth on
disk, memory, and the figures they report.

Durations: the fast variants (run in CI) take a few seconds each; the long ones
(`-m soak`) run `LOCKWATCH_SOAK_SECONDS` each (default 60). Figures measured go to
the test's output and, when `LOCKWATCH_SOAK_REPORT` names a file, one JSON line
each there: docs/reliability.md quotes them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

import lockwatch
from lockwatch.sources.files.scanner import MAX_LOCK_BYTES, SKIP_DIRS, is_candidate

CHECKOUT = str(Path(lockwatch.__file__).resolve().parent.parent)
WAIT_S = 30.0


def soak_seconds() -> float:
    """How long each long run lasts (`LOCKWATCH_SOAK_SECONDS`, default 60)."""
    return float(os.environ.get("LOCKWATCH_SOAK_SECONDS", "60"))


def report(test: str, **figures: Any) -> None:
    """Say what was measured (with -s or on failure), and keep it for docs/reliability.md."""
    line = json.dumps({"test": test, **figures}, sort_keys=True, default=str)
    print(f"\nsoak figures: {line}")
    where = os.environ.get("LOCKWATCH_SOAK_REPORT")
    if where:
        with open(where, "a") as out:
            out.write(line + "\n")


def rss_mb(pid: int | None = None) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 2**20


def wait_for(condition: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    """A bounded wait on a condition (never a blind sleep)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)


# --------------------------------------------------------------------------- the truth on disk


def disk_truth(root: str | Path) -> dict[str, str | None]:
    """Every lock file under `root` as lockwatch names them (`file:<path>`), with the
    sha256 of its bytes (None: over the size any lock file may have, so not read):
    read here with a walk of our own that never follows a symlink, the standard the
    feeds are held to. Regular files only."""
    found: dict[str, str | None] = {}
    stack = [os.fspath(root)]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if entry.name not in SKIP_DIRS and not is_candidate(entry.path, "dir"):
                    stack.append(entry.path)
                continue
            if not stat.S_ISREG(mode) or not is_candidate(entry.path, "file"):
                continue
            try:
                fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(MAX_LOCK_BYTES + 1)
            too_large = len(data) > MAX_LOCK_BYTES
            found[f"file:{entry.path}"] = None if too_large else hashlib.sha256(data).hexdigest()
    return found


def differences(seen: dict[str, str | None], truth: dict[str, str | None]) -> list[str]:
    """What a view gets wrong, said plainly (empty: it matches)."""
    out = [f"missing {lock}" for lock in sorted(truth.keys() - seen.keys())]
    out += [f"ghost {lock}" for lock in sorted(seen.keys() - truth.keys())]
    out += [
        f"stale bytes {lock}"
        for lock in sorted(truth.keys() & seen.keys())
        if seen[lock] != truth[lock]
    ]
    return out


def ls_json(*args: str, timeout: float = 120.0) -> dict[str, Any]:
    """`lockwatch ls --json ARGS` as a process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=CHECKOUT,
    )
    assert done.returncode in (0, 1), done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


# --------------------------------------------------------------------------- the writers


@dataclass
class Writers:
    """One process of writer threads (tests/soak/writers.py)."""

    process: subprocess.Popen[str]
    first: int
    count: int
    summary: dict[str, Any] = field(default_factory=dict)

    def line(self, timeout: float = WAIT_S) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise AssertionError(f"writers {self.process.pid} said nothing in {timeout:g}s")
        text = self.process.stdout.readline()
        if not text:
            err = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(f"writers {self.process.pid} stopped: {err}")
        answer: dict[str, Any] = json.loads(text)
        return answer

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()


class Fleet:
    """`processes` writer processes of `per_process` writer threads each under `root`,
    at `rate` lock operations per second in all."""

    def __init__(
        self,
        root: Path,
        *,
        processes: int,
        per_process: int,
        rate: float,
        seed: int = 0,
        kinds: tuple[str, ...] | None = None,
        user: list[str] | None = None,
    ) -> None:
        self.root = root
        self.groups: list[Writers] = []
        self.began = 0.0
        for index in range(processes):
            spec: dict[str, Any] = {
                "root": str(root),
                "writers": per_process,
                "first": index * per_process,
                "rate": rate / processes,
                "seed": seed,
            }
            if kinds is not None:
                spec["kinds"] = list(kinds)
            process = subprocess.Popen(
                [*(user or []), sys.executable, "-m", "tests.soak.writers", json.dumps(spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=CHECKOUT,
                env={**os.environ, "PYTHONPATH": CHECKOUT, "PYTHONDONTWRITEBYTECODE": "1"},
                start_new_session=True,
            )
            self.groups.append(Writers(process, index * per_process, per_process))

    @property
    def writers(self) -> int:
        return sum(group.count for group in self.groups)

    @property
    def pids(self) -> list[int]:
        return [group.process.pid for group in self.groups]

    def start(self) -> None:
        for group in self.groups:
            ready = group.line(timeout=60)
            assert ready.get("ready"), ready
        self.began = time.monotonic()

    def stop(self) -> dict[str, Any]:
        """Every writer leaves its lock held or released; what they did, in all."""
        for group in self.groups:
            group.send("stop")
        for group in self.groups:
            group.summary = group.line(timeout=90)
            assert group.summary["errors"] == [], group.summary["errors"]
            assert group.summary["alive_threads"] == 0
        seconds = max(group.summary["seconds"] for group in self.groups)
        ops = sum(group.summary["ops"] for group in self.groups)
        return {
            "writers": self.writers,
            "ops": ops,
            "seconds": round(seconds, 2),
            "ops_per_second": round(ops / seconds, 1),
            "failed_ops": sum(group.summary["failures"] for group in self.groups),
            "op_errors": [e for group in self.groups for e in group.summary["op_errors"]][:5],
        }

    def held_by(self, group: Writers) -> dict[str, str]:
        """`file:<path>` -> kind, for the locks that group's writers left held."""
        return {f"file:{path}": kind for path, kind in group.summary["held"].items()}

    def kill(self, group: Writers) -> None:
        """SIGKILL, as a crash: its locks stay behind."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group.process.pid, signal.SIGKILL)
        group.process.wait(timeout=WAIT_S)

    def close(self) -> None:
        for group in self.groups:
            if group.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group.process.pid, signal.SIGKILL)
            group.process.wait(timeout=WAIT_S)
            for stream in (group.process.stdin, group.process.stdout, group.process.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()


@contextlib.contextmanager
def fleet(root: Path, **options: Any) -> Iterator[Fleet]:
    writers = Fleet(root, **options)
    try:
        writers.start()
        yield writers
    finally:
        writers.close()
