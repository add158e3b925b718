"""pacman's `db.lck` as the real pacman takes it (Debian's pacman-package-manager),
on a scratch database (--dbpath, --root): held while pacman waits at its
"Proceed with installation?" prompt, and stale once pacman is killed, as a
second pacman says ("could not lock database: File exists")."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import WAIT_S, age, codes, ls, need_tools, wait_until

PKGINFO = b"pkgname = lockwatch-probe\npkgver = 1.0-1\npkgdesc = probe\narch = any\nsize = 0\n"
CONF = "[options]\nArchitecture = auto\nSigLevel = Never\nLocalFileSigLevel = Never\n"


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=WAIT_S)


def _scratch(tmp_path: Path) -> list[str]:
    """pacman's argv for installing a one-file package into a scratch root."""
    package = tmp_path / "lockwatch-probe-1.0-1-any.pkg.tar.gz"
    with tarfile.open(package, "w:gz") as tar:
        info = tarfile.TarInfo(".PKGINFO")
        info.size = len(PKGINFO)
        tar.addfile(info, io.BytesIO(PKGINFO))
    (tmp_path / "pacman.conf").write_text(CONF)
    (tmp_path / "db").mkdir()
    (tmp_path / "root").mkdir()
    return [
        "pacman",
        "--config",
        str(tmp_path / "pacman.conf"),
        "--dbpath",
        str(tmp_path / "db"),
        "--root",
        str(tmp_path / "root"),
        "-U",
        str(package),
    ]


def _second_pacman_says(argv: list[str]) -> str:
    done = subprocess.run(
        [*argv, "--noconfirm"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "LC_ALL": "C"},
    )
    assert done.returncode != 0, done.stdout
    return " ".join(done.stderr.split())


def test_held_at_the_prompt_stale_once_killed(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    need_tools("pacman")
    argv = _scratch(tmp_path)
    lock = tmp_path / "db/db.lck"
    pacman = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,  # kept open: it waits at "Proceed with installation? [Y/n]"
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    started.append(pacman)
    wait_until("pacman to take db.lck", lock.exists, proc=pacman)
    said = _second_pacman_says(argv)
    assert "could not lock database: File exists" in said, said
    (row,) = ls(tmp_path / "db")["locks"]
    assert row["format"] == "pacman" and row["state"] == "active", row
    assert row["holder"]["pid"] == pacman.pid, row

    os.killpg(pacman.pid, signal.SIGKILL)
    pacman.wait(timeout=WAIT_S)
    said = _second_pacman_says(argv)
    assert f"you can remove {lock}" in said, said  # pacman: left behind
    age(lock, 60)  # past the moment between its creation and being seen open
    (row,) = ls(tmp_path / "db")["locks"]
    assert row["state"] == "stale" and "holder_dead" in codes(row), row
