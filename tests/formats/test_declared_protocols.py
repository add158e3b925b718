"""Issue 42, item 5 (issues 31 and 33's decision): files that cannot say how they
are locked, as real producers leave them, and the [[protocols]] declaration that
settles them.

- A released filelock sentinel (python `filelock`, real) is an empty file, byte
  for byte what npm's `lockfile` holds (tests/formats/test_npm_lockfile.py):
  `unknown (existence_unknown)`, the reason naming both readings and the file's
  age, and how to tell.
- A bare live pid with no kernel lock on it (a shell's `set -C; echo $$ > x.lock`,
  portalocker writing its pid then releasing): `active` by the pid rule, the
  other reading named (`live_pid_no_kernel_lock`), never a bare active.
- `[[protocols]]` in lockwatch.toml (the run's current directory) settles both:
  kind = "kernel" makes them `free (declared_kernel_sentinel)`, kind =
  "existence" `active (declared_existence)`.

Each listing is `lockwatch ls --json` as a user runs it (tests/formats/common.py),
its config a file in the run's own temporary home.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import (
    WAIT_S,
    clean_env,
    codes,
    declare,
    locks_dir,
    reap,
    records,
    start_ready,
)

RELEASE_FILELOCK = """
import sys, filelock
lock = filelock.FileLock(sys.argv[1], timeout=0)
lock.acquire()
lock.release()
"""
# portalocker's own idiom for a lock that names its holder: the pid written under
# the flock, which is released while the process goes on.
PORTALOCKER_PID = """
import os, sys, portalocker
with portalocker.Lock(sys.argv[1], mode="w", timeout=0, fail_when_locked=True) as fh:
    fh.write(str(os.getpid()))
    fh.flush()
print("held", flush=True)
sys.stdin.readline()
"""
# The shell idiom: noclobber makes `>` an O_EXCL create; the shell lives on.
SHELL_PID = 'set -C; echo $$ > "$1" && echo held && read line'


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        yield procs
    finally:
        reap(procs)


def released_filelock(directory: Path) -> Path:
    path = directory / "build.lock"
    subprocess.run([sys.executable, "-c", RELEASE_FILELOCK, str(path)], check=True, timeout=WAIT_S)
    assert path.read_bytes() == b""  # filelock leaves its sentinel, empty
    return path


def test_a_released_filelock_sentinel_is_unknown_naming_both_readings_and_its_age(
    tmp_path: Path,
) -> None:
    directory = locks_dir(tmp_path)
    released_filelock(directory)
    record = records(directory)["build.lock"]
    assert (record["state"], codes(record)) == ("unknown", ["existence_unknown"]), record
    message = record["reasons"][0]["message"]
    assert "last modified" in message and " ago" in message, message  # the file's age
    assert "sentinel" in message and "free" in message, message  # one reading
    assert "npm's lockfile" in message and "held" in message, message  # the other
    assert "[[protocols]]" in message, message  # how to settle it


@pytest.mark.parametrize(
    ("kind", "state", "code"),
    [("kernel", "free", "declared_kernel_sentinel"), ("existence", "active", "declared_existence")],
)
def test_the_declaration_settles_a_released_filelock_sentinel(
    tmp_path: Path, kind: str, state: str, code: str
) -> None:
    directory = locks_dir(tmp_path)
    released_filelock(directory)
    declare(directory, kind)
    record = records(directory)["build.lock"]
    assert record["state"] == state, record
    assert codes(record)[0] == code, record
    assert "existence_unknown" not in codes(record), record


def test_why_says_how_to_tell_a_released_sentinel(tmp_path: Path) -> None:
    directory = locks_dir(tmp_path)
    path = released_filelock(directory)
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "why", str(path)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=tmp_path,
        env=clean_env(home),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "state:  unknown (existence_unknown" in done.stdout, done.stdout
    assert "ask which tool makes it" in done.stdout, done.stdout
    assert 'kind = "kernel" or "existence"' in done.stdout, done.stdout


def start_pid_writer(kind: str, path: Path, started: list[subprocess.Popen[str]]) -> int:
    """A live process whose pid is all `path` holds, no kernel lock on it."""
    if kind == "shell":
        argv = ["sh", "-c", SHELL_PID, "sh", str(path)]
    else:
        argv = [sys.executable, "-c", PORTALOCKER_PID, str(path)]
    proc = start_ready(argv, started)
    assert path.read_text().strip() == str(proc.pid), path.read_text()
    return proc.pid


@pytest.mark.parametrize("writer", ["shell", "portalocker"])
def test_a_bare_live_pid_is_active_naming_the_sentinel_reading(
    tmp_path: Path, started: list[subprocess.Popen[str]], writer: str
) -> None:
    directory = locks_dir(tmp_path)
    pid = start_pid_writer(writer, directory / "job.lock", started)
    record = records(directory)["job.lock"]
    assert record["state"] == "active", record
    assert codes(record) == ["live_pid_no_kernel_lock"], record  # never a bare active
    assert record["holder"]["pid"] == pid, record
    message = record["reasons"][0]["message"]
    assert f"pid {pid} lives" in message, message
    assert "no kernel lock is held on it" in message and "released" in message, message


@pytest.mark.parametrize("writer", ["shell", "portalocker"])
@pytest.mark.parametrize(
    ("kind", "state", "code"),
    [("kernel", "free", "declared_kernel_sentinel"), ("existence", "active", "declared_existence")],
)
def test_the_declaration_settles_a_bare_live_pid(
    tmp_path: Path,
    started: list[subprocess.Popen[str]],
    writer: str,
    kind: str,
    state: str,
    code: str,
) -> None:
    directory = locks_dir(tmp_path)
    pid = start_pid_writer(writer, directory / "job.lock", started)
    declare(directory, kind)
    record = records(directory)["job.lock"]
    assert (record["state"], codes(record)) == (state, [code]), record
    assert f"pid {pid}" in record["reasons"][0]["message"], record


def test_the_declaration_leaves_other_paths_alone(tmp_path: Path) -> None:
    directory = locks_dir(tmp_path)
    released_filelock(directory)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "lockwatch.toml").write_text(  # a glob that matches nothing here
        f'[[protocols]]\npath = "{tmp_path.resolve()}/elsewhere/*"\nkind = "kernel"\n'
    )
    record = records(directory)["build.lock"]
    assert (record["state"], codes(record)) == ("unknown", ["existence_unknown"]), record


@pytest.mark.parametrize(
    ("kind", "state", "code"),
    [("kernel", "free", "declared_kernel_sentinel"), ("existence", "active", "declared_existence")],
)
async def test_the_dashboards_feed_takes_the_declaration_from_the_config(
    tmp_path: Path, kind: str, state: str, code: str
) -> None:
    # The dashboard's (and serve's) real file feed, as the file source builds it
    # from the config: never having seen the kernel hold the sentinel, it is settled
    # by the declaration alone.
    from lockwatch.clock import SystemClock
    from lockwatch.config import from_mapping
    from lockwatch.sources.contract import Wanted
    from lockwatch.sources.files.plugin import SOURCE
    from lockwatch.sources.registry import configured
    from tests.soak.test_churn import Watched, watching
    from tests.sources.test_file_feed import eventually, lock_id

    directory = locks_dir(tmp_path)
    path = released_filelock(directory)
    entry = {"path": f"{directory.resolve()}/*", "kind": kind}
    config = configured(from_mapping({"protocols": [entry]}))
    selected = SOURCE.select(Wanted((str(directory),), {}, config, {}))
    assert selected is not None
    (feed,) = selected.feeds(SystemClock(), socket.gethostname())
    watched = Watched(socket.gethostname())
    async with watching(feed, watched):  # type: ignore[arg-type]

        def settled() -> bool:
            said = watched.states().get(lock_id(path))
            return said is not None and (said[0], said[1][:1]) == (state, (code,))

        if not await eventually(settled):
            pytest.fail(f"the feed says {watched.states().get(lock_id(path))}, not {state}, {code}")
