"""The tests keep to the session's sandbox (issue 42, item 6): lockwatch's default
config, state, audit and key paths are temporary ones, in this process, in the
subprocesses tests start and on every xdist worker; and the check that fails a
test writing the runner's own lockwatch files sees each kind of change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import sandbox
from tests.conftest import RUNNER_DIRS, SANDBOX, run_cli

DEFAULTS = (
    "import json\n"
    "from lockwatch import config\n"
    "from lockwatch.actions import audit, audit_key, export\n"
    "from lockwatch.ui import themes\n"
    "paths = [audit.default_path(), audit_key.default_key_path(), config.default_paths()[-1]]\n"
    "paths += [themes.user_dir(), export.default_directory()]\n"
    "print(json.dumps([str(path) for path in paths]))\n"
)


def _outside_the_runners(paths: list[str]) -> None:
    for path in paths:
        assert Path(path).is_relative_to(SANDBOX), path
        for mine in RUNNER_DIRS.values():
            assert not Path(path).is_relative_to(mine), (path, mine)


def test_lockwatch_default_files_are_the_sandboxes_here_and_in_subprocesses() -> None:
    from lockwatch import config
    from lockwatch.actions import audit, audit_key, export
    from lockwatch.ui import themes

    here = [audit.default_path(), audit_key.default_key_path(), config.default_paths()[-1]]
    here += [themes.user_dir(), export.default_directory()]  # this process: a worker or -n0
    _outside_the_runners([str(path) for path in here])
    done = subprocess.run(
        [sys.executable, "-c", DEFAULTS], capture_output=True, text=True, check=True, timeout=60
    )
    _outside_the_runners(json.loads(done.stdout))


def test_every_xdg_directory_and_home_is_the_sandboxes() -> None:
    for name in ("HOME", *sandbox.XDG_DIRS):
        assert Path(os.environ[name]).is_relative_to(SANDBOX), name
    assert not Path(os.environ["HOME"]).is_relative_to(Path(RUNNER_DIRS["config"]).parent)
    assert oct(Path(os.environ["XDG_RUNTIME_DIR"]).stat().st_mode & 0o777) == "0o700"


def test_a_break_audited_by_default_is_audited_in_the_sandbox(tmp_path: Path) -> None:
    lock = tmp_path / "worker.pid"
    lock.write_text("999999\n")  # no such pid: stale, broken
    before = sandbox.fingerprint(RUNNER_DIRS)
    code, _, err = run_cli("break", str(lock), "--reason", "isolation", "--yes")
    assert code == 0, err
    log = Path(os.environ["XDG_STATE_HOME"]) / "lockwatch" / "audit.jsonl"
    mine = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(r.get("target", {}).get("path") == str(lock) for r in mine)
    assert sandbox.changes(RUNNER_DIRS, before, sandbox.fingerprint(RUNNER_DIRS)) == []


def test_the_check_sees_a_directory_made_a_file_added_grown_or_removed(tmp_path: Path) -> None:
    """Stand-ins for the runner's directories (the real ones are the runner's own)."""
    dirs = {"state": str(tmp_path / "state"), "config": str(tmp_path / "config")}
    (tmp_path / "config").mkdir()
    start = sandbox.fingerprint(dirs)
    assert start["state"] is None and sandbox.changes(dirs, start, start) == []
    (tmp_path / "state").mkdir()
    made = sandbox.fingerprint(dirs)
    assert sandbox.changes(dirs, start, made) == [f"{dirs['state']} was created"]
    audit = tmp_path / "state" / "audit.jsonl"
    audit.write_text("{}\n")
    added = sandbox.fingerprint(dirs)
    assert "audit.jsonl" in sandbox.changes(dirs, made, added)[0]
    with audit.open("a") as grown:
        grown.write("{}\n")
    assert "audit.jsonl" in sandbox.changes(dirs, added, sandbox.fingerprint(dirs))[0]
    audit.unlink()
    (tmp_path / "state").rmdir()
    assert sandbox.changes(dirs, added, sandbox.fingerprint(dirs)) == [
        f"{dirs['state']} was removed"
    ]
