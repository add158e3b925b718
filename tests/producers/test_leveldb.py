"""LevelDB's `LOCK` as the real LevelDB library (plyvel, Debian's
python3-plyvel) holds it: an empty file fcntl-locked while a process has the
database open. The library's own answer from a second process (its open fails
on the lock) and lockwatch's agree."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.formats.common import Holder, codes, hold_in, holder_script, killed_at_teardown, ls

OPEN = "import plyvel\ndb = plyvel.DB(sys.argv[1], create_if_missing=True)"


def _python_with_plyvel() -> str:
    """An interpreter that has plyvel (the venv's, else the system's python3,
    where Debian's python3-plyvel puts it)."""
    for python in (sys.executable, "/usr/bin/python3"):
        done = subprocess.run([python, "-c", "import plyvel"], capture_output=True, check=False)
        if done.returncode == 0:
            return python
    why = "plyvel is not installed (apt-get install python3-plyvel)"
    if os.environ.get("LOCKWATCH_REQUIRE_TOOLS"):
        pytest.fail(f"{why} (LOCKWATCH_REQUIRE_TOOLS is set)", pytrace=False)
    pytest.skip(why)


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    yield from killed_at_teardown()


def _library_says(python: str, path: Path) -> str:
    """What a second process's open says: 'opened', or LevelDB's error."""
    script = (
        "import sys, plyvel\n"
        "try:\n    plyvel.DB(sys.argv[1]).close()\nexcept plyvel.IOError as exc:\n"
        "    print(exc)\nelse:\n    print('opened')\n"
    )
    done = subprocess.run(
        [python, "-c", script, str(path)], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def test_an_open_database_holds_its_lock(tmp_path: Path, holders: list[Holder]) -> None:
    python = _python_with_plyvel()
    path = tmp_path / "index"
    holder = hold_in(holders, [python, "-c", holder_script(OPEN, "db.close()"), str(path)])
    said = _library_says(python, path)
    assert "lock" in said and "Resource temporarily unavailable" in said, said
    rows = ls(tmp_path)["locks"]
    assert [row["path"] for row in rows] == [str(path / "LOCK")], rows
    (row,) = rows
    assert row["format"] == "leveldb" and row["state"] == "active", row
    assert row["name"] == "index/LOCK" and row["holder"]["pid"] == holder.proc.pid, row
    assert "leveldb_lock" in codes(row), row

    holder.release()  # closed: the file stays, free
    assert _library_says(python, path) == "opened"
    (row,) = ls(tmp_path)["locks"]
    assert row["format"] == "leveldb" and row["state"] == "free", row
