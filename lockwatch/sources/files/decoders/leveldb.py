"""LevelDB's and RocksDB's `LOCK`: an empty file in the database directory,
held with an fcntl write lock on the whole file while a process has the
database open (util/env_posix.cc LockFile, RocksDB's env/io_posix.cc).

The file stays, empty, once the database is closed: only the kernel's lock
says whether it is held. The tools' own error when it is ("IO error: lock
…/LOCK: Resource temporarily unavailable", RocksDB's "While lock file: …/LOCK:
Resource temporarily unavailable") means another process has the database
open; nothing about the file is ever stale, and it is never removed.
"""

from __future__ import annotations

from lockwatch.model.lock import Lock, Reason
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "leveldb"
POLICY = StalenessPolicy(kernel_sentinel=True, kernel_only=True, sentinel_mtime_only=True)
MOVABLE = False
WHAT = "a LevelDB/RocksDB database's LOCK (held with fcntl while the database is open)"
NOTE = Reason(
    "leveldb_lock",
    "a LevelDB/RocksDB database's LOCK: held while a process has the database open; the"
    " file always stays",
)

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("file",)
# The only entries `read` may claim (base.Claims): `LOCK`.
CLAIMS = Claims(names=frozenset({"LOCK"}))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def wants(path: str, kind: str) -> bool:
    return kind == "file" and path.endswith("/LOCK")


def read(file: LockFile) -> Lock | None:
    # Both libraries create it empty and never write to it.
    if file.kind != "file" or file.name != "LOCK" or file.raw:
        return None
    return _file_lock(file, name=f"{file.parents(1)[0] or '/'}/LOCK", content=None, notes=(NOTE,))


handover = no_handover  # held by a kernel lock, not by content


refresh = no_refresh
