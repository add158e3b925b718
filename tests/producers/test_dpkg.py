"""dpkg's and apt's locks as the real tools take them, on a scratch dpkg
database (`dpkg --root`, apt-get's Dir::State::status) so that no real apt is
ever blocked: a real dpkg holds them while a package's preinst waits, and a
real second apt-get names the holder; lockwatch names the same process. Killed
mid-install, the locks are free and the tools' own repair is told."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.formats.common import WAIT_S, clean_env, codes, ls, need_tools, wait_until
from tests.kernel.test_procfs import as_nobody

CONTROL = """\
Package: lockwatch-probe
Version: 1.0
Architecture: all
Maintainer: lockwatch tests <tests@example.invalid>
Description: a package whose preinst waits on a FIFO
"""


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # dpkg and its maintainer script
            proc.wait(timeout=WAIT_S)


def _scratch(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(the scratch root, its admindir, a .deb whose preinst blocks on `tmp_path/go`)."""
    root = tmp_path / "root"
    admindir = root / "var/lib/dpkg"
    for sub in ("updates", "info", "triggers", "alternatives"):
        (admindir / sub).mkdir(parents=True)
    (admindir / "status").touch()
    (admindir / "available").touch()
    package = tmp_path / "pkg"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN/control").write_text(CONTROL)
    go = tmp_path / "go"
    os.mkfifo(go)
    preinst = package / "DEBIAN/preinst"
    preinst.write_text(f"#!/bin/sh\nread x < {go}\nexit 0\n")
    preinst.chmod(0o755)
    deb = tmp_path / "probe.deb"
    subprocess.run(["dpkg-deb", "-b", str(package), str(deb)], check=True, capture_output=True)
    return root, admindir, deb


def _dpkg_installing(
    root: Path, admindir: Path, deb: Path, started: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["dpkg", f"--root={root}", "--force-script-chrootless", "--force-not-root", "-i", str(deb)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    started.append(proc)
    # Its preinst runs (and waits) once dpkg holds both locks and has marked the
    # package half-installed.
    wait_until("dpkg to run the preinst", lambda: _preinst_runs(proc.pid), proc=proc)
    return proc


def _preinst_runs(session: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2 :].split()
        if comm == "preinst" and int(fields[3]) == session:
            return True
    return False


def _apt_get_says(admindir: Path, user: tuple[str, ...] = ()) -> str:
    """What a real apt-get run as `user` (a command prefix; none: root) says."""
    done = subprocess.run(
        [
            *user,
            "apt-get",
            "-o",
            f"Dir::State::status={admindir}/status",
            "-o",
            "DPkg::Lock::Timeout=0",
            "install",
            "lockwatch-probe-absent",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "LC_ALL": "C"},
    )
    assert done.returncode != 0, done.stdout
    return done.stderr


def test_held_by_dpkg_as_a_second_apt_get_says(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    need_tools("dpkg", "dpkg-deb", "apt-get")
    root, admindir, deb = _scratch(tmp_path)
    dpkg = _dpkg_installing(root, admindir, deb, started)
    said = _apt_get_says(admindir)
    match = re.search(r"Could not get lock (\S+)\. It is held by process (\d+) \((\S+)\)", said)
    assert match is not None, said
    assert match[1] == str(admindir / "lock-frontend") and match[3] == "dpkg", said
    rows = {Path(row["path"]).name: row for row in ls(admindir)["locks"]}
    assert set(rows) == {"lock", "lock-frontend"}, rows
    for row in rows.values():
        assert row["format"] == "dpkg" and row["state"] == "active", row
        assert row["holder"]["pid"] == int(match[2]) == dpkg.pid, (row, said)
        assert "dpkg_running" in codes(row) and "dpkg_interrupted" not in codes(row), row
        assert row["age_seconds"] is not None, row  # since its holder started


def test_killed_mid_install_free_with_the_tools_repair(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    need_tools("dpkg", "dpkg-deb", "apt-get")
    root, admindir, deb = _scratch(tmp_path)
    dpkg = _dpkg_installing(root, admindir, deb, started)
    os.killpg(dpkg.pid, signal.SIGKILL)
    dpkg.wait(timeout=WAIT_S)
    said = _apt_get_says(admindir)
    assert "dpkg was interrupted, you must manually run 'dpkg --configure -a'" in said, said
    rows = {Path(row["path"]).name: row for row in ls(admindir)["locks"]}
    for name in ("lock", "lock-frontend"):
        row = rows[name]
        assert row["state"] == "free", row
        assert "dpkg_interrupted" in codes(row), row
        message = next(r["message"] for r in row["reasons"] if r["code"] == "dpkg_interrupted")
        assert "`dpkg --configure -a`" in message and "lockwatch-probe (half-installed)" in message


def test_apt_locks_are_named_by_place(tmp_path: Path) -> None:
    archives = tmp_path / "var/cache/apt/archives"
    lists = tmp_path / "var/lib/apt/lists"
    archives.mkdir(parents=True)
    lists.mkdir(parents=True)
    (archives / "lock").touch()
    (lists / "lock").touch()
    (tmp_path / "var/lock").mkdir()
    (tmp_path / "var/lock/lock").touch()  # no dpkg's or apt's place: not one of theirs
    rows = {row["path"]: row for row in ls(tmp_path)["locks"]}
    assert set(rows) == {str(archives / "lock"), str(lists / "lock")}, rows
    for row in rows.values():
        assert row["format"] == "dpkg" and row["state"] == "free", row


# ---------------------------------------------------------------- an unprivileged user


def _private(admindir: Path) -> None:
    """dpkg's lock files as a real host has them: root's, 0640 (its directory
    searchable by anyone): another user may stat them, never open them."""
    for name in ("lock", "lock-frontend"):
        (admindir / name).touch()
        (admindir / name).chmod(0o640)


def lockwatch_as_nobody(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`lockwatch ARGS` run by user nobody, its config and state in `home`."""
    home.mkdir(mode=0o755, exist_ok=True)
    env = {**clean_env(home), "HOME": str(home), "XDG_STATE_HOME": str(home / "state")}
    return subprocess.run(
        [*as_nobody(), sys.executable, "-m", "lockwatch", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=home,
        env={**env, "LC_ALL": "C"},
    )


def _rows(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert done.returncode == 1, done.stderr  # partial: their content was not read
    document = json.loads(done.stdout)
    assert document["errors"] == [], document["errors"]  # listed, not dropped as errors
    return {Path(row["path"]).name: row for row in document["locks"]}


def test_unprivileged_ls_lists_root_only_locks_held_by_dpkg_from_the_kernel(
    open_dir: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """Issue 42: as nobody, `ls DIR` said "Permission denied" twice and "No locks
    under": the locks are there, held as dpkg itself holds them (/proc/locks is
    anyone's), and free of a holder they are unknown, never absent."""
    need_tools("dpkg", "dpkg-deb", "apt-get", "setpriv")
    root, admindir, deb = _scratch(open_dir)
    _private(admindir)
    home = open_dir / "home"
    idle = _rows(lockwatch_as_nobody(home, "ls", "--json", str(admindir)))
    assert set(idle) == {"lock", "lock-frontend"}, idle
    for row in idle.values():
        assert row["state"] == "unknown" and codes(row)[0] == "permission_denied", row
        assert row["holder"]["pid"] is None, row
    dpkg = _dpkg_installing(root, admindir, deb, started)
    held = _rows(lockwatch_as_nobody(home, "ls", "--json", str(admindir)))
    assert set(held) == {"lock", "lock-frontend"}, held
    for row in held.values():
        assert row["format"] == "dpkg" and row["state"] == "active", row
        assert row["holder"]["pid"] == dpkg.pid, row
        assert codes(row)[0] == "kernel_lock" and "dpkg_running" in codes(row), row
        assert "permission_denied" in codes(row), row  # told, not decisive
    table = lockwatch_as_nobody(home, "ls", str(admindir))
    assert table.returncode == 1, table.stderr
    assert "No locks under" not in table.stdout, table.stdout
    lines = [line for line in table.stdout.splitlines() if line.startswith("active ")]
    assert len(lines) == 2 and all(f"dpkg (pid {dpkg.pid})" in line for line in lines), lines
    [note] = table.stderr.splitlines()  # one line, no "PATH: Permission denied" each
    assert "2 lock files could not be read (permission denied)" in note, note


def test_unprivileged_why_answers_apts_held_and_non_root_messages_alike(
    open_dir: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """Issue 42: `why` said "no lock found" as nobody. apt's message to root (held
    by dpkg) and its own message to nobody ("(13: Permission denied) ... are you
    root?"), both from a real apt-get, name the lock dpkg holds and its pid."""
    need_tools("dpkg", "dpkg-deb", "apt-get", "setpriv")
    root, admindir, deb = _scratch(open_dir)
    _private(admindir)
    dpkg = _dpkg_installing(root, admindir, deb, started)
    held = _apt_get_says(admindir)
    assert f"held by process {dpkg.pid}" in held, held
    denied = _apt_get_says(admindir, tuple(as_nobody()))
    assert "(13: Permission denied)" in denied and "are you root?" in denied, denied
    home = open_dir / "home"
    for said in (held, denied):
        done = lockwatch_as_nobody(home, "why", "--json", said)
        assert done.returncode == 0, (said, done.stdout, done.stderr)
        [lock] = json.loads(done.stdout)["locks"]
        assert lock["path"] == str(admindir / "lock-frontend"), (said, lock)
        assert lock["state"] == "active" and lock["holder"]["pid"] == dpkg.pid, (said, lock)
        text = lockwatch_as_nobody(home, "why", said)
        assert text.returncode == 0 and "no lock found" not in text.stderr, text.stderr
        assert f"active (kernel_lock: held with fcntl/lockf by pid {dpkg.pid}" in text.stdout


def test_unprivileged_why_and_ls_behind_a_directory_it_may_not_search_say_so(
    open_dir: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    """Issue 42 item 2's family: dpkg's admin directory made root's alone (0700),
    its locks held by a real dpkg. As nobody, `why` said "no lock found; ...: no such
    file now (released, removed, or elsewhere)", and `ls` of the directory above "No
    locks under": lockwatch may not look there, and says so, never that no lock is."""
    need_tools("dpkg", "dpkg-deb", "apt-get", "setpriv")
    root, admindir, deb = _scratch(open_dir)
    _private(admindir)
    dpkg = _dpkg_installing(root, admindir, deb, started)
    held = _apt_get_says(admindir)
    assert f"held by process {dpkg.pid}" in held, held
    admindir.chmod(0o700)
    home = open_dir / "home"
    done = lockwatch_as_nobody(home, "why", held)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "no such file" not in done.stderr and "no lock found" not in done.stderr, done.stderr
    assert "cannot tell whether it is locked" in done.stderr, done.stderr
    assert "permission denied" in done.stderr, done.stderr
    document = json.loads(lockwatch_as_nobody(home, "why", "--json", held).stdout)
    (place,) = document["looked_at"]
    assert "not absent" in place, place
    # `ls` of the directory above: "Permission denied", then "No locks under" it.
    table = lockwatch_as_nobody(home, "ls", str(admindir.parent))
    assert table.returncode == 1, table.stderr
    assert "No locks" not in table.stdout, table.stdout
    assert "1 place could not be read (below): locks there are not ruled out" in table.stdout
    assert f"{admindir}: Permission denied" in table.stderr, table.stderr
