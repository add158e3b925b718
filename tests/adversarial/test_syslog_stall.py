"""A stalled syslog never leaves a dangling intent (issue 47, item 8).

With the syslog socket's queue full, `break … --audit-syslog` said "refused …
nothing was done", yet the log held `intent:lock_broken` (pending) with no result:
the connect that checked syslog succeeds on a socket nobody reads, and the
intent's anchor then timed out after the intent was written. Now a full queue is
refused before the intent is written; and should it fill in between, the refusal
is written as the intent's result.

Syslog here is a real unix datagram socket the test binds and never reads, its
queue filled with real datagrams until the kernel says it is full (EAGAIN).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions.audit import read_records
from lockwatch.actions.audit_syslog import SyslogAnchor
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
def stalled_syslog(tmp_path: Path) -> Iterator[str]:
    """A bound datagram socket nobody reads, its queue full."""
    path = str(tmp_path / "log.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    senders: list[socket.socket] = []
    try:
        # A sender's own buffer can fill before the queue does: a fresh sender
        # refused its very first datagram means the queue itself is full.
        while True:
            sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sender.setblocking(False)
            sender.connect(path)
            senders.append(sender)
            sent = 0
            try:
                while True:
                    sender.send(b"<13>filler")
                    sent += 1
            except BlockingIOError:
                pass
            if sent == 0:
                break
        yield path
    finally:
        for sender in senders:
            sender.close()
        listener.close()


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


def break_(lock: Path, log: Path, key: Path, sock: str) -> tuple[int, str, str]:
    return run_cli(
        "break", str(lock), "--reason", "holder died", "--yes", "--audit-syslog",
        "--audit-log", str(log), "--audit-key", str(key),
        env={"LOCKWATCH_SYSLOG_SOCKET": sock},
    )  # fmt: skip


def records(log: Path) -> list[dict[str, Any]]:
    return [record for _, record, _ in read_records(log) if record] if log.exists() else []


def dangling(log: Path) -> list[str]:
    """Action ids of intents with no result after them."""
    found = records(log)
    results = {r["action_id"] for r in found if r["event"] != "action_intent"}
    intents = [r["action_id"] for r in found if r["event"] == "action_intent"]
    return [action_id for action_id in intents if action_id not in results]


def test_a_full_syslog_queue_refuses_before_the_intent(
    lock: Path, paths: tuple[Path, Path], stalled_syslog: str
) -> None:
    log, key = paths
    code, out, err = break_(lock, log, key, stalled_syslog)
    assert code == 1, out + err
    said = (out + err).strip()
    assert len(said.splitlines()) == 1, said
    assert "syslog cannot be reached" in said and "queue is full" in said
    assert "nothing was done" in said
    assert lock.read_text() == "999999\n"
    assert records(log) == []  # no intent: nothing was tried


def test_a_queue_that_fills_after_the_check_gets_the_refusal_as_the_intents_result(
    lock: Path,
    paths: tuple[Path, Path],
    stalled_syslog: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The queue fills between the check and the intent's anchor: imitated by a
    check that says syslog has room (the socket and its full queue are real)."""
    monkeypatch.setattr(SyslogAnchor, "check", lambda self: None)
    log, key = paths
    code, out, err = break_(lock, log, key, stalled_syslog)
    assert code == 1, out + err
    assert "nothing was done" in out + err
    assert lock.read_text() == "999999\n"
    assert dangling(log) == []
    events = [(r["event"], r.get("intent"), r.get("code")) for r in records(log)]
    assert events == [
        ("action_intent", "lock_broken", None),
        ("action_refused", None, "audit_unwritable"),
    ]
    assert records(log)[1]["result"] == "refused"
    code, out, err = run_cli("audit", "verify", "--audit-log", str(log), "--audit-key", str(key))
    assert code == 0, out + err
