"""Kernel lock ids, parsed here (built in sources/filelocks.py, below the file
source too, which names a lock file's held kernel lock by it):

    kernel:<major:minor>:<inode>:<TYPE>:<start>-<end|EOF>:<pid>

An id names one lock for as long as it is the same lock: across polls, in the
JSON contract, in recordings and as a TARGET of `break`/`steal`. Its prefix is
the kernel source's `id_prefix` (the registry's vocabulary of prefixes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.slots import lean_dataclass

if TYPE_CHECKING:
    from lockwatch.sources.filelocks import kernel_id, kernel_lock_id

# Ids are built below both sources (sources/filelocks.py: a lock file's row names
# its held kernel lock by it), parsed here. Every run loads this module (the
# kernel's declaration), not filelocks' dozen classes: a run that reads no lock
# file (`ls --pg`) never needs them. KERNEL is filelocks.KERNEL_ID (a test holds
# them equal); kernel_id and kernel_lock_id are filelocks', loaded when asked.
KERNEL = "kernel"
__all__ = ["KERNEL", "KernelId", "kernel_id", "kernel_lock_id", "parse_kernel"]


def __getattr__(name: str) -> Any:
    if name in ("kernel_id", "kernel_lock_id"):
        from lockwatch.sources import filelocks

        return getattr(filelocks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
