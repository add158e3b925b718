"""Real npm packages for the tests that run a JavaScript lock producer (npm's
`lockfile`, proper-lockfile, knex, redis-semaphore, the etcd3 client).

`npm_packages` installs a set of packages once per machine, into a directory of
the temp dir named by the set, behind an flock so that parallel workers install
it once; each caller gets a fresh directory of its own (for its scripts) whose
`node_modules` links to that install. Node finds a package through the link and
its dependencies from the package's real path. The cache and its rules are
tests/installs.py's. A missing node or npm skips the test, and fails it in CI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.formats.common import need_tools
from tests.installs import INSTALL_TIMEOUT_S, install_failed, machine_cache


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
        install_failed(f"npm could not install {' '.join(packages)}: {done.stderr[-300:]}")


def npm_packages(tmp_path_factory: pytest.TempPathFactory, *packages: str) -> Path:
    """A new directory whose `node_modules` holds `packages` (npm specs)."""
    need_tools("node", "npm")
    wanted = tuple(sorted(packages))
    directory = tmp_path_factory.mktemp("npm")
    cache = machine_cache("npm", wanted, lambda into: _install(into, wanted))
    if cache is None:
        _install(directory, wanted)
        return directory
    (directory / "node_modules").symlink_to(cache / "node_modules")
    return directory
