"""Lock files as the seed systems write them, and the atomic file operations behind them.

Standard library only (and its cheaper parts): every demo child imports this module,
and a child must start in a few milliseconds. Documents are built here so the tests can
check them against the decoders without starting any process.

Writes are atomic, so lockwatch (or a rival process) never reads half a lock:

- taking a lock writes a temp file beside it and *links* it into place, which fails if
  the lock exists (tower-fleet's `mv -n` from its temp file, spec §4.2);
- rewriting a held lock (a heartbeat) writes a temp file and renames it over the lock.

Temp files end in `.tmp`, which lockwatch's scanner never reports as locks.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Doc = dict[str, Any]

FILE_MODE = 0o644


# --------------------------------------------------------------------------- time formats


def utc_now() -> datetime:
    return datetime.now(UTC)


def python_iso(at: datetime) -> str:
    """`datetime.now(timezone.utc).isoformat()`: clawdbot's and little-loops' format."""
    return at.astimezone(UTC).isoformat()


def js_iso(at: datetime) -> str:
    """JavaScript's `new Date().toISOString()`: gitclaw's format (milliseconds, `Z`)."""
    at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


# tower-fleet's spec writes `date -u +%Y-%m-%dT%H:%M:%SZ`. The demo keeps milliseconds
# (still ISO-8601 UTC): whole seconds would make a healthy executor's heartbeat look up
# to a second older than it is, and with the demo's short ttls that reads as "late".
tower_iso = js_iso


# --------------------------------------------------------------------------- documents


def clawdbot_doc(
    *, pid: int, session_id: str, acquired_at: datetime, hostname: str, operation: str
) -> Doc:
    """Seed 000's `memory/.lock`."""
    return {
        "pid": pid,
        "session_id": session_id,
        "acquired_at": python_iso(acquired_at),
        "hostname": hostname,
        "operation": operation,
    }


def gitclaw_doc(*, issue: int, run_id: str, acquired_at: datetime, pid: int) -> Doc:
    """Seed 001's `.GITCLAW/state/locks/<issue>.lock`."""
    return {"issueNumber": issue, "runId": run_id, "acquiredAt": js_iso(acquired_at), "pid": pid}


def tower_doc(
    *,
    lock_name: str,
    request_id: str,
    actor: str,
    intent: str,
    intent_version: str,
    host_id: str,
    pid: int,
    created_at: datetime,
    heartbeat_at: datetime,
    ttl_seconds: int | str,
    metadata: Mapping[str, Any] | None = None,
) -> Doc:
    """Seed 002's tower-fleet/v1 lock (`ttl_seconds` may be given as a string on
    purpose: the demo's buggy executor writes one, a schema violation)."""
    return {
        "lock_version": "v1",
        "lock_name": lock_name,
        "request_id": request_id,
        "actor": actor,
        "intent": intent,
        "intent_version": intent_version,
        "host_id": host_id,
        "pid": pid,
        "created_at": tower_iso(created_at),
        "last_heartbeat_at": tower_iso(heartbeat_at),
        "ttl_seconds": ttl_seconds,
        "metadata": dict(metadata or {}),
    }


def loops_doc(*, loop_name: str, scope: Sequence[str], pid: int, started_at: datetime) -> Doc:
    """Seed 004's `.loops/.running/<name>.lock` (scope paths resolved, as the seed does)."""
    return {
        "loop_name": loop_name,
        "scope": list(scope),
        "pid": pid,
        "started_at": python_iso(started_at),
    }


def encode(doc: Mapping[str, Any], *, indent: int | None = 2) -> bytes:
    text = json.dumps(doc, indent=indent)
    return (text + "\n").encode() if indent is not None else text.encode()


# --------------------------------------------------------------------------- file operations


def _temp_beside(path: Path, tag: str | None = None) -> Path:
    return path.with_name(f"{path.name}.{tag or os.getpid()}.{os.urandom(3).hex()}.tmp")


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def create_exclusive(path: Path, data: bytes, *, tag: str | None = None) -> bool:
    """Take the lock at `path` with content `data`: True if it is now ours, False if
    somebody holds it. The content is complete before the lock exists."""
    temp = _temp_beside(path, tag)
    _write_new(temp, data)
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return True


def replace_atomic(path: Path, data: bytes, *, tag: str | None = None) -> None:
    """Rewrite `path` at once (write a temp file, rename it over the old one)."""
    temp = _temp_beside(path, tag)
    _write_new(temp, data)
    try:
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def read_doc(path: Path) -> Doc | None:
    """The lock's JSON object; None when there is no lock or it is not a JSON object."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def remove_if(path: Path, owned: Callable[[Doc], bool]) -> bool:
    """Remove the lock if its content says it is ours (the seeds' release: read,
    compare, unlink). False when it is gone or somebody else's."""
    doc = read_doc(path)
    if doc is None or not owned(doc):
        return False
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return True


def pid_alive(pid: object) -> bool:
    """`os.kill(pid, 0)`, as the seeds check a holder."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it is somebody else's
    except OSError:
        return False
    return True


def age_seconds(value: object, now: datetime) -> float | None:
    """Seconds since an ISO-8601 time in a lock; None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return (now - at).total_seconds()
