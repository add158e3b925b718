"""Who holds a lock, in the words and numbers every view shares: its pid as
this host numbers it, a process described, a pid namespace gone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lockwatch.model.lock import Lock
from lockwatch.model.process import ProcessFacts

if TYPE_CHECKING:
    from lockwatch.model.verdict import Verdict

NAMESPACE_GONE = "its pid namespace is gone: every process of it has exited"


def pid_here(lock: Lock, verdict: Verdict) -> int | None:
    """The holder's pid as this host numbers it: a container's pid whose namespace
    the lock names is the pid the verdict found it at here (filelock's `1` in
    `unshare -pf` is the host's pid of that namespace's init); any other, the pid
    the lock records. A namespace not found here leaves the recorded pid (the
    reasons say whose it is)."""
    process = verdict.process
    if lock.holder.pid_namespace is not None and process is not None:
        return process.pid
    return lock.holder.pid


def describe_process(pid: int, facts: ProcessFacts | None) -> str:
    command = " ".join(facts.cmdline) if facts is not None and facts.cmdline else ""
    if len(command) > 80:
        command = command[:79] + "…"
    return f"pid {pid} ({command})" if command else f"pid {pid}"
