"""Acting on a kernel lock: nobody can release another process's flock or
fcntl lock from outside, so the only action is to signal its holder (SIGTERM;
SIGKILL only when asked). The kernel frees the lock when the process exits.

Compare-and-swap: right before signalling, /proc/locks is read again and the
same process must still hold the same lock (same file, type, range, owner),
and be the same process (same start time: a pid can be reused). The signal
goes through a pidfd, so it cannot reach a process that took the pid since.
"""

from __future__ import annotations

import os
import signal
from datetime import datetime
from typing import Any

from lockwatch.model.action import (
    ActionFailed,
    ActionRefused,
    Asked,
    Doing,
    Done,
    Kind,
    Plan,
    refused,
)
from lockwatch.model.kernel import KernelLock
from lockwatch.model.lock import Lock
from lockwatch.model.verdict import Verdict
from lockwatch.sources.contract import ActionsBase
from lockwatch.sources.kernel.facts import KernelFacts
from lockwatch.sources.kernel.ids import kernel_lock_id

SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


def _started_at(pid: int) -> datetime | None:
    from lockwatch.sources.processes import PsutilProcesses

    facts = PsutilProcesses().facts(pid)
    return facts.started_at if facts.alive else None


def signal_holder(lock: Lock, signame: str, seen_started_at: datetime | None) -> int:
    """Signal the process holding `lock` (a kernel lock record) if it still
    holds it; returns the pid signalled. Raises ActionRefused when anything
    moved since the operator looked."""
    from lockwatch.sources.kernel.procfs import read_table

    kernel = lock.facts
    # The plan refused waiters and holders nobody could name (KernelActions.plan).
    assert isinstance(kernel, KernelFacts) and not kernel.waiting and kernel.holder_pid is not None
    pid = kernel.holder_pid
    if pid == os.getpid():
        raise ActionRefused("own_lock", "this lock is held by lockwatch itself")
    table = read_table()
    if not table.readable:
        raise ActionFailed("unreadable", f"cannot read /proc/locks: {table.problem}")
    now = _still_held(table.locks, lock.id, kernel)
    if now is None or pid not in (now.owners or (now.pid,)):
        raise ActionRefused(
            "changed",
            f"pid {pid} no longer holds {lock.name}: released or taken over; nothing done",
        )
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        raise ActionRefused("gone", f"pid {pid} has exited; nothing done") from None
    try:
        started = _started_at(pid)
        if seen_started_at is not None and started != seen_started_at:
            raise ActionRefused(
                "changed",
                f"pid {pid} is another process now (it started at {started}); nothing done",
            )
        try:
            signal.pidfd_send_signal(pidfd, SIGNALS[signame])
        except ProcessLookupError:
            raise ActionRefused("gone", f"pid {pid} has exited; nothing done") from None
        except PermissionError:
            raise ActionFailed(
                "permission_denied",
                f"not allowed to signal pid {pid} (another user's: run as root)",
            ) from None
    finally:
        os.close(pidfd)
    return pid


def _still_held(locks: tuple[KernelLock, ...], lock_id: str, seen: KernelLock) -> KernelLock | None:
    for now in locks:
        if not now.waiting and now.file == seen.file and kernel_lock_id(now) == lock_id:
            return now
    return None


class KernelActions(ActionsBase):
    """Only a break, and it signals the holder: nobody releases another process's
    kernel lock from outside. The kernel frees it when the holder exits."""

    name = "kernel"
    kinds = frozenset({Kind.BREAK})

    def plan(self, kind: Kind, lock: Lock, verdict: Verdict, asked: Asked) -> Plan:
        kernel = lock.facts
        assert isinstance(kernel, KernelFacts)
        signal = str(asked.given.get("signal") or "TERM")
        if kind is not Kind.BREAK:
            return refused(
                kind,
                lock,
                verdict,
                "unsupported",
                f"a kernel lock can only be broken by signalling its holder, not by {kind.value}",
            )
        if kernel.waiting:
            return refused(
                kind,
                lock,
                verdict,
                "not_held",
                f"this process waits for {lock.name}; it holds nothing",
            )
        pid = kernel.holder_pid
        if pid is None:
            return refused(
                kind, lock, verdict, "no_holder", "lockwatch could not tell which process holds it"
            )
        process = verdict.process
        command = (
            f" ({' '.join(process.cmdline)})" if process is not None and process.cmdline else ""
        )
        waiters = len(kernel.blocking)
        after = f"; then the kernel frees {lock.name}" + (
            f" and {waiters} waiting process{'es' if waiters != 1 else ''} may take it"
            if waiters
            else ""
        )
        how = "kills it at once (no clean-up)" if signal == "KILL" else "asks it to exit"
        effect = f"send SIG{signal} to pid {pid}{command}, which {how}{after}"
        # The holder is alive by definition: this always needs the typed name.
        return Plan(kind, lock, verdict, "holder_signalled", effect, needs_name=True, signal=signal)

    def run(self, plan: Plan, doing: Doing) -> Done:
        lock = plan.lock
        signame = plan.signal or "TERM"
        started = plan.verdict.process.started_at if plan.verdict.process else None
        pid = signal_holder(lock, signame, started)
        message = (
            f"sent SIG{signame} to pid {pid}, holder of {lock.name}; the kernel frees the lock"
            " when it exits"
        )
        return Done({"pid": pid, "signal": f"SIG{signame}"}, message)

    def target(self, lock: Lock) -> dict[str, Any]:
        kernel = lock.facts
        if not isinstance(kernel, KernelFacts):
            return {}
        return {"pid": kernel.holder_pid, "kernel": kernel.as_json()}

    def unseen_target(self, lock_id: str) -> dict[str, Any]:
        return {"source": self.name, "id": lock_id}


ACTIONS = KernelActions()
