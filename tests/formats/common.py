"""Helpers shared by the tests/formats tests.

lockwatch runs as a real `python -m lockwatch ls --json` process in a clean
environment (`clean_env`), its records are picked out by path or name, and the
tools' helper processes signal readiness on stdout and are killed and reaped at
teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kernel.test_real_libraries import clean_env as _kernel_clean_env
from tests.kernel.test_real_libraries import run_ls as run_ls  # re-exported

WAIT_S = 30.0
LS_TIMEOUT = 60.0

Record = dict[str, Any]


# --------------------------------------------------------------------------- the real tools


def need_tools(*commands: str) -> None:
    """Skip unless every command is installed; in CI (LOCKWATCH_REQUIRE_TOOLS, set
    by .ci/run, which installs them) fail instead: a test of a real tool never
    passes by not running it."""
    missing = [command for command in commands if shutil.which(command) is None]
    if not missing:
        return
    why = f"not installed: {', '.join(missing)}"
    if os.environ.get("LOCKWATCH_REQUIRE_TOOLS"):
        pytest.fail(f"{why} (LOCKWATCH_REQUIRE_TOOLS is set)", pytrace=False)
    pytest.skip(why)


# --------------------------------------------------------------------------- running lockwatch


def clean_env(home: Path) -> dict[str, str]:
    """The environment for a lockwatch subprocess (as tests/kernel/test_real_libraries.py):
    no LOCKWATCH_*/PG* variables, XDG_CONFIG_HOME an empty `home/config` (made, with
    `home`, if missing), PYTHONPATH this checkout."""
    (home / "config").mkdir(parents=True, exist_ok=True)
    return _kernel_clean_env(home)


def lockwatch_ls(
    directory: Path, home: Path, *, cwd: Path | None = None, timeout: float = LS_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """`python -m lockwatch ls --json DIRECTORY` as a user runs it, in `clean_env(home)`."""
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", str(directory)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=clean_env(home),
        check=False,
    )


def ls_document(
    done: subprocess.CompletedProcess[str], exit_codes: Collection[int] | None = (0,)
) -> dict[str, Any]:
    """The JSON document `ls --json` printed, once it exited with one of
    `exit_codes` (None: any exit code, as long as it printed something)."""
    if exit_codes is not None:
        assert done.returncode in exit_codes, done.stderr[-2000:]
    assert done.stdout, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def ls_json(
    directory: Path,
    home: Path,
    *,
    cwd: Path | None = None,
    timeout: float = LS_TIMEOUT,
    exit_codes: Collection[int] | None = (0,),
) -> dict[str, Any]:
    """`lockwatch_ls` and `ls_document` in one: the document of one listing."""
    return ls_document(lockwatch_ls(directory, home, cwd=cwd, timeout=timeout), exit_codes)


def ls(directory: Path) -> dict[str, Any]:
    """The listing of `directory`, run from `<its parent>/home` (exit 0, or 3 on stale)."""
    home = directory.parent / "home"
    home.mkdir(exist_ok=True)
    return ls_json(directory, home, cwd=home, exit_codes=(0, 3))


def declare(directory: Path, kind: str) -> None:
    """lockwatch.toml in the directory `ls` runs lockwatch from (`<its parent>/home`),
    declaring `directory`'s lock files `kind` ([[protocols]]: "kernel" or "existence")."""
    home = directory.parent / "home"
    home.mkdir(exist_ok=True)
    path = f"{directory.resolve()}/*"
    (home / "lockwatch.toml").write_text(f'[[protocols]]\npath = "{path}"\nkind = "{kind}"\n')


def records(directory: Path) -> dict[str, Record]:
    """`ls(directory)`'s records by file name."""
    return by_name(ls(directory)["locks"])


def by_name(locks: Iterable[Record]) -> dict[str, Record]:
    """Records by the file name of their path."""
    return {Path(lock["path"]).name: lock for lock in locks}


def by_path(locks: Iterable[Record]) -> dict[str, Record]:
    """Records by their path."""
    return {lock["path"]: lock for lock in locks}


def file_records(locks: Iterable[Record]) -> list[Record]:
    """Only the file source's records."""
    return [lock for lock in locks if lock["source"] == "file"]


def record(directory: Path, name: str) -> Record | None:
    """The record of the lock `name` in `directory` (tests/kernel's `run_ls`), if listed."""
    want = os.path.join(os.path.realpath(directory), name)
    found = [r for r in run_ls(directory).locks if r.get("path") == want]
    assert len(found) <= 1, found
    return found[0] if found else None


def codes(record: Record) -> list[str]:
    """The record's reason codes, in order."""
    return [reason["code"] for reason in record["reasons"]]


def run_break(
    lock_id: str, home: Path, audit_log: Path, timeout: float = WAIT_S
) -> subprocess.CompletedProcess[str]:
    """`lockwatch break --force --yes` of one lock, as a real process run from `home`."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lockwatch",
            "break",
            "--force",
            "--yes",
            "--reason",
            "test",
            "--audit-log",
            str(audit_log),
            lock_id,
        ],
        capture_output=True,
        text=True,
        cwd=home,
        env=clean_env(home),
        timeout=timeout,
        check=False,
    )


# --------------------------------------------------------------------------- time and files


def wait_until(
    what: str,
    condition: Callable[[], object],
    *,
    timeout: float = WAIT_S,
    interval: float = 0.02,
    proc: subprocess.Popen[Any] | None = None,
) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds, or as soon as
    `proc` (if given) exits first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what}: the process exited with {proc.returncode} first")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(interval)


def set_mtime(path: Path, when: float) -> None:
    """Set the file's atime and mtime to `when` (epoch seconds)."""
    os.utime(path, (when, when))


def age(path: Path, seconds: float) -> None:
    """Set the file's atime and mtime `seconds` back from now."""
    set_mtime(path, time.time() - seconds)


# --------------------------------------------------------------------------- helper processes


def python_says(script: str, *args: str, timeout: float | None = None) -> str:
    """What `python -c SCRIPT ARGS` prints (stripped): a tool's own answer, from a
    fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    return done.stdout.strip()


def start_ready(
    argv: list[str],
    started: list[subprocess.Popen[str]] | None = None,
    *,
    env: dict[str, str] | None = None,
    new_session: bool = False,
) -> subprocess.Popen[str]:
    """Start a helper (stdin and stdout piped, text) that prints `held` once it holds
    its lock, and return it then. It is added to `started` (if given) before that,
    so that teardown reaps it even if it never gets there."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=new_session,
    )
    if started is not None:
        started.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "held\n", line
    return proc


def say(proc: subprocess.Popen[str], line: str) -> str:
    """Write `line` to the helper's stdin, return the line it answers (unstripped)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline()


def kill_and_reap(proc: subprocess.Popen[Any], timeout: float = WAIT_S) -> None:
    """SIGKILL the process (unless it has exited) and reap it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=timeout)


def reap(procs: Iterable[subprocess.Popen[Any]], timeout: float = WAIT_S) -> None:
    """Teardown: `kill_and_reap` each process."""
    for proc in procs:
        kill_and_reap(proc, timeout)


def reap_groups(procs: Iterable[subprocess.Popen[Any]], timeout: float = WAIT_S) -> None:
    """Teardown: SIGKILL each process's whole group (started with a session of its
    own, its children die with it), then reap it."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)


def dead_pid() -> int:
    """A pid that ran a moment ago and is reaped: nobody has it now."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=WAIT_S)
    return proc.pid


def holder_script(take: str, release: str) -> str:
    """A `python -c` script for a Holder: `take` (lines after `import sys`) holds
    the lock; it prints `held`, runs `release` on a line on stdin and prints
    `released`, and exits on the next line."""
    return (
        f"\nimport sys\n{take}\n"
        'sys.stdout.write("held\\n"); sys.stdout.flush()\n'
        "sys.stdin.readline()\n"
        f"{release}\n"
        'sys.stdout.write("released\\n"); sys.stdout.flush()\n'
        "sys.stdin.readline()\n"
    )


class Holder:
    """A helper process that holds a lock (see `holder_script`): it prints `held`,
    then, on a line on its stdin, releases it and prints `released`, and exits on
    the next line."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = start_ready(argv)

    def release(self) -> None:
        assert say(self.proc, "") == "released\n"

    def kill(self) -> None:
        kill_and_reap(self.proc, timeout=10)


def hold_in(holders: list[Holder], argv: list[str]) -> Holder:
    """Start a Holder running `argv` and add it to `holders` once it holds its lock."""
    holder = Holder(argv)
    holders.append(holder)
    return holder


def killed_at_teardown() -> Iterator[list[Holder]]:
    """The body of a `holders` fixture: the list a test adds its Holders to, each
    killed (and reaped: filelock counts a zombie as alive) at teardown."""
    started: list[Holder] = []
    try:
        yield started
    finally:
        for holder in started:
            holder.kill()


def locks_dir(tmp_path: Path) -> Path:
    """A fresh `tmp_path/locks` directory: nothing else is listed in it."""
    directory = tmp_path / "locks"
    directory.mkdir()
    return directory
