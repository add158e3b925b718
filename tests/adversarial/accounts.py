"""Real unprivileged accounts for the adversarial tests: made as root with a
unique name (useradd -M, no home), removed after, and a place they can reach.

pytest's tmp_path lies under /tmp/pytest-of-root (0700): another account cannot
reach into it, so `shared_dir` makes a directory of its own under /tmp, open to
all, holding a sticky 1777 directory that stands in for /run/lock or /tmp.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="makes real accounts (useradd)")

_TRIES = 50  # useradd and userdel give up at once while another one holds /etc/passwd's lock
_LOCKED = (1, 10)  # "cannot lock /etc/passwd" (1), "cannot update the group file" (10)


def _admin(*argv: str) -> None:
    """Run useradd/userdel/groupdel, again while another engineer's holds the lock."""
    done = None
    for _ in range(_TRIES):
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode not in _LOCKED or "lock" not in done.stderr:
            break
        _wait_for_the_lock()
    assert done is not None and done.returncode == 0, f"{argv}: {done and done.stderr}"


def _wait_for_the_lock() -> None:
    """Wait for whoever holds lckpwdf(3)'s lock (useradd takes it beside
    /etc/passwd.lock): an event, not a pause of some length."""
    with contextlib.suppress(OSError):
        fd = os.open("/etc/.pwd.lock", os.O_WRONLY | os.O_CLOEXEC)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX)
        finally:
            os.close(fd)


@contextlib.contextmanager
def account(primary_group: str | None = None) -> Iterator[pwd.struct_passwd]:
    """A new account: its own group (named after it), or `primary_group` as its
    primary group. Removed, with its own group, when the test ends."""
    name = f"lwu{secrets.token_hex(5)}"
    group = ["-g", primary_group] if primary_group else ["-U"]
    _admin("useradd", "-M", "-s", "/usr/sbin/nologin", *group, name)
    try:
        yield pwd.getpwnam(name)
    finally:
        _admin("userdel", name)


def as_user(user: pwd.struct_passwd, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run `argv` as `user` (its uid and primary group, no others), as that account would."""
    return subprocess.run(
        list(argv),
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


@contextlib.contextmanager
def shared_dir() -> Iterator[Path]:
    """A sticky, world-writable directory (mode 1777, root's) every account can
    reach, standing in for /run/lock or /tmp; removed with all in it after."""
    top = Path(tempfile.mkdtemp(prefix="lw-adv-", dir="/tmp"))
    try:
        top.chmod(0o755)
        shared = top / "lock"
        shared.mkdir()
        shared.chmod(0o1777)
        yield shared
    finally:
        shutil.rmtree(top, ignore_errors=True)
