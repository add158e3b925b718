"""`lockwatch break | steal | release` and `lockwatch audit` as operators run them:
real processes, real files, exit codes 0 done / 1 refused / 2 usage / 3 failed.

Two `lockwatch break` processes on one lock are released at the same instant
through a pipe (each child imports lockwatch first, says it is ready, then blocks
on the pipe), so the race is a real one. The terminal confirmation runs on a
pseudo-terminal. Every wait on a child is bounded; there are no sleeps.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions.audit import head_path, read_records

TIMEOUT_S = 30.0
HOST = os.uname().nodename


def lockwatch_command() -> list[str]:
    script = Path(sys.executable).parent / "lockwatch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "lockwatch"]


def stamp(seconds_ago: float) -> str:
    at = datetime.now(UTC) - timedelta(seconds=seconds_ago)
    return at.isoformat().replace("+00:00", "Z")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No lockwatch.toml, user config, state or server variables from this machine."""
    home = tmp_path / "home"
    home.mkdir()
    clean = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PG", "LOCKWATCH_", "SUDO_", "PYTEST", "COV_"))
    }
    clean.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".state"),
        LANG="C.UTF-8",
    )
    return clean


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The directory lockwatch runs in: no lockwatch.toml there."""
    directory = tmp_path / "cwd"
    directory.mkdir()
    return directory


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "audit.jsonl"


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def __repr__(self) -> str:
        return f"exit {self.code}\nstdout: {self.out}\nstderr: {self.err}"


@pytest.fixture
def lw(env: dict[str, str], work: Path) -> Any:
    def run(*args: str, extra_env: dict[str, str] | None = None) -> Run:
        proc = subprocess.run(
            [*lockwatch_command(), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=work,
            env={**env, **(extra_env or {})},
            timeout=TIMEOUT_S,
            check=False,
        )
        return Run(proc)

    return run


@pytest.fixture
def lwi(env: dict[str, str], work: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The same CLI in-process (click's CliRunner: stdin is no terminal), for the
    checks that need no process of their own; a crash is re-raised."""
    from click.testing import CliRunner

    from lockwatch.cli import cli

    for key in list(os.environ):
        if key.startswith(("PG", "LOCKWATCH_", "SUDO_")):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(work)

    def run(*args: str, extra_env: dict[str, str] | None = None) -> Run:
        result = CliRunner(env=extra_env).invoke(cli, list(args))
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return Run(
            subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)
        )

    return run


def records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    found = [record for _, record, _ in read_records(log)]
    assert all(record is not None for record in found)
    return [record for record in found if record is not None]


def events(log: Path) -> list[str]:
    return [record["event"] for record in records(log)]


def pid_file(directory: Path, pid: int = 999999, name: str = "worker.pid") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"{pid}\n")
    return path


TOWER = {
    "lock_version": "v1",
    "lock_name": "deploy-prod",
    "request_id": "req_old",
    "actor": "ci",
    "intent": "deploy",
    "intent_version": "1.2.0",
    "host_id": HOST,
    "pid": 999999,
    "created_at": stamp(7200),
    "last_heartbeat_at": stamp(3600),
    "ttl_seconds": 900,
    "metadata": {"ticket": "OPS-9"},
}


def tower_lock(root: Path, **changes: Any) -> Path:
    path = root / "logs" / "locks" / "deploy-prod.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**TOWER, **changes}))
    return path


def tombstones(lock: Path) -> list[Path]:
    where = lock.parent / ".lockwatch-broken"
    return sorted(where.iterdir()) if where.exists() else []


# ----------------------------------------------------------------------------- break


def test_break_a_stale_pid_file(lw: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lw("break", str(lock), "--reason", "holder died, INC-1", "--yes", "--audit-log", str(log))
    assert run.code == 0, run
    assert "broke" in run.out and ".lockwatch-broken" in run.out
    assert not lock.exists()
    (tomb,) = tombstones(lock)
    assert tomb.name.startswith("worker.pid@") and tomb.read_text() == "999999\n"
    assert events(log) == ["action_intent", "lock_broken"]
    result = records(log)[-1]
    assert result["reason"] == "holder died, INC-1"
    assert result["target"]["path"] == str(lock)
    assert result["previous_lock_hash"] == f"sha256:{sha(b'999999' + bytes([10]))}"
    assert result["tombstone"] == str(tomb)
    assert result["host"] == HOST
    assert result["operator"] == result["os_user"]
    assert result["lockwatch_pid"] != os.getpid()
    assert log.stat().st_mode & 0o777 == 0o600


def test_break_audits_to_the_user_state_dir_by_default(
    lw: Any, tmp_path: Path, env: dict[str, str]
) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lw("break", str(lock), "--reason", "r", "--yes", "--operator", "oncall-erin")
    assert run.code == 0, run
    default = Path(env["XDG_STATE_HOME"]) / "lockwatch" / "audit.jsonl"
    assert events(default) == ["action_intent", "lock_broken"]
    assert records(default)[-1]["operator"] == "oncall-erin"


def test_sudo_user_is_the_operator(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lwi(
        "break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        extra_env={"SUDO_USER": "dave"},
    )  # fmt: skip
    assert run.code == 0, run
    assert records(log)[-1]["operator"] == "dave"
    assert records(log)[-1]["sudo_user"] == "dave"


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_no_reason_is_a_usage_error_and_touches_nothing(
    lwi: Any, tmp_path: Path, log: Path, reason: str | None
) -> None:
    lock = pid_file(tmp_path / "locks")
    args = ["break", str(lock), "--yes", "--audit-log", str(log)]
    if reason is not None:
        args += ["--reason", reason]
    run = lwi(*args)
    assert run.code == 2, run
    assert "--reason is required" in run.err
    assert lock.read_text() == "999999\n" and tombstones(lock) == []
    assert not log.exists()


def test_no_terminal_and_no_yes_is_refused(lw: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lw("break", str(lock), "--reason", "r", "--audit-log", str(log))
    assert run.code == 2, run
    assert "no terminal" in run.err and "--yes" in run.err
    assert lock.exists() and tombstones(lock) == []


def test_an_active_lock_needs_force(lw: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks", pid=os.getpid())  # this test runs: active
    run = lw("break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 1, run
    assert "refused" in run.err and "--force" in run.err
    assert lock.read_text() == f"{os.getpid()}\n" and tombstones(lock) == []
    assert events(log) == ["action_refused"]
    assert records(log)[0]["code"] == "not_stale" and records(log)[0]["state"] == "active"
    run = lw("break", str(lock), "--reason", "r", "--yes", "--force", "--audit-log", str(log))
    assert run.code == 0, run
    assert not lock.exists() and len(tombstones(lock)) == 1
    assert events(log) == ["action_refused", "action_intent", "lock_broken"]
    assert records(log)[-1]["forced"] is True


def test_expect_sha256_mismatch_is_refused(lw: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    wrong = sha(b"what the operator saw elsewhere")
    run = lw(
        "break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        "--expect-sha256", wrong,
    )  # fmt: skip
    assert run.code == 1, run
    assert "changed since you saw it" in run.err
    assert lock.read_text() == "999999\n" and tombstones(lock) == []
    assert events(log) == ["action_intent", "action_refused"]
    assert records(log)[-1]["code"] == "changed"


def test_expect_sha256_must_be_a_sha256(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lwi(
        "break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        "--expect-sha256", "abc",
    )  # fmt: skip
    assert run.code == 2, run
    assert lock.exists() and not log.exists()


def test_target_as_an_id_from_ls_json(lw: Any, tmp_path: Path, log: Path) -> None:
    root = tmp_path / "locks"
    keep = pid_file(root, name="keep.pid")
    lock = pid_file(root)
    listing = lw("ls", "--json", str(root))
    assert listing.code in (0, 1), listing
    (listed,) = [entry for entry in json.loads(listing.out)["locks"] if entry["name"] == "worker"]
    assert listed["id"] == f"file:{lock}"
    assert listed["sha256"] == sha(lock.read_bytes())
    run = lw(
        "break", listed["id"], "--reason", "r", "--yes", "--audit-log", str(log),
        "--expect-sha256", f"sha256:{listed['sha256']}",
    )  # fmt: skip
    assert run.code == 0, run
    assert not lock.exists() and keep.exists()
    assert records(log)[-1]["target"]["id"] == listed["id"]


def test_re_acquired_after_ls_is_refused(lw: Any, tmp_path: Path, log: Path) -> None:
    """The operator looked (ls --json); the lock was taken anew before they acted."""
    root = tmp_path / "locks"
    lock = pid_file(root)
    listing = lw("ls", "--json", str(root))
    (listed,) = json.loads(listing.out)["locks"]
    lock.write_text(f"{os.getpid()}\n")
    run = lw(
        "break", listed["id"], "--reason", "r", "--yes", "--force", "--audit-log", str(log),
        "--expect-sha256", listed["sha256"],
    )  # fmt: skip
    assert run.code == 1, run
    assert "changed" in run.err
    assert lock.read_text() == f"{os.getpid()}\n" and tombstones(lock) == []


def test_a_lock_that_is_gone_is_refused_and_audited(lwi: Any, tmp_path: Path, log: Path) -> None:
    run = lwi(
        "break", f"file:{tmp_path}/none.pid", "--reason", "r", "--yes", "--audit-log", str(log)
    )
    assert run.code == 1, run
    assert "gone" in run.err
    assert events(log) == ["action_refused"]
    assert records(log)[0]["code"] == "not_found"


def test_a_mistyped_path_says_no_such_file_first_and_is_not_audited(
    lwi: Any, tmp_path: Path, log: Path
) -> None:
    """Issue 46, item 9: a path that does not exist is said first (not "pass
    --yes"), and, no lock having been seen there, nothing is audited, try after try."""
    missing = tmp_path / "nonexistent" / "x.lock"
    asked = lwi("break", str(missing), "--reason", "test", "--audit-log", str(log))
    assert asked.code == 2, asked
    assert "no such file" in asked.err and "--yes" not in asked.err
    for _ in range(2):
        run = lwi("break", str(missing), "--reason", "test", "--yes", "--audit-log", str(log))
        assert run.code == 2, run
        assert f"{missing}: no such file or directory; nothing was done" in run.err
    assert records(log) == []


def test_a_directory_is_no_target(lwi: Any, tmp_path: Path, log: Path) -> None:
    run = lwi("break", str(tmp_path), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 2, run
    assert not log.exists()


def test_a_symlinked_lock_is_refused(lwi: Any, tmp_path: Path, log: Path) -> None:
    target = pid_file(tmp_path / "locks", name="real.pid")
    link = tmp_path / "locks" / "link.pid"
    link.symlink_to(target)
    run = lwi("break", str(link), "--reason", "r", "--yes", "--force", "--audit-log", str(log))
    assert run.code == 1, run
    assert "symlink" in run.err
    assert link.is_symlink() and target.read_text() == "999999\n"
    assert tombstones(target) == []
    assert records(log)[-1]["code"] == "symlink"


def test_a_lock_named_with_bytes_that_are_not_utf8(
    lw: Any, lwi: Any, tmp_path: Path, log: Path
) -> None:
    """Its path reaches the audit log escaped, instead of crashing the record."""
    root = tmp_path / "locks"
    root.mkdir()
    raw_path = os.fsencode(root) + b"/c\xff.pid"
    with open(raw_path, "wb") as handle:
        handle.write(b"999999\n")
    run = lw(
        "break", os.fsdecode(raw_path), "--reason", "r\udcfe", "--yes", "--audit-log", str(log)
    )
    assert run.code == 0, run
    assert not os.path.exists(raw_path)
    assert records(log)[-1]["target"]["path"] == f"{root}/c\\xff.pid"
    assert records(log)[-1]["reason"] == "r\\xfe"
    assert lwi("audit", "verify", "--audit-log", str(log)).code == 0


def test_tombstone_dir_and_audit_log_from_the_config(lw: Any, tmp_path: Path, work: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    log = tmp_path / "configured" / "audit.jsonl"
    (work / "lockwatch.toml").write_text(
        f'[actions]\naudit_log = "{log}"\ntombstone_dir = "graveyard"\n'
    )
    run = lw("break", str(lock), "--reason", "r", "--yes")
    assert run.code == 0, run
    assert len(list((lock.parent / "graveyard").iterdir())) == 1
    assert events(log) == ["action_intent", "lock_broken"]
    assert lw("audit", "verify").code == 0  # the config's log, too


def test_tombstone_dir_option(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    where = tmp_path / "tombs"
    run = lwi(
        "break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        "--tombstone-dir", str(where), "--json",
    )  # fmt: skip
    assert run.code == 0, run
    outcome = json.loads(run.out)
    assert outcome["ok"] is True and outcome["event"] == "lock_broken"
    assert outcome["audited"] is True and outcome["code"] is None
    assert Path(outcome["tombstone"]).parent == where
    assert Path(outcome["tombstone"]).read_text() == "999999\n"


# ----------------------------------------------------------------------------- read-only


def test_readonly_flag_before_the_subcommand(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lwi("--readonly", "break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 2, run
    assert "read-only" in run.err
    assert lock.exists() and not log.exists()


def test_readonly_in_the_config(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = tower_lock(tmp_path / "root")
    config = tmp_path / "ro.toml"
    config.write_text("readonly = true\n")
    run = lwi(
        "steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        "--config", str(config),
    )  # fmt: skip
    assert run.code == 2, run
    assert "readonly = true" in run.err
    assert json.loads(lock.read_text()) == TOWER and not log.exists()


def test_readonly_from_the_environment(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lwi(
        "break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        extra_env={"LOCKWATCH_READONLY": "1"},
    )  # fmt: skip
    assert run.code == 2, run
    assert lock.exists()


# ----------------------------------------------------------------------------- unwritable log


def test_audit_log_under_a_regular_file_means_no_action(lw: Any, tmp_path: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    (tmp_path / "blocker").write_text("a file, not a directory")
    log = tmp_path / "blocker" / "audit.jsonl"
    run = lw("break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log), "--json")
    assert run.code == 1, run
    outcome = json.loads(run.out)
    assert outcome["code"] == "audit_unwritable" and outcome["audited"] is False
    assert lock.read_text() == "999999\n" and tombstones(lock) == []


def test_audit_log_that_is_a_symlink_means_no_action(lwi: Any, tmp_path: Path) -> None:
    lock = tower_lock(tmp_path / "root")
    real = tmp_path / "real.jsonl"
    real.write_text("")
    log = tmp_path / "audit.jsonl"
    log.symlink_to(real)
    run = lwi("steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 1, run
    assert "symlink" in run.err and "nothing was done" in run.err
    assert json.loads(lock.read_text()) == TOWER and tombstones(lock) == []
    assert real.read_text() == ""


def test_audit_log_that_is_a_directory_means_no_action(lwi: Any, tmp_path: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    log = tmp_path / "audit.jsonl"
    log.mkdir()
    run = lwi("break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 2, run  # click already refuses the option
    assert "is a directory" in run.err
    assert lock.read_text() == "999999\n" and tombstones(lock) == []
    assert list(log.iterdir()) == []


# ----------------------------------------------------------------------------- steal, release


def test_steal_a_stale_tower_fleet_lock(lw: Any, tmp_path: Path, log: Path) -> None:
    lock = tower_lock(tmp_path / "root")
    old = lock.read_bytes()
    run = lw(
        "steal", str(lock), "--reason", "executor hung, INC-9", "--yes", "--audit-log", str(log),
        "--operator", "oncall-erin", "--json",
    )  # fmt: skip
    assert run.code == 0, run
    outcome = json.loads(run.out)
    assert outcome["event"] == "lock_stolen"
    new = json.loads(lock.read_text())
    assert outcome["new_lock_hash"] == f"sha256:{sha(lock.read_bytes())}"
    assert new["lock_version"] == "v1" and new["lock_name"] == "deploy-prod"
    assert new["request_id"].startswith("req_") and new["request_id"] != "req_old"
    assert new["actor"] == "oncall-erin"
    assert new["host_id"] == HOST
    assert isinstance(new["pid"], int) and new["pid"] not in (999999, os.getpid())
    assert new["ttl_seconds"] == 900 and new["intent"] == "deploy"
    assert new["created_at"] == new["last_heartbeat_at"]
    taken = datetime.fromisoformat(new["created_at"])
    assert abs((datetime.now(UTC) - taken).total_seconds()) < 60
    assert new["metadata"]["ticket"] == "OPS-9"
    assert new["metadata"]["lockwatch"]["held_by"] == "oncall-erin"
    assert new["metadata"]["lockwatch"]["reason"] == "executor hung, INC-9"
    (tomb,) = tombstones(lock)
    assert tomb.read_bytes() == old
    intent, result = records(log)
    assert intent["intent"] == "lock_stolen" and result["event"] == "lock_stolen"
    assert result["new_lock"] == new and result["previous_lock"] == TOWER
    listing = json.loads(lw("ls", "--json", str(tmp_path / "root")).out)
    (shown,) = listing["locks"]
    assert shown["state"] == "active" and shown["holder"]["actor"] == "oncall-erin"


def test_steal_says_that_nothing_heartbeats_the_stolen_lock(
    lwi: Any, tmp_path: Path, log: Path
) -> None:
    lock = tower_lock(tmp_path / "root")
    run = lwi(
        "steal", str(lock), "--reason", "executor hung", "--yes", "--audit-log", str(log),
    )  # fmt: skip
    assert run.code == 0, run
    assert "note: nothing heartbeats this lock" in run.err
    assert f"pid {os.getppid()} (your shell)" in run.err
    assert "goes stale after its ttl" in run.err
    helped = lwi("steal", "--help")
    assert "Nothing heartbeats a lock file this command steals" in " ".join(helped.out.split())


def test_steal_an_active_lock_is_refused_even_with_force(
    lw: Any, lwi: Any, tmp_path: Path, log: Path
) -> None:
    lock = tower_lock(tmp_path / "root", last_heartbeat_at=stamp(5))
    before = lock.read_bytes()
    run = lw("steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 1, run
    assert "never allowed" in run.err
    assert lock.read_bytes() == before and tombstones(lock) == []
    assert events(log) == ["action_refused"]
    forced = lwi("steal", str(lock), "--reason", "r", "--yes", "--force")
    assert forced.code == 2, forced  # steal has no --force at all
    assert lock.read_bytes() == before


def test_steal_a_pid_file_with_pid(lw: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lw(
        "steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        "--pid", str(os.getpid()),
    )  # fmt: skip
    assert run.code == 0, run
    assert lock.read_text() == f"{os.getpid()}\n"
    assert records(log)[-1]["event"] == "lock_stolen"


def test_steal_a_pid_file_defaults_to_the_parent_process(
    lw: Any, tmp_path: Path, log: Path
) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lw("steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 0, run
    assert lock.read_text() == f"{os.getpid()}\n"  # the CLI's parent: this test


def test_steal_with_a_dead_pid_is_a_usage_error(lw: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    run = lw(
        "steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log), "--pid", "999998"
    )
    assert run.code == 2, run
    assert lock.read_text() == "999999\n" and not log.exists()


def test_release_a_stolen_lock(lw: Any, tmp_path: Path, log: Path) -> None:
    lock = tower_lock(tmp_path / "root")
    assert lw("steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log)).code == 0
    run = lw("release", str(lock), "--reason", "done", "--yes", "--audit-log", str(log))
    assert run.code == 0, run
    assert not lock.exists()
    assert len(tombstones(lock)) == 2
    assert events(log)[-2:] == ["action_intent", "lock_released"]


def test_release_a_stolen_pid_file(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    me = str(os.getpid())
    steal = lwi("steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log), "--pid", me)
    assert steal.code == 0, steal
    other = lwi(
        "release", str(lock), "--reason", "r", "--yes", "--audit-log", str(log), "--pid", "1"
    )
    assert other.code == 1, other  # pid 1 does not hold it
    assert lock.exists()
    run = lwi("release", str(lock), "--reason", "r", "--yes", "--audit-log", str(log), "--pid", me)
    assert run.code == 0, run
    assert not lock.exists()


def test_release_of_another_operators_stolen_lock_is_refused(
    lwi: Any, tmp_path: Path, log: Path
) -> None:
    lock = tower_lock(tmp_path / "root")
    taken = lwi(
        "steal", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        "--operator", "alice",
    )  # fmt: skip
    assert taken.code == 0, taken
    before = lock.read_bytes()
    run = lwi(
        "release", str(lock), "--reason", "mine now", "--yes", "--audit-log", str(log),
        "--operator", "mallory",
    )  # fmt: skip
    assert run.code == 1, run
    assert "does not hold" in run.err
    assert lock.read_bytes() == before  # still alice's
    assert records(log)[-1]["code"] == "not_held"
    mine = lwi(
        "release", str(lock), "--reason", "done", "--yes", "--audit-log", str(log),
        "--operator", "alice",
    )  # fmt: skip
    assert mine.code == 0, mine
    assert not lock.exists()


def test_release_a_lock_lockwatch_does_not_hold(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = tower_lock(tmp_path / "root")
    run = lwi("release", str(lock), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 1, run
    assert "does not hold" in run.err
    assert json.loads(lock.read_text()) == TOWER
    assert records(log)[-1]["code"] == "not_held"


# ----------------------------------------------------------------------------- audit


def test_audit_prints_verifies_and_detects_tampering(lwi: Any, tmp_path: Path, log: Path) -> None:
    for name in ("a.pid", "b.pid"):
        lock = pid_file(tmp_path / "locks", name=name)
        assert (
            lwi(
                "break", str(lock), "--reason", f"why {name}", "--yes", "--audit-log", str(log)
            ).code
            == 0
        )

    table = lwi("audit", "--audit-log", str(log))
    assert table.code == 0, table
    assert "intent:lock_broken" in table.out and "lock_broken" in table.out
    assert "why a.pid" in table.out and str(tmp_path / "locks" / "b.pid") in table.out

    as_json = lwi("audit", "--json", "--audit-log", str(log))
    assert as_json.code == 0, as_json
    parsed = json.loads(as_json.out)
    assert isinstance(parsed, list) and parsed == records(log)
    assert [r["seq"] for r in parsed] == [1, 2, 3, 4]

    ok = lwi("audit", "verify", "--audit-log", str(log))
    assert ok.code == 0, ok
    assert "4 records, chain intact" in ok.out
    ok_parent = lwi("audit", "--audit-log", str(log), "verify")
    assert ok_parent.code == 0, ok_parent

    lines = log.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b"why b.pid", b"why b.pif")
    log.write_bytes(b"".join(lines))
    bad = lwi("audit", "verify", "--audit-log", str(log))
    assert bad.code == 1, bad
    assert "TAMPERED" in bad.err and "record 3" in bad.err and "line 3" in bad.err

    log.write_bytes(b"".join([*lines[:2], lines[3].replace(b"why b.pif", b"why b.pid")]))
    removed = lwi("audit", "verify", "--audit-log", str(log))
    assert removed.code == 1 and "record 3 removed" in removed.err, removed


def test_audit_verify_catches_a_truncated_tail_and_a_lost_head(
    lwi: Any, tmp_path: Path, log: Path
) -> None:
    lock = pid_file(tmp_path / "locks")
    assert lwi("break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log)).code == 0
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(lines[0])
    cut = lwi("audit", "verify", "--audit-log", str(log))
    assert cut.code == 1 and "record 2 removed from the end" in cut.err, cut
    log.write_bytes(b"".join(lines))
    head_path(log).unlink()
    headless = lwi("audit", "verify", "--audit-log", str(log))
    assert headless.code == 1 and "head" in headless.err, headless


def test_audit_without_a_log(lwi: Any, tmp_path: Path) -> None:
    missing = tmp_path / "none.jsonl"
    assert lwi("audit", "--audit-log", str(missing)).code == 2
    assert lwi("audit", "verify", "--audit-log", str(missing)).code == 2


def test_audit_json_shows_damaged_lines(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    assert lwi("break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log)).code == 0
    with open(log, "ab") as handle:
        handle.write(b"}{ not json\n")
    parsed = json.loads(lwi("audit", "--json", "--audit-log", str(log)).out)
    assert parsed[-1] == {"line": 3, "unparseable": "}{ not json"}
    assert "not a JSON record" in lwi("audit", "--audit-log", str(log)).out


# ----------------------------------------------------------------------------- the race

RACER = """
import os, sys
import lockwatch.actions.audit, lockwatch.sources.files.cas, lockwatch.actions.plan
import lockwatch.actions.run, lockwatch.cli.act, lockwatch.config, lockwatch.model.verdict
import lockwatch.sources.files.scanner, lockwatch.sources.postgres.dsn
import lockwatch.sources.processes, platformdirs
from lockwatch.cli import main
ready, go = int(sys.argv[1]), int(sys.argv[2])
os.write(ready, b"r")
os.read(go, 1)
sys.argv = ["lockwatch", *sys.argv[3:]]
main()
"""


class Racer:
    """A finished racer: its pid, exit status and output."""

    def __init__(self, pid: int, code: int, out: str, err: str) -> None:
        self.pid, self.code, self.out, self.err = pid, code, out, err

    def __repr__(self) -> str:
        return f"pid {self.pid} exit {self.code}: {self.out!r} {self.err!r}"


def _wait_ready(ready_r: int, count: int, alive: Any) -> None:
    ready = b""
    deadline = time.monotonic() + TIMEOUT_S
    while len(ready) < count:
        waiting, _, _ = select.select([ready_r], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(ready_r, 64) if waiting else b""
        if not chunk:
            pytest.fail(f"racers not ready: {alive()}")
        ready += chunk


def race_processes(commands: list[list[str]], env: dict[str, str], cwd: Path) -> list[Racer]:
    """Start every command as its own Python process, wait until each has imported
    lockwatch, then release them all at once: one write to a pipe they all block on."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    procs: list[subprocess.Popen[str]] = []
    try:
        for args in commands:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", RACER, str(ready_w), str(go_r), *args],
                    pass_fds=(ready_w, go_r),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=cwd,
                    env=env,
                )
            )
        os.close(ready_w)
        os.close(go_r)
        _wait_ready(ready_r, len(procs), lambda: [p.poll() for p in procs])
        os.write(go_w, b"g" * len(procs))
        racers = []
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT_S)
            racers.append(Racer(proc.pid, proc.returncode, out, err))
        return racers
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for fd in (ready_r, go_w):
            os.close(fd)


def race_forks(
    commands: list[list[str]], env: dict[str, str], cwd: Path, scratch: Path
) -> list[Racer]:
    """The same race, cheaper: each racer a fork of this process (lockwatch already
    imported) that runs the CLI as `lockwatch` would, with its own pid and files."""
    from lockwatch.cli import cli

    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pids: list[int] = []
    try:
        for n, args in enumerate(commands):
            out, err = scratch / f"racer-{n}.out", scratch / f"racer-{n}.err"
            pid = os.fork()
            if pid == 0:  # the racer: never returns into pytest
                code = 70
                try:
                    os.close(ready_r)
                    os.close(go_w)
                    os.chdir(cwd)
                    os.environ.clear()
                    os.environ.update(env)
                    for fd, path in ((1, out), (2, err)):
                        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                        os.dup2(target, fd)
                        os.close(target)
                    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115
                    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
                    os.write(ready_w, b"r")
                    os.read(go_r, 1)
                    code = 0
                    try:
                        cli.main(args=args, prog_name="lockwatch")  # always exits
                    except SystemExit as exc:
                        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
            pids.append(pid)
        os.close(ready_w)
        os.close(go_r)
        _wait_ready(ready_r, len(pids), lambda: pids)
        os.write(go_w, b"g" * len(pids))
        racers = []
        for n, pid in enumerate(pids):
            _, status = os.waitpid(pid, 0)
            racers.append(
                Racer(
                    pid,
                    os.waitstatus_to_exitcode(status),
                    (scratch / f"racer-{n}.out").read_text(),
                    (scratch / f"racer-{n}.err").read_text(),
                )
            )
        pids.clear()
        return racers
    finally:
        for pid in pids:
            with contextlib.suppress(ChildProcessError, ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        for fd in (ready_r, go_w):
            os.close(fd)


def check_break_round(lock: Path, both: list[Racer], log: Path) -> None:
    """Exactly one exit 0 and one exit 1, one tombstone, both audited."""
    assert sorted(racer.code for racer in both) == [0, 1], both
    assert not lock.exists()
    (tomb,) = tombstones(lock)
    assert tomb.read_text() == "999999\n"
    # A racer refused before it could read the lock names it by the TARGET given.
    mine = [r for r in records(log) if str(lock) in (r["target"].get("path"), r["target"]["id"])]
    finals = sorted(r["event"] for r in mine if r["event"] != "action_intent")
    assert finals == ["action_refused", "lock_broken"], mine
    by_pid = {r["lockwatch_pid"]: r["event"] for r in mine if r["event"] != "action_intent"}
    for racer in both:
        assert by_pid[racer.pid] == ("lock_broken" if racer.code == 0 else "action_refused")
    intents = [r for r in mine if r["event"] == "action_intent"]
    assert 1 <= len(intents) <= 2
    winner = next(r for r in mine if r["event"] == "lock_broken")
    assert any(r["action_id"] == winner["action_id"] for r in intents)


def audit_verifies(log: Path, env: dict[str, str]) -> None:
    verified = subprocess.run(
        [*lockwatch_command(), "audit", "verify", "--audit-log", str(log)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=TIMEOUT_S,
    )
    assert verified.returncode == 0, verified.stderr


def test_two_processes_break_the_same_lock_at_once(
    env: dict[str, str], work: Path, tmp_path: Path, log: Path
) -> None:
    """Two `lockwatch` processes, started from scratch, on the same stale lock, with
    the same audit log: exactly one wins; both are audited; one tombstone."""
    commands, locks = [], []
    for pair in range(2):
        lock = pid_file(tmp_path / "race" / f"pair-{pair}")
        locks.append(lock)
        args = ["break", str(lock), "--reason", "race", "--yes", "--audit-log", str(log)]
        commands += [args, args]
    racers = race_processes(commands, env, work)
    for pair, lock in enumerate(locks):
        check_break_round(lock, racers[2 * pair : 2 * pair + 2], log)
    audit_verifies(log, env)


def test_twenty_rounds_of_two_breakers(
    env: dict[str, str], work: Path, tmp_path: Path, log: Path
) -> None:
    """Round after round, two forked CLI processes released at the same instant."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for round_ in range(20):
        lock = pid_file(tmp_path / "race" / f"round-{round_}")
        args = ["break", str(lock), "--reason", f"round {round_}", "--yes"]
        args += ["--audit-log", str(log)]
        check_break_round(lock, race_forks([args, args], env, work, scratch), log)
    assert sum(r["event"] == "lock_broken" for r in records(log)) == 20
    assert sum(r["event"] == "action_refused" for r in records(log)) == 20
    audit_verifies(log, env)


# Where in the loser's run the winner's whole `lockwatch break` is slotted in: each
# step of the loser replaced by the winner's run, then the step itself (no timing).
LOSER_STEPS = {
    # Before the loser looks at the path at all: on a loaded machine the winner can
    # be done before the loser's process gets to run (CI: exit 2, "no such file").
    "before_it_looks": ("lockwatch.cli.act", "_find"),
    # It found the lock; the winner breaks it before the executor re-judges it.
    "before_it_acts": ("lockwatch.actions.run", "Executor.run"),
    # Its compare-and-swap read the lock; the winner renames it before it does.
    "before_its_rename": ("lockwatch.sources.files.cas", "_tombstone_fd"),
}


@pytest.mark.parametrize("step", sorted(LOSER_STEPS))
def test_the_loser_of_a_break_race_is_refused_wherever_it_loses(
    lw: Any, lwi: Any, tmp_path: Path, log: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """The interleavings of two breakers, forced: the winner (a real `lockwatch`
    process) breaks the lock at one step of the loser (in-process). The loser is
    refused (exit 1, audited), never an error (exit 2) or a failure (exit 3)."""
    import importlib

    lock = pid_file(tmp_path / "race")
    args = ["break", str(lock), "--reason", "race", "--yes", "--audit-log", str(log)]
    module, attribute = LOSER_STEPS[step]
    target: Any = importlib.import_module(module)
    *owners, name = attribute.split(".")
    for owner in owners:
        target = getattr(target, owner)
    original = getattr(target, name)
    winners: list[Run] = []

    def winner_first(*called: Any, **named: Any) -> Any:
        if not winners:
            winners.append(lw(*args))
        return original(*called, **named)

    monkeypatch.setattr(target, name, winner_first)
    loser = lwi(*args)
    (winner,) = winners
    assert winner.code == 0, winner
    assert loser.code == 1, loser
    assert "gone" in loser.err, loser
    assert not lock.exists()
    (tomb,) = tombstones(lock)
    assert tomb.read_text() == "999999\n"
    finals = [r["event"] for r in records(log) if r["event"] != "action_intent"]
    assert finals == ["lock_broken", "action_refused"]
    assert lwi("audit", "verify", "--audit-log", str(log)).code == 0


def test_a_path_never_broken_is_still_a_typo_beside_tombstones(
    lwi: Any, tmp_path: Path, log: Path
) -> None:
    """Only a tombstone of that very name makes a missing path a lost race."""
    broken = pid_file(tmp_path / "locks")
    assert lwi("break", str(broken), "--reason", "r", "--yes", "--audit-log", str(log)).code == 0
    missing = broken.parent / "worker.pi"
    run = lwi("break", str(missing), "--reason", "r", "--yes", "--audit-log", str(log))
    assert run.code == 2, run
    assert f"{missing}: no such file or directory; nothing was done" in run.err


def test_two_processes_steal_the_same_lock_at_once(
    env: dict[str, str], work: Path, tmp_path: Path, log: Path
) -> None:
    """One steals; the other is refused (never 'failed', never a second steal)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for round_ in range(8):
        lock = tower_lock(tmp_path / "race" / f"steal-{round_}")
        args = ["steal", str(lock), "--reason", "race", "--yes", "--audit-log", str(log)]
        both = race_forks([args, args], env, work, scratch)
        assert sorted(racer.code for racer in both) == [0, 1], both
        (winner,) = [racer for racer in both if racer.code == 0]
        (stolen,) = [
            r
            for r in records(log)
            if r["event"] == "lock_stolen" and r["target"].get("path") == str(lock)
        ]
        assert stolen["lockwatch_pid"] == winner.pid
        assert json.loads(lock.read_text()) == stolen["new_lock"]
        (tomb,) = tombstones(lock)
        assert json.loads(tomb.read_text()) == TOWER
    audit_verifies(log, env)


# ----------------------------------------------------------------------------- a terminal


class Terminal:
    """`lockwatch ARGS` with a pseudo-terminal for stdin, stdout and stderr."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = os.openpty()
        try:
            self.proc = subprocess.Popen(
                [*lockwatch_command(), *args],
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=cwd,
                env={**env, "TERM": "dumb", "COLUMNS": "200"},
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self.fd = master
        self.raw = b""

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace").replace("\r\n", "\n")

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed its end
            return False
        self.raw += chunk
        return bool(chunk)

    def expect(self, needle: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while needle not in self.text:
            if time.monotonic() > deadline:
                pytest.fail(f"no {needle!r} within {TIMEOUT_S}s: {self.text!r}")
            if not self._read(0.1) and needle not in self.text:
                pytest.fail(f"exited {self.proc.poll()} before {needle!r}: {self.text!r}")

    def send(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait(self) -> int:
        deadline = time.monotonic() + TIMEOUT_S
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"still running: {self.text!r}")
            self._read(0.05)
        while self._read(0):
            pass
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=TIMEOUT_S)
        os.close(self.fd)


@pytest.fixture
def terminal(env: dict[str, str], work: Path) -> Iterator[Any]:
    opened: list[Terminal] = []

    def spawn(*args: str) -> Terminal:
        term = Terminal(list(args), env, work)
        opened.append(term)
        return term

    yield spawn
    for term in opened:
        term.close()


PROMPT = "Break it? [y/N]"


def test_confirm_yes_on_a_terminal(terminal: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    term = terminal("break", str(lock), "--reason", "r", "--audit-log", str(log))
    term.expect(PROMPT)
    shown = term.text
    # The confirmation shows the truth: the lock, its holder, state, reasons, effect.
    assert "About to break:" in shown
    assert "worker (generic, file)" in shown
    assert "pid 999999" in shown
    assert "stale" in shown and "holder_dead" in shown
    assert f"rename {lock} to {lock.parent}/.lockwatch-broken/worker.pid@" in shown
    assert sha(lock.read_bytes()) in shown
    assert not log.exists()  # nothing is audited before the answer
    term.send(b"y\r")
    assert term.wait() == 0, term.text
    assert not lock.exists() and len(tombstones(lock)) == 1
    assert events(log) == ["action_intent", "lock_broken"]


def test_confirm_no_on_a_terminal(terminal: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    term = terminal("break", str(lock), "--reason", "r", "--audit-log", str(log))
    term.expect(PROMPT)
    term.send(b"n\r")
    assert term.wait() == 1, term.text
    assert "cancelled; nothing was done" in term.text
    assert lock.read_text() == "999999\n" and tombstones(lock) == []


def test_re_acquired_while_the_operator_reads_the_confirmation(
    terminal: Any, tmp_path: Path, log: Path
) -> None:
    lock = tower_lock(tmp_path / "root")
    term = terminal("steal", str(lock), "--reason", "r", "--audit-log", str(log))
    term.expect("Steal it? [y/N]")
    assert "tower-fleet/v1" in term.text and "ci" in term.text and "stale" in term.text
    beaten = json.dumps({**TOWER, "request_id": "req_new", "last_heartbeat_at": stamp(0)})
    lock.write_text(beaten)  # the holder came back and heartbeat
    term.send(b"y\r")
    assert term.wait() == 1, term.text
    assert "changed since you saw it" in term.text
    assert lock.read_text() == beaten and tombstones(lock) == []
    assert events(log) == ["action_intent", "action_refused"]
    assert records(log)[-1]["code"] == "changed"


def test_an_active_lock_is_refused_without_asking(terminal: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks", pid=os.getpid())
    term = terminal("break", str(lock), "--reason", "r", "--audit-log", str(log))
    assert term.wait() == 1, term.text
    assert "About to break:" in term.text and "active" in term.text
    assert PROMPT not in term.text and "--force" in term.text
    assert lock.exists()


def test_audit_of_a_fifo_or_a_deleted_log(lwi: Any, tmp_path: Path, log: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for command in (("audit",), ("audit", "verify")):
        run = lwi(*command, "--audit-log", str(fifo))  # never blocks on the pipe
        assert run.code == 2, run
        assert "not a regular file" in run.err
    lock = pid_file(tmp_path / "locks")
    assert lwi("break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log)).code == 0
    log.unlink()  # the head beside it stays: the log was there
    run = lwi("audit", "verify", "--audit-log", str(log))
    assert run.code == 1, run
    assert "TAMPERED" in run.err


def test_expect_sha256_takes_any_case_and_the_prefix(lwi: Any, tmp_path: Path, log: Path) -> None:
    lock = pid_file(tmp_path / "locks")
    digest = hashlib.sha256(lock.read_bytes()).hexdigest().upper()
    run = lwi(
        "break", str(lock), "--reason", "r", "--yes", "--audit-log", str(log),
        "--expect-sha256", f"SHA256:{digest}",
    )  # fmt: skip
    assert run.code == 0, run
