"""git's own lock files, with the real git (/usr/bin/git) as the producer.

git keeps a lock held while a hook runs: a pre-commit hook during `git commit
-a` (index.lock, with GIT_INDEX_FILE pointing at it), a reference-transaction
hook in its "prepared" state (refs/heads/<b>.lock). The hooks here write their
pid to a file once git is waiting on them and wait for a `go` file, so every
"held" moment is reached by a bounded poll, never a sleep. git's own answer is
its next command: `git add` fails with "Another git process seems to be
running in this repository" while an index.lock exists, and `git gc` refuses
("gc is already running on machine ...") or runs over a gc.pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import State, evaluate
from lockwatch.sources.files.decoders import git as git_format
from lockwatch.sources.files.facts import facts_of
from lockwatch.sources.files.scanner import load
from lockwatch.sources.files.users import attach_users, scan_git_processes
from lockwatch.sources.processes import HostProcesses
from tests.formats.common import (
    Record,
    age,
    by_path,
    codes,
    file_records,
    ls_json,
    wait_until,
)

GIT = shutil.which("git") or "/usr/bin/git"
POLL_SECONDS = 30.0
HOST = socket.gethostname()

pytestmark = pytest.mark.skipif(
    not os.path.exists(GIT) or not os.path.isdir("/proc/self"), reason="needs git and /proc"
)

# --------------------------------------------------------------------------- helpers


def git_env(home: Path) -> dict[str, str]:
    """No user or system git config, no inherited GIT_* (a test run from a hook)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
        LC_ALL="C",
    )
    return env


def run_ls(directory: Path) -> dict[str, Record]:
    """`lockwatch ls --json DIRECTORY` as a user runs it, file records by path."""
    home = directory.parent / "lockwatch-home"
    doc = ls_json(directory, home, cwd=directory.parent, exit_codes=None)
    return by_path(file_records(doc["locks"]))


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GIT, *args],
        cwd=repo,
        env=git_env(repo.parent),
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2 :].startswith((b"Z", b"X"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "r"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "f").write_text("one\n")
    git(path, "add", "f")
    git(path, "commit", "-qm", "one")
    return path


WAITING_HOOK = """#!/bin/sh
{guard}
cat >/dev/null
echo $$ > "{ready}"
while [ ! -e "{go}" ]; do sleep 0.02; done
"""


@dataclass
class Held:
    """A git command stopped inside a hook while it holds its lock."""

    process: subprocess.Popen[str]
    ready: Path
    go: Path
    hook_pid: int = 0
    started: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def release(self) -> int:
        self.go.touch()
        return self.process.wait(timeout=POLL_SECONDS)

    def kill(self) -> None:
        """SIGKILL git mid-command (its hook, orphaned, is killed too)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=POLL_SECONDS)
        self.stop_hook()

    def stop_hook(self) -> None:
        if self.hook_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.hook_pid, signal.SIGKILL)
            self.hook_pid = 0


Hold = Callable[..., Held]


@pytest.fixture
def hold() -> Iterator[Hold]:
    held: list[Held] = []

    def start(
        repo: Path, hook: str, argv: list[str], guard: str = "", cwd: Path | None = None
    ) -> Held:
        hooks = repo / ".git" / "hooks"
        ready, go = repo.parent / f"{hook}.ready", repo.parent / f"{hook}.go"
        script = hooks / hook
        script.write_text(WAITING_HOOK.format(guard=guard, ready=ready, go=go))
        script.chmod(0o755)
        process = subprocess.Popen(
            [GIT, *argv],
            cwd=cwd or repo,
            env=git_env(repo.parent),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        one = Held(process, ready, go)
        held.append(one)
        wait_until(
            f"{hook} hook of `git {' '.join(argv)}`",
            lambda: (
                (ready.exists() and ready.read_text().strip() != "") or process.poll() is not None
            ),
        )
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        one.hook_pid = int(ready.read_text())
        return one

    yield start
    for one in held:
        one.go.touch()
        try:
            one.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            one.process.kill()
            one.process.wait()
        one.stop_hook()


def commit_all(repo: Path, hold: Hold, cwd: Path | None = None) -> Held:
    """`git commit -a` stopped in its pre-commit hook: index.lock is held."""
    target = cwd or repo
    with open(target / "f", "a") as handle:
        handle.write("more\n")
    return hold(repo, "pre-commit", ["commit", "-a", "-m", "two"], cwd=cwd)


def assert_git_refuses(repo: Path) -> None:
    """git's own answer on index.lock: taken, by somebody."""
    (repo / "g").write_text("x\n")
    done = git(repo, "add", "g", check=False)
    assert done.returncode == 128, done.stderr
    assert "index.lock': File exists" in done.stderr
    assert "Another git process seems to be running in this repository" in done.stderr


# --------------------------------------------------------------------------- index.lock


def test_index_lock_held_by_git_commit_then_released(repo: Path, hold: Hold) -> None:
    held = commit_all(repo, hold)
    lock = repo / ".git" / "index.lock"
    assert lock.read_bytes().startswith(b"DIRC")  # git's new index, as git wrote it

    record = run_ls(repo)[str(lock)]
    assert record["format"] == "git"
    assert record["name"] == "index"
    assert record["state"] == "active", record
    assert record["reasons"] == []
    assert record["holder"]["pid"] == held.pid
    assert record["holder"]["alive"] is True
    assert_git_refuses(repo)

    assert held.release() == 0
    assert not lock.exists()
    assert str(lock) not in run_ls(repo)


def test_sigkill_mid_commit_leaves_a_stale_index_lock(repo: Path, hold: Hold) -> None:
    held = commit_all(repo, hold)
    lock = repo / ".git" / "index.lock"
    held.kill()
    assert lock.exists()  # SIGKILL runs no atexit/signal cleanup
    age(lock, 60)

    record = run_ls(repo)[str(lock)]
    assert record["format"] == "git"
    assert record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]
    assert record["reasons"][0]["message"] == "no git process in this repository"
    assert record["holder"]["pid"] is None

    # git agrees: the leftover blocks every git that needs the index.
    (repo / "f").write_text("again\n")
    done = git(repo, "commit", "-am", "three", check=False)
    assert done.returncode == 128
    assert "Another git process seems to be running in this repository" in done.stderr


def test_index_lock_of_a_linked_worktree(repo: Path, hold: Hold) -> None:
    worktree = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", str(worktree))
    held = commit_all(repo, hold, cwd=worktree)
    lock = repo / ".git" / "worktrees" / "wt" / "index.lock"
    assert lock.exists()

    record = run_ls(repo)[str(lock)]
    assert record["name"] == "worktrees/wt/index"
    assert record["state"] == "active", record
    assert record["holder"]["pid"] == held.pid

    held.kill()
    age(lock, 60)
    record = run_ls(repo)[str(lock)]
    assert record["state"] == "stale"
    assert codes(record) == ["holder_dead"]


def test_empty_index_lock_nobody_works_on_is_stale(repo: Path) -> None:
    # Byte-for-byte what git's O_EXCL create leaves before it writes: nothing.
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    age(lock, 30)

    record = run_ls(repo)[str(lock)]
    assert record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]
    assert_git_refuses(repo)


def test_young_unused_lock_is_within_grace(repo: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    record = run_ls(repo)[str(lock)]
    assert record["state"] == "active", record  # git may just have made it


@pytest.mark.parametrize(
    "content",
    [b"DIRC\x00\x00", b"\x00\xff garbage \x00" * 50, b"not an index at all\n", b"DIRC"],
    ids=["truncated", "binary", "text", "magic-only"],
)
def test_any_content_is_gits_own_never_invalid(repo: Path, content: bytes) -> None:
    # git never reads a lock file back: whatever it holds, the file is the lock.
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(content)
    age(lock, 30)
    record = run_ls(repo)[str(lock)]
    assert record["format"] == "git"
    assert record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]


def test_the_index_lock_of_a_big_repository_is_gits_not_too_large(repo: Path) -> None:
    """A repository of a few thousand files has an index over lockwatch's 64 KiB
    read limit: still git's lock (read from its first bytes), never `too_large`."""
    for i in range(3000):
        (repo / f"f{i:04d}.txt").write_text("x")
    git(repo, "add", "-A")
    index = (repo / ".git" / "index").read_bytes()
    assert len(index) > 64 * 1024 and index.startswith(b"DIRC")
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(index)  # a leftover from a killed `git add`: the index it was writing
    age(lock, 30)
    record = run_ls(repo)[str(lock)]
    assert record["format"] == "git" and record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]
    assert record["sha256"] is None  # not read whole
    assert_git_refuses(repo)


# --------------------------------------------------------------------------- ref locks


REF_GUARD = '[ "$1" = prepared ] || exit 0'


def test_ref_lock_held_during_update_ref_then_killed(repo: Path, hold: Hold) -> None:
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    held = hold(
        repo, "reference-transaction", ["update-ref", "refs/heads/x", head], guard=REF_GUARD
    )
    lock = repo / ".git" / "refs" / "heads" / "x.lock"
    assert lock.read_bytes() == f"{head}\n".encode()  # `<oid>\n`, as git wrote it

    record = run_ls(repo)[str(lock)]
    assert record["format"] == "git"
    assert record["name"] == "refs/heads/x"
    assert record["state"] == "active", record
    assert record["holder"]["pid"] == held.pid

    # git's own answer: the ref is locked.
    done = git(repo, "-c", "core.filesRefLockTimeout=0", "branch", "-f", "x", "HEAD", check=False)
    assert done.returncode != 0 and "x.lock" in done.stderr, done.stderr

    held.kill()
    (repo / ".git" / "hooks" / "reference-transaction").unlink()
    age(lock, 60)
    record = run_ls(repo)[str(lock)]
    assert record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]


def test_leftover_ref_lock_with_an_oid_is_stale_not_invalid(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    lock = repo / ".git" / "refs" / "heads" / "y.lock"
    lock.write_bytes(f"{head}\n".encode())  # byte-for-byte git's ref lock content
    age(lock, 60)
    record = run_ls(repo)[str(lock)]
    assert record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]


# --------------------------------------------------------------------------- gc.pid


def gc(repo: Path) -> subprocess.CompletedProcess[str]:
    return git(repo, "gc", "--quiet", check=False)


def test_gc_pid_held_by_a_running_gc_then_killed(repo: Path) -> None:
    # gc holds gc.pid while its `git pack-refs` child waits for packed-refs.lock:
    # ours, made as git makes it (empty), with the wait set to forever.
    blocker = repo / ".git" / "packed-refs.lock"
    blocker.write_bytes(b"")
    process = subprocess.Popen(
        [GIT, "-c", "core.packedRefsTimeout=-1", "gc", "--quiet"],
        cwd=repo,
        env=git_env(repo.parent),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pidfile = repo / ".git" / "gc.pid"
    waiting: list[int] = []
    try:
        wait_until("gc's pack-refs child", lambda: bool(children(process.pid)))
        waiting = children(process.pid)
        assert pidfile.read_bytes() == f"{process.pid} {HOST}".encode()

        listing = run_ls(repo)
        record = listing[str(pidfile)]
        assert record["format"] == "git"
        assert record["state"] == "active", record
        assert record["holder"]["pid"] == process.pid
        assert record["holder"]["alive"] is True
        # Our packed-refs.lock: git processes are at work in the repository.
        assert listing[str(blocker)]["state"] == "active"

        refused = gc(repo)
        assert refused.returncode == 128
        assert f"gc is already running on machine '{HOST}' pid {process.pid}" in refused.stderr

        process.send_signal(signal.SIGKILL)
        process.wait(timeout=POLL_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in waiting:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    blocker.unlink()
    wait_until("pack-refs to exit", lambda: all(gone(pid) for pid in waiting))

    record = run_ls(repo)[str(pidfile)]
    assert record["state"] == "stale", record
    assert codes(record) == ["holder_dead"]
    # git agrees: a dead pid on this host does not stop the next gc.
    assert gc(repo).returncode == 0
    assert not pidfile.exists()


def write_gc_pid(repo: Path, pid: int, host: str, hours: float) -> Path:
    # Byte-for-byte git's "%"PRIuMAX" %s" (no newline), for a gc on `host`:
    # no second machine is at hand, and git reads only these bytes and the mtime.
    pidfile = repo / ".git" / "gc.pid"
    pidfile.write_bytes(f"{pid} {host}".encode())
    age(pidfile, hours * 3600)
    return pidfile


@pytest.mark.parametrize(
    ("host", "hours", "state", "reason_codes", "git_runs"),
    [
        ("otherhost", 0, "active", ["foreign_host"], False),
        ("otherhost", 13, "stale", ["too_old", "foreign_host"], True),
        (HOST, 11, "active", [], False),
        (HOST, 12.1, "stale", ["too_old"], True),
    ],
    ids=["foreign-fresh", "foreign-13h", "live-11h", "live-12h6m"],
)
def test_gc_pid_age_and_host_as_gc_reads_them(
    repo: Path, host: str, hours: float, state: str, reason_codes: list[str], git_runs: bool
) -> None:
    # A live pid here: the test's own (foreign rows: never checked, as gc does).
    pidfile = write_gc_pid(repo, os.getpid(), host, hours)
    record = run_ls(repo)[str(pidfile)]
    assert record["state"] == state, record
    assert codes(record) == reason_codes

    done = gc(repo)
    if git_runs:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 128
        assert f"gc is already running on machine '{host}'" in done.stderr


@pytest.mark.parametrize("content", [b"garbage", b"", b"12345"], ids=["word", "empty", "no-host"])
def test_unparseable_gc_pid_is_invalid_and_gc_ignores_it(repo: Path, content: bytes) -> None:
    pidfile = repo / ".git" / "gc.pid"
    pidfile.write_bytes(content)
    record = run_ls(repo)[str(pidfile)]
    assert record["state"] == "invalid", record
    assert codes(record) == ["unparseable"]
    assert gc(repo).returncode == 0


# --------------------------------------------------------------------------- recheck path


def test_attach_users_on_decoded_locks_follows_git(repo: Path, hold: Hold) -> None:
    """The dashboard re-attaches users to the locks as decoded, every 2 s."""
    held = commit_all(repo, hold)
    lock_path = str(repo / ".git" / "index.lock")
    decoded = load(lock_path)
    assert isinstance(decoded, Lock)
    assert decoded.format == "git" and facts_of(decoded).users is None
    assert decoded.acquired_at is not None

    scan = scan_git_processes()
    assert scan is not None and scan.complete
    (attached,) = attach_users([decoded])
    users = facts_of(attached).users
    assert users is not None and held.pid in users
    assert attached.holder.pid == users[0] == held.pid
    assert attach_users([attached])[0] == attached  # idempotent

    later = FrozenClock(decoded.acquired_at + timedelta(seconds=60))
    verdict = evaluate(attached, HostProcesses(), later, HOST)
    assert verdict.state is State.ACTIVE

    held.kill()
    (again,) = attach_users([decoded])
    assert facts_of(again).users == ()
    assert again.holder.pid is None
    verdict = evaluate(again, HostProcesses(), later, HOST)
    assert verdict.state is State.STALE
    assert verdict.codes == ("holder_dead",)


def test_paths_git_owns_and_paths_it_does_not() -> None:
    anchor = git_format.anchor
    assert anchor("/r/.git/index.lock") == ("/r/.git", "index.lock")
    assert anchor("/r/.git/refs/heads/a/b.lock") == ("/r/.git", "refs/heads/a/b.lock")
    assert anchor("/srv/b.git/HEAD.lock") == ("/srv/b.git", "HEAD.lock")
    assert anchor("/srv/b.git/refs/tags/v1.lock") == ("/srv/b.git", "refs/tags/v1.lock")
    # A checkout in a directory named like a bare repo: its own files are not git's.
    assert anchor("/srv/site.git/tmp/pids/server.pid") is None
    # git-annex and git-lfs keep their own locks in .git.
    assert anchor("/r/.git/annex/journal.lock") is None
    assert anchor("/r/work/x.lock") is None
    assert git_format.named_pid("/r/.git/next-index-4242.lock") == 4242
    assert git_format.named_pid("/r/.git/index.lock") is None
