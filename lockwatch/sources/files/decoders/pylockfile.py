"""The `lockfile` package (PyPI, 0.12): LinkLockFile, SymlinkLockFile, MkdirLockFile.

All three name the holder `<host><tname>.<pid>...`, where `tname` is `-` and the
low 32 bits of the holding thread's ident in unpadded hex (empty with
threaded=False):
- LinkLockFile (`LockFile`/`FileLock` on POSIX): `x.lock` is an empty hard link
  to the unique file `<host><tname>.<pid><hash(path)>` beside it;
- SymlinkLockFile: `x.lock` is a dangling symlink to that same name;
- MkdirLockFile: `x.lock/` holds one empty file `<host>.<tname><pid>` (no hash).

The package itself never calls a lock stale (no pid, time or host check: its
locks block until `break_lock()`), but `release()` raises NotMyLock in any
process but the one the name records: once that pid is gone on its host, only a
break can clear the lock. That leftover is what `holder_dead` reports.

The names are ambiguous in two places, and lockwatch never guesses a pid:
- a positive `hash(path)` runs straight on after the pid (a negative one's `-`
  separates them): every split into a pid and a 64-bit hash is a reading;
- the tname's hex runs straight on into MkdirLockFile's pid, and in the other
  two may be part of a host name like `web-02`. A tname is accepted only as a
  thread ident really looks: the address of a thread control block, so a
  multiple of 16 (glibc aligns it to 64: every ident seen ends in `80`).
  Anything else stays part of the host name, which then differs from ours and
  is never checked (foreign_host): the safe misreading.
A name with more than one reading keeps pid None and says so (`no_pid`); the
verdict checks every reading (`Holder.pid_readings`): none running is a holder
gone, one running is named as the holder, several are unknown.
"""

from __future__ import annotations

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.slots import lean_dataclass
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "lockfile"
POLICY = StalenessPolicy(pid_liveness=True)

# Linux's hard ceiling for pid_max (PID_MAX_LIMIT, 2**22); other systems' are lower.
PID_MAX_LIMIT = 4_194_304
# hash(str) is a signed 64-bit value on 64-bit CPython (32-bit builds: smaller).
_HASH_MAX = 2**63 - 1
_LINK_NAME = lazy_compile(r"(?P<left>[^/@\s]+)\.(?P<tail>[0-9]+(?:-[0-9]+)?)")
# A thread ident's low 32 bits, unpadded, ending in 0 (a 16-byte aligned
# address). After a host name it must also be 6-8 digits long, as a thread
# address is but a host's numbered suffix (`node-100`) is not: 1 in 4096 real
# idents is shorter, and then the host reads as foreign, never as ours.
_TNAME = lazy_compile(r"-[0-9a-f]{0,7}0")
_HOST_TNAME = lazy_compile(r"-[0-9a-f]{5,7}0")
_MKDIR_NAME = lazy_compile(r"(?P<host>[^/\s]+)\.(?P<rest>-?[0-9a-f]+)")


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


@lean_dataclass(frozen=True, slots=True)
class UniqueName:
    """What a lockfile unique name says: host, thread ident, the pid if it is
    certain, and every pid the name can be read as."""

    host: str
    thread: str | None  # the tname's hex digits; None with threaded=False
    pid: int | None
    candidates: tuple[int, ...]


def _pid(text: str) -> int | None:
    if not text or not text.isdigit() or text[0] == "0":
        return None
    value = int(text)
    return value if 0 < value <= PID_MAX_LIMIT else None


def _hash(text: str) -> bool:
    # hash() of a non-empty str is never 0 in practice; "0" still counts.
    return text.isdigit() and (text == "0" or text[0] != "0") and int(text) <= _HASH_MAX


def _split_host(left: str) -> tuple[str, str | None]:
    host, dash, tail = left.rpartition("-")
    if dash and host and _HOST_TNAME.fullmatch(dash + tail):
        return host, tail
    return left, None


def parse_unique(name: str) -> UniqueName | None:
    """LinkLockFile's unique file name or SymlinkLockFile's target text:
    `<host><tname>.<pid><hash>`, else None."""
    m = _LINK_NAME.fullmatch(name)
    if m is None:
        return None
    host, thread = _split_host(m["left"])
    tail = m["tail"]
    if "-" in tail:  # a negative hash: its sign separates it from the pid
        pid_text, _, hash_text = tail.partition("-")
        pid = _pid(pid_text)
        if pid is None or not _hash(hash_text):
            return None
        return UniqueName(host, thread, pid, (pid,))
    candidates = tuple(
        pid
        for cut in range(1, min(len(tail), 8))
        if (pid := _pid(tail[:cut])) is not None and _hash(tail[cut:])
    )
    if not candidates:
        return None
    return UniqueName(host, thread, candidates[0] if len(candidates) == 1 else None, candidates)


def parse_mkdir_entry(name: str) -> UniqueName | None:
    """MkdirLockFile's file inside the lock directory: `<host>.<tname><pid>`."""
    m = _MKDIR_NAME.fullmatch(name)
    if m is None:
        return None
    host, rest = m["host"], m["rest"]
    if not rest.startswith("-"):
        pid = _pid(rest)
        return None if pid is None else UniqueName(host, None, pid, (pid,))
    digits = rest[1:]
    readings = [
        (digits[:cut], pid)
        for cut in range(1, min(len(digits), 9))
        if _TNAME.fullmatch("-" + digits[:cut]) and (pid := _pid(digits[cut:])) is not None
    ]
    if not readings:
        return None
    if len(readings) == 1:
        thread, pid = readings[0]
        return UniqueName(host, thread, pid, (pid,))
    return UniqueName(host, None, None, tuple(pid for _, pid in readings))


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims):
# `x.lock` (a hard-linked file, a symlink or a directory).
CLAIMS = Claims(kinds=("file", "symlink", "dir"), suffixes=(".lock",))


wants = wants_none  # every lock it makes is named `x.lock`


def read(file: LockFile) -> Lock | None:
    """`x.lock` as one of the three classes makes it, else None."""
    name = file.name
    if not name.endswith(".lock") or name == ".lock" or name.startswith(".#"):
        return None
    if file.kind == "file":
        if file.raw or file.nlink < 2:
            return None
        readings = [(link, parsed) for link in file.links if (parsed := parse_unique(link))]
        if len(readings) != 1:
            return None
        unique, parsed = readings[0]
        return _lock(file, "LinkLockFile", unique, parsed)
    if file.kind == "symlink":
        target = file.target or ""
        parsed = parse_unique(target)
        return None if parsed is None else _lock(file, "SymlinkLockFile", target, parsed)
    if file.kind == "dir":
        if len(file.entries) != 1:
            return None
        parsed = parse_mkdir_entry(file.entries[0])
        return None if parsed is None else _lock(file, "MkdirLockFile", file.entries[0], parsed)
    return None


def _lock(file: LockFile, cls: str, unique: str, parsed: UniqueName) -> Lock:
    notes: list[Reason] = []
    if parsed.pid is None:
        shown = ", ".join(str(pid) for pid in parsed.candidates)
        notes.append(
            Reason(
                "no_pid",
                f"{cls} name {unique!r} can be read as pid {shown}: each reading is"
                " checked, none is guessed",
            )
        )
    return _file_lock(
        file,
        content={
            "class": cls,
            "unique_name": unique,
            "host": parsed.host,
            "thread_ident": parsed.thread,
            "pid": parsed.pid,
            "pid_readings": list(parsed.candidates),
        },
        holder=Holder(
            pid=parsed.pid,
            host=parsed.host,
            pid_readings=() if parsed.pid is not None else parsed.candidates,
        ),
        # The unique file, the symlink or the directory is made as the lock is
        # taken and never touched again (a re-entrant acquire writes nothing).
        acquired_at=file.modified_at,
        notes=notes,
    )


handover = no_handover  # the lock is a link or directory, not content: break it


refresh = no_refresh
