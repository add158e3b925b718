"""Terraform's local state lock: `.terraform.tfstate.lock.info`.

Terraform's local backend (internal/states/statemgr/filesystem.go) locks the
state file itself with a POSIX write lock over the whole file (fcntl F_SETLK,
filesystem_lock_unix.go) and only then writes `.<state name>.lock.info` beside
it: compact JSON `{ID, Operation, Info, Who, Version, Created, Path}`. A
conflicting run fails on the fcntl lock (EAGAIN) and reads the lock.info only
to print it; after a crash the lock.info stays, and the next run locks the
state file and proceeds. So the kernel decides (a sentinel for the kernel lock
on the state file, `Lock.kernel_file`), and the lock.info only says who.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders.base import (
    Claims,
    Fields,
    LockFile,
    file_lock_for,
    schema_violation,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.facts import refiled
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "terraform"
POLICY = StalenessPolicy(kernel_sentinel=True, kernel_only=True)

_SUFFIX = ".lock.info"
# Every name Terraform's lockInfoPath() gives: "." + the state file's name.
_STATE_SUFFIX = ".tfstate"


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def _state_name(name: str) -> str | None:
    """`.terraform.tfstate.lock.info` -> `terraform.tfstate`; None for other names."""
    if not (name.startswith(".") and name.endswith(_SUFFIX)):
        return None
    state = name[1 : -len(_SUFFIX)]
    return state or None


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("file",)
# The only entries `read` may claim (base.Claims): `.<state>.lock.info`.
CLAIMS = Claims(suffixes=(_SUFFIX,))


def wants(path: str, kind: str) -> bool:
    """`.<state>.lock.info`: the lock.info beside any local state file."""
    return kind == "file" and _state_name(path.rpartition("/")[2]) is not None


def _state_file(file: LockFile, state: str, recorded_path: object) -> str:
    """The state file the kernel lock is on: lockInfoPath() puts the lock.info
    in the directory of the state file it writes (`s.path`), named after it with
    one leading dot dropped. `Path` is the file it *reads* (`s.readPath`), given
    relative to Terraform's working directory, so it only breaks the tie between
    `x.tfstate` and `.x.tfstate`."""
    directory = posixpath.dirname(file.path)
    if isinstance(recorded_path, str) and posixpath.basename(recorded_path) == "." + state:
        return posixpath.join(directory, "." + state)
    return posixpath.join(directory, state)


def read(file: LockFile) -> Lock | None:
    """A lock.info beside a state file; another `.x.lock.info` only if it has
    Terraform's fields."""
    if file.kind != "file":
        return None
    state = _state_name(file.name)
    if state is None:
        return None
    ours_by_name = state.endswith(_STATE_SUFFIX)
    try:
        doc: Any = orjson.loads(file.raw)
    except orjson.JSONDecodeError:
        doc = None
        if not ours_by_name:
            return None
    if doc is None:
        return _lock(file, state, None, defects=(_unreadable(file),))
    if not isinstance(doc, Mapping):
        if not ours_by_name:
            return None
        what = f"JSON {type(doc).__name__} where Terraform's lock info (an object) belongs"
        return _lock(file, state, doc, defects=(schema_violation(what),))
    if not ours_by_name and not ("ID" in doc and "Operation" in doc):
        return None
    return _decode(file, state, doc)


def _unreadable(file: LockFile) -> Reason:
    if not file.raw.strip():
        return Reason("unparseable", "empty file where Terraform's lock info belongs")
    return Reason("unparseable", "not valid JSON (Terraform's lock info)")


def _decode(file: LockFile, state: str, doc: Mapping[str, Any]) -> Lock:
    # Go's json.Unmarshal leaves absent fields empty, but rejects a field of the
    # wrong type or a Created that is not RFC 3339: those are defects.
    fields = Fields(doc)
    lock_id = fields.text("ID", required=False)
    operation = fields.text("Operation", required=False)
    who = fields.text("Who", required=False)
    for optional in ("Info", "Version", "Path"):
        value = doc.get(optional)
        if value is not None and not isinstance(value, str):
            fields.defects.append(
                schema_violation(f"field {optional!r} must be a string, got {type(value).__name__}")
            )
    created = fields.timestamp("Created", required=False)
    info = doc.get("Info")
    if isinstance(info, str) and info and operation:
        operation = f"{operation} ({info})"
    # `Who` is "<user>@<hostname>" (statemgr.NewLockInfo).
    host = who.rpartition("@")[2] if who and "@" in who else None
    holder = Holder(actor=who, host=host or None, operation=operation, session=lock_id)
    return _lock(
        file,
        state,
        doc,
        holder=holder,
        acquired_at=created,
        defects=tuple(fields.defects),
        recorded_path=doc.get("Path"),
    )


def _lock(
    file: LockFile,
    state: str,
    content: Any,
    *,
    holder: Holder | None = None,
    acquired_at: datetime | None = None,
    defects: tuple[Reason, ...] = (),
    recorded_path: object = None,
) -> Lock:
    lock = _file_lock(
        file, name=state, content=content, holder=holder, acquired_at=acquired_at, defects=defects
    )
    state_file = _state_file(file, state, recorded_path)
    return refiled(lock, {"kernel_file": state_file}, scope=(state_file,))


handover = no_handover  # held by an fcntl lock on the state file, not by this file


refresh = no_refresh
