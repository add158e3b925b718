"""The kernel source's facts: one /proc/locks line (`model/kernel.KernelLock`,
which lock files' kernel evidence shares), as a lock of its own."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockwatch.model.blocking import KERNEL_GROUP
from lockwatch.model.facts import Facts, Party
from lockwatch.model.kernel import KernelLock
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

    def group(self) -> str:
        # One graph per host: every process blocked on a kernel lock here.
        return KERNEL_GROUP

    def holds_as(self) -> int | None:
        return None if self.waiting else self.holder_pid

    def waits(self) -> tuple[int, tuple[int, ...]] | None:
        # A process blocked on a kernel lock waits on the processes holding it.
        if not self.waiting or self.holder_pid is None:
            return None
        return self.holder_pid, tuple(pid for pid in self.blocked_by if pid > 0)

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
