"""zc.lockfile: a pid file held with flock while its process lives.

zc.lockfile writes its content template after one leading space (" {pid}" by
default, or e.g. " {pid};{hostname}") once it holds an flock on the file, and
keeps the file and its content after release: the pid never says it is held,
the kernel does (a kernel-lock sentinel). Its own code never reads the content.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lockwatch.model.handover import NewHolder
from lockwatch.model.lock import Holder, Lock, StalenessPolicy
from lockwatch.sources.files.decoders.base import MAX_PID, LockFile, file_lock

FORMAT = "zc.lockfile"
POLICY = StalenessPolicy(pid_liveness=True, kernel_sentinel=True)
_MAX_BYTES = 300


def wants(path: str, kind: str) -> bool:
    return False


def read(file: LockFile) -> Lock | None:
    """` 1234` or ` 1234;host` (a template with the pid first), else None."""
    raw = file.raw
    if file.kind != "file" or not raw.startswith(b" ") or raw.startswith(b"  "):
        return None
    if len(raw) > _MAX_BYTES:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    pid_text, _, host = text.strip().partition(";")
    if not (pid_text.isascii() and pid_text.isdigit()) or any(c.isspace() for c in host):
        return None
    pid = int(pid_text)
    if not 0 < pid <= MAX_PID:
        return None
    return file_lock(
        file,
        format=FORMAT,
        name=file.stem(),
        policy=POLICY,
        content=text,
        holder=Holder(pid=pid, host=host or None),
        acquired_at=file.modified_at,  # written right after the flock was taken
    )


def handover(content: Any, new: NewHolder) -> bytes | None:
    return None  # held by an flock, not by its content: signal the holder instead


def refresh(content: Any, at: datetime) -> bytes | None:
    return None
