"""`--audit-key` and `--audit-syslog` (and their config keys) on the commands that
act, and `lockwatch audit verify --anchors`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions import audit
from lockwatch.actions.audit import AuditKey, read_records
from lockwatch.clock import SystemClock
from lockwatch.config import ConfigError, from_mapping
from tests.conftest import run_cli


@pytest.fixture(autouse=True)
def own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("PG", "LOCKWATCH_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(audit, "syslog_anchor", lambda mode: lines.append if mode else None)
    return lines


def stale_pid_file(tmp_path: Path) -> Path:
    path = tmp_path / "locks" / "worker.pid"
    path.parent.mkdir()
    path.write_text("999999\n")
    return path


def test_break_with_a_key_and_syslog(tmp_path: Path, sent: list[str]) -> None:
    lock = stale_pid_file(tmp_path)
    log, key = tmp_path / "audit.jsonl", tmp_path / "vault" / "audit.key"
    code, out, err = run_cli(
        "break", str(lock), "--reason", "dead", "--yes",
        "--audit-log", str(log), "--audit-key", str(key), "--audit-syslog",
    )  # fmt: skip
    assert code == 0, err
    records = [record for _, record, _ in read_records(log)]
    assert [r["event"] for r in records if r] == ["action_intent", "lock_broken"]
    assert all(r and r["key_id"] == AuditKey.load(key).id for r in records)
    assert len(sent) == 2 and all("hash=sha256:" in line for line in sent)
    anchors = tmp_path / "anchors"
    anchors.write_text("\n".join(sent) + "\n")
    code, out, err = run_cli(
        "audit", "verify", "--audit-log", str(log), "--audit-key", str(key),
        "--anchors", str(anchors),
    )  # fmt: skip
    assert code == 0, err
    assert "2 records match their syslog anchors" in out


def test_the_config_turns_syslog_on_and_names_the_key(tmp_path: Path, sent: list[str]) -> None:
    lock = stale_pid_file(tmp_path)
    key = tmp_path / "etc" / "lw.key"
    config = tmp_path / "lockwatch.toml"
    config.write_text(
        f'[actions]\naudit_log = "{tmp_path / "a.jsonl"}"\naudit_key = "{key}"\n'
        "audit_syslog = true\n"
    )
    code, _, err = run_cli("break", str(lock), "--reason", "dead", "--yes")
    assert code == 0, err
    assert key.exists() and len(sent) == 2


def test_without_syslog_nothing_is_sent(tmp_path: Path, sent: list[str]) -> None:
    lock = stale_pid_file(tmp_path)
    code, _, err = run_cli(
        "break", str(lock), "--reason", "dead", "--yes", "--audit-log", str(tmp_path / "a")
    )
    assert code == 0, err
    assert sent == []


@pytest.mark.parametrize(
    ("actions", "words"),
    [
        ({"audit_syslog": "yes"}, "audit_syslog must be true or false"),
        ({"audit_key": ""}, "audit_key must be a path"),
        ({"audit_key": 3}, "audit_key must be a path"),
    ],
)
def test_bad_config_values(actions: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        from_mapping({"actions": actions})


def test_config_values_are_read() -> None:
    config = from_mapping({"actions": {"audit_key": "~/k", "audit_syslog": True}})
    assert config.audit_key == os.path.expanduser("~/k") and config.audit_syslog


def test_the_dashboard_audits_with_the_key_and_anchor_it_is_given(
    tmp_path: Path, sent: list[str]
) -> None:
    from lockwatch.cli.watch import build_app
    from lockwatch.cli.where import select_targets
    from lockwatch.config import Config

    targets = select_targets({"paths": (str(tmp_path),)}, Config(), {})
    key = tmp_path / "dash.key"
    app = build_app(
        targets, host="h", audit_log=tmp_path / "a.jsonl", audit_key=key, audit_syslog=True
    )
    assert app.actions is not None
    log = app.actions.executor.audit
    assert log.key_path == key and log.anchor is not None
    log.append("lock_broken", {"reason": "through the dashboard's log"})
    assert key.exists() and len(sent) == 1
    quiet = build_app(targets, host="h", audit_log=tmp_path / "b.jsonl")
    assert quiet.actions is not None and quiet.actions.executor.audit.anchor is None


def test_a_break_whose_result_is_not_audited_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Done, its intent audited, its result not (the disk failed in between): a
    script must not read that as a clean success."""
    lock = stale_pid_file(tmp_path)
    real = audit.AuditLog.append

    def result_fails(self: audit.AuditLog, event: str, fields: Any) -> dict[str, Any]:
        if event != audit.INTENT:
            raise audit.AuditError("cannot write the audit log: Input/output error")
        return real(self, event, fields)

    monkeypatch.setattr(audit.AuditLog, "append", result_fails)
    code, out, err = run_cli(
        "break", str(lock), "--reason", "dead", "--yes", "--audit-log", str(tmp_path / "a")
    )
    assert code == 3, (out, err)
    assert "WARNING: not audited" in out + err
    assert not lock.exists()  # it was done: moved aside


def test_a_refused_reservation_gives_its_room_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No room for the head's spare: refused, and the room reserved past the log's
    end is not kept (it filled a small disk for nothing)."""
    from lockwatch.actions import audit_disk

    log = audit.AuditLog(
        tmp_path / "state" / "audit.jsonl",
        clock=SystemClock(),
        host="h",
        operator=audit.Operator("alice", "alice", None),
    )

    def no_room(path: Path, size: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(audit_disk, "make_spare", no_room)
    with pytest.raises(audit.AuditError, match="no room for the head's spare"):
        log.append(audit.INTENT, {"intent": "break"})
    st = log.path.stat()
    assert st.st_size == 0 and st.st_blocks == 0


def test_a_head_that_cannot_be_written_leaves_no_empty_spare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockwatch.actions import audit_disk

    head, spare = tmp_path / "a.head", tmp_path / ".a.head.spare"

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(OSError):
        audit_disk.write_beside(head, spare, b'{"seq": 0}\n')
    assert not spare.exists() and not head.exists()


@pytest.mark.parametrize("beside", ["audit.key", "keys/audit.key"])
def test_a_key_kept_beside_its_log_is_warned_about(tmp_path: Path, beside: str) -> None:
    """Whoever can write the log can likely read a key in its directory (or under
    it) and forge records: break and verify say so, and still do their work."""
    lock = stale_pid_file(tmp_path)
    log = tmp_path / "audit" / "audit.jsonl"
    key = log.parent / beside
    code, _, err = run_cli(
        "break", str(lock), "--reason", "dead", "--yes",
        "--audit-log", str(log), "--audit-key", str(key),
    )  # fmt: skip
    assert code == 0, err
    assert not lock.exists()
    assert f"the audit key {key} is kept beside the audit log {log}" in err
    assert "forge" in err and "--audit-key" in err
    code, _, err = run_cli("audit", "verify", "--audit-log", str(log), "--audit-key", str(key))
    assert code == 0, err
    assert "kept beside the audit log" in err


def test_a_key_kept_apart_is_not_warned_about(tmp_path: Path) -> None:
    lock = stale_pid_file(tmp_path)
    log, key = tmp_path / "audit" / "audit.jsonl", tmp_path / "audit-keys" / "audit.key"
    code, _, err = run_cli(
        "break", str(lock), "--reason", "dead", "--yes",
        "--audit-log", str(log), "--audit-key", str(key),
    )  # fmt: skip
    assert code == 0, err
    assert "beside" not in err
    code, _, err = run_cli("audit", "verify", "--audit-log", str(log), "--audit-key", str(key))
    assert code == 0 and "beside" not in err, err
