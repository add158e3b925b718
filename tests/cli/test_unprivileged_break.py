"""A lock file lockwatch's user may not read is listed (issue 42), but never
moved: with its bytes unread there is nothing to compare right before a move.
Run for real as user nobody, in a directory nobody may write (so the rename
itself would go through), on root's 0600 lock file."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.producers.test_dpkg import lockwatch_as_nobody

NOBODY = 65534


def test_a_lock_file_it_may_not_read_is_refused_before_any_confirmation(open_dir: Path) -> None:
    home, locks = open_dir / "home", open_dir / "locks"
    for directory in (home, home / "config", locks):  # its audit key is made in config
        directory.mkdir(mode=0o755)
        os.chown(directory, NOBODY, NOBODY)
    lock = locks / "x.lock"
    lock.write_text('{"pid": 1}')
    lock.chmod(0o600)
    audit = home / "audit.jsonl"
    done = lockwatch_as_nobody(
        home,
        *("break", "--json", "--force", "--yes", "--reason", "test"),
        *("--audit-log", str(audit), f"file:{lock}"),
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    said = json.loads(done.stdout)
    assert (said["event"], said["code"]) == ("action_refused", "permission_denied"), said
    assert "may not read" in said["message"], said
    [record] = [json.loads(line) for line in audit.read_text().splitlines()]
    assert record["effect"] == "nothing" and record["reasons"] == ["permission_denied"], record
    assert lock.read_text() == '{"pid": 1}' and sorted(p.name for p in locks.iterdir()) == [
        "x.lock"
    ]
