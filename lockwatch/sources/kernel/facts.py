"""The kernel source's facts: one /proc/locks line (`sources/filelocks.KernelLock`,
which lock files' kernel evidence shares), as a lock of its own."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.facts import Facts, Party, Section
from lockwatch.model.humanize import duration
from lockwatch.sources.filelocks import (
    KERNEL_GROUP,
    KernelHolder,
    KernelLock,
    holders_json,
    holders_label,
    uncertainty_json,
)
from lockwatch.sources.kernel.rules import evaluate_kernel

if TYPE_CHECKING:
    from lockwatch.model.lock import Lock
    from lockwatch.model.process import ProcessLookup
    from lockwatch.model.verdict import Verdict


@dataclass(frozen=True, slots=True)
class KernelFacts(KernelLock, Facts):
    """A /proc/locks line listed as a lock of the kernel source."""

    @staticmethod
    def of(line: KernelLock) -> KernelFacts:
        """`line` as the kernel source's facts (recordings before facts kept the line)."""
        if isinstance(line, KernelFacts):
            return line
        return KernelFacts(*(getattr(line, f.name) for f in fields(KernelLock)))

    def judge(
        self, lock: Lock, processes: ProcessLookup, now: datetime, local_host: str
    ) -> Verdict:
        return evaluate_kernel(lock, self, processes)

    def extend_record(self, record: dict[str, Any]) -> None:
        record["kernel"] = self.as_json()
        record["blocked_by"] = list(self.blocked_by)
        record["blocking"] = list(self.blocking)
        # Every process sharing the lock's open file (lslocks' HOLDERS), in order;
        # absent where nobody described them (a recording from before they were).
        if self.holders:
            record["holders"] = holders_json(self)
        record.update(uncertainty_json(self))

    # --- who holds it ---------------------------------------------------------------

    @property
    def pids(self) -> tuple[int, ...]:
        """Its holders' pids (a waiter: its own), best first: every process whose
        open file holds it, else the pid procfs gives."""
        if self.owners:
            return self.owners
        return (self.pid,) if self.pid > 0 else ()

    def described(self, pid: int) -> KernelHolder | None:
        return next((holder for holder in self.holders if holder.pid == pid), None)

    def holder_text(self, lock: Lock) -> str | None:
        """`sleep (pid 7642) + 1 more`: the first holder by its command, and how
        many more share the lock (the detail pane lists them)."""
        return holders_label(self)

    def sections(self, lock: Lock, now: datetime) -> tuple[Section, ...]:
        if self.waiting:
            return ()
        rows = []
        for pid in self.pids:
            holder = self.described(pid)
            if holder is None:
                rows.append((f"pid {pid}", "exited, or not readable here"))
                continue
            command = " ".join(holder.cmdline) or holder.name
            started = ""
            if holder.started_at is not None:
                since = duration((now - holder.started_at).total_seconds())
                started = f", started {holder.started_at:%Y-%m-%d %H:%M:%S} UTC ({since} ago)"
            rows.append((holder.label, f"{command}; user {holder.user or '?'}{started}"))
        count = len(rows)
        title = (
            f"Holders: {count} processes share its open file; it is freed when all have exited"
            if count > 1
            else "Holder process"
        )
        return (Section(title, tuple(rows)),)

    def matches_text(self, needle: str) -> bool:
        return any(
            needle in holder.command.lower() or needle in str(holder.pid) for holder in self.holders
        )

    def matches_pid(self, pid: int) -> bool:
        return pid in self.owners

    def group(self) -> str:
        # One graph per host: every process blocked on a kernel lock here.
        return KERNEL_GROUP

    def holds_as(self) -> int | None:
        return None if self.waiting else self.holder_pid

    def waits(self) -> tuple[int, tuple[int, ...]] | None:
        # A process blocked on a kernel lock waits on the lock's holder: the node
        # that lock has in the graph (`holds_as`: its first holder), not each
        # process sharing its open file, which would make each a root of its own.
        if not self.waiting or self.holder_pid is None:
            return None
        return self.holder_pid, tuple(pid for pid in self.blocked_by[:1] if pid > 0)

    # --- the views ----------------------------------------------------------------

    def where(self, lock: Lock) -> str | None:
        # A lock on a file nobody could name: its inode.
        if lock.path is not None:
            return None
        return f"inode {self.file.inode} on {self.file.device}"

    def party(self, lock: Lock) -> Party | None:
        if self.holder_pid is None:
            return None
        return Party(self.holder_pid, not self.waiting, f"{self.mode} {self.format} on {lock.name}")
