"""The kernel source's facts: one /proc/locks line (`model/kernel.KernelLock`,
which lock files' kernel evidence shares), as a lock of its own."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING

from lockwatch.model.facts import Facts
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
