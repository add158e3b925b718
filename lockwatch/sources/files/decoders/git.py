"""git's lock files inside a git directory (`.git/`, a bare `x.git/`): index.lock,
ref locks, config.lock, ... and gc.pid.

git's `*.lock` files (lockfile.c, tempfile.c) are created with O_EXCL, filled
with the new content of the file they lock (a whole index, `DIRC...`; a ref's
`<oid>\\n`; nothing at all for packed-refs.lock) and renamed over it or unlinked
by the process that made it, also on SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGPIPE.
git never reads their content and never calls one stale (`lock_file_timeout`
only retries on EEXIST): their existence is the lock, so no content is ever
invalid. They name no process, so a lock is held exactly while a git process
works in its repository (`Lock.users`, found by `users.attach_users`), and left
behind by a git that was SIGKILLed or crashed ("Another git process seems to be
running in this repository ... remove the file manually to continue").

`next-index-<pid>.lock` (builtin/commit.c, a partial commit's temporary index)
names the `git commit` that made it. `gc.pid` (builtin/gc.c lock_repo_for_gc)
is `<pid> <host>`: gc respects it while it is at most 12 hours old and either
names another host or a live pid, and overwrites it otherwise.
"""

from __future__ import annotations

from typing import Any

from lockwatch.model.lazyre import lazy_compile
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders.base import (
    MAX_PID,
    Claims,
    LockFile,
    file_lock_for,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "git"
# Between git's O_EXCL create and the process scan that finds the git at work
# lie only a lockwatch listing's own milliseconds: git makes a lock from inside
# the process that will commit or remove it. The longest wait git itself puts on
# a lock is core.packedRefsTimeout (1 s); 5 s covers a slow scan on top.
POLICY = StalenessPolicy(
    held_while_used=True, users_grace=5.0, users_label="git process in this repository"
)
# A partial commit's temporary index names its `git commit`: once that pid is
# gone nobody will commit or remove it, whatever other git runs there.
NEXT_INDEX_POLICY = StalenessPolicy(
    pid_liveness=True,
    held_while_used=True,
    users_grace=5.0,
    users_label="git process in this repository",
)
# gc ignores a gc.pid older than 12 h ("time(NULL) - st.st_mtime <= 12 * 3600"
# keeps it) on any host, and any live pid counts: git does not tell a recycled
# pid (kill(pid, 0) succeeding is enough), so neither does lockwatch.
GC_MAX_AGE = 12 * 3600.0
GC_PID_POLICY = StalenessPolicy(
    pid_liveness=True, max_age=GC_MAX_AGE, foreign_max_age=GC_MAX_AGE, time_by_writer=True
)

NO_PID = Reason(
    "no_pid",
    "git's lock files name no process: held while a git process works in this repository",
)

# What lies directly in a git directory: a `*.git` directory is only taken for
# a bare repository when the lock sits where git puts its own files.
_GIT_DIR_FILES = lazy_compile(
    r"(?:[A-Z_]+|index|config|config\.worktree|packed-refs|shallow|gc\.pid|gc\.log"
    r"|next-index-\d+)\.lock|gc\.pid"
)
_GIT_DIR_DIRS = frozenset(
    {
        "refs",
        "logs",
        "objects",
        "worktrees",
        "modules",
        "info",
        "sequencer",
        "rebase-merge",
        "rebase-apply",
        "rr-cache",
    }
)
# Other tools' state kept inside `.git`: their locks are theirs, not git's.
_FOREIGN_DIRS = frozenset({"annex", "lfs"})
_NEXT_INDEX = lazy_compile(r"next-index-([1-9]\d{0,9})\.lock")
# fscanf(fp, "%ju %64s", &pid, locking_host): digits, optional blanks, a word
# (the host, at most HOST_NAME_MAX = 64 bytes are read); the rest is ignored.
_GC_PID = lazy_compile(rb"\s*([+-]?\d+)(?!\d)\s*(\S{1,64})")
_OID = lazy_compile(rb"(?:[0-9a-f]{40}|[0-9a-f]{64})\n?")


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def anchor(path: str) -> tuple[str, str] | None:
    """The git directory (`.../.git` or a bare `.../x.git`) holding `path`, and
    the path inside it; None when `path` is not one of git's files there."""
    parts = path.split("/")
    for index in range(len(parts) - 2, 0, -1):
        part = parts[index]
        if part == ".git" or (part.endswith(".git") and len(part) > 4):
            rel = parts[index + 1 :]
            if rel[0] in _FOREIGN_DIRS:
                return None
            bare = part != ".git"
            if bare and not (
                (len(rel) == 1 and _GIT_DIR_FILES.fullmatch(rel[0])) or rel[0] in _GIT_DIR_DIRS
            ):
                continue
            return "/".join(parts[: index + 1]), "/".join(rel)
    return None


def named_pid(path: str) -> int | None:
    """The pid a lock's own name records (`next-index-<pid>.lock`), if any."""
    match = _NEXT_INDEX.fullmatch(path.rpartition("/")[2])
    if match is None:
        return None
    pid = int(match.group(1))
    return pid if pid <= MAX_PID else None


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): `*.lock` and `gc.pid`.
CLAIMS = Claims(names=frozenset({"gc.pid"}), suffixes=(".lock",))


def wants(path: str, kind: str) -> bool:
    """git's locks are all `*.lock` and `gc.pid`: the scanner lists them anyway."""
    return False


def read(file: LockFile) -> Lock | None:
    """A `*.lock` or `gc.pid` file in a git directory, else None."""
    if file.kind != "file":
        return None
    name = file.name
    if name != "gc.pid" and not name.endswith(".lock"):
        return None
    # Every git directory's name ends in `.git`: most lock files' paths hold none.
    if ".git" not in file.path:
        return None
    place = anchor(file.path)
    if place is None:
        return None
    rel = place[1]
    if name == "gc.pid":
        # gc.pid is gc's, in the repository's (or a submodule's) common dir.
        if rel != "gc.pid" and not rel.startswith("modules/"):
            return None
        return _gc_pid(file)
    pid = named_pid(file.path)
    return _file_lock(
        file,
        name=rel.removesuffix(".lock"),
        policy=POLICY if pid is None else NEXT_INDEX_POLICY,
        content=_content(name, file.raw),
        holder=Holder(pid=pid, operation="commit" if pid is not None else None),
        # Written once, right after git's O_EXCL create: the mtime is when it was taken.
        acquired_at=file.modified_at,
        notes=(NO_PID,) if pid is None else (),
    )


def _content(name: str, raw: bytes) -> dict[str, Any]:
    """What the bytes are, for the operator: git never reads them back."""
    if not raw:
        return {"kind": "empty"}
    if raw.startswith(b"DIRC"):
        index: dict[str, Any] = {"kind": "index", "bytes": len(raw)}
        if len(raw) >= 12:
            index["version"] = int.from_bytes(raw[4:8], "big")
            index["entries"] = int.from_bytes(raw[8:12], "big")
        return index
    if _OID.fullmatch(raw):
        return {"kind": "ref", "oid": raw.strip().decode("ascii")}
    if raw.startswith(b"ref: ") and len(raw) < 4096:
        return {"kind": "symref", "target": raw[5:].strip().decode("utf-8", "replace")}
    if b"\x00" not in raw[:4096]:
        return {"kind": "text", "text": raw[:4096].decode("utf-8", "replace")}
    return {"kind": "data", "bytes": len(raw)}


def _gc_pid(file: LockFile) -> Lock:
    match = _GC_PID.match(file.raw)
    text = file.raw[:200].decode("utf-8", "replace")
    if match is None:
        # gc's fscanf fails: it ignores the file and runs, overwriting it.
        return _file_lock(
            file,
            name="gc",
            policy=GC_PID_POLICY,
            content=text,
            acquired_at=file.modified_at,
            defects=(
                Reason(
                    "unparseable",
                    "not `<pid> <host>`: git gc ignores such a gc.pid and runs anyway",
                ),
            ),
        )
    number = int(match.group(1))
    # 0, negative or huge numbers are cast to pid_t by git and signal something
    # other than one process: whether it is alive is unknowable here.
    pid = number if 0 < number <= MAX_PID else None
    host = match.group(2).decode("utf-8", "replace")
    return _file_lock(
        file,
        name="gc",
        policy=GC_PID_POLICY,
        content=text,
        holder=Holder(pid=pid, host=host, operation="gc"),
        # gc writes it once it holds gc.pid.lock and renames it in: its mtime
        # is what gc's own 12-hour rule reads.
        acquired_at=file.modified_at,
        notes=()
        if pid is not None
        else (Reason("no_pid", f"{number} is not a process id git can check"),),
    )


handover = no_handover  # git's locks carry no owner to hand over: git would refuse, not wait


refresh = no_refresh
