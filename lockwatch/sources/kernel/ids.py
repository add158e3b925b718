"""Kernel lock ids, built and parsed here and nowhere else:

    kernel:<major:minor>:<inode>:<TYPE>:<start>-<end|EOF>:<pid>

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the kernel source's `id_prefix` (the registry's vocabulary of prefixes).
"""

from __future__ import annotations

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.filelocks import KernelLock

KERNEL = "kernel"

_KERNEL = lazy_compile(
    r"kernel:(?P<major>\d+):(?P<minor>\d+):(?P<inode>\d+):(?P<type>[A-Z]+)"
    r":(?P<start>\d+)-(?P<end>\d+|EOF):(?P<pid>-?\d+)"
)


@lean_dataclass(frozen=True, slots=True)
class KernelId:
    device: str  # "major:minor", decimal
    inode: int
    type: str  # FLOCK, POSIX, OFDLCK
    start: int
    end: int | None  # None: to the end of the file
    pid: int


def kernel_id(device: str, inode: int, type: str, start: int, end: int | None, pid: int) -> str:
    return f"{KERNEL}:{device}:{inode}:{type}:{start}-{'EOF' if end is None else end}:{pid}"


def parse_kernel(lock_id: str) -> KernelId | None:
    match = _KERNEL.fullmatch(lock_id)
    if match is None:
        return None
    end = match["end"]
    return KernelId(
        f"{int(match['major'])}:{int(match['minor'])}",
        int(match["inode"]),
        match["type"],
        int(match["start"]),
        None if end == "EOF" else int(end),
        int(match["pid"]),
    )


def kernel_lock_id(kernel: KernelLock) -> str:
    """The id of a kernel lock's record: an OFD lock's procfs pid is -1, so its
    owner, once found, names it instead."""
    pid = kernel.pid if kernel.pid > 0 else (kernel.holder_pid or -1)
    return kernel_id(
        kernel.file.device, kernel.file.inode, kernel.type, kernel.start, kernel.end, pid
    )
