"""npm's `lockfile` package, real (issue 33, item 3): installed with `npm
install` into a temporary directory and run by node.

`lockFile.lock(path)` creates the file with O_EXCL ('wx') and closes it at once:
an empty file, no pid, no kernel lock, nobody has it open: held exactly while
it exists; stale only by the `stale` option its callers pass, which the file
does not record. Its own answer is `lockFile.check(path)` in a fresh node.
lockwatch must never call it free (an operator could remove it under its
holder): it is unknown, `existence_unknown` saying why, unless the config
declares its path's protocol (issue 42): existence locks are then active, and
kernel locks' sentinels (a wrong declaration, taken at its word) free.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import (
    WAIT_S,
    codes,
    declare,
    locks_dir,
    reap,
    records,
    say,
    start_ready,
)
from tests.npm import npm_packages

HOLDER = r"""
const lockFile = require('lockfile');
const path = process.argv[2];
lockFile.lock(path, {}, (er) => {
  if (er) { console.error(String(er)); process.exit(1); }
  process.stdout.write('held\n');
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', () => {
    lockFile.unlockSync(path);
    process.stdout.write('released\n');
  });
});
"""
CHECK = r"""
const lockFile = require('lockfile');
lockFile.check(process.argv[2], {}, (er, locked) => {
  console.log(er ? 'error ' + er : locked ? 'locked' : 'unlocked');
});
"""


@pytest.fixture(scope="module")
def npm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = npm_packages(tmp_path_factory, "lockfile@1")
    (directory / "holder.js").write_text(HOLDER)
    (directory / "check.js").write_text(CHECK)
    return directory


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    try:
        yield procs
    finally:
        reap(procs)


def lockfile_says(npm_dir: Path, path: Path) -> str:
    done = subprocess.run(
        ["node", str(npm_dir / "check.js"), str(path)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=True,
    )
    return done.stdout.strip()


def test_held_by_a_live_process_is_never_free(
    npm_dir: Path, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    directory = locks_dir(tmp_path)
    path = directory / "app.lock"
    holder = start_ready(["node", str(npm_dir / "holder.js"), str(path)], started)
    assert path.read_bytes() == b""

    record = records(directory)["app.lock"]
    assert lockfile_says(npm_dir, path) == "locked"
    assert record["state"] != "free", record
    assert (record["state"], codes(record)) == ("unknown", ["existence_unknown"]), record
    assert "npm" in record["reasons"][0]["message"]

    assert say(holder, "release") == "released\n"
    assert lockfile_says(npm_dir, path) == "unlocked"
    assert "app.lock" not in records(directory)


def test_its_holder_killed_it_stays_unknown(
    npm_dir: Path, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    # Its holder gone (SIGKILL: no exit handler ran), the lock stays until a
    # caller's `stale` option says otherwise; the file cannot say which.
    directory = locks_dir(tmp_path)
    path = directory / "app.lock"
    holder = start_ready(["node", str(npm_dir / "holder.js"), str(path)], started)
    reap([holder])
    assert lockfile_says(npm_dir, path) == "locked"
    record = records(directory)["app.lock"]
    assert (record["state"], codes(record)) == ("unknown", ["existence_unknown"]), record


@pytest.mark.parametrize(
    ("kind", "state", "code"),
    [("existence", "active", "declared_existence"), ("kernel", "free", "declared_kernel_sentinel")],
)
def test_the_declaration_settles_it(
    npm_dir: Path,
    tmp_path: Path,
    started: list[subprocess.Popen[str]],
    kind: str,
    state: str,
    code: str,
) -> None:
    directory = locks_dir(tmp_path)
    path = directory / "app.lock"
    start_ready(["node", str(npm_dir / "holder.js"), str(path)], started)
    assert lockfile_says(npm_dir, path) == "locked"
    declare(directory, kind)
    record = records(directory)["app.lock"]
    assert (record["state"], codes(record)[0]) == (state, code), record
    if kind == "existence":
        assert record["acquired_at"] is not None, record  # its age: the file's mtime
