"""cargo's package cache lock as the real cargo takes it: `cargo
generate-lockfile` against a registry on loopback that never answers holds
`$CARGO_HOME/.package-cache` (flock) while it waits, as a second cargo's
"Blocking waiting for file lock on package cache" says; lockwatch names the
same process. `Cargo.lock` beside it is never a lock."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import WAIT_S, codes, ls, need_tools, wait_until

MANIFEST = '[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n'
MANIFEST += '[dependencies]\nserde = "1"\n'


@pytest.fixture
def silent_registry() -> Iterator[int]:
    """A port on loopback that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=WAIT_S)
        for conn in accepted:
            conn.close()
        server.close()


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=WAIT_S)


def _project(tmp_path: Path, name: str) -> Path:
    project = tmp_path / name
    (project / "src").mkdir(parents=True)
    (project / "Cargo.toml").write_text(MANIFEST)
    (project / "src/main.rs").write_text("fn main() {}\n")
    (project / "Cargo.lock").write_text("# a dependency lockfile, not a lock\n")
    return project


def _cargo(
    project: Path, home: Path, started: list[subprocess.Popen[str]]
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        ["cargo", "generate-lockfile"],
        cwd=project,
        env={**os.environ, "CARGO_HOME": str(home), "CARGO_TERM_COLOR": "never"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started.append(proc)
    return proc


def test_the_package_cache_held_while_cargo_fetches(
    tmp_path: Path, silent_registry: int, started: list[subprocess.Popen[str]]
) -> None:
    need_tools("cargo")
    home = tmp_path / "cargo-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[source.crates-io]\nreplace-with = "silent"\n'
        # A git registry (any cargo, old or new, fetches one) whose server never answers.
        f'[source.silent]\nregistry = "http://127.0.0.1:{silent_registry}/index"\n'
        "[http]\ntimeout = 600\n[net]\nretry = 0\n"
    )
    first = _cargo(_project(tmp_path, "one"), home, started)
    cache = home / ".package-cache"
    wait_until("cargo to take its package cache lock", lambda: _flocked(cache), proc=first)
    second = _cargo(_project(tmp_path, "two"), home, started)
    assert second.stderr is not None
    line = second.stderr.readline()
    assert "Blocking waiting for file lock on package cache" in line, line

    rows = {Path(row["path"]).name: row for row in ls(home)["locks"]}
    row = rows[".package-cache"]
    assert row["format"] == "cargo" and row["state"] == "active", row
    assert row["holder"]["pid"] == first.pid and "cargo_lock" in codes(row), row
    assert "Cargo.lock" not in {Path(r["path"]).name for r in ls(tmp_path)["locks"]}


def _flocked(path: Path) -> bool:
    if not path.exists():
        return False
    inode = path.stat().st_ino
    with open("/proc/locks") as locks:
        return any(f":{inode} " in line and " FLOCK " in line for line in locks)
