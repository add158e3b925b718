"""Packages the tests install once per machine (npm's; a Python release other than
the venv's, such as the oldest redis-py the project claims), into
a directory of the temp dir named by what is installed, behind an flock so that
parallel workers install it once.

A cache that this user does not own alone is not used (another user could have
put code there): the caller installs into a directory of its own instead. A
failed install skips the test, and fails it in CI (LOCKWATCH_REQUIRE_TOOLS): a
test of a real tool never passes by not running it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest

INSTALL_TIMEOUT_S = 300
_PIP = (sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input")


def install_failed(why: str) -> NoReturn:
    if os.environ.get("LOCKWATCH_REQUIRE_TOOLS"):
        pytest.fail(f"{why} (LOCKWATCH_REQUIRE_TOOLS is set)", pytrace=False)
    pytest.skip(why)


def _ours(path: Path) -> bool:
    info = path.lstat()
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def machine_cache(
    kind: str, wanted: tuple[str, ...], install: Callable[[Path], None]
) -> Path | None:
    """The directory `install` filled with `wanted`, once per machine: None where
    the cache is not this user's alone (the caller installs for itself then)."""
    key = hashlib.sha256(" ".join(wanted).encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"lockwatch-test-{kind}-{key}"
    cache.mkdir(mode=0o700, exist_ok=True)
    if not _ours(cache):
        return None
    with open(cache / ".installing", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        done = cache / ".installed"
        if not done.exists():
            install(cache)
            done.write_text(" ".join(wanted) + "\n")
    return cache


def _pip_install(into: Path, specs: tuple[str, ...]) -> None:
    # A failed install may have left part of a release behind: start afresh.
    shutil.rmtree(into, ignore_errors=True)
    # The release asked for, whatever the venv's pins (constraints.txt) say.
    env = {name: value for name, value in os.environ.items() if name != "PIP_CONSTRAINT"}
    done = subprocess.run(
        [*_PIP, "--target", str(into), *specs],
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        install_failed(f"pip could not install {' '.join(specs)}: {done.stderr[-300:]}")


def pip_target(tmp_path_factory: pytest.TempPathFactory, *specs: str) -> Path:
    """A directory holding `specs` (pip requirements, pinned) for this Python, to
    put first on a subprocess's PYTHONPATH: that release, not the venv's, is the
    one it imports."""
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    wanted = (python, *sorted(specs))
    cache = machine_cache("pip", wanted, lambda into: _pip_install(into / "site", wanted[1:]))
    if cache is None:
        own = tmp_path_factory.mktemp("pip") / "site"
        _pip_install(own, wanted[1:])
        return own
    return cache / "site"
