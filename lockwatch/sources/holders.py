"""The processes holding kernel locks, described from procfs as lslocks does:
the kernel's name for each (`comm`), its command line, its user and when it
started (in clock ticks since boot, exact, and as a time).

Read from the same procfs root as the locks (a test's fake tree included), a
few small files per holder, each holder once per table. Below the kernel and
file sources, with procfs.py.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from lockwatch.sources.filelocks import KernelHolder

T = TypeVar("T")

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _first_field(path: str, label: bytes, convert: Callable[[bytes], T]) -> T | None:
    """The value after `label` on the first line of the procfs file `path` that
    starts with it (`Uid:` in a status, `btime ` in /proc/stat); None when the
    file cannot be read, has no such line, or its value is not one."""
    try:
        text = _read(path)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(label):
            try:
                return convert(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


class Describer:
    """`describe(pid)`: the holder `pid` is, or None when it has exited (or is a
    zombie, whose files are closed); each pid is read once."""

    def __init__(self, proc: str = "/proc") -> None:
        self.proc = proc
        self._seen: dict[int, KernelHolder | None] = {}
        self._users: dict[int, str | None] = {}
        self._boot: float | None = None
        self._boot_read = False

    def __call__(self, pid: int) -> KernelHolder | None:
        if pid not in self._seen:
            self._seen[pid] = self._describe(pid)
        return self._seen[pid]

    def _describe(self, pid: int) -> KernelHolder | None:
        base = f"{self.proc}/{pid}"
        try:
            stat = _read(f"{base}/stat")
        except OSError:
            return None
        # `pid (comm) state ... starttime(22) ...`: comm may hold spaces and
        # parentheses, so the fields after it count from the last `)`.
        name = stat[stat.find(b"(") + 1 : stat.rfind(b")")].decode("utf-8", "replace")
        fields = stat[stat.rfind(b")") + 1 :].split()
        if not fields or fields[0] in (b"Z", b"X"):
            return None
        try:
            ticks: int | None = int(fields[19])
        except (IndexError, ValueError):
            ticks = None
        return KernelHolder(
            pid=pid,
            name=name,
            cmdline=self._cmdline(base),
            user=self._user(base),
            started_at=self._started(ticks),
            start_ticks=ticks,
        )

    def _cmdline(self, base: str) -> tuple[str, ...]:
        try:
            raw = _read(f"{base}/cmdline")
        except OSError:
            return ()
        raw = raw.rstrip(b"\0")
        if not raw:
            return ()
        return tuple(part.decode("utf-8", "replace") for part in raw.split(b"\0"))

    def _user(self, base: str) -> str | None:
        uid = _first_field(f"{base}/status", b"Uid:", int)
        if uid is None:
            return None
        if uid not in self._users:
            try:
                self._users[uid] = pwd.getpwuid(uid).pw_name
            except KeyError:
                self._users[uid] = str(uid)
        return self._users[uid]

    def _started(self, ticks: int | None) -> datetime | None:
        if ticks is None:
            return None
        if not self._boot_read:
            self._boot_read = True
            self._boot = self._boot_time()
        if self._boot is None:
            return None
        return datetime.fromtimestamp(self._boot + ticks / _TICKS, tz=UTC)

    def _boot_time(self) -> float | None:
        return _first_field(f"{self.proc}/stat", b"btime ", float)


def describe(pid: int, proc: str = "/proc") -> KernelHolder | None:
    """One process, now (a break's compare-and-swap)."""
    return Describer(proc)(pid)
