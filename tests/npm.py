"""Real npm packages for the tests that run a JavaScript lock producer (npm's
`lockfile`, proper-lockfile, knex, redis-semaphore, the etcd3 client).

`npm_packages` installs a set of packages once per machine, into a directory of
the temp dir named by the set, behind an flock so that parallel workers install
it once; each caller gets a fresh directory of its own (for its scripts) whose
`node_modules` links to that install. Node finds a package through the link and
its dependencies from the package's real path. A cache that this user does not
own alone is not used (another user could have put code there): the packages
are installed again in the caller's own directory.

A missing node or npm, or a failed install, skips the test, and fails it in CI
(LOCKWATCH_REQUIRE_TOOLS): a test of a real tool never passes by not running it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.formats.common import need_tools

INSTALL_TIMEOUT_S = 300


def _ours(path: Path) -> bool:
    info = path.lstat()
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def _install(directory: Path, packages: tuple[str, ...]) -> None:
    done = subprocess.run(
        ["npm", "install", "--prefer-offline", "--no-audit", "--no-fund", *packages],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        why = f"npm could not install {' '.join(packages)}: {done.stderr[-300:]}"
        if os.environ.get("LOCKWATCH_REQUIRE_TOOLS"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


def npm_packages(tmp_path_factory: pytest.TempPathFactory, *packages: str) -> Path:
    """A new directory whose `node_modules` holds `packages` (npm specs)."""
    need_tools("node", "npm")
    wanted = tuple(sorted(packages))
    directory = tmp_path_factory.mktemp("npm")
    key = hashlib.sha256(" ".join(wanted).encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"lockwatch-test-npm-{key}"
    cache.mkdir(mode=0o700, exist_ok=True)
    if not _ours(cache):
        _install(directory, wanted)
        return directory
    with open(cache / ".installing", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        done = cache / ".installed"
        if not done.exists():
            _install(cache, wanted)
            done.write_text(" ".join(wanted) + "\n")
    (directory / "node_modules").symlink_to(cache / "node_modules")
    return directory
