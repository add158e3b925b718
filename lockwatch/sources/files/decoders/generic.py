"""Any other `*.lock` / `*.pid` file: JSON with familiar keys, a bare pid, or nothing.

Stale iff the recorded pid is dead on this host. Without a recorded time the
file's mtime stands for when the lock was taken.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lockwatch.model.handover import MARK, NewHolder
from lockwatch.model.lock import Holder, Lock, Reason, StalenessPolicy
from lockwatch.model.timestamps import format_timestamp, parse_timestamp
from lockwatch.sources.files.decoders.base import (
    MAX_PID,
    LockFile,
    dump,
    file_lock,
    schema_violation,
    shown,
)

FORMAT = "generic"
# A pid file may be a kernel lock's sentinel too (portalocker, a daemon's
# lockf'd pid file): once a kernel lock is seen on it, the kernel decides.
POLICY = StalenessPolicy(pid_liveness=True, kernel_pidfile=True)
# An empty lock file records nothing: it is the sentinel of a kernel lock
# (filelock, portalocker, fasteners, flock(1)), held while that lock is.
SENTINEL = StalenessPolicy(pid_liveness=True, kernel_sentinel=True, sentinel_mtime_only=True)

PID_KEYS = ("pid", "PID", "process_id", "processId", "owner_pid", "ownerPid")
HOST_KEYS = ("hostname", "host", "host_id", "hostName", "node", "machine")
TIME_KEYS = (
    "acquired_at",
    "acquiredAt",
    "started",
    "created_at",
    "createdAt",
    "locked_at",
    "lockedAt",
    "started_at",
    "startedAt",
    "timestamp",
    "time",
    "since",
    "ts",
)
ACTOR_KEYS = ("actor", "owner", "user", "username")
SESSION_KEYS = ("session_id", "session", "request_id", "run_id", "runId", "id")
OPERATION_KEYS = ("operation", "op", "purpose", "command", "cmd", "reason")
HEARTBEAT_KEYS = ("last_heartbeat_at", "heartbeat_at", "heartbeatAt", "updated_at", "updatedAt")

_NO_PID = Reason("no_pid", "the lock names no process; lockwatch can only show its age")


def _first(doc: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = doc.get(key)
        if value is not None:
            return value
    return None


def _is_ascii_number(text: str) -> bool:
    # str.isdigit() also accepts "²" and "①", which int() rejects.
    return 0 < len(text) <= 10 and text.isascii() and text.isdigit()


def _as_pid(value: object) -> int | None:
    if type(value) is int:
        number = value
    elif isinstance(value, str) and _is_ascii_number(value.strip()):
        number = int(value.strip())
    else:
        return None
    return number if 1 <= number <= MAX_PID else None


def _as_text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if type(value) is int:
        return str(value)
    return None


def _generic(
    file: LockFile,
    content: Any,
    holder: Holder,
    acquired_at: datetime | None = None,
    heartbeat_at: datetime | None = None,
    defects: tuple[Reason, ...] = (),
    policy: StalenessPolicy = POLICY,
) -> Lock:
    return file_lock(
        file,
        format=FORMAT,
        name=file.stem(),
        policy=policy,
        content=content,
        holder=holder,
        acquired_at=acquired_at or file.modified_at,
        heartbeat_at=heartbeat_at,
        defects=defects,
        notes=() if holder.pid is not None or defects else (_NO_PID,),
    )


def decode(doc: Mapping[str, Any], file: LockFile) -> Lock:
    raw_pid = _first(doc, PID_KEYS)
    pid = _as_pid(raw_pid)
    defects: tuple[Reason, ...] = ()
    if raw_pid is not None and pid is None:
        defects = (schema_violation(f"pid {shown(raw_pid)} is not a process id"),)
    holder = Holder(
        pid=pid,
        host=_as_text(_first(doc, HOST_KEYS)),
        actor=_as_text(_first(doc, ACTOR_KEYS)),
        session=_as_text(_first(doc, SESSION_KEYS)),
        operation=_as_text(_first(doc, OPERATION_KEYS)),
    )
    return _generic(
        file,
        doc,
        holder,
        acquired_at=parse_timestamp(_first(doc, TIME_KEYS)),
        heartbeat_at=parse_timestamp(_first(doc, HEARTBEAT_KEYS)),
        defects=defects,
    )


def decode_pid_value(value: int, file: LockFile) -> Lock:
    """A JSON number or a bare `12345` line: the classic pid file."""
    pid = _as_pid(value)
    defects: tuple[Reason, ...] = ()
    if pid is None:
        defects = (schema_violation(f"{shown(value)} is not a process id"),)
    return _generic(file, value, Holder(pid=pid), defects=defects)


def decode_empty(text: str, file: LockFile) -> Lock:
    """A bare lock file: its existence and mtime are all it says."""
    return _generic(file, text, Holder(), policy=SENTINEL)


def decode_text(text: str, file: LockFile) -> Lock | None:
    """A pid file: the pid on the first line, optionally followed there by a host
    (`12345 tower-01`); later lines are the writer's own business (PostgreSQL's
    postmaster.pid keeps its data directory and port there). None if not that."""
    first, _, _ = text.lstrip().partition("\n")
    tokens = first.split()
    if not tokens:
        return decode_empty(text, file)
    if len(tokens) > 2:
        return None
    pid = _as_pid(tokens[0])
    if pid is None:
        return None
    host = tokens[1] if len(tokens) == 2 else None
    return _generic(file, text, Holder(pid=pid, host=host))


def _present(doc: Mapping[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [key for key in keys if doc.get(key) is not None]


def handover(content: Any, new: NewHolder) -> bytes | None:
    """The operator's pid where the old holder's was, in the lock's own shape:
    a pid file stays a pid file; JSON keeps its keys, with the pid, host and
    times replaced. None for what has no holder to hand over (a bare lock file,
    a pid file with more than a pid in it, such as postmaster.pid)."""
    if type(content) is int:
        return b"%d\n" % new.pid
    if isinstance(content, str):
        lines = content.strip().splitlines()
        if len(lines) != 1 or decode_pid_line(lines[0]) is None:
            return None
        has_host = len(lines[0].split()) == 2
        return f"{new.pid} {new.host}\n".encode() if has_host else f"{new.pid}\n".encode()
    if not isinstance(content, Mapping):
        return None
    out = dict(content)
    pid_keys = _present(content, PID_KEYS) or ["pid"]
    # A pid the writer kept as text stays text: its owner reads it back.
    out[pid_keys[0]] = str(new.pid) if isinstance(content.get(pid_keys[0]), str) else new.pid
    for key in _present(content, HOST_KEYS)[:1]:
        out[key] = new.host
    for key in _present(content, TIME_KEYS)[:1] + _present(content, HEARTBEAT_KEYS)[:1]:
        out[key] = _time_as(content[key], new.at)
    out[MARK] = new.mark(previous=content.get(pid_keys[0]))
    return dump(out)


# Epoch numbers above this are milliseconds (as parse_timestamp reads them).
_MILLIS_THRESHOLD = 1e11


def _time_as(old: Any, at: datetime) -> Any:
    """`at` written as the lock wrote its time there: epoch seconds or milliseconds
    stay numbers (of the same type), anything else becomes RFC 3339 text."""
    if isinstance(old, bool) or not isinstance(old, int | float):
        return format_timestamp(at)
    value = at.timestamp()
    if old > _MILLIS_THRESHOLD:
        value *= 1000
    return int(value) if isinstance(old, int) else value


def refresh(content: Any, at: datetime) -> bytes | None:
    if not isinstance(content, Mapping):
        return None
    keys = _present(content, HEARTBEAT_KEYS)[:1]
    return dump({**content, **{key: _time_as(content[key], at) for key in keys}}) if keys else None


def decode_pid_line(line: str) -> int | None:
    tokens = line.split()
    return _as_pid(tokens[0]) if 1 <= len(tokens) <= 2 else None
