"""little-loops (seed 004): `.loops/.running/<name>.lock` written by LockManager.acquire."""

from __future__ import annotations

import hashlib
import itertools
import json
import posixpath
from datetime import datetime
from typing import Any

import pytest

from lockwatch.clock import FrozenClock
from lockwatch.model.lock import Holder, Lock
from lockwatch.model.process import StaticProcesses
from lockwatch.model.verdict import State, Verdict, evaluate
from lockwatch.sources.files.decoders import decode_file, little_loops
from lockwatch.sources.files.facts import facts_of
from tests.conftest import LOCAL_HOST, NOW, ago, alive, lock_file

PROJECT = "/home/dev/proj"
RUNNING = f"{PROJECT}/.loops/.running"


def acquire(
    name: str = "fix-bugs",
    scope: list[str] | None = None,
    pid: int = 100,
    started: datetime = NOW,
) -> str:
    """LockManager.acquire(): resolved absolute scope, json.dump of ScopeLock.to_dict()."""
    lock = {
        "loop_name": name,
        "scope": [f"{PROJECT}/src"] if scope is None else scope,
        "pid": pid,
        "started_at": started.isoformat(),  # _iso_now()
    }
    return json.dumps(lock)


def decode(content: Any, path: str = f"{RUNNING}/fix-bugs.lock") -> Lock:
    return decode_file(lock_file(path, content))


def judge(lock: Lock) -> Verdict:
    holder = StaticProcesses(alive(100, started_seconds_ago=30 * 86400.0))
    return evaluate(lock, holder, FrozenClock(NOW), LOCAL_HOST)


def test_seed_lock_decodes_every_field() -> None:
    text = acquire(started=ago(120.5))
    lock = decode(text)
    assert lock.format == "little-loops"
    assert lock.id == f"file:{RUNNING}/fix-bugs.lock"
    assert lock.name == "fix-bugs"
    assert lock.holder == Holder(pid=100, operation="loop fix-bugs")
    assert lock.acquired_at == ago(120.5)
    assert lock.heartbeat_at is None
    assert lock.ttl_seconds is None
    assert lock.scope == (f"{PROJECT}/src",)
    assert lock.content == json.loads(text)
    assert lock.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert lock.defects == ()
    assert facts_of(lock).policy == little_loops.POLICY


def test_seed_test_fixture_form() -> None:
    # The seed's own tests write relative scopes and a Z timestamp.
    doc = {"loop_name": "test-loop", "scope": ["src/", "tests/"], "pid": 100}
    doc["started_at"] = "2024-01-15T10:30:00Z"
    lock = decode(doc, path=f"{RUNNING}/test-loop.lock")
    assert lock.scope == (f"{PROJECT}/src", f"{PROJECT}/tests")
    assert lock.acquired_at == datetime.fromisoformat("2024-01-15T10:30:00+00:00")


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ([], (PROJECT,)),
        (["."], (PROJECT,)),
        ([PROJECT], (PROJECT,)),
        (["src/"], (f"{PROJECT}/src",)),
        (["./tests"], (f"{PROJECT}/tests",)),
        (["src//lib/"], (f"{PROJECT}/src/lib",)),
        (["docs/../README.md"], (f"{PROJECT}/README.md",)),
        (["../sibling"], ("/home/dev/sibling",)),
        (["/abs/elsewhere/"], ("/abs/elsewhere",)),
        (["src", "/etc/app.conf"], (f"{PROJECT}/src", "/etc/app.conf")),
    ],
)
def test_scope_is_normalised_from_the_project_root(
    scope: list[str], expected: tuple[str, ...]
) -> None:
    assert decode(acquire(scope=scope)).scope == expected


def test_outside_the_hinted_directory_scopes_are_relative_to_the_lock() -> None:
    lock = decode(acquire(scope=["src"]), path="/tmp/loops/fix-bugs.lock")
    assert lock.format == "little-loops"
    assert lock.scope == ("/tmp/loops/src",)


@pytest.mark.parametrize(
    ("pid", "age", "state", "codes"),
    [
        (100, 5.0, State.ACTIVE, ()),
        (100, 3 * 86400.0, State.ACTIVE, ()),
        (4321, 5.0, State.STALE, ("holder_dead",)),
    ],
)
def test_decoded_lock_verdicts(pid: int, age: float, state: State, codes: tuple[str, ...]) -> None:
    verdict = judge(decode(acquire(pid=pid, started=ago(age))))
    assert (verdict.state, verdict.codes) == (state, codes)


def test_recycled_pid_is_stale() -> None:
    recycled = StaticProcesses(alive(100, started_seconds_ago=60.0))
    lock = decode(acquire(started=ago(600.0)))
    verdict = evaluate(lock, recycled, FrozenClock(NOW), LOCAL_HOST)
    assert (verdict.state, verdict.codes, verdict.alive) == (State.STALE, ("pid_reused",), False)


# --- detection ----------------------------------------------------------------------


def test_detected_by_content_anywhere() -> None:
    assert decode(acquire(), path="/var/tmp/x.lock").format == "little-loops"


def test_detected_by_scope_and_started_at_without_loop_name() -> None:
    doc = {"scope": ["src"], "pid": 100, "started_at": NOW.isoformat()}
    lock = decode(doc, path="/var/tmp/x.lock")
    assert lock.format == "little-loops"
    assert judge(lock).codes == ("schema_violation",)


def test_location_hint_claims_a_record_without_the_signature() -> None:
    doc = {"pid": 100}
    assert decode(doc).format == "little-loops"
    assert decode(doc, path="/var/tmp/.running/x.lock").format == "generic"


@pytest.mark.parametrize("garbage", ["{", "", "[]", "null", b"\x00\x01"])
def test_hinted_garbage_is_an_invalid_little_loops_lock(garbage: str | bytes) -> None:
    lock = decode(garbage)
    assert lock.format == "little-loops"
    assert lock.name == "fix-bugs"
    assert judge(lock).state is State.INVALID


# --- schema ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("loop_name", None),
        ("loop_name", 5),
        ("loop_name", ""),
        ("scope", None),
        ("scope", "src"),
        ("scope", [1]),
        ("scope", ["src", ""]),
        ("scope", {"src": True}),
        ("pid", None),
        ("pid", "100"),
        ("pid", True),
        ("pid", -1),
        ("started_at", None),
        ("started_at", "whenever"),
        ("started_at", 1700000000),
    ],
)
def test_schema_violations_make_it_invalid(field: str, value: Any) -> None:
    doc = json.loads(acquire())
    if value is None:
        del doc[field]
    else:
        doc[field] = value
    lock = decode(doc)
    assert lock.format == "little-loops"
    verdict = judge(lock)
    assert verdict.state is State.INVALID
    assert verdict.codes == ("schema_violation",)
    assert field in verdict.reasons[0].message


def test_a_scope_path_in_its_project_is_what_normpath_makes_of_the_join() -> None:
    # in_project skips normpath where the join is already normal: never another path.
    roots = ["/", "/a", "/a/b", "//a", "/a/", "/a/./b", "/a/../b", "/.x/y", "/a/..", "/a/."]
    parts = ["", ".", "..", "x", "x/", "x//y", "./x", "../x", "x/.", "x/..", "/abs", "//abs"]
    parts += [".x", "..x", "x..", "x/.y", "x/..y", "...", "x/...", "~", "x/./y", "x/../y"]
    for root, (a, b) in itertools.product(roots, itertools.product(parts, repeat=2)):
        path = f"{a}/{b}" if a and b else a or b
        want = posixpath.normpath(posixpath.join(root, path))
        assert little_loops.in_project(root, path) == want, (root, path)
