"""rpm's transaction lock as the real rpm takes it, on a scratch database
(--dbpath): held while a package's %pre scriptlet waits on a FIFO (the package
installs no file), as a second rpm's "can't create transaction lock" says;
free once the transaction is over. The rpm database beside it (SQLite, in WAL
mode) is found too: rpm has it open."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import WAIT_S, codes, ls, need_tools, wait_until

SPEC = """\
Name: lockwatch-probe
Version: 1.0
Release: 1
Summary: a package whose pre-install scriptlet waits on a FIFO
License: MIT
BuildArch: noarch
%description
lockwatch's test probe
%pre
read x < {go}
%files
"""


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


def _package(tmp_path: Path, go: Path) -> Path:
    top = tmp_path / "build"
    (top / "SPECS").mkdir(parents=True)
    spec = top / "SPECS/probe.spec"
    spec.write_text(SPEC.format(go=go))
    subprocess.run(
        ["rpmbuild", "--define", f"_topdir {top}", "-bb", str(spec)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (rpm,) = (top / "RPMS/noarch").iterdir()
    return rpm


def _install(db: Path, rpm: Path) -> list[str]:
    return ["rpm", "--dbpath", str(db), "--nodeps", "-i", str(rpm)]


def test_held_while_a_transaction_runs(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    need_tools("rpm", "rpmbuild")
    go = tmp_path / "go"
    os.mkfifo(go)
    rpm = _package(tmp_path, go)
    db = tmp_path / "db"
    db.mkdir()
    subprocess.run(["rpm", "--dbpath", str(db), "--initdb"], check=True, capture_output=True)
    proc = subprocess.Popen(
        _install(db, rpm),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    started.append(proc)
    # The scriptlet waits for a writer on the FIFO: open it without blocking once it reads.
    writer: int | None = None

    def scriptlet_reads() -> bool:
        nonlocal writer
        try:
            writer = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return False
        return True

    wait_until("rpm's %pre scriptlet to wait", scriptlet_reads, proc=proc)
    assert writer is not None
    second = subprocess.run(
        _install(db, rpm), capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "LC_ALL": "C"},
    )  # fmt: skip
    assert f"can't create transaction lock on {db}/.rpm.lock" in second.stderr, second.stderr
    rows = {Path(row["path"]).name: row for row in ls(db)["locks"]}
    lock = rows[".rpm.lock"]
    assert lock["format"] == "rpm" and lock["state"] == "active", lock
    assert lock["holder"]["pid"] == proc.pid and "rpm_lock" in codes(lock), lock

    os.write(writer, b"go\n")
    os.close(writer)
    assert proc.wait(timeout=WAIT_S) == 0
    rows = {Path(row["path"]).name: row for row in ls(db)["locks"]}
    assert set(rows) == {".rpm.lock"}, rows  # the database is no longer open: not listed
    assert rows[".rpm.lock"]["state"] == "free", rows
