"""rpm's transaction lock: `<dbpath>/.rpm.lock` (`/var/lib/rpm/.rpm.lock`).

librpm (lib/rpmlock.c) write-locks the whole empty file with fcntl for a
transaction, whoever runs it (rpm, dnf, yum, zypper through librpm); the
file stays. Only the kernel's lock says whether it is held; a second rpm
fails with "can't create transaction lock on …/.rpm.lock (Resource temporarily
unavailable)" (or waits, "waiting for transaction lock"). dnf's own locks are
pid files (`*_lock.pid`): judged by their pid, as dnf does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lockwatch.model.handover import NewHolder
from lockwatch.model.lock import Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "rpm"
POLICY = StalenessPolicy(kernel_sentinel=True, kernel_only=True, sentinel_mtime_only=True)
MOVABLE = False
WHAT = "rpm's transaction lock (held with fcntl while a transaction runs; the file always stays)"
NOTE = Reason(
    "rpm_lock",
    "rpm's transaction lock: held while rpm (or dnf, yum, zypper through librpm) changes the"
    " rpm database; the file always stays",
)

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): `.rpm.lock`.
CLAIMS = Claims(names=frozenset({".rpm.lock"}))


def wants(path: str, kind: str) -> bool:
    return False  # `.rpm.lock` is a lock's name already


def read(file: LockFile) -> Lock | None:
    if file.kind != "file" or file.name != ".rpm.lock" or file.raw:
        return None
    return file_lock(
        file,
        format=FORMAT,
        name=f"{file.parents(1)[0] or '/'}/.rpm.lock",
        policy=POLICY,
        content=None,
        notes=(NOTE,),
    )


def handover(content: Any, new: NewHolder) -> bytes | None:
    return None  # held by a kernel lock, not by content


def refresh(content: Any, at: datetime) -> bytes | None:
    return None
