"""little-loops scope lock (seed 004): `.loops/.running/<name>.lock`.

`{loop_name, scope[], pid, started_at}`. Stale iff the pid is dead. Live locks
whose scopes overlap conflict (decided across locks in the model). Relative scope
paths are taken from the project root, the directory holding `.loops`, as the
seed resolves them from there; an empty scope means the whole project.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lockwatch.model.handover import MARK, NewHolder
from lockwatch.model.lock import Holder, Lock, StalenessPolicy
from lockwatch.model.timestamps import format_timestamp
from lockwatch.sources.files.decoders.base import Fields, LockFile, dump, file_lock

FORMAT = "little-loops"
POLICY = StalenessPolicy(pid_liveness=True)


def claims(doc: Mapping[str, Any]) -> bool:
    return "loop_name" in doc or ("scope" in doc and "started_at" in doc)


def hinted(file: LockFile) -> bool:
    return file.parents(2) == (".running", ".loops")


def project_root(file: LockFile) -> str:
    """`<root>/.loops/.running/x.lock` -> `<root>`; elsewhere the lock's own directory."""
    head, _, _ = file.path.rpartition("/")
    if hinted(file):
        head = head.rsplit("/", 2)[0]
    return head or "/"


def decode(doc: Mapping[str, Any], file: LockFile) -> Lock:
    fields = Fields(doc)
    loop_name = fields.text("loop_name")
    scope = fields.string_list("scope")
    pid = fields.pid()
    started_at = fields.timestamp("started_at")
    root = project_root(file)
    normalized = (
        tuple(posixpath.normpath(posixpath.join(root, path)) for path in (scope or ["."]))
        if scope is not None
        else ()
    )
    return file_lock(
        file,
        format=FORMAT,
        name=loop_name or file.stem(),
        policy=POLICY,
        content=doc,
        holder=Holder(pid=pid, operation=f"loop {loop_name}" if loop_name else None),
        acquired_at=started_at,
        scope=normalized,
        defects=fields.defects,
    )


def handover(doc: Any, new: NewHolder) -> bytes | None:
    """The loop's scope held by the operator's process: same name, same scope."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("scope"), list):
        return None
    return dump(
        {
            "loop_name": doc.get("loop_name"),
            "scope": doc["scope"],
            "pid": new.pid,
            "started_at": format_timestamp(new.at),
            MARK: new.mark(previous=doc.get("pid")),
        }
    )


def refresh(doc: Any, at: datetime) -> bytes | None:
    return None  # its liveness is the pid alone
