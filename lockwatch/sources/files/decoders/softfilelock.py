"""filelock's SoftFileLock: `<pid>\\n<host>\\n[<start token>\\n]`, no kernel lock.

The marker's existence is the lock (O_EXCL create, unlinked on release). Its
contender-side rules (filelock 4.2 `_soft.py`, `_identity.owner_is_stale`):
- another host string (including another pid namespace, `<host>?pidns-<hex>`)
  is never stale: its pid cannot be probed (lockwatch, on the host, finds that
  namespace by its inode and the holder's pid in it: see `Holder.pid_namespace`);
- on this host it is stale when the pid is gone, or lives with another start
  token (a recycled pid); with no token (filelock < 3.30, or a writer in a
  time namespace) a live pid holds it;
- the marker is written once at acquisition and never refreshed, so its mtime
  is the acquisition time; its age alone never makes it stale (`lifetime=` is a
  contender's opt-in, recorded nowhere).
"""

from __future__ import annotations

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders.base import (
    DIGITS,
    STRIPPED_LEADS,
    Claims,
    LockFile,
    file_lock_for,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh, wants_none
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "filelock-soft"
# time_by_writer: filelock proves reuse by the start token alone; without one,
# a live pid holds the lock however late it started.
POLICY = StalenessPolicy(pid_liveness=True, time_by_writer=True)
# StrictSoftFileLock's placeholder record: filelock never breaks it.
_STRICT_SENTINEL = b"1\nfilelock-strict-v1\x00\n0\n"
_STRICT_POLICY = StalenessPolicy()
_NAMESPACE_MARK = "?pidns-"
# read_lock_file: anything larger is not a marker.
_MAX_BYTES = 1024
_MAX_PID = 2**31 - 1
_TICKS_MASK = 2**64 - 1


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ()
# The only entries `read` may claim (base.Claims): any name; a pid first, maybe after blanks.
CLAIMS = Claims(leading=DIGITS + STRIPPED_LEADS)


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


wants = wants_none  # any path; `.break.`/`.restore.` leftovers are not lock names


def unescape_host(text: str) -> str:
    """host_name()'s `?xx` escapes undone (a truncated name keeps its hash suffix)."""
    out = bytearray()
    i = 0
    while i < len(text):
        hexpair = text[i + 1 : i + 3]
        if text[i] == "?" and len(hexpair) == 2 and all(c in "0123456789abcdef" for c in hexpair):
            out.append(int(hexpair, 16))
            i += 3
        else:
            out.extend(text[i].encode("utf-8", "surrogateescape"))
            i += 1
    return out.decode("utf-8", "surrogateescape")


def _decimal(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _is_hex(text: str) -> bool:
    return len(text) <= 16 and all(c in "0123456789abcdef" for c in text)


def read(file: LockFile) -> Lock | None:
    raw = file.raw
    if file.kind != "file" or not raw or len(raw) > _MAX_BYTES:
        return None
    if raw == _STRICT_SENTINEL:
        return _file_lock(
            file,
            policy=_STRICT_POLICY,
            content=raw.decode("ascii"),
            acquired_at=file.modified_at,
            notes=(
                Reason(
                    "no_pid",
                    "a StrictSoftFileLock placeholder: it names no holder, and filelock"
                    " never breaks it",
                ),
            ),
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # parse_lock_holder's shape, exactly: a final newline, 2 or 3 lines.
    lines = text.strip().splitlines()
    if not text.endswith("\n") or len(lines) not in (2, 3):
        return None
    pid = _decimal(lines[0])
    token = _decimal(lines[2]) if len(lines) == 3 else None
    host_line = lines[1]
    if pid is None or not 1 <= pid <= _MAX_PID or (len(lines) == 3 and token is None):
        return None
    # An all-digit second line is some other pid file's (a port, a second pid).
    if not host_line or host_line.isdigit() or any(c.isspace() for c in host_line):
        return None
    # A path is no host name, and `*.pid` files with a pid and more lines are
    # daemons' (PostgreSQL's postmaster.pid: pid, data directory, start time).
    if host_line.startswith("/") or file.name.endswith(".pid"):
        return None
    base, mark, namespace = host_line.partition(_NAMESPACE_MARK)
    other_namespace = bool(mark)
    # host_name() writes the namespace's inode in hex (a name cut to 253
    # characters may have lost it: then it is not known).
    inode = int(namespace, 16) if namespace and _is_hex(namespace) else None
    # A Linux token is boot id << 64 | start ticks (/proc/<pid>/stat field 22);
    # macOS (µs since the epoch) and Windows (FILETIME) tokens fit in 64 bits.
    # A boot id filelock could not read is 0: then nothing tells the platforms apart.
    start_ticks = token & _TICKS_MASK if token is not None and token >> 64 else None
    notes: list[Reason] = []
    if token is not None and start_ticks is None:
        notes.append(
            Reason(
                "start_token_unread",
                "the start token carries no Linux boot id; a recycled pid cannot be told here",
            )
        )
    return _file_lock(
        file,
        content=text,
        holder=Holder(
            pid=pid,
            host=unescape_host(base) if base != "?" else None,
            other_pid_namespace=other_namespace,
            pid_namespace=inode,
            session=f"pidns {namespace}" if other_namespace else None,
            start_ticks=start_ticks,
        ),
        acquired_at=file.modified_at,
        notes=notes,
    )


handover = no_handover  # its start token cannot be written for another process


refresh = no_refresh  # never refreshed by filelock: its age means nothing to it
