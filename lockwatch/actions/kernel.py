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

from lockwatch.actions.files import ActionFailed, ActionRefused
from lockwatch.model.kernel import KernelLock, kernel_lock_id
from lockwatch.model.lock import Lock

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

    kernel = lock.kernel
    # The plan refused waiters and holders nobody could name (plan._plan_kernel).
    assert kernel is not None and not kernel.waiting and kernel.holder_pid is not None
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
