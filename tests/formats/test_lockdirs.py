"""Lock directories: the shell's `mkdir x.lock` and npm proper-lockfile's.

proper-lockfile 4.1.2 is real here: installed with `npm install` (npm's cache
first) into a temporary directory, and run by node in helper processes that
write `held` once they hold the lock; its own answer is `check()` in a fresh
node process. Its directory is empty, beside the file it locks, and names no
holder: lockwatch reads its mtime as the holder's touch and, as
proper-lockfile's `check()` does with its defaults, calls it stale once
untouched for over 10 s, saying that this is the default stale time.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.formats.common import WAIT_S, age, codes, reap, record, run_break, run_ls, start_ready
from tests.npm import npm_packages

HOLDER = r"""
const lf = require('proper-lockfile');
(async () => {
  const release = await lf.lock(process.argv[2]);
  process.stdout.write('held\n');
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', async (data) => {
    if (data.includes('release')) { await release(); process.stdout.write('released\n'); }
  });
})();
"""
CHECK = r"""
const lf = require('proper-lockfile');
lf.check(process.argv[2]).then((held) => console.log(held ? 'locked' : 'unlocked'));
"""


@pytest.fixture(scope="module")
def npm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = npm_packages(tmp_path_factory, "proper-lockfile@4")
    (directory / "holder.js").write_text(HOLDER)
    (directory / "check.js").write_text(CHECK)
    return directory


@pytest.fixture
def hold(npm_dir: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[str]] = []

    def start(target: Path) -> subprocess.Popen[str]:
        return start_ready(["node", str(npm_dir / "holder.js"), str(target)], started)

    try:
        yield start
    finally:
        reap(started)


def proper_lockfile_says(npm_dir: Path, target: Path) -> str:
    done = subprocess.run(
        ["node", str(npm_dir / "check.js"), str(target)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=True,
    )
    return done.stdout.strip()


def test_proper_lockfile_held_then_released(hold: Any, npm_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("{}")
    proc = hold(target)
    rec = record(tmp_path, "state.json.lock")
    assert rec is not None
    assert (rec["format"], rec["name"], rec["state"], codes(rec)) == (
        "mkdir",
        "state.json",
        "active",
        ["no_pid"],
    )
    assert "proper-lockfile" in rec["reasons"][0]["message"]
    assert rec["heartbeat_at"] is not None
    assert proper_lockfile_says(npm_dir, target) == "locked"

    proc.stdin.write("release\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "released"
    assert record(tmp_path, "state.json.lock") is None
    assert proper_lockfile_says(npm_dir, target) == "unlocked"


def test_proper_lockfile_holder_killed(hold: Any, npm_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("{}")
    proc = hold(target)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=WAIT_S)
    lock = tmp_path / "state.json.lock"
    assert lock.is_dir()  # no exit handler ran
    # Untouched for 11 s, as if its holder died 11 s ago: proper-lockfile with its
    # default `stale` (10 s) says unlocked and would remove it; so does lockwatch.
    age(lock, 11)
    assert proper_lockfile_says(npm_dir, target) == "unlocked"
    rec = record(tmp_path, "state.json.lock")
    assert rec is not None
    assert (rec["state"], codes(rec)) == ("stale", ["heartbeat_expired", "no_pid"])
    assert "default stale time" in rec["reasons"][1]["message"]


def by_proper_lockfile(age_s: float) -> tuple[str, list[str]]:
    """proper-lockfile's rule for a lock touched `age_s` ago: `check()` calls it
    stale past 10 s (`stale`); it touches every 5 s (`update`), so lockwatch says
    the touch is late past three quarters of the stale time."""
    if age_s > 10:
        return "stale", ["heartbeat_expired", "no_pid"]
    if age_s > 7.5:
        return "active", ["heartbeat_late", "no_pid"]
    return "active", ["no_pid"]


def test_proper_lockfile_shape_by_its_touches(tmp_path: Path) -> None:
    """Byte-for-byte what proper-lockfile leaves (it writes nothing: an empty
    `<file>.lock/` beside `<file>`, its mtime touched every 5 s), so this runs
    where npm cannot install it: touched 2 s ago it is held, 6 s ago late, 11 s
    ago stale; without the file beside it, it is a shell's lock, never stale."""
    (tmp_path / "state.json").write_text("{}")
    lock = tmp_path / "state.json.lock"
    lock.mkdir()
    seen = set()
    for seconds in (2, 8, 11):
        touched = time.time()
        age(lock, seconds)
        rec = record(tmp_path, "state.json.lock")
        # Judged at ls's own moment: a loaded machine may start it seconds after the
        # touch, and then the touch is older (as proper-lockfile would find it too).
        oldest = seconds + time.time() - touched
        ages = [a for a in (seconds, 7.51, 10.01, oldest) if seconds <= a <= oldest]
        expected = [by_proper_lockfile(a) for a in ages]
        assert rec is not None and (rec["state"], sorted(codes(rec))) in expected, (rec, ages)
        seen.add(rec["state"] + " " + " ".join(sorted(codes(rec))))
    assert "stale heartbeat_expired no_pid" in seen  # 11 s is past 10 s, however late
    (tmp_path / "state.json").unlink()
    rec = record(tmp_path, "state.json.lock")
    assert rec is not None and (rec["state"], codes(rec)) == ("active", ["no_pid"]), rec


def test_shell_mkdir_locks(tmp_path: Path) -> None:
    (tmp_path / "deploy.lock").mkdir()  # nothing named `deploy` beside it
    (tmp_path / "data").write_text("x")
    (tmp_path / "data.lock").mkdir()
    (tmp_path / "data.lock" / "pid").write_text("4242\n")  # not empty: not proper-lockfile's
    age(tmp_path / "deploy.lock", 3600)
    by_name = {Path(r["path"]).name: r for r in run_ls(tmp_path).locks}
    for name in ("deploy.lock", "data.lock"):
        rec = by_name[name]
        assert (rec["format"], rec["state"], codes(rec)) == ("mkdir", "active", ["no_pid"])
        assert "proper-lockfile" not in rec["reasons"][0]["message"]
        assert rec["heartbeat_at"] is None
    assert by_name["deploy.lock"]["age_seconds"] >= 3600


def test_break_a_lock_directory(tmp_path: Path) -> None:
    lock = tmp_path / "deploy.lock"
    lock.mkdir()
    rec = record(tmp_path, "deploy.lock")
    assert rec is not None
    home = tmp_path.parent / "lockwatch-home"
    done = run_break(rec["id"], home, home / "audit.jsonl")
    assert done.returncode == 0, done.stderr
    assert not lock.exists()
    (kept,) = (tmp_path / ".lockwatch-broken").iterdir()
    assert kept.is_dir()
