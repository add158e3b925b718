"""Stealing writes the lock anew for the operator, in its own format: each format's
handover decodes back to that format, active, held by the new holder and marked as
lockwatch's; refresh moves only the heartbeat."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.handover import MARK, NewHolder, held_by_lockwatch, marked
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, evaluate
from lockwatch.sources.files.decoders import (
    clawdbot,
    decode_file,
    generic,
    gitclaw,
    little_loops,
    tower_fleet,
    writer,
)
from lockwatch.sources.files.scanner import load
from tests.conftest import LOCAL_HOST, NOW, ago, alive, iso, lock_file

NEW = NewHolder(
    operator="oncall-erin",
    pid=4321,
    own_pid=1234,
    host=LOCAL_HOST,
    at=NOW,
    token="abcdef0123456789",
    reason="holder died, INC-7",
)
# Both the operator's shell (pid) and lockwatch (own_pid) run.
PROCESSES = StaticProcesses(alive(NEW.pid), alive(NEW.own_pid))
EXPECTED_MARK = {
    "held_by": "oncall-erin",
    "stolen_at": "2026-11-21T12:00:00.000000Z",
    "token": "abcdef0123456789",
    "reason": "holder died, INC-7",
}

TOWER_PATH = "/root/tower-fleet/logs/locks/money-tracker-production.lock"
TOWER_OLD = {
    "lock_version": "v1",
    "lock_name": "money-tracker-production",
    "request_id": "req_abc123def456",
    "actor": "claude-code",
    "intent": "deploy-app",
    "intent_version": "1.2.0",
    "host_id": "tower-01",
    "pid": 12345,
    "created_at": "2025-12-18T10:30:10Z",
    "last_heartbeat_at": "2025-12-18T10:30:40Z",
    "ttl_seconds": 1800,
    "metadata": {"ticket": "OPS-1"},
}


def decode(path: str, raw: bytes) -> Lock:
    return decode_file(lock_file(path, raw))


def judged(lock: Lock, at: datetime = NOW) -> State:
    return evaluate(lock, PROCESSES, FrozenClock(at), LOCAL_HOST).state


def handed(module: Any, path: str, old: Any) -> tuple[Lock, Lock, bytes]:
    """(the old lock, the new lock, the new bytes)."""
    raw = old if isinstance(old, bytes) else json.dumps(old).encode()
    before = decode(path, raw)
    assert before.format == module.FORMAT
    new = module.handover(before.content, NEW)
    assert new is not None
    after = decode(path, new)
    return before, after, new


# ----------------------------------------------------------------------------- tower-fleet


def test_tower_fleet_handover() -> None:
    before, after, raw = handed(tower_fleet, TOWER_PATH, TOWER_OLD)
    assert judged(before) is State.STALE
    assert after.format == "tower-fleet/v1"
    assert after.defects == ()
    assert judged(after) is State.ACTIVE
    doc = json.loads(raw)
    assert doc["lock_version"] == "v1"
    assert doc["lock_name"] == "money-tracker-production"
    assert doc["request_id"] == "req_abcdef0123456789" != TOWER_OLD["request_id"]
    assert doc["actor"] == "oncall-erin"
    assert doc["created_at"] == doc["last_heartbeat_at"] == "2026-11-21T12:00:00Z"
    assert doc["ttl_seconds"] == 1800  # kept, not reset to the default
    assert doc["intent"] == "deploy-app" and doc["intent_version"] == "1.2.0"
    assert doc["host_id"] == LOCAL_HOST
    assert doc["pid"] == NEW.own_pid  # this lockwatch: informational (§12.3)
    assert doc["metadata"]["ticket"] == "OPS-1"
    assert doc["metadata"][MARK] == {**EXPECTED_MARK, "previous_holder": "req_abc123def456"}
    assert after.holder.actor == "oncall-erin"
    assert after.holder.session == "req_abcdef0123456789"
    assert after.holder.host == LOCAL_HOST and after.holder.pid == NEW.own_pid
    assert after.acquired_at == after.heartbeat_at == NOW
    assert after.ttl_seconds == 1800
    assert held_by_lockwatch(after) and not held_by_lockwatch(before)
    assert marked(after.content) is not None and marked(before.content) is None
    # Active until its ttl runs out without a heartbeat.
    assert judged(after, NOW + timedelta(seconds=1800)) is State.ACTIVE
    assert judged(after, NOW + timedelta(seconds=1801)) is State.STALE


def test_tower_fleet_handover_without_metadata() -> None:
    old = {k: v for k, v in TOWER_OLD.items() if k != "metadata"}
    _, after, raw = handed(tower_fleet, TOWER_PATH, old)
    assert json.loads(raw)["metadata"] == {
        MARK: {**EXPECTED_MARK, "previous_holder": "req_abc123def456"}
    }
    assert held_by_lockwatch(after)


def test_tower_fleet_refresh_moves_only_the_heartbeat() -> None:
    _, after, raw = handed(tower_fleet, TOWER_PATH, TOWER_OLD)
    later = NOW + timedelta(seconds=300)
    refreshed = tower_fleet.refresh(after.content, later)
    assert refreshed is not None
    old_doc, new_doc = json.loads(raw), json.loads(refreshed)
    assert new_doc.pop("last_heartbeat_at") == "2026-11-21T12:05:00Z"
    old_doc.pop("last_heartbeat_at")
    assert new_doc == old_doc
    lock = decode(TOWER_PATH, refreshed)
    assert lock.heartbeat_at == later and lock.acquired_at == NOW
    assert judged(lock, later + timedelta(seconds=1800)) is State.ACTIVE


def test_tower_fleet_writers_refuse_what_is_not_a_record() -> None:
    assert tower_fleet.handover(["not", "a", "record"], NEW) is None
    assert tower_fleet.refresh("text", NOW) is None


# ----------------------------------------------------------------------------- clawdbot


CLAW_PATH = "/home/bot/memory/.lock"
CLAW_OLD = {
    "pid": 999999,
    "session_id": "main",
    "acquired_at": iso(ago(3600)),
    "hostname": LOCAL_HOST,
    "operation": "write:tasks.json",
}


def test_clawdbot_handover() -> None:
    before, after, raw = handed(clawdbot, CLAW_PATH, CLAW_OLD)
    assert judged(before) is State.STALE
    assert after.format == "clawdbot" and after.defects == ()
    assert judged(after) is State.ACTIVE
    doc = json.loads(raw)
    assert doc["pid"] == NEW.pid  # its liveness is the pid: the operator's process
    assert doc["hostname"] == LOCAL_HOST
    assert doc["acquired_at"] == "2026-11-21T12:00:00.000Z"
    assert doc["session_id"] == "lockwatch-abcdef0123456789"
    assert "oncall-erin" in doc["operation"]
    assert doc[MARK] == {**EXPECTED_MARK, "previous_holder": "main"}
    assert after.holder.pid == NEW.pid and after.holder.session == "lockwatch-abcdef0123456789"
    assert held_by_lockwatch(after) and not held_by_lockwatch(before)


def test_clawdbot_refresh_moves_only_acquired_at() -> None:
    _, after, raw = handed(clawdbot, CLAW_PATH, CLAW_OLD)
    later = NOW + timedelta(seconds=25, milliseconds=500)
    refreshed = clawdbot.refresh(after.content, later)
    assert refreshed is not None
    old_doc, new_doc = json.loads(raw), json.loads(refreshed)
    assert new_doc.pop("acquired_at") == "2026-11-21T12:00:25.500Z"
    old_doc.pop("acquired_at")
    assert new_doc == old_doc
    assert judged(decode(CLAW_PATH, refreshed), later + timedelta(seconds=29)) is State.ACTIVE
    assert clawdbot.refresh(7, NOW) is None


# ----------------------------------------------------------------------------- gitclaw


GITCLAW_PATH = "/repo/.GITCLAW/state/locks/12.lock"
GITCLAW_OLD = {"issueNumber": 12, "runId": "987", "acquiredAt": iso(ago(3600)), "pid": 5}


def test_gitclaw_handover() -> None:
    before, after, raw = handed(gitclaw, GITCLAW_PATH, GITCLAW_OLD)
    assert judged(before) is State.STALE
    assert after.format == "gitclaw" and after.defects == ()
    assert after.name == "issue-12"
    assert judged(after) is State.ACTIVE
    doc = json.loads(raw)
    assert doc["issueNumber"] == 12
    assert doc["runId"] == "lockwatch-abcdef0123456789"
    assert doc["acquiredAt"] == "2026-11-21T12:00:00.000Z"
    assert doc["pid"] == NEW.pid
    assert doc[MARK] == {**EXPECTED_MARK, "previous_holder": "987"}
    assert held_by_lockwatch(after) and not held_by_lockwatch(before)
    assert judged(after, NOW + timedelta(seconds=599)) is State.ACTIVE
    assert judged(after, NOW + timedelta(seconds=600)) is State.STALE


def test_gitclaw_refresh_and_refusals() -> None:
    _, after, raw = handed(gitclaw, GITCLAW_PATH, GITCLAW_OLD)
    refreshed = gitclaw.refresh(after.content, NOW + timedelta(seconds=60))
    assert refreshed is not None
    old_doc, new_doc = json.loads(raw), json.loads(refreshed)
    assert new_doc.pop("acquiredAt") == "2026-11-21T12:01:00.000Z"
    old_doc.pop("acquiredAt")
    assert new_doc == old_doc
    assert gitclaw.handover({"runId": "1", "acquiredAt": iso(NOW)}, NEW) is None
    assert gitclaw.handover({"issueNumber": "12"}, NEW) is None
    assert gitclaw.refresh(None, NOW) is None


# ----------------------------------------------------------------------------- little-loops


LOOPS_PATH = "/proj/.loops/.running/fix-tests.lock"
LOOPS_OLD = {
    "loop_name": "fix-tests",
    "scope": ["src/", "tests/"],
    "pid": 999999,
    "started_at": iso(ago(7200)),
}


def test_little_loops_handover() -> None:
    before, after, raw = handed(little_loops, LOOPS_PATH, LOOPS_OLD)
    assert judged(before) is State.STALE
    assert after.format == "little-loops" and after.defects == ()
    assert judged(after) is State.ACTIVE
    doc = json.loads(raw)
    assert doc["loop_name"] == "fix-tests"
    assert doc["scope"] == ["src/", "tests/"]
    assert doc["pid"] == NEW.pid
    assert doc["started_at"] == "2026-11-21T12:00:00.000000Z"
    assert doc[MARK] == {**EXPECTED_MARK, "previous_holder": 999999}
    assert after.scope == before.scope
    assert held_by_lockwatch(after) and not held_by_lockwatch(before)


def test_little_loops_has_nothing_to_refresh() -> None:
    _, after, _ = handed(little_loops, LOOPS_PATH, LOOPS_OLD)
    assert little_loops.refresh(after.content, NOW) is None
    assert little_loops.handover({"loop_name": "x", "scope": "src/"}, NEW) is None


# ----------------------------------------------------------------------------- generic


PID_PATH = "/run/app/worker.pid"


def test_generic_bare_pid_file() -> None:
    before, after, raw = handed(generic, PID_PATH, b"999999\n")
    assert raw == b"4321\n"
    assert after.format == "generic" and after.holder.pid == NEW.pid
    assert judged(before) is State.STALE and judged(after) is State.ACTIVE
    assert held_by_lockwatch(after, NEW.pid)
    assert not held_by_lockwatch(after, 99)
    assert not held_by_lockwatch(after)
    assert not held_by_lockwatch(before, NEW.pid)


def test_generic_pid_file_with_a_host() -> None:
    _, after, raw = handed(generic, PID_PATH, b"999999 old-host\n")
    assert raw == f"4321 {LOCAL_HOST}\n".encode()
    assert after.holder.pid == NEW.pid and after.holder.host == LOCAL_HOST
    assert judged(after) is State.ACTIVE
    assert held_by_lockwatch(after, NEW.pid)


def test_generic_postmaster_pid_is_not_handed_over() -> None:
    postmaster = b"999999\n/var/lib/postgresql/data\n1700000000\n5432\n/run/postgresql\n"
    before = decode("/var/lib/postgresql/data/postmaster.pid", postmaster)
    assert before.format == "generic" and before.holder.pid == 999999
    assert generic.handover(before.content, NEW) is None


def test_generic_empty_and_odd_files_are_not_handed_over() -> None:
    empty = decode("/run/app/bare.lock", b"")
    assert empty.format == "generic"
    assert generic.handover(empty.content, NEW) is None
    assert generic.handover("   \n", NEW) is None
    assert generic.handover("not a pid\n", NEW) is None
    assert generic.handover(["a", "list"], NEW) is None
    assert generic.refresh("123\n", NOW) is None


def test_generic_json_keeps_its_keys() -> None:
    old = {
        "pid": 999999,
        "hostname": "old-host",
        "acquired_at": iso(ago(600)),
        "heartbeat_at": iso(ago(500)),
        "user": "batch",
        "extra": [1, 2],
    }
    before, after, raw = handed(generic, "/srv/app/job.lock", old)
    doc = json.loads(raw)
    assert doc["pid"] == NEW.pid
    assert doc["hostname"] == LOCAL_HOST
    assert doc["acquired_at"] == doc["heartbeat_at"] == "2026-11-21T12:00:00.000000Z"
    assert doc["user"] == "batch" and doc["extra"] == [1, 2]
    assert doc[MARK] == {**EXPECTED_MARK, "previous_holder": 999999}
    assert before.holder.host == "old-host" and after.holder.host == LOCAL_HOST
    assert judged(after) is State.ACTIVE  # its pid, on this host, runs
    assert held_by_lockwatch(after) and not held_by_lockwatch(before)


def test_generic_json_with_another_pid_key_and_no_pid() -> None:
    _, _, raw = handed(generic, "/srv/app/a.lock", {"owner_pid": 999999, "note": "x"})
    assert json.loads(raw)["owner_pid"] == NEW.pid and "pid" not in json.loads(raw)
    _, after, raw = handed(generic, "/srv/app/b.lock", {"owner": "batch"})
    assert json.loads(raw)["pid"] == NEW.pid
    assert after.holder.pid == NEW.pid


def test_generic_json_keeps_the_types_it_was_written_with() -> None:
    """Epoch numbers stay numbers (seconds or ms), a pid kept as text stays text:
    the lock's owner reads its own format back."""
    old = {"pid": "999999", "ts": 1700000000, "updated_at": 1700000000123}
    _, after, raw = handed(generic, "/srv/app/c.lock", old)
    doc = json.loads(raw)
    assert doc["pid"] == "4321"
    assert doc["ts"] == int(NOW.timestamp())
    assert doc["updated_at"] == int(NOW.timestamp() * 1000)
    assert after.holder.pid == NEW.pid
    assert after.acquired_at == NOW and after.heartbeat_at == NOW
    refreshed = generic.refresh(after.content, NOW + timedelta(seconds=5))
    assert refreshed is not None
    assert json.loads(refreshed)["updated_at"] == int(NOW.timestamp() * 1000) + 5000
    floats = json.loads(generic.handover({"pid": 1, "ts": 1700000000.25}, NEW) or b"")
    assert floats["ts"] == NOW.timestamp()


def test_generic_refresh_moves_only_its_heartbeat() -> None:
    old = {"pid": 4321, "acquired_at": iso(ago(60)), "updated_at": iso(ago(30))}
    refreshed = generic.refresh(old, NOW)
    assert refreshed is not None
    assert json.loads(refreshed) == {**old, "updated_at": "2026-11-21T12:00:00.000000Z"}
    assert generic.refresh({"pid": 4321, "acquired_at": iso(NOW)}, NOW) is None


# ----------------------------------------------------------------------------- shared


@pytest.mark.parametrize("module", [tower_fleet, clawdbot, gitclaw, little_loops, generic])
def test_every_format_has_its_writer(module: Any) -> None:
    assert writer(module.FORMAT) is module


def test_writer_of_an_unknown_format() -> None:
    assert writer("nonsense/v9") is None


def test_handover_through_the_scanner(tmp_path: Path) -> None:
    """The bytes on disk, read the way lockwatch reads any lock."""
    path = tmp_path / "logs" / "locks" / "money-tracker-production.lock"
    path.parent.mkdir(parents=True)
    raw = tower_fleet.handover(TOWER_OLD, NEW)
    assert raw is not None
    path.write_bytes(raw)
    lock = load(str(path))
    assert isinstance(lock, Lock)
    assert lock.format == "tower-fleet/v1" and lock.defects == ()
    assert lock.holder.actor == "oncall-erin"
    assert held_by_lockwatch(lock)
    assert judged(lock) is State.ACTIVE


def test_a_mark_needs_a_token() -> None:
    assert marked({MARK: {"held_by": "x"}}) is None
    assert marked({"metadata": {MARK: {"token": 5}}}) is None
    assert marked({"metadata": {MARK: {"token": "t"}}}) == {"token": "t"}
    assert marked({MARK: {"token": "t"}}) == {"token": "t"}
    assert marked("12\n") is None


def test_a_defective_lock_is_never_held_by_lockwatch() -> None:
    doc = {**json.loads(tower_fleet.handover(TOWER_OLD, NEW) or b"{}"), "lock_version": "v2"}
    lock = decode(TOWER_PATH, json.dumps(doc).encode())
    assert lock.defects
    assert not held_by_lockwatch(lock)
