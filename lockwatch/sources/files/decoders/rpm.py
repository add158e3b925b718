"""rpm's transaction lock: `<dbpath>/.rpm.lock` (`/var/lib/rpm/.rpm.lock`).

librpm (lib/rpmlock.c) write-locks the whole empty file with fcntl for a
transaction, whoever runs it (rpm, dnf, yum, zypper through librpm); the
file stays. Only the kernel's lock says whether it is held; a second rpm
fails with "can't create transaction lock on …/.rpm.lock (Resource temporarily
unavailable)" (or waits, "waiting for transaction lock"). dnf's own locks are
pid files (`*_lock.pid`): judged by their pid, as dnf does.
"""

from __future__ import annotations

from lockwatch.model.lock import Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
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


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


wants = wants_none  # `.rpm.lock` is a lock's name already


def read(file: LockFile) -> Lock | None:
    if file.kind != "file" or file.name != ".rpm.lock" or file.raw:
        return None
    return _file_lock(
        file, name=f"{file.parents(1)[0] or '/'}/.rpm.lock", content=None, notes=(NOTE,)
    )


handover = no_handover  # held by a kernel lock, not by content


refresh = no_refresh
