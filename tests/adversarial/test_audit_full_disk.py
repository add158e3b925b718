"""The audit log on a full disk, and after a crash.

A real full disk where the machine allows it: a 64 KiB tmpfs mounted for the
test (root; unmounted at teardown), the audit log on it, the locks on the
ordinary disk. Where no tmpfs can be mounted those tests skip, and the same code
paths are still driven by an injected writer that raises ENOSPC (the tests
named `injected`). A crash is a real SIGKILL in the middle of a write.

What must hold: no action without its intent written and room for its result;
an intent once written always gets its result; a write that fails half-way
leaves no half record; a line a crash cut short is "torn", never "tampered".
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockwatch.actions import audit_disk
from lockwatch.actions.audit import AuditError, AuditLog, read_records, verify
from lockwatch.actions.plan import Kind
from lockwatch.actions.run import Executor
from lockwatch.clock import FrozenClock
from lockwatch.sources.files import cas as files
from tests.actions.test_executor import OPERATOR, STALE_PID, on_disk, planned
from tests.conftest import LOCAL_HOST, NOW


@pytest.fixture(autouse=True)
def own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A filesystem of its own at `where` (made here), of `size` ("64k"): a tmpfs,
    so root only (skipped otherwise)."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the injected tests cover the same paths")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB filesystem of its own."""
    with tmpfs(tmp_path / "tiny", "64k") as where:
        yield where


def free_bytes(where: Path) -> int:
    st = os.statvfs(where)
    return st.f_bavail * st.f_frsize


def fill_to(where: Path, left: int) -> None:
    """Fill the filesystem at `where` until `left` bytes stay free (page-rounded)."""
    with open(where / "filler", "ab") as handle:
        while free_bytes(where) > left:
            try:
                handle.write(b"\0" * min(4096, free_bytes(where) - left))
                handle.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break


def make_executor(log: Path) -> Executor:
    return Executor(AuditLog(log, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR))


def events(log: Path) -> list[str]:
    return [record["event"] for _, record, _ in read_records(log) if record is not None]


# ------------------------------------------------------------------------ a real full disk


def test_a_break_with_no_room_to_audit_is_refused_untouched(
    tiny_disk: Path, tmp_path: Path
) -> None:
    log = tiny_disk / "audit.jsonl"
    lock = on_disk(tmp_path / "locks" / "worker.pid", STALE_PID)
    fill_to(tiny_disk, 4096)
    outcome = make_executor(log).run(planned(Kind.BREAK, lock), "holder died")
    assert not outcome.ok and outcome.code == "audit_unwritable", outcome
    assert "no room" in outcome.message and "nothing was done" in outcome.message
    assert (tmp_path / "locks" / "worker.pid").read_bytes() == STALE_PID
    assert events(log) == []  # no intent without room for its result
    result = verify(log)
    assert result.ok and result.records == 0, result


def test_a_disk_that_fills_after_the_intent_still_gets_the_result(
    tiny_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Room was reserved with the intent: filling the disk to the last byte while
    the lock is moved cannot keep the result out of the log."""
    log = tiny_disk / "audit.jsonl"
    lock = on_disk(tmp_path / "locks" / "worker.pid", STALE_PID)
    fill_to(tiny_disk, 40 * 1024)
    real = files.move_aside

    def fill_then_move(*args: Any, **kwargs: Any) -> files.Moved:
        fill_to(tiny_disk, 0)
        assert free_bytes(tiny_disk) == 0
        return real(*args, **kwargs)

    monkeypatch.setattr(files, "move_aside", fill_then_move)
    outcome = make_executor(log).run(planned(Kind.BREAK, lock), "holder died")
    assert outcome.ok and outcome.audited, outcome
    assert events(log) == ["action_intent", "lock_broken"]
    result = verify(log)
    assert result.ok and result.status == "intact" and result.records == 2, result
    assert not result.notes  # the head kept up: its spare needed no new block


def test_a_record_cut_short_by_a_full_disk_is_taken_back(tiny_disk: Path) -> None:
    """No reservation for a plain record: the disk runs out in the middle of the
    write. The half written is cut off again, and the log verifies."""
    log = tiny_disk / "audit.jsonl"
    writer = AuditLog(log, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR)
    writer.append("lock_broken", {"reason": "first"})
    size = log.stat().st_size
    fill_to(tiny_disk, 0)
    with pytest.raises(AuditError, match="full"):
        writer.append("lock_broken", {"reason": "x" * 20_000})
    assert log.stat().st_size == size
    result = verify(log)
    assert result.ok and result.status == "intact" and result.records == 1, result


# ------------------------------------------------------------------ injected ENOSPC writers


def test_injected_no_room_refuses_the_intent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_room(fd: int, offset: int, length: int) -> None:
        raise audit_disk.NoRoom(errno.ENOSPC, f"0 bytes free, {length} bytes needed")

    monkeypatch.setattr(audit_disk, "reserve", no_room)
    log = tmp_path / "audit" / "audit.jsonl"
    lock = on_disk(tmp_path / "locks" / "worker.pid", STALE_PID)
    outcome = make_executor(log).run(planned(Kind.BREAK, lock), "holder died")
    assert outcome.code == "audit_unwritable" and "no room" in outcome.message
    assert (tmp_path / "locks" / "worker.pid").read_bytes() == STALE_PID
    assert events(log) == [] and verify(log).ok


def test_injected_enospc_in_the_middle_of_a_write_leaves_no_half_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit" / "audit.jsonl"
    writer = AuditLog(log, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR)
    writer.append("lock_broken", {"reason": "first"})
    size = log.stat().st_size
    real = audit_disk.write_all

    def half_then_full(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(audit_disk, "write_all", half_then_full)
    with pytest.raises(AuditError, match="disk is full"):
        writer.append("lock_broken", {"reason": "second"})
    assert log.stat().st_size == size
    monkeypatch.setattr(audit_disk, "write_all", real)
    writer.append("lock_broken", {"reason": "third"})
    result = verify(log)
    assert result.ok and result.status == "intact" and result.records == 2, result
    assert not result.notes


def test_injected_head_failure_leaves_a_lagging_head_not_tampering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit" / "audit.jsonl"
    writer = AuditLog(log, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR)
    writer.append("lock_broken", {"reason": "first"})

    def full(*args: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(audit_disk, "write_beside", full)
    record = writer.append("lock_broken", {"reason": "synced, head not"})
    assert record["seq"] == 2
    result = verify(log)
    assert result.ok and result.records == 2, result
    assert any("between writing a record and its head" in note for note in result.notes)


# ------------------------------------------------------------------------- a real crash


def _die_mid_write(log: str) -> None:
    writer = AuditLog(Path(log), clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR)

    def half_then_die(fd: int, data: bytes) -> None:
        os.write(fd, data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)

    audit_disk.write_all = half_then_die  # this child only
    writer.append("action_intent", {"reason": "killed while writing this"})


def _lockwatch_verify(log: Path, env_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_CONFIG_HOME=str(env_dir / "xdg-config"))
    return subprocess.run(
        [sys.executable, "-m", "lockwatch", "audit", "verify", "--audit-log", str(log)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_a_crash_mid_write_is_torn_not_tampered(tmp_path: Path) -> None:
    log = tmp_path / "audit" / "audit.jsonl"
    writer = AuditLog(log, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR)
    writer.append("lock_broken", {"reason": "before the crash"})
    child = multiprocessing.get_context("fork").Process(target=_die_mid_write, args=(str(log),))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL
    assert not log.read_bytes().endswith(b"\n")  # really cut short

    torn = verify(log)
    assert torn.ok and torn.status == "torn" and torn.records == 1, torn
    shown = _lockwatch_verify(log, tmp_path)
    assert shown.returncode == 0, shown
    assert "torn by a crash" in shown.stdout and "TAMPERED" not in shown.stderr

    writer.append("lock_broken", {"reason": "after the crash"})
    marked = verify(log)
    assert marked.ok and marked.status == "intact" and marked.records == 2, marked
    assert any("torn by a crash" in note and "marked by record 2" in note for note in marked.notes)


def test_a_cut_record_the_head_vouched_for_is_tampering(tmp_path: Path) -> None:
    """The same bytes missing, but from a record whose head was written: no crash
    does that, an edit does."""
    log = tmp_path / "audit" / "audit.jsonl"
    writer = AuditLog(log, clock=FrozenClock(NOW), host=LOCAL_HOST, operator=OPERATOR)
    writer.append("lock_broken", {"reason": "one"})
    writer.append("lock_broken", {"reason": "two"})
    data = log.read_bytes()
    log.write_bytes(data[: len(data) - 40])
    result = verify(log)
    assert not result.ok and result.status == "tampered", result
    shown = _lockwatch_verify(log, tmp_path)
    assert shown.returncode == 1 and "TAMPERED" in shown.stderr, shown
