"""`lockwatch why`: from what the operator has (a tool's error message, a path,
a lock id) to the lock, its verdict as `ls` gives it, and the next step."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli


def git_message(repo: Path) -> str:
    """git's own message on a taken index.lock (from its stderr)."""
    (repo / "a").write_text("x")
    done = subprocess.run(["git", "add", "a"], cwd=repo, capture_output=True, text=True)
    assert done.returncode != 0
    return done.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("no git")
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    repo = tmp_path / "r"
    lock = repo / ".git" / "index.lock"
    lock.write_text("")
    old = lock.stat().st_mtime - 600  # left behind ten minutes ago
    os.utime(lock, (old, old))
    return repo


def test_git_message_names_the_stale_index_lock_and_the_exact_break(repo: Path) -> None:
    said = git_message(repo)
    assert "index.lock': File exists" in said
    code, out, err = run_cli("why", said)
    assert code == 0, err
    lock = f"file:{repo}/.git/index.lock"
    assert out.splitlines()[0] == f"certain: {lock}"
    assert "state:  stale (holder_dead" in out
    assert f"next:   stale: lockwatch break {lock} --reason 'holder_dead: " in out
    assert "only when no git process runs in that repository" in out
    code, out, _ = run_cli("why", "--json", said)
    doc = json.loads(out)
    assert doc["schema"] == "lockwatch.why/1" and doc["input"] == said
    (record,) = doc["locks"]
    # The same record `ls --json` has, with the next step.
    code, listed, _ = run_cli("ls", "--json", str(repo / ".git" / "index.lock"))
    (same,) = json.loads(listed)["locks"]
    assert record["id"] == same["id"] and record["state"] == same["state"] == "stale"
    assert record["reasons"] == same["reasons"]
    assert record["next_step"]["action"] == "break"
    assert record["next_step"]["command"].startswith(f"lockwatch break {lock} --reason ")
    assert doc["clues"][0]["tool"] == "git"


def test_gone_lock_says_what_it_looked_at(repo: Path) -> None:
    said = git_message(repo)
    (repo / ".git" / "index.lock").unlink()
    code, _, err = run_cli("why", said)
    assert code == 1
    assert f"looked at: {repo}/.git/index.lock: no such file now" in err


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A file held with flock(1) by a child, as a script would take it."""
    if shutil.which("flock") is None:
        pytest.skip("no flock(1)")
    path = tmp_path / "backup.lock"
    path.write_text("")
    child = subprocess.Popen(["flock", str(path), "sleep", "30"])
    try:
        for _ in range(200):
            if str(os.stat(path).st_ino) in Path("/proc/locks").read_text():
                break
            subprocess.run(["sleep", "0.01"], check=True)
        yield path, child.pid
    finally:
        child.kill()
        child.wait()


def test_flock_command_line_names_the_holder(held: tuple[Path, int]) -> None:
    path, pid = held
    done = subprocess.run(
        ["flock", "--verbose", "-n", str(path), "true"], capture_output=True, text=True
    )
    assert done.returncode == 1
    said = f"$ flock --verbose -n {path} true\n{done.stderr}"
    code, out, err = run_cli("why", said)
    assert code == 0, err
    assert out.splitlines()[0] == f"certain: file:{path}"
    assert "state:  active (kernel_lock" in out
    # What the holder does, not "at work": flock(1) waits for the command it runs.
    assert f"next:   wait: flock (pid {pid}) is asleep, not running, waiting for its child" in out
    assert "sleep (pid " in out and "at work" not in out
    # flock(1)'s own words name no file: said so, exit 1.
    code, out, err = run_cli("why", done.stderr)
    assert code == 1 and "names no file" in err and "flock(1) holds a kernel lock" in out


def test_sqlite_database_is_no_lock_file_but_its_kernel_locks_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "app.db"
    setup = sqlite3.connect(db)
    setup.execute("CREATE TABLE t (x)")
    setup.commit()
    setup.close()
    code, out, err = run_cli("why", "app.db")
    # Nobody locks it: an SQLite database (its own format), free.
    assert code == 0, err
    assert out.startswith(f"certain: file:{db}") and "free (not_held" in out, out
    # A writer in a process of its own holds a RESERVED lock: fcntl byte-range locks.
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "held"
        other = sqlite3.connect(db, timeout=0)
        with pytest.raises(sqlite3.OperationalError) as caught:
            other.execute("BEGIN IMMEDIATE")
        other.close()
        said = str(caught.value)
        assert said == "database is locked"
        # SQLite names no file: the advice says to name it.
        code, out, err = run_cli("why", f"sqlite3.OperationalError: {said}")
        assert code == 1 and "on the database file" in out
        # The database's own row, in SQLite's words, its kernel locks in it: the
        # writer (RESERVED, a write transaction) named, one row, no kernel rows.
        code, out, err = run_cli("why", "app.db")
        assert code == 0, err
        assert out.startswith(f"certain: file:{db}"), out
        assert "state:  active" in out and f"pid {writer.pid}" in out, out
        assert "RESERVED" in out, out
        assert "\nkernel:" not in out
        code, out, _ = run_cli("why", "--json", f"{said}: {db}")
        doc = json.loads(out)
        mine = [lock for lock in doc["locks"] if lock["path"] == str(db)]
        assert [lock["source"] for lock in mine] == ["file"]
        assert mine[0]["holder"]["pid"] == writer.pid
        assert mine[0]["next_step"]["action"] == "wait"
    finally:
        writer.kill()
        writer.wait()


WRITER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(30)
"""


HOLDER = """
import fcntl, sys, time
handle = open(sys.argv[1], "r+")
fcntl.lockf(handle, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(30)
"""


def test_dpkg_style_lock_held_with_fcntl(tmp_path: Path) -> None:
    # apt's literal message, pointed at a lock file of this test's own, held by a
    # process of its own as apt's is (not this one: reading a file closes a
    # descriptor of it, which drops the reader's own POSIX locks on it).
    path = tmp_path / "lock-frontend"
    path.write_text("")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        said = f"E: Could not get lock {path}. It is held by process 1 (apt-get)"
        code, out, err = run_cli("why", said)
    finally:
        holder.kill()
        holder.wait()
    assert code == 0, err
    assert out.splitlines()[0] == f"certain: file:{path}"
    assert "state:  active (kernel_lock" in out
    assert "the message named pid 1 (apt-get); that is not the holder now" in out
    assert "sudo dpkg --configure -a" in out


TERRAFORM = """Error: Error acquiring the state lock

Error message: resource temporarily unavailable
Lock Info:
  ID:        48f64066-ee33-ed52-282b-bbfd2cb338d5
  Path:      terraform.tfstate
  Operation: OperationTypeInvalid
  Who:       root@vm
  Version:   1.11.4
  Created:   2026-11-27 17:29:55.001798907 +0000 UTC
  Info:
"""


def test_terraform_block_from_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from lockwatch.cli import cli

    monkeypatch.chdir(tmp_path)
    info = tmp_path / ".terraform.tfstate.lock.info"
    info.write_text(
        json.dumps(
            {
                "ID": "48f64066-ee33-ed52-282b-bbfd2cb338d5",
                "Operation": "OperationTypePlan",
                "Info": "",
                "Who": "root@vm",
                "Version": "1.11.4",
                "Created": "2026-11-27T17:29:55.001798907Z",
                "Path": "terraform.tfstate",
            }
        )
    )
    result = CliRunner().invoke(cli, ["why", "-"], input=TERRAFORM)
    assert result.exit_code in (0, 1), result.output
    assert f"file:{info}" in result.stdout
    assert "terraform force-unlock 48f64066-ee33-ed52-282b-bbfd2cb338d5" in result.stdout


def test_lock_id_and_usage(tmp_path: Path) -> None:
    lock = tmp_path / "deploy.lock"
    lock.write_text("999999999\n")
    code, out, err = run_cli("why", f"file:{lock}")
    assert code == 0, err
    assert out.splitlines()[0] == f"certain: file:{lock}"
    code, out, err = run_cli("why")
    assert code == 2 and "say what is locked" in err
    code, out, err = run_cli("why", "nosuch:thing")
    assert code == 1  # no source's id and no such file: a plain path that is not there
    code, out, err = run_cli("why", "hello", "world")
    assert code == 1 and "nothing recognisable" in err and "looked for" in err
    code, out, err = run_cli(
        "why", "--json", "ERROR:  canceling statement due to statement timeout"
    )
    assert code == 1
    doc = json.loads(out)
    assert doc["locks"] == [] and doc["clues"][0]["kind"] == "not_a_lock"
    assert "not a lock" in doc["notes"][0]


def test_help_teaches_each_form() -> None:
    code, out, _ = run_cli("why", "--help")
    assert code == 0
    for form in ("Could not get lock", "index.lock", "app.db", "--pg", "--mysql", "GET_LOCK", "-"):
        assert form in out
    assert "[PATH]" not in out  # WHAT is its only argument
