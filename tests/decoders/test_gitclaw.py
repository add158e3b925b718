"""gitclaw (seed 001): `.GITCLAW/state/locks/<N>.lock` written by GITCLAW-LOCK.ts."""

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
from lockwatch.sources.files.decoders import decode_file, gitclaw
from lockwatch.sources.files.facts import facts_of
from tests.conftest import LOCAL_HOST, NOW, ago, alive, lock_file

ROOT = "/home/runner/work/agent/agent/.GITCLAW/state/locks"


def to_iso_string(at: datetime) -> str:
    """JavaScript `new Date().toISOString()`: milliseconds and a Z."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def ts_writer(issue: int = 42, run_id: str = "12873640211", acquired: datetime = NOW) -> str:
    """acquireLock(): JSON.stringify(lock, null, 2) + "\\n"."""
    lock = {
        "issueNumber": issue,
        "runId": run_id,
        "acquiredAt": to_iso_string(acquired),
        "pid": 2077,
    }
    return json.dumps(lock, indent=2) + "\n"


def decode(content: Any, path: str = f"{ROOT}/42.lock") -> Lock:
    return decode_file(lock_file(path, content))


def judge(lock: Lock) -> Verdict:
    return evaluate(lock, StaticProcesses(alive(2077)), FrozenClock(NOW), LOCAL_HOST)


def test_seed_lock_decodes_every_field() -> None:
    text = ts_writer(acquired=ago(90.5))
    lock = decode(text)
    assert lock.format == "gitclaw"
    assert lock.id == f"file:{ROOT}/42.lock"
    assert lock.name == "issue-42"
    assert lock.holder == Holder(pid=2077, session="12873640211", operation="issue #42")
    assert lock.acquired_at == ago(90.5)
    assert lock.ttl_seconds == 600.0
    assert lock.heartbeat_at is None
    assert lock.scope == ()
    assert lock.content == json.loads(text)
    assert lock.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert lock.defects == ()
    assert facts_of(lock).policy == gitclaw.POLICY


def test_run_id_from_date_now_fallback() -> None:
    # runId = process.env.GITHUB_RUN_ID || String(Date.now())
    lock = decode(ts_writer(run_id="1763726100000"))
    assert lock.holder.session == "1763726100000"


def test_numeric_run_id_is_accepted_as_text() -> None:
    doc = json.loads(ts_writer())
    doc["runId"] = 12873640211
    lock = decode(doc)
    assert lock.defects == ()
    assert lock.holder.session == "12873640211"


@pytest.mark.parametrize(
    ("age", "state", "codes"),
    [
        (0.0, State.ACTIVE, ()),
        (599.999, State.ACTIVE, ()),
        (600.0, State.STALE, ("too_old",)),
        (3600.0, State.STALE, ("too_old",)),
    ],
)
def test_decoded_lock_verdicts(age: float, state: State, codes: tuple[str, ...]) -> None:
    verdict = judge(decode(ts_writer(acquired=ago(age))))
    assert (verdict.state, verdict.codes) == (state, codes)


def test_runner_pid_never_decides() -> None:
    doc = json.loads(ts_writer(acquired=ago(10)))
    doc["pid"] = 31337  # not running here: the CI runner is elsewhere
    verdict = judge(decode(doc))
    assert verdict.state is State.ACTIVE
    assert verdict.alive is False


# --- detection ----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/tmp/elsewhere/42.lock", "/srv/x/locks/7.lock"])
def test_detected_by_content_anywhere(path: str) -> None:
    assert decode(ts_writer(), path=path).format == "gitclaw"


def test_location_hint_claims_a_record_without_the_signature() -> None:
    doc = {"pid": 2077}
    hinted = decode(doc, path=f"{ROOT}/7.lock")
    assert hinted.format == "gitclaw"
    assert judge(hinted).state is State.INVALID
    assert set(judge(hinted).codes) == {"schema_violation"}
    assert decode(doc, path="/tmp/state/locks/7.lock").format == "generic"


@pytest.mark.parametrize("garbage", ["not json", "", "[1, 2]", "42"])
def test_hinted_garbage_is_an_invalid_gitclaw_lock(garbage: str) -> None:
    lock = decode(garbage, path=f"{ROOT}/9.lock")
    assert lock.format == "gitclaw"
    assert lock.name == "9"
    assert judge(lock).state is State.INVALID


# --- schema ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("issueNumber", None),
        ("issueNumber", "42"),
        ("issueNumber", -1),
        ("issueNumber", 4.2),
        ("issueNumber", True),
        ("runId", None),
        ("runId", ""),
        ("runId", ["x"]),
        ("acquiredAt", None),
        ("acquiredAt", "soon"),
        ("acquiredAt", 1763726100000),
        ("pid", None),
        ("pid", "2077"),
        ("pid", 0),
    ],
)
def test_schema_violations_make_it_invalid(field: str, value: Any) -> None:
    doc = json.loads(ts_writer())
    if value is None:
        del doc[field]
    else:
        doc[field] = value
    lock = decode(doc)
    assert lock.format == "gitclaw"
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.codes == ("schema_violation",)
    assert field in verdict.reasons[0].message


def test_bad_issue_number_falls_back_to_file_name() -> None:
    doc = json.loads(ts_writer())
    doc["issueNumber"] = "forty-two"
    assert decode(doc).name == "42"


def test_acquired_at_alone_is_not_gitclaw() -> None:
    from lockwatch.sources.files.decoders import decode_file
    from tests.conftest import lock_file

    lock = decode_file(
        lock_file("/srv/app/job.lock", {"pid": 1, "acquiredAt": "2026-01-01T00:00Z"})
    )
    assert lock.format == "generic"
    assert lock.defects == ()
