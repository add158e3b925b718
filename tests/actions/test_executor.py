"""Executor + plan: the rules (reason, force, never steal what is not stale), the
audit trail (intent before acting, result after, every field), and what happens
when the audit log cannot be written or the lock changed since it was shown."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions.audit import INTENT, AuditLog, Operator, read_records, verify
from lockwatch.actions.plan import Kind, Plan, describe, plan
from lockwatch.actions.run import Executor, Outcome, lock_hash, target_of
from lockwatch.clock import FrozenClock
from lockwatch.model.handover import NewHolder, held_by_lockwatch
from lockwatch.model.lock import Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.files import cas as files
from lockwatch.sources.files.scanner import load
from tests.conftest import LOCAL_HOST, NOW, ago, alive, iso

PROCESSES = StaticProcesses(alive(100))  # pid 100 runs; every other pid is dead
OPERATOR = Operator(name="erin", os_user="root", sudo_user="erin")
NEW_HOLDER = NewHolder(
    operator="erin",
    pid=100,
    own_pid=os.getpid(),
    host=LOCAL_HOST,
    at=NOW,
    token="0123456789abcdef",
    reason="takeover",
)
STALE_PID = b"999999\n"
ACTIVE_PID = b"100\n"
TOWER = {
    "lock_version": "v1",
    "lock_name": "deploy-prod",
    "request_id": "req_old",
    "actor": "ci",
    "intent": "deploy",
    "intent_version": "1",
    "host_id": LOCAL_HOST,
    "pid": 999999,
    "created_at": iso(ago(7200)),
    "last_heartbeat_at": iso(ago(3600)),
    "ttl_seconds": 900,
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def on_disk(path: Path, raw: bytes) -> Lock:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    mtime = ago(60).timestamp()  # the frozen clock's past: no clock skew
    os.utime(path, (mtime, mtime))
    lock = load(str(path))
    assert isinstance(lock, Lock)
    return lock


def judge(lock: Lock) -> Verdict:
    return evaluate(lock, PROCESSES, FrozenClock(NOW), LOCAL_HOST)


def planned(kind: Kind, lock: Lock, **options: Any) -> Plan:
    return plan(kind, lock, judge(lock), new_holder=NEW_HOLDER, **options)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "audit.jsonl"


@pytest.fixture
def executor(log_path: Path) -> Executor:
    return Executor(AuditLog(log_path, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR))


@pytest.fixture
def locks(tmp_path: Path) -> Path:
    return tmp_path / "locks"


def records(log_path: Path) -> list[dict[str, Any]]:
    found = [record for _, record, _ in read_records(log_path)] if log_path.exists() else []
    assert all(record is not None for record in found)
    return [record for record in found if record is not None]


def events(log_path: Path) -> list[str]:
    return [record["event"] for record in records(log_path)]


# ----------------------------------------------------------------------------- break


def test_break_a_stale_lock(executor: Executor, locks: Path, log_path: Path) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    the_plan = planned(Kind.BREAK, lock)
    assert the_plan.verdict.state is State.STALE and not the_plan.needs_name
    outcome = executor.run(the_plan, "holder died, INC-1")
    assert outcome.ok and outcome.event == "lock_broken" and outcome.audited
    assert outcome.tombstone is not None
    tomb = Path(outcome.tombstone)
    assert tomb.parent == locks / ".lockwatch-broken"
    assert tomb.name.startswith("worker.pid@20261121T120000.000000Z-")
    assert tomb.read_bytes() == STALE_PID
    assert not (locks / "worker.pid").exists()
    assert events(log_path) == [INTENT, "lock_broken"]
    assert verify(log_path).ok


def test_every_record_carries_the_contract_fields(
    executor: Executor, locks: Path, log_path: Path
) -> None:
    path = locks / "worker.pid"
    lock = on_disk(path, STALE_PID)
    executor.run(planned(Kind.BREAK, lock), "  holder   died,\n INC-1 ")
    intent, result = records(log_path)
    for record in (intent, result):
        assert record["time"] == "2026-11-21T12:00:00.000000Z"
        assert record["operator"] == "erin"
        assert record["os_user"] == "root"
        assert record["sudo_user"] == "erin"
        assert record["host"] == LOCAL_HOST
        assert record["lockwatch_pid"] == os.getpid()
        assert record["action"] == "break"
        assert record["target"] == {
            "source": "file",
            "id": f"file:{path}",
            "name": "worker",
            "format": "generic",
            "path": str(path),
        }
        assert record["previous_lock"] == 999999
        assert record["previous_lock_hash"] == f"sha256:{sha(STALE_PID)}"
        assert record["reason"] == "holder died, INC-1"
        assert record["state"] == "stale"
        assert record["reasons"] == ["holder_dead"]
        assert record["forced"] is False
        assert "rename" in record["effect"] and str(path) in record["effect"]
    assert intent["event"] == INTENT
    assert intent["intent"] == "lock_broken"
    assert intent["result"] == "pending"
    assert result["event"] == "lock_broken"
    assert result["result"] == "success"
    assert result["tombstone"].startswith(str(locks / ".lockwatch-broken" / "worker.pid@"))
    assert result["action_id"] == intent["action_id"] and len(intent["action_id"]) == 32
    assert result["seq"] == intent["seq"] + 1
    assert result["prev_hash"] == intent["hash"]


def test_the_intent_is_on_disk_before_anything_is_touched(
    executor: Executor, locks: Path, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    real = files.move_aside
    seen: list[list[dict[str, Any]]] = []

    def look_first(*args: Any, **kwargs: Any) -> files.Moved:
        seen.append(records(log_path))
        assert (locks / "worker.pid").read_bytes() == STALE_PID
        return real(*args, **kwargs)

    monkeypatch.setattr(files, "move_aside", look_first)
    assert executor.run(planned(Kind.BREAK, lock), "r").ok
    assert [[r["event"] for r in at] for at in seen] == [[INTENT]]
    assert seen[0][0]["result"] == "pending"


def test_each_action_gets_its_own_id(executor: Executor, locks: Path, log_path: Path) -> None:
    first = on_disk(locks / "a.pid", STALE_PID)
    second = on_disk(locks / "b.pid", STALE_PID)
    executor.run(planned(Kind.BREAK, first), "r")
    executor.run(planned(Kind.BREAK, second), "r")
    ids = [record["action_id"] for record in records(log_path)]
    assert ids[0] == ids[1] != ids[2] == ids[3]


# ----------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("reason", ["", "   ", "\n\t"])
def test_no_reason_is_refused_and_audited(
    executor: Executor, locks: Path, log_path: Path, reason: str
) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    outcome = executor.run(planned(Kind.BREAK, lock), reason)
    assert not outcome.ok and outcome.event == "action_refused" and outcome.code == "no_reason"
    assert (locks / "worker.pid").read_bytes() == STALE_PID
    assert not (locks / ".lockwatch-broken").exists()
    (record,) = records(log_path)
    assert record["event"] == "action_refused"
    assert record["result"] == "refused" and record["code"] == "no_reason"
    assert record["previous_lock_hash"] == f"sha256:{sha(STALE_PID)}"


def test_breaking_an_active_lock_needs_force(
    executor: Executor, locks: Path, log_path: Path
) -> None:
    lock = on_disk(locks / "worker.pid", ACTIVE_PID)
    the_plan = planned(Kind.BREAK, lock)
    assert the_plan.verdict.state is State.ACTIVE and the_plan.needs_name
    refused = executor.run(the_plan, "looks stuck")
    assert not refused.ok and refused.code == "not_stale"
    assert "--force" in refused.message
    assert (locks / "worker.pid").read_bytes() == ACTIVE_PID
    assert events(log_path) == ["action_refused"]
    forced = executor.run(the_plan, "looks stuck", force=True)
    assert forced.ok and forced.event == "lock_broken"
    assert not (locks / "worker.pid").exists()
    assert events(log_path) == ["action_refused", INTENT, "lock_broken"]
    assert records(log_path)[-1]["forced"] is True
    assert records(log_path)[-1]["state"] == "active"


def test_breaking_an_invalid_lock_needs_force(executor: Executor, locks: Path) -> None:
    lock = on_disk(locks / "logs" / "locks" / "x.lock", b'{"lock_version": "v2"}')
    the_plan = planned(Kind.BREAK, lock)
    assert the_plan.verdict.state is State.INVALID and the_plan.needs_name
    assert executor.run(the_plan, "r").code == "not_stale"
    assert executor.run(the_plan, "r", force=True).ok


@pytest.mark.parametrize("force", [False, True])
def test_stealing_an_active_lock_is_refused_always(
    executor: Executor, locks: Path, log_path: Path, force: bool
) -> None:
    raw = json.dumps({**TOWER, "last_heartbeat_at": iso(ago(10))}).encode()
    lock = on_disk(locks / "logs" / "locks" / "deploy-prod.lock", raw)
    the_plan = planned(Kind.STEAL, lock)
    assert the_plan.verdict.state is State.ACTIVE
    outcome = executor.run(the_plan, "mine now", force=force)
    assert not outcome.ok and outcome.code == "not_stale"
    assert (locks / "logs" / "locks" / "deploy-prod.lock").read_bytes() == raw
    assert events(log_path) == ["action_refused"]


@pytest.mark.parametrize("force", [False, True])
def test_stealing_an_invalid_lock_is_refused_always(
    executor: Executor, locks: Path, force: bool
) -> None:
    raw = json.dumps({**TOWER, "ttl_seconds": "soon"}).encode()
    lock = on_disk(locks / "logs" / "locks" / "deploy-prod.lock", raw)
    outcome = executor.run(planned(Kind.STEAL, lock), "r", force=force)
    assert outcome.code == "not_stale" and "break it instead" in outcome.message
    assert (locks / "logs" / "locks" / "deploy-prod.lock").read_bytes() == raw


def test_stealing_a_bare_lock_file_is_refused(executor: Executor, locks: Path) -> None:
    lock = on_disk(locks / "bare.lock", b"")
    outcome = executor.run(planned(Kind.STEAL, lock), "r", force=True)
    assert not outcome.ok and outcome.code == "not_stale"  # nothing says it is stale
    assert (locks / "bare.lock").exists()


def test_stealing_a_stale_lock_with_no_format_writer_is_refused(
    executor: Executor, locks: Path
) -> None:
    """postmaster.pid: stale (its pid is dead) but more than a pid: never rewritten."""
    raw = b"999999\n/var/lib/postgresql/data\n5432\n"
    lock = on_disk(locks / "postmaster.pid", raw)
    the_plan = planned(Kind.STEAL, lock)
    assert the_plan.verdict.state is State.STALE
    outcome = executor.run(the_plan, "r")
    assert outcome.code == "unsupported" and "break it instead" in outcome.message
    assert (locks / "postmaster.pid").read_bytes() == raw


def test_a_symlinked_lock_is_refused_and_audited(
    executor: Executor, locks: Path, log_path: Path
) -> None:
    target = locks / "real.pid"
    target.parent.mkdir(parents=True)
    target.write_bytes(STALE_PID)
    (locks / "link.pid").symlink_to(target)
    lock = load(str(locks / "link.pid"))
    assert isinstance(lock, Lock)
    outcome = executor.run(planned(Kind.BREAK, lock), "r", force=True)
    assert outcome.code == "symlink"
    assert (locks / "link.pid").is_symlink() and target.read_bytes() == STALE_PID
    assert events(log_path) == ["action_refused"]


def test_cancel_of_a_lock_file_is_refused(executor: Executor, locks: Path) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    assert executor.run(planned(Kind.CANCEL, lock), "r").code == "unsupported"


def test_unseen_is_refused_and_audited(executor: Executor, log_path: Path) -> None:
    outcome = executor.unseen(Kind.BREAK, "file:/nowhere.lock", "r", "no lock at /nowhere.lock")
    assert not outcome.ok and outcome.code == "not_found"
    (record,) = records(log_path)
    assert record["event"] == "action_refused"
    assert record["target"] == {
        "source": "file",
        "id": "file:/nowhere.lock",
        "path": "/nowhere.lock",
    }


def test_an_unseen_postgres_lock_names_its_server(executor: Executor, log_path: Path) -> None:
    lock_id = "pg:monitor@db1:5432/app:4242:advisory/16384//////1/42/1:ExclusiveLock:held"
    executor.unseen(Kind.BREAK, lock_id, "r", "gone")
    (record,) = records(log_path)
    assert record["target"] == {
        "source": "postgres",
        "id": lock_id,
        "server": "monitor@db1:5432/app",
    }


# ----------------------------------------------------------------------------- compare-and-swap


def test_re_acquired_after_it_was_shown_is_refused(
    executor: Executor, locks: Path, log_path: Path
) -> None:
    """The plan (the confirmation) saw one lock; by the time the operator says yes
    a new holder has written another. Nothing is touched."""
    lock = on_disk(locks / "worker.pid", STALE_PID)
    the_plan = planned(Kind.BREAK, lock)
    (locks / "worker.pid").write_bytes(ACTIVE_PID)
    outcome = executor.run(the_plan, "r")
    assert not outcome.ok and outcome.code == "changed"
    assert "changed since you saw it" in outcome.message
    assert (locks / "worker.pid").read_bytes() == ACTIVE_PID
    assert not (locks / ".lockwatch-broken").exists()
    assert events(log_path) == [INTENT, "action_refused"]
    assert records(log_path)[-1]["code"] == "changed"
    assert records(log_path)[-1]["previous_lock_hash"] == f"sha256:{sha(STALE_PID)}"


def test_a_heartbeat_after_it_was_shown_refuses_a_steal(executor: Executor, locks: Path) -> None:
    path = locks / "logs" / "locks" / "deploy-prod.lock"
    lock = on_disk(path, json.dumps(TOWER).encode())
    the_plan = planned(Kind.STEAL, lock)
    beaten = json.dumps({**TOWER, "last_heartbeat_at": iso(NOW)}).encode()
    path.write_bytes(beaten)
    outcome = executor.run(the_plan, "r")
    assert outcome.code == "changed"
    assert path.read_bytes() == beaten
    assert not (path.parent / ".lockwatch-broken").exists()


def test_expect_sha256_is_what_is_compared(executor: Executor, locks: Path, log_path: Path) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    other = sha(b"something else")
    outcome = executor.run(planned(Kind.BREAK, lock), "r", expect_sha256=other.upper())
    assert outcome.code == "changed"
    assert (locks / "worker.pid").read_bytes() == STALE_PID
    # Both: what the operator expected, and what was actually there.
    assert records(log_path)[-1]["expected_lock_hash"] == f"sha256:{other}"
    assert records(log_path)[-1]["previous_lock_hash"] == f"sha256:{sha(STALE_PID)}"
    assert executor.run(planned(Kind.BREAK, lock), "r", expect_sha256=sha(STALE_PID)).ok


def test_rewritten_during_the_move_is_put_back_and_audited(
    executor: Executor, locks: Path, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = locks / "worker.pid"
    lock = on_disk(path, STALE_PID)
    real = os.rename

    def heartbeat_then_rename(*args: Any, **kwargs: Any) -> None:
        if args[0] == path.name:  # the lock's move, not the audit log's head
            path.write_bytes(ACTIVE_PID)
        real(*args, **kwargs)

    monkeypatch.setattr(os, "rename", heartbeat_then_rename)
    outcome = executor.run(planned(Kind.BREAK, lock), "r")
    assert outcome.code == "changed" and "put back" in outcome.message
    assert path.read_bytes() == ACTIVE_PID
    assert list((locks / ".lockwatch-broken").iterdir()) == []
    assert events(log_path) == [INTENT, "action_refused"]


def test_a_lock_taken_during_a_steal_fails_and_says_where(
    executor: Executor, locks: Path, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = locks / "logs" / "locks" / "deploy-prod.lock"
    lock = on_disk(path, json.dumps(TOWER).encode())
    theirs = json.dumps({**TOWER, "request_id": "req_theirs", "last_heartbeat_at": iso(NOW)})
    real = files._move_aside

    def taken_in_the_gap(*args: Any) -> files.Moved:
        moved = real(*args)
        path.write_text(theirs)  # acquired the moment the stale lock moved
        return moved

    monkeypatch.setattr(files, "_move_aside", taken_in_the_gap)
    outcome = executor.run(planned(Kind.STEAL, lock), "r")
    assert not outcome.ok and outcome.event == "action_failed" and outcome.code == "taken"
    assert path.read_text() == theirs
    assert outcome.tombstone is not None
    assert Path(outcome.tombstone).read_bytes() == json.dumps(TOWER).encode()
    result = records(log_path)[-1]
    assert result["event"] == "action_failed" and result["result"] == "failed"
    assert result["tombstone"] == outcome.tombstone


def test_an_os_error_mid_action_is_a_failure(
    executor: Executor, locks: Path, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)

    def broken_disk(*args: Any, **kwargs: Any) -> files.Moved:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(files, "move_aside", broken_disk)
    outcome = executor.run(planned(Kind.BREAK, lock), "r")
    assert not outcome.ok and outcome.event == "action_failed" and outcome.code == "os_error"
    assert events(log_path) == [INTENT, "action_failed"]


def test_two_plans_on_one_lock_break_it_once(executor: Executor, locks: Path) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    first, second = planned(Kind.BREAK, lock), planned(Kind.BREAK, lock)
    assert executor.run(first, "r").ok
    late = executor.run(second, "r")
    assert not late.ok and late.code == "gone"
    assert len(list((locks / ".lockwatch-broken").iterdir())) == 1


# ----------------------------------------------------------------------------- the audit log


def test_an_unwritable_audit_log_means_nothing_happens(tmp_path: Path, locks: Path) -> None:
    (tmp_path / "state").write_text("a file where the log's directory belongs")
    log = AuditLog(
        tmp_path / "state" / "audit.jsonl", clock=FrozenClock(NOW), host="h", operator=OPERATOR
    )
    lock = on_disk(locks / "worker.pid", STALE_PID)
    outcome = Executor(log).run(planned(Kind.BREAK, lock), "r")
    assert not outcome.ok
    assert outcome.code == "audit_unwritable" and outcome.event == "action_refused"
    assert not outcome.audited
    assert "nothing was done" in outcome.message
    assert (locks / "worker.pid").read_bytes() == STALE_PID
    assert not (locks / ".lockwatch-broken").exists()


def test_an_audit_log_that_is_a_symlink_means_nothing_happens(tmp_path: Path, locks: Path) -> None:
    real_log = tmp_path / "real.jsonl"
    real_log.write_bytes(b"")
    (tmp_path / "audit.jsonl").symlink_to(real_log)
    log = AuditLog(tmp_path / "audit.jsonl", clock=FrozenClock(NOW), host="h", operator=OPERATOR)
    path = locks / "logs" / "locks" / "deploy-prod.lock"
    lock = on_disk(path, json.dumps(TOWER).encode())
    outcome = Executor(log).run(planned(Kind.STEAL, lock), "r")
    assert outcome.code == "audit_unwritable"
    assert path.read_bytes() == json.dumps(TOWER).encode()
    assert real_log.read_bytes() == b""


def test_a_result_that_cannot_be_audited_is_said_loudly(
    executor: Executor, locks: Path, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intent was recorded and the action done; then the disk filled up."""
    lock = on_disk(locks / "worker.pid", STALE_PID)
    real = AuditLog.append
    from lockwatch.actions.audit import AuditError

    def second_fails(self: AuditLog, event: str, fields: Any) -> dict[str, Any]:
        if event != INTENT:
            raise AuditError("cannot write the audit log: No space left on device")
        return real(self, event, fields)

    monkeypatch.setattr(AuditLog, "append", second_fails)
    outcome = executor.run(planned(Kind.BREAK, lock), "r")
    assert outcome.ok and not outcome.audited
    assert "not audited" in outcome.message
    assert events(log_path) == [INTENT]


# ----------------------------------------------------------------------------- steal, release


def steal_tower(executor: Executor, locks: Path) -> tuple[Path, Outcome]:
    path = locks / "logs" / "locks" / "deploy-prod.lock"
    lock = on_disk(path, json.dumps(TOWER).encode())
    the_plan = planned(Kind.STEAL, lock)
    assert the_plan.new_content is not None
    outcome = executor.run(the_plan, "executor hung")
    assert outcome.ok, outcome.message
    assert path.read_bytes() == the_plan.new_content == outcome.new_content
    return path, outcome


def test_steal_a_stale_lock(executor: Executor, locks: Path, log_path: Path) -> None:
    path, outcome = steal_tower(executor, locks)
    assert outcome.event == "lock_stolen"
    assert outcome.new_sha256 == sha(path.read_bytes())
    assert outcome.tombstone is not None
    assert Path(outcome.tombstone).read_bytes() == json.dumps(TOWER).encode()
    new = load(str(path))
    assert isinstance(new, Lock)
    assert new.holder.actor == "erin" and judge(new).state is State.ACTIVE
    assert held_by_lockwatch(new)
    intent, result = records(log_path)
    assert intent["intent"] == "lock_stolen"
    assert result["event"] == "lock_stolen"
    assert result["new_lock"] == json.loads(path.read_bytes())
    assert result["new_lock_hash"] == f"sha256:{outcome.new_sha256}"
    assert result["previous_lock"] == TOWER
    assert result["tombstone"] == outcome.tombstone


def test_steal_a_stale_pid_file_records_the_operators_pid(executor: Executor, locks: Path) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    the_plan = planned(Kind.STEAL, lock)
    assert "pid 100" in the_plan.effect
    assert executor.run(the_plan, "r").ok
    assert (locks / "worker.pid").read_bytes() == b"100\n"


def test_release_a_stolen_lock(executor: Executor, locks: Path, log_path: Path) -> None:
    path, _ = steal_tower(executor, locks)
    stolen = load(str(path))
    assert isinstance(stolen, Lock)
    the_plan = planned(Kind.RELEASE, stolen, held=held_by_lockwatch(stolen))
    outcome = executor.run(the_plan, "done with it")
    assert outcome.ok and outcome.event == "lock_released"
    assert not path.exists()
    assert events(log_path)[-2:] == [INTENT, "lock_released"]
    assert len(list((path.parent / ".lockwatch-broken").iterdir())) == 2
    assert verify(log_path).ok


def test_release_a_lock_lockwatch_does_not_hold(
    executor: Executor, locks: Path, log_path: Path
) -> None:
    path = locks / "logs" / "locks" / "deploy-prod.lock"
    lock = on_disk(path, json.dumps(TOWER).encode())
    the_plan = planned(Kind.RELEASE, lock, held=held_by_lockwatch(lock))
    outcome = executor.run(the_plan, "r", force=True)
    assert outcome.code == "not_held"
    assert path.exists()
    assert events(log_path) == ["action_refused"]


def test_a_configured_tombstone_dir(log_path: Path, locks: Path, tmp_path: Path) -> None:
    log = AuditLog(log_path, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR)
    where = tmp_path / "graveyard"
    lock = on_disk(locks / "worker.pid", STALE_PID)
    the_plan = planned(Kind.BREAK, lock, tombstone_dir=str(where))
    assert str(where) in the_plan.effect
    outcome = Executor(log, tombstone_dir=str(where)).run(the_plan, "r")
    assert outcome.tombstone is not None and Path(outcome.tombstone).parent == where


# ----------------------------------------------------------------------------- what is shown


def test_the_confirmation_shows_the_truth(locks: Path) -> None:
    lock = on_disk(locks / "logs" / "locks" / "deploy-prod.lock", json.dumps(TOWER).encode())
    lines = dict(describe(planned(Kind.BREAK, lock), NOW))
    assert lines["lock"] == "deploy-prod (tower-fleet/v1, file)"
    assert lines["where"] == lock.path
    assert "ci" in lines["holder"]
    assert lines["state"] == "stale"
    assert "heartbeat" in lines["reasons"]
    assert lines["effect"].startswith(f"rename {lock.path} to ")
    assert "never deleted" in lines["effect"]
    assert lines["sha256"] == lock.sha256
    assert "age" in lines


def test_lock_hash_and_target_of_a_file_lock(locks: Path) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    assert lock_hash(lock) == f"sha256:{sha(STALE_PID)}"
    assert target_of(lock)["path"] == str(locks / "worker.pid")


# ----------------------------------------------------------------------------- judged again


def test_a_holder_back_since_the_confirmation_refuses_the_break(
    locks: Path, log_path: Path
) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    the_plan = planned(Kind.BREAK, lock)
    assert the_plan.verdict.state is State.STALE
    # While the operator read the confirmation, pid 999999 came back (a reused pid).
    back = StaticProcesses(alive(999999))
    executor = Executor(
        AuditLog(log_path, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR),
        rejudge=lambda seen: evaluate(seen, back, FrozenClock(NOW), LOCAL_HOST),
    )
    outcome = executor.run(the_plan, "holder died")
    assert not outcome.ok and outcome.code == "changed"
    assert "active now" in outcome.message
    assert (locks / "worker.pid").read_bytes() == STALE_PID
    assert not (locks / ".lockwatch-broken").exists()
    assert events(log_path) == ["action_refused"]


def test_forcing_skips_the_second_judgement(locks: Path, log_path: Path) -> None:
    lock = on_disk(locks / "worker.pid", STALE_PID)
    executor = Executor(
        AuditLog(log_path, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR),
        rejudge=lambda seen: pytest.fail("a forced break is not judged again"),
    )
    assert executor.run(planned(Kind.BREAK, lock), "r", force=True).ok


def test_a_full_disk_refuses_a_steal_before_anything_moves(
    executor: Executor, locks: Path, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = locks / "logs" / "locks" / "deploy-prod.lock"
    raw = json.dumps(TOWER).encode()
    lock = on_disk(path, raw)

    def full(*args: Any) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "_write_temp", full)
    outcome = executor.run(planned(Kind.STEAL, lock), "r")
    assert not outcome.ok and outcome.code == "write_failed"
    assert "No space left" in outcome.message
    assert path.read_bytes() == raw
    assert not (path.parent / ".lockwatch-broken").exists()
    assert events(log_path) == [INTENT, "action_refused"]
