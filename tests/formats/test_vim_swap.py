"""Vim's swap files, made by a real Vim, found by a scan and judged as `vim -r`
judges them (issue 33, item 3).

Vim runs on a pseudo-terminal (it edits only on one) with no vimrc; the test
waits for its swap file to appear. Its own answer is `vim -r`'s listing, run in
the directory: "process ID: N (STILL RUNNING)" while that Vim lives.
"""

from __future__ import annotations

import contextlib
import os
import pty
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import (
    WAIT_S,
    codes,
    kill_and_reap,
    locks_dir,
    need_tools,
    records,
    wait_until,
)


@pytest.fixture
def vims() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            kill_and_reap(proc)


def edit(path: Path, vims: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """A real Vim editing `path` on a pseudo-terminal, with unsaved changes, once
    its swap file exists."""
    main, side = pty.openpty()
    proc = subprocess.Popen(
        ["vim", "-u", "NONE", "-i", "NONE", "-N", "-c", "normal ihello", str(path)],
        stdin=side,
        stdout=side,
        stderr=side,
        cwd=path.parent,
        env={**os.environ, "TERM": "xterm"},
        start_new_session=True,
    )
    vims.append(proc)
    os.close(side)
    swap = path.parent / f".{path.name}.swp"

    def ready() -> bool:
        with contextlib.suppress(OSError):
            os.read(main, 65536)  # keep its terminal drained
        return swap.exists() and swap.stat().st_size >= 4096

    os.set_blocking(main, False)
    wait_until("vim's swap file", ready, proc=proc)
    return proc


def vim_r(directory: Path) -> str:
    """`vim -r`'s list of swap files in `directory`: Vim's own verdict."""
    done = subprocess.run(
        ["vim", "-r"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return done.stdout + done.stderr


def test_a_live_vims_swap_is_active_and_a_killed_ones_stale(
    tmp_path: Path, vims: list[subprocess.Popen[bytes]]
) -> None:
    need_tools("vim")
    directory = locks_dir(tmp_path)
    edited = directory / "notes.txt"
    edited.write_text("first line\n")
    proc = edit(edited, vims)

    record = records(directory)[".notes.txt.swp"]  # found by the scan: no *.lock name
    listing = vim_r(directory)
    assert f"process ID: {proc.pid} (STILL RUNNING)" in listing, listing
    assert record["format"] == "vim-swap", record
    assert (record["state"], record["holder"]["pid"]) == ("active", proc.pid), record
    assert record["name"] == "notes.txt"

    kill_and_reap(proc)
    record = records(directory)[".notes.txt.swp"]
    listing = vim_r(directory)
    assert f"process ID: {proc.pid}" in listing and "STILL RUNNING" not in listing, listing
    assert record["state"] == "stale", record
    assert codes(record)[0] == "holder_dead", record
    # Vim says so too: its changes are in the swap file, for `vim -r` to recover.
    assert "modified: YES" in listing
    assert "unsaved_changes" in codes(record)


def test_another_hosts_swap_is_unknown_never_stale(
    tmp_path: Path, vims: list[subprocess.Popen[bytes]]
) -> None:
    need_tools("vim")
    directory = locks_dir(tmp_path)
    edited = directory / "notes.txt"
    edited.write_text("first line\n")
    proc = edit(edited, vims)
    kill_and_reap(proc)
    swap = directory / ".notes.txt.swp"
    # The same swap file as written on another host (over NFS): its host field.
    raw = bytearray(swap.read_bytes())
    raw[68:108] = b"elsewhere".ljust(40, b"\0")
    swap.write_bytes(bytes(raw))

    record = records(directory)[".notes.txt.swp"]
    assert "host name: elsewhere" in vim_r(directory)
    assert (record["state"], codes(record)[0]) == ("unknown", "foreign_host"), record


def test_a_swap_named_file_that_vim_did_not_write_is_not_listed(tmp_path: Path) -> None:
    directory = locks_dir(tmp_path)
    (directory / ".x.swp").write_text("not vim's\n")
    (directory / "real.lock").write_text("")
    assert set(records(directory)) == {"real.lock"}
