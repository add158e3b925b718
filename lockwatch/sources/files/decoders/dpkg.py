"""dpkg's and apt's locks: empty files held with fcntl locks for a whole run.

dpkg (src/main/main.c, lib/dpkg/dbmodify.c) takes `<admindir>/lock-frontend`
unless a frontend already holds it for it (DPKG_FRONTEND_LOCKED), then
`<admindir>/lock` (`/var/lib/dpkg/lock`); apt, apt-get, aptitude and
unattended-upgrades take the frontend lock for the whole run, and apt the
archive and list locks (`/var/cache/apt/archives/lock`, `/var/lib/apt/lists/lock`)
while it downloads. Each is a write lock on the whole file; the file stays,
empty, after release: only the kernel's lock says whether it is held, and a
second apt-get names its holder ("It is held by process N (apt-get)").

A holder killed mid-install leaves its journal in `<admindir>/updates/` (and
packages half-installed or half-configured in `status`): the lock is then
free, but apt and dpkg refuse to go on until `dpkg --configure -a` has run
("dpkg was interrupted, you must manually run 'dpkg --configure -a'"). That is
the repair to run; deleting a lock file is never one.
"""

from __future__ import annotations

import os
from functools import lru_cache

from lockwatch.model.lock import Lock, Reason, amended
from lockwatch.sources.filelocks import KernelEvidence
from lockwatch.sources.files.decoders.base import Claims, LockFile, file_lock_for
from lockwatch.sources.files.decoders.hooks import HeldOn, OpenBy, no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "dpkg"
# Free whenever no kernel lock is on it (the file always stays); its age is the
# holder's, told where the kernel's word is attached (`explain`).
POLICY = StalenessPolicy(kernel_sentinel=True, kernel_only=True)
MOVABLE = False
WHAT = "dpkg's or apt's lock (held with fcntl for a whole run; the file always stays)"
REPAIR = "dpkg --configure -a"
# The most of `status` read to look for half-done packages: a big host's is a few MB.
_MAX_STATUS_BYTES = 32 * 1024 * 1024
_HALF = (b"half-installed", b"half-configured")
# Journal entries read at most (dpkg writes one per status change of a run).
_MAX_JOURNAL = 64

# (parents, name) -> what the lock is, in words.
_LOCKS: dict[tuple[tuple[str, ...], str], str] = {
    (("dpkg",), "lock-frontend"): "dpkg's frontend lock: apt, apt-get, aptitude,"
    " unattended-upgrades or dpkg itself holds it for its whole run",
    (("dpkg",), "lock"): "dpkg's database lock: dpkg holds it while it changes the package"
    " database (run by apt or by hand)",
    (("archives", "apt"), "lock"): "apt's download lock (the package archive cache): apt"
    " holds it while it downloads packages",
    (("lists", "apt"), "lock"): "apt's package-lists lock: apt update holds it while it"
    " fetches the package lists",
}

# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("file",)
# The only entries `read` may claim (base.Claims): `lock`, `lock-frontend`.
CLAIMS = Claims(names=frozenset(name for _, name in _LOCKS))


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def _what(path: str) -> str | None:
    head, _, name = path.rpartition("/")
    if name not in ("lock", "lock-frontend"):
        return None
    parents = tuple(reversed(head.rsplit("/", 2)[-2:]))
    for (want, lock_name), words in _LOCKS.items():
        if lock_name == name and parents[: len(want)] == want:
            return words
    return None


def wants(path: str, kind: str) -> bool:
    return kind == "file" and _what(path) is not None


def read(file: LockFile) -> Lock | None:
    if file.kind != "file" or len(file.raw) > 4096:
        return None
    words = _what(file.path)
    if words is None:
        return None
    notes = [Reason("dpkg_lock", words)]
    if file.name in ("lock", "lock-frontend") and file.parents(1)[0] == "dpkg":
        interrupted = _interrupted(file.path.rpartition("/")[0])
        if interrupted is not None:
            notes.append(interrupted)
    return _file_lock(file, name=f"{file.parents(1)[0]}/{file.name}", content=None, notes=notes)


def _interrupted(admindir: str) -> Reason | None:
    """dpkg's own word that a run died mid-way: its journal left in `updates/`
    (what apt checks), or packages half-installed/half-configured in `status`
    as the journal updates it."""
    try:
        journal = sorted(n for n in os.listdir(f"{admindir}/updates") if n.isdigit())
    except OSError:
        journal = []
    states: dict[str, bytes] = {}
    for part in ("status", *(f"updates/{name}" for name in journal[:_MAX_JOURNAL])):
        states.update(_states(f"{admindir}/{part}"))
    half = [f"{package} ({state.decode()})" for package, state in states.items() if state in _HALF]
    if not journal and not half:
        return None
    found = []
    if journal:
        entries = "1 entry" if len(journal) == 1 else f"{len(journal)} entries"
        found.append(f"its journal in {admindir}/updates/ ({entries})")
    if half:
        shown = ", ".join(half[:5]) + (f" and {len(half) - 5} more" if len(half) > 5 else "")
        found.append(f"half-done: {shown}")
    return Reason(
        "dpkg_interrupted",
        f"dpkg was interrupted mid-run ({'; '.join(found)}): apt and dpkg refuse to go on"
        f" until `{REPAIR}` has run (their own repair); never delete the lock file",
    )


def _states(path: str) -> dict[str, bytes]:
    try:
        st = os.stat(path)
    except OSError:
        return {}
    return _states_in(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _states_in(path: str, mtime_ns: int, size: int) -> dict[str, bytes]:
    """Each package's state (the last word of its `Status:`) in a status file or
    a journal entry, read once per version of the file (a scan asks for each of
    dpkg's two locks). Only what it says of half-done packages is kept."""
    try:
        with open(path, "rb") as f:
            text = f.read(_MAX_STATUS_BYTES)
    except OSError:
        return {}
    states: dict[str, bytes] = {}
    if "updates/" not in path and not any(word in text for word in _HALF):
        return states  # the status of a healthy host: nothing half-done to find
    for stanza in text.split(b"\n\n"):
        package = state = None
        for line in stanza.splitlines():
            if line.startswith(b"Package:"):
                package = line[8:].strip().decode("utf-8", "replace")
            elif line.startswith(b"Status:") and line.split():
                state = line.split()[-1]
        if package is not None and state is not None:
            states[package] = state
    return states


def explain(
    lock: Lock, evidence: KernelEvidence, held_on: HeldOn, open_by: OpenBy
) -> tuple[Lock, KernelEvidence]:
    """Held: since its holder started (the file's mtime is its creation's); a run
    is never killed mid-install."""
    if not evidence.holds:
        return amended(lock, acquired_at=None), evidence
    hold = evidence.holds[0]
    holder = hold.holders[0] if hold.holders else None
    who = holder.label if holder is not None else f"pid {hold.holder_pid or '?'}"
    note = Reason(
        "dpkg_running",
        # Said of a run at its Y/n prompt as of one installing: what it is doing now
        # is the holder's activity (`next`), read at each look, not this note's.
        f"{who} holds the lock for its whole run: if it is installing, let it finish;"
        f" killing it mid-install leaves packages half-installed (then `{REPAIR}`"
        " repairs them)",
    )
    started = holder.started_at if holder is not None else None
    # A run in progress keeps its journal in updates/: no sign of an interrupted one.
    kept = tuple(reason for reason in lock.notes if reason.code != "dpkg_interrupted")
    return amended(lock, acquired_at=started, notes=(*kept, note)), evidence


handover = no_handover  # held by a kernel lock, not by content


refresh = no_refresh
