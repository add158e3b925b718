"""`lockwatch serve` for the tests: real processes on free loopback ports, and the
binaries the Prometheus tests need (Debian's `prometheus` package: prometheus,
promtool), which fail instead of skipping where CI demands them
(LOCKWATCH_REQUIRE_PG=1: CI installs them)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

# The PostgreSQL fixtures (pg_dsn, pg_db, pg: a harness that makes contention).
from tests.postgres.conftest import pg, pg_db, pg_dsn, unavailable  # noqa: F401

# Every wait is bounded by this; healthy runs need a fraction of it.
WAIT_S = 20.0
_LISTENING = re.compile(r"listening on (http://\S+)")


def binary(name: str) -> str:
    """The path of `name`, or a skip (a failure in CI) saying how to get it."""
    found = shutil.which(name) or (
        f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None
    )
    if found is None:
        unavailable(f"no {name}: install Debian's prometheus package (apt-get install prometheus)")
    return found


def wait_for(predicate: object, what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


class Served:
    """A `lockwatch serve` process: its URL once it listens, its stderr so far."""

    def __init__(self, args: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.args = list(args)
        command = [sys.executable, "-m", "lockwatch", "serve", "--listen", "127.0.0.1:0", *args]
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: list[str] = []
        self.url: str | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            match = _LISTENING.search(line)
            if match and self.url is None:
                self.url = match.group(1)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_listening(self) -> str:
        wait_for(
            lambda: self.url is not None or self.process.poll() is not None,
            f"lockwatch serve {self.args} to listen",
        )
        if self.url is None:
            pytest.fail(f"lockwatch serve exited {self.process.poll()}: {self.stderr}")
        return self.url

    def wait_healthy(self, token: str | None = None) -> str:
        url = self.wait_listening()

        def healthy() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            return False

        wait_for(healthy, f"{url}/healthz to say ok")
        return url

    def stop(self) -> int:
        """SIGTERM, as systemd stops it; its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(WAIT_S)
        self._reader.join(5)
        return code


@contextlib.contextmanager
def serving(args: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> Iterator[Served]:
    served = Served(args, cwd, env)
    try:
        yield served
    finally:
        served.stop()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dead_pid() -> int:
    """A pid no process has now: a child that already exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def stale_tree(root: Path, names: Sequence[str] = ("deploy",)) -> list[Path]:
    """Lock files under `root` whose holders are dead (stale: holder_dead), and one
    held by this test process (active)."""
    root.mkdir(parents=True, exist_ok=True)
    made = []
    for name in names:
        path = root / f"{name}.pid"
        path.write_text(f"{dead_pid()}\n")
        made.append(path)
    (root / "alive.pid").write_text(f"{os.getpid()}\n")
    return made
