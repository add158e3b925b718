"""The parallel JSON listing gives exactly the sequential answer."""

from __future__ import annotations

import gc
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import psutil
import pytest

from lockwatch.clock import FrozenClock
from lockwatch.fanout import fan_out
from lockwatch.model.assess import assess
from lockwatch.model.report import ls_json, ls_json_bytes
from lockwatch.sources.files import listing
from lockwatch.sources.files.scanner import scan
from lockwatch.sources.processes import HostProcesses

NOW = datetime.now(UTC).replace(microsecond=0)


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).isoformat()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Locks of every kind spread over many directories, with scope conflicts
    between locks that land in different slices."""
    me = os.getpid()
    # Held by this test process since it started, so its pid is no recycled one.
    since = datetime.fromtimestamp(psutil.Process(me).create_time(), UTC).isoformat()
    for n in range(24):
        project = tmp_path / f"p{n:02d}"
        running = project / ".loops" / ".running"
        running.mkdir(parents=True)
        # Every loop covers the same shared path: conflicts across all slices.
        (running / f"loop{n}.lock").write_text(
            json.dumps(
                {
                    "loop_name": f"loop{n}",
                    "scope": [str(tmp_path / "shared")],
                    "pid": me,
                    "started_at": since,
                }
            )
        )
        locks = project / ".GITCLAW" / "state" / "locks"
        locks.mkdir(parents=True)
        (locks / f"{n}.lock").write_text(
            json.dumps({"issueNumber": n, "runId": "r", "acquiredAt": stamp(n * 60), "pid": me})
        )
        (project / "garbage.lock").write_bytes(b"\x00\x01")
        (project / "daemon.pid").write_text("4000000\n")
    return tmp_path


def test_any_number_of_jobs_gives_the_same_document(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "MIN_AREAS_PER_JOB", 1)
    outputs = []
    for jobs in (1, 2, 3, 7):
        result = listing.json_listing([str(tree)], NOW, "host", jobs)
        document = b"".join(ls_json_bytes(NOW, "host", result.arrays, result.errors))
        outputs.append((document, result.stale))
    assert all(output == outputs[0] for output in outputs[1:])
    doc = orjson.loads(outputs[0][0])
    assert len(doc["locks"]) == 96
    conflicted = [lock for lock in doc["locks"] if lock["conflicts_with"]]
    assert len(conflicted) == 24
    assert all(len(lock["conflicts_with"]) == 23 for lock in conflicted)
    # gitclaw locks 10..23 are over ten minutes old, and every pid file is dead.
    assert outputs[0][1] == 14 + 24


def test_matches_the_object_pipeline(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listing, "MIN_AREAS_PER_JOB", 1)
    result = listing.json_listing([str(tree)], NOW, "host", 2)
    document = b"".join(ls_json_bytes(NOW, "host", result.arrays, result.errors))
    scanned = scan([str(tree)])
    assessed = assess(scanned.locks, HostProcesses(), FrozenClock(NOW), "host")
    expected = ls_json(NOW, "host", assessed, scanned.errors)
    assert orjson.loads(document) == expected


def test_fan_out_keeps_order() -> None:
    assert fan_out([[1, 2], [3], [4, 5, 6]], sum) == [3, 3, 15]


def test_fan_out_children_run_without_the_cyclic_collector() -> None:
    parent = os.getpid()

    def collecting(n: int) -> tuple[bool, bool]:
        return os.getpid() != parent, gc.isenabled()

    was = gc.isenabled()
    gc.enable()  # whatever an earlier in-process `ls` in this worker left
    try:
        assert fan_out([0, 1, 2], collecting) == [(False, True), (True, False), (True, False)]
        assert gc.isenabled()
    finally:
        if not was:
            gc.disable()


def test_fan_out_redoes_the_work_of_a_failed_child() -> None:
    parent = os.getpid()

    def flaky(n: int) -> int:
        if os.getpid() != parent:
            raise RuntimeError("only in the child")
        return n * 10

    assert fan_out([1, 2, 3], flaky) == [10, 20, 30]


def test_fan_out_redoes_the_work_of_a_child_that_dies() -> None:
    parent = os.getpid()

    def dying(n: int) -> int:
        if os.getpid() != parent:
            os._exit(9)
        return n + 1

    assert fan_out([1, 2], dying) == [2, 3]


def test_fan_out_errors_surface_in_the_parent() -> None:
    def broken(n: int) -> int:
        raise ValueError(f"bad slice {n}")

    with pytest.raises(ValueError, match="bad slice 0"):
        fan_out([0, 1], broken)


def test_fan_out_does_the_work_here_when_it_cannot_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr("lockwatch.fanout.os.fork", no_fork)
    assert fan_out([1, 2, 3], lambda n: n * 2) == [2, 4, 6]


def test_fan_out_reaps_its_children_when_the_parent_fails(forked: list[int]) -> None:
    parent = os.getpid()

    def fails_here(n: int) -> bytes:
        if os.getpid() == parent:
            raise RuntimeError("the parent's slice broke")
        return b"x" * 200_000  # more than a pipe holds: the child blocks until read

    with pytest.raises(RuntimeError):
        fan_out([0, 1, 2], fails_here)
    assert len(forked) == 2
    for pid in forked:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_listing_of_one_array_is_written_as_any_other() -> None:
    """ls_json_bytes writes a list's one non-empty array as it is (no copy without
    its brackets): the document is the one its arrays, read one by one, make."""
    from lockwatch.model.report import records_json_array

    one = records_json_array([{"id": "a", "n": 1}, {"id": "b", "n": 2}])
    two = records_json_array([{"id": "c"}])
    empty = records_json_array([])
    for arrays in ([one], [empty, one, empty], [one, two], [empty], [], [empty, two]):
        listed = b"".join(ls_json_bytes(NOW, "host", list(arrays), []))
        streamed = b"".join(ls_json_bytes(NOW, "host", iter(arrays), []))
        assert listed == streamed, arrays
        assert orjson.loads(listed)["locks"] == [
            lock for array in arrays for lock in orjson.loads(array)
        ]
