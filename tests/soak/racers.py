"""The racing processes of test_races.py: lockwatch's own actions (the Executor the
CLI and the dashboard both run) and the writers they race against, each in a
process of its own, released together at a barrier for every round.

A racer is started once (multiprocessing, spawn) and then takes one round after
another from its pipe: `(what, path, sha256)`, or None to stop. It answers what
it did. Time comes from a frozen clock (tests.conftest.NOW): the verdicts that
depend on time (a heartbeat two hours old) are the same in every round.
"""

from __future__ import annotations

import contextlib
import os
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from lockwatch.actions.audit import AuditLog, Operator
from lockwatch.actions.plan import Kind, plan
from lockwatch.actions.run import Executor
from lockwatch.clock import FrozenClock
from lockwatch.model.handover import NewHolder
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import evaluate
from lockwatch.sources.files.scanner import load
from lockwatch.sources.processes import HostProcesses
from tests.conftest import LOCAL_HOST, NOW

OPERATOR = Operator(name="soak", os_user="root", sudo_user=None)


def actor(conn: Connection, barrier: Barrier, log: str, key: str) -> None:
    """lockwatch: lists the lock (load + judge + plan, as `break` and the dashboard
    do), meets the other racer at the barrier, then acts with compare-and-swap on
    the bytes it listed."""
    clock = FrozenClock(NOW)
    executor = Executor(
        AuditLog(Path(log), clock=clock, host=LOCAL_HOST, operator=OPERATOR, key_path=Path(key))
    )
    while (job := conn.recv()) is not None:
        what, path, expected = job
        listed = load(path)
        assert isinstance(listed, Lock), listed
        verdict = evaluate(listed, HostProcesses(), clock, LOCAL_HOST)
        holder = NewHolder(
            operator="soak",
            pid=os.getpid(),
            own_pid=os.getpid(),
            host=LOCAL_HOST,
            at=NOW,
            token=os.urandom(8).hex(),
            reason="soak race",
        )
        the_plan = plan(Kind(what), listed, verdict, new_holder=holder)
        barrier.wait(timeout=30)
        began = time.perf_counter()
        outcome = executor.run(the_plan, "soak race", expect_sha256=expected)
        conn.send(
            {
                "seconds": time.perf_counter() - began,
                "ok": outcome.ok,
                "event": outcome.event,
                "code": outcome.code,
                # Whole: a failure's cause is in its words (an OSError's, which path).
                "message": outcome.message,
                "tombstone": outcome.tombstone,
                "state": verdict.state.value,
                "audited": outcome.audited,
            }
        )


def _atomic(path: str, data: bytes) -> None:
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "wb") as out:
        out.write(data)
    os.replace(temp, path)


def writer(conn: Connection, barrier: Barrier) -> None:
    """The lock's own side, `delay` seconds after the barrier (so that each round
    lands somewhere else in lockwatch's action): `(how, path, [contents...], delay)`.

    - atomic: each content written to a temp file renamed over the lock (a
      re-acquire, or heartbeats);
    - recreate: the lock let go of and taken anew (unlink, then a new file linked
      into place, failing if it exists);
    - inplace: truncated and written through the same name (pid files).
    Answers the last content it put in place, or None if it could not."""
    while (job := conn.recv()) is not None:
        how, path, contents, delay = job
        barrier.wait(timeout=30)
        time.sleep(delay)
        last: bytes | None = None
        for data in contents:
            if how == "atomic":
                _atomic(path, data)
            elif how == "recreate":
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                temp = f"{path}.{os.getpid()}.tmp"
                with open(temp, "wb") as out:
                    out.write(data)
                try:
                    os.link(temp, path)
                except FileExistsError:
                    os.unlink(temp)
                    continue
                os.unlink(temp)
            else:
                try:
                    fd = os.open(path, os.O_WRONLY)  # in place: the same file
                except FileNotFoundError:  # broken meanwhile: the holder writes it anew
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, data)
                finally:
                    os.close(fd)
            last = data
        conn.send(last)


def swapper(conn: Connection, barrier: Barrier) -> None:
    """Swaps a lock's directory for a symlink to somewhere else and back, as fast
    as it can, for `seconds` after the barrier: `(directory, elsewhere, seconds)`.
    Answers how many swaps it made; the directory is back in place at the end."""
    while (job := conn.recv()) is not None:
        directory, elsewhere, seconds = job
        aside = directory + ".real"
        swaps = 0
        barrier.wait(timeout=30)
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            os.rename(directory, aside)
            os.symlink(elsewhere, directory)
            os.unlink(directory)
            os.rename(aside, directory)
            swaps += 1
        conn.send(swaps)


def run_job(target: Any, conn: Connection, barrier: Barrier, *args: Any) -> None:
    """The process body: the racer, and on failure its error down the pipe."""
    try:
        target(conn, barrier, *args)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            conn.send({"crashed": f"{type(exc).__name__}: {exc}"})
        raise
