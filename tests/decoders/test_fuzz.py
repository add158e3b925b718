"""Hypothesis fuzz of every decoder: whatever the input, a Lock and a verdict, never a raise.

Two ways in for each format:
- structured: a dict over the format's own keys (plus strays) with arbitrary JSON values,
  straight into that decoder's `decode()`;
- raw: bytes (binary, text, or JSON text with hostile number literals) through
  `decode_file` at the format's hinted location.

Inputs that once crashed a decoder are pinned with @example so they are tried every run.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockwatch.clock import FrozenClock
from lockwatch.model.assess import assess
from lockwatch.model.compact import plain
from lockwatch.model.lock import Lock
from lockwatch.model.process import ProcessFacts, StaticProcesses
from lockwatch.model.report import lock_json
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.files.decoders import (
    FORMATS,
    clawdbot,
    decode_file,
    generic,
    gitclaw,
    little_loops,
    tower_fleet,
)
from lockwatch.sources.files.decoders.base import LockFile
from tests.conftest import LOCAL_HOST, NOW, alive, iso, lock_file

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CLOCK = FrozenClock(NOW)
PROCESSES = StaticProcesses(
    alive(100),
    alive(101, started_seconds_ago=1.0),  # recycled for most locks
    ProcessFacts(pid=102, alive=True, started_at=None),  # details hidden from us
)
STATES = set(State)
SNAKE = re.compile(r"[a-z][a-z0-9_]*")

KEYS: dict[str, tuple[str, ...]] = {
    "clawdbot": ("pid", "session_id", "acquired_at", "hostname", "operation"),
    "gitclaw": ("issueNumber", "runId", "acquiredAt", "pid"),
    "tower-fleet/v1": (
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
        "metadata",
    ),
    "little-loops": ("loop_name", "scope", "pid", "started_at"),
    "generic": (
        *generic.PID_KEYS,
        *generic.HOST_KEYS,
        *generic.TIME_KEYS,
        *generic.ACTOR_KEYS,
        *generic.SESSION_KEYS,
        *generic.OPERATION_KEYS,
        *generic.HEARTBEAT_KEYS,
    ),
}
DECODERS: dict[str, ModuleType] = {
    "clawdbot": clawdbot,
    "gitclaw": gitclaw,
    "tower-fleet/v1": tower_fleet,
    "little-loops": little_loops,
    "generic": generic,
}
HINTED_PATH = {
    "clawdbot": "/srv/ws/memory/.lock",
    "gitclaw": "/repo/.GITCLAW/state/locks/12.lock",
    "tower-fleet/v1": "/root/tower-fleet/logs/locks/deploy-app.lock",
    "little-loops": "/home/dev/proj/.loops/.running/fix.lock",
    "generic": "/var/lock/thing.lock",
}

# --- strategies -------------------------------------------------------------------------

datetimes = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
near_now = st.floats(min_value=-7200, max_value=7200).map(lambda s: NOW + timedelta(seconds=s))
timestamps = st.one_of(
    near_now.map(iso),
    near_now.map(lambda at: at.isoformat()),
    near_now.map(lambda at: at.replace(tzinfo=None).isoformat()),
    datetimes.map(iso),
    near_now.map(lambda at: at.timestamp()),
    near_now.map(lambda at: int(at.timestamp() * 1000)),
)
pids = st.one_of(st.sampled_from([100, 101, 102, 200]), st.integers(-10, 2**33))
big_ints = st.integers(min_value=-(10**400), max_value=10**400)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    big_ints,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["", " ", "v1", LOCAL_HOST, "tower-01", "12345", "²", "①", "٣"]),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
plausible = st.one_of(
    timestamps,
    pids,
    st.from_regex(r"[a-z0-9][a-z0-9_-]{0,20}[a-z0-9]", fullmatch=True),
    st.lists(st.sampled_from(["src", "src/lib", "/abs", ".", "..", "a/../b", ""]), max_size=4),
    st.integers(min_value=-5, max_value=2000),
)
values = st.one_of(plausible, json_values)


def documents(fmt: str) -> st.SearchStrategy[dict[str, Any]]:
    own = st.fixed_dictionaries({}, optional=dict.fromkeys(KEYS[fmt], values))
    strays = st.dictionaries(st.text(max_size=10), json_values, max_size=3)
    return st.builds(lambda a, b: {**b, **a}, own, strays)


# JSON text pieces a JSON serialiser never writes but a file may hold.
HOSTILE_LITERALS = [
    "1e999",
    "-1e999",
    "1" + "0" * 400,
    "-" + "9" * 1000,
    "1" * 5000,
    "NaN",
    "Infinity",
    "-Infinity",
    "1.5e308",
    "-0",
    "0e0",
    '"\\u0000"',
    '"\\ud800"',
    '"²"',
    '"\\uff11\\uff12\\uff13"',  # fullwidth digits
    "[" * 3000 + "]" * 3000,
    "true",
]
fragments = st.one_of(st.builds(json.dumps, values), st.sampled_from(HOSTILE_LITERALS))


def json_texts(fmt: str) -> st.SearchStrategy[bytes]:
    pairs = st.lists(
        st.tuples(st.one_of(st.sampled_from(KEYS[fmt]), st.text(max_size=6)), fragments),
        max_size=len(KEYS[fmt]) + 2,
    )
    return pairs.map(
        lambda kv: ("{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in kv) + "}").encode()
    )


def raw_inputs(fmt: str) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=300),
        st.text(max_size=80).map(str.encode),
        st.from_regex(r"\s*[0-9²³¹٣①]{1,12}(\s+[\w.-]{0,12})?\s*", fullmatch=True).map(str.encode),
        fragments.map(str.encode),
        json_texts(fmt),
    )


# --- the invariant ----------------------------------------------------------------------


def check(lock: object, fmt: str | None) -> tuple[Lock, Verdict]:
    assert isinstance(lock, Lock)
    assert lock.format in FORMATS
    if fmt is not None:
        assert lock.format == fmt
    assert lock.source == "file"
    assert lock.id.startswith("file:/")
    verdict = evaluate(lock, PROCESSES, CLOCK, LOCAL_HOST)
    assert isinstance(verdict, Verdict)
    assert verdict.state in STATES
    assert all(SNAKE.fullmatch(r.code) for r in verdict.reasons)
    assert (verdict.state is State.INVALID) == bool(lock.defects)
    [(same, assessed)] = assess([lock], PROCESSES, CLOCK, LOCAL_HOST)
    assert same is lock
    assert assessed.state is verdict.state
    pair = assess([lock, lock], PROCESSES, CLOCK, LOCAL_HOST)
    assert all(v.state in STATES for _, v in pair)
    return lock, verdict


def check_strict_json(lock: Lock, verdict: Verdict) -> None:
    json.dumps(plain(lock.content), allow_nan=False)  # as every writer of content does
    json.dumps(lock_json(lock, verdict), allow_nan=False)


def file_for(fmt: str, doc: dict[str, Any]) -> LockFile:
    path = HINTED_PATH[fmt]
    name = doc.get("lock_name")
    if fmt == "tower-fleet/v1" and isinstance(name, str) and name and "/" not in name:
        path = f"/root/tower-fleet/logs/locks/{name}.lock"  # lets a valid record be valid
    return lock_file(path, b"")


def structured(fmt: str, doc: dict[str, Any]) -> None:
    decoder = DECODERS[fmt]
    lock, verdict = check(decoder.decode(doc, file_for(fmt, doc)), fmt)
    assert lock.content == doc
    check_strict_json(lock, verdict)


def raw(fmt: str, data: bytes) -> None:
    lock = decode_file(lock_file(HINTED_PATH[fmt], data))
    check(lock, None)


# --- structured: each decoder's decode() --------------------------------------------------


@FUZZ
@given(doc=documents("clawdbot"))
def test_clawdbot_decode_fuzz(doc: dict[str, Any]) -> None:
    structured("clawdbot", doc)


@FUZZ
@given(doc=documents("gitclaw"))
def test_gitclaw_decode_fuzz(doc: dict[str, Any]) -> None:
    structured("gitclaw", doc)


@FUZZ
@given(doc=documents("tower-fleet/v1"))
@example(doc={"lock_version": "v1", "ttl_seconds": 10**400})
def test_tower_fleet_decode_fuzz(doc: dict[str, Any]) -> None:
    structured("tower-fleet/v1", doc)


@FUZZ
@given(doc=documents("little-loops"))
def test_little_loops_decode_fuzz(doc: dict[str, Any]) -> None:
    structured("little-loops", doc)


@FUZZ
@given(doc=documents("generic"))
@example(doc={"pid": "²"})
def test_generic_decode_fuzz(doc: dict[str, Any]) -> None:
    structured("generic", doc)


# --- raw bytes through decode_file at each hinted location ---------------------------------


@FUZZ
@given(data=raw_inputs("clawdbot"))
def test_clawdbot_raw_fuzz(data: bytes) -> None:
    raw("clawdbot", data)


@FUZZ
@given(data=raw_inputs("gitclaw"))
def test_gitclaw_raw_fuzz(data: bytes) -> None:
    raw("gitclaw", data)


@FUZZ
@given(data=raw_inputs("tower-fleet/v1"))
@example(data=b'{"lock_version": "v1", "ttl_seconds": 1' + b"0" * 400 + b"}")
def test_tower_fleet_raw_fuzz(data: bytes) -> None:
    raw("tower-fleet/v1", data)


@FUZZ
@given(data=raw_inputs("little-loops"))
def test_little_loops_raw_fuzz(data: bytes) -> None:
    raw("little-loops", data)


@FUZZ
@given(data=raw_inputs("generic"))
@example(data="²\n".encode())
def test_generic_raw_fuzz(data: bytes) -> None:
    raw("generic", data)


def test_pid_file_path_is_generic_too() -> None:
    for data in (b"12345\n", b"", b"\x00", b"junk"):
        check(decode_file(lock_file("/run/daemon.pid", data)), "generic")


# --- decoded content is strict JSON (the `ls --json` contract) ------------------------------


any_format_raw = st.sampled_from(sorted(HINTED_PATH)).flatmap(
    lambda fmt: st.tuples(st.just(fmt), raw_inputs(fmt))
)


@FUZZ
@given(case=any_format_raw)
@example(case=("clawdbot", b'{"pid": 100, "session_id": "m", "acquired_at": 1e999}'))
@example(case=("generic", b'{"pid": 100, "x": 1e999}'))
def test_decoded_content_is_strict_json(case: tuple[str, bytes]) -> None:
    fmt, data = case
    lock = decode_file(lock_file(HINTED_PATH[fmt], data))
    _, verdict = check(lock, None)
    check_strict_json(lock, verdict)
