"""The verdict on a /proc/locks entry: the kernel never keeps a lock nobody
holds, so it is held (or waited for); the kernel records no time, so there is
no age to give."""

from __future__ import annotations

from lockwatch.model.holder import describe_process
from lockwatch.model.humanize import counted, named
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.process import ProcessLookup
from lockwatch.model.verdict import State, Verdict
from lockwatch.sources.filelocks import CALLS, KernelLock, uncertain_holder


def evaluate_kernel(lock: Lock, kernel: KernelLock, processes: ProcessLookup) -> Verdict:
    """A /proc/locks entry: held (the kernel never keeps a lock nobody holds) or
    waiting. The kernel records no time, so there is no age to give."""
    pid = kernel.holder_pid
    facts = processes.facts(pid) if pid is not None else None
    who = "an unknown process" if pid is None else describe_process(pid, facts)
    what = f"{CALLS.get(kernel.type, kernel.type)} {kernel.mode}"
    where = lock.path or f"inode {kernel.file.inode} on device {kernel.file.device}"
    alive = None if facts is None else (facts.alive or None)
    process = facts if facts is not None and facts.alive else None
    if kernel.waiting:
        by = ", ".join(f"pid {p}" for p in kernel.blocked_by)
        reason = Reason(
            "waiting", f"{who} waits for {what} on {where}" + (f", blocked by {by}" if by else "")
        )
        return Verdict(State.WAITING, (reason,), alive=alive, process=process)
    reasons = [Reason("kernel_lock", f"held with {what} by {who}{_sharing(kernel, pid)}")]
    uncertain = uncertain_holder(kernel)
    if uncertain is not None:
        reasons.append(Reason(*uncertain))
    if kernel.blocking:
        waiting = counted(len(kernel.blocking), "waiting process", "waiting processes")
        pids = named("pid", [str(p) for p in kernel.blocking])
        reasons.append(Reason("blocking", f"blocks {waiting}: {pids}"))
    return Verdict(State.ACTIVE, tuple(reasons), alive=alive, process=process)


def _sharing(kernel: KernelLock, first: int | None) -> str:
    """The other processes that hold it through the same open file (inherited
    it: a command flock(1) runs, a daemon's children): the lock is theirs too,
    and is freed only when all have let go."""
    others = [pid for pid in kernel.owners if pid != first]
    if not others:
        return ""
    named = {holder.pid: holder.label for holder in kernel.holders}
    shown = [named.get(pid, f"pid {pid}") for pid in others[:5]]
    more = f" and {len(others) - 5} more" if len(others) > 5 else ""
    return f", sharing its open file with {', '.join(shown)}{more}"
