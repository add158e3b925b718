"""`lockwatch break kernel:…`: the holder (a real process holding a real
flock, see holders.py) is signalled only behind --force, only while it still
holds the same lock, and every outcome is audited."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.kernel.holders import Holder, Holders


def lockwatch(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LOCKWATCH_READONLY": ""},
    )


def kernel_record(tmp_path: Path, path: Path) -> dict[str, Any]:
    # No PATHs: the host's kernel locks, each a row (with PATHs, the file's row
    # carries its held lock: one row per file).
    done = lockwatch("ls", "--json", "--kernel", cwd=tmp_path)
    locks = json.loads(done.stdout)["locks"]
    return next(lock for lock in locks if lock["source"] == "kernel" and lock["path"] == str(path))


def alive(holder: Holder) -> bool:
    # A call, not the property: mypy keeps a property narrowed by an earlier assert.
    return holder.alive


def audit(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_breaking_a_kernel_lock_signals_its_holder_behind_force(
    holders: Holders, tmp_path: Path
) -> None:
    path = tmp_path / "work.lock"
    holder = holders.start("flock", path)
    lock_id = kernel_record(tmp_path, path)["id"]
    base: tuple[str, ...] = ("break", lock_id, "--reason", "hung", "--yes", "--json")
    base += ("--audit-log", str(tmp_path / "audit.jsonl"))

    refused = lockwatch(*base, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert alive(holder)  # not stale: nothing without --force

    done = lockwatch(*base, "--force", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["event"] == "holder_signalled" and outcome["ok"] is True
    holder.proc.wait(timeout=10)  # SIGTERM ends the helper, and the kernel frees the lock
    assert not alive(holder)
    events = [(record["event"], record.get("signal")) for record in audit(tmp_path)]
    assert events[-1] == ("holder_signalled", "SIGTERM")

    # The lock id names a holder that is gone: refused and audited, nobody signalled.
    again = lockwatch(*base, "--force", cwd=tmp_path)
    assert again.returncode == 1
    assert audit(tmp_path)[-1]["event"] == "action_refused"


def test_a_lock_released_since_it_was_listed_is_not_signalled(
    holders: Holders, tmp_path: Path
) -> None:
    path = tmp_path / "work.lock"
    holder = holders.start("flock", path)
    lock_id = kernel_record(tmp_path, path)["id"]
    holder.release()  # released, but the process lives on
    done = lockwatch(
        "break", lock_id, "--reason", "x", "--yes", "--force", "--json",
        "--audit-log", str(tmp_path / "audit.jsonl"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert holder.alive  # never signalled
    assert audit(tmp_path)[-1]["event"] == "action_refused"


def test_a_held_lock_file_is_never_moved_aside(holders: Holders, tmp_path: Path) -> None:
    path = tmp_path / "work.lock"
    holder = holders.start("filelock", path)
    done = lockwatch(
        "break", str(path), "--reason", "x", "--yes", "--force", "--json",
        "--audit-log", str(tmp_path / "audit.jsonl"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert json.loads(done.stdout)["code"] == "kernel_lock"
    assert path.exists() and holder.alive


def test_a_held_lock_file_broken_with_a_signal_signals_its_holder(
    holders: Holders, tmp_path: Path
) -> None:
    """Asked for by --signal, a lock file's break is its kernel lock's: the holder
    is signalled (behind --force: it is alive), and the file stays where it is."""
    path = tmp_path / "work.lock"
    holder = holders.start("filelock", path)
    done = lockwatch(
        "break", str(path), "--signal", "TERM", "--reason", "hung", "--yes", "--force",
        "--json", "--audit-log", str(tmp_path / "audit.jsonl"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["event"] == "holder_signalled"
    holder.proc.wait(timeout=10)
    assert not alive(holder)
    assert path.exists()
    assert audit(tmp_path)[-1]["event"] == "holder_signalled"


def test_expect_sha256_on_a_kernel_break_is_refused_not_ignored(
    holders: Holders, tmp_path: Path
) -> None:
    """--expect-sha256 compares a lock file's bytes; the kernel's break compares
    its holders. Asked for on that break, it is refused rather than said to be
    checked (the audit would record a hash nobody compared)."""
    path = tmp_path / "work.lock"
    holder = holders.start("filelock", path)
    done = lockwatch(
        "break", str(path), "--signal", "TERM", "--expect-sha256", "0" * 64, "--reason", "x",
        "--yes", "--force", "--json", "--audit-log", str(tmp_path / "audit.jsonl"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    assert json.loads(done.stdout)["code"] == "unsupported", done.stdout
    assert alive(holder)
