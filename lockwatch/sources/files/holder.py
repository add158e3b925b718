"""Who holds a lock file, as far as this host can tell: its pid checked (alive,
or recycled by another process since), a pid written in a container followed
through its pid namespace, a pid its file records only ambiguously checked
reading by reading. Part of a lock file's verdict (`rules.py` chains it), kept
apart because it is the one rule that asks the process table."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.holder import NAMESPACE_GONE, describe_process
from lockwatch.model.humanize import duration
from lockwatch.model.lock import Lock, Reason
from lockwatch.model.process import HostPid, ProcessFacts, ProcessLookup
from lockwatch.sources.files.policy import StalenessPolicy

if TYPE_CHECKING:
    pass

# A process may start a moment after the lock it writes is timestamped
# (coarse clocks, rounding to seconds): only a later start beyond this is reuse.
PID_REUSE_TOLERANCE_SECONDS = 1.0
# Emacs (lock_if_free) takes boot times within a second of each other as the same boot.
BOOT_TIME_TOLERANCE_SECONDS = 1.0


def holder_checks(
    lock: Lock,
    policy: StalenessPolicy,
    foreign: bool,
    processes: ProcessLookup,
    local_host: str,
    info: list[Reason],
    stale: list[Reason],
) -> tuple[Reason | None, ProcessFacts | None, bool | None]:
    """What can be told of the holder here: (why nobody can tell whether it is
    held, the holder's process facts, whether it runs). Another host's lock is
    only noted; a pid from another pid namespace (or init's) cannot be checked,
    unless the file names that namespace and this host finds it (then its pid
    here is checked; a namespace gone, or without that pid, is a dead holder);
    a dead or recycled pid makes the lock stale where its policy says so."""
    holder = lock.holder
    if foreign:
        info.append(
            Reason(
                "foreign_host",
                f"written on host {holder.host}, not this one ({local_host});"
                " its pid cannot be checked here",
            )
        )
        return None, None, None
    pid = holder.pid
    if pid is None:
        if holder.pid_readings and policy.pid_liveness:
            return _readings(lock, holder.pid_readings, processes, info, stale)
        return None, None, None
    mapped = False
    if holder.pid_namespace is not None and policy.pid_liveness:
        # A container's pid, its namespace named: where this host can find that
        # namespace, the holder is found in it (or provably gone).
        where = processes.host_pid(pid, holder.pid_namespace)
        if where.namespace_here is False or (where.namespace_here and where.pid is None):
            stale.append(_namespace_dead(pid, holder.pid_namespace, where))
            return None, None, False
        if where.pid is not None:
            pid, mapped = where.pid, True  # the holder's pid here: checked like any other
            info.insert(
                0,
                Reason(
                    "pid_namespace",
                    f"pid {holder.pid} of pid namespace {holder.pid_namespace:x} (where the"
                    f" lock was taken) is pid {pid} on this host",
                ),
            )
    if not mapped and (holder.other_pid_namespace or pid == 1):
        # pid 1 here is init: no lock is held by it; such a pid was written
        # inside a container, as is any the file marks so.
        why = (
            "the lock file says so"
            if holder.other_pid_namespace
            else "pid 1 on this host is init, not a lock holder"
        )
        said = f"pid {pid} was recorded in another pid namespace ({why}): it cannot be checked here"
        if policy.pid_liveness or policy.waiter:
            # Its format's rule rests on that pid: nobody here can tell.
            return Reason("other_pid_namespace", said), None, None
        # The pid is only information to its format (tower-fleet's heartbeat
        # decides alone): it withholds nothing, and says why it was not checked.
        info.append(Reason("other_pid_namespace", f"{said}; its format's rule does not rest on it"))
        return None, None, None
    facts = processes.facts(pid)
    alive = facts.alive
    reuse = (
        _ticks_differ(facts, holder.start_ticks)
        or _boot_differs(facts, holder.boot_time)
        or (None if policy.time_by_writer else _reused(facts, lock.acquired_at))
    )
    if reuse is not None:
        alive = False
    if policy.pid_liveness:
        if reuse is not None:
            stale.append(reuse)
        elif not facts.alive:
            stale.append(Reason("holder_dead", f"holder pid {pid} is not running on this host"))
    return None, facts, alive


def _readings(
    lock: Lock,
    readings: tuple[int, ...],
    processes: ProcessLookup,
    info: list[Reason],
    stale: list[Reason],
) -> tuple[Reason | None, ProcessFacts | None, bool | None]:
    """A pid the file records only ambiguously: each reading is checked. The holder
    can only be a process that runs a program (not init, not a kernel thread)
    and was there when the lock was taken; none such: it is gone; one: that is
    it, said so; several: nobody can tell which."""
    shown = ", ".join(str(pid) for pid in readings)
    plausible = []
    for pid in readings:
        if pid == 1:
            continue  # init holds no lock
        facts = processes.facts(pid)
        if facts.alive and facts.cmdline and _reused(facts, lock.acquired_at) is None:
            plausible.append(facts)
    if not plausible:
        stale.append(
            Reason(
                "holder_dead",
                f"none of the pids its name can be read as ({shown}) is a process here that"
                " was running when the lock was taken",
            )
        )
        return None, None, False
    if len(plausible) == 1:
        (facts,) = plausible
        info.insert(
            0,
            Reason(
                "pid_reading",
                f"of the pids its name can be read as ({shown}), only"
                f" {describe_process(facts.pid, facts)} runs: taken as the holder",
            ),
        )
        return None, facts, True
    running = ", ".join(describe_process(facts.pid, facts) for facts in plausible)
    return (
        Reason(
            "ambiguous_pid",
            f"its name can be read as pids {shown}, and more than one runs ({running}):"
            " which of them holds it cannot be told",
        ),
        None,
        None,
    )


# What a dead container holder's reason says when its whole namespace is gone
# (the board, judging again from what the feed saw, tells the two cases by it).


def _namespace_dead(pid: int, namespace: int, where: HostPid) -> Reason:
    why = "no process of it has that pid here" if where.namespace_here else NAMESPACE_GONE
    return Reason("holder_dead", f"holder pid {pid} of pid namespace {namespace:x}: {why}")


def _reused(facts: ProcessFacts, acquired_at: datetime | None) -> Reason | None:
    if not facts.alive or facts.started_at is None or acquired_at is None:
        return None
    late = (facts.started_at - acquired_at).total_seconds()
    if late <= PID_REUSE_TOLERANCE_SECONDS:
        return None
    return Reason(
        "pid_reused",
        f"pid {facts.pid} now belongs to a process started {duration(late)} after the lock"
        " was acquired; the holder is gone",
    )


def _ticks_differ(facts: ProcessFacts, recorded: int | None) -> Reason | None:
    if not facts.alive or recorded is None or facts.start_ticks is None:
        return None
    if facts.start_ticks == recorded:
        return None
    return Reason(
        "pid_reused",
        f"pid {facts.pid} now belongs to a process with another start time"
        f" ({facts.start_ticks} ticks after boot, the lock records {recorded}); the holder is gone",
    )


def _boot_differs(facts: ProcessFacts, recorded: int | None) -> Reason | None:
    """Emacs's rule: a lock made in another boot of this host names a pid of a
    process that is gone, whatever now runs under that pid (more than a second
    apart: boot times read at different moments drift by rounding)."""
    if not facts.alive or recorded is None or facts.boot_time is None:
        return None
    if abs(facts.boot_time - recorded) <= BOOT_TIME_TOLERANCE_SECONDS:
        return None
    return Reason(
        "pid_reused",
        f"the lock was made in an earlier boot of this host; pid {facts.pid} now belongs"
        " to another process and the holder is gone",
    )
