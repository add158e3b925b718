"""tower-fleet/v1 (seed 002): `<lock_name>.lock` as lock-manager.sh writes it with jq."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.files.decoders import decode_file, tower_fleet
from lockwatch.sources.files.facts import facts_of
from tests.conftest import LOCAL_HOST, NOW, ago, alive, lock_file

LOCK_DIR = "/root/tower-fleet/logs/locks"
NAME = "money-tracker-production"


def date_u(at: datetime) -> str:
    """`date -u +%Y-%m-%dT%H:%M:%SZ`."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def record(
    name: str = NAME,
    created: datetime = NOW,
    heartbeat: datetime | None = None,
    host: str = LOCAL_HOST,
    pid: int = 100,
) -> dict[str, Any]:
    """create_lock_json(): the §3.1 schema, field for field."""
    return {
        "lock_version": "v1",
        "lock_name": name,
        "request_id": "req_abc123def456",
        "actor": "claude-code",
        "intent": "deploy-app",
        "intent_version": "1.2.0",
        "host_id": host,
        "pid": pid,
        "created_at": date_u(created),
        "last_heartbeat_at": date_u(heartbeat or created),
        "ttl_seconds": 900,
        "metadata": {},
    }


def jq(doc: dict[str, Any]) -> str:
    """jq's default output: two-space indent, a trailing newline."""
    return json.dumps(doc, indent=2) + "\n"


def path_for(doc: dict[str, Any]) -> str:
    name = doc.get("lock_name")
    return f"{LOCK_DIR}/{name if isinstance(name, str) and name else 'unnamed'}.lock"


def decode(content: Any, path: str | None = None) -> Lock:
    if path is None:
        path = path_for(content) if isinstance(content, dict) else f"{LOCK_DIR}/{NAME}.lock"
    return decode_file(lock_file(path, content))


def judge(lock: Lock) -> Verdict:
    return evaluate(lock, StaticProcesses(alive(100)), FrozenClock(NOW), LOCAL_HOST)


def test_seed_lock_decodes_every_field() -> None:
    text = jq(record(created=ago(600), heartbeat=ago(20)))
    lock = decode_file(lock_file(f"{LOCK_DIR}/{NAME}.lock", text))
    assert lock.format == "tower-fleet/v1"
    assert lock.id == f"file:{LOCK_DIR}/{NAME}.lock"
    assert lock.name == NAME
    assert lock.holder == Holder(
        pid=100,
        host=LOCAL_HOST,
        actor="claude-code",
        session="req_abc123def456",
        operation="deploy-app@1.2.0",
    )
    assert lock.acquired_at == ago(600)
    assert lock.heartbeat_at == ago(20)
    assert lock.ttl_seconds == 900.0
    assert lock.scope == ()
    assert lock.content == json.loads(text)
    assert lock.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert lock.defects == ()
    assert facts_of(lock).policy == tower_fleet.POLICY


def test_seed_example_verbatim() -> None:
    text = """{
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
  "ttl_seconds": 900,
  "metadata": {}
}
"""
    lock = decode(text)
    assert lock.defects == ()
    assert lock.heartbeat_at == datetime.fromisoformat("2025-12-18T10:30:40+00:00")
    verdict = judge(lock)
    assert verdict.state is State.STALE
    assert verdict.codes == ("heartbeat_expired", "foreign_host")


def test_heartbeat_update_by_jq_is_read() -> None:
    # update_heartbeat(): jq '.last_heartbeat_at = $ts' rewrites the whole file.
    doc = record(created=ago(3000), heartbeat=ago(2000))
    doc["last_heartbeat_at"] = date_u(ago(10))
    verdict = judge(decode(jq(doc)))
    assert (verdict.state, verdict.codes) == (State.ACTIVE, ())


@pytest.mark.parametrize(
    ("since", "state", "codes"),
    [
        (0, State.ACTIVE, ()),
        (300, State.ACTIVE, ()),
        (301, State.ACTIVE, ("heartbeat_late",)),
        (900, State.ACTIVE, ("heartbeat_late",)),
        (901, State.STALE, ("heartbeat_expired",)),
    ],
)
def test_decoded_lock_verdicts(since: int, state: State, codes: tuple[str, ...]) -> None:
    verdict = judge(decode(jq(record(created=ago(5000), heartbeat=ago(since)))))
    assert (verdict.state, verdict.codes) == (state, codes)


def test_pid_is_informational() -> None:
    dead = judge(decode(jq(record(pid=4321, heartbeat=ago(5)))))
    assert (dead.state, dead.codes, dead.alive) == (State.ACTIVE, (), False)
    live = judge(decode(jq(record(pid=100, heartbeat=ago(5)))))
    assert (live.state, live.alive) == (State.ACTIVE, True)


@pytest.mark.parametrize("pid", [1, 4321])
def test_a_pid_that_cannot_be_checked_overrides_no_heartbeat(pid: int) -> None:
    """Seed 002: the pid is informational; the heartbeat alone decides. A pid of 1
    (written inside a container) is said, never turned into `unknown`."""
    fresh = judge(decode(jq(record(pid=pid, heartbeat=ago(5)))))
    assert fresh.state is State.ACTIVE
    expired = judge(decode(jq(record(pid=pid, heartbeat=ago(901)))))
    assert expired.state is State.STALE and expired.codes[0] == "heartbeat_expired"
    if pid == 1:
        assert fresh.codes == ("other_pid_namespace",)
        assert "does not rest on it" in fresh.reasons[0].message


@pytest.mark.parametrize("metadata", [{}, {"ticket": "OPS-7", "nested": {"a": [1, 2]}}, "absent"])
def test_metadata_is_optional_object(metadata: Any) -> None:
    doc = record()
    if metadata == "absent":
        del doc["metadata"]
    else:
        doc["metadata"] = metadata
    assert decode(doc).defects == ()


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "7",
        "money-tracker-production",
        "a_b-c",
        "x" * 128,
        "a" + "-_" * 63 + "z",
    ],
)
def test_valid_lock_names(name: str) -> None:
    lock = decode(record(name=name))
    assert lock.defects == ()
    assert lock.name == name
    assert judge(lock).state is State.ACTIVE


# --- detection ----------------------------------------------------------------------


def test_detected_by_content_anywhere() -> None:
    lock = decode(jq(record()), path=f"/opt/fleet/state/{NAME}.lock")
    assert lock.format == "tower-fleet/v1"
    assert lock.defects == ()


def test_detected_by_signature_without_version() -> None:
    doc = record()
    del doc["lock_version"]
    lock = decode(doc, path=f"/opt/fleet/{NAME}.lock")
    assert lock.format == "tower-fleet/v1"
    assert judge(lock).codes == ("schema_violation",)


@pytest.mark.parametrize("garbage", ["{not json", "", "[]", '"v1"', "900"])
def test_hinted_garbage_is_an_invalid_tower_fleet_lock(garbage: str) -> None:
    lock = decode(garbage)
    assert lock.format == "tower-fleet/v1"
    assert lock.name == NAME
    assert judge(lock).state is State.INVALID


def test_hint_claims_unrecognised_record() -> None:
    lock = decode({"pid": 100}, path=f"{LOCK_DIR}/{NAME}.lock")
    assert lock.format == "tower-fleet/v1"
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert set(verdict.codes) == {"schema_violation"}
    assert len(verdict.codes) >= 10  # every missing required field is named


# --- schema violations ------------------------------------------------------------------

REQUIRED = [
    "lock_version",
    "lock_name",
    "request_id",
    "actor",
    "intent",
    "intent_version",
    "host_id",
    "pid",
    "created_at",
    "last_heartbeat_at",
    "ttl_seconds",
]


def assert_schema_violation(doc: dict[str, Any], field: str, count: int = 1) -> None:
    lock = decode(doc, path=f"{LOCK_DIR}/{NAME}.lock")
    assert lock.format == "tower-fleet/v1"
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.codes == ("schema_violation",) * count
    assert any(field in r.message for r in verdict.reasons)


@pytest.mark.parametrize("field", REQUIRED)
def test_each_required_field_missing(field: str) -> None:
    doc = record()
    del doc[field]
    assert_schema_violation(doc, field)


@pytest.mark.parametrize("field", REQUIRED)
def test_each_required_field_null(field: str) -> None:
    doc = record()
    doc[field] = None
    assert_schema_violation(doc, field)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lock_version", 1),
        ("lock_version", ["v1"]),
        ("lock_name", 7),
        ("request_id", 123),
        ("request_id", ""),
        ("actor", ["claude-code"]),
        ("intent", {"name": "deploy-app"}),
        ("intent_version", 1.2),
        ("host_id", True),
        ("pid", "12345"),
        ("pid", 12.5),
        ("pid", True),
        ("pid", False),
        ("pid", 0),
        ("pid", -1),
        ("pid", 2**32),
        ("created_at", 1766053810),
        ("created_at", "not a time"),
        ("last_heartbeat_at", ""),
        ("last_heartbeat_at", 1766053840),
        ("ttl_seconds", "900"),
        ("ttl_seconds", 900.5),
        ("ttl_seconds", 900.0),
        ("ttl_seconds", True),
        ("ttl_seconds", 0),
        ("ttl_seconds", -900),
        ("metadata", []),
        ("metadata", "none"),
        ("metadata", 1),
    ],
)
def test_each_mistyped_field(field: str, value: Any) -> None:
    doc = record()
    doc[field] = value
    assert_schema_violation(doc, field)


@pytest.mark.parametrize("version", ["v2", "V1", "1", "v1.0", " v1", ""])
def test_lock_version_other_than_v1(version: str) -> None:
    doc = record()
    doc["lock_version"] = version
    assert_schema_violation(doc, "lock_version")


@pytest.mark.parametrize(
    "name",
    [
        "Money-tracker",
        "MONEY",
        "money tracker",
        "money.tracker",
        "money+tracker",
        "-money",
        "money-",
        "_money",
        "money_",
        "-",
        "_",
        "x" * 129,
        "mönëy",
        "money\ttracker",
    ],
)
def test_bad_lock_names(name: str) -> None:
    doc = record(name=name)
    # The file is named after the lock, so only §2.2 is broken.
    lock = decode_file(lock_file(f"{LOCK_DIR}/{name}.lock", doc))
    verdict = judge(lock)
    assert lock.format == "tower-fleet/v1"
    assert verdict.state is State.INVALID
    assert verdict.codes == ("schema_violation",)
    assert "lock_name" in verdict.reasons[0].message


def test_empty_lock_name_is_a_violation() -> None:
    assert_schema_violation(record(name=""), "lock_name")


def test_lock_name_with_path_separator_is_a_violation() -> None:
    lock = decode_file(lock_file(f"{LOCK_DIR}/tracker.lock", record(name="money/tracker")))
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert set(verdict.codes) == {"schema_violation"}


@pytest.mark.parametrize("file_name", ["other-lock.lock", "money-tracker-production.pid", ".lock"])
def test_lock_name_must_match_file_name(file_name: str) -> None:
    lock = decode_file(lock_file(f"{LOCK_DIR}/{file_name}", record()))
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.codes == ("schema_violation",)
    assert file_name in verdict.reasons[0].message


def test_every_violation_is_reported_at_once() -> None:
    doc = record()
    doc.update(lock_version="v2", pid="x", ttl_seconds=0, metadata=[])
    del doc["actor"]
    assert_schema_violation(doc, "actor", count=5)


def test_invalid_lock_keeps_its_content_and_hash() -> None:
    text = jq({**record(), "lock_version": "v2"})
    lock = decode(text)
    assert lock.content == json.loads(text)
    assert lock.sha256 == hashlib.sha256(text.encode()).hexdigest()


def test_ttl_too_large_for_a_float_does_not_crash() -> None:
    text = jq(record()).replace('"ttl_seconds": 900', '"ttl_seconds": 1' + "0" * 400)
    lock = decode(text)
    assert lock.format == "tower-fleet/v1"
    assert judge(lock).state in (State.ACTIVE, State.INVALID)
