"""little-loops' `--queue` waiters: `<project>/.loops/.queue/<uuid4>.json`.

`ll-loop run --queue` (cli/loop/run.py) writes one when its scope is taken:
`{"id", "loopName", "enqueuedAt", "context": {"waitingFor", "scope", "pid"}}`
with `indent=2`, where `waitingFor`/`scope` are the *blocking* lock's loop name
and scope and `pid` is the waiter's own. It is removed once the lock is taken,
on timeout and at exit. `read_queue_entries` (cli/loop/queue.py) drops entries
whose pid is dead (`_process_alive`: ESRCH), and skips unreadable ones.

This module is also little-loops' NATIVE entry point: the non-JSON files of
`.loops/.running/` (the flock sentinel, the runners' pid files) are read by
`little_loops.read_runner_file`, before any JSON guess could call them invalid.
"""

from __future__ import annotations

from typing import Any

import orjson

from lockwatch.model.lock import Holder, Lock, Reason
from lockwatch.sources.files.decoders import little_loops
from lockwatch.sources.files.decoders.base import (
    Claims,
    Fields,
    LockFile,
    file_lock_for,
    schema_violation,
)
from lockwatch.sources.files.decoders.hooks import no_handover, no_refresh
from lockwatch.sources.files.policy import StalenessPolicy

FORMAT = "little-loops-queue"
# A waiter, not a holder: waiting while its pid lives, stale once it is gone,
# as read_queue_entries prunes it. A pid started after `enqueuedAt` is not the
# waiter either (the waiter writes the entry itself); `ll-loop queue remove`
# refuses to signal such a process for the same reason.
POLICY = StalenessPolicy(pid_liveness=True, waiter=True)
_BLOCKERS_SHOWN = 3


# Every lock this module reads: its format and (unless told otherwise) its policy.
_file_lock = file_lock_for(FORMAT, POLICY)


def _queued(path: str) -> bool:
    parts = path.rsplit("/", 3)
    return len(parts) == 4 and parts[1:3] == [".loops", ".queue"] and parts[3].endswith(".json")


# The kinds of entry `wants` can say yes to (the scanner asks no other).
WANTS_KINDS: tuple[str, ...] = ("file",)
# The only entries `read` may claim (base.Claims):
# the runner's `.acquire.lock` and `.pid`, queue entries `.json`.
CLAIMS = Claims(names=frozenset({little_loops.ACQUIRE_SENTINEL}), suffixes=(".pid", ".json"))


def wants(path: str, kind: str) -> bool:
    """Names (beyond `*.lock`/`*.pid`) this tool gives its locks."""
    return kind == "file" and _queued(path)


def read(file: LockFile) -> Lock | None:
    """The lock, if `file` is one of this tool's; else None."""
    runner = little_loops.read_runner_file(file)
    if runner is not None:
        return runner
    if file.kind != "file" or not _queued(file.path):
        return None
    name = file.name.removesuffix(".json")
    try:
        doc = orjson.loads(file.raw)
    except orjson.JSONDecodeError:
        # ll-loop skips such an entry: it queues nobody, but it is no lock either.
        return _invalid(file, name, "unparseable", "not JSON (ll-loop skips this entry)")
    if not isinstance(doc, dict):
        return _invalid(file, name, "schema_violation", "not a JSON object", doc)
    return _decode(doc, file, name)


def _decode(doc: dict[str, Any], file: LockFile, name: str) -> Lock:
    fields = Fields(doc)
    entry_id = fields.text("id")
    loop_name = fields.text("loopName")
    enqueued_at = fields.timestamp("enqueuedAt")
    raw_context = doc.get("context")
    context = Fields(raw_context if isinstance(raw_context, dict) else {})
    if not isinstance(raw_context, dict):
        fields.defects.append(schema_violation("field 'context' must be an object"))
    pid = context.pid(required=isinstance(raw_context, dict))
    waiting_for = context.text("waitingFor", required=False)
    scope = context.string_list("scope", required=False)
    defects = [*fields.defects, *(Reason(r.code, f"context: {r.message}") for r in context.defects)]
    notes: list[Reason] = []
    if waiting_for is not None:
        where = ""
        if scope:
            shown = ", ".join(scope[:_BLOCKERS_SHOWN])
            more = (
                f" and {len(scope) - _BLOCKERS_SHOWN} more" if len(scope) > _BLOCKERS_SHOWN else ""
            )
            where = f" (its scope {shown}{more})"
        notes.append(Reason("blocked_by", f"blocked by loop {waiting_for}{where}"))
    return _file_lock(
        file,
        name=loop_name or name,
        content=doc,
        holder=Holder(
            pid=pid,
            session=entry_id,
            operation=f"loop {loop_name}, queued behind loop {waiting_for}"
            if loop_name and waiting_for
            else f"loop {loop_name}, queued"
            if loop_name
            else None,
        ),
        acquired_at=enqueued_at,
        defects=defects,
        notes=notes,
    )


def _invalid(file: LockFile, name: str, code: str, message: str, content: Any = None) -> Lock:
    text = file.raw[:4096].decode("utf-8", "replace")
    return _file_lock(
        file,
        name=name,
        content=text if content is None else content,
        acquired_at=file.modified_at,
        defects=(Reason(code, message),),
    )


handover = no_handover  # a waiter holds nothing to hand over


refresh = no_refresh
