"""clawdbot (seed 000): `memory/.lock` written by lock_manager.py or memory-lock.ps1."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.files.decoders import clawdbot, decode_file
from lockwatch.sources.files.facts import facts_of
from tests.conftest import LOCAL_HOST, NOW, ago, alive, iso, lock_file

PATH = "/srv/workspace/memory/.lock"


def decode(content: Any, path: str = PATH) -> Lock:
    return decode_file(lock_file(path, content))


def judge(lock: Lock) -> Verdict:
    return evaluate(lock, StaticProcesses(alive(100)), FrozenClock(NOW), LOCAL_HOST)


def python_writer(pid: int = 100, acquired: datetime = NOW, host: str = LOCAL_HOST) -> str:
    """lock_manager.py `_write_lock`: json.dumps(indent=2) of its dict."""
    lock_data = {
        "pid": pid,
        "session_id": "main",
        "acquired_at": acquired.isoformat(),  # datetime.now(timezone.utc).isoformat()
        "hostname": host,
        "operation": "write:tasks.json",
    }
    return json.dumps(lock_data, indent=2)


# PowerShell 7 `@{...} | ConvertTo-Json | Set-Content`: hashtable order, CRLF,
# and `ToString("o")` with seven fractional digits.
POWERSHELL = (
    "{\r\n"
    '  "operation": "update:tasks",\r\n'
    '  "hostname": "TESTHOST",\r\n'
    '  "acquired_at": "2026-11-21T11:59:55.1234567Z",\r\n'
    '  "session_id": "powershell",\r\n'
    '  "pid": 100\r\n'
    "}\r\n"
)

# The format as the seed documents it.
DOCUMENTED = {
    "pid": 12345,
    "session_id": "main",
    "acquired_at": "2026-01-29T15:30:00.000Z",
    "hostname": "DESKTOP-O6IL62J",
    "operation": "write:tasks.json",
}


def test_python_writer_decodes_every_field() -> None:
    text = python_writer(acquired=ago(5.25))
    lock = decode(text)
    assert lock.format == "clawdbot"
    assert lock.id == f"file:{PATH}"
    assert lock.source == "file"
    assert lock.path == PATH
    assert lock.name == "memory"
    assert lock.holder == Holder(
        pid=100, host=LOCAL_HOST, session="main", operation="write:tasks.json"
    )
    assert lock.acquired_at == ago(5.25)
    assert lock.heartbeat_at is None
    assert lock.ttl_seconds is None
    assert lock.scope == ()
    assert lock.content == json.loads(text)
    assert lock.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert lock.defects == ()
    assert facts_of(lock).policy == clawdbot.POLICY


def test_powershell_writer_decodes() -> None:
    lock = decode(POWERSHELL)
    assert lock.format == "clawdbot"
    assert lock.holder == Holder(
        pid=100, host="TESTHOST", session="powershell", operation="update:tasks"
    )
    assert lock.acquired_at == ago(5) + timedelta(microseconds=123456)
    assert lock.defects == ()
    verdict = judge(lock)
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ()  # TESTHOST is this host, whatever the case


def test_documented_example_decodes_and_is_long_stale() -> None:
    lock = decode(json.dumps(DOCUMENTED))
    assert lock.format == "clawdbot"
    assert lock.holder.pid == 12345
    assert lock.holder.host == "DESKTOP-O6IL62J"
    assert lock.acquired_at == datetime.fromisoformat("2026-01-29T15:30:00+00:00")
    verdict = judge(lock)
    assert verdict.state is State.STALE
    assert verdict.codes == ("too_old", "foreign_host")
    assert verdict.alive is None


@pytest.mark.parametrize(
    ("age", "pid", "state", "codes"),
    [
        (10.0, 100, State.ACTIVE, ()),
        (30.0, 100, State.ACTIVE, ()),
        (30.001, 100, State.STALE, ("too_old",)),
        (1.0, 4321, State.STALE, ("holder_dead",)),
    ],
)
def test_decoded_lock_verdicts(age: float, pid: int, state: State, codes: tuple[str, ...]) -> None:
    verdict = judge(decode(python_writer(pid=pid, acquired=ago(age))))
    assert (verdict.state, verdict.codes) == (state, codes)


def test_lock_from_another_host_uses_10s_and_ignores_pid() -> None:
    young = judge(decode(python_writer(pid=4321, acquired=ago(9.0), host="laptop")))
    old = judge(decode(python_writer(pid=100, acquired=ago(10.5), host="laptop")))
    assert (young.state, young.codes, young.alive) == (State.ACTIVE, ("foreign_host",), None)
    assert (old.state, old.codes) == (State.STALE, ("too_old", "foreign_host"))


def test_hostname_is_optional() -> None:
    doc = {"pid": 100, "session_id": "main", "acquired_at": iso(ago(1))}
    lock = decode(doc)
    assert lock.format == "clawdbot"
    assert lock.holder.host is None
    assert lock.defects == ()


# --- detection ----------------------------------------------------------------------


def test_detected_by_content_anywhere() -> None:
    lock = decode(python_writer(), path="/home/me/notes/tasks.lock")
    assert lock.format == "clawdbot"
    assert lock.name == "tasks"


def test_location_hint_claims_a_record_without_the_signature() -> None:
    doc = {"pid": 100, "acquired_at": iso(ago(1))}  # no session_id: content alone says generic
    assert decode(doc).format == "clawdbot"
    assert decode(doc, path="/srv/workspace/other/.lock").format == "generic"
    assert decode(doc, path="/srv/workspace/memory/state.lock").format == "generic"


def test_hinted_garbage_is_an_invalid_clawdbot_lock() -> None:
    lock = decode("{ half a lock")
    assert lock.format == "clawdbot"
    assert judge(lock).state is State.INVALID
    assert judge(lock).codes == ("unparseable",)


# --- schema ---------------------------------------------------------------------------


def _valid() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(python_writer(acquired=ago(1)))
    return document


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pid", None),
        ("pid", "100"),
        ("pid", True),
        ("pid", 0),
        ("pid", -7),
        ("pid", 1.5),
        ("pid", 2**40),
        ("acquired_at", None),
        ("acquired_at", "half past ten"),
        ("acquired_at", 1763726400),
        ("hostname", 42),
        ("session_id", ["main"]),
        ("operation", {"write": "tasks.json"}),
    ],
)
def test_schema_violations_make_it_invalid(field: str, value: Any) -> None:
    doc = _valid()
    if value is None:
        del doc[field]
    else:
        doc[field] = value
    lock = decode(doc)
    assert lock.format == "clawdbot"
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.codes == ("schema_violation",)
    assert field in verdict.reasons[0].message
