"""flufl.lock: a hard link to a claim file `<lockfile>|<host>|<pid>|<random>`.

The lock file and the winning claim file are one inode (nlink 2); the content
is the claim file's path, no newline. The mtime is the *expiry* (last touch +
lifetime, floored to seconds), not the acquisition time, and the lifetime is
recorded nowhere. flufl.lock's own rules (flufl/lock/_lockfile.py 10.0):
- `Lock.state`: another host -> unknown; this host, pid alive -> held
  (`theirs_expired` past the mtime); pid gone -> `stale`;
- `lock()` breaks it, whatever its host or pid, once `now > mtime + CLOCK_SLOP`
  (10 s), and never breaks a file whose content does not split into 4 fields.
"""

from __future__ import annotations

from datetime import UTC, timedelta

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders.base import (
    MAX_PID,
    Claims,
    LockFile,
    file_lock_for,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "flufl.lock"
SEPARATOR = "|"
# flufl.lock's CLOCK_SLOP: a contender breaks the lock this long after its mtime.
CLOCK_SLOP_SECONDS = 10.0
# Stale exactly when flufl would break it (heartbeat_expired, mtime + 10 s), or
# when the pid is gone on this host (`state` says stale). The lifetime is not
# recorded, so neither is the acquisition: no age.
POLICY = StalenessPolicy(pid_liveness=True, expiry_grace=CLOCK_SLOP_SECONDS)
# A lock path with the separator in it: flufl's split gives 5+ fields, so its
# `state` says unknown and `_break` refuses; it stays until unlocked.
_UNREADABLE_POLICY = StalenessPolicy()
# A waiting contender's own claim file, when an operator names one.
_CLAIM_POLICY = StalenessPolicy(pid_liveness=True, waiter=True)
_MAX_BYTES = 4096
_MAX_RANDOM = 2**63 - 1


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims):
# any name: the lock file is named as its user chose (content decides).
CLAIMS = Claims(anything=True)


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


wants = wants_none  # the lock is `<lockfile>` itself; claim files are never listed


# The separator as an int: `b"|" in raw` first tries b"|" as a byte's value and
# formats a TypeError it then drops (~1,800 instructions, every file a scan reads).
_BAR = ord("|")


def _fields(file: LockFile) -> tuple[str, str, int, str] | None:
    """(lock path, host, pid, claim name) from the content, else None."""
    raw = file.raw
    # A claim is `lockpath|host|pid|random`: bytes without the separator are none
    # (told without a copy; most files a scan reads are JSON records or pids).
    if file.kind != "file" or _BAR not in raw:
        return None
    if len(raw) > _MAX_BYTES or b"\n" in raw.rstrip():
        return None
    try:
        claim = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    parts = claim.rsplit(SEPARATOR, 3)
    if len(parts) != 4:
        return None
    lockpath, host, pid_text, random = parts
    if not (pid_text.isascii() and pid_text.isdigit() and random.isascii() and random.isdigit()):
        return None
    pid = int(pid_text)
    if not 0 < pid <= MAX_PID or int(random) > _MAX_RANDOM or not host or not lockpath:
        return None
    return lockpath, host, pid, claim.rpartition("/")[2]


def read(file: LockFile) -> Lock | None:
    fields = _fields(file)
    if fields is None:
        return None
    lockpath, host, pid, claim_name = fields
    holder = Holder(pid=pid, host=host)
    if file.name == claim_name:
        if file.nlink > 1:
            return None  # the holder's claim: the lock file beside it is the lock
        return _file_lock(
            file,
            name=lockpath.rpartition("/")[2],
            policy=_CLAIM_POLICY,
            content=claim_name,
            holder=holder,
            notes=(Reason("claim_file", "a contender's claim file, not the lock itself"),),
        )
    if lockpath.rpartition("/")[2] != file.name:
        return None
    notes: list[Reason] = []
    if claim_name not in file.links:
        notes.append(
            Reason(
                "no_claim_file",
                f"not hard-linked to its claim file {claim_name!r}; flufl.lock reads the"
                " content all the same",
            )
        )
    if SEPARATOR in lockpath:
        notes.append(
            Reason(
                "unbreakable",
                f"the lock path holds {SEPARATOR!r}: flufl.lock cannot parse its own claim,"
                " so it never breaks this lock and cannot tell who holds it",
            )
        )
        return _file_lock(
            file,
            policy=_UNREADABLE_POLICY,
            content=claim_name,
            holder=Holder(host=host),
            notes=notes,
        )
    expiry = file.modified_at
    breakable = expiry + timedelta(seconds=CLOCK_SLOP_SECONDS)
    notes.append(
        Reason(
            "expiry",
            f"the mtime is the lock's expiry ({expiry.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC),"
            f" not its age; flufl.lock breaks it after {breakable:%H:%M:%S} UTC"
            " (expiry + 10 s), whoever holds it",
        )
    )
    return _file_lock(file, content=claim_name, holder=holder, expires_at=expiry, notes=notes)


handover = no_handover  # the claim is a hard link to a name with the holder's pid: not rewritable


refresh = no_refresh  # the expiry is the mtime, not the content
