"""What the operating system says about a holder's process, as plain data."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from lockwatch.model.slots import fast_init, lean_dataclass


@fast_init
@lean_dataclass(frozen=True, slots=True)
class ProcessFacts:
    pid: int
    alive: bool
    started_at: datetime | None = None
    cmdline: tuple[str, ...] = ()
    user: str | None = None
    # Its parent, grandparent, ... up to init (bounded): "a loop started by
    # another loop" is told by ancestry.
    ancestors: tuple[int, ...] = ()
    # Its start time in clock ticks since boot (/proc/<pid>/stat field 22), as
    # some tools record it to tell a recycled pid (clawdbot's gateway lock).
    start_ticks: int | None = None
    # This host's boot time (seconds since the epoch) when the facts were taken.
    boot_time: float | None = None


@fast_init
@lean_dataclass(frozen=True, slots=True)
class HostPid:
    """Pid N of pid namespace I (a container's), as this host sees it.

    `namespace_here`: whether any process here is in that namespace (False: every
    process of it has exited); None: this host's process table cannot tell (not
    root, no /proc). `pid`: the holder's pid on this host, where a process of
    the namespace has pid N in it."""

    namespace_here: bool | None
    pid: int | None = None


CANNOT_TELL = HostPid(namespace_here=None)


class ProcessLookup(Protocol):
    def facts(self, pid: int) -> ProcessFacts:
        """Facts about `pid` on this host; a missing process is `alive=False`."""
        ...

    def host_pid(self, pid: int, namespace: int) -> HostPid:
        """Which process here is pid `pid` of the pid namespace whose inode is
        `namespace`, and whether that namespace exists here at all."""
        ...


class StaticProcesses:
    """A fixed process table, for tests and replays."""

    def __init__(
        self, *facts: ProcessFacts, namespaces: dict[int, dict[int, int]] | None = None
    ) -> None:
        self._by_pid = {f.pid: f for f in facts}
        # Pid namespace inode -> {pid in it: pid here}; None: nobody can tell.
        self._namespaces = namespaces

    def facts(self, pid: int) -> ProcessFacts:
        return self._by_pid.get(pid) or ProcessFacts(pid=pid, alive=False)

    def host_pid(self, pid: int, namespace: int) -> HostPid:
        return host_pid_in(self._namespaces, pid, namespace)


def host_pid_in(namespaces: dict[int, dict[int, int]] | None, pid: int, namespace: int) -> HostPid:
    """`HostPid` from a table of pid namespace inode -> {pid in it: pid here}
    (None: this host cannot tell): one reading for the fixed table and psutil's."""
    if namespaces is None:
        return CANNOT_TELL
    pids = namespaces.get(namespace)
    if pids is None:
        return HostPid(namespace_here=False)
    return HostPid(namespace_here=True, pid=pids.get(pid))
