"""What the kernel says about file locks (`/proc/locks`), as plain data: what
the kernel source lists as its locks and the file source attaches to lock files
as the kernel's word on them, so it lives below both.

Pure: the kernel source (lockwatch/sources/kernel) reads procfs and fills these
in; both sources' rules and facts read them. Device numbers are "major:minor" in decimal,
as major(st_dev) and minor(st_dev) give them (procfs writes them in hex).
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from lockwatch.model.jsonfields import json_fields
from lockwatch.model.slots import fast_init, lean_dataclass
from lockwatch.model.timestamps import format_timestamp
from lockwatch.sources.contract import Choice, Choices

if TYPE_CHECKING:
    from lockwatch.model.action import Asked, Kind, Plan
    from lockwatch.model.verdict import Verdict

KernelType = Literal["FLOCK", "POSIX", "OFDLCK"]
KernelMode = Literal["READ", "WRITE"]

# The group kernel locks' wait-for tree is listed under: one per host, beside
# each server's (a lock file a kernel lock is held on is that lock's node in it).
KERNEL_GROUP = "kernel"

# The prefix of a kernel lock's id (the kernel source's `id_prefix`).
KERNEL_ID = "kernel"

# The `format` a kernel lock record has, by the kernel's type of lock.
FORMATS: dict[str, str] = {"FLOCK": "flock", "POSIX": "posix", "OFDLCK": "ofd"}
# How a lock of each type is taken, for messages ("held with flock by pid 42").
CALLS: dict[str, str] = {"FLOCK": "flock", "POSIX": "fcntl/lockf", "OFDLCK": "an OFD lock"}


@fast_init
@lean_dataclass(frozen=True, slots=True)
class FileKey:
    """A file's identity as the kernel names it: device and inode."""

    device: str  # "major:minor", decimal
    inode: int

    @staticmethod
    def of(st_dev: int, st_ino: int) -> FileKey:
        return FileKey(_device_name(st_dev), st_ino)


@lru_cache(maxsize=64)
def _device_name(st_dev: int) -> str:
    """A device's "major:minor", one string per device for every file on it: a
    scan's chunk pickles it once, not once per lock file (5 MB at 100,000)."""
    # glibc's gnu_dev_major and gnu_dev_minor, as arithmetic.
    major = ((st_dev >> 8) & 0xFFF) | ((st_dev >> 32) & ~0xFFF)
    minor = (st_dev & 0xFF) | ((st_dev >> 12) & ~0xFF)
    return f"{major}:{minor}"


@fast_init
@lean_dataclass(frozen=True, slots=True)
class KernelHolder:
    """A process whose open file holds a kernel lock, as it was when seen: what
    the table and the detail pane name it by, and what a break compares before
    signalling it (its start, so that a recycled pid is never signalled)."""

    pid: int
    name: str = ""  # the kernel's name for it (/proc/<pid>/comm), as lslocks' COMMAND
    cmdline: tuple[str, ...] = ()
    user: str | None = None
    started_at: datetime | None = None
    # Its start in clock ticks since boot (/proc/<pid>/stat field 22): exact,
    # where started_at is rounded through the boot time.
    start_ticks: int | None = None

    @property
    def command(self) -> str:
        """Its short name: the kernel's (as lslocks and ps -o comm say it), else
        its program's base name."""
        if self.name:
            return self.name
        if self.cmdline and self.cmdline[0]:
            return self.cmdline[0].rpartition("/")[2] or self.cmdline[0]
        return "?"

    @property
    def label(self) -> str:
        """`sleep (pid 7642)`."""
        return f"{self.command} (pid {self.pid})"


def holders_json(lock: KernelLock) -> list[dict[str, Any]]:
    """Every process holding `lock` (lslocks' HOLDERS), in order, as the contract
    spells each: `{pid, command, cmdline, user, started_at}`, a pid nobody
    described (gone, or not readable here) with nulls."""
    pids = lock.owners or ((lock.holder_pid,) if lock.holder_pid is not None else ())
    described = {holder.pid: holder for holder in lock.holders}
    out: list[dict[str, Any]] = []
    for pid in pids:
        holder = described.get(pid)
        if holder is None:
            out.append(
                {"pid": pid, "command": None, "cmdline": [], "user": None, "started_at": None}
            )
            continue
        started = holder.started_at
        out.append(
            {
                "pid": pid,
                "command": holder.command,
                "cmdline": list(holder.cmdline),
                "user": holder.user,
                "started_at": None if started is None else format_timestamp(started),
            }
        )
    return out


def uncertain_holder(lock: KernelLock) -> tuple[str, str] | None:
    """The reason (code, message) a kernel lock's holder cannot be known, if so."""
    if not lock.owner_unseen:
        return None
    return (
        "holder_uncertain",
        f"who holds it cannot be known: /proc/locks names pid {lock.pid}, the process that"
        " took it, but no process has its open file now (passed over a unix socket and"
        " still in flight, SCM_RIGHTS), and that pid may have been reused since",
    )


def uncertainty_json(lock: KernelLock) -> dict[str, Any]:
    """`holder_uncertain` (and then `taken_by_pid`, /proc/locks' pid) for a record."""
    if not lock.owner_unseen:
        return {"holder_uncertain": False}
    return {"holder_uncertain": True, "taken_by_pid": lock.pid}


def holders_label(lock: KernelLock) -> str | None:
    """`sleep (pid 7642) + 1 more`: a kernel lock's first holder by its command
    (as lslocks names it), and how many more share its open file; None where
    nothing is known beyond a pid (the generic pid says it then)."""
    pids = lock.owners or ((lock.holder_pid,) if lock.holder_pid is not None else ())
    if not pids:
        return None
    first = next((holder for holder in lock.holders if holder.pid == pids[0]), None)
    if first is None and len(pids) == 1:
        return None
    text = first.label if first is not None else str(pids[0])
    return text + (f" + {len(pids) - 1} more" if len(pids) > 1 else "")


@lean_dataclass(frozen=True, slots=True)
class KernelLock:
    """One line of /proc/locks, with what lockwatch found out about it."""

    ordinal: int  # the line's number: waiters name the lock they wait for by it
    type: str  # FLOCK, POSIX or OFDLCK
    mode: str  # READ or WRITE
    file: FileKey
    start: int
    end: int | None  # None: to the end of the file (EOF)
    # The pid /proc/locks gives: the owner of a POSIX lock, the process that
    # took a flock (its fd may live on in children), -1 for an OFD lock.
    pid: int
    waiting: bool = False  # a `->` line: blocked until the lock `ordinal` names goes
    # Processes whose open file holds it, found through /proc/<pid>/fdinfo's
    # `lock:` lines (flock, OFD) or the owner itself (POSIX); best first.
    owners: tuple[int, ...] = ()
    path: str | None = None  # where the file is, if lockwatch could tell
    mandatory: bool = False
    # Waiters: the pids of the holders this waits for; holders: the pids waiting.
    blocked_by: tuple[int, ...] = ()
    blocking: tuple[int, ...] = ()
    # The owners as processes (command, user, start), in `owners`' order, as
    # they were when the table was read; an owner gone meanwhile is left out.
    holders: tuple[KernelHolder, ...] = ()
    # Every process's fds were looked through and none holds it, nor has `pid`
    # the file: its open file lives on elsewhere (passed over a unix socket,
    # SCM_RIGHTS, still in flight) and `pid` is only who took it, maybe reused
    # since. Who holds it cannot be known: no process is named.
    owner_unseen: bool = False

    @property
    def format(self) -> str:
        return FORMATS.get(self.type, self.type.lower())

    @property
    def holder_pid(self) -> int | None:
        """The process to name as holder (or waiter): a found owner, else the
        pid procfs gives when it names one."""
        if self.owners:
            return self.owners[0]
        return self.pid if self.pid > 0 and not self.owner_unseen else None

    def range_text(self) -> str:
        end = "EOF" if self.end is None else str(self.end)
        return f"{self.start}-{end}"

    as_json = json_fields(
        "type", "mode", "start", "end", ("device", "file.device"), ("inode", "file.inode")
    )


@fast_init
@lean_dataclass(frozen=True, slots=True)
class KernelEvidence:
    """What the kernel says about one lock file at one moment.

    Attached to a file lock by the file source wherever /proc/locks could be
    read; None (on the lock) means nobody asked, so the verdict is the file's
    own. `open_by` is only looked up when it matters (a file with no holder
    of its own that no kernel lock covers)."""

    holds: tuple[KernelLock, ...] = ()  # granted kernel locks on the file
    waiters: int = 0  # processes blocked waiting for one of them
    open_by: tuple[int, ...] = ()  # live processes that have the file open
    # Some processes' open files could not be read (another user's, without
    # root): `open_by` may be missing somebody.
    open_unknown: bool = False
    # lockwatch saw a kernel lock on this file earlier in this run.
    was_held: bool = False


NO_EVIDENCE = KernelEvidence()


@runtime_checkable
class HoldActions(Protocol):
    """What the file source asks of the kernel source's actions, which it is
    handed by the front end (`Asked.providers`, never by import): a lock file's
    row whose one kernel lock is held is broken as that kernel lock, by
    signalling its holders."""

    def plan_hold(
        self, kind: Kind, hold: KernelLock, path: str, verdict: Verdict, asked: Asked
    ) -> Plan:
        """The kernel's plan for `hold`, on the file at `path` (its own, or the
        lock file's when the kernel could not tell)."""
        ...


def kernel_id(device: str, inode: int, type: str, start: int, end: int | None, pid: int) -> str:
    """A kernel lock's id (sources/kernel/ids.py parses it):
    `kernel:<major:minor>:<inode>:<TYPE>:<start>-<end|EOF>:<pid>`."""
    return f"{KERNEL_ID}:{device}:{inode}:{type}:{start}-{'EOF' if end is None else end}:{pid}"


def kernel_lock_id(kernel: KernelLock) -> str:
    """The id of a kernel lock's record: an OFD lock's procfs pid is -1, so its
    owner, once found, names it instead. A lock file's row names its held
    kernel lock by it."""
    pid = kernel.pid if kernel.pid > 0 else (kernel.holder_pid or -1)
    return kernel_id(
        kernel.file.device, kernel.file.inode, kernel.type, kernel.start, kernel.end, pid
    )


# Seconds SIGTERMed holders have to let go before SIGKILL (`docker stop`'s 10).
DEFAULT_GRACE = 10.0

# How a kernel lock's holders are signalled, in the dashboard's choice (as the
# CLI's --signal/--grace/--no-kill give it: htop's signal choice, cut to the
# three that matter for a lock), the default first: the kernel lock's own break
# and a lock file's whose one kernel lock is held offer it alike.
SIGNAL_CHOICES = Choices(
    "signal",
    (
        Choice(
            f"TERM, then KILL after {DEFAULT_GRACE:g} s",
            (("signal", "TERM"), ("grace", DEFAULT_GRACE), ("kill", True)),
        ),
        Choice("TERM only", (("signal", "TERM"), ("grace", DEFAULT_GRACE), ("kill", False))),
        Choice("KILL now", (("signal", "KILL"),)),
    ),
)
