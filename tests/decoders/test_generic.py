"""generic: any other `*.lock`/`*.pid`: JSON with familiar keys, a bare pid, or nothing."""

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
from lockwatch.sources.files.decoders import decode_file, generic
from lockwatch.sources.files.facts import facts_of
from tests.conftest import LOCAL_HOST, NOW, ago, alive, iso, lock_file

PATH = "/var/lock/backup.lock"
PID_FILE = "/run/sshd.pid"


def decode(content: Any, path: str = PATH, mtime: datetime = NOW) -> Lock:
    return decode_file(lock_file(path, content, mtime=mtime))


def judge(lock: Lock) -> Verdict:
    running = StaticProcesses(alive(100, started_seconds_ago=86400.0))
    return evaluate(lock, running, FrozenClock(NOW), LOCAL_HOST)


# --- JSON -------------------------------------------------------------------------------


def test_json_with_pid_host_and_time() -> None:
    doc = {
        "pid": 100,
        "host": LOCAL_HOST,
        "created_at": iso(ago(30)),
        "owner": "alice",
        "command": "restic backup /srv",
        "request_id": "r-1",
    }
    text = json.dumps(doc)
    lock = decode(text, mtime=ago(5))
    assert lock.format == "generic"
    assert lock.id == f"file:{PATH}"
    assert lock.name == "backup"
    assert lock.holder == Holder(
        pid=100, host=LOCAL_HOST, actor="alice", session="r-1", operation="restic backup /srv"
    )
    assert lock.acquired_at == ago(30)  # the recorded time wins over the mtime
    assert lock.content == doc
    assert lock.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert lock.defects == ()
    assert facts_of(lock).policy == generic.POLICY
    verdict = judge(lock)
    assert (verdict.state, verdict.codes, verdict.alive) == (State.ACTIVE, (), True)
    assert verdict.age_seconds == pytest.approx(30.0)


@pytest.mark.parametrize(
    ("doc", "pid", "host", "acquired"),
    [
        ({"PID": 100, "hostName": "h1", "startedAt": iso(ago(7))}, 100, "h1", ago(7)),
        ({"processId": 42, "node": "n1", "ts": int(ago(60).timestamp())}, 42, "n1", ago(60)),
        (
            {"owner_pid": 9, "machine": "m", "timestamp": int(ago(2).timestamp() * 1000)},
            9,
            "m",
            ago(2),
        ),
        (
            {"ownerPid": "77", "hostname": "x", "locked_at": "2026-11-21T11:00:00"},
            77,
            "x",
            ago(3600),
        ),
    ],
)
def test_familiar_key_spellings(
    doc: dict[str, Any], pid: int, host: str, acquired: datetime
) -> None:
    lock = decode(doc)
    assert lock.format == "generic"
    assert (lock.holder.pid, lock.holder.host, lock.acquired_at) == (pid, host, acquired)
    assert lock.defects == ()


def test_json_dead_pid_is_holder_dead() -> None:
    verdict = judge(decode({"pid": 4321, "hostname": LOCAL_HOST}))
    assert (verdict.state, verdict.codes, verdict.alive) == (State.STALE, ("holder_dead",), False)


def test_json_foreign_host_pid_not_checked() -> None:
    verdict = judge(decode({"pid": 4321, "hostname": "build-07"}))
    assert (verdict.state, verdict.codes, verdict.alive) == (State.ACTIVE, ("foreign_host",), None)


@pytest.mark.parametrize("raw_pid", ["12345", " 12345 ", "0012345"])
def test_pid_as_digit_string(raw_pid: str) -> None:
    lock = decode({"pid": raw_pid})
    assert lock.holder.pid == 12345
    assert lock.defects == ()


def test_json_without_time_uses_mtime() -> None:
    lock = decode({"pid": 100}, mtime=ago(90))
    assert lock.acquired_at == ago(90)
    assert judge(lock).age_seconds == pytest.approx(90.0)


def test_json_without_pid_is_active_with_no_pid_info() -> None:
    verdict = judge(decode({"host": LOCAL_HOST, "note": "maintenance"}))
    assert (verdict.state, verdict.codes) == (State.ACTIVE, ("no_pid",))


@pytest.mark.parametrize(
    "raw_pid", ["abc", 0, -5, 2**32, True, 1.5, [100], {"n": 1}, "12345678901"]
)
def test_unusable_pid_is_a_schema_violation(raw_pid: Any) -> None:
    lock = decode({"pid": raw_pid})
    assert lock.format == "generic"
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.codes == ("schema_violation",)


@pytest.mark.parametrize("raw_pid", ["²", "①", "12³"])
def test_unicode_digit_pid_string_does_not_crash(raw_pid: str) -> None:
    lock = decode({"pid": raw_pid})
    assert judge(lock).state is State.INVALID


def test_huge_integer_time_does_not_crash() -> None:
    lock = decode('{"pid": 100, "time": 1' + "0" * 400 + "}", mtime=ago(3))
    assert lock.format == "generic"
    assert lock.acquired_at == ago(3)


# --- pid files --------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["12345\n", "12345", "  12345  \n\n"])
def test_bare_pid_file(text: str) -> None:
    lock = decode(text, path=PID_FILE, mtime=ago(600))
    assert lock.format == "generic"
    assert lock.name == "sshd"
    assert lock.holder == Holder(pid=12345)
    assert lock.acquired_at == ago(600)
    assert lock.content == 12345
    assert lock.sha256 == hashlib.sha256(text.encode()).hexdigest()
    verdict = judge(lock)
    assert (verdict.state, verdict.codes, verdict.alive) == (State.STALE, ("holder_dead",), False)


def test_bare_pid_file_of_a_running_process() -> None:
    # Nobody asked the kernel (a network filesystem): the pid rule alone. With the
    # kernel's word, the sentinel's reading is named (test_existence_locks.py).
    verdict = judge(decode("100\n", path=PID_FILE, mtime=ago(60)))
    assert (verdict.state, verdict.codes, verdict.alive) == (State.ACTIVE, (), True)


@pytest.mark.parametrize("text", ["0\n", "-5\n", "4294967296\n"])
def test_bare_number_that_is_no_pid(text: str) -> None:
    lock = decode(text, path=PID_FILE)
    assert judge(lock).state is State.INVALID
    assert judge(lock).codes == ("schema_violation",)


@pytest.mark.parametrize(
    ("text", "host", "codes", "state"),
    [
        ("100 testhost\n", "testhost", (), State.ACTIVE),
        # Later lines belong to the writer (postmaster.pid keeps its data directory there).
        ("100\n/var/lib/postgresql/15/main\n1795295718\n5432\n", None, (), State.ACTIVE),
        ("4321\n16088\n", None, ("holder_dead",), State.STALE),
        ("4321 testhost\n", "testhost", ("holder_dead",), State.STALE),
        ("4321 build-07\n", "build-07", ("foreign_host",), State.ACTIVE),
    ],
)
def test_pid_and_host_text(
    text: str, host: str | None, codes: tuple[str, ...], state: State
) -> None:
    lock = decode(text)
    assert lock.format == "generic"
    assert lock.holder.host == host
    assert lock.content == text
    verdict = judge(lock)
    assert (verdict.state, verdict.codes) == (state, codes)


# --- empty files ------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n", "  \n\t"])
def test_empty_file_ages_from_mtime(text: str) -> None:
    lock = decode(text, mtime=ago(42))
    assert lock.format == "generic"
    assert lock.holder == Holder()
    assert lock.acquired_at == ago(42)
    assert lock.defects == ()
    verdict = judge(lock)
    assert verdict.state is State.ACTIVE
    assert verdict.codes == ("no_pid",)
    assert verdict.age_seconds == pytest.approx(42.0)
    assert verdict.alive is None


# --- garbage ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["hello", "pid=12345", "12345 host extra", "{oops", "NaN"])
def test_non_pid_text_is_unparseable(text: str) -> None:
    lock = decode(text, mtime=ago(5))
    assert lock.format == "generic"
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.codes == ("unparseable",)
    assert lock.content == text
    assert lock.acquired_at == ago(5)


@pytest.mark.parametrize("path", ["/var/lock/x.lock", "/run/x.pid", "/srv/memory/x.lock"])
def test_unhinted_paths_fall_to_generic(path: str) -> None:
    assert decode({"pid": 100}, path=path).format == "generic"
