"""liblockfile's lock files with no pid: `dotlockfile` (without `-p`),
`lockfile-create` (lockfile-progs, without `--use-pid`) and lockfile_create(3)
write `0\\n`, "no process".

The tools' own rule (lockfile_check, which `lockfile-check` and `dotlockfile`
ask): a lock naming no process is valid while its mtime is under 5 minutes old
(300 s: valid exactly while now < mtime + 300), stale from then on;
`lockfile-touch` renews it every minute while its holder runs. With a pid
(`-p`, `--use-pid`) the file is a plain pid file: the generic format, judged
by the pid.
"""

from __future__ import annotations

from lockwatch.model.lock import Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, no_pid_lock
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "liblockfile"
# lockfile_check: "Without a pid in the lockfile, the lock is valid if it is newer than 5 mins".
MAX_AGE_SECONDS = 300.0
POLICY = StalenessPolicy(max_age=MAX_AGE_SECONDS, max_age_inclusive=True)
CONTENT = b"0\n"
_NO_PID = Reason(
    "no_pid",
    "liblockfile's `0`: no process recorded; its tools (lockfile-check, dotlockfile) hold it"
    " valid for 5 min after its last touch (lockfile-touch renews it), stale after",
)

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): any name; `0\n` exactly.
CLAIMS = Claims(leading=CONTENT[:1])


wants = wants_none  # any name: dotlockfile makes the file exactly as named


def read(file: LockFile) -> Lock | None:
    return no_pid_lock(file, content=CONTENT, format=FORMAT, policy=POLICY, note=_NO_PID)


handover = no_handover  # it names no holder to hand over: break it


refresh = no_refresh
