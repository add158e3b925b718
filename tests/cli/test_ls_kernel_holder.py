"""A lock file a kernel lock is held on names its holders by command, as lslocks
does (issue 33, item 1): `flock (pid N) + 1 more`, not a bare pid."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockwatch.sources.procfs import listed

pytestmark = pytest.mark.skipif(shutil.which("flock") is None, reason="util-linux flock")


def test_the_table_names_the_holders_command(tmp_path: Path) -> None:
    lock = tmp_path / "app.lock"
    lock.write_text("")
    holder = subprocess.Popen(["flock", "-x", str(lock), "sleep", "60"])
    try:
        inode = lock.stat().st_ino
        for _ in range(200):  # flock(1) takes it at once; bounded, not timed
            if any(entry.file.inode == inode for entry in listed() or []):
                break
            time.sleep(0.05)
        out = subprocess.run(
            [sys.executable, "-m", "lockwatch", "ls", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    finally:
        holder.kill()
        holder.wait()
    row = next(line for line in out.splitlines() if "app.lock" in line)
    assert f"flock (pid {holder.pid}) + 1 more" in row, out  # flock(1) and its sleep
