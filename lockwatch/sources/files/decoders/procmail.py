"""procmail's `lockfile(1)`: a read-only file holding `0` (no newline), made
with the name given (`lockfile important.lock`, `-ml` for the mailbox).

Its rule: held until removed (`rm -f`); nothing in the file expires it. Only a
caller that passes `-l N` forces a lock N seconds after its last change, and
that N is the caller's, not the file's. Here: active, never stale by age, and
the note says so (`no_expiry`).
"""

from __future__ import annotations

from lockwatch.model.lock import Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, no_pid_lock
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "procmail"
POLICY = StalenessPolicy()
CONTENT = b"0"
_NO_EXPIRY = Reason(
    "no_expiry",
    "procmail's lockfile: no pid and no timeout; held until it is removed. Only a caller"
    " that passes `lockfile -l N` forces it N s after its last change, which the file"
    " does not record",
)

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): any name; `0` exactly.
CLAIMS = Claims(leading=CONTENT[:1])


wants = wants_none  # any name: lockfile makes the file exactly as named


def read(file: LockFile) -> Lock | None:
    return no_pid_lock(file, content=CONTENT, format=FORMAT, policy=POLICY, note=_NO_EXPIRY)


handover = no_handover  # it names no holder to hand over: break it


refresh = no_refresh
