"""`lockwatch ls` into a pipe whose reader goes away: exit 1, as documented, not 0.

The reader is real: a pipe shrunk to one page, read for a few bytes and closed
while lockwatch is still writing, as `lockwatch ls --json | head -c 10` does.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = 4096


def _locks(directory: Path, count: int) -> None:
    for n in range(count):
        (directory / f"worker-{n:03}.lock").write_text(
            f'{{"pid": 1, "session_id": "s{n}", "acquired_at": "2026-01-01T00:00:00Z"}}'
        )


def _run_into_closed_pipe(args: list[str], cwd: Path) -> tuple[int, bytes, bytes]:
    read_end, write_end = os.pipe()
    # One page: lockwatch's output cannot all fit before the reader goes away.
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PAGE)
    child = subprocess.Popen(
        [sys.executable, "-m", "lockwatch", *args],
        stdout=write_end,
        stderr=subprocess.PIPE,
        cwd=cwd,
    )
    os.close(write_end)
    try:
        first = os.read(read_end, 10)
    finally:
        os.close(read_end)
    _, err = child.communicate(timeout=60)
    return child.returncode, first, err


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_a_reader_that_goes_away_makes_ls_exit_1(tmp_path: Path, as_json: bool) -> None:
    _locks(tmp_path, 120)  # ~20 KiB of JSON, ~12 KiB of table: several pages
    args = ["ls", *(["--json"] if as_json else []), str(tmp_path)]
    code, first, err = _run_into_closed_pipe(args, tmp_path)
    assert first  # the reader did get the start of the output
    assert code == 1, err.decode(errors="replace")
    assert b"Traceback" not in err


def test_a_reader_that_reads_everything_gets_exit_0(tmp_path: Path) -> None:
    _locks(tmp_path, 120)
    done = subprocess.run(
        [sys.executable, "-m", "lockwatch", "ls", "--json", str(tmp_path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(b"}\n") and len(done.stdout) > 4 * PAGE


def test_ls_started_with_its_output_closed_exits_1(tmp_path: Path) -> None:
    """`lockwatch ls --json DIR >&-`: Python starts with no sys.stdout at all."""
    _locks(tmp_path, 3)
    proc = subprocess.run(
        ["sh", "-c", 'exec "$0" -m lockwatch ls --json "$1" >&-', sys.executable, str(tmp_path)],
        stderr=subprocess.PIPE,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.decode().strip() == (
        "lockwatch: standard output is closed: nothing could be written"
    )
