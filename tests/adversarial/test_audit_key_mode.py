"""The audit log's promises kept (issue 36, item 5).

A world-readable (0644) audit key was used by `break` and passed `audit verify`
without a word; `--audit-syslog` with no syslog socket dropped the anchors
silently and the break exited 0. Now a key others can read (or write, or own) is
refused as ssh refuses such a private key, with the chmod that fixes it; and
`--audit-syslog` that cannot reach syslog refuses the action, unless
`--audit-syslog=best-effort`, which acts and says it went without.

Syslog here is a datagram socket of the test's own (LOCKWATCH_SYSLOG_SOCKET),
read as journald reads /dev/log.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockwatch.actions.audit import read_records
from tests.conftest import run_cli

NOBODY = 65534


@pytest.fixture(autouse=True)
def own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("PG", "LOCKWATCH_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def lock(tmp_path: Path) -> Path:
    path = tmp_path / "locks" / "worker.pid"
    path.parent.mkdir()
    path.write_text("999999\n")  # no such process: stale
    return path


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    log, key = tmp_path / "log" / "audit.jsonl", tmp_path / "keys" / "audit.key"
    key.parent.mkdir(mode=0o700)
    key.write_text("k" * 64 + "\n")
    key.chmod(0o600)
    return log, key


def break_(
    lock: Path, log: Path, key: Path, *more: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    return run_cli(
        "break", str(lock), "--reason", "holder died", "--yes",
        "--audit-log", str(log), "--audit-key", str(key), *more, env=env,
    )  # fmt: skip


def records(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [record["event"] for _, record, _ in read_records(log) if record]


# -- the key ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_break_refuses_a_key_others_can_read_or_write(
    lock: Path, paths: tuple[Path, Path], mode: int
) -> None:
    log, key = paths
    key.chmod(mode)
    code, out, err = break_(lock, log, key)
    assert code != 0
    assert lock.exists()  # nothing done
    assert records(log) == []  # nothing audited under that key
    assert f"chmod 600 {key}" in out + err
    assert f"mode 0{mode:o}" in out + err
    assert oct(key.stat().st_mode & 0o777) == oct(mode)  # refused, not quietly mended


def test_audit_verify_refuses_a_key_others_can_read(lock: Path, paths: tuple[Path, Path]) -> None:
    log, key = paths
    code, _, err = break_(lock, log, key)
    assert code == 0, err
    key.chmod(0o644)
    for named in (("--audit-key", str(key)), ()):
        env = {"XDG_CONFIG_HOME": str(key.parent.parent / "cfg")}
        if not named:
            # The default key: the user config dir's lockwatch/audit.key.
            default = key.parent.parent / "cfg" / "lockwatch" / "audit.key"
            default.parent.mkdir(parents=True, exist_ok=True)
            default.write_bytes(key.read_bytes())
            default.chmod(0o644)
            shown = default
        else:
            shown = key
        code, out, err = run_cli("audit", "verify", "--audit-log", str(log), *named, env=env)
        assert code == 2, (out, err)
        assert err.strip().splitlines() == [
            f"lockwatch: the audit key {shown}: group or others can read or write it (mode 0644):"
            f" a key others can read is no key (chmod 600 {shown})"
        ]
        assert "chain intact" not in out


@pytest.mark.skipif(os.geteuid() != 0, reason="chowns the key to another user")
def test_a_key_another_user_owns_is_refused(lock: Path, paths: tuple[Path, Path]) -> None:
    """Its owner can read it, whatever its mode: they could forge records."""
    log, key = paths
    os.chown(key, NOBODY, NOBODY)
    code, out, err = break_(lock, log, key)
    assert code != 0 and lock.exists()
    assert "owned by nobody" in out + err


def test_a_key_in_a_directory_anyone_can_rename_in_is_refused(
    tmp_path: Path, lock: Path, paths: tuple[Path, Path]
) -> None:
    log, _ = paths
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    key = open_dir / "audit.key"
    key.write_text("k" * 64)
    key.chmod(0o600)
    code, out, err = break_(lock, log, key)
    assert code != 0 and lock.exists()
    assert "without the sticky bit" in out + err


def test_an_audit_log_in_a_directory_anyone_can_rename_in_is_refused(
    tmp_path: Path, lock: Path, paths: tuple[Path, Path]
) -> None:
    _, key = paths
    open_dir = tmp_path / "open-log"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    code, out, err = break_(lock, open_dir / "audit.jsonl", key)
    assert code != 0 and lock.exists()
    assert f"the audit log {open_dir / 'audit.jsonl'} is refused" in out + err
    assert "nothing was done" in out + err


# -- syslog -------------------------------------------------------------------------


@pytest.fixture
def syslog_socket(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    where = str(tmp_path / "dev-log")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(where)
        listener.settimeout(10)  # only keeps a broken run from hanging
        yield where, listener


def test_audit_syslog_that_cannot_reach_syslog_refuses_the_action(
    tmp_path: Path, lock: Path, paths: tuple[Path, Path]
) -> None:
    log, key = paths
    nowhere = str(tmp_path / "no-syslog-here")
    code, out, err = break_(
        lock, log, key, "--audit-syslog", env={"LOCKWATCH_SYSLOG_SOCKET": nowhere}
    )
    assert code != 0
    assert lock.exists()  # nothing done
    assert records(log) == []  # not even an intent
    lines = (out + err).strip().splitlines()
    assert len(lines) == 1, lines
    assert f"syslog cannot be reached ({nowhere}: No such file or directory)" in lines[0]
    assert "--audit-syslog=best-effort" in lines[0] and "nothing was done" in lines[0]


def test_the_config_asking_for_syslog_refuses_the_same(
    tmp_path: Path, lock: Path, paths: tuple[Path, Path]
) -> None:
    log, key = paths
    (tmp_path / "lockwatch.toml").write_text("[actions]\naudit_syslog = true\n")
    nowhere = str(tmp_path / "no-syslog-here")
    code, _, _ = break_(lock, log, key, env={"LOCKWATCH_SYSLOG_SOCKET": nowhere})
    assert code != 0 and lock.exists()


@pytest.mark.parametrize("how", ["flag", "config"])
def test_best_effort_acts_and_says_it_went_without(
    tmp_path: Path, lock: Path, paths: tuple[Path, Path], how: str
) -> None:
    log, key = paths
    more: tuple[str, ...] = ("--audit-syslog=best-effort",)
    if how == "config":
        (tmp_path / "lockwatch.toml").write_text('[actions]\naudit_syslog = "best-effort"\n')
        more = ()
    nowhere = str(tmp_path / "no-syslog-here")
    code, _out, err = break_(lock, log, key, *more, env={"LOCKWATCH_SYSLOG_SOCKET": nowhere})
    assert code == 0, err
    assert not lock.exists()
    assert records(log) == ["action_intent", "lock_broken"]
    assert "went without syslog anchors (--audit-syslog=best-effort)" in err
    assert err.count("syslog cannot be reached") == 1  # once, not per record


def test_audit_syslog_reaching_syslog_sends_each_records_hash(
    lock: Path, paths: tuple[Path, Path], syslog_socket: tuple[str, socket.socket]
) -> None:
    """The flag before the TARGET is still the flag (not TARGET taken as its mode)."""
    log, key = paths
    where, listener = syslog_socket
    code, _out, err = run_cli(
        "break", "--audit-syslog", str(lock), "--reason", "holder died", "--yes",
        "--audit-log", str(log), "--audit-key", str(key),
        env={"LOCKWATCH_SYSLOG_SOCKET": where},
    )  # fmt: skip
    assert code == 0, err
    got = [listener.recv(4096).decode() for _ in range(2)]
    hashes = [record["hash"] for _, record, _ in read_records(log) if record]
    assert all(f"hash={h}" in line for h, line in zip(hashes, got, strict=True))
    assert all(" lockwatch-audit[" in line for line in got)
