"""pacman's `db.lck` (libalpm, lib/libalpm/handle.c): an existence lock.

libalpm creates it with O_CREAT|O_EXCL, empty, and keeps it open for as long
as it holds the database (pacman, and the frontends built on libalpm: yay,
paru, pamac); it closes and unlinks it when done. So it is held exactly while
a process has it open; one that nobody has open was left by a run that died,
and pacman's own answer to it is "could not lock database: File exists / if
you're sure a package manager is not already running, you can remove …/db.lck"
(a break here moves it aside, kept). Its mtime is when it was taken.
"""

from __future__ import annotations

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.filelocks import KernelEvidence
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import HeldOn, OpenBy, no_handover, no_refresh
from lockwatch.sources.files.facts import facts_of, refiled
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "pacman"
# Held while some process has it open (`users`, found by `explain`); with
# nobody, stale once past the moment between its creation and being seen open.
POLICY = StalenessPolicy(
    pid_liveness=True,
    held_while_used=True,
    users_grace=5.0,
    users_label="process has it open (pacman, or another libalpm tool)",
)
NOTE = Reason(
    "pacman_lock",
    "pacman's database lock (libalpm): held while pacman (or yay, paru, pamac) has it open;"
    " pacman says to remove it only if sure no package manager runs",
)

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("file",)
# The only entries `read` may claim (base.Claims): `db.lck`.
CLAIMS = Claims(names=frozenset({"db.lck"}))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def wants(path: str, kind: str) -> bool:
    return kind == "file" and path.endswith("/db.lck")


def read(file: LockFile) -> Lock | None:
    if file.kind != "file" or file.name != "db.lck" or file.raw:
        return None
    return _file_lock(
        file,
        name=f"{file.parents(1)[0] or '/'}/db.lck",
        content=None,
        acquired_at=file.modified_at,  # created (O_EXCL) when taken
        notes=(NOTE,),
    )


def explain(
    lock: Lock, evidence: KernelEvidence, held_on: HeldOn, open_by: OpenBy
) -> tuple[Lock, KernelEvidence]:
    """Who has it open: its holder (there is no other sign of one)."""
    key = facts_of(lock).file_key
    if key is None:
        return lock, evidence
    users = open_by(key)
    holder = Holder(pid=users[0]) if users else lock.holder
    return refiled(lock, {"users": users}, holder=holder), evidence


handover = no_handover  # held by an open file, not by content


refresh = no_refresh
