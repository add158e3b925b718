"""What the operating system says about a holder's process, as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from lockwatch.model.slots import fast_init


@fast_init
@dataclass(frozen=True, slots=True)
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


class ProcessLookup(Protocol):
    def facts(self, pid: int) -> ProcessFacts:
        """Facts about `pid` on this host; a missing process is `alive=False`."""
        ...


class StaticProcesses:
    """A fixed process table, for tests and replays."""

    def __init__(self, *facts: ProcessFacts) -> None:
        self._by_pid = {f.pid: f for f in facts}

    def facts(self, pid: int) -> ProcessFacts:
        return self._by_pid.get(pid) or ProcessFacts(pid=pid, alive=False)
