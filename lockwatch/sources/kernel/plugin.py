"""The kernel source: every flock, POSIX (fcntl/lockf) and OFD lock in
/proc/locks, with its holder process, its file and who waits for it.

Lock files get the kernel's word whether or not this source is on (see
sources/files/evidence.py); this source lists the kernel's locks themselves.

Config table it owns:

    [kernel]
    enabled = true         # list kernel locks (as --kernel does)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockwatch.sources.contract import (
    ActionProvider,
    Collected,
    Found,
    Hint,
    ListingRequest,
    Selected,
    SourceError,
    Wanted,
)
from lockwatch.sources.kernel import ids
from lockwatch.sources.kernel.declared import KernelDeclared

if TYPE_CHECKING:
    from lockwatch.clock import Clock
    from lockwatch.sources.feed import Feed


@dataclass(frozen=True)
class KernelSettings:
    enabled: bool = False


class KernelSource(KernelDeclared):
    @property
    def record_types(self) -> tuple[type, ...]:
        # Its facts' types, for recordings: loaded when asked, not at the CLI's start.
        from lockwatch.sources.filelocks import FileKey, KernelEvidence, KernelHolder, KernelLock
        from lockwatch.sources.kernel.facts import KernelFacts

        return (FileKey, KernelLock, KernelEvidence, KernelFacts, KernelHolder)

    @property
    def actions(self) -> ActionProvider:
        # Loaded when an action is planned, not when the CLI starts.
        from lockwatch.sources.kernel.actions import ACTIONS

        return ACTIONS

    def read_config(self, tables: Mapping[str, Any], where: str) -> KernelSettings:
        from lockwatch.config import ConfigError

        table = tables.get("kernel", {})
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: [kernel] must be a table")
        enabled = table.get("enabled", False)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{where}: kernel.enabled must be true or false")
        return KernelSettings(enabled)

    def select(self, wanted: Wanted) -> Selected | None:
        settings: KernelSettings = wanted.settings(self.name) or KernelSettings()
        if not (self.asked(wanted.values) or settings.enabled):
            return None
        # Where the file source looks (the PATHs; without any, the current directory
        # unless a flag asked for other sources) it lists every file a kernel lock
        # is on, that lock in its row: not listed again (one row per file, joined.py).
        files = wanted.paths or (() if wanted.others_asked else (".",))
        return SelectedKernel(wanted.paths, joined=tuple(files))

    def find(self, target: str, wanted: Wanted, host: str) -> Found | str:
        return find_kernel(target, wanted.paths, host)

    def hint(self, wanted: Wanted, running: bool) -> Hint | None:
        """Off, the kernel's locks on files under the PATHs that it would list: one
        read of /proc/locks and the holders' fds (no walk of the trees)."""
        if running:
            return None
        from lockwatch.sources.kernel.narrow import narrowed
        from lockwatch.sources.kernel.records import to_locks
        from lockwatch.sources.procfs import read_table

        roots = wanted.paths or (() if wanted.others_asked else (".",))
        if not roots:
            return None  # no tree looked at: the host's every lock is not the point
        table = read_table()
        if not table.readable:
            return None
        files = {
            lock.path for lock in narrowed(to_locks(table, {}), [os.path.abspath(r) for r in roots])
        }
        if not files:
            return None
        count = f"{len(files)} file{'s' if len(files) != 1 else ''}"
        return Hint(
            could_show=f"kernel locks on {count} under {', '.join(roots)} not shown:"
            " --kernel shows them (and who waits for them)"
        )


@dataclass(frozen=True)
class SelectedKernel:
    roots: tuple[str, ...]
    # Where the file source lists files: the locks a file's row there carries are
    # not listed here (waiters are, and locks on files no row tells).
    joined: tuple[str, ...] = ()

    def collect(self, request: ListingRequest) -> Collected:
        from lockwatch.clock import FrozenClock
        from lockwatch.model.assess import assess
        from lockwatch.model.blocking import from_locks
        from lockwatch.sources.filelocks import KERNEL_GROUP
        from lockwatch.sources.kernel.current import locks_now, status
        from lockwatch.sources.processes import HostProcesses

        table, locks = locks_now(self.roots, joined=self.joined)
        out = Collected(statuses=[status(table, request.now)], places=["in /proc/locks"])
        if not table.readable:
            out.warnings.append(f"kernel: {table.problem}")
            return out
        out.assessed = assess(locks, HostProcesses(), FrozenClock(request.now), request.host)
        out.blocking.append((KERNEL_GROUP, from_locks(locks)))
        return out

    def feeds(self, clock: Clock, host: str) -> Sequence[Feed]:
        from lockwatch.sources.kernel.feed import KernelFeed

        return [KernelFeed(self.roots, host=host, clock=clock, joined=self.joined)]


def find_kernel(target: str, roots: Sequence[str], host: str) -> Found | str:
    """The kernel lock `target` names, as /proc/locks has it now."""
    from lockwatch.clock import SystemClock
    from lockwatch.model.verdict import evaluate
    from lockwatch.sources.kernel.current import locks_now
    from lockwatch.sources.processes import HostProcesses

    if ids.parse_kernel(target) is None:
        raise SourceError(f"{target!r} is not a kernel lock id as `lockwatch ls --json` prints one")
    table, locks = locks_now(roots)
    if not table.readable:
        from lockwatch.sources.contract import LookupFailed

        raise LookupFailed(f"cannot read /proc/locks: {table.problem}")
    for lock in locks:
        if lock.id == target:
            verdict = evaluate(lock, HostProcesses(), SystemClock(), host)
            return lock, verdict, locks
    return (
        f"no kernel lock {target} now: released, or its holder changed since it was listed"
        " (kernel lock ids name the holder's pid)"
    )


SOURCE = KernelSource()
