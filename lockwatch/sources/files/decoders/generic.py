"""Any other `*.lock` / `*.pid` file: JSON with familiar keys, a bare pid, a
short note, or nothing.

Stale iff the recorded pid is dead on this host, or past the record's own
expiry (`expires_at`, ..., or a ttl from its recorded start: `expired`).
Without a recorded time the file's mtime stands for when the lock was taken.
A short plain-text note ("locked by bob, do not touch") is a lock with no pid,
the note its holder's words. A file named directly that neither its name nor
its content makes a lock (`/etc/shadow`, a binary) is "not a lock": unknown,
`not_a_lock` saying why (never invalid, which a break takes for a broken lock).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lockwatch.model.handover import MARK, NewHolder
from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.model.timestamps import format_timestamp, parse_timestamp, plus_seconds
from lockwatch.sources.files.decoders.base import (
    MAX_INTEGER,
    MAX_PID,
    LockFile,
    dump,
    file_lock_for,
    schema_violation,
    shown,
)
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "generic"
# A pid file may be a kernel lock's sentinel too (portalocker, a daemon's
# lockf'd pid file): once a kernel lock is seen on it, the kernel decides.
# A record's own expiry is a deadline, not a lease a holder renews: `expired`.
POLICY = StalenessPolicy(pid_liveness=True, kernel_pidfile=True, expiry_code="expired")
# An empty lock file records nothing: the sentinel of a kernel lock (filelock,
# portalocker, fasteners, flock(1)), held while that lock is; or an existence
# lock (npm's `lockfile`: O_EXCL, closed at once), held while it exists. Nobody
# holding a kernel lock on it and nobody having it open, it is free only where
# the kernel was seen holding it; else unknown (`existence_unknown`).
SENTINEL = StalenessPolicy(
    pid_liveness=True, kernel_sentinel=True, sentinel_mtime_only=True, sentinel_unproven=True
)
# A bare pid (`12345`, optionally a host after it) is a pid file and a kernel
# lock's sentinel alike (portalocker writes its pid there): with no kernel lock
# on it, active by its live pid, the sentinel's reading named beside
# (`live_pid_no_kernel_lock`); a [[protocols]] declaration settles it.
BARE_PID = StalenessPolicy(
    pid_liveness=True, kernel_pidfile=True, expiry_code="expired", sentinel_unproven=True
)
# A file that is no lock: unknown, its `not_a_lock` note says why.
NOT_A_LOCK = StalenessPolicy(undecided=True)

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
# A record's own deadline: a time (ISO-8601 or epoch seconds/ms), or seconds
# from its start where a number is too small to be a time.
EXPIRY_KEYS = (
    "expires_at",
    "expiresAt",
    "expires",
    "expiry",
    "deadline",
    "valid_until",
    "validUntil",
)
# Seconds it lasts from its recorded start (its last heartbeat, else its acquisition).
TTL_KEYS = ("ttl_seconds", "ttlSeconds", "ttl")
# Numbers below this (2001-09-09 as epoch seconds) are durations, not times.
_EPOCH_FLOOR = 1e9
# A note is a few short lines of text; more is a document, not a lock's words.
NOTE_MAX_CHARS = 1024
NOTE_MAX_LINES = 8

_NO_PID = Reason("no_pid", "the lock names no process; lockwatch can only show its age")


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


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
    expires_at: datetime | None = None,
    ttl_seconds: float | None = None,
    notes: tuple[Reason, ...] | None = None,
) -> Lock:
    if notes is None:
        notes = () if holder.pid is not None or defects else (_NO_PID,)
    return _file_lock(
        file,
        policy=policy,
        content=content,
        holder=holder,
        acquired_at=acquired_at or file.modified_at,
        heartbeat_at=heartbeat_at,
        expires_at=expires_at,
        ttl_seconds=ttl_seconds,
        defects=defects,
        notes=notes,
    )


# Words in a name that make its file a lock whatever it holds (`x.lock`,
# `db.lck`, `LOCK`, `lockfile`, `app.pid`); anything else named directly is a
# lock only by its content.
_LOCK_WORDS = ("lock", "lck", ".pid")


def lock_named(file: LockFile) -> bool:
    """Whether the file's name says it is a lock (or a pid file)."""
    name = file.name.lower()
    return any(word in name for word in _LOCK_WORDS)


_LOCK_KEYS = frozenset(
    (*PID_KEYS, *HOST_KEYS, *TIME_KEYS, *HEARTBEAT_KEYS, *EXPIRY_KEYS, *TTL_KEYS, *ACTOR_KEYS)
)


def has_lock_keys(doc: Mapping[str, Any]) -> bool:
    """Whether a JSON object has any key a lock record has."""
    return any(key in _LOCK_KEYS for key in doc)


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value <= MAX_INTEGER else None


def _expiry(
    doc: Mapping[str, Any], start: datetime | None
) -> tuple[datetime | None, float | None, Reason | None]:
    """(when the record says it expires, its ttl, a defect): an expiry key's time,
    or its ttl (a number of seconds under an expiry or ttl key) from `start`."""
    key = next((k for k in (*EXPIRY_KEYS, *TTL_KEYS) if doc.get(k) is not None), None)
    if key is None:
        return None, None, None
    value = doc[key]
    ttl = _seconds(value)
    if key in EXPIRY_KEYS and (ttl is None or ttl >= _EPOCH_FLOOR):
        at = parse_timestamp(value)
        if at is None:
            return None, None, schema_violation(f"{key} {shown(value)} is not a time")
        return at, None, None
    if ttl is None:
        return None, None, schema_violation(f"{key} {shown(value)} is not a number of seconds")
    if start is None:
        return None, ttl, None  # a ttl from no recorded start: shown, never judged
    return plus_seconds(start, ttl), ttl, None


def decode(doc: Mapping[str, Any], file: LockFile) -> Lock:
    raw_pid = _first(doc, PID_KEYS)
    pid = _as_pid(raw_pid)
    defects: tuple[Reason, ...] = ()
    if raw_pid is not None and pid is None:
        defects = (schema_violation(f"pid {shown(raw_pid)} is not a process id"),)
    acquired_at = parse_timestamp(_first(doc, TIME_KEYS))
    heartbeat_at = parse_timestamp(_first(doc, HEARTBEAT_KEYS))
    expires_at, ttl, bad_expiry = _expiry(doc, heartbeat_at or acquired_at)
    if bad_expiry is not None:
        defects = (*defects, bad_expiry)
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
        acquired_at=acquired_at,
        heartbeat_at=heartbeat_at,
        defects=defects,
        expires_at=expires_at,
        ttl_seconds=ttl,
    )


def decode_pid_value(value: int, file: LockFile) -> Lock:
    """A JSON number or a bare `12345` line: the classic pid file."""
    pid = _as_pid(value)
    defects: tuple[Reason, ...] = ()
    if pid is None:
        defects = (schema_violation(f"{shown(value)} is not a process id"),)
    # Holder(pid): its first field, positional (a class called with a keyword packs a dict).
    return _generic(file, value, Holder(pid), defects=defects, policy=BARE_PID)


def decode_empty(text: str, file: LockFile) -> Lock:
    """A bare lock file: its existence and mtime are all it says."""
    return _generic(file, text, Holder(), policy=SENTINEL)


def decode_note(text: str, file: LockFile) -> Lock | None:
    """A few short lines of plain text ("locked by bob, do not touch"): a lock
    with no pid, held while it exists, the text its holder's words. None when the
    text is not that (longer, control characters, what looks like broken JSON or
    a broken pid file)."""
    note = text.strip()
    if not note or len(note) > NOTE_MAX_CHARS or note[0] in "{[" or note[0].isdigit():
        return None
    lines = note.splitlines()
    if len(lines) > NOTE_MAX_LINES or not all(line.isprintable() for line in lines):
        return None
    if len(lines[0].split()) < 2:
        # A first line of one token (`NaN`, `pid=12`, a SoftFileLock's `abc` above its
        # host) is no sentence: broken content.
        return None
    first = lines[0].strip()
    said = Reason(
        "no_pid",
        f"a note, not a record: {first[:80]!r}; it names no process, so it is held for as"
        " long as it exists (ask its writer before removing it)",
    )
    return _generic(file, text, Holder(operation=first), notes=(said,))


def not_a_lock(file: LockFile, why: str, content: Any = None) -> Lock:
    """A file named directly that neither its name nor its content makes a lock."""
    return _generic(
        file,
        content,
        Holder(),
        policy=NOT_A_LOCK,
        notes=(Reason("not_a_lock", f"not a lock: {why}"),),
    )


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
    # More lines are a record of the writer's own (postmaster.pid): no bare pid.
    policy = BARE_PID if "\n" not in text.strip() else POLICY
    return _generic(file, text, Holder(pid=pid, host=host), policy=policy)


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
