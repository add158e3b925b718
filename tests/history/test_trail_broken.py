"""A lock with no waiters still leaves a trail (issue 44, item 2): a lock file
whose holder died is stale while the recorder watches; `lockwatch break` (the
real CLI, audited) moves it aside, and the history says "stale …, broken by
<operator> (audit #N)" with the audit record's seq."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson

from tests.history.harness import reader, recording, wait_until


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_stale_lock_broken_leaves_a_trail_with_its_audit_id(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    locks.mkdir()
    lock = locks / "deploy.lock"
    lock.write_text(json.dumps({"pid": _dead_pid()}))
    history = tmp_path / "history.sqlite3"
    config = tmp_path / "lockwatch.toml"
    config.write_text(f'[history]\npath = "{history}"\n')
    audit = tmp_path / "audit.jsonl"
    with recording([str(locks)], history, 0.2) as watcher:
        wait_until(
            lambda: any(
                e.verdict.state.value == "stale" for e in list(watcher.board.entries.values())
            ),
            "the lock seen stale",
        )
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "lockwatch",
                "break",
                str(lock),
                "--reason",
                "holder died",
                "--yes",
                "--operator",
                "ops",
                "--audit-log",
                str(audit),
                "--config",
                str(config),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        wait_until(
            lambda: (
                (not lock.exists() and len(watcher.board) == 0)
                or all(e.lock.path != str(lock) for e in list(watcher.board.entries.values()))
            ),
            "the lock seen gone",
        )
    seqs = [
        json.loads(line)["seq"]
        for line in audit.read_text().splitlines()
        if json.loads(line).get("event") == "lock_broken"
    ]
    assert len(seqs) == 1
    trails = [e for e in reader(history).episodes() if e.state == "stale"]
    assert len(trails) == 1, trails
    trail = trails[0]
    assert trail.ended_by == "broken" and trail.audit_id == seqs[0] and trail.operator == "ops"
    shown = subprocess.run(
        [sys.executable, "-m", "lockwatch", "history", "--history", str(history), "--json"],
        capture_output=True,
        check=False,
    )
    episode = orjson.loads(shown.stdout)["episodes"][0]
    assert episode["ended_by"] == "broken" and episode["audit_id"] == seqs[0]
    table = subprocess.run(
        [sys.executable, "-m", "lockwatch", "history", "--history", str(history), "show", trail.id],
        capture_output=True,
        text=True,
        check=False,
    )
    assert f"broken by ops (audit #{seqs[0]})" in table.stdout
